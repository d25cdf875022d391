// Exact scan: tiles of queries x database rows through scalar __popc or the
// 1-bit tensor-core MMA, each handing every distance to an epilogue.
// Internal to cuda/hamming.cu, which includes every kernel header: one
// translation unit, so the kernels keep internal linkage.
#pragma once
#include "common.cuh"

namespace cusim {
namespace hamming {
namespace {

// ---- distance tiles -----------------------------------------------------------
// Both tile kernels call epi(query, row, distance, epi.Param(query)) for every pair. A sample
// pass reads tile row i from SampleRow(i, lev, sstep): sample index j = i * lev, one row drawn
// from each block of sstep rows. The draw inside a block is a hash of j rather than its first
// row: a fixed stride aliases with periodic data (rows r of cluster r % m) and can miss a
// query's whole neighbourhood, which then floods the collect pass (clustered codes: ~1.5e5
// rows within the bound instead of ~500). Levels take every lev-th sample index of the same
// map, so each level's rows stay a subset of the next one's.

__device__ __forceinline__ uint64_t SampleRow(uint64_t i, uint32_t lev, uint32_t sstep) {
  const uint64_t j = i * lev;
  if (sstep <= 1) return j;
  uint32_t h = uint32_t(j) * 0x9E3779B1u;  // rows < 2^32 (ids are 32-bit)
  h ^= h >> 15;
  h *= 0x85EBCA77u;
  h ^= h >> 13;
  return j * sstep + __umulhi(h, sstep);  // in [j * sstep, (j + 1) * sstep)
}

template <int QT, class Epi>
__global__ void __launch_bounds__(kThreads)
    PopcTile(const uint32_t* __restrict__ codes, uint32_t wp, uint64_t nrows, uint32_t lev, uint32_t sstep,
             const uint32_t* __restrict__ queries, uint32_t nq, Epi epi) {
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
        sdb[ww * (kThreads + 1) + rr] = row < nrows ? codes[SampleRow(row, lev, sstep) * wp + c0 + ww] : 0u;
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
__device__ __forceinline__ void LoadA(uint32_t (&a)[2][4], const uint32_t* __restrict__ queries,
                                      const uint32_t (&qoff)[4], uint32_t kc, uint32_t c) {
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
__global__ void __launch_bounds__(kM2Warps * 32, 2)
    MmaTile2(const uint32_t* __restrict__ codes, const uint32_t* __restrict__ pops, uint32_t wp, uint64_t nrows,
             uint32_t lev, uint32_t sstep, const uint32_t* __restrict__ queries, const uint32_t* __restrict__ qpops,
             uint32_t nq, Epi epi) {
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
      rowp[t] = codes + (rowok[t] ? SampleRow(row, lev, sstep) : 0) * wp + 2 * c;
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
    if (lev == 1 && sstep <= 1 && r0 + kM2Rows <= nrows) {
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
          const int32_t npp = row < nrows ? -int32_t(__ldg(pops + SampleRow(row, lev, sstep))) : -(1 << 30);
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
              const int32_t v = 2 * acc[s >> 1][t][(s & 1) * 2 + j] - int32_t(__ldg(pops + SampleRow(row, lev, sstep)));
              if (v >= thr[s]) epi(q, row, uint32_t(int32_t(qpop[s]) - v), par);
            }
          }
      }
    }
  }
#endif
}

}  // namespace
}  // namespace hamming
}  // namespace cusim
