// Weighted MinHash kernels. Work is split into segments of at most kSegment
// nonzeros, one warp per segment, lanes over samples, so a 1M-nnz row among
// millions of short rows spreads over the whole GPU. A row that spans several
// segments merges through a 64-bit atomicMin on (orderable ln a, position);
// the position breaks ties toward the earlier nonzero, which keeps the CPU's
// strict-< "first minimum in CSR order" rule exact, and a finalize kernel
// recomputes t* from the winning position.
#include <cuda_fp16.h>
#include <curand_kernel.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "../native/gpu.h"
#include "../native/minhash.h"
#include "../native/parallel.h"
#include "gpu.cuh"

namespace cusim {
namespace minhash {
namespace {

constexpr uint32_t kSegment = 1024;  // nonzeros per warp task
constexpr int kPerLane = 4;          // samples a lane holds per pass: 128 in one pass
constexpr uint32_t kNone = 0xFFFFFFFFu;
constexpr unsigned kThreads = 256;
// Per slot: 128 MB of indices + values and at most 128 MB of signatures. Small
// enough that filling and draining the pipeline (the first batch's upload, the
// last one's download) stays a few ms, which is what bounds 2-GPU scaling once
// the host copies are gone.
constexpr uint64_t kBatchNnz = 16ull << 20;
constexpr uint64_t kBatchOutBytes = 128ull << 20;
constexpr uint64_t kBatchRows = 1ull << 18;

struct Seg {
  uint32_t row;    // batch-local row
  uint32_t begin;  // batch-local nnz positions
  uint32_t end;
  uint32_t split;  // scratch slot of a row spanning several segments, else kNone
};

// Device tables are one 16-byte record per (column, sample), [dim][samples]:
// a survivor of the pruned scan reads r, ln c and beta in one sector instead
// of three.
__global__ void GenParamsKernel(uint64_t seed, uint32_t dim, uint32_t samples, float4* __restrict__ rec) {
  const uint64_t d = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= dim) return;
  curandStatePhilox4_32_10_t st;
  curand_init(seed, d, 0, &st);
  const uint64_t off = d * samples;
  for (uint32_t s = 0; s < samples; ++s) {
    const float u1 = curand_uniform(&st), u2 = curand_uniform(&st), u3 = curand_uniform(&st), u4 = curand_uniform(&st),
                u5 = curand_uniform(&st);
    // Products of two floats are exact in double, so only log's last bit can differ from the CPU.
    rec[off + s] = make_float4(float(-log(double(u1) * double(u2))), float(log(-log(double(u3) * double(u4)))), u5, 0.0f);
  }
}

// Injected tables ([dim][samples] each) into records, and back for deviceParameters().
__global__ void PackKernel(const float* __restrict__ rs, const float* __restrict__ lnCs,
                           const float* __restrict__ betas, uint64_t n, float4* __restrict__ rec) {
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x)
    rec[i] = make_float4(rs[i], lnCs[i], betas[i], 0.0f);
}
__global__ void UnpackKernel(const float4* __restrict__ rec, uint64_t n, float* __restrict__ rs,
                             float* __restrict__ lnCs, float* __restrict__ betas) {
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    const float4 p = rec[i];
    rs[i] = p.x, lnCs[i] = p.y, betas[i] = p.z;
  }
}

__device__ __forceinline__ float LogW(float w) { return float(log(double(w))); }

// One nonzero of a chunk: its column and ln w, or ok = false for a skipped
// weight (zero, negative, NaN). The caller's CSR is checked here, where it is
// read anyway: a column >= dim or a +inf weight raises *bad (the host then
// names the element) and is skipped, so no table is read out of bounds.
__device__ __forceinline__ bool LoadNonzero(const uint32_t* __restrict__ indices, const float* __restrict__ values,
                                            uint64_t i, uint32_t dim, unsigned* bad, uint32_t& d, float& lw) {
  d = __ldg(indices + i);
  const float wt = values ? __ldg(values + i) : 1.0f;
  if (d >= dim || wt == __int_as_float(0x7f800000)) {
    atomicOr(bad, 1u);
    d = 0;
    return false;
  }
  if (!(wt > 0.0f)) return false;
  lw = LogW(wt);  // once per nonzero, then broadcast
  return true;
}

// The CPU's float expression, op by op, without contraction.
__device__ __forceinline__ float SampleT(float lw, float r, float b) { return floorf(__fadd_rn(__fdiv_rn(lw, r), b)); }
__device__ __forceinline__ float SampleLnA(float t, float r, float c, float b) {
  return __fsub_rn(__fsub_rn(c, __fmul_rn(__fsub_rn(t, b), r)), r);
}

// Float bits mapped so unsigned order is float order; -0 folds onto +0 since
// the CPU's strict < treats them as equal.
__device__ __forceinline__ uint32_t OrderKey(float x) {
  if (x == 0.0f) x = 0.0f;
  const uint32_t b = __float_as_uint(x);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// Writes one (row, sample) entry from the winning batch-local position, or
// the sentinel: k* is the winner's column and t* is recomputed with the same
// expressions the scan used, so it is bit-identical to keeping it.
__device__ __forceinline__ void EmitWinner(uint32_t* __restrict__ out, uint64_t o, uint32_t pos,
                                           const uint32_t* __restrict__ indices, const float* __restrict__ values,
                                           const float4* __restrict__ rec, uint32_t samples, uint32_t s) {
  if (pos == kNone) {
    out[o] = kSentinel, out[o + 1] = kSentinel;
    return;
  }
  const uint32_t d = __ldg(indices + pos);
  const float lw = LogW(values ? __ldg(values + pos) : 1.0f);
  const float4 p = __ldg(rec + uint64_t(d) * samples + s);
  out[o] = d;
  out[o + 1] = uint32_t(__float2int_rz(SampleT(lw, p.x, p.z)));
}

// Reference scan (CUSIM_MINHASH_KERNEL=segment): every element-sample is
// computed exactly, in CSR order; lanes stride over samples, any count.
__global__ void __launch_bounds__(kThreads) HashKernel(const Seg* __restrict__ segs, uint64_t nseg,
                                                       const uint32_t* __restrict__ indices,
                                                       const float* __restrict__ values, const float4* __restrict__ rec,
                                                       uint32_t dim, uint32_t samples, uint32_t* __restrict__ out,
                                                       unsigned long long* __restrict__ scratch, unsigned* bad) {
  const uint64_t w = (uint64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (w >= nseg) return;  // uniform per warp
  const unsigned lane = threadIdx.x & 31;
  const Seg sg = segs[w];
  for (uint32_t s0 = 0; s0 < samples; s0 += 32 * kPerLane) {
    float bestA[kPerLane];
    uint32_t bestP[kPerLane];
#pragma unroll
    for (int q = 0; q < kPerLane; ++q) bestA[q] = __int_as_float(0x7f800000), bestP[q] = kNone;
    for (uint32_t base = sg.begin; base < sg.end; base += 32) {
      const uint32_t n = min(32u, sg.end - base);
      uint32_t myD = 0;
      float myLw = 0.0f;
      bool ok = false;
      if (lane < n) ok = LoadNonzero(indices, values, base + lane, dim, bad, myD, myLw);
      unsigned mask = __ballot_sync(0xffffffffu, ok);
      while (mask) {  // ascending bits: CSR order
        const int j = __ffs(mask) - 1;
        mask &= mask - 1;
        const uint32_t d = __shfl_sync(0xffffffffu, myD, j);
        const float lw = __shfl_sync(0xffffffffu, myLw, j);
#pragma unroll
        for (int q = 0; q < kPerLane; ++q) {
          const uint32_t s = s0 + q * 32 + lane;
          if (s < samples) {
            const float4 p = __ldg(rec + uint64_t(d) * samples + s);
            const float lna = SampleLnA(SampleT(lw, p.x, p.z), p.x, p.y, p.z);
            if (lna < bestA[q]) bestA[q] = lna, bestP[q] = base + j;
          }
        }
      }
    }
#pragma unroll
    for (int q = 0; q < kPerLane; ++q) {
      const uint32_t s = s0 + q * 32 + lane;
      if (s >= samples) continue;
      if (sg.split == kNone)
        EmitWinner(out, (uint64_t(sg.row) * samples + s) * 2, bestP[q], indices, values, rec, samples, s);
      else if (bestP[q] != kNone)
        atomicMin(scratch + uint64_t(sg.split) * samples + s,
                  (static_cast<unsigned long long>(OrderKey(bestA[q])) << 32) | bestP[q]);
    }
  }
}

__global__ void FinalizeKernel(const uint32_t* __restrict__ splitRows, uint64_t nsplit,
                               const unsigned long long* __restrict__ scratch, const uint32_t* __restrict__ indices,
                               const float* __restrict__ values, const float4* __restrict__ rec, uint32_t samples,
                               uint32_t* __restrict__ out) {
  const uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= nsplit * samples) return;
  const uint64_t slot = i / samples;
  const uint32_t s = uint32_t(i % samples);
  const unsigned long long key = scratch[i];
  EmitWinner(out, (uint64_t(splitRows[slot]) * samples + s) * 2, key == ~0ull ? kNone : uint32_t(key), indices,
             values, rec, samples, s);
}

// ---- Bound-pruned kernel ---------------------------------------------------
// For any nonzero, t = floor(ln w / r + beta) lies in (x - 1, x] with
// x = ln w / r + beta, so ln a = ln c - (t - beta) r - r >= ln c - r - ln w.
// A per-(column, sample) table bound = ln c - r, rounded down with a margin
// that covers every float rounding of the exact expression (see
// GenBoundKernel), lets a lane reject an element-sample with one subtraction
// and one compare when bound - ln w >= its current minimum: such an element
// cannot pass the strict <. On GitHub-shaped rows ~5% of element-samples
// survive, so the scan reads 2 bytes per element-sample instead of 12 and
// does a fraction of the divisions. Survivors go to a per-warp queue and are
// computed exactly 32 at a time, one per lane, merging into per-sample
// minima kept as (orderable ln a, position) keys in shared memory; a
// lexicographic minimum over those keys is exactly the sequential "first
// strict minimum in CSR order", whatever order the survivors are computed in.
constexpr unsigned kPruneThreads = 256;
constexpr uint32_t kPrunePass = 32 * kPerLane;        // samples per pass
// Nonzeros checked per step. Measured on an H100 (1M GitHub-shaped rows, 128
// samples): 2 -> 52 ms, 4 -> 60 ms, 8 -> 48 ms; more in flight per warp and one
// survivor append per 8 nonzeros instead of per 2.
constexpr int kPruneGroup = 8;

template <int kGroup>  // nonzeros checked per step
struct PruneWarp {
  static constexpr uint32_t kQueueCap = 31 + kGroup * kPrunePass;  // leftover below a round + one step's worth
  unsigned long long best[kPrunePass];
  uint32_t d[32];
  float lw[32];
  uint16_t queue[kQueueCap];  // (chunk lane j << 7) | pass-local sample
};

// Bound for (d, s): ln c - r minus 4e-6 (|ln c| + r + 1), rounded toward -inf
// and stored as a half: the scan streams 2 bytes per element-sample, and the
// half's 11-bit precision loosens the bound by ~1e-3, which lets through only
// a few more survivors.
// The exact float chain loses at most ~1e-6 of those magnitudes (and of
// |ln w|, which the scan pads the same way), so bound - ln w never exceeds the
// ln a the chain computes. Entries where that analysis does not hold (r not in
// [1e-30, 1e30], ln c not finite, beta outside [0, 1], all possible only in
// injected tables) get -inf: always computed exactly. Padding
// samples (s >= samples) get +inf: never computed.
__global__ void GenBoundKernel(const float4* __restrict__ rec, uint32_t dim, uint32_t samples, uint32_t stride,
                               __half* __restrict__ bound) {
  const uint64_t n = uint64_t(dim) * stride;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint64_t d = i / stride;
    const uint32_t s = uint32_t(i % stride);
    if (s >= samples) {
      bound[i] = __ushort_as_half(0x7C00);  // +inf
      continue;
    }
    const float4 p = rec[d * samples + s];
    const double r = p.x, c = p.y, b = p.z;
    const bool safe = r >= 1e-30 && r <= 1e30 && c > -1e300 && c < 1e300 && b >= 0.0 && b <= 1.0;
    // Rounded down twice (double -> float -> half), so still a lower bound;
    // below -65504 it becomes -inf (always exact), above it 65504.
    bound[i] = safe ? __float2half_rd(__double2float_rd(c - r - 4e-6 * (fabs(c) + r + 1.0))) : __ushort_as_half(0xFC00);
  }
}

__device__ __forceinline__ float KeyValue(unsigned long long key) {
  const uint32_t k = uint32_t(key >> 32);
  if (k == 0xFFFFFFFFu) return __int_as_float(0x7f800000);  // no winner yet
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7FFFFFFFu) : ~k);
}

// The survivors queue[from, from + cnt), one per lane: exact ln a, merged
// into the warp's shared minima.
template <class Warp>
__device__ __forceinline__ void ExactRound(Warp& W, uint32_t from, uint32_t cnt, uint32_t base, uint32_t s0,
                                           uint32_t samples, const float4* __restrict__ rec, unsigned lane) {
  if (lane < cnt) {
    const uint32_t item = W.queue[from + lane];
    const uint32_t j = item >> 7, sl = item & 127;
    const uint64_t off = uint64_t(W.d[j]) * samples + s0 + sl;
    const float4 p = __ldg(rec + off);
    const float lna = SampleLnA(SampleT(W.lw[j], p.x, p.z), p.x, p.y, p.z);
    // NaN and +inf never pass the scan's strict < against +inf: keep them out.
    if (lna < __int_as_float(0x7f800000))
      atomicMin(&W.best[sl], (static_cast<unsigned long long>(OrderKey(lna)) << 32) | (base + j));
  }
  __syncwarp();
}

template <int kGroup>
__global__ void __launch_bounds__(kPruneThreads)
    PruneKernel(const Seg* __restrict__ segs, uint64_t nseg, const uint32_t* __restrict__ indices,
                const float* __restrict__ values, const __half* __restrict__ bound, uint32_t stride,
                const float4* __restrict__ rec, uint32_t dim, uint32_t samples, uint32_t* __restrict__ out,
                unsigned long long* __restrict__ scratch, unsigned* bad) {
  static_assert(kGroup * kPerLane <= 32, "survivor bits of one step must fit a 32-bit mask");
  __shared__ PruneWarp<kGroup> warps[kPruneThreads / 32];
  const uint64_t w = (uint64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (w >= nseg) return;  // uniform per warp; the kernel has no block barrier
  PruneWarp<kGroup>& W = warps[threadIdx.x >> 5];
  const unsigned lane = threadIdx.x & 31;
  const Seg sg = segs[w];
  const float kInf = __int_as_float(0x7f800000);
  for (uint32_t s0 = 0; s0 < samples; s0 += kPrunePass) {
    const uint32_t sl0 = lane * kPerLane;  // this lane's first pass-local sample
    const bool has = s0 + sl0 < samples;   // stride is a multiple of 4: the 8-byte load stays in its row
    float bestF[kPerLane];
#pragma unroll
    for (int q = 0; q < kPerLane; ++q) W.best[sl0 + q] = ~0ull, bestF[q] = kInf;
    for (uint32_t base = sg.begin; base < sg.end; base += 32) {
      const uint32_t n = min(32u, sg.end - base);
      uint32_t myD = 0;
      float myLw = 0.0f;
      bool ok = false;
      if (lane < n) ok = LoadNonzero(indices, values, base + lane, dim, bad, myD, myLw);
      __syncwarp();  // the previous chunk's rounds are done with W.d / W.lw
      W.d[lane] = myD, W.lw[lane] = myLw;
      const float myLwUp = myLw + 4e-6f * fabsf(myLw);
      unsigned mask = __ballot_sync(0xffffffffu, ok);
      uint32_t qn = 0;
      while (mask) {
        // Up to kGroup nonzeros per step, their bound loads in flight together;
        // slot u with no nonzero left (index 32) keeps +inf bounds: no survivors.
        int jj[kGroup];
        float lwu[kGroup];
        uint2 gr[kGroup];
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {
          jj[u] = mask ? __ffs(mask) - 1 : 32;
          mask &= mask - 1;
          const uint32_t d = __shfl_sync(0xffffffffu, myD, jj[u] & 31);
          lwu[u] = __shfl_sync(0xffffffffu, myLwUp, jj[u] & 31);
          gr[u] = make_uint2(0x7C007C00u, 0x7C007C00u);  // four +inf halves
          if (jj[u] < 32 && has) gr[u] = __ldg(reinterpret_cast<const uint2*>(bound + uint64_t(d) * stride + s0 + sl0));
        }
        unsigned pm = 0;  // bit 4u + q: sample sl0 + q survives for the group's u-th nonzero
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {
          const float2 g01 = __half22float2(*reinterpret_cast<const __half2*>(&gr[u].x));
          const float2 g23 = __half22float2(*reinterpret_cast<const __half2*>(&gr[u].y));
          pm |= ((__fsub_rn(g01.x, lwu[u]) < bestF[0] ? 1u : 0u) | (__fsub_rn(g01.y, lwu[u]) < bestF[1] ? 2u : 0u) |
                 (__fsub_rn(g23.x, lwu[u]) < bestF[2] ? 4u : 0u) | (__fsub_rn(g23.y, lwu[u]) < bestF[3] ? 8u : 0u))
                << (4 * u);
        }
        if (!__any_sync(0xffffffffu, pm != 0)) continue;
        // Append survivors: a warp scan of per-lane counts gives each lane its slots.
        const uint32_t c = __popc(pm);
        uint32_t incl = c;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
          const uint32_t v = __shfl_up_sync(0xffffffffu, incl, o);
          if (lane >= unsigned(o)) incl += v;
        }
        uint32_t at = qn + incl - c;
        for (unsigned b = pm; b; b &= b - 1) {
          const int k = __ffs(b) - 1, u = k >> 2;
          int j = jj[0];
#pragma unroll
          for (int v = 1; v < kGroup; ++v) j = u == v ? jj[v] : j;
          W.queue[at++] = uint16_t((uint32_t(j) << 7) | (sl0 + (k & 3)));
        }
        qn += __shfl_sync(0xffffffffu, incl, 31);
        __syncwarp();
        if (qn < 32) continue;
        do {
          qn -= 32;
          ExactRound(W, qn, 32, base, s0, samples, rec, lane);
        } while (qn >= 32);
#pragma unroll
        for (int q = 0; q < kPerLane; ++q) bestF[q] = KeyValue(W.best[sl0 + q]);
      }
      if (qn) {
        ExactRound(W, 0, qn, base, s0, samples, rec, lane);
#pragma unroll
        for (int q = 0; q < kPerLane; ++q) bestF[q] = KeyValue(W.best[sl0 + q]);
      }
    }
    __syncwarp();
#pragma unroll
    for (int q = 0; q < kPerLane; ++q) {
      const uint32_t s = s0 + sl0 + q;
      if (s >= samples) continue;
      const unsigned long long key = W.best[sl0 + q];
      if (sg.split == kNone)
        EmitWinner(out, (uint64_t(sg.row) * samples + s) * 2, key == ~0ull ? kNone : uint32_t(key), indices, values,
                   rec, samples, s);
      else if (key != ~0ull)
        atomicMin(scratch + uint64_t(sg.split) * samples + s, key);
    }
    __syncwarp();  // the next pass re-initializes W.best
  }
}

// One in-flight batch: its own stream, pinned staging and device buffers.
struct Slot {
  gpu::Stream stream;
  gpu::Event e0, e1, e2, e3;
  gpu::PinnedBuffer<uint32_t> hIdx, hSplit, hOut;
  gpu::PinnedBuffer<float> hVal;
  gpu::PinnedBuffer<Seg> hSeg;
  gpu::DeviceBuffer<uint32_t> dIdx, dSplit, dOut;
  gpu::DeviceBuffer<float> dVal;
  gpu::DeviceBuffer<Seg> dSeg;
  gpu::DeviceBuffer<unsigned long long> dScratch;
  gpu::DeviceBuffer<unsigned> dBad;  // set by a kernel that met a bad column or weight
  gpu::PinnedBuffer<unsigned> hBad;
};

// Three slots per device, so the three engines of a GPU can all be busy at
// once: one batch uploading, one in its kernels, one downloading.
constexpr int kSlots = 3;

struct Device {
  int id = 0;
  gpu::DeviceBuffer<float4> rec;   // [dim][samples] (r, ln c, beta, 0)
  gpu::DeviceBuffer<__half> bound;  // [dim][boundStride], see GenBoundKernel
  uint32_t boundStride = 0;
  std::unique_ptr<Slot> slots[kSlots];
  std::mutex m;
  std::condition_variable cv;
  bool busy[kSlots] = {};

  int Acquire() {
    std::unique_lock<std::mutex> lock(m);
    for (;;) {
      for (int i = 0; i < kSlots; ++i)
        if (!busy[i]) return busy[i] = true, i;
      cv.wait(lock);
    }
  }
  void Release(int i) {
    {
      std::lock_guard<std::mutex> lock(m);
      busy[i] = false;
    }
    cv.notify_one();
  }
};

struct BadInput {};  // thrown by a batch whose kernel met a bad column or weight

struct Batch {
  uint64_t r0, r1;
  uint64_t nnz, nseg, nsplit;
};

// Segments of one row: an empty row still gets one (empty) segment so the
// kernel writes its sentinel.
inline uint64_t SegmentsOf(uint64_t len) { return std::max<uint64_t>(1, (len + kSegment - 1) / kSegment); }

// Greedy cut of [a, b) so each batch fits a slot's buffers (a lone huge row is its own batch).
std::vector<Batch> PlanBatches(const CsrView& m, uint64_t a, uint64_t b, uint32_t samples) {
  const uint64_t maxRows = std::max<uint64_t>(1, std::min(kBatchRows, kBatchOutBytes / (uint64_t(samples) * 8)));
  std::vector<Batch> out;
  uint64_t r = a;
  while (r < b) {
    uint64_t e = r + 1;
    while (e < b && e - r < maxRows && uint64_t(m.indptr[e + 1]) - m.indptr[r] <= kBatchNnz) ++e;
    Batch bt{r, e, uint64_t(m.indptr[e]) - m.indptr[r], 0, 0};
    for (uint64_t i = r; i < e; ++i) {
      const uint64_t k = SegmentsOf(uint64_t(m.indptr[i + 1]) - m.indptr[i]);
      bt.nseg += k;
      bt.nsplit += k > 1;
    }
    out.push_back(bt);
    r = e;
  }
  return out;
}

// The largest batch of a call: every slot is sized for it once, so no batch
// reallocates (cudaFree would stall the other slot's work).
struct Need {
  uint64_t nnz = 0, rows = 0, nseg = 0, nsplit = 0;
  void add(const Batch& b) {
    nnz = std::max(nnz, b.nnz), rows = std::max(rows, b.r1 - b.r0);
    nseg = std::max(nseg, b.nseg), nsplit = std::max(nsplit, b.nsplit);
  }
};

enum class Kernel { kSegment, kPrune };

// CUSIM_MINHASH_KERNEL=segment|prune|auto (unset or anything else = auto =
// prune). Both give identical signatures; the knob exists to time them against
// each other and to test one against the other (bench "kernel variants",
// docs/minhash-perf.md).
Kernel KernelFromEnv() {
  const char* v = std::getenv("CUSIM_MINHASH_KERNEL");
  return v && std::strcmp(v, "segment") == 0 ? Kernel::kSegment : Kernel::kPrune;
}

// Which of a call's host buffers are already page-locked (pinnedArray): the
// copies then DMA straight from and into them, with no staging copy.
struct Direct {
  bool indices = false, values = false, out = false;
};

void RunBatch(Device& dev, Slot& sl, const CsrView& m, uint64_t rowStart, const Batch& bt, const Need& need,
              uint32_t samples, Kernel kernel, const Direct& direct, uint32_t* out, Timing* timing) {
  const uint64_t rows = bt.r1 - bt.r0, nnz = bt.nnz, nseg = bt.nseg, nsplit = bt.nsplit;
  const uint32_t nz0 = m.indptr[bt.r0];
  if (!direct.indices) sl.hIdx.reserve(need.nnz, "MinHash staged indices");
  if (m.values && !direct.values) sl.hVal.reserve(need.nnz, "MinHash staged values");
  sl.hSeg.reserve(need.nseg, "MinHash segments");
  sl.hSplit.reserve(std::max<uint64_t>(need.nsplit, 1), "MinHash split rows");
  if (!direct.out) sl.hOut.reserve(need.rows * samples * 2, "MinHash staged signatures");
  sl.dBad.reserve(1, "MinHash input check flag");
  sl.hBad.reserve(1, "MinHash input check flag");
  sl.dIdx.reserve(need.nnz, "MinHash indices");
  if (m.values) sl.dVal.reserve(need.nnz, "MinHash values");
  sl.dSeg.reserve(need.nseg, "MinHash segments");
  sl.dSplit.reserve(std::max<uint64_t>(need.nsplit, 1), "MinHash split rows");
  sl.dScratch.reserve(std::max<uint64_t>(need.nsplit * samples, 1), "MinHash split-row minima");
  sl.dOut.reserve(need.rows * samples * 2, "MinHash signatures");

  const auto t0 = std::chrono::steady_clock::now();
  const uint32_t* srcIdx = m.indices + nz0;
  const float* srcVal = m.values ? m.values + nz0 : nullptr;
  if (!direct.indices) gpu::ParallelCopy(sl.hIdx.data(), srcIdx, nnz * 4), srcIdx = sl.hIdx.data();
  if (srcVal && !direct.values) gpu::ParallelCopy(sl.hVal.data(), srcVal, nnz * 4), srcVal = sl.hVal.data();
  Seg* seg = sl.hSeg.data();
  uint32_t* split = sl.hSplit.data();
  uint64_t si = 0, sp = 0;
  for (uint64_t r = bt.r0; r < bt.r1; ++r) {
    const uint32_t b = m.indptr[r] - nz0, e = m.indptr[r + 1] - nz0;
    const uint32_t local = uint32_t(r - bt.r0);
    if (e - b <= kSegment) {
      seg[si++] = {local, b, e, kNone};
      continue;
    }
    const uint32_t slot = uint32_t(sp);
    split[sp++] = local;
    for (uint32_t x = b; x < e; x += std::min(kSegment, e - x)) seg[si++] = {local, x, x + std::min(kSegment, e - x), slot};
  }

  const auto t1 = std::chrono::steady_clock::now();
  cudaStream_t st = sl.stream;
  sl.e0.record(st);
  if (nnz) CUSIM_CUDA_CHECK(cudaMemcpyAsync(sl.dIdx.data(), srcIdx, nnz * 4, cudaMemcpyHostToDevice, st));
  if (nnz && srcVal) CUSIM_CUDA_CHECK(cudaMemcpyAsync(sl.dVal.data(), srcVal, nnz * 4, cudaMemcpyHostToDevice, st));
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(sl.dSeg.data(), seg, nseg * sizeof(Seg), cudaMemcpyHostToDevice, st));
  if (nsplit) CUSIM_CUDA_CHECK(cudaMemcpyAsync(sl.dSplit.data(), split, nsplit * 4, cudaMemcpyHostToDevice, st));
  sl.e1.record(st);
  if (nsplit) CUSIM_CUDA_CHECK(cudaMemsetAsync(sl.dScratch.data(), 0xFF, nsplit * samples * 8, st));
  CUSIM_CUDA_CHECK(cudaMemsetAsync(sl.dBad.data(), 0, sizeof(unsigned), st));
  const float* vals = m.values ? sl.dVal.data() : nullptr;
  if (kernel != Kernel::kSegment) {
    const unsigned grid = gpu::GridFor(nseg * 32, kPruneThreads, 0x7fffffffu);
    PruneKernel<kPruneGroup><<<grid, kPruneThreads, 0, st>>>(sl.dSeg.data(), nseg, sl.dIdx.data(), vals, dev.bound.data(),
                                                dev.boundStride, dev.rec.data(), m.cols, samples, sl.dOut.data(),
                                                sl.dScratch.data(), sl.dBad.data());
  } else {
    const unsigned grid = gpu::GridFor(nseg * 32, kThreads, 0x7fffffffu);
    HashKernel<<<grid, kThreads, 0, st>>>(sl.dSeg.data(), nseg, sl.dIdx.data(), vals, dev.rec.data(), m.cols,
                                          samples, sl.dOut.data(), sl.dScratch.data(), sl.dBad.data());
  }
  CUSIM_LAUNCH_CHECK();
  if (nsplit) {
    FinalizeKernel<<<gpu::GridFor(nsplit * samples, kThreads, 0x7fffffffu), kThreads, 0, st>>>(
        sl.dSplit.data(), nsplit, sl.dScratch.data(), sl.dIdx.data(), vals, dev.rec.data(), samples, sl.dOut.data());
    CUSIM_LAUNCH_CHECK();
  }
  sl.e2.record(st);
  const uint64_t outWords = rows * samples * 2;
  uint32_t* dst = out + (bt.r0 - rowStart) * samples * 2;
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(direct.out ? dst : sl.hOut.data(), sl.dOut.data(), outWords * 4,
                                   cudaMemcpyDeviceToHost, st));
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(sl.hBad.data(), sl.dBad.data(), sizeof(unsigned), cudaMemcpyDeviceToHost, st));
  sl.e3.record(st);
  sl.stream.sync();
  if (*sl.hBad.data()) throw BadInput{};
  const auto t2 = std::chrono::steady_clock::now();
  if (!direct.out) gpu::ParallelCopy(dst, sl.hOut.data(), outWords * 4);
  const auto t3 = std::chrono::steady_clock::now();
  using Ms = std::chrono::duration<double, std::milli>;
  timing->stageInMs += Ms(t1 - t0).count();
  timing->waitMs += Ms(t2 - t1).count();
  timing->stageOutMs += Ms(t3 - t2).count();
  timing->kernelMs += gpu::ElapsedMs(sl.e1, sl.e2);
  timing->transferMs += gpu::ElapsedMs(sl.e0, sl.e1) + gpu::ElapsedMs(sl.e2, sl.e3);
}

}  // namespace

struct CudaEngine {
  uint32_t dim = 0, samples = 0;
  std::vector<std::unique_ptr<Device>> devs;
  ~CudaEngine() {
    for (auto& d : devs) {
      gpu::DeviceGuard g(d->id);
      d.reset();
    }
  }
};

std::shared_ptr<CudaEngine> CreateCudaEngine(const std::vector<int>& devices, uint64_t seed, uint32_t dim,
                                             uint32_t samples, const float* rs, const float* lnCs,
                                             const float* betas) {
  auto e = std::make_shared<CudaEngine>();
  e->dim = dim, e->samples = samples;
  const uint64_t n = uint64_t(dim) * samples;
  for (int id : devices) {
    gpu::DeviceGuard g(id);
    auto d = std::make_unique<Device>();
    d->id = id;
    uint64_t freeB = 0, totalB = 0;
    DeviceMemory(id, &freeB, &totalB);
    d->boundStride = (samples + 3) & ~3u;
    const uint64_t nb = uint64_t(dim) * d->boundStride;
    // Injected tables pass through three float staging arrays on the device.
    const uint64_t need = n * sizeof(float4) + nb * sizeof(__half) + (rs ? 3 * n * sizeof(float) : 0);
    if (need > freeB)
      ThrowOutOfMemory("weighted MinHash parameter tables (a 16-byte record and a 2-byte pruning bound per column "
                       "and sample, dim x samples = " + std::to_string(dim) + " x " + std::to_string(samples) +
                           ") on GPU " + std::to_string(id),
                       need, freeB);
    d->rec.reset(n, "MinHash parameter records");
    d->bound.reset(nb, "MinHash pruning bound table");
    const unsigned grid = gpu::GridFor(n, kThreads, 1u << 20);
    if (rs) {
      gpu::DeviceBuffer<float> tr, tc, tb;
      tr.reset(n, "MinHash injected rs"), tc.reset(n, "MinHash injected lnCs"), tb.reset(n, "MinHash injected betas");
      CUSIM_CUDA_CHECK(cudaMemcpy(tr.data(), rs, n * 4, cudaMemcpyHostToDevice));
      CUSIM_CUDA_CHECK(cudaMemcpy(tc.data(), lnCs, n * 4, cudaMemcpyHostToDevice));
      CUSIM_CUDA_CHECK(cudaMemcpy(tb.data(), betas, n * 4, cudaMemcpyHostToDevice));
      PackKernel<<<grid, kThreads>>>(tr.data(), tc.data(), tb.data(), n, d->rec.data());
      CUSIM_LAUNCH_CHECK();
      CUSIM_CUDA_CHECK(cudaDeviceSynchronize());
    } else {
      GenParamsKernel<<<gpu::GridFor(dim, kThreads, 0x7fffffffu), kThreads>>>(seed, dim, samples, d->rec.data());
      CUSIM_LAUNCH_CHECK();
    }
    GenBoundKernel<<<gpu::GridFor(nb, kThreads, 1u << 20), kThreads>>>(d->rec.data(), dim, samples, d->boundStride,
                                                                         d->bound.data());
    CUSIM_LAUNCH_CHECK();
    CUSIM_CUDA_CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < kSlots; ++i) d->slots[i] = std::make_unique<Slot>();
    e->devs.push_back(std::move(d));
  }
  return e;
}

void HashCuda(CudaEngine& e, const CsrView& m, uint64_t rowStart, uint64_t rowEnd, uint32_t* out, Timing* timing,
              const CancelToken& cancel) {
  const size_t nd = e.devs.size();
  // Rows cut by nnz so every device gets about the same work.
  const std::vector<uint64_t> cut = SplitRowsByNnz(m, rowStart, rowEnd, nd);
  // Per device, kSlots host threads pull batches, so one batch's staging and
  // copies overlap another's kernels. CUSIM_MINHASH_STREAMS=1 keeps one batch
  // in flight per device: slower, but then each kernel has the GPU to itself
  // and its CUDA-event time is the kernel's alone (the bench's kernel rate).
  const char* env = std::getenv("CUSIM_MINHASH_STREAMS");
  const int perDevice = env && std::strcmp(env, "1") == 0 ? 1 : kSlots;
  std::vector<std::vector<Batch>> plans(nd);
  std::vector<std::atomic<size_t>> next(nd);
  std::vector<Need> needs(nd);
  const Kernel kernel = KernelFromEnv();
  Direct direct;
  {
    gpu::DeviceGuard g(e.devs[0]->id);
    auto pinned = [](const void* p) {
      cudaPointerAttributes a;
      if (!p || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
      }
      return a.type == cudaMemoryTypeHost;
    };
    const uint64_t nz0 = m.indptr[rowStart];
    direct.indices = pinned(m.indices + nz0);
    direct.values = m.values && pinned(m.values + nz0);
    direct.out = pinned(out);
  }
  for (size_t k = 0; k < nd; ++k) {
    plans[k] = PlanBatches(m, cut[k], cut[k + 1], e.samples);
    for (const Batch& b : plans[k]) needs[k].add(b);
    next[k] = 0;
  }
  std::vector<Timing> timings(nd * kSlots);
  std::vector<std::exception_ptr> errors(nd * kSlots);
  std::atomic<bool> failed{false}, badInput{false};
  std::vector<std::thread> threads;
  for (size_t k = 0; k < nd; ++k) {
    for (int t = 0; t < perDevice; ++t) {
      threads.emplace_back([&, k, t] {
        try {
          Device& dev = *e.devs[k];
          gpu::DeviceGuard g(dev.id);
          for (;;) {
            if (failed.load() || cancel.requested()) return;
            const size_t i = next[k].fetch_add(1);
            if (i >= plans[k].size()) return;
            const int s = dev.Acquire();
            try {
              RunBatch(dev, *dev.slots[s], m, rowStart, plans[k][i], needs[k], e.samples, kernel, direct, out,
                       &timings[k * kSlots + t]);
              cancel.advance(plans[k][i].r1 - plans[k][i].r0);
            } catch (...) {
              dev.Release(s);
              throw;
            }
            dev.Release(s);
          }
        } catch (const BadInput&) {
          badInput = true;
          failed = true;
        } catch (...) {
          errors[k * kSlots + t] = std::current_exception();
          failed = true;
        }
      });
    }
  }
  for (auto& th : threads) th.join();
  if (badInput) {
    // The full checks name the first bad element of the slice, whichever batch met one.
    CsrView part = m;
    part.rows = rowEnd - rowStart;
    part.indptr = m.indptr + rowStart;
    ValidateCsr(part, "matrix");
    RejectInfiniteWeights(part, "matrix");
    ThrowInvalid("matrix has an out-of-range column or an infinite weight");
  }
  for (auto& err : errors)
    if (err) std::rethrow_exception(err);
  cancel.check();
  for (const Timing& t : timings) {
    timing->kernelMs += t.kernelMs, timing->transferMs += t.transferMs;
    timing->stageInMs += t.stageInMs, timing->waitMs += t.waitMs, timing->stageOutMs += t.stageOutMs;
  }
}

void DeviceParamsCuda(CudaEngine& e, size_t slot, float* rs, float* lnCs, float* betas) {
  Device& d = *e.devs.at(slot);
  gpu::DeviceGuard g(d.id);
  const uint64_t n = uint64_t(e.dim) * e.samples;
  gpu::DeviceBuffer<float> tr, tc, tb;
  tr.reset(n, "MinHash rs copy"), tc.reset(n, "MinHash lnCs copy"), tb.reset(n, "MinHash betas copy");
  UnpackKernel<<<gpu::GridFor(n, kThreads, 1u << 20), kThreads>>>(d.rec.data(), n, tr.data(), tc.data(), tb.data());
  CUSIM_LAUNCH_CHECK();
  CUSIM_CUDA_CHECK(cudaMemcpy(rs, tr.data(), n * 4, cudaMemcpyDeviceToHost));
  CUSIM_CUDA_CHECK(cudaMemcpy(lnCs, tc.data(), n * 4, cudaMemcpyDeviceToHost));
  CUSIM_CUDA_CHECK(cudaMemcpy(betas, tb.data(), n * 4, cudaMemcpyDeviceToHost));
}

}  // namespace minhash
}  // namespace cusim
