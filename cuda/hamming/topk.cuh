// Exact top-k epilogues over integer distances: sampled and bounded
// histograms, the threshold per query, the collect pass and the final sort.
// The exact scan's epilogue; its ordered collect, sort and write-out are in
// common.cuh, which EWH's re-rank shares.
// Internal to cuda/hamming.cu, which includes every kernel header: one
// translation unit, so the kernels keep internal linkage.
#pragma once
#include "common.cuh"

namespace cusim {
namespace hamming {
namespace {

// ---- top-k epilogues ------------------------------------------------------------

struct HistAll {
  uint32_t* hist;
  uint32_t bins;
  __device__ uint32_t Param(uint32_t) const { return 0; }
  // Largest distance the epilogue acts on (mma2 skips the rest): every distance here.
  __device__ int32_t Limit(uint32_t) const { return 1 << 20; }
  __device__ void operator()(uint32_t q, uint64_t, uint32_t d, uint32_t) const {
    atomicAdd(hist + uint64_t(q) * bins + d, 1u);
  }
};

struct HistBound {
  uint32_t* hist;
  uint32_t bins;
  const uint32_t* bound;
  __device__ uint32_t Param(uint32_t q) const { return __ldg(bound + q); }
  __device__ int32_t Limit(uint32_t b) const { return int32_t(b); }
  __device__ void operator()(uint32_t q, uint64_t, uint32_t d, uint32_t b) const {
    if (d <= b) atomicAdd(hist + uint64_t(q) * bins + d, 1u);
  }
};

struct Collect {
  const uint32_t* thr;
  uint32_t* lessCnt;
  unsigned long long* less;
  uint32_t k;
  uint32_t* tieCnt;
  uint32_t* ties;
  __device__ uint32_t Param(uint32_t q) const { return __ldg(thr + q); }
  __device__ int32_t Limit(uint32_t t) const { return int32_t(t); }
  __device__ void operator()(uint32_t q, uint64_t row, uint32_t d, uint32_t t) const {
    if (d < t) {
      const uint32_t s = atomicAdd(lessCnt + q, 1u);
      less[uint64_t(q) * k + s] = (uint64_t(d) << 32) | row;
    } else if (d == t) {
      const uint32_t s = atomicAdd(tieCnt + q, 1u);
      if (s < kTieCap) ties[uint64_t(q) * kTieCap + s] = uint32_t(row);
    }
  }
};

// Fast path: keeps every pair within the sampled bound; a query whose count
// passes kCandCap is redone by the histogram passes.
struct CollectBound {
  const uint32_t* bound;
  uint32_t* cnt;
  unsigned long long* cand;
  __device__ uint32_t Param(uint32_t q) const { return __ldg(bound + q); }
  __device__ int32_t Limit(uint32_t b) const { return int32_t(b); }
  __device__ void operator()(uint32_t q, uint64_t row, uint32_t d, uint32_t b) const {
    if (d <= b) {
      const uint32_t s = atomicAdd(cnt + q, 1u);
      if (s < kCandCap) cand[uint64_t(q) * kCandCap + s] = (uint64_t(d) << 32) | row;
    }
  }
};

// Per query: the smallest d whose cumulative count reaches want[q] (or `bins - 1`
// when it never does), and the count strictly below it.
__global__ void ThresholdKernel(const uint32_t* __restrict__ hist, uint32_t bins, uint32_t nq, uint32_t want,
                                uint32_t* __restrict__ thr, uint32_t* __restrict__ below) {
  const uint32_t q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= nq) return;
  const uint32_t* h = hist + uint64_t(q) * bins;
  uint32_t cum = 0, t = bins - 1;
  for (uint32_t d = 0; d < bins; ++d) {
    if (cum + h[d] >= want) {
      t = d;
      break;
    }
    cum += h[d];
  }
  thr[q] = t;
  if (below) below[q] = cum;
}

// One block per query: gathers d < D and the ties at D, sorts, writes k results.
__global__ void __launch_bounds__(kThreads)
    FinalizeKernel(const uint32_t* __restrict__ codes, uint32_t wp, uint64_t n, const uint32_t* __restrict__ queries,
                   const uint32_t* __restrict__ thr, const uint32_t* __restrict__ lessCnt,
                   const unsigned long long* __restrict__ less, const uint32_t* __restrict__ tieCnt,
                   const uint32_t* __restrict__ ties, uint32_t k, uint32_t bits, uint32_t* __restrict__ outIds,
                   uint16_t* __restrict__ outDist) {
  __shared__ unsigned long long keys[kMaxK + kTieCap];
  __shared__ BlockScan::TempStorage tmp;
  extern __shared__ uint32_t sq[];
  const uint32_t q = blockIdx.x;
  const uint32_t kk = uint32_t(n < k ? n : k), L = lessCnt[q], T = tieCnt[q], D = thr[q];
  const uint32_t need = kk - L;
  for (uint32_t i = threadIdx.x; i < L; i += kThreads) keys[i] = less[uint64_t(q) * k + i];
  uint32_t total;
  if (T <= kTieCap) {
    for (uint32_t i = threadIdx.x; i < T; i += kThreads)
      keys[L + i] = (uint64_t(D) << 32) | ties[uint64_t(q) * kTieCap + i];
    total = L + T;
  } else {
    // More ties than the buffer holds: take the first `need` ids at D by an in-order scan.
    for (uint32_t i = threadIdx.x; i < wp; i += kThreads) sq[i] = queries[uint64_t(q) * wp + i];
    __syncthreads();
    CollectOrdered(codes, wp, sq, nullptr, n, D, need, L, false, nullptr, keys, tmp);
    total = L + need;
  }
  const uint32_t p = Pow2(total);
  for (uint32_t i = total + threadIdx.x; i < p; i += kThreads) keys[i] = ~0ull;
  BitonicSort(keys, p);
  WriteOut(keys, kk, k, bits, outIds + uint64_t(q) * k, outDist + uint64_t(q) * k);
}

// One block per query of the fast path: sorts the kept pairs and writes the first k.
__global__ void __launch_bounds__(kThreads)
    SortCandidatesKernel(const uint32_t* __restrict__ cnt, const unsigned long long* __restrict__ cand, uint64_t n,
                         uint32_t k, uint32_t bits, uint32_t* __restrict__ outIds, uint16_t* __restrict__ outDist) {
  __shared__ unsigned long long keys[kCandCap];
  const uint32_t q = blockIdx.x, c = cnt[q];
  if (c > kCandCap) return;  // overflow: the host reruns this query through the histogram passes
  const uint32_t kk = uint32_t(n < k ? n : k);
  for (uint32_t i = threadIdx.x; i < c; i += kThreads) keys[i] = cand[uint64_t(q) * kCandCap + i];
  const uint32_t p = Pow2(c);
  for (uint32_t i = c + threadIdx.x; i < p; i += kThreads) keys[i] = ~0ull;
  BitonicSort(keys, p);
  WriteOut(keys, kk, k, bits, outIds + uint64_t(q) * k, outDist + uint64_t(q) * k);
}

}  // namespace
}  // namespace hamming
}  // namespace cusim
