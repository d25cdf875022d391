// FlyHash on one GPU. Fused path: a block takes R rows, keeps them in shared
// memory (interleaved so one vector load fetches all R values of an input),
// computes the R*m activations into shared memory as order-preserving keys,
// selects the exact k-th largest by a 4-pass radix select (8 bits a pass,
// shared-memory histograms with warp-aggregated atomics), and writes packed
// bits (one ballot per word) or sorted indices. Activations never reach device
// memory. When m keys do not fit in shared memory, a two-pass path writes the
// keys of a batch of rows to device memory and a second kernel selects from
// there with the same routine. Batches alternate between two streams with
// pinned staging, so copies of one batch overlap the kernels of the other.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../native/flyhash.h"
#include "gpu.cuh"

namespace cusim {
namespace flyhash {
namespace {

constexpr unsigned kFull = 0xffffffffu;

struct Scratch {
  uint32_t hist[256];
  uint32_t warpA[32];
  uint32_t warpB[32];
  uint32_t digit;
  uint32_t above;
};

__device__ __forceinline__ uint32_t DeviceKey(float a) {
  uint32_t u = __float_as_uint(a);
  if (u == 0x80000000u) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ uint32_t LanesBelow() {
  uint32_t lt;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(lt));
  return lt;
}

// Whole block: selects the k largest of keys[0, m) (ties to the lower index)
// and writes them to out as bits (ceil(m/32) words) or k ascending indices.
// Every thread of the block must call it; keys may be shared or global.
__device__ void SelectWrite(const uint32_t* keys, uint32_t m, uint32_t k, bool indices, uint32_t* __restrict__ out,
                            Scratch& sc) {
  const unsigned tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, B = blockDim.x, nw = B >> 5;
  uint32_t prefix = 0, kk = k, eqCount = 0;
  for (int pass = 0; pass < 4; ++pass) {
    const int shift = 24 - 8 * pass;
    const uint32_t hiMask = pass == 0 ? 0u : (kFull << (shift + 8));
    for (unsigned i = tid; i < 256; i += B) sc.hist[i] = 0;
    __syncthreads();
    for (uint32_t base = 0; base < m; base += B) {
      const uint32_t j = base + tid;
      const uint32_t key = j < m ? keys[j] : 0u;
      const bool in = j < m && (key & hiMask) == prefix;
      const uint32_t digit = (key >> shift) & 255u;
      // Activations cluster, so many lanes hit one bin: aggregate per warp.
      const unsigned peers = __match_any_sync(kFull, in ? digit : 0x100u);
      if (in && (peers & LanesBelow()) == 0) atomicAdd(&sc.hist[digit], uint32_t(__popc(peers)));
    }
    __syncthreads();
    if (warp == 0) {
      // Lane l covers bins 255-8l down to 248-8l; scan from the top.
      uint32_t c[8], sum = 0;
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        c[q] = sc.hist[255 - (lane * 8 + q)];
        sum += c[q];
      }
      uint32_t incl = sum;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const uint32_t n = __shfl_up_sync(kFull, incl, o);
        if (lane >= unsigned(o)) incl += n;
      }
      const uint32_t excl = incl - sum;
      if (excl < kk && kk <= incl) {
        uint32_t acc = excl;
        for (int q = 0; q < 8; ++q) {
          if (acc + c[q] >= kk) {
            sc.digit = 255 - (lane * 8 + q);
            sc.above = acc;
            break;
          }
          acc += c[q];
        }
      }
    }
    __syncthreads();
    const uint32_t dg = sc.digit;
    prefix |= dg << shift;
    kk -= sc.above;
    eqCount = sc.hist[dg];
    __syncthreads();
  }
  // prefix is the k-th largest key v; k - kk keys exceed it and the kk
  // lowest-index keys equal to it complete the winners.
  const uint32_t v = prefix;
  const bool allEqual = kk == eqCount;
  uint32_t eqBase = 0, winBase = 0;
  for (uint32_t base = 0; base < m; base += B) {
    const uint32_t j = base + tid;
    const bool valid = j < m;
    const uint32_t key = valid ? keys[j] : 0u;
    const bool eq = valid && key == v;
    bool win = valid && key > v;
    if (allEqual) {
      win = win || eq;
    } else {
      const unsigned eqMask = __ballot_sync(kFull, eq);
      if (lane == 0) sc.warpA[warp] = __popc(eqMask);
      __syncthreads();
      uint32_t before = eqBase, total = 0;
      for (unsigned w = 0; w < nw; ++w) {
        const uint32_t c = sc.warpA[w];
        if (w < warp) before += c;
        total += c;
      }
      before += __popc(eqMask & LanesBelow());
      win = win || (eq && before < kk);
      eqBase += total;
      __syncthreads();
    }
    const unsigned winMask = __ballot_sync(kFull, win);
    if (!indices) {
      if (lane == 0 && base + warp * 32 < m) out[(base + warp * 32) >> 5] = winMask;
    } else {
      if (lane == 0) sc.warpB[warp] = __popc(winMask);
      __syncthreads();
      uint32_t before = winBase, total = 0;
      for (unsigned w = 0; w < nw; ++w) {
        const uint32_t c = sc.warpB[w];
        if (w < warp) before += c;
        total += c;
      }
      before += __popc(winMask & LanesBelow());
      if (win) out[before] = j;
      winBase += total;
      __syncthreads();
    }
  }
}

// Loads rows [r0, r0 + R) into xs as [d][R] (zeros past the last row).
template <int R>
__device__ void LoadRows(const float* __restrict__ x, uint64_t rows, uint32_t d, uint64_t r0, float* xs) {
  for (uint32_t r = 0; r < R; ++r) {
    const bool ok = r0 + r < rows;
    const float* src = x + (r0 + r) * d;
    for (uint32_t i = threadIdx.x; i < d; i += blockDim.x) xs[uint64_t(i) * R + r] = ok ? src[i] : 0.0f;
  }
}

template <int R>
struct Vec;
template <> struct Vec<1> { using T = float; };
template <> struct Vec<2> { using T = float2; };
template <> struct Vec<4> { using T = float4; };

__device__ __forceinline__ void Add(float* acc, float v) { acc[0] += v; }
__device__ __forceinline__ void Add(float* acc, float2 v) { acc[0] += v.x; acc[1] += v.y; }
__device__ __forceinline__ void Add(float* acc, float4 v) { acc[0] += v.x; acc[1] += v.y; acc[2] += v.z; acc[3] += v.w; }

// Activations of output j for the R rows in xs; projT is [s][m] so a warp's
// index loads are coalesced. Inputs arrive in ascending order, as on the CPU.
template <int R, typename Idx>
__device__ __forceinline__ void Activate(const float* xs, const Idx* __restrict__ projT, uint32_t m, uint32_t s,
                                         uint32_t j, float* acc) {
  using V = typename Vec<R>::T;
  const V* xv = reinterpret_cast<const V*>(xs);
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  const Idx* col = projT + j;
  for (uint32_t t = 0; t < s; ++t, col += m) Add(acc, xv[*col]);
}

__host__ __device__ inline uint64_t Align16(uint64_t b) { return (b + 15) & ~uint64_t(15); }

template <int R, typename Idx>
__global__ void __launch_bounds__(1024) FusedKernel(const float* __restrict__ x, uint64_t rows, uint32_t d,
                                                    const Idx* __restrict__ projT, uint32_t m, uint32_t s, uint32_t k,
                                                    bool indices, uint32_t* __restrict__ out, uint64_t outStride) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ Scratch sc;
  float* xs = reinterpret_cast<float*>(smem);
  uint32_t* keys = reinterpret_cast<uint32_t*>(smem + Align16(uint64_t(d) * R * 4));
  for (uint64_t g = blockIdx.x; g * R < rows; g += gridDim.x) {
    const uint64_t r0 = g * R;
    __syncthreads();  // the previous group is done with xs and keys
    LoadRows<R>(x, rows, d, r0, xs);
    __syncthreads();
    for (uint32_t j = threadIdx.x; j < m; j += blockDim.x) {
      float acc[R];
      Activate<R, Idx>(xs, projT, m, s, j, acc);
#pragma unroll
      for (int r = 0; r < R; ++r) keys[uint64_t(r) * m + j] = DeviceKey(acc[r]);
    }
    __syncthreads();
    for (int r = 0; r < R; ++r)
      if (r0 + r < rows) SelectWrite(keys + uint64_t(r) * m, m, k, indices, out + (r0 + r) * outStride, sc);
  }
}

// Two-pass path, pass 1: blockIdx.y picks R rows, blockIdx.x a chunk of
// outputs. When even one row exceeds shared memory (Global), the row is read
// from device memory in place (R = 1, so the layouts agree).
template <int R, typename Idx, bool Global>
__global__ void __launch_bounds__(256) ActivateKernel(const float* __restrict__ x, uint64_t rows, uint32_t d,
                                                      const Idx* __restrict__ projT, uint32_t m, uint32_t s,
                                                      uint32_t* __restrict__ keysOut) {
  extern __shared__ __align__(16) unsigned char smem[];
  const uint64_t r0 = uint64_t(blockIdx.y) * R;
  const float* xs = x + r0 * d;
  if (!Global) {
    LoadRows<R>(x, rows, d, r0, reinterpret_cast<float*>(smem));
    xs = reinterpret_cast<const float*>(smem);
    __syncthreads();
  }
  const uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= m) return;
  float acc[R];
  Activate<R, Idx>(xs, projT, m, s, j, acc);
#pragma unroll
  for (int r = 0; r < R; ++r)
    if (r0 + r < rows) keysOut[(r0 + r) * m + j] = DeviceKey(acc[r]);
}

// Two-pass path, pass 2: one block per row selects from device memory.
__global__ void __launch_bounds__(1024) SelectKernel(const uint32_t* __restrict__ keys, uint64_t rows, uint32_t m,
                                                     uint32_t k, bool indices, uint32_t* __restrict__ out,
                                                     uint64_t outStride) {
  __shared__ Scratch sc;
  for (uint64_t r = blockIdx.x; r < rows; r += gridDim.x)
    SelectWrite(keys + r * m, m, k, indices, out + r * outStride, sc);
}

struct Plan {
  bool fused = true;
  int R = 1;
  unsigned threads = 1024;
  size_t smem = 0;   // dynamic shared memory per block
  unsigned grid = 1;
  uint64_t batch = 1;  // rows per batch
};

template <typename Idx>
void SetSmem(const Plan& pl) {
  if (pl.fused) {
    auto f = pl.R == 4 ? FusedKernel<4, Idx> : pl.R == 2 ? FusedKernel<2, Idx> : FusedKernel<1, Idx>;
    CUSIM_CUDA_CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, int(pl.smem)));
  } else if (pl.smem > 0) {
    auto f = pl.R == 4 ? ActivateKernel<4, Idx, false> : pl.R == 2 ? ActivateKernel<2, Idx, false> : ActivateKernel<1, Idx, false>;
    CUSIM_CUDA_CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, int(pl.smem)));
  }
}

template <typename Idx>
Plan MakePlan(const Params& p, uint64_t rows, int device, Output o) {
  Plan pl;
  const size_t limit = gpu::MaxSharedPerBlockOptin(device) - sizeof(Scratch) - 64;
  const int sms = gpu::MultiprocessorCount(device);
  pl.threads = p.m >= 8192 ? 1024 : p.m >= 2048 ? 512 : 256;
  pl.fused = false;
  // Tuning knob for the bench: cap rows per block (more rows share each index
  // load; fewer leave room for a second resident block).
  int maxR = 4;
  if (const char* env = std::getenv("CUSIM_FLYHASH_MAX_ROWS_PER_BLOCK")) maxR = std::max(1, std::atoi(env));
  for (int R : {4, 2, 1}) {
    if (R > maxR) continue;
    const size_t need = Align16(uint64_t(p.d) * R * 4) + uint64_t(R) * p.m * 4;
    if (need <= limit) {
      pl.fused = true;
      pl.R = R;
      pl.smem = need;
      break;
    }
  }
  const uint64_t rowBytes = uint64_t(p.d) * 4 + OutStride(p, o) * 4;
  uint64_t batch = std::max<uint64_t>(1, (uint64_t(64) << 20) / rowBytes);
  if (pl.fused) {
    SetSmem<Idx>(pl);
    int perSm = 0;
    auto f = pl.R == 4 ? FusedKernel<4, Idx> : pl.R == 2 ? FusedKernel<2, Idx> : FusedKernel<1, Idx>;
    CUSIM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, f, int(pl.threads), pl.smem));
    if (perSm < 1) perSm = 1;
    pl.grid = unsigned(sms * perSm);
  } else {
    pl.threads = 256;
    pl.R = 1;
    pl.smem = 0;  // 0: rows are read from device memory
    for (int R : {4, 2, 1}) {
      if (Align16(uint64_t(p.d) * R * 4) <= limit) {
        pl.R = R;
        pl.smem = Align16(uint64_t(p.d) * R * 4);
        break;
      }
    }
    SetSmem<Idx>(pl);
    // The keys of a batch live in device memory; 128 MB per slot keeps a good
    // part of them in L2 between the select kernel's passes while still giving
    // it a few hundred rows (blocks) per launch at m ~ 100k.
    batch = std::min<uint64_t>(batch, std::max<uint64_t>(4, (uint64_t(128) << 20) / (uint64_t(p.m) * 4)));
    pl.grid = unsigned(sms * 2);
  }
  pl.batch = std::min<uint64_t>(batch, rows);
  return pl;
}

// The projection on one device, transposed to [s][m] (so a warp's index loads
// are coalesced) and narrowed to 16 bits when d allows. Uploaded once per
// object and device.
template <typename Idx>
struct ProjState : GpuState {
  int device = -1;
  gpu::DeviceBuffer<Idx> proj;
  // Freed with its own device current, whichever thread drops the object.
  ~ProjState() override {
    if (!proj.data()) return;
    try {
      gpu::DeviceGuard guard(device);
      proj.release();
    } catch (...) {
      proj.release();
    }
  }
};

template <typename Idx>
const Idx* UploadProjection(const Params& p, const uint32_t* proj, int device, std::unique_ptr<GpuState>* state) {
  auto* have = dynamic_cast<ProjState<Idx>*>(state->get());
  if (have && have->device == device) return have->proj.data();
  state->reset();  // frees the old buffer (on whatever device) first
  auto fresh = std::make_unique<ProjState<Idx>>();
  fresh->device = device;
  std::vector<Idx> projT(uint64_t(p.m) * p.s);
  for (uint64_t j = 0; j < p.m; ++j)
    for (uint64_t t = 0; t < p.s; ++t) projT[t * p.m + j] = Idx(proj[j * p.s + t]);
  fresh->proj.reset(projT.size(), "FlyHash projection");
  CUSIM_CUDA_CHECK(cudaMemcpy(fresh->proj.data(), projT.data(), projT.size() * sizeof(Idx), cudaMemcpyHostToDevice));
  const Idx* ptr = fresh->proj.data();
  *state = std::move(fresh);
  return ptr;
}

template <typename Idx>
void Run(const Params& p, const uint32_t* proj, const DenseView& x, Output o, uint32_t* out, int device,
         const CancelToken& cancel, Timing* timing, std::unique_ptr<GpuState>* state) {
  const uint64_t rows = x.rows, stride = OutStride(p, o);
  const bool indices = o == Output::Indices;
  Plan pl = MakePlan<Idx>(p, rows, device, o);
  const Idx* dProj = UploadProjection<Idx>(p, proj, device, state);
  gpu::Stream streams[2];
  gpu::DeviceBuffer<float> dX[2];
  gpu::DeviceBuffer<uint32_t> dOut[2], dKeys[2];
  gpu::PinnedBuffer<float> hX[2];
  gpu::PinnedBuffer<uint32_t> hOut[2];
  for (int i = 0; i < 2; ++i) {
    dX[i].reset(pl.batch * p.d, "FlyHash input batch");
    dOut[i].reset(pl.batch * stride, "FlyHash output batch");
    if (!pl.fused) dKeys[i].reset(pl.batch * p.m, "FlyHash activation keys");
    hX[i].reserve(pl.batch * p.d, "FlyHash pinned input");
    hOut[i].reserve(pl.batch * stride, "FlyHash pinned output");
  }

  struct Pending {
    bool live = false;
    uint64_t r0 = 0, n = 0;
  } pending[2];
  gpu::Event ev[8];
  double kernelMs = 0, transferMs = 0;

  auto finish = [&](int slot) {
    streams[slot].sync();
    Pending& pd = pending[slot];
    if (!pd.live) return;
    gpu::Event* e = &ev[slot * 4];
    transferMs += gpu::ElapsedMs(e[0], e[1]) + gpu::ElapsedMs(e[2], e[3]);
    kernelMs += gpu::ElapsedMs(e[1], e[2]);
    std::memcpy(out + pd.r0 * stride, hOut[slot].data(), pd.n * stride * 4);
    pd.live = false;
  };

  uint64_t batchNo = 0;
  for (uint64_t r0 = 0; r0 < rows; r0 += pl.batch, ++batchNo) {
    if (cancel.requested()) {
      // Let in-flight copies finish before their buffers are freed.
      streams[0].sync();
      streams[1].sync();
      cancel.check();
    }
    const int slot = int(batchNo & 1);
    finish(slot);
    const uint64_t n = std::min<uint64_t>(pl.batch, rows - r0);
    cudaStream_t st = streams[slot];
    gpu::Event* e = &ev[slot * 4];
    // Staging on the host overlaps the other slot's copies and kernels.
    std::memcpy(hX[slot].data(), x.data + r0 * p.d, n * p.d * 4);
    e[0].record(st);
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(dX[slot].data(), hX[slot].data(), n * p.d * 4, cudaMemcpyHostToDevice, st));
    e[1].record(st);
    if (pl.fused) {
      const unsigned grid = unsigned(std::min<uint64_t>(pl.grid, (n + pl.R - 1) / pl.R));
      auto f = pl.R == 4 ? FusedKernel<4, Idx> : pl.R == 2 ? FusedKernel<2, Idx> : FusedKernel<1, Idx>;
      f<<<grid, pl.threads, pl.smem, st>>>(dX[slot].data(), n, p.d, dProj, p.m, p.s, p.k, indices,
                                            dOut[slot].data(), stride);
      CUSIM_LAUNCH_CHECK();
    } else {
      dim3 grid1(unsigned((p.m + 255) / 256), unsigned((n + pl.R - 1) / pl.R));
      auto f = pl.smem == 0 ? ActivateKernel<1, Idx, true>
               : pl.R == 4  ? ActivateKernel<4, Idx, false>
               : pl.R == 2  ? ActivateKernel<2, Idx, false>
                            : ActivateKernel<1, Idx, false>;
      f<<<grid1, 256, pl.smem, st>>>(dX[slot].data(), n, p.d, dProj, p.m, p.s, dKeys[slot].data());
      CUSIM_LAUNCH_CHECK();
      const unsigned grid2 = unsigned(std::min<uint64_t>(pl.grid, n));
      SelectKernel<<<grid2, 1024, 0, st>>>(dKeys[slot].data(), n, p.m, p.k, indices, dOut[slot].data(), stride);
      CUSIM_LAUNCH_CHECK();
    }
    e[2].record(st);
    CUSIM_CUDA_CHECK(
        cudaMemcpyAsync(hOut[slot].data(), dOut[slot].data(), n * stride * 4, cudaMemcpyDeviceToHost, st));
    e[3].record(st);
    pending[slot] = {true, r0, n};
  }
  finish(0);
  finish(1);
  if (timing) {
    timing->kernelMs = kernelMs;
    timing->transferMs = transferMs;
  }
}

}  // namespace

void HashCuda(const Params& p, const uint32_t* proj, const DenseView& x, Output o, uint32_t* out, int device,
              const CancelToken& cancel, Timing* timing, std::unique_ptr<GpuState>* state) {
  if (x.rows == 0) return;
  gpu::DeviceGuard guard(device);
  if (p.d <= 65536)
    Run<uint16_t>(p, proj, x, o, out, device, cancel, timing, state);
  else
    Run<uint32_t>(p, proj, x, o, out, device, cancel, timing, state);
}

}  // namespace flyhash
}  // namespace cusim
