// Error Weighted Hashing: bucket keys, CSR buckets by count / scan / scatter,
// atomic scoring over the probes, an in-order shortlist and the exact re-rank.
// Internal to cuda/hamming.cu, which includes every kernel header: one
// translation unit, so the kernels keep internal linkage.
#pragma once
#include "common.cuh"

namespace cusim {
namespace hamming {
namespace {

// ---- EWH -------------------------------------------------------------------------

__global__ void KeysKernel(const uint32_t* __restrict__ codes, uint64_t rows, uint32_t wp,
                           const uint32_t* __restrict__ pos, uint32_t tables, uint32_t h, uint32_t* __restrict__ keys,
                           unsigned long long* __restrict__ counts) {
  const uint32_t buckets = 1u << h;
  for (uint64_t r = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; r < rows; r += uint64_t(gridDim.x) * blockDim.x) {
    for (uint32_t t = 0; t < tables; ++t) {
      const uint32_t key = KeyOf(codes + r * wp, pos + t * h, h);
      keys[t * rows + r] = key;
      if (counts) atomicAdd(counts + t * buckets + key, 1ull);
    }
  }
}

__global__ void ScatterKernel(const uint32_t* __restrict__ keys, uint64_t rows, uint32_t tables, uint32_t h,
                              unsigned long long* __restrict__ cursor, uint32_t* __restrict__ ids) {
  const uint32_t buckets = 1u << h;
  for (uint64_t r = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; r < rows; r += uint64_t(gridDim.x) * blockDim.x) {
    for (uint32_t t = 0; t < tables; ++t) ids[atomicAdd(cursor + t * buckets + keys[t * rows + r], 1ull)] = uint32_t(r);
  }
}

// Block (table * probes + probe, query): every id in the probed bucket gains the probe's weight.
__global__ void ScoreKernel(const uint32_t* __restrict__ qkeys, const unsigned long long* __restrict__ offsets,
                            const uint32_t* __restrict__ ids, const uint32_t* __restrict__ masks,
                            const uint32_t* __restrict__ maskW, uint32_t probes, uint32_t tables, uint32_t h,
                            uint64_t n, uint32_t* __restrict__ scores) {
  const uint32_t t = blockIdx.x / probes, p = blockIdx.x % probes, q = blockIdx.y;
  const uint32_t w = maskW[p];
  if (w == 0) return;
  const uint32_t b = t * (1u << h) + (qkeys[q * tables + t] ^ masks[p]);
  const unsigned long long beg = offsets[b], end = offsets[b + 1];
  uint32_t* s = scores + uint64_t(q) * n;
  for (unsigned long long j = beg + threadIdx.x; j < end; j += blockDim.x) atomicAdd(s + ids[j], w);
}

// One block per query: the shortlist in id order. L > 0: top-L by (score desc, id);
// else every id with score >= minCut.
__global__ void __launch_bounds__(kThreads)
    ShortlistKernel(const uint32_t* __restrict__ scores, uint64_t n, uint32_t L, uint32_t minCut,
                    uint32_t* __restrict__ cand, uint32_t* __restrict__ candCount,
                    unsigned long long* __restrict__ scored) {
  __shared__ uint32_t hist[kMaxScore + 2];
  __shared__ BlockScan::TempStorage tmp;
  __shared__ uint32_t sCut;
  __shared__ unsigned long long sAtCut;
  const uint32_t q = blockIdx.x;
  const uint32_t* s = scores + uint64_t(q) * n;
  uint32_t nonzero = 0;
  for (uint64_t i = threadIdx.x; i < n; i += kThreads) nonzero += s[i] != 0;
  if (L > 0) {
    for (uint32_t i = threadIdx.x; i < kMaxScore + 2; i += kThreads) hist[i] = 0;
    __syncthreads();
    for (uint64_t i = threadIdx.x; i < n; i += kThreads)
      if (s[i]) atomicAdd(hist + s[i], 1u);
    __syncthreads();
    if (threadIdx.x == 0) {
      uint64_t nz = 0;
      for (uint32_t v = 1; v < kMaxScore + 2; ++v) nz += hist[v];
      hist[0] = uint32_t(n - nz);
      uint64_t above = 0;
      uint32_t cut = 0;
      unsigned long long atCut = hist[0];
      for (int v = kMaxScore + 1; v >= 0; --v) {
        if (above + hist[v] >= L) {
          cut = uint32_t(v);
          atCut = L - above;
          break;
        }
        above += hist[v];
      }
      sCut = cut;
      sAtCut = atCut;
    }
  } else if (threadIdx.x == 0) {
    sCut = minCut;
    sAtCut = ~0ull;
  }
  __syncthreads();
  const uint32_t cut = sCut;
  const unsigned long long atCut = sAtCut;
  unsigned long long tiesTaken = 0;
  uint32_t out = 0;
  for (uint64_t base = 0; base < n; base += kThreads) {
    const uint64_t i = base + threadIdx.x;
    const bool in = i < n;
    const uint32_t v = in ? s[i] : 0u;
    uint32_t rank, agg, pos, inc;
    BlockScan(tmp).ExclusiveSum(in && v == cut ? 1u : 0u, rank, agg);
    __syncthreads();
    const bool take = in && (v > cut || (v == cut && tiesTaken + rank < atCut));
    BlockScan(tmp).ExclusiveSum(take ? 1u : 0u, pos, inc);
    __syncthreads();
    if (take) cand[uint64_t(q) * n + out + pos] = uint32_t(i);
    tiesTaken += agg;
    out += inc;
  }
  if (threadIdx.x == 0) candCount[q] = out;
  if (nonzero) atomicAdd(scored, (unsigned long long)nonzero);
}

// One block per query: exact top-k of the shortlist by (distance, id).
__global__ void __launch_bounds__(kThreads)
    RerankKernel(const uint32_t* __restrict__ codes, uint32_t wp, uint64_t n, const uint32_t* __restrict__ queries,
                 const uint32_t* __restrict__ cand, const uint32_t* __restrict__ candCount,
                 uint32_t* __restrict__ ghist, uint32_t k, uint32_t bits, uint32_t* __restrict__ outIds,
                 uint16_t* __restrict__ outDist) {
  __shared__ unsigned long long keys[kMaxK];
  __shared__ BlockScan::TempStorage tmp;
  __shared__ uint32_t sD, sBelow, sLess;
  extern __shared__ uint32_t sq[];
  const uint32_t q = blockIdx.x, bins = bits + 1;
  const uint32_t* cq = cand + uint64_t(q) * n;
  const uint32_t c = candCount[q];
  const uint32_t kk = min(k, c);
  uint32_t* hist = ghist + uint64_t(q) * bins;  // zeroed by the host
  for (uint32_t i = threadIdx.x; i < wp; i += kThreads) sq[i] = queries[uint64_t(q) * wp + i];
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < c; i += kThreads)
    atomicAdd(hist + RowDistance(codes + uint64_t(cq[i]) * wp, sq, wp), 1u);
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t cum = 0, t = bits;
    for (uint32_t d = 0; d < bins; ++d) {
      if (cum + hist[d] >= kk) {
        t = d;
        break;
      }
      cum += hist[d];
    }
    sD = t;
    sBelow = cum;
    sLess = 0;
  }
  __syncthreads();
  if (kk > 0) CollectOrdered(codes, wp, sq, cq, c, sD, kk - sBelow, sBelow, true, &sLess, keys, tmp);
  __syncthreads();
  const uint32_t p = Pow2(kk);
  for (uint32_t i = kk + threadIdx.x; i < p; i += kThreads) keys[i] = ~0ull;
  BitonicSort(keys, p);
  WriteOut(keys, kk, k, bits, outIds + uint64_t(q) * k, outDist + uint64_t(q) * k);
}

__global__ void QueryKeysKernel(const uint32_t* __restrict__ queries, uint32_t nq, uint32_t wp,
                                const uint32_t* __restrict__ pos, uint32_t tables, uint32_t h,
                                uint32_t* __restrict__ qkeys) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= nq * tables) return;
  const uint32_t q = i / tables, t = i % tables;
  qkeys[i] = KeyOf(queries + uint64_t(q) * wp, pos + t * h, h);
}

}  // namespace
}  // namespace hamming
}  // namespace cusim
