// The row-tile family (TileLarge): a block takes 32 rows, lane r of every
// warp computes row r; its sample, window and list kernels, and the
// bits-to-indices conversion.
// Internal to cuda/flyhash.cu, which includes every family header: one
// translation unit, so the kernels keep internal linkage.
#pragma once
#include "common.cuh"

namespace cusim {
namespace flyhash {
namespace {

// ---- tile kernels ----------------------------------------------------------------

constexpr uint32_t kTile = 32;       // rows per block: one per lane
constexpr uint32_t kKeyStride = 33;  // keys[j][33]: lane-per-row writes and warp-per-row reads both conflict-free

// Columns [c0, c0 + len) of rows [r0, r0 + 32) as xs[i][32] (xs[i * 32 + r]);
// zeros past the last row. Lanes take rows so the transposing stores are
// conflict-free; the strided global reads hit the same sectors for 8
// consecutive i and stay in L1.
__device__ void LoadTile(const float* __restrict__ x, uint64_t rows, uint32_t d, uint64_t r0, uint32_t c0, uint32_t len,
                         float* xs) {
  const uint32_t total = len * kTile;
  for (uint32_t e = threadIdx.x; e < total; e += blockDim.x) {
    const uint32_t r = e & 31, i = e >> 5;
    xs[e] = r0 + r < rows ? x[(r0 + r) * d + c0 + i] : 0.0f;
  }
}

// Activation of output j for this lane's row. packed is [m][sPad] 16-bit
// indices (8 per uint4), warp-uniform, so each load is one broadcast; xl is
// xs + lane. Inputs are added in ascending order to a (0, or the sum over
// earlier column chunks), as on the CPU.
__device__ __forceinline__ float TileAct(const float* xl, const uint4* __restrict__ pj, uint32_t full, uint32_t rem,
                                         float a) {
  // Unrolled so the index loads (L2 latency: the table outgrows L1) are all
  // in flight before the first gather.
#pragma unroll 4
  for (uint32_t p = 0; p < full; ++p) {
    const uint4 q = pj[p];
    a += xl[(q.x & 0xffffu) << 5];
    a += xl[(q.x >> 16) << 5];
    a += xl[(q.y & 0xffffu) << 5];
    a += xl[(q.y >> 16) << 5];
    a += xl[(q.z & 0xffffu) << 5];
    a += xl[(q.z >> 16) << 5];
    a += xl[(q.w & 0xffffu) << 5];
    a += xl[(q.w >> 16) << 5];
  }
  if (rem) {
    const uint4 q = pj[full];
    const uint32_t v[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (uint32_t u = 0; u < 7; ++u)
      if (u < rem) a += xl[((v[u >> 1] >> ((u & 1) * 16)) & 0xffffu) << 5];
  }
  return a;
}

// One warp: the key window [lo, hi] of a row from a sample of its keys
// (keys[j * stride], j < S): keys above hi are surely among the row's k
// largest, the k-th largest is at least lo with high probability (ranks from
// the plan; 0 leaves that side open).
// Both ranks share the min/max pass and, while their prefixes agree, each
// histogram pass.
__device__ void Window(const uint32_t* keys, uint32_t stride, uint32_t S, uint32_t hiRank, uint32_t loRank,
                       uint32_t* hist, uint32_t& lo, uint32_t& hi) {
  hi = kFull;
  lo = 0;
  if (!hiRank && !loRank) return;
  Sel a = SelStart(keys, stride, S, hiRank ? hiRank : loRank);
  Sel b = a;
  b.kk = loRank;
  if (hiRank && loRank) {
    while (!SelDone(a) && !SelDone(b) && a.prefix == b.prefix && a.mask == b.mask)
      SelPass(keys, stride, S, a, &b, hist);
    while (!SelDone(b)) SelPass(keys, stride, S, b, nullptr, hist);
  }
  while (!SelDone(a)) SelPass(keys, stride, S, a, nullptr, hist);
  if (hiRank) {
    hi = a.prefix | ~a.mask;
    if (loRank) lo = b.prefix;
  } else {
    lo = a.prefix;
  }
}

// Inputs wider than shared memory: the columns go in `count` chunks of `len`
// (the last one shorter). Output j's indices are sorted, so its inputs in
// chunk c are contiguous: chunk c has its own table ([m][packs[c]] uint4 at
// off[c], indices relative to the chunk) and cnt[c * m + j] counts them.
// Partial sums wait in part ([j][32] floats per tile, coalesced) between
// chunks. count = 1: one table, no cnt, no part.
constexpr uint32_t kMaxChunks = 8;
struct Chunks {
  uint32_t count = 1, len = 0;
  uint32_t packs[kMaxChunks] = {};
  uint64_t off[kMaxChunks] = {};
  const uint16_t* cnt = nullptr;
  float* part = nullptr;
};

// m too large for 32 rows of keys in shared memory. 1) Outputs [0, S) of the 32 rows (a random
// sample of outputs: the projection is random) give each row a key window
// [lo, hi] that holds its k-th largest with high probability. 2) One pass over
// all outputs: keys above hi are winners (bits written at once, counted),
// keys in the window go to the row's list in device memory (cap entries).
// 3) A warp per row selects exactly among the listed keys and sets their
// winners' bits. A row whose k-th largest falls outside its window, or whose
// list overflows, is flagged in fail[] for FallbackKernel.
__global__ void __launch_bounds__(1024, 1)
    TileLargeKernel(const float* __restrict__ x, uint64_t rows, uint32_t d, const uint4* __restrict__ packed,
                    uint32_t full, uint32_t rem, uint32_t m, uint32_t k, uint32_t S, uint32_t hiRank, uint32_t loRank,
                    uint32_t cap, bool forceFail, uint32_t* bits, uint32_t* listKey, uint32_t* listJ,
                    uint32_t* __restrict__ fail, const Chunks ch) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ uint32_t rLo[kTile], rHi[kTile], rOver[kTile], rCount[kTile];
  float* xs = reinterpret_cast<float*>(smem);  // one column chunk of the tile
  uint32_t* sk = reinterpret_cast<uint32_t*>(smem + Align16(uint64_t(ch.len) * kTile * 4));
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint32_t* wh = sk + uint64_t(S) * kKeyStride + warp * 256;
  const uint64_t r0 = uint64_t(blockIdx.x) * kTile;
  const uint64_t words = (uint64_t(m) + 31) / 32;
  const float* xl = xs + lane;
  float* part = ch.part + uint64_t(blockIdx.x) * m * kTile;
  for (uint32_t c = 0; c + 1 < ch.count; ++c) {
    LoadTile(x, rows, d, r0, c * ch.len, ch.len, xs);
    __syncthreads();
    const uint4* tab = packed + ch.off[c];
    const uint16_t* cn = ch.cnt + uint64_t(c) * m;
    for (uint32_t j = warp; j < m; j += 32) {
      const uint32_t n = cn[j];
      float* pa = part + uint64_t(j) * kTile + lane;
      *pa = TileAct(xl, tab + uint64_t(j) * ch.packs[c], n >> 3, n & 7, c == 0 ? 0.0f : *pa);
    }
    __syncthreads();  // xs is reloaded; part is read by other warps below
  }
  const uint32_t last = ch.count - 1;
  const uint4* tab = packed + ch.off[last];
  const uint32_t lastPacks = ch.packs[last];
  // Key of output j for this lane's row: the last chunk's inputs added to the
  // earlier chunks' sum.
  auto key = [&](uint32_t j) -> uint32_t {
    if (last == 0) return DeviceKey(TileAct(xl, tab + uint64_t(j) * lastPacks, full, rem, 0.0f));
    const uint32_t n = ch.cnt[uint64_t(last) * m + j];
    return DeviceKey(TileAct(xl, tab + uint64_t(j) * lastPacks, n >> 3, n & 7, part[uint64_t(j) * kTile + lane]));
  };
  LoadTile(x, rows, d, r0, last * ch.len, d - last * ch.len, xs);
  __syncthreads();
  for (uint32_t j = warp; j < S; j += 32) sk[uint64_t(j) * kKeyStride + lane] = key(j);
  __syncthreads();
  {
    uint32_t loKey, hiKey;
    Window(sk + warp, kKeyStride, S, hiRank, loRank, wh, loKey, hiKey);
    if (lane == 0) {
      rLo[warp] = loKey;
      rHi[warp] = hiKey;
      rOver[warp] = 0;
      rCount[warp] = 0;
    }
  }
  __syncthreads();
  {
    const uint32_t lo = rLo[lane], hi = rHi[lane];
    const uint64_t row = r0 + lane;
    const bool live = row < rows;
    uint32_t* myKey = listKey + row * cap;
    uint32_t* myJ = listJ + row * cap;
    uint32_t over = 0;
    for (uint32_t w = warp; w < words; w += 32) {
      uint32_t word = 0;
      const uint32_t j0 = w * 32, j1 = min(m, j0 + 32);
      for (uint32_t j = j0; j < j1; ++j) {
        const uint32_t kj = key(j);
        if (kj > hi) {
          word |= 1u << (j & 31);
          ++over;
        } else if (kj >= lo && live) {
          const uint32_t pos = atomicAdd(&rCount[lane], 1u);
          if (pos < cap) {
            myKey[pos] = kj;
            myJ[pos] = j;
          }
        }
      }
      if (live) bits[row * words + w] = word;
    }
    atomicAdd(&rOver[lane], over);
  }
  // Also orders the bit and list stores above before the reads and atomicOr below.
  __syncthreads();
  const uint64_t row = r0 + warp;
  if (row >= rows) return;
  const bool ok = SelectListed(listKey + row * cap, listJ + row * cap, rCount[warp], rOver[warp], k, cap, forceFail,
                               bits + row * words, wh);
  if (lane == 0) fail[row] = ok ? 0u : 1u;
}

// Indices output of TileLarge: a warp per row turns its bits into ascending
// indices (exactly k bits are set). Failed rows are left to FallbackKernel.
__global__ void BitsToIndicesKernel(const uint32_t* __restrict__ bits, uint64_t words,
                                    const uint32_t* __restrict__ fail, uint64_t rows, uint32_t k,
                                    uint32_t* __restrict__ out) {
  const unsigned lane = threadIdx.x & 31;
  const uint64_t warps = (uint64_t(gridDim.x) * blockDim.x) >> 5;
  for (uint64_t row = (uint64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; row < rows; row += warps) {
    if (fail[row]) continue;
    uint32_t seen = 0;
    for (uint64_t base = 0; base < words; base += 32) {
      const uint64_t w = base + lane;
      uint32_t word = w < words ? bits[row * words + w] : 0u;
      const uint32_t cnt = __popc(word);
      const uint32_t incl = WarpInclusiveSum(cnt);
      uint32_t pos = seen + incl - cnt;
      while (word) {
        const uint32_t b = __ffs(word) - 1;
        if (pos < k) out[row * k + pos] = uint32_t(w * 32 + b);
        ++pos;
        word &= word - 1;
      }
      seen += __shfl_sync(kFull, incl, 31);
    }
  }
}

}  // namespace
}  // namespace flyhash
}  // namespace cusim
