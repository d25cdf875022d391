// Hamming k-NN on the GPU.
// Exact: tiles of queries x database rows produce distances through either
// scalar __popc or the 1-bit tensor-core MMA (|a| + |b| - 2|a AND b|). Top-k is
// exact with the (distance, id) rule in three passes over integer distances:
// a sampled histogram bounds the k-th distance, a bounded histogram finds it
// (D), and a collect pass keeps every d < D and the ties at D, which a final
// per-query block sorts (falling back to an in-order scan when ties overflow).
// EWH: CSR buckets built by count / scan / scatter, atomic scoring over the
// probes within e bits, an in-order shortlist, then an exact re-rank.
#include <cub/cub.cuh>

#include <algorithm>
#include <vector>

#include "../native/gpu.h"
#include "../native/hamming.h"
#include "gpu.cuh"

namespace cusim {
namespace hamming {

// Queries padded to wp words plus their popcounts, on the device.
struct QueryBatch {
  gpu::DeviceBuffer<uint32_t> codes, pops;
  std::vector<uint32_t> host;
};

struct DeviceIndex {
  int device = 0;
  uint64_t rows = 0;
  uint32_t wp = 0;  // words per row padded to a multiple of 8 (one 256-bit MMA k-step)
  gpu::DeviceBuffer<uint32_t> codes, pops;
  bool built = false;
  gpu::DeviceBuffer<uint32_t> positions, ids, masks, maskWeights;
  gpu::DeviceBuffer<unsigned long long> offsets;  // tables * 2^h + 1 global positions into ids
  // Exact-search scratch, kept between searches (which the index mutex serializes) so that a
  // search allocates nothing once warm: the candidate buffer alone is 32 KiB per query.
  QueryBatch exQueries;
  gpu::DeviceBuffer<uint32_t> exHist, exBound, exCandCnt, exOutIds;
  gpu::DeviceBuffer<unsigned long long> exCand;
  gpu::DeviceBuffer<uint16_t> exOutDist;
};

namespace {

constexpr int kThreads = 256;
constexpr uint32_t kTieCap = 1024;  // >= kMaxK, so an overflow is always resolvable in order
constexpr uint32_t kCandCap = 4096;  // fast path: every d <= bound fits here for nearly all queries
using BlockScan = cub::BlockScan<uint32_t, kThreads>;

inline uint32_t PaddedWords(uint32_t bits) { return (bits / 32 + 7) / 8 * 8; }

// Copies rows of w words into rows of wp words (zero padding keeps distances and ANDs unchanged).
std::vector<uint32_t> Pad(const uint32_t* src, uint64_t rows, uint32_t w, uint32_t wp) {
  std::vector<uint32_t> out(rows * wp, 0);
  for (uint64_t r = 0; r < rows; ++r) std::copy(src + r * w, src + r * w + w, out.begin() + r * wp);
  return out;
}

__device__ __forceinline__ uint32_t KeyOf(const uint32_t* code, const uint32_t* pos, uint32_t h) {
  uint32_t key = 0;
  for (uint32_t j = 0; j < h; ++j) key |= ((code[pos[j] >> 5] >> (pos[j] & 31)) & 1u) << j;
  return key;
}

__device__ __forceinline__ uint32_t RowDistance(const uint32_t* row, const uint32_t* q, uint32_t wp) {
  uint32_t d = 0;
  for (uint32_t i = 0; i < wp; ++i) d += __popc(row[i] ^ q[i]);
  return d;
}

__global__ void PopsKernel(const uint32_t* __restrict__ codes, uint64_t rows, uint32_t wp, uint32_t* __restrict__ pops) {
  for (uint64_t r = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; r < rows; r += uint64_t(gridDim.x) * blockDim.x) {
    uint32_t c = 0;
    for (uint32_t i = 0; i < wp; ++i) c += __popc(codes[r * wp + i]);
    pops[r] = c;
  }
}

// ---- distance tiles -----------------------------------------------------------
// Both tile kernels call epi(query, row, distance, epi.Param(query)) for every pair; `stride`
// (in rows) lets the sample pass read every stride-th row.

template <int QT, class Epi>
__global__ void __launch_bounds__(kThreads) PopcTile(const uint32_t* __restrict__ codes, uint32_t wp, uint64_t nrows,
                                                     uint64_t stride, const uint32_t* __restrict__ queries, uint32_t nq,
                                                     Epi epi) {
  __shared__ uint32_t sdb[32 * (kThreads + 1)];  // [word][row], padded against bank conflicts
  __shared__ uint32_t sq[QT * 32];
  const uint32_t q0 = blockIdx.x * QT;
  for (uint64_t r0 = uint64_t(blockIdx.y) * kThreads; r0 < nrows; r0 += uint64_t(gridDim.y) * kThreads) {
    uint32_t acc[QT];
#pragma unroll
    for (int i = 0; i < QT; ++i) acc[i] = 0;
    for (uint32_t c0 = 0; c0 < wp; c0 += 32) {
      const uint32_t wc = min(32u, wp - c0);
      __syncthreads();
      // Consecutive threads read consecutive words of consecutive rows: coalesced.
      for (uint32_t i = threadIdx.x; i < kThreads * wc; i += kThreads) {
        const uint32_t rr = i / wc, ww = i % wc;
        const uint64_t row = r0 + rr;
        sdb[ww * (kThreads + 1) + rr] = row < nrows ? codes[row * stride * wp + c0 + ww] : 0u;
      }
      for (uint32_t i = threadIdx.x; i < QT * wc; i += kThreads) {
        const uint32_t qq = i / wc, ww = i % wc;
        sq[qq * 32 + ww] = q0 + qq < nq ? queries[uint64_t(q0 + qq) * wp + c0 + ww] : 0u;
      }
      __syncthreads();
      for (uint32_t ww = 0; ww < wc; ++ww) {
        const uint32_t x = sdb[ww * (kThreads + 1) + threadIdx.x];
#pragma unroll
        for (int qq = 0; qq < QT; ++qq) acc[qq] += __popc(x ^ sq[qq * 32 + ww]);
      }
    }
    const uint64_t row = r0 + threadIdx.x;
    if (row < nrows) {
#pragma unroll
      for (int qq = 0; qq < QT; ++qq)
        if (q0 + qq < nq) epi(q0 + qq, row, acc[qq], epi.Param(q0 + qq));
    }
  }
}

// One warp computes 16 queries x 64 rows with mma.m16n8k256 b1 (AND + popc):
// A (16 x 256 bits) holds queries, B (256 x 8 bits, column-major) 8 rows.
// Fragments: lane = 4 * g + c; a0/a2 = query g words c / c+4, a1/a3 = query
// g+8; b0/b1 = row g words c / c+4; C[i] = (query g + 8 * (i >> 1), row 2c + (i & 1)).
template <class Epi>
__global__ void __launch_bounds__(128) MmaTile(const uint32_t* __restrict__ codes, const uint32_t* __restrict__ pops,
                                               uint32_t wp, uint64_t nrows, uint64_t stride,
                                               const uint32_t* __restrict__ queries, const uint32_t* __restrict__ qpops,
                                               uint32_t nq, Epi epi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int kTiles = 8;
  const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
  const uint32_t qa = blockIdx.x * 16 + g, qb = qa + 8;
  const uint32_t* pa = queries + uint64_t(min(qa, nq - 1)) * wp;
  const uint32_t* pb = queries + uint64_t(min(qb, nq - 1)) * wp;
  // Per-query epilogue thresholds, loaded once instead of per pair.
  const uint32_t parA = qa < nq ? epi.Param(qa) : 0u, parB = qb < nq ? epi.Param(qb) : 0u;
  for (uint64_t r0 = (uint64_t(blockIdx.y) * 4 + warp) * 64; r0 < nrows; r0 += uint64_t(gridDim.y) * 256) {
    int acc[kTiles][4];
#pragma unroll
    for (int t = 0; t < kTiles; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0;
    for (uint32_t kc = 0; kc < wp; kc += 8) {
      const uint32_t a0 = qa < nq ? pa[kc + c] : 0u, a2 = qa < nq ? pa[kc + c + 4] : 0u;
      const uint32_t a1 = qb < nq ? pb[kc + c] : 0u, a3 = qb < nq ? pb[kc + c + 4] : 0u;
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
        const uint64_t row = r0 + t * 8 + g;
        uint32_t b0 = 0, b1 = 0;
        if (row < nrows) {
          const uint32_t* p = codes + row * stride * wp + kc;
          b0 = __ldg(p + c);
          b1 = __ldg(p + c + 4);
        }
        asm volatile(
            "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc "
            "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+r"(acc[t][0]), "+r"(acc[t][1]), "+r"(acc[t][2]), "+r"(acc[t][3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
      }
    }
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint32_t q = i < 2 ? qa : qb;
        const uint64_t row = r0 + t * 8 + 2 * c + (i & 1);
        if (q < nq && row < nrows) epi(q, row, qpops[q] + pops[row * stride] - 2u * uint32_t(acc[t][i]), i < 2 ? parA : parB);
      }
    }
  }
#endif
}

// mma2: one warp holds 32 queries (two m16 fragments) for its whole sweep and
// computes 32 x 64 pairs per step (16 MMAs per 256-bit k-step); the 8 warps of a
// CTA take different queries over the same rows, so a row tile is fetched from
// L2 once per CTA and served to the other warps by L1. The grid's y dimension
// splits the rows so that ~8 CTAs per SM run however few queries there are.
// Any bijection of 32-bit words onto the MMA's k slots gives the same AND
// count when A and B use the same one: lane c takes words 2c and 2c+1 of each
// 8-word k-step (one 8-byte load) as a0/a2 and b0/b1 (PTX: a0 and b0 cover
// k = 32c.., a2 and b1 k = 128 + 32c..), so a warp's B load reads 8 whole rows.
// Epilogue: d <= limit  <=>  2 * and - pop(row) >= pop(query) - limit, so a
// lane first takes the max of 2 * and - pop(row) over its 16 rows per query
// and only walks the rows of a query whose max passes (rare once bounded).
constexpr int kM2Warps = 8;
constexpr uint32_t kM2Queries = 32 * kM2Warps;
constexpr int kM2Tiles = 4;  // n8 fragments per warp step
constexpr uint32_t kM2Rows = 8 * kM2Tiles;

__device__ __forceinline__ void Mma256(int (&acc)[4], const uint32_t (&a)[4], uint2 b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b.x), "r"(b.y));
#endif
}

// a[m] for m-fragment m of the warp: rows (queries) 16m + g and 16m + g + 8.
__device__ __forceinline__ void LoadA(uint32_t (&a)[2][4], const uint32_t* __restrict__ queries, const uint32_t (&qoff)[4],
                                      uint32_t kc, uint32_t c) {
#pragma unroll
  for (int m = 0; m < 2; ++m) {
    const uint2 lo = __ldg(reinterpret_cast<const uint2*>(queries + qoff[2 * m] + kc + 2 * c));
    const uint2 hi = __ldg(reinterpret_cast<const uint2*>(queries + qoff[2 * m + 1] + kc + 2 * c));
    a[m][0] = lo.x, a[m][2] = lo.y, a[m][1] = hi.x, a[m][3] = hi.y;
  }
}

// KS > 0: wp == 8 * KS and the query fragments stay in registers for the sweep;
// KS == 0: any wp, fragments reloaded (from L1) every k-step.
template <int KS, class Epi>
__global__ void __launch_bounds__(kM2Warps * 32, 2) MmaTile2(const uint32_t* __restrict__ codes,
                                                            const uint32_t* __restrict__ pops, uint32_t wp,
                                                            uint64_t nrows, uint64_t stride,
                                                            const uint32_t* __restrict__ queries,
                                                            const uint32_t* __restrict__ qpops, uint32_t nq, Epi epi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
  // Query slot s in 0..3 is query qw + g + 8s: fragment s >> 1, accumulator half s & 1.
  const uint32_t qw = blockIdx.x * kM2Queries + warp * 32;
  if (qw >= nq) return;  // a warp of padding only (small batches); the kernel has no block barriers
  uint32_t qoff[4], qpop[4];
  int32_t thr[4];
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const uint32_t q = qw + g + 8 * s;
    const bool ok = q < nq;
    qoff[s] = (ok ? q : 0u) * wp;  // batch <= 65536 queries of <= 1024 words: fits 32 bits
    qpop[s] = ok ? qpops[q] : 0u;
    thr[s] = ok ? int32_t(qpop[s]) - epi.Limit(epi.Param(q)) : INT_MAX;  // INT_MAX: padding slot never passes
  }
  constexpr int kRegA = KS > 0 ? KS : 1;
  uint32_t areg[kRegA][2][4];
  if constexpr (KS > 0) {
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) LoadA(areg[ks], queries, qoff, ks * 8, c);
  }
  const uint64_t step = uint64_t(gridDim.y) * kM2Rows;
  for (uint64_t r0 = uint64_t(blockIdx.y) * kM2Rows; r0 < nrows; r0 += step) {
    __syncwarp();
    int acc[2][kM2Tiles][4];
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int t = 0; t < kM2Tiles; ++t) acc[m][t][0] = acc[m][t][1] = acc[m][t][2] = acc[m][t][3] = 0;
    const uint32_t* rowp[kM2Tiles];
    bool rowok[kM2Tiles];
#pragma unroll
    for (int t = 0; t < kM2Tiles; ++t) {
      const uint64_t row = r0 + t * 8 + g;
      rowok[t] = row < nrows;
      rowp[t] = codes + (rowok[t] ? row : 0) * stride * wp + 2 * c;
    }
    const uint32_t ksteps = KS > 0 ? uint32_t(KS) : wp / 8;
#pragma unroll
    for (uint32_t ks = 0; ks < ksteps; ++ks) {
      uint2 b[kM2Tiles];
#pragma unroll
      for (int t = 0; t < kM2Tiles; ++t)
        b[t] = rowok[t] ? __ldg(reinterpret_cast<const uint2*>(rowp[t] + ks * 8)) : make_uint2(0u, 0u);
      uint32_t a[2][4];
      if constexpr (KS > 0) {
#pragma unroll
        for (int m = 0; m < 2; ++m)
#pragma unroll
          for (int i = 0; i < 4; ++i) a[m][i] = areg[ks][m][i];
      } else {
        LoadA(a, queries, qoff, ks * 8, c);
      }
#pragma unroll
      for (int t = 0; t < kM2Tiles; ++t) {
        Mma256(acc[0][t], a[0], b[t]);
        Mma256(acc[1][t], a[1], b[t]);
      }
    }
    // best[s]: max over this lane's 2 * kM2Tiles rows of 2 * and - pop(row); rows past the end
    // get a -pop far below any threshold.
    int32_t best[4] = {INT_MIN, INT_MIN, INT_MIN, INT_MIN};
    if (stride == 1 && r0 + kM2Rows <= nrows) {
      // Full step of the collect pass: rows 2c, 2c + 1 of each n8 tile are one aligned 8-byte load.
      const uint2* pp = reinterpret_cast<const uint2*>(pops + r0 + 2 * c);
#pragma unroll
      for (int t = 0; t < kM2Tiles; ++t) {
        const uint2 p = __ldg(pp + t * 4);
#pragma unroll
        for (int s = 0; s < 4; ++s)
          best[s] = max(best[s], max(2 * acc[s >> 1][t][(s & 1) * 2] - int32_t(p.x),
                                     2 * acc[s >> 1][t][(s & 1) * 2 + 1] - int32_t(p.y)));
      }
    } else {
#pragma unroll
      for (int t = 0; t < kM2Tiles; ++t)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const uint64_t row = r0 + t * 8 + 2 * c + j;
          const int32_t npp = row < nrows ? -int32_t(__ldg(pops + row * stride)) : -(1 << 30);
#pragma unroll
          for (int s = 0; s < 4; ++s) best[s] = max(best[s], 2 * acc[s >> 1][t][(s & 1) * 2 + j] + npp);
        }
    }
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      if (best[s] >= thr[s]) {
        // Rare once bounded: reloading the row popcounts and the parameter costs less than keeping them live.
        const uint32_t q = qw + g + 8 * s, par = epi.Param(q);
#pragma unroll
        for (int t = 0; t < kM2Tiles; ++t)
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const uint64_t row = r0 + t * 8 + 2 * c + j;
            if (row < nrows) {
              const int32_t v = 2 * acc[s >> 1][t][(s & 1) * 2 + j] - int32_t(__ldg(pops + row * stride));
              if (v >= thr[s]) epi(q, row, uint32_t(int32_t(qpop[s]) - v), par);
            }
          }
      }
    }
  }
#endif
}

// ---- top-k epilogues ------------------------------------------------------------

struct HistAll {
  uint32_t* hist;
  uint32_t bins;
  __device__ uint32_t Param(uint32_t) const { return 0; }
  // Largest distance the epilogue acts on (mma2 skips the rest): every distance here.
  __device__ int32_t Limit(uint32_t) const { return 1 << 20; }
  __device__ void operator()(uint32_t q, uint64_t, uint32_t d, uint32_t) const { atomicAdd(hist + uint64_t(q) * bins + d, 1u); }
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

__device__ void BitonicSort(unsigned long long* keys, uint32_t p) {
  for (uint32_t size = 2; size <= p; size <<= 1) {
    for (uint32_t stride = size >> 1; stride > 0; stride >>= 1) {
      __syncthreads();
      for (uint32_t i = threadIdx.x; i < p; i += blockDim.x) {
        const uint32_t j = i ^ stride;
        if (j > i) {
          const bool up = (i & size) == 0;
          const unsigned long long a = keys[i], b = keys[j];
          if ((a > b) == up) keys[i] = b, keys[j] = a;
        }
      }
    }
  }
  __syncthreads();
}

__device__ uint32_t Pow2(uint32_t x) {
  uint32_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

// Scans candidates in order (cand == nullptr: ids 0..count-1). The first `need`
// with distance == D go to keys[tieBase...] in id order; with takeLess, every
// d < D goes to keys[0...] through the shared counter.
__device__ void CollectOrdered(const uint32_t* __restrict__ codes, uint32_t wp, const uint32_t* sq,
                               const uint32_t* __restrict__ cand, uint64_t count, uint32_t D, uint32_t need,
                               uint32_t tieBase, bool takeLess, uint32_t* sLess, unsigned long long* keys,
                               BlockScan::TempStorage& tmp) {
  uint32_t taken = 0;
  for (uint64_t base = 0; base < count; base += kThreads) {
    if (!takeLess && taken >= need) break;
    const uint64_t i = base + threadIdx.x;
    uint32_t d = 0xFFFFFFFFu, id = 0;
    if (i < count) {
      id = cand ? cand[i] : uint32_t(i);
      d = RowDistance(codes + uint64_t(id) * wp, sq, wp);
    }
    uint32_t rank, agg;
    BlockScan(tmp).ExclusiveSum(d == D ? 1u : 0u, rank, agg);
    __syncthreads();
    if (d == D && taken + rank < need) keys[tieBase + taken + rank] = (uint64_t(D) << 32) | id;
    if (takeLess && d < D) keys[atomicAdd(sLess, 1u)] = (uint64_t(d) << 32) | id;
    taken += agg;
  }
}

__device__ void WriteOut(const unsigned long long* keys, uint32_t kk, uint32_t k, uint32_t bits, uint32_t* ids,
                         uint16_t* dist) {
  for (uint32_t i = threadIdx.x; i < k; i += blockDim.x) {
    if (i < kk) {
      ids[i] = uint32_t(keys[i]);
      dist[i] = uint16_t(keys[i] >> 32);
    } else {
      ids[i] = kMissing;
      dist[i] = uint16_t(bits);
    }
  }
}

// One block per query: gathers d < D and the ties at D, sorts, writes k results.
__global__ void __launch_bounds__(kThreads) FinalizeKernel(
    const uint32_t* __restrict__ codes, uint32_t wp, uint64_t n, const uint32_t* __restrict__ queries,
    const uint32_t* __restrict__ thr, const uint32_t* __restrict__ lessCnt, const unsigned long long* __restrict__ less,
    const uint32_t* __restrict__ tieCnt, const uint32_t* __restrict__ ties, uint32_t k, uint32_t bits,
    uint32_t* __restrict__ outIds, uint16_t* __restrict__ outDist) {
  __shared__ unsigned long long keys[kMaxK + kTieCap];
  __shared__ BlockScan::TempStorage tmp;
  extern __shared__ uint32_t sq[];
  const uint32_t q = blockIdx.x;
  const uint32_t kk = uint32_t(n < k ? n : k), L = lessCnt[q], T = tieCnt[q], D = thr[q];
  const uint32_t need = kk - L;
  for (uint32_t i = threadIdx.x; i < L; i += kThreads) keys[i] = less[uint64_t(q) * k + i];
  uint32_t total;
  if (T <= kTieCap) {
    for (uint32_t i = threadIdx.x; i < T; i += kThreads) keys[L + i] = (uint64_t(D) << 32) | ties[uint64_t(q) * kTieCap + i];
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
__global__ void __launch_bounds__(kThreads) SortCandidatesKernel(const uint32_t* __restrict__ cnt,
                                                                 const unsigned long long* __restrict__ cand,
                                                                 uint64_t n, uint32_t k, uint32_t bits,
                                                                 uint32_t* __restrict__ outIds,
                                                                 uint16_t* __restrict__ outDist) {
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
                            const uint32_t* __restrict__ maskW, uint32_t probes, uint32_t tables, uint32_t h, uint64_t n,
                            uint32_t* __restrict__ scores) {
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
__global__ void __launch_bounds__(kThreads) ShortlistKernel(const uint32_t* __restrict__ scores, uint64_t n, uint32_t L,
                                                            uint32_t minCut, uint32_t* __restrict__ cand,
                                                            uint32_t* __restrict__ candCount,
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
__global__ void __launch_bounds__(kThreads) RerankKernel(const uint32_t* __restrict__ codes, uint32_t wp, uint64_t n,
                                                         const uint32_t* __restrict__ queries,
                                                         const uint32_t* __restrict__ cand,
                                                         const uint32_t* __restrict__ candCount,
                                                         uint32_t* __restrict__ ghist, uint32_t k, uint32_t bits,
                                                         uint32_t* __restrict__ outIds, uint16_t* __restrict__ outDist) {
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
  for (uint32_t i = threadIdx.x; i < c; i += kThreads) atomicAdd(hist + RowDistance(codes + uint64_t(cq[i]) * wp, sq, wp), 1u);
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
                                const uint32_t* __restrict__ pos, uint32_t tables, uint32_t h, uint32_t* __restrict__ qkeys) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= nq * tables) return;
  const uint32_t q = i / tables, t = i % tables;
  qkeys[i] = KeyOf(queries + uint64_t(q) * wp, pos + t * h, h);
}

// ---- host helpers ----------------------------------------------------------------

unsigned Blocks(uint64_t n, int device) {
  return gpu::GridFor(n, kThreads, unsigned(gpu::MultiprocessorCount(device)) * 16);
}

DeviceIndex& Upload(HostIndex& ix, int device, cudaStream_t stream, Timing* timing) {
  if (ix.device && ix.device->device == device) return *ix.device;
  auto d = std::make_shared<DeviceIndex>();
  d->device = device;
  d->rows = ix.rows;
  d->wp = PaddedWords(ix.bits);
  d->codes.reset(ix.rows * d->wp, "hamming codes");
  d->pops.reset(ix.rows, "hamming code popcounts");
  std::vector<uint32_t> padded = Pad(ix.codes.data(), ix.rows, ix.wordsPerRow(), d->wp);
  gpu::Event t0, t1;
  t0.record(stream);
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(d->codes.data(), padded.data(), padded.size() * 4, cudaMemcpyHostToDevice, stream));
  t1.record(stream);
  PopsKernel<<<Blocks(ix.rows, device), kThreads, 0, stream>>>(d->codes.data(), ix.rows, d->wp, d->pops.data());
  CUSIM_LAUNCH_CHECK();
  CUSIM_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (timing) timing->transferMs += gpu::ElapsedMs(t0, t1);
  ix.device = d;
  return *d;
}

void BuildOnDevice(HostIndex& ix, DeviceIndex& d, cudaStream_t stream, Timing* timing) {
  const EwhParams& p = ix.params;
  const uint32_t buckets = 1u << p.keyBits;
  const uint64_t slots = uint64_t(p.tables) * buckets;
  const auto masks = ProbeMasks(p.keyBits, p.maxErrors);
  std::vector<uint32_t> mw(masks.size());
  for (size_t i = 0; i < masks.size(); ++i) mw[i] = uint32_t(p.weights[__builtin_popcount(masks[i])]);
  d.positions.reset(ix.positions.size(), "ewh positions");
  d.masks.reset(masks.size(), "ewh probe masks");
  d.maskWeights.reset(masks.size(), "ewh probe weights");
  d.offsets.reset(slots + 1, "ewh bucket offsets");
  d.ids.reset(uint64_t(p.tables) * d.rows, "ewh bucket ids");
  gpu::DeviceBuffer<uint32_t> keys(uint64_t(p.tables) * d.rows, "ewh keys");
  gpu::DeviceBuffer<unsigned long long> counts(slots + 1, "ewh bucket counts");
  size_t scanBytes = 0;
  CUSIM_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scanBytes, counts.data(), d.offsets.data(), slots + 1, stream));
  gpu::DeviceBuffer<uint8_t> scanTmp(std::max<size_t>(scanBytes, 1), "ewh scan scratch");
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(d.positions.data(), ix.positions.data(), ix.positions.size() * 4, cudaMemcpyHostToDevice, stream));
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(d.masks.data(), masks.data(), masks.size() * 4, cudaMemcpyHostToDevice, stream));
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(d.maskWeights.data(), mw.data(), mw.size() * 4, cudaMemcpyHostToDevice, stream));
  gpu::Event t0, t1;
  t0.record(stream);
  CUSIM_CUDA_CHECK(cudaMemsetAsync(counts.data(), 0, (slots + 1) * 8, stream));
  KeysKernel<<<Blocks(d.rows, d.device), kThreads, 0, stream>>>(d.codes.data(), d.rows, d.wp, d.positions.data(),
                                                                 p.tables, p.keyBits, keys.data(), counts.data());
  CUSIM_LAUNCH_CHECK();
  CUSIM_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(scanTmp.data(), scanBytes, counts.data(), d.offsets.data(), slots + 1, stream));
  // counts becomes the scatter cursor: a copy of the offsets.
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(counts.data(), d.offsets.data(), (slots + 1) * 8, cudaMemcpyDeviceToDevice, stream));
  ScatterKernel<<<Blocks(d.rows, d.device), kThreads, 0, stream>>>(keys.data(), d.rows, p.tables, p.keyBits,
                                                                    counts.data(), d.ids.data());
  CUSIM_LAUNCH_CHECK();
  t1.record(stream);
  CUSIM_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (timing) timing->buildMs += gpu::ElapsedMs(t0, t1);
  d.built = true;
}

DeviceIndex& Ready(HostIndex& ix, int device, cudaStream_t stream, Timing* timing) {
  DeviceIndex& d = Upload(ix, device, stream, timing);
  if (ix.ewh && !d.built) BuildOnDevice(ix, d, stream, timing);
  return d;
}

void UploadQueries(QueryBatch& b, const BitsView& q, uint64_t q0, uint32_t nb, uint32_t wp, int device,
                   cudaStream_t stream) {
  b.host = Pad(q.words + q0 * q.wordsPerRow(), nb, q.wordsPerRow(), wp);
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(b.codes.data(), b.host.data(), b.host.size() * 4, cudaMemcpyHostToDevice, stream));
  PopsKernel<<<Blocks(nb, device), kThreads, 0, stream>>>(b.codes.data(), nb, wp, b.pops.data());
  CUSIM_LAUNCH_CHECK();
}

// Queries per batch: what the per-query scratch allows in half the free memory.
uint32_t BatchSize(uint64_t nq, uint64_t perQuery, int device, uint32_t cap) {
  uint64_t freeB = 0, total = 0;
  DeviceMemory(device, &freeB, &total);
  uint64_t b = std::max<uint64_t>(1, (freeB / 2) / std::max<uint64_t>(perQuery, 1));
  return uint32_t(std::min<uint64_t>({b, nq, cap}));
}

// The end of one query batch of a search: its kernels are queued after event
// t[1]; download the top-k and the per-query counts, wait, and charge the
// batch's kernel and copy time (t[0] was recorded before its upload).
void FinishBatch(gpu::Event (&t)[4], uint32_t* ids, uint16_t* dist, uint64_t q0, uint32_t nb, uint32_t k,
                 const uint32_t* dIds, const uint16_t* dDist, const uint32_t* dCounts, uint32_t* counts,
                 const gpu::Stream& stream, Timing* timing) {
  t[2].record(stream);
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(ids + q0 * k, dIds, uint64_t(nb) * k * 4, cudaMemcpyDeviceToHost, stream));
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(dist + q0 * k, dDist, uint64_t(nb) * k * 2, cudaMemcpyDeviceToHost, stream));
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(counts, dCounts, uint64_t(nb) * 4, cudaMemcpyDeviceToHost, stream));
  t[3].record(stream);
  stream.sync();
  if (timing) {
    timing->kernelMs += gpu::ElapsedMs(t[1], t[2]);
    timing->transferMs += gpu::ElapsedMs(t[0], t[1]) + gpu::ElapsedMs(t[2], t[3]);
  }
}

enum class Tile { Popc, Mma, Mma2 };

template <int KS, class Epi>
void LaunchMma2(const DeviceIndex& d, uint64_t nrows, uint64_t stride, const QueryBatch& qb, uint32_t nb, Epi epi,
                cudaStream_t stream) {
  const uint32_t qblocks = (nb + kM2Queries - 1) / kM2Queries;
  // ~8 CTAs per SM (2 resident x 4 waves) whatever the batch; CTAs of one row split
  // launch together, so their shared rows come from L2 and HBM is read ~once per batch.
  const uint64_t want = (uint64_t(gpu::MultiprocessorCount(d.device)) * 8 + qblocks - 1) / qblocks;
  const unsigned splits = unsigned(std::max<uint64_t>(1, std::min<uint64_t>({want, (nrows + kM2Rows - 1) / kM2Rows, 65535})));
  MmaTile2<KS><<<dim3(qblocks, splits), kM2Warps * 32, 0, stream>>>(d.codes.data(), d.pops.data(), d.wp, nrows, stride,
                                                                    qb.codes.data(), qb.pops.data(), nb, epi);
}

template <class Epi>
void LaunchTile(Tile tile, const DeviceIndex& d, uint64_t nrows, uint64_t stride, const QueryBatch& qb, uint32_t nb,
                Epi epi, cudaStream_t stream) {
  if (nrows == 0) return;
  const unsigned rowBlocks = unsigned(std::min<uint64_t>((nrows + 255) / 256, 65535));
  if (tile == Tile::Mma2) {
    // Query fragments stay in registers for 256- and 512-bit codes (the benchmarked sizes).
    if (d.wp == 8)
      LaunchMma2<1>(d, nrows, stride, qb, nb, epi, stream);
    else if (d.wp == 16)
      LaunchMma2<2>(d, nrows, stride, qb, nb, epi, stream);
    else
      LaunchMma2<0>(d, nrows, stride, qb, nb, epi, stream);
  } else if (tile == Tile::Mma) {
    dim3 grid((nb + 15) / 16, rowBlocks);
    MmaTile<<<grid, 128, 0, stream>>>(d.codes.data(), d.pops.data(), d.wp, nrows, stride, qb.codes.data(),
                                     qb.pops.data(), nb, epi);
  } else {
    dim3 grid((nb + 15) / 16, rowBlocks);
    PopcTile<16><<<grid, kThreads, 0, stream>>>(d.codes.data(), d.wp, nrows, stride, qb.codes.data(), nb, epi);
  }
  CUSIM_LAUNCH_CHECK();
}

Tile ChooseTile(ExactKernel kernel, uint32_t bits, int device) {
  if (kernel == ExactKernel::Popc) return Tile::Popc;
  // The 1-bit MMA (m16n8k256 AND + popc) is sm_80's: older GPUs scan with popcount.
  const bool tensorCores = DeviceTensorCores(device);
  if (kernel == ExactKernel::Mma || kernel == ExactKernel::Mma2) {
    if (!tensorCores)
      throw Error(kInvalidArgument,
                  std::string("exactKernel '") + (kernel == ExactKernel::Mma ? "mma" : "mma2") +
                      "' needs a GPU of compute capability 8.0 or newer",
                  "RangeError");
    return kernel == ExactKernel::Mma ? Tile::Mma : Tile::Mma2;
  }
  // Codes under 128 bits would be padded to 256 for the MMA: scalar popcount wins there.
  return tensorCores && bits >= 128 ? Tile::Mma2 : Tile::Popc;
}

}  // namespace

void BuildCuda(HostIndex& ix, int device, Timing* timing) {
  gpu::DeviceGuard guard(device);
  gpu::Stream stream;
  DeviceIndex& d = Upload(ix, device, stream, timing);
  d.built = false;
  BuildOnDevice(ix, d, stream, timing);
}

void SearchExactCuda(HostIndex& ix, const BitsView& queries, uint32_t k, ExactKernel kernel, uint32_t* ids,
                     uint16_t* dist, int device, Timing* timing, const CancelToken& cancel) {
  gpu::DeviceGuard guard(device);
  gpu::Stream stream;
  DeviceIndex& d = Ready(ix, device, stream, timing);
  const Tile tile = ChooseTile(kernel, ix.bits, device);
  const uint64_t n = d.rows;
  const uint32_t bins = ix.bits + 1, kk = uint32_t(std::min<uint64_t>(k, n));
  // The k-th distance within a sample bounds the true k-th distance from above.
  // Sized so that about 512 rows per query fall within the bound: they fit the
  // fast path's buffer, and the sample costs ~k/512 of a full pass.
  const uint64_t sample = std::min<uint64_t>(n, std::max<uint64_t>({8192, 64ull * k, (uint64_t(k) * n + 511) / 512}));
  const uint64_t stride = n / sample;
  const uint64_t perQuery = uint64_t(bins) * 4 + uint64_t(k) * 8 + kTieCap * 4 + uint64_t(d.wp) * 16 + 48 +
                            uint64_t(k) * 6 + uint64_t(kCandCap) * 8;
  const uint32_t batch = BatchSize(queries.rows, perQuery, device, 1u << 16);
  QueryBatch& qb = d.exQueries;
  QueryBatch sub;
  qb.codes.reserve(uint64_t(batch) * d.wp, "hamming queries");
  qb.pops.reserve(batch, "hamming query popcounts");
  auto& hist = d.exHist;
  auto& bound = d.exBound;
  auto& candCnt = d.exCandCnt;
  auto& cand = d.exCand;
  auto& outIds = d.exOutIds;
  auto& outDist = d.exOutDist;
  hist.reserve(uint64_t(batch) * bins, "hamming distance histograms");
  bound.reserve(batch, "hamming bounds");
  candCnt.reserve(batch, "hamming candidate counts");
  cand.reserve(uint64_t(batch) * kCandCap, "hamming bounded candidates");
  outIds.reserve(uint64_t(batch) * k, "hamming result ids");
  outDist.reserve(uint64_t(batch) * k, "hamming result distances");
  // Only the rare overflowing queries need these: allocated on first use, sized for the whole batch
  // as BatchSize budgeted, so that the common search pays for no extra allocations.
  gpu::DeviceBuffer<uint32_t> thr, below, lessCnt, tieCnt, ties;
  gpu::DeviceBuffer<unsigned long long> less;
  std::vector<uint32_t> counts(batch), redo, subIds;
  std::vector<uint16_t> subDist;
  const size_t finalShared = size_t(d.wp) * 4;

  // mma2 bounds the sample's k-th distance level by level: the k-th distance among every
  // r^L-th sampled row (a subset of every r^(L-1)-th, ..., of the sample) bounds the next
  // level's, whose histogram then counts only the pairs within it (~k*r per query). The
  // final bound equals one full histogram of the sample for ~S/r^L + L*k*r global atomics
  // per query instead of S (4M x 512, top-50: ~3e3 instead of 4e5).
  std::vector<uint64_t> levels;  // row steps within the sample, coarsest first
  for (int L = 2; L >= 1 && tile == Tile::Mma2 && levels.empty(); --L) {
    auto fits = [&](uint64_t r) {
      uint64_t p = kk;
      for (int i = 0; i <= L; ++i) p *= r;
      return p <= sample;
    };
    uint64_t r = 1;
    while (fits(r + 1)) ++r;
    if (r < 4) continue;  // r^(L+1) * k <= S with r >= 4 keeps every level >= 4k rows
    uint64_t f = 1;
    for (int i = 0; i < L; ++i) f *= r;
    for (; f > 1; f /= r) levels.push_back(f);
  }
  auto sampleBound = [&](const QueryBatch& b, uint32_t nb) {
    CUSIM_CUDA_CHECK(cudaMemsetAsync(hist.data(), 0, uint64_t(nb) * bins * 4, stream));
    for (size_t i = 0; i < levels.size(); ++i) {
      if (i == 0)
        LaunchTile(tile, d, sample / levels[i], stride * levels[i], b, nb, HistAll{hist.data(), bins}, stream);
      else
        LaunchTile(tile, d, sample / levels[i], stride * levels[i], b, nb, HistBound{hist.data(), bins, bound.data()},
                   stream);
      ThresholdKernel<<<(nb + 255) / 256, 256, 0, stream>>>(hist.data(), bins, nb, kk, bound.data(), nullptr);
      CUSIM_LAUNCH_CHECK();
      CUSIM_CUDA_CHECK(cudaMemsetAsync(hist.data(), 0, uint64_t(nb) * bins * 4, stream));
    }
    if (levels.empty())
      LaunchTile(tile, d, sample, stride, b, nb, HistAll{hist.data(), bins}, stream);
    else
      LaunchTile(tile, d, sample, stride, b, nb, HistBound{hist.data(), bins, bound.data()}, stream);
    ThresholdKernel<<<(nb + 255) / 256, 256, 0, stream>>>(hist.data(), bins, nb, kk, bound.data(), nullptr);
    CUSIM_LAUNCH_CHECK();
  };
  // Exact for any input: a bounded histogram finds the k-th distance D, then
  // d < D and the ties at D are collected and sorted per query.
  auto histogramPasses = [&](const QueryBatch& b, uint32_t nb) {
    thr.reserve(batch, "hamming thresholds");
    below.reserve(batch, "hamming counts below");
    lessCnt.reserve(batch, "hamming less counts");
    tieCnt.reserve(batch, "hamming tie counts");
    less.reserve(uint64_t(batch) * k, "hamming candidates");
    ties.reserve(uint64_t(batch) * kTieCap, "hamming ties");
    sampleBound(b, nb);
    CUSIM_CUDA_CHECK(cudaMemsetAsync(hist.data(), 0, uint64_t(nb) * bins * 4, stream));
    LaunchTile(tile, d, n, 1, b, nb, HistBound{hist.data(), bins, bound.data()}, stream);
    ThresholdKernel<<<(nb + 255) / 256, 256, 0, stream>>>(hist.data(), bins, nb, kk, thr.data(), below.data());
    CUSIM_LAUNCH_CHECK();
    CUSIM_CUDA_CHECK(cudaMemsetAsync(lessCnt.data(), 0, uint64_t(nb) * 4, stream));
    CUSIM_CUDA_CHECK(cudaMemsetAsync(tieCnt.data(), 0, uint64_t(nb) * 4, stream));
    LaunchTile(tile, d, n, 1, b, nb, Collect{thr.data(), lessCnt.data(), less.data(), k, tieCnt.data(), ties.data()}, stream);
    FinalizeKernel<<<nb, kThreads, finalShared, stream>>>(d.codes.data(), d.wp, n, b.codes.data(), thr.data(),
                                                          lessCnt.data(), less.data(), tieCnt.data(), ties.data(), k,
                                                          ix.bits, outIds.data(), outDist.data());
    CUSIM_LAUNCH_CHECK();
  };

  for (uint64_t q0 = 0; q0 < queries.rows; q0 += batch) {
    cancel.check();
    cancel.report(q0, queries.rows);
    const uint32_t nb = uint32_t(std::min<uint64_t>(batch, queries.rows - q0));
    gpu::Event t[4];
    t[0].record(stream);
    UploadQueries(qb, queries, q0, nb, d.wp, device, stream);
    t[1].record(stream);
    sampleBound(qb, nb);
    CUSIM_CUDA_CHECK(cudaMemsetAsync(candCnt.data(), 0, uint64_t(nb) * 4, stream));
    LaunchTile(tile, d, n, 1, qb, nb, CollectBound{bound.data(), candCnt.data(), cand.data()}, stream);
    SortCandidatesKernel<<<nb, kThreads, 0, stream>>>(candCnt.data(), cand.data(), n, k, ix.bits, outIds.data(),
                                                      outDist.data());
    CUSIM_LAUNCH_CHECK();
    FinishBatch(t, ids, dist, q0, nb, k, outIds.data(), outDist.data(), candCnt.data(), counts.data(), stream, timing);
    // Queries whose bounded set overflowed (heavy ties, skewed data) go through the histogram passes.
    redo.clear();
    for (uint32_t i = 0; i < nb; ++i)
      if (counts[i] > kCandCap) redo.push_back(i);
    if (redo.empty()) continue;
    const uint32_t w = queries.wordsPerRow(), ns = uint32_t(redo.size());
    std::vector<uint32_t> gathered(uint64_t(ns) * w);
    for (uint32_t i = 0; i < ns; ++i)
      std::copy(queries.words + (q0 + redo[i]) * w, queries.words + (q0 + redo[i] + 1) * w, gathered.begin() + uint64_t(i) * w);
    BitsView gv{gathered.data(), ns, queries.bits};
    sub.codes.reserve(uint64_t(batch) * d.wp, "hamming redo queries");
    sub.pops.reserve(batch, "hamming redo query popcounts");
    gpu::Event r0, r1;
    UploadQueries(sub, gv, 0, ns, d.wp, device, stream);
    r0.record(stream);
    histogramPasses(sub, ns);
    r1.record(stream);
    subIds.resize(uint64_t(ns) * k);
    subDist.resize(uint64_t(ns) * k);
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(subIds.data(), outIds.data(), uint64_t(ns) * k * 4, cudaMemcpyDeviceToHost, stream));
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(subDist.data(), outDist.data(), uint64_t(ns) * k * 2, cudaMemcpyDeviceToHost, stream));
    stream.sync();
    if (timing) timing->kernelMs += gpu::ElapsedMs(r0, r1);
    for (uint32_t i = 0; i < ns; ++i) {
      std::copy(subIds.begin() + uint64_t(i) * k, subIds.begin() + uint64_t(i + 1) * k, ids + (q0 + redo[i]) * k);
      std::copy(subDist.begin() + uint64_t(i) * k, subDist.begin() + uint64_t(i + 1) * k, dist + (q0 + redo[i]) * k);
    }
  }
}

namespace {

// Scores of one query batch into `scores` (nb x n), after uploading the queries.
void ScoreBatch(const HostIndex& ix, const DeviceIndex& d, QueryBatch& qb, gpu::DeviceBuffer<uint32_t>& qkeys,
                uint32_t* scores, uint32_t nb, cudaStream_t stream) {
  const EwhParams& p = ix.params;
  const uint32_t probes = uint32_t(d.masks.size());
  QueryKeysKernel<<<(nb * p.tables + 255) / 256, 256, 0, stream>>>(qb.codes.data(), nb, d.wp, d.positions.data(),
                                                                    p.tables, p.keyBits, qkeys.data());
  CUSIM_LAUNCH_CHECK();
  CUSIM_CUDA_CHECK(cudaMemsetAsync(scores, 0, uint64_t(nb) * d.rows * 4, stream));
  dim3 grid(p.tables * probes, nb);
  ScoreKernel<<<grid, kThreads, 0, stream>>>(qkeys.data(), d.offsets.data(), d.ids.data(), d.masks.data(),
                                             d.maskWeights.data(), probes, p.tables, p.keyBits, d.rows, scores);
  CUSIM_LAUNCH_CHECK();
}

}  // namespace

void ScoresCuda(HostIndex& ix, const BitsView& queries, uint32_t* scores, int device) {
  gpu::DeviceGuard guard(device);
  gpu::Stream stream;
  DeviceIndex& d = Ready(ix, device, stream, nullptr);
  const uint32_t batch = BatchSize(queries.rows, d.rows * 4 + d.wp * 8 + 64 * 4, device, 65535);
  QueryBatch qb;
  qb.codes.reset(uint64_t(batch) * d.wp, "ewh queries");
  qb.pops.reset(batch, "ewh query popcounts");
  gpu::DeviceBuffer<uint32_t> qkeys(uint64_t(batch) * ix.params.tables, "ewh query keys");
  gpu::DeviceBuffer<uint32_t> dScores(uint64_t(batch) * d.rows, "ewh scores");
  for (uint64_t q0 = 0; q0 < queries.rows; q0 += batch) {
    const uint32_t nb = uint32_t(std::min<uint64_t>(batch, queries.rows - q0));
    UploadQueries(qb, queries, q0, nb, d.wp, device, stream);
    ScoreBatch(ix, d, qb, qkeys, dScores.data(), nb, stream);
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(scores + q0 * d.rows, dScores.data(), uint64_t(nb) * d.rows * 4,
                                     cudaMemcpyDeviceToHost, stream));
    stream.sync();
  }
}

void SearchEwhCuda(HostIndex& ix, const BitsView& queries, uint32_t k, uint32_t* ids, uint16_t* dist, int device,
                   Timing* timing, const CancelToken& cancel) {
  gpu::DeviceGuard guard(device);
  gpu::Stream stream;
  DeviceIndex& d = Ready(ix, device, stream, timing);
  const EwhParams& p = ix.params;
  const uint64_t n = d.rows;
  const uint32_t bins = ix.bits + 1;
  const uint64_t perQuery = n * 8 + uint64_t(bins) * 4 + uint64_t(d.wp) * 8 + uint64_t(k) * 6 + p.tables * 4 + 16;
  const uint32_t batch = BatchSize(queries.rows, perQuery, device, 4096);
  QueryBatch qb;
  qb.codes.reset(uint64_t(batch) * d.wp, "ewh queries");
  qb.pops.reset(batch, "ewh query popcounts");
  gpu::DeviceBuffer<uint32_t> qkeys(uint64_t(batch) * p.tables, "ewh query keys");
  gpu::DeviceBuffer<uint32_t> scores(uint64_t(batch) * n, "ewh scores");
  gpu::DeviceBuffer<uint32_t> cand(uint64_t(batch) * n, "ewh shortlist");
  gpu::DeviceBuffer<uint32_t> candCount(batch, "ewh shortlist sizes");
  gpu::DeviceBuffer<uint32_t> hist(uint64_t(batch) * bins, "ewh distance histograms");
  gpu::DeviceBuffer<unsigned long long> scored(1, "ewh scored counter");
  gpu::DeviceBuffer<uint32_t> outIds(uint64_t(batch) * k, "ewh result ids");
  gpu::DeviceBuffer<uint16_t> outDist(uint64_t(batch) * k, "ewh result distances");
  std::vector<uint32_t> counts(batch);
  CUSIM_CUDA_CHECK(cudaMemsetAsync(scored.data(), 0, 8, stream));
  const uint32_t minCut = uint32_t(std::max<int32_t>(p.minScore, 0));
  for (uint64_t q0 = 0; q0 < queries.rows; q0 += batch) {
    cancel.check();
    cancel.report(q0, queries.rows);
    const uint32_t nb = uint32_t(std::min<uint64_t>(batch, queries.rows - q0));
    gpu::Event t[4];
    t[0].record(stream);
    UploadQueries(qb, queries, q0, nb, d.wp, device, stream);
    t[1].record(stream);
    ScoreBatch(ix, d, qb, qkeys, scores.data(), nb, stream);
    ShortlistKernel<<<nb, kThreads, 0, stream>>>(scores.data(), n, p.shortlist, minCut, cand.data(), candCount.data(),
                                                 scored.data());
    CUSIM_LAUNCH_CHECK();
    CUSIM_CUDA_CHECK(cudaMemsetAsync(hist.data(), 0, uint64_t(nb) * bins * 4, stream));
    RerankKernel<<<nb, kThreads, size_t(d.wp) * 4, stream>>>(d.codes.data(), d.wp, n, qb.codes.data(), cand.data(),
                                                             candCount.data(), hist.data(), k, ix.bits, outIds.data(),
                                                             outDist.data());
    CUSIM_LAUNCH_CHECK();
    FinishBatch(t, ids, dist, q0, nb, k, outIds.data(), outDist.data(), candCount.data(), counts.data(), stream, timing);
    if (timing)
      for (uint32_t i = 0; i < nb; ++i) timing->shortlisted += counts[i];
  }
  unsigned long long total = 0;
  CUSIM_CUDA_CHECK(cudaMemcpy(&total, scored.data(), 8, cudaMemcpyDeviceToHost));
  if (timing) timing->scored = total;
}

std::vector<std::string> GpuKernelFamilies(bool tensorCores) {
  if (tensorCores) return {"mma2", "popc"};
  return {"popc"};
}

}  // namespace hamming
}  // namespace cusim
