// Weighted MinHash kernels. Work is split into segments of at most kSegment
// nonzeros, one warp per segment, lanes over samples, so a 1M-nnz row among
// millions of short rows spreads over the whole GPU. A row that spans several
// segments merges through a 64-bit atomicMin on (orderable ln a, position);
// the position breaks ties toward the earlier nonzero, which keeps the CPU's
// strict-< "first minimum in CSR order" rule exact, and a finalize kernel
// recomputes t* from the winning position.
#include <curand_kernel.h>

#include <algorithm>
#include <atomic>
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
constexpr uint64_t kBatchNnz = 32ull << 20;   // staging per slot: 256 MB of indices + values
constexpr uint64_t kBatchOutBytes = 256ull << 20;
constexpr uint64_t kBatchRows = 1ull << 18;

struct Seg {
  uint32_t row;    // batch-local row
  uint32_t begin;  // batch-local nnz positions
  uint32_t end;
  uint32_t split;  // scratch slot of a row spanning several segments, else kNone
};

__global__ void GenParamsKernel(uint64_t seed, uint32_t dim, uint32_t samples, float* rs, float* lnCs, float* betas) {
  const uint64_t d = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= dim) return;
  curandStatePhilox4_32_10_t st;
  curand_init(seed, d, 0, &st);
  const uint64_t off = d * samples;
  for (uint32_t s = 0; s < samples; ++s) {
    const float u1 = curand_uniform(&st), u2 = curand_uniform(&st), u3 = curand_uniform(&st), u4 = curand_uniform(&st),
                u5 = curand_uniform(&st);
    // Products of two floats are exact in double, so only log's last bit can differ from the CPU.
    rs[off + s] = float(-log(double(u1) * double(u2)));
    lnCs[off + s] = float(log(-log(double(u3) * double(u4))));
    betas[off + s] = u5;
  }
}

__device__ __forceinline__ float LogW(float w) { return float(log(double(w))); }

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

// The sample a lane's q-th slot holds in the pass starting at s0. kVec4: four
// consecutive samples per lane, read with one 16-byte load per table (needs
// samples % 4 == 0, which also keeps every row of the tables 16-byte aligned);
// otherwise lanes stride by 32 and any sample count works.
template <bool kVec4>
__device__ __forceinline__ uint32_t SampleOf(uint32_t s0, unsigned lane, int q) {
  return kVec4 ? s0 + lane * kPerLane + q : s0 + q * 32 + lane;
}

template <bool kVec4>
__global__ void __launch_bounds__(kThreads) HashKernel(const Seg* __restrict__ segs, uint64_t nseg,
                                                       const uint32_t* __restrict__ indices,
                                                       const float* __restrict__ values, const float* __restrict__ rs,
                                                       const float* __restrict__ lnCs,
                                                       const float* __restrict__ betas, uint32_t samples,
                                                       uint32_t* __restrict__ out,
                                                       unsigned long long* __restrict__ scratch) {
  const uint64_t w = (uint64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (w >= nseg) return;  // uniform per warp
  const unsigned lane = threadIdx.x & 31;
  const Seg sg = segs[w];
  for (uint32_t s0 = 0; s0 < samples; s0 += 32 * kPerLane) {
    float bestA[kPerLane], bestT[kPerLane];
    uint32_t bestK[kPerLane], bestP[kPerLane];
#pragma unroll
    for (int q = 0; q < kPerLane; ++q) bestA[q] = __int_as_float(0x7f800000), bestT[q] = 0, bestK[q] = kNone, bestP[q] = kNone;
    for (uint32_t base = sg.begin; base < sg.end; base += 32) {
      const uint32_t n = min(32u, sg.end - base);
      uint32_t myD = 0;
      float myLw = 0.0f;
      bool ok = false;
      if (lane < n) {
        myD = __ldg(indices + base + lane);
        const float wt = values ? __ldg(values + base + lane) : 1.0f;
        ok = wt > 0.0f;  // zero, negative and NaN weights are skipped
        if (ok) myLw = LogW(wt);  // once per nonzero, then broadcast
      }
      unsigned mask = __ballot_sync(0xffffffffu, ok);
      while (mask) {  // ascending bits: CSR order
        const int j = __ffs(mask) - 1;
        mask &= mask - 1;
        const uint32_t d = __shfl_sync(0xffffffffu, myD, j);
        const float lw = __shfl_sync(0xffffffffu, myLw, j);
        const uint64_t off = uint64_t(d) * samples;
        if (kVec4) {
          const uint32_t sb = SampleOf<true>(s0, lane, 0);
          if (sb < samples) {
            const float4 r4 = __ldg(reinterpret_cast<const float4*>(rs + off + sb));
            const float4 b4 = __ldg(reinterpret_cast<const float4*>(betas + off + sb));
            const float4 c4 = __ldg(reinterpret_cast<const float4*>(lnCs + off + sb));
            const float rv[4] = {r4.x, r4.y, r4.z, r4.w}, bv[4] = {b4.x, b4.y, b4.z, b4.w}, cv[4] = {c4.x, c4.y, c4.z, c4.w};
#pragma unroll
            for (int q = 0; q < kPerLane; ++q) {
              const float t = SampleT(lw, rv[q], bv[q]);
              const float lna = SampleLnA(t, rv[q], cv[q], bv[q]);
              if (lna < bestA[q]) bestA[q] = lna, bestT[q] = t, bestK[q] = d, bestP[q] = base + j;
            }
          }
        } else {
#pragma unroll
          for (int q = 0; q < kPerLane; ++q) {
            const uint32_t s = SampleOf<false>(s0, lane, q);
            if (s < samples) {
              const float r = __ldg(rs + off + s), b = __ldg(betas + off + s), c = __ldg(lnCs + off + s);
              const float t = SampleT(lw, r, b);
              const float lna = SampleLnA(t, r, c, b);
              if (lna < bestA[q]) bestA[q] = lna, bestT[q] = t, bestK[q] = d, bestP[q] = base + j;
            }
          }
        }
      }
    }
#pragma unroll
    for (int q = 0; q < kPerLane; ++q) {
      const uint32_t s = SampleOf<kVec4>(s0, lane, q);
      if (s >= samples) continue;
      if (sg.split == kNone) {
        const uint64_t o = (uint64_t(sg.row) * samples + s) * 2;
        const bool none = bestP[q] == kNone;
        out[o] = none ? kSentinel : bestK[q];
        out[o + 1] = none ? kSentinel : uint32_t(__float2int_rz(bestT[q]));
      } else if (bestP[q] != kNone) {
        atomicMin(scratch + uint64_t(sg.split) * samples + s,
                  (static_cast<unsigned long long>(OrderKey(bestA[q])) << 32) | bestP[q]);
      }
    }
  }
}

// Hot-column variant: a persistent grid whose blocks first copy the
// parameter tables of the batch's most frequent columns into shared memory
// (slotOf maps a column to its slot, kCold when absent), so nonzeros on those
// columns read shared memory instead of L2: on Zipf-shaped inputs that takes
// a large share of the 1.5 KB-per-nonzero table traffic off L2. Lanes keep only
// (ln a, position) per sample; k* and t* are recomputed from the winning
// position with the same expressions (bit-identical), which saves two selects
// and eight registers per element-sample. Same segments, same atomic merge,
// same FinalizeKernel for split rows as HashKernel, so results are identical.
// kPipe: the next pair's table loads are issued before the current pair is
// computed (software pipelining), so a warp's memory wait overlaps its own
// division chains; it needs ~25 more registers, hence fewer threads.
template <bool kPipe>
constexpr unsigned HotThreads() {
  return kPipe ? 640 : 768;
}
constexpr uint32_t kMaxHot = 255;
constexpr uint8_t kCold = 0xFF;

// Smem layout per hot slot h: rs | lnCs | betas, samples floats each.
__device__ __forceinline__ void StageHot(float* hot, const uint32_t* __restrict__ hotCols, uint32_t nhot,
                                         const float* __restrict__ rs, const float* __restrict__ lnCs,
                                         const float* __restrict__ betas, uint32_t samples) {
  const uint64_t n = uint64_t(nhot) * samples;
  for (uint64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const uint32_t h = uint32_t(i / samples), s = uint32_t(i % samples);
    const uint64_t g = uint64_t(hotCols[h]) * samples + s;
    float* dst = hot + uint64_t(h) * 3 * samples + s;
    dst[0] = __ldg(rs + g);
    dst[samples] = __ldg(lnCs + g);
    dst[2 * samples] = __ldg(betas + g);
  }
}

// One nonzero's parameters for a lane's kPerLane samples, from shared memory
// (hot slot h) or from the global tables; the branch is warp-uniform.
struct Tab {
  float r[kPerLane], c[kPerLane], b[kPerLane];
};

// Shared and global pointers are formed in separate branches so the compiler
// emits ld.shared / ld.global.nc, not generic loads through a selected pointer.
template <bool kVec4>
__device__ __forceinline__ void LoadFrom(Tab& t, const float* R, const float* C, const float* B, bool shared,
                                         uint32_t samples, uint32_t s0, unsigned lane) {
  if (kVec4) {
    const uint32_t sb = SampleOf<true>(s0, lane, 0);
    float4 r4 = make_float4(0, 0, 0, 0), c4 = r4, b4 = r4;
    if (sb < samples) {
      if (shared) {
        r4 = *reinterpret_cast<const float4*>(R + sb);
        c4 = *reinterpret_cast<const float4*>(C + sb);
        b4 = *reinterpret_cast<const float4*>(B + sb);
      } else {
        r4 = __ldg(reinterpret_cast<const float4*>(R + sb));
        c4 = __ldg(reinterpret_cast<const float4*>(C + sb));
        b4 = __ldg(reinterpret_cast<const float4*>(B + sb));
      }
    }
    t.r[0] = r4.x, t.r[1] = r4.y, t.r[2] = r4.z, t.r[3] = r4.w;
    t.c[0] = c4.x, t.c[1] = c4.y, t.c[2] = c4.z, t.c[3] = c4.w;
    t.b[0] = b4.x, t.b[1] = b4.y, t.b[2] = b4.z, t.b[3] = b4.w;
  } else {
#pragma unroll
    for (int q = 0; q < kPerLane; ++q) {
      const uint32_t s = SampleOf<false>(s0, lane, q);
      t.r[q] = t.c[q] = t.b[q] = 0.0f;
      if (s < samples) {
        if (shared) {
          t.r[q] = R[s], t.c[q] = C[s], t.b[q] = B[s];
        } else {
          t.r[q] = __ldg(R + s), t.c[q] = __ldg(C + s), t.b[q] = __ldg(B + s);
        }
      }
    }
  }
}

template <bool kVec4>
__device__ __forceinline__ Tab LoadTab(const float* hot, uint32_t h, uint32_t d, const float* __restrict__ rs,
                                       const float* __restrict__ lnCs, const float* __restrict__ betas,
                                       uint32_t samples, uint32_t s0, unsigned lane) {
  Tab t;
  if (h != kCold) {
    const float* R = hot + uint64_t(h) * 3 * samples;
    LoadFrom<kVec4>(t, R, R + samples, R + 2 * samples, true, samples, s0, lane);
  } else {
    const uint64_t off = uint64_t(d) * samples;
    LoadFrom<kVec4>(t, rs + off, lnCs + off, betas + off, false, samples, s0, lane);
  }
  return t;
}

template <bool kVec4>
__device__ __forceinline__ void Update(const Tab& t, float lw, uint32_t pos, uint32_t samples, uint32_t s0,
                                       unsigned lane, float (&bestA)[kPerLane], uint32_t (&bestP)[kPerLane]) {
#pragma unroll
  for (int q = 0; q < kPerLane; ++q) {
    if (SampleOf<kVec4>(s0, lane, q) >= samples) continue;
    const float lna = SampleLnA(SampleT(lw, t.r[q], t.b[q]), t.r[q], t.c[q], t.b[q]);
    if (lna < bestA[q]) bestA[q] = lna, bestP[q] = pos;
  }
}

// Two consecutive ballot bits (CSR order) and their tables. With one bit left
// the second repeats the first: the repeat recomputes an equal ln a, which
// cannot pass the strict <, so it changes nothing.
struct Pair {
  Tab t1, t2;
  float lw1, lw2;
  uint32_t p1, p2;
};

template <bool kVec4>
__device__ __forceinline__ void LoadPair(Pair& P, unsigned& mask, uint32_t myD, float myLw, uint32_t mySlot,
                                         uint32_t base, const float* hot, const float* __restrict__ rs,
                                         const float* __restrict__ lnCs, const float* __restrict__ betas,
                                         uint32_t samples, uint32_t s0, unsigned lane) {
  const int j1 = __ffs(mask) - 1;
  mask &= mask - 1;
  const int j2 = mask ? __ffs(mask) - 1 : j1;
  if (mask) mask &= mask - 1;
  const uint32_t d1 = __shfl_sync(0xffffffffu, myD, j1), d2 = __shfl_sync(0xffffffffu, myD, j2);
  const uint32_t h1 = __shfl_sync(0xffffffffu, mySlot, j1), h2 = __shfl_sync(0xffffffffu, mySlot, j2);
  P.lw1 = __shfl_sync(0xffffffffu, myLw, j1), P.lw2 = __shfl_sync(0xffffffffu, myLw, j2);
  P.p1 = base + j1, P.p2 = base + j2;
  P.t1 = LoadTab<kVec4>(hot, h1, d1, rs, lnCs, betas, samples, s0, lane);
  P.t2 = LoadTab<kVec4>(hot, h2, d2, rs, lnCs, betas, samples, s0, lane);
}

template <bool kVec4>
__device__ __forceinline__ void UpdatePair(const Pair& P, uint32_t samples, uint32_t s0, unsigned lane,
                                           float (&bestA)[kPerLane], uint32_t (&bestP)[kPerLane]) {
  Update<kVec4>(P.t1, P.lw1, P.p1, samples, s0, lane, bestA, bestP);
  Update<kVec4>(P.t2, P.lw2, P.p2, samples, s0, lane, bestA, bestP);
}

template <bool kVec4, bool kPipe>
__global__ void __launch_bounds__(HotThreads<kPipe>(), 1)
    HotKernel(const Seg* __restrict__ segs, uint64_t nseg, const uint32_t* __restrict__ indices,
              const float* __restrict__ values, const uint8_t* __restrict__ slotOf,
              const uint32_t* __restrict__ hotCols, uint32_t nhot, const float* __restrict__ rs,
              const float* __restrict__ lnCs, const float* __restrict__ betas, uint32_t samples,
              uint32_t* __restrict__ out, unsigned long long* __restrict__ scratch,
              unsigned long long* __restrict__ nextSeg) {
  extern __shared__ float4 hotRaw[];  // float4: 16-byte alignment for the vector reads
  float* hot = reinterpret_cast<float*>(hotRaw);
  StageHot(hot, hotCols, nhot, rs, lnCs, betas, samples);
  __syncthreads();  // the only barrier: every thread reaches it, no early return above
  const unsigned lane = threadIdx.x & 31;
  const uint64_t nwarps = (uint64_t(gridDim.x) * blockDim.x) >> 5;
  // Each warp's first segment is its id, the rest come from a counter: with
  // log-normal row lengths a static stride leaves some warps with ~2x the mean
  // work and their SMs idle at the end; one atomic per segment avoids that.
  // The next claim is made as a segment starts, so its latency hides behind
  // the segment's work; every claimed index below nseg is processed.
  for (uint64_t w = (uint64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; w < nseg;) {
    unsigned long long nx = 0;
    if (lane == 0) nx = atomicAdd(nextSeg, 1ull);
    const Seg sg = segs[w];
    for (uint32_t s0 = 0; s0 < samples; s0 += 32 * kPerLane) {
      float bestA[kPerLane];
      uint32_t bestP[kPerLane];
#pragma unroll
      for (int q = 0; q < kPerLane; ++q) bestA[q] = __int_as_float(0x7f800000), bestP[q] = kNone;
      // The next chunk's columns and weights load while this chunk computes,
      // so a chunk start waits only for slotOf (L2), not for the CSR stream.
      uint32_t nextD = 0;
      float nextW = 0.0f;
      if (sg.begin + lane < sg.end) {
        nextD = __ldg(indices + sg.begin + lane);
        nextW = values ? __ldg(values + sg.begin + lane) : 1.0f;
      }
      for (uint32_t base = sg.begin; base < sg.end; base += 32) {
        const uint32_t n = min(32u, sg.end - base);
        const uint32_t myD = nextD;  // lanes >= n hold stale values and stay out of the ballot
        const float wt = nextW;
        if (sg.end - base > 32 && base + 32 + lane < sg.end) {
          nextD = __ldg(indices + base + 32 + lane);
          nextW = values ? __ldg(values + base + 32 + lane) : 1.0f;
        }
        uint32_t mySlot = kCold;
        float myLw = 0.0f;
        const bool ok = lane < n && wt > 0.0f;  // zero, negative and NaN weights are skipped
        if (ok) myLw = LogW(wt), mySlot = __ldg(slotOf + myD);
        unsigned mask = __ballot_sync(0xffffffffu, ok);
        // Two nonzeros per step (both loads issued before either is used), in
        // CSR order. The branches below depend only on mask: warp-uniform.
        if (!kPipe) {
          while (mask) {
            Pair P;
            LoadPair<kVec4>(P, mask, myD, myLw, mySlot, base, hot, rs, lnCs, betas, samples, s0, lane);
            UpdatePair<kVec4>(P, samples, s0, lane, bestA, bestP);
          }
        } else if (mask) {
          // Ping-pong: load pair k+1, then compute pair k; pairs are still
          // computed in the order they were taken.
          Pair A, B;
          LoadPair<kVec4>(A, mask, myD, myLw, mySlot, base, hot, rs, lnCs, betas, samples, s0, lane);
          for (;;) {
            if (!mask) {
              UpdatePair<kVec4>(A, samples, s0, lane, bestA, bestP);
              break;
            }
            LoadPair<kVec4>(B, mask, myD, myLw, mySlot, base, hot, rs, lnCs, betas, samples, s0, lane);
            UpdatePair<kVec4>(A, samples, s0, lane, bestA, bestP);
            if (!mask) {
              UpdatePair<kVec4>(B, samples, s0, lane, bestA, bestP);
              break;
            }
            LoadPair<kVec4>(A, mask, myD, myLw, mySlot, base, hot, rs, lnCs, betas, samples, s0, lane);
            UpdatePair<kVec4>(B, samples, s0, lane, bestA, bestP);
          }
        }
      }
#pragma unroll
      for (int q = 0; q < kPerLane; ++q) {
        const uint32_t s = SampleOf<kVec4>(s0, lane, q);
        if (s >= samples) continue;
        if (sg.split == kNone) {
          const uint64_t o = (uint64_t(sg.row) * samples + s) * 2;
          if (bestP[q] == kNone) {
            out[o] = kSentinel, out[o + 1] = kSentinel;
          } else {
            // The winner's t*, recomputed exactly as the loop computed it.
            const uint32_t d = __ldg(indices + bestP[q]);
            const float lw = LogW(values ? __ldg(values + bestP[q]) : 1.0f);
            const uint64_t g = uint64_t(d) * samples + s;
            out[o] = d;
            out[o + 1] = uint32_t(__float2int_rz(SampleT(lw, __ldg(rs + g), __ldg(betas + g))));
          }
        } else if (bestP[q] != kNone) {
          atomicMin(scratch + uint64_t(sg.split) * samples + s,
                    (static_cast<unsigned long long>(OrderKey(bestA[q])) << 32) | bestP[q]);
        }
      }
    }
    w = nwarps + __shfl_sync(0xffffffffu, nx, 0);
  }
}

// Points slotOf at this batch's hot list: first clears the previous list's
// entries, then (after the barrier, so a column in both lists ends set) sets
// the new ones. One block; cur holds the list now in force.
__global__ void SetHotKernel(uint8_t* __restrict__ slotOf, uint32_t* __restrict__ cur, uint32_t ncur,
                             const uint32_t* __restrict__ next, uint32_t nnext) {
  for (uint32_t i = threadIdx.x; i < ncur; i += blockDim.x) slotOf[cur[i]] = kCold;
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < nnext; i += blockDim.x) {
    cur[i] = next[i];
    slotOf[next[i]] = uint8_t(i);
  }
}

__global__ void FinalizeKernel(const uint32_t* __restrict__ splitRows, uint64_t nsplit,
                               const unsigned long long* __restrict__ scratch, const uint32_t* __restrict__ indices,
                               const float* __restrict__ values, const float* __restrict__ rs,
                               const float* __restrict__ betas, uint32_t samples, uint32_t* __restrict__ out) {
  const uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= nsplit * samples) return;
  const uint64_t slot = i / samples;
  const uint32_t s = uint32_t(i % samples);
  const unsigned long long key = scratch[i];
  const uint64_t o = (uint64_t(splitRows[slot]) * samples + s) * 2;
  if (key == ~0ull) {
    out[o] = kSentinel, out[o + 1] = kSentinel;
    return;
  }
  const uint32_t pos = uint32_t(key);
  const uint32_t d = indices[pos];
  const float lw = LogW(values ? values[pos] : 1.0f);
  const uint64_t off = uint64_t(d) * samples + s;
  out[o] = d;
  out[o + 1] = uint32_t(__float2int_rz(SampleT(lw, rs[off], betas[off])));
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
  // Hot-column state: slotOf over the whole dim (kCold except the list in
  // force), that list on the device and on the host, and the next list staged.
  gpu::DeviceBuffer<uint8_t> dSlotOf;
  gpu::DeviceBuffer<unsigned long long> dNextSeg;
  gpu::DeviceBuffer<uint32_t> dHotCur, dHotNext;
  gpu::PinnedBuffer<uint32_t> hHot;
  std::vector<uint32_t> hotCur;
  bool slotOfReady = false;
};

// Two slots per device: while one batch computes, the other stages and copies.
constexpr int kSlots = 2;

struct Device {
  int id = 0;
  int sms = 1;
  uint64_t smemOptin = 48 << 10;
  gpu::DeviceBuffer<float> rs, lnCs, betas;
  std::unique_ptr<Slot> slots[kSlots];
  std::mutex m;
  std::condition_variable cv;
  bool busy[kSlots] = {false, false};

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

// Host copies into and out of pinned staging dominate a batch's host time
// (bytes, no math), so they run on the CPU pool in 4 MB pieces.
void ParallelCopy(void* dst, const void* src, uint64_t bytes) {
  constexpr uint64_t kPiece = 4ull << 20;
  const uint64_t pieces = (bytes + kPiece - 1) / kPiece;
  ParallelFor(pieces, 1, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      const uint64_t off = i * kPiece;
      std::memcpy(static_cast<char*>(dst) + off, static_cast<const char*>(src) + off, std::min(kPiece, bytes - off));
    }
  });
}

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

enum class Kernel { kSegment, kHot, kHotPipe };

// CUSIM_MINHASH_KERNEL=segment|hot|hotpipe|auto (unset or anything else = auto
// = hotpipe, the one predicted fastest in docs/minhash-perf.md). All give
// identical signatures; the knob exists to time them against each other.
Kernel KernelFromEnv() {
  const char* v = std::getenv("CUSIM_MINHASH_KERNEL");
  if (v && std::strcmp(v, "segment") == 0) return Kernel::kSegment;
  if (v && std::strcmp(v, "hot") == 0) return Kernel::kHot;
  if (v && std::strcmp(v, "hotpipe") == 0) return Kernel::kHotPipe;
  // Measured on an H100 (bench/results/*minhash-cluster-v2.md): the
  // shared-memory hot-column variants ran 8% slower than the segment kernel on
  // the GitHub-shaped workload, so auto keeps the segment kernel.
  return Kernel::kSegment;
}

// Hot columns of one device's rows, from a strided sample of their nonzeros:
// the most frequent columns seen at least twice, at most maxHot of them. Only
// speed depends on the choice (every column's tables are exact either way), so
// a 32K-nonzero sample is plenty and costs about a millisecond.
std::vector<uint32_t> ChooseHot(const CsrView& m, uint64_t r0, uint64_t r1, uint32_t maxHot) {
  std::vector<uint32_t> hot;
  const uint64_t b = m.indptr[r0], e = m.indptr[r1];
  if (maxHot == 0 || e <= b) return hot;
  constexpr uint64_t kSample = 1 << 15;
  const uint64_t stride = std::max<uint64_t>(1, (e - b) / kSample);
  std::vector<uint32_t> cols;
  cols.reserve(std::min<uint64_t>(kSample + 1, e - b));
  for (uint64_t i = b; i < e; i += stride) cols.push_back(m.indices[i]);
  std::sort(cols.begin(), cols.end());
  std::vector<std::pair<uint32_t, uint32_t>> runs;  // (count, column)
  for (size_t i = 0; i < cols.size();) {
    size_t j = i;
    while (j < cols.size() && cols[j] == cols[i]) ++j;
    if (j - i >= 2) runs.push_back({uint32_t(j - i), cols[i]});
    i = j;
  }
  const size_t k = std::min<size_t>(maxHot, runs.size());
  std::partial_sort(runs.begin(), runs.begin() + k, runs.end(),
                    [](const auto& x, const auto& y) { return x.first != y.first ? x.first > y.first : x.second < y.second; });
  for (size_t i = 0; i < k; ++i) hot.push_back(runs[i].second);
  return hot;
}

// Hot slots that fit one block's shared memory (rs, lnCs, betas per slot).
uint32_t MaxHot(const Device& dev, uint32_t samples) {
  return uint32_t(std::min<uint64_t>(kMaxHot, dev.smemOptin / (uint64_t(samples) * 12)));
}

void RunBatch(Device& dev, Slot& sl, const CsrView& m, uint64_t rowStart, const Batch& bt, const Need& need,
              uint32_t dim, uint32_t samples, Kernel kernel, const std::vector<uint32_t>& hotList, uint32_t* out,
              Timing* timing) {
  const uint64_t rows = bt.r1 - bt.r0, nnz = bt.nnz, nseg = bt.nseg, nsplit = bt.nsplit;
  const uint32_t nz0 = m.indptr[bt.r0];
  sl.hIdx.reserve(need.nnz, "MinHash staged indices");
  if (m.values) sl.hVal.reserve(need.nnz, "MinHash staged values");
  sl.hSeg.reserve(need.nseg, "MinHash segments");
  sl.hSplit.reserve(std::max<uint64_t>(need.nsplit, 1), "MinHash split rows");
  sl.hOut.reserve(need.rows * samples * 2, "MinHash staged signatures");
  sl.dIdx.reserve(need.nnz, "MinHash indices");
  if (m.values) sl.dVal.reserve(need.nnz, "MinHash values");
  sl.dSeg.reserve(need.nseg, "MinHash segments");
  sl.dSplit.reserve(std::max<uint64_t>(need.nsplit, 1), "MinHash split rows");
  sl.dScratch.reserve(std::max<uint64_t>(need.nsplit * samples, 1), "MinHash split-row minima");
  sl.dOut.reserve(need.rows * samples * 2, "MinHash signatures");
  if (kernel != Kernel::kSegment) {
    sl.dSlotOf.reserve(dim, "MinHash hot-column slots");
    sl.dHotCur.reserve(kMaxHot, "MinHash hot columns");
    sl.dHotNext.reserve(kMaxHot, "MinHash hot columns");
    sl.hHot.reserve(kMaxHot, "MinHash hot columns");
    sl.dNextSeg.reserve(1, "MinHash segment counter");
  }

  ParallelCopy(sl.hIdx.data(), m.indices + nz0, nnz * 4);
  if (m.values) ParallelCopy(sl.hVal.data(), m.values + nz0, nnz * 4);
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

  cudaStream_t st = sl.stream;
  sl.e0.record(st);
  if (nnz) CUSIM_CUDA_CHECK(cudaMemcpyAsync(sl.dIdx.data(), sl.hIdx.data(), nnz * 4, cudaMemcpyHostToDevice, st));
  if (nnz && m.values) CUSIM_CUDA_CHECK(cudaMemcpyAsync(sl.dVal.data(), sl.hVal.data(), nnz * 4, cudaMemcpyHostToDevice, st));
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(sl.dSeg.data(), seg, nseg * sizeof(Seg), cudaMemcpyHostToDevice, st));
  if (nsplit) CUSIM_CUDA_CHECK(cudaMemcpyAsync(sl.dSplit.data(), split, nsplit * 4, cudaMemcpyHostToDevice, st));
  sl.e1.record(st);
  if (nsplit) CUSIM_CUDA_CHECK(cudaMemsetAsync(sl.dScratch.data(), 0xFF, nsplit * samples * 8, st));
  const float* vals = m.values ? sl.dVal.data() : nullptr;
  if (kernel != Kernel::kSegment) {
    if (!sl.slotOfReady) {
      CUSIM_CUDA_CHECK(cudaMemsetAsync(sl.dSlotOf.data(), kCold, dim, st));
      sl.hotCur.clear();
      sl.slotOfReady = true;
    }
    if (hotList != sl.hotCur) {
      // hHot is free: the previous batch on this slot synchronized its stream.
      std::copy(hotList.begin(), hotList.end(), sl.hHot.data());
      if (!hotList.empty())
        CUSIM_CUDA_CHECK(cudaMemcpyAsync(sl.dHotNext.data(), sl.hHot.data(), hotList.size() * 4,
                                         cudaMemcpyHostToDevice, st));
      SetHotKernel<<<1, 256, 0, st>>>(sl.dSlotOf.data(), sl.dHotCur.data(), uint32_t(sl.hotCur.size()),
                                      sl.dHotNext.data(), uint32_t(hotList.size()));
      CUSIM_LAUNCH_CHECK();
      sl.hotCur = hotList;
    }
    CUSIM_CUDA_CHECK(cudaMemsetAsync(sl.dNextSeg.data(), 0, sizeof(unsigned long long), st));
    const uint32_t nhot = uint32_t(hotList.size());
    const size_t smem = size_t(nhot) * samples * 12;
    const bool pipe = kernel == Kernel::kHotPipe;
    const bool vec4 = samples % kPerLane == 0;
    auto kfn = pipe ? (vec4 ? HotKernel<true, true> : HotKernel<false, true>)
                    : (vec4 ? HotKernel<true, false> : HotKernel<false, false>);
    const unsigned threads = pipe ? HotThreads<true>() : HotThreads<false>();
    int perSm = 0;
    CUSIM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, kfn, threads, smem));
    const uint64_t want = (nseg + threads / 32 - 1) / (threads / 32);
    const unsigned grid = unsigned(std::max<uint64_t>(1, std::min<uint64_t>(want, uint64_t(dev.sms) * std::max(perSm, 1))));
    kfn<<<grid, threads, smem, st>>>(sl.dSeg.data(), nseg, sl.dIdx.data(), vals, sl.dSlotOf.data(),
                                         sl.dHotCur.data(), nhot, dev.rs.data(), dev.lnCs.data(),
                                         dev.betas.data(), samples, sl.dOut.data(), sl.dScratch.data(),
                                         sl.dNextSeg.data());
  } else if (samples % kPerLane == 0) {
    const unsigned grid = gpu::GridFor(nseg * 32, kThreads, 0x7fffffffu);
    HashKernel<true><<<grid, kThreads, 0, st>>>(sl.dSeg.data(), nseg, sl.dIdx.data(), vals, dev.rs.data(),
                                                 dev.lnCs.data(), dev.betas.data(), samples, sl.dOut.data(),
                                                 sl.dScratch.data());
  } else {
    const unsigned grid = gpu::GridFor(nseg * 32, kThreads, 0x7fffffffu);
    HashKernel<false><<<grid, kThreads, 0, st>>>(sl.dSeg.data(), nseg, sl.dIdx.data(), vals, dev.rs.data(),
                                                  dev.lnCs.data(), dev.betas.data(), samples, sl.dOut.data(),
                                                  sl.dScratch.data());
  }
  CUSIM_LAUNCH_CHECK();
  if (nsplit) {
    FinalizeKernel<<<gpu::GridFor(nsplit * samples, kThreads, 0x7fffffffu), kThreads, 0, st>>>(
        sl.dSplit.data(), nsplit, sl.dScratch.data(), sl.dIdx.data(), vals, dev.rs.data(), dev.betas.data(), samples,
        sl.dOut.data());
    CUSIM_LAUNCH_CHECK();
  }
  sl.e2.record(st);
  const uint64_t outWords = rows * samples * 2;
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(sl.hOut.data(), sl.dOut.data(), outWords * 4, cudaMemcpyDeviceToHost, st));
  sl.e3.record(st);
  sl.stream.sync();
  ParallelCopy(out + (bt.r0 - rowStart) * samples * 2, sl.hOut.data(), outWords * 4);
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
    int sms = 1, optin = 48 << 10;
    CUSIM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, id));
    CUSIM_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, id));
    d->sms = sms, d->smemOptin = uint64_t(optin);
    // Lets the hot-column kernels take every opt-in byte a batch's hot list needs.
    for (auto fn : {HotKernel<true, false>, HotKernel<false, false>, HotKernel<true, true>, HotKernel<false, true>})
      CUSIM_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
    uint64_t freeB = 0, totalB = 0;
    DeviceMemory(id, &freeB, &totalB);
    const uint64_t need = 3 * n * sizeof(float);
    if (need > freeB)
      ThrowOutOfMemory("weighted MinHash parameter tables (3 x dim x samples floats = " + std::to_string(dim) + " x " +
                           std::to_string(samples) + " x 3 x 4 bytes) on GPU " + std::to_string(id),
                       need, freeB);
    d->rs.reset(n, "MinHash rs table");
    d->lnCs.reset(n, "MinHash lnCs table");
    d->betas.reset(n, "MinHash betas table");
    if (rs) {
      CUSIM_CUDA_CHECK(cudaMemcpy(d->rs.data(), rs, n * 4, cudaMemcpyHostToDevice));
      CUSIM_CUDA_CHECK(cudaMemcpy(d->lnCs.data(), lnCs, n * 4, cudaMemcpyHostToDevice));
      CUSIM_CUDA_CHECK(cudaMemcpy(d->betas.data(), betas, n * 4, cudaMemcpyHostToDevice));
    } else {
      GenParamsKernel<<<gpu::GridFor(dim, kThreads, 0x7fffffffu), kThreads>>>(seed, dim, samples, d->rs.data(),
                                                                              d->lnCs.data(), d->betas.data());
      CUSIM_LAUNCH_CHECK();
      CUSIM_CUDA_CHECK(cudaDeviceSynchronize());
    }
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
  std::vector<std::vector<uint32_t>> hot(nd);
  for (size_t k = 0; k < nd; ++k) {
    plans[k] = PlanBatches(m, cut[k], cut[k + 1], e.samples);
    for (const Batch& b : plans[k]) needs[k].add(b);
    next[k] = 0;
    if (kernel != Kernel::kSegment) hot[k] = ChooseHot(m, cut[k], cut[k + 1], MaxHot(*e.devs[k], e.samples));
  }
  std::vector<Timing> timings(nd * kSlots);
  std::vector<std::exception_ptr> errors(nd * kSlots);
  std::atomic<bool> failed{false};
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
              RunBatch(dev, *dev.slots[s], m, rowStart, plans[k][i], needs[k], e.dim, e.samples, kernel, hot[k],
                       out, &timings[k * kSlots + t]);
            } catch (...) {
              dev.Release(s);
              throw;
            }
            dev.Release(s);
          }
        } catch (...) {
          errors[k * kSlots + t] = std::current_exception();
          failed = true;
        }
      });
    }
  }
  for (auto& th : threads) th.join();
  for (auto& err : errors)
    if (err) std::rethrow_exception(err);
  cancel.check();
  for (const Timing& t : timings) timing->kernelMs += t.kernelMs, timing->transferMs += t.transferMs;
}

void DeviceParamsCuda(CudaEngine& e, size_t slot, float* rs, float* lnCs, float* betas) {
  Device& d = *e.devs.at(slot);
  gpu::DeviceGuard g(d.id);
  const uint64_t n = uint64_t(e.dim) * e.samples;
  CUSIM_CUDA_CHECK(cudaMemcpy(rs, d.rs.data(), n * 4, cudaMemcpyDeviceToHost));
  CUSIM_CUDA_CHECK(cudaMemcpy(lnCs, d.lnCs.data(), n * 4, cudaMemcpyDeviceToHost));
  CUSIM_CUDA_CHECK(cudaMemcpy(betas, d.betas.data(), n * 4, cudaMemcpyDeviceToHost));
}

}  // namespace minhash
}  // namespace cusim
