// Weighted MinHash kernels. Work is split into segments of at most kSegment
// nonzeros, one warp per segment, lanes over samples, so a 1M-nnz row among
// millions of short rows spreads over the whole GPU. A row that spans several
// segments merges through a 64-bit atomicMin on (orderable ln a, position);
// the position breaks ties toward the earlier nonzero, which keeps the CPU's
// strict-< "first minimum in CSR order" rule exact, and a finalize kernel
// recomputes t* from the winning position.
//
// Parameter tables hold only the columns in use: each device maps column ids
// to compact slots (an open-addressing table, column_map.h's hash), a lookup
// kernel turns a batch's columns into slots before the hash kernels, which
// read the tables by slot exactly as they read them by column before. A batch
// that meets new columns finds out at its end (a flag), adds them under the
// device's exclusive lock (slots assigned on the device, their parameters
// generated there from the seed contract) and runs again.
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
#include <shared_mutex>
#include <thread>
#include <utility>
#include <vector>

#include "../native/column_map.h"
#include "../native/gpu.h"
#include "../native/minhash.h"
#include "../native/parallel.h"
#include "common/gpu.cuh"
#include "common/minhash_batch.cuh"

namespace cusim {
namespace minhash {
namespace {

constexpr int kPerLane = 4;  // samples a lane holds per pass: 128 in one pass
constexpr unsigned kThreads = 256;

// ---- column -> slot map --------------------------------------------------
// Entries are (column, slot) pairs, column kNoColumn when empty, at most half
// full; probing follows ColumnHome and steps by one, as on the host.
constexpr unsigned kFlagBad = 1;   // a column >= dim or a +inf weight
constexpr unsigned kFlagMiss = 2;  // a column without a slot yet

__device__ __forceinline__ uint32_t FindSlot(const uint2* __restrict__ table, uint32_t mask, uint32_t shift,
                                             uint32_t d) {
  for (uint32_t h = ColumnHome(d, shift);; h = (h + 1) & mask) {
    const uint2 e = __ldg(table + h);
    if (e.x == d) return e.y;
    if (e.x == kNoColumn) return kNoSlot;
  }
}

// slots[i] = slot of column idx[i]. Columns >= dim raise kFlagBad and columns
// without a slot kFlagMiss; both get slot 0, which always exists, so the hash
// kernels that follow read in bounds (their output is then discarded).
__global__ void LookupKernel(const uint32_t* __restrict__ idx, uint64_t n, uint32_t dim,
                             const uint2* __restrict__ table, uint32_t mask, uint32_t shift,
                             uint32_t* __restrict__ slots, unsigned* flags) {
  unsigned f = 0;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint32_t d = __ldg(idx + i);
    uint32_t slot = 0;
    if (d >= dim) {
      f |= kFlagBad;
    } else {
      slot = FindSlot(table, mask, shift, d);
      if (slot == kNoSlot) f |= kFlagMiss, slot = 0;
    }
    slots[i] = slot;
  }
  if (f) atomicOr(flags, f);
}

// Gives every column of cols[0, n) below dim a slot, runs alone on the device
// (the exclusive lock): a column's first claimant takes the next slot from
// counter[0] and records it in colOf. Slots stop at maxCount (half the table);
// a claim beyond it, or a probe run longer than the table, sets counter[1] and
// the host grows the table and runs this again.
__global__ void InsertKernel(const uint32_t* __restrict__ cols, uint64_t n, uint32_t dim, uint2* table, uint32_t mask,
                             uint32_t shift, uint32_t* __restrict__ colOf, unsigned* counter, uint32_t maxCount) {
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint32_t d = cols[i];
    if (d >= dim) continue;
    uint32_t h = ColumnHome(d, shift);
    for (uint32_t probes = 0;; ++probes, h = (h + 1) & mask) {
      if (probes > mask) {
        atomicOr(counter + 1, 1u);
        break;
      }
      const uint32_t k = *reinterpret_cast<volatile uint32_t*>(&table[h].x);
      if (k == d) break;
      if (k != kNoColumn) continue;
      if (*reinterpret_cast<volatile unsigned*>(counter) >= maxCount) {
        atomicOr(counter + 1, 1u);
        break;
      }
      const uint32_t old = atomicCAS(&table[h].x, kNoColumn, d);
      if (old == d) break;
      if (old != kNoColumn) continue;  // another column took the entry: probe on
      const uint32_t slot = atomicAdd(counter, 1u);
      if (slot >= maxCount) {
        atomicOr(counter + 1, 1u);
        break;
      }
      table[h].y = slot;
      colOf[slot] = d;
      break;
    }
  }
}

// Re-enters slots [0, count) (distinct columns) into an empty, larger table.
__global__ void RebuildKernel(const uint32_t* __restrict__ colOf, uint32_t count, uint2* table, uint32_t mask,
                              uint32_t shift) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const uint32_t d = colOf[i];
  for (uint32_t h = ColumnHome(d, shift);; h = (h + 1) & mask) {
    if (atomicCAS(&table[h].x, kNoColumn, d) == kNoColumn) {
      table[h].y = i;
      return;
    }
  }
}

// Device tables are one 16-byte record per (slot, sample), [slot][samples]:
// a survivor of the pruned scan reads r, ln c and beta in one sector instead
// of three. Slots [from, to) get their column's parameters.
__global__ void GenParamsKernel(uint64_t seed, const uint32_t* __restrict__ colOf, uint32_t from, uint32_t to,
                                uint32_t samples, float4* __restrict__ rec) {
  const uint64_t slot = from + uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (slot >= to) return;
  curandStatePhilox4_32_10_t st;
  curand_init(seed, colOf[slot], 0, &st);
  const uint64_t off = slot * samples;
  for (uint32_t s = 0; s < samples; ++s) {
    const float u1 = curand_uniform(&st), u2 = curand_uniform(&st), u3 = curand_uniform(&st), u4 = curand_uniform(&st),
                u5 = curand_uniform(&st);
    // Products of two floats are exact in double, so only log's last bit can differ from the CPU.
    rec[off + s] =
        make_float4(float(-log(double(u1) * double(u2))), float(log(-log(double(u3) * double(u4)))), u5, 0.0f);
  }
}

// Injected tables ([slot][samples] each) into records, and back for deviceParameters().
__global__ void PackKernel(const float* __restrict__ rs, const float* __restrict__ lnCs,
                           const float* __restrict__ betas, uint64_t n, float4* __restrict__ rec) {
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x)
    rec[i] = make_float4(rs[i], lnCs[i], betas[i], 0.0f);
}
// Rows of the given slots, [n][samples], for deviceParameters().
__global__ void UnpackKernel(const float4* __restrict__ rec, const uint32_t* __restrict__ slots, uint64_t n,
                             uint32_t samples, float* __restrict__ rs, float* __restrict__ lnCs,
                             float* __restrict__ betas) {
  const uint64_t total = n * samples;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += uint64_t(gridDim.x) * blockDim.x) {
    const float4 p = rec[uint64_t(slots[i / samples]) * samples + i % samples];
    rs[i] = p.x, lnCs[i] = p.y, betas[i] = p.z;
  }
}

__device__ __forceinline__ float LogW(float w) { return float(log(double(w))); }

// One nonzero of a chunk: its table slot and ln w, or ok = false for a
// skipped weight (zero, negative). Weights are checked here, where they are
// read anyway: a non-finite one (NaN, ±inf) raises *bad (the host then names
// the element) and is skipped. Slots are in bounds by construction (LookupKernel).
__device__ __forceinline__ bool LoadNonzero(const uint32_t* __restrict__ slots, const float* __restrict__ values,
                                            uint64_t i, unsigned* bad, uint32_t& d, float& lw) {
  d = __ldg(slots + i);
  const float wt = values ? __ldg(values + i) : 1.0f;
  if (!(fabsf(wt) < __int_as_float(0x7f800000))) {
    atomicOr(bad, kFlagBad);
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
                                           const uint32_t* __restrict__ indices, const uint32_t* __restrict__ slots,
                                           const float* __restrict__ values, const float4* __restrict__ rec,
                                           uint32_t samples, uint32_t s) {
  if (pos == kNone) {
    out[o] = kSentinel, out[o + 1] = kSentinel;
    return;
  }
  const float lw = LogW(values ? __ldg(values + pos) : 1.0f);
  const float4 p = __ldg(rec + uint64_t(__ldg(slots + pos)) * samples + s);
  out[o] = __ldg(indices + pos);
  out[o + 1] = uint32_t(__float2int_rz(SampleT(lw, p.x, p.z)));
}

__global__ void FinalizeKernel(const uint32_t* __restrict__ splitRows, uint64_t nsplit,
                               const unsigned long long* __restrict__ scratch, const uint32_t* __restrict__ indices,
                               const uint32_t* __restrict__ slots, const float* __restrict__ values,
                               const float4* __restrict__ rec, uint32_t samples, uint32_t* __restrict__ out) {
  const uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= nsplit * samples) return;
  const uint64_t slot = i / samples;
  const uint32_t s = uint32_t(i % samples);
  const unsigned long long key = scratch[i];
  EmitWinner(out, (uint64_t(splitRows[slot]) * samples + s) * 2, key == ~0ull ? kNone : uint32_t(key), indices, slots,
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
constexpr uint32_t kPrunePass = 32 * kPerLane;  // samples per pass
// Nonzeros checked per step: 8 was the fastest of 2, 4 and 8 on GitHub-shaped
// rows (more loads in flight per warp, and one survivor append per 8 nonzeros
// instead of per 2).
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
__global__ void GenBoundKernel(const float4* __restrict__ rec, uint32_t from, uint32_t to, uint32_t samples,
                               uint32_t stride, __half* __restrict__ bound) {
  const uint64_t n = uint64_t(to) * stride;
  for (uint64_t i = uint64_t(from) * stride + uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x) {
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
                const uint32_t* __restrict__ slots, const float* __restrict__ values, const __half* __restrict__ bound,
                uint32_t stride, const float4* __restrict__ rec, uint32_t samples, uint32_t* __restrict__ out,
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
      if (lane < n) ok = LoadNonzero(slots, values, base + lane, bad, myD, myLw);
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
        EmitWinner(out, (uint64_t(sg.row) * samples + s) * 2, key == ~0ull ? kNone : uint32_t(key), indices, slots,
                   values, rec, samples, s);
      else if (key != ~0ull)
        atomicMin(scratch + uint64_t(sg.split) * samples + s, key);
    }
    __syncwarp();  // the next pass re-initializes W.best
  }
}

struct Device : Pipe {
  uint32_t samples = 0;
  // Column -> slot map and per-slot tables. Batches read them under `lock`
  // shared; adding columns (growing them) takes it exclusively.
  RwLock lock;
  gpu::DeviceBuffer<uint2> table;  // (column, slot), kNoColumn = empty
  uint32_t tableMask = 0, tableShift = 0;
  gpu::DeviceBuffer<uint32_t> colOf;    // slot -> column, half the table's entries
  gpu::DeviceBuffer<unsigned> counter;  // [slots in use, overflow]
  gpu::PinnedBuffer<unsigned> hCounter;
  uint32_t count = 0;               // slots in use (host copy)
  uint64_t slotCap = 0;             // slots rec and bound hold (>= 1: slot 0 always exists)
  gpu::DeviceBuffer<float4> rec;    // [slot][samples] (r, ln c, beta, 0)
  gpu::DeviceBuffer<__half> bound;  // [slot][boundStride], see GenBoundKernel
  uint32_t boundStride = 0;
};

// An empty map of `capacity` entries (a power of two) holding slots [0, count)
// from `keep` (a colOf array), on stream st.
void ResetMap(Device& d, cudaStream_t st, uint64_t capacity, uint32_t count) {
  gpu::DeviceBuffer<uint2> table(capacity, "MinHash column map");
  gpu::DeviceBuffer<uint32_t> colOf(capacity / 2, "MinHash slot columns");
  CUSIM_CUDA_CHECK(cudaMemsetAsync(table.data(), 0xFF, capacity * sizeof(uint2), st));
  const uint32_t mask = uint32_t(capacity - 1), shift = 32 - uint32_t(__builtin_ctzll(capacity));
  if (count) {
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(colOf.data(), d.colOf.data(), uint64_t(count) * 4, cudaMemcpyDeviceToDevice, st));
    RebuildKernel<<<gpu::GridFor(count, kThreads, 0x7fffffffu), kThreads, 0, st>>>(colOf.data(), count, table.data(),
                                                                                   mask, shift);
    CUSIM_LAUNCH_CHECK();
  }
  d.hCounter.data()[0] = count, d.hCounter.data()[1] = 0;
  CUSIM_CUDA_CHECK(
      cudaMemcpyAsync(d.counter.data(), d.hCounter.data(), 2 * sizeof(unsigned), cudaMemcpyHostToDevice, st));
  CUSIM_CUDA_CHECK(cudaStreamSynchronize(st));
  d.table = std::move(table);
  d.colOf = std::move(colOf);
  d.tableMask = mask, d.tableShift = shift;
}

// Room in rec and bound for `slots` slots, keeping slots [0, d.count).
void GrowTables(Device& d, cudaStream_t st, uint64_t slots) {
  if (slots <= d.slotCap) return;
  const uint64_t cap = std::max<uint64_t>(slots, d.slotCap * 2);
  uint64_t freeB = 0, totalB = 0;
  DeviceMemory(d.id, &freeB, &totalB);
  const uint64_t need = cap * d.samples * sizeof(float4) + cap * d.boundStride * sizeof(__half);
  if (need > freeB)
    ThrowOutOfMemory("weighted MinHash parameters on GPU " + std::to_string(d.id) +
                         " (a 16-byte record and a 2-byte "
                         "pruning bound per sample for each of " +
                         std::to_string(slots) + " distinct columns, " + std::to_string(d.samples) + " samples)",
                     need, freeB);
  gpu::DeviceBuffer<float4> rec(cap * d.samples, "MinHash parameter records");
  gpu::DeviceBuffer<__half> bound(cap * d.boundStride, "MinHash pruning bound table");
  if (d.count) {
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(rec.data(), d.rec.data(), uint64_t(d.count) * d.samples * sizeof(float4),
                                     cudaMemcpyDeviceToDevice, st));
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(bound.data(), d.bound.data(), uint64_t(d.count) * d.boundStride * sizeof(__half),
                                     cudaMemcpyDeviceToDevice, st));
  }
  CUSIM_CUDA_CHECK(cudaStreamSynchronize(st));
  d.rec = std::move(rec);
  d.bound = std::move(bound);
  d.slotCap = cap;
}

// Gives every column of cols[0, n) (device memory) a slot and, for seeded
// engines, its parameters. Holds d.lock exclusively; runs on stream st.
void AddColumns(Device& d, cudaStream_t st, const uint32_t* cols, uint64_t n, uint32_t dim, uint64_t seed) {
  try {
    uint32_t total = d.count;
    for (;;) {
      const uint32_t maxCount = uint32_t((uint64_t(d.tableMask) + 1) / 2);
      if (n) {
        InsertKernel<<<gpu::GridFor(n, kThreads, 1u << 20), kThreads, 0, st>>>(
            cols, n, dim, d.table.data(), d.tableMask, d.tableShift, d.colOf.data(), d.counter.data(), maxCount);
        CUSIM_LAUNCH_CHECK();
      }
      CUSIM_CUDA_CHECK(
          cudaMemcpyAsync(d.hCounter.data(), d.counter.data(), 2 * sizeof(unsigned), cudaMemcpyDeviceToHost, st));
      CUSIM_CUDA_CHECK(cudaStreamSynchronize(st));
      total = std::min(d.hCounter.data()[0], maxCount);
      if (!d.hCounter.data()[1]) break;
      // Full: keep the slots that were recorded, double the map, insert again.
      if (uint64_t(d.tableMask) + 1 >= (1ull << 31)) ThrowInvalid("more than 2^30 distinct columns on one GPU");
      ResetMap(d, st, (uint64_t(d.tableMask) + 1) * 2, total);
    }
    if (total == d.count) return;
    GrowTables(d, st, total);
    GenParamsKernel<<<gpu::GridFor(total - d.count, kThreads, 0x7fffffffu), kThreads, 0, st>>>(
        seed, d.colOf.data(), d.count, total, d.samples, d.rec.data());
    CUSIM_LAUNCH_CHECK();
    GenBoundKernel<<<gpu::GridFor(uint64_t(total - d.count) * d.boundStride, kThreads, 1u << 20), kThreads, 0, st>>>(
        d.rec.data(), d.count, total, d.samples, d.boundStride, d.bound.data());
    CUSIM_LAUNCH_CHECK();
    CUSIM_CUDA_CHECK(cudaStreamSynchronize(st));
    d.count = total;
  } catch (...) {
    // Slots past d.count have no parameters: forget them, so later lookups
    // miss instead of reading tables that were never grown or filled.
    ResetMap(d, st, uint64_t(d.tableMask) + 1, d.count);
    throw;
  }
}

// One batch: the column lookup and hash kernels under the device's shared
// lock; a batch that met columns without parameters adds them (exclusive
// lock) and runs again.
void RunBatch(Device& dev, Slot& sl, const BatchJob& job, uint64_t seed, bool injected, Timing* timing) {
  const CsrView& m = *job.m;
  const Batch& bt = *job.bt;
  const uint32_t samples = dev.samples;
  const uint32_t dim = m.cols > 0xFFFFFFFFull ? 0xFFFFFFFFu : uint32_t(m.cols);
  const uint64_t nnz = bt.nnz, nseg = bt.nseg, nsplit = bt.nsplit;
  StageBatch(sl, job, timing);
  sl.dSlot.reserve(job.need->nnz, "MinHash column slots");
  sl.dScratch.reserve(std::max<uint64_t>(job.need->nsplit * samples, 1), "MinHash split-row minima");
  const auto t1 = std::chrono::steady_clock::now();
  cudaStream_t st = sl.stream;
  const float* vals = m.values ? sl.dVal.data() : nullptr;
  for (int attempt = 0;; ++attempt) {
    {
      // The tables cannot move while this batch's kernels read them.
      std::shared_lock<RwLock> read(dev.lock);
      sl.e1.record(st);
      if (nsplit) CUSIM_CUDA_CHECK(cudaMemsetAsync(sl.dScratch.data(), 0xFF, nsplit * samples * 8, st));
      CUSIM_CUDA_CHECK(cudaMemsetAsync(sl.dBad.data(), 0, sizeof(unsigned), st));
      if (nnz) {
        LookupKernel<<<gpu::GridFor(nnz, kThreads, 1u << 16), kThreads, 0, st>>>(
            sl.dIdx.data(), nnz, dim, dev.table.data(), dev.tableMask, dev.tableShift, sl.dSlot.data(), sl.dBad.data());
        CUSIM_LAUNCH_CHECK();
      }
      const unsigned grid = gpu::GridFor(nseg * 32, kPruneThreads, 0x7fffffffu);
      PruneKernel<kPruneGroup><<<grid, kPruneThreads, 0, st>>>(
          sl.dSeg.data(), nseg, sl.dIdx.data(), sl.dSlot.data(), vals, dev.bound.data(), dev.boundStride,
          dev.rec.data(), samples, sl.dOut.data(), sl.dScratch.data(), sl.dBad.data());
      CUSIM_LAUNCH_CHECK();
      if (nsplit) {
        FinalizeKernel<<<gpu::GridFor(nsplit * samples, kThreads, 0x7fffffffu), kThreads, 0, st>>>(
            sl.dSplit.data(), nsplit, sl.dScratch.data(), sl.dIdx.data(), sl.dSlot.data(), vals, dev.rec.data(),
            samples, sl.dOut.data());
        CUSIM_LAUNCH_CHECK();
      }
      sl.e2.record(st);
      QueueDownload(sl, job);
      WaitBatch(sl);
    }
    timing->kernelMs += gpu::ElapsedMs(sl.e1, sl.e2);
    timing->transferMs += (attempt == 0 ? gpu::ElapsedMs(sl.e0, sl.e1) : 0.0) + gpu::ElapsedMs(sl.e2, sl.e3);
    const unsigned flags = *sl.hBad.data();
    if (flags & kFlagBad) throw BadInput{};
    if (!(flags & kFlagMiss)) break;
    // Columns without parameters: an error for injected tables (the host
    // names the first one); otherwise add them and hash the batch again.
    if (injected || attempt > 0) throw BadInput{};
    std::unique_lock<RwLock> write(dev.lock);
    AddColumns(dev, st, sl.dIdx.data(), nnz, dim, seed);
  }
  timing->waitMs += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
  CopyOut(sl, job, timing);
}

struct CudaEngine {
  uint32_t dim = 0, samples = 0;
  uint64_t seed = 0;
  ColumnParams* injected = nullptr;  // the host tables of an injected engine (owned by the glue)
  std::vector<std::unique_ptr<Device>> devs;
  ~CudaEngine() {
    for (auto& d : devs) {
      gpu::DeviceGuard g(d->id);
      d.reset();
    }
  }
};

std::shared_ptr<CudaEngine> CreateCudaEngine(const std::vector<int>& devices, uint64_t seed, uint32_t dim,
                                             uint32_t samples, ColumnParams* injected) {
  auto e = std::make_shared<CudaEngine>();
  e->dim = dim, e->samples = samples, e->seed = seed, e->injected = injected;
  for (int id : devices) {
    gpu::DeviceGuard g(id);
    auto d = std::make_unique<Device>();
    d->id = id;
    d->samples = samples;
    d->boundStride = (samples + 3) & ~3u;
    cudaStream_t st = d->slots[0]->stream;
    d->counter.reset(2, "MinHash column count");
    d->hCounter.reserve(2, "MinHash column count");
    uint64_t capacity = 1u << 12;
    const uint64_t n = injected ? injected->size() : 0;
    while (capacity < 2 * n) capacity *= 2;
    if (capacity > (1ull << 31)) ThrowInvalid("more than 2^30 distinct columns on one GPU");
    ResetMap(*d, st, capacity, 0);
    GrowTables(*d, st, std::max<uint64_t>(1, n));
    if (n) {
      // Slots in the host's order: column injected->column(i) is slot i.
      std::shared_lock<RwLock> read(injected->lock());
      std::vector<uint32_t> cols(n);
      std::vector<float> t[3];
      for (auto& v : t) v.resize(n * samples);
      for (uint64_t i = 0; i < n; ++i) {
        cols[i] = injected->column(uint32_t(i));
        std::memcpy(t[0].data() + i * samples, injected->rs(uint32_t(i)), samples * 4);
        std::memcpy(t[1].data() + i * samples, injected->lnCs(uint32_t(i)), samples * 4);
        std::memcpy(t[2].data() + i * samples, injected->betas(uint32_t(i)), samples * 4);
      }
      const uint64_t total = n * samples;
      gpu::DeviceBuffer<float> tr(total, "MinHash injected rs"), tc(total, "MinHash injected lnCs"),
          tb(total, "MinHash injected betas");
      CUSIM_CUDA_CHECK(cudaMemcpy(tr.data(), t[0].data(), total * 4, cudaMemcpyHostToDevice));
      CUSIM_CUDA_CHECK(cudaMemcpy(tc.data(), t[1].data(), total * 4, cudaMemcpyHostToDevice));
      CUSIM_CUDA_CHECK(cudaMemcpy(tb.data(), t[2].data(), total * 4, cudaMemcpyHostToDevice));
      CUSIM_CUDA_CHECK(cudaMemcpy(d->colOf.data(), cols.data(), n * 4, cudaMemcpyHostToDevice));
      PackKernel<<<gpu::GridFor(total, kThreads, 1u << 20), kThreads>>>(tr.data(), tc.data(), tb.data(), total,
                                                                        d->rec.data());
      CUSIM_LAUNCH_CHECK();
      RebuildKernel<<<gpu::GridFor(n, kThreads, 0x7fffffffu), kThreads>>>(d->colOf.data(), uint32_t(n), d->table.data(),
                                                                          d->tableMask, d->tableShift);
      CUSIM_LAUNCH_CHECK();
      GenBoundKernel<<<gpu::GridFor(n * d->boundStride, kThreads, 1u << 20), kThreads>>>(
          d->rec.data(), 0, uint32_t(n), samples, d->boundStride, d->bound.data());
      CUSIM_LAUNCH_CHECK();
      d->hCounter.data()[0] = uint32_t(n), d->hCounter.data()[1] = 0;
      CUSIM_CUDA_CHECK(cudaMemcpy(d->counter.data(), d->hCounter.data(), 2 * sizeof(unsigned), cudaMemcpyHostToDevice));
      CUSIM_CUDA_CHECK(cudaDeviceSynchronize());
      d->count = uint32_t(n);
    }
    e->devs.push_back(std::move(d));
  }
  return e;
}

void HashCuda(CudaEngine& e, const CsrView& m, uint64_t rowStart, uint64_t rowEnd, uint32_t* out, const Tuning& tuning,
              Timing* timing, const CancelToken& cancel) {
  const int perDevice = tuning.overlap ? kSlots : 1;
  std::vector<Pipe*> pipes;
  for (auto& d : e.devs) pipes.push_back(d.get());
  const bool bad = RunBatches(
      pipes, m, rowStart, rowEnd, out, 2 * e.samples, true, perDevice,
      [&](size_t k, Slot& sl, const BatchJob& job, Timing* t) {
        RunBatch(*e.devs[k], sl, job, e.seed, e.injected != nullptr, t);
      },
      timing, cancel);
  if (bad) {
    // The full checks name the first bad element of the slice, whichever batch met one.
    CsrView part = m;
    part.rows = rowEnd - rowStart;
    part.indptr = m.indptr + rowStart;
    ValidateCsr(part, "matrix");
    RejectNonFiniteWeights(part, "matrix");
    if (e.injected) e.injected->Ensure(m, rowStart, rowEnd, cancel, "matrix");
    ThrowInvalid("matrix has an out-of-range column or a non-finite weight");
  }
}

void DeviceParamsCuda(CudaEngine& e, size_t slot, const uint32_t* cols, size_t n, float* rs, float* lnCs,
                      float* betas) {
  Device& d = *e.devs.at(slot);
  gpu::DeviceGuard g(d.id);
  if (n == 0) return;
  if (e.injected) e.injected->Gather(cols, n, rs, lnCs, betas);  // names a column without parameters
  const int s = d.Acquire();
  struct Give {
    Device& d;
    int s;
    ~Give() { d.Release(s); }
  } give{d, s};
  Slot& sl = *d.slots[s];
  cudaStream_t st = sl.stream;
  gpu::DeviceBuffer<uint32_t> dc(n, "MinHash parameter columns"), ds(n, "MinHash parameter slots");
  gpu::DeviceBuffer<float> tr(n * e.samples, "MinHash rs copy"), tc(n * e.samples, "MinHash lnCs copy"),
      tb(n * e.samples, "MinHash betas copy");
  gpu::DeviceBuffer<unsigned> flags(1, "MinHash lookup flags");
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(dc.data(), cols, n * 4, cudaMemcpyHostToDevice, st));
  if (!e.injected) {
    std::unique_lock<RwLock> write(d.lock);
    AddColumns(d, st, dc.data(), n, e.dim, e.seed);
  }
  std::shared_lock<RwLock> read(d.lock);
  CUSIM_CUDA_CHECK(cudaMemsetAsync(flags.data(), 0, sizeof(unsigned), st));
  LookupKernel<<<gpu::GridFor(n, kThreads, 1u << 16), kThreads, 0, st>>>(
      dc.data(), n, e.dim, d.table.data(), d.tableMask, d.tableShift, ds.data(), flags.data());
  CUSIM_LAUNCH_CHECK();
  UnpackKernel<<<gpu::GridFor(n * e.samples, kThreads, 1u << 20), kThreads, 0, st>>>(
      d.rec.data(), ds.data(), n, e.samples, tr.data(), tc.data(), tb.data());
  CUSIM_LAUNCH_CHECK();
  unsigned hf = 0;
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(&hf, flags.data(), sizeof(unsigned), cudaMemcpyDeviceToHost, st));
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(rs, tr.data(), n * e.samples * 4, cudaMemcpyDeviceToHost, st));
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(lnCs, tc.data(), n * e.samples * 4, cudaMemcpyDeviceToHost, st));
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(betas, tb.data(), n * e.samples * 4, cudaMemcpyDeviceToHost, st));
  CUSIM_CUDA_CHECK(cudaStreamSynchronize(st));
  if (hf) throw Error(kInternal, "deviceParameters: a column has no slot on GPU " + std::to_string(d.id));
}

class CudaHasher final : public WeightedHasher {
 public:
  CudaHasher(std::shared_ptr<ColumnParams> params, uint32_t dim, const std::vector<int>& devices, const Tuning& tuning)
      : params_(std::move(params)), dim_(dim), devices_(devices), tuning_(tuning) {}

  void Hash(const CsrView& m, uint32_t* out, Timing* timing, const CancelToken& cancel) override {
    ValidateIndptr(m, "matrix");  // columns and weights are checked by the kernels that read them (LoadNonzero)
    HashCuda(Engine(), m, 0, m.rows, out, tuning_, timing, cancel);
  }

  void DeviceParams(size_t slot, const uint32_t* cols, size_t n, float* rs, float* lnCs, float* betas) override {
    DeviceParamsCuda(Engine(), slot, cols, n, rs, lnCs, betas);
  }

 private:
  CudaEngine& Engine() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!engine_) {
      // Injected tables are uploaded; seeded ones are generated on each device as columns appear.
      engine_ = CreateCudaEngine(devices_, params_->seed(), dim_, params_->samples(),
                                 params_->injected() ? params_.get() : nullptr);
    }
    return *engine_;
  }

  std::shared_ptr<ColumnParams> params_;
  uint32_t dim_;
  std::vector<int> devices_;
  Tuning tuning_;
  std::mutex mutex_;
  std::shared_ptr<CudaEngine> engine_;
};

}  // namespace

std::unique_ptr<WeightedHasher> MakeCudaHasher(std::shared_ptr<ColumnParams> params, uint32_t dim,
                                               const std::vector<int>& devices, const Tuning& tuning) {
  return std::make_unique<CudaHasher>(std::move(params), dim, devices, tuning);
}

}  // namespace minhash
}  // namespace cusim
