// FlyHash (Dasgupta, Stevens & Navlakha 2017): a sparse binary random
// projection d -> m followed by winner-take-all keeping exactly k outputs.
// Backend-neutral interface; no napi.h, no CUDA headers.
//
// Projection contract (portable across CPU, GPU and machines):
//   output j draws its s distinct input indices from cusim::Philox(seed, j, 0)
//   with Floyd's sampling: for i = d - s .. d - 1, t = Bounded(i + 1); if t was
//   already drawn take i instead. Bounded(n) is Lemire's multiply-shift with
//   rejection: x = Next(), p = x * n (64-bit); while (uint32(p) < (2^32 - n) % n)
//   draw again; result p >> 32. It is unbiased. The s indices are then sorted
//   ascending. The table is built once on the host, so both backends read it.
//
// Activation a_j = sum of x[i] over output j's inputs, accumulated in float in
// ascending input order (bit-identical on CPU and GPU). Winners: every a_j
// greater than v plus the lowest-index a_j equal to v until there are k, where
// v is the k-th largest activation. Values are compared through OrderKey, so
// -0 equals +0.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common.h"

namespace cusim {
namespace flyhash {

struct Params {
  uint32_t d = 0;  // input dimension
  uint32_t m = 0;  // hash length (outputs)
  uint32_t s = 0;  // connections: inputs per output
  uint32_t k = 0;  // winners per row
  uint64_t seed = 1;
};

enum class Output { Bits, Indices };

struct Timing {
  double kernelMs = 0;    // CUDA events around each batch's kernels; overlapping batches counted once
  double transferMs = 0;  // CUDA events around host<->device copies
  std::string kernel;     // kernel family that ran ("a+b" when a call switched family part way)
};

// Order-preserving map from float to uint32 (larger float, larger key); -0
// maps like +0 so that "equal" means equal as floats. Inputs are finite.
inline uint32_t OrderKeyBits(uint32_t u) {
  if (u == 0x80000000u) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// m * s sorted input indices, row j = output j (see the contract above).
std::vector<uint32_t> MakeProjection(const Params& p);

// Throws a RangeError naming the first non-finite element of x (by position).
// Returns whether every element is an integer in [0, 255] (pixels, SIFT):
// then every activation is an exact integer below 2^24 when s * 255 < 2^24,
// so integer arithmetic reproduces the float contract bit for bit and the GPU
// can run it on int8 tensor cores.
bool CheckFinite(const DenseView& x, const char* name);
// The RangeError CheckFinite throws, for element `index` (of a matrix with
// `cols` columns) whose value is v; also raised by the GPU path's staging.
[[noreturn]] void ThrowNonFinite(float v, uint64_t index, uint64_t cols, const char* name);

// s * 255 < 2^24: sums of s bytes are exact in float.
inline bool ExactForBytes(const Params& p) { return uint64_t(p.s) * 255 < (uint64_t(1) << 24); }

// Words (Bits) or indices (Indices) per output row.
inline uint64_t OutStride(const Params& p, Output o) { return o == Output::Bits ? (uint64_t(p.m) + 31) / 32 : p.k; }

// The engine's `tuning` option (docs/engines/flyhash.md). Every choice
// computes the same codes; the fields past `kernel` exist for the tests and
// the bench, to reach each path on small inputs.
struct Tuning {
  // false keeps the GPU on the CUDA-core kernel families even where it has
  // tensor cores.
  bool tensorCores = true;
  // auto, mma, fused (fused / two-pass), tile-large. A forced
  // family that does not apply falls back to auto's other choices.
  std::string kernel = "auto";
  // Fused kernel: at most this many rows per block (4, 2 or 1).
  int maxRowsPerBlock = 4;
  // Tensor-core path: -1 picks; 1 only launch shapes that stage the
  // projection words in shared memory, 0 none.
  int stageProjection = -1;
  // Quantized tensor-core path: rows per block of the exact pass (1, 2, 4 or
  // 8; 0 none); -1 picks from the shape.
  int exactRows = -1;
  // Tensor-core path: at most this many rows per batch (0: no cap).
  uint64_t batchRows = 0;
  // Every row of the tile kernels goes through the per-row fallback.
  bool forceFallback = false;
};

// One backend hashing rows with a FlyHash object's projection `proj`
// (MakeProjection). X is x.data (floats), or xBytes when it is not null (x then
// gives only rows and cols); out holds x.rows * OutStride(p, o) words, every
// one written.
class Hasher {
 public:
  virtual ~Hasher() = default;
  virtual void Hash(const uint32_t* proj, const DenseView& x, const uint8_t* xBytes, Output o, uint32_t* out,
                    const Tuning& tuning, const CancelToken& cancel, Timing* timing) = 0;
};

// Float X must have passed CheckFinite; `tuning` and `timing` are the GPU's.
std::unique_ptr<Hasher> MakeCpuHasher(const Params& p);
// On GPU `device`, keeping what it uploads and its staging buffers between
// calls until it is destroyed; callers serialize its calls. Float X is
// checked here, as CheckFinite would, while it is staged for the GPU (one
// pass over it, not two).
std::unique_ptr<Hasher> MakeCudaHasher(const Params& p, int device);
// The kernel families a GPU with (or without) tensor-core kernels may run, in
// the order `auto` prefers them; shapes decide among them.
std::vector<std::string> GpuKernelFamilies(bool tensorCores);

}  // namespace flyhash
}  // namespace cusim
