// FlyHash on one GPU. Three families of kernels (docs/perf/flyhash.md says
// why, with the arithmetic and the current numbers):
//  - tile kernels (d < 65536 and a 32-row tile of X fits in shared memory): a
//    block takes 32 rows, lane r of every warp computes row r, so each index
//    load serves 32 rows and the gathers xs[i][lane] never conflict.
//    TileSmall keeps all 32*m keys in shared memory and selects one row per
//    warp. TileLarge (m too large for that) computes a sample of outputs
//    first, brackets each row's k-th largest, then makes one pass that writes
//    the sure winners' bits and lists the bracketed keys in device memory;
//    a warp per row then selects exactly among the listed keys. Rows whose
//    bracket misses are flagged and redone exactly by FallbackKernel.
//  - legacy fused path (below), and
//  - legacy two-pass path, for wide inputs or few rows.
// Legacy fused path: a block takes R rows, keeps them in shared
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
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "../native/flyhash.h"
#include "../native/gpu.h"
#include "../native/parallel.h"
#include "../native/phase_log.h"
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

// This lane's rank among the lanes set in `mask`, over the whole block with
// warps in order, and the block's total. Every thread calls it (two barriers;
// `slots` holds one count per warp).
__device__ __forceinline__ uint32_t BlockRank(uint32_t* slots, unsigned mask, unsigned warp, unsigned nw,
                                              unsigned lane, uint32_t& total) {
  if (lane == 0) slots[warp] = __popc(mask);
  __syncthreads();
  uint32_t before = 0;
  total = 0;
  for (unsigned w = 0; w < nw; ++w) {
    const uint32_t c = slots[w];
    if (w < warp) before += c;
    total += c;
  }
  __syncthreads();
  return before + __popc(mask & LanesBelow());
}

__device__ __forceinline__ uint32_t WarpInclusiveSum(uint32_t v) {
  const unsigned lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const uint32_t n = __shfl_up_sync(kFull, v, o);
    if (lane >= unsigned(o)) v += n;
  }
  return v;
}

// One full warp over 256 bin counts, from the top bin down: the bin where the
// running count reaches kk (1 <= kk <= total). mine is set on the one lane that
// found it; above counts the keys in higher bins, cnt those in the bin.
struct TopBin {
  bool mine;
  uint32_t digit, above, cnt;
};
__device__ __forceinline__ TopBin FindTopBin(const uint32_t* hist, uint32_t kk) {
  const unsigned lane = threadIdx.x & 31;
  // Lane l covers bins 255-8l down to 248-8l.
  uint32_t c[8], sum = 0;
#pragma unroll
  for (int q = 0; q < 8; ++q) {
    c[q] = hist[255 - (lane * 8 + q)];
    sum += c[q];
  }
  const uint32_t incl = WarpInclusiveSum(sum), excl = incl - sum;
  TopBin b{excl < kk && kk <= incl, 0, excl, 0};
  if (b.mine) {
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      if (b.cnt == 0 && b.above + c[q] >= kk) {
        b.digit = 255 - (lane * 8 + q);
        b.cnt = c[q];
      } else if (b.cnt == 0) {
        b.above += c[q];
      }
    }
  }
  return b;
}

// Whole block: selects the k largest of keys[0, m) (ties to the lower index)
// and writes them to out as bits (ceil(m/32) words) or k ascending indices.
// Every thread of the block must call it; keys may be shared or global.
__device__ void SelectWrite(const uint32_t* keys, uint32_t m, uint32_t k, bool indices, uint32_t* __restrict__ out,
                            Scratch& sc) {
  const unsigned tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, B = blockDim.x, nw = B >> 5;
  uint32_t prefix = 0, kk = k, eqCount = 0, mask = 0;
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
      const TopBin b = FindTopBin(sc.hist, kk);
      if (b.mine) {
        sc.digit = b.digit;
        sc.above = b.above;
      }
    }
    __syncthreads();
    const uint32_t dg = sc.digit;
    prefix |= dg << shift;
    kk -= sc.above;
    eqCount = sc.hist[dg];
    mask = kFull << shift;
    __syncthreads();
    // Every key with this prefix is a winner: later digits cannot matter.
    if (eqCount == kk) break;
  }
  // The k-th largest key has top bits (mask) v; k - kk keys have higher top
  // bits and the kk lowest-index keys with top bits v complete the winners
  // (all of them when the loop stopped early). mask is full after 4 passes.
  const uint32_t v = prefix;
  const bool allEqual = kk == eqCount;
  uint32_t eqBase = 0, winBase = 0;
  for (uint32_t base = 0; base < m; base += B) {
    const uint32_t j = base + tid;
    const bool valid = j < m;
    const uint32_t key = (valid ? keys[j] : 0u) & mask;
    const bool eq = valid && key == v;
    bool win = valid && key > v;
    if (allEqual) {
      win = win || eq;
    } else {
      uint32_t total;
      const uint32_t before = eqBase + BlockRank(sc.warpA, __ballot_sync(kFull, eq), warp, nw, lane, total);
      win = win || (eq && before < kk);
      eqBase += total;
    }
    const unsigned winMask = __ballot_sync(kFull, win);
    if (!indices) {
      if (lane == 0 && base + warp * 32 < m) out[(base + warp * 32) >> 5] = winMask;
    } else {
      uint32_t total;
      const uint32_t before = winBase + BlockRank(sc.warpB, winMask, warp, nw, lane, total);
      if (win) out[before] = j;
      winBase += total;
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
  // Unrolled so 8 index loads (from L2 or HBM: CIFAR's table is 30 MB) are in
  // flight at once instead of one load's latency per add.
#pragma unroll 8
  for (uint32_t t = 0; t < s; ++t) Add(acc, xv[col[uint64_t(t) * m]]);
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

// ---- tile kernels ----------------------------------------------------------------

constexpr uint32_t kTile = 32;       // rows per block: one per lane
constexpr uint32_t kKeyStride = 33;  // keys[j][33]: lane-per-row writes and warp-per-row reads both conflict-free
constexpr uint32_t kEqCap = 256;     // tied keys a TileLarge row can rank in its warp's 256-word scratch

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

// Whole block: loads the tile, then keys[j][33] of outputs j < count for
// its 32 rows (warps split the outputs, lanes the rows).
__device__ void TileKeys(const float* __restrict__ x, uint64_t rows, uint32_t d, uint64_t r0,
                         const uint4* __restrict__ packed, uint32_t packs, uint32_t full, uint32_t rem, uint32_t count,
                         float* xs, uint32_t* keys) {
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  LoadTile(x, rows, d, r0, 0, d, xs);
  __syncthreads();
  const float* xl = xs + lane;
  for (uint32_t j = warp; j < count; j += 32)
    keys[uint64_t(j) * kKeyStride + lane] = DeviceKey(TileAct(xl, packed + uint64_t(j) * packs, full, rem, 0.0f));
  __syncthreads();
}

// Result of WarpSelect: the kth largest key has (key & mask) == prefix (mask
// covers the top bits); kk of the eq keys with that prefix are winners, the
// lowest-index ones when kk < eq (then mask is all ones).
struct Sel {
  uint32_t prefix, mask, kk, eq;
};

// One warp: the least and greatest of v[j * stride], j < n (lo and hi come
// in as the identities), on every lane.
template <typename T>
__device__ __forceinline__ void WarpMinMax(const T* v, uint32_t stride, uint32_t n, T& lo, T& hi) {
  for (uint32_t j = threadIdx.x & 31; j < n; j += 32) {
    const T x = v[uint64_t(j) * stride];
    lo = min(lo, x);
    hi = max(hi, x);
  }
#pragma unroll
  for (int o = 16; o; o >>= 1) {
    lo = min(lo, __shfl_xor_sync(kFull, lo, o));
    hi = max(hi, __shfl_xor_sync(kFull, hi, o));
  }
}

// One warp: the select's start for the kth largest of n keys: bits shared by
// all of them (from min/max) are already decided.
__device__ Sel SelStart(const uint32_t* keys, uint32_t stride, uint32_t n, uint32_t kth) {
  uint32_t lo = kFull, hi = 0;
  WarpMinMax(keys, stride, n, lo, hi);
  const uint32_t diff = lo ^ hi;
  Sel s;
  s.mask = diff == 0 ? kFull : ~(kFull >> __clz(diff));
  s.prefix = lo & s.mask;
  s.kk = kth;
  s.eq = n;
  return s;
}

// Every key with the prefix is a winner (or the key is fully known).
__device__ __forceinline__ bool SelDone(const Sel& s) { return s.mask == kFull || s.eq == s.kk; }

// One radix pass (up to 8 more bits) for up to two selects that share their
// prefix and mask (b may be null): one histogram of the keys with that
// prefix serves both.
__device__ void SelPass(const uint32_t* keys, uint32_t stride, uint32_t n, Sel& a, Sel* b, uint32_t* hist) {
  const unsigned lane = threadIdx.x & 31;
  const uint32_t free = 32 - __popc(a.mask);
  const uint32_t width = min(free, 8u), shift = free - width, dmask = (1u << width) - 1;
#pragma unroll
  for (int q = 0; q < 8; ++q) hist[lane * 8 + q] = 0;
  __syncwarp();
  for (uint32_t base = 0; base < n; base += 32) {
    const uint32_t j = base + lane;
    const uint32_t key = j < n ? keys[uint64_t(j) * stride] : 0u;
    const bool in = j < n && (key & a.mask) == a.prefix;
    const uint32_t digit = (key >> shift) & dmask;
    const unsigned peers = __match_any_sync(kFull, in ? digit : 0x100u);
    if (in && (peers & LanesBelow()) == 0) atomicAdd(&hist[digit], uint32_t(__popc(peers)));
  }
  __syncwarp();
  for (int w = 0; w < (b ? 2 : 1); ++w) {
    Sel& s = w == 0 ? a : *b;
    const TopBin t = FindTopBin(hist, s.kk);
    // Exactly one lane holds the bin (the counts with this prefix total eq >= kk).
    const int src = __ffs(__ballot_sync(kFull, t.mine)) - 1;
    const uint32_t digit = __shfl_sync(kFull, t.digit, src);
    const uint32_t above = __shfl_sync(kFull, t.above, src);
    const uint32_t cnt = __shfl_sync(kFull, t.cnt, src);
    s.prefix |= digit << shift;
    s.mask |= dmask << shift;
    s.kk -= above;
    s.eq = cnt;
  }
  __syncwarp();
}

// One warp: radix select of the kth largest (1 <= kth <= n) of keys[j *
// stride], j < n. Bits shared by all keys are skipped (min/max first); stops
// as soon as every key with the current prefix is a winner. hist: 256 words
// owned by this warp.
__device__ Sel WarpSelect(const uint32_t* keys, uint32_t stride, uint32_t n, uint32_t kth, uint32_t* hist) {
  Sel s = SelStart(keys, stride, n, kth);
  while (!SelDone(s)) SelPass(keys, stride, n, s, nullptr, hist);
  return s;
}

// One warp writes row's winners among keys[j * stride], j < n, in ascending
// j: bits (one ballot per word) or k indices.
__device__ void WarpWrite(const uint32_t* keys, uint32_t stride, uint32_t n, const Sel& s, bool indices,
                          uint32_t* __restrict__ out) {
  const unsigned lane = threadIdx.x & 31;
  uint32_t eqSeen = 0, winSeen = 0;
  for (uint32_t base = 0; base < n; base += 32) {
    const uint32_t j = base + lane;
    const bool valid = j < n;
    const uint32_t mk = (valid ? keys[uint64_t(j) * stride] : 0u) & s.mask;
    const bool eq = valid && mk == s.prefix;
    const unsigned eqMask = __ballot_sync(kFull, eq);
    const bool win = valid && (mk > s.prefix || (eq && eqSeen + __popc(eqMask & LanesBelow()) < s.kk));
    eqSeen += __popc(eqMask);
    const unsigned winMask = __ballot_sync(kFull, win);
    if (!indices) {
      if (lane == 0) out[base >> 5] = winMask;
    } else {
      if (win) out[winSeen + __popc(winMask & LanesBelow())] = j;
      winSeen += __popc(winMask);
    }
  }
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

// One warp: a row's k winners when ov keys lay above its window (their bits
// are set) and its n window keys were listed (lk, lj; cap entries kept).
// Sets the winning listed keys' bits and returns true, or returns false when
// the window missed the k-th largest, the list overflowed, or more keys tie
// at the k-th value than the warp ranks (the row then needs the exact path).
// wh: 256 words owned by this warp.
__device__ bool SelectListed(const uint32_t* lk, const uint32_t* lj, uint32_t n, uint32_t ov, uint32_t k, uint32_t cap,
                             bool forceFail, uint32_t* rowBits, uint32_t* wh) {
  const unsigned lane = threadIdx.x & 31;
  bool ok = !forceFail && n <= cap && ov < k && k - ov <= n;
  if (ok) {
    const Sel s = WarpSelect(lk, 1, n, k - ov, wh);
    const bool takeAll = s.kk == s.eq;
    ok = takeAll || s.eq <= kEqCap;
    if (ok) {
      if (!takeAll) {
        // Indices of the keys equal to the k-th largest (mask is full here).
        uint32_t seen = 0;
        for (uint32_t base = 0; base < n; base += 32) {
          const uint32_t i = base + lane;
          const bool eq = i < n && lk[i] == s.prefix;
          const unsigned em = __ballot_sync(kFull, eq);
          if (eq) wh[seen + __popc(em & LanesBelow())] = lj[i];
          seen += __popc(em);
        }
        __syncwarp();
      }
      for (uint32_t i = lane; i < n; i += 32) {
        const uint32_t mk = lk[i] & s.mask;
        if (mk < s.prefix) continue;
        const uint32_t j = lj[i];
        bool win = mk > s.prefix || takeAll;
        if (!win) {
          uint32_t rank = 0;  // equal keys with a lower index
          for (uint32_t q = 0; q < s.eq; ++q) rank += wh[q] < j;
          win = rank < s.kk;
        }
        if (win) atomicOr(&rowBits[j >> 5], 1u << (j & 31));
      }
    }
  }
  return ok;
}

// m small enough that 32 rows of keys fit in shared memory: one pass, one
// warp per row selects. Shared: xs[d][32], keys[m][33], 32 warp histograms.
__global__ void __launch_bounds__(1024, 1)
    TileSmallKernel(const float* __restrict__ x, uint64_t rows, uint32_t d, const uint4* __restrict__ packed,
                    uint32_t packs, uint32_t full, uint32_t rem, uint32_t m, uint32_t k, bool indices,
                    uint32_t* __restrict__ out, uint64_t outStride) {
  extern __shared__ __align__(16) unsigned char smem[];
  float* xs = reinterpret_cast<float*>(smem);
  uint32_t* keys = reinterpret_cast<uint32_t*>(smem + Align16(uint64_t(d) * kTile * 4));
  uint32_t* hist = keys + uint64_t(m) * kKeyStride;
  const unsigned warp = threadIdx.x >> 5;
  const uint64_t r0 = uint64_t(blockIdx.x) * kTile;
  TileKeys(x, rows, d, r0, packed, packs, full, rem, m, xs, keys);
  const uint64_t row = r0 + warp;
  if (row >= rows) return;
  const Sel s = WarpSelect(keys + warp, kKeyStride, m, k, hist + warp * 256);
  WarpWrite(keys + warp, kKeyStride, m, s, indices, out + row * outStride);
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

// m too large for TileSmall. 1) Outputs [0, S) of the 32 rows (a random
// sample of outputs: the projection is random) give each row a key window
// [lo, hi] that holds its k-th largest with high probability. 2) One pass over
// all outputs: keys above hi are winners (bits written at once, counted),
// keys in the window go to the row's list in device memory (cap entries).
// 3) A warp per row selects exactly among the listed keys and sets their
// winners' bits. A row whose k-th largest falls outside its window, or whose
// list overflows, is flagged in fail[] for FallbackKernel.
__global__ void __launch_bounds__(1024, 1)
    TileLargeKernel(const float* __restrict__ x, uint64_t rows, uint32_t d, const uint4* __restrict__ packed,
                    uint32_t full, uint32_t rem, uint32_t m, uint32_t k, uint32_t S, uint32_t hiRank,
                    uint32_t loRank, uint32_t cap, bool forceFail, uint32_t* bits, uint32_t* listKey,
                    uint32_t* listJ, uint32_t* __restrict__ fail, const Chunks ch) {
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
__global__ void BitsToIndicesKernel(const uint32_t* __restrict__ bits, uint64_t words, const uint32_t* __restrict__ fail,
                                    uint64_t rows, uint32_t k, uint32_t* __restrict__ out) {
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

// The contract's float activation of one output: its s inputs (ascending
// 16-bit indices, 8 per uint4) summed in order, as on the CPU. xs: the row,
// in shared memory where many outputs read it (ExactKernel: random reads
// there cost a few bank conflicts, from L1 a wavefront per cache line, so
// wide rows gather markedly faster from shared memory), in device memory for
// RefineKernel's few.
__device__ __forceinline__ float ExactAct(const float* xs, const uint16_t* __restrict__ in, uint32_t s) {
  const uint4* p = reinterpret_cast<const uint4*>(in);
  const uint32_t full = s / 8;
  float a = 0.0f;
  // Unrolled so several index loads (L2) are in flight at once.
#pragma unroll 4
  for (uint32_t t = 0; t < full; ++t) {
    const uint4 q = __ldg(p + t);
    a += xs[q.x & 0xffffu];
    a += xs[q.x >> 16];
    a += xs[q.y & 0xffffu];
    a += xs[q.y >> 16];
    a += xs[q.z & 0xffffu];
    a += xs[q.z >> 16];
    a += xs[q.w & 0xffffu];
    a += xs[q.w >> 16];
  }
  for (uint32_t t = full * 8; t < s; ++t) a += xs[in[t]];
  return a;
}

// Exact path for the flagged rows of TileLarge and of the tensor-core path
// (T = uint8_t: rows of xStride bytes), listed by FailListKernel. The keys of
// the first kFallbackSpread listed rows come from FallbackActKernel, spread
// over many blocks; FallbackKernel then selects with SelectWrite, a block per
// row. Rows past those (many misses: ties, forced fallback) have their keys
// computed by their selecting block: one block computing all of a row's keys
// made a batch's one or two misses cost as much as a large share of the
// batch. Rows of up to kFallbackStage values are copied to shared
// memory as floats and the keys summed by ExactAct (8 indices per load).
constexpr uint32_t kFallbackStage = 8192;
constexpr uint32_t kFallbackSpread = 16;
constexpr uint32_t kFallbackActKeys = 1024;  // keys per FallbackActKernel block

template <typename T>
__device__ __forceinline__ void FallbackKeys(const T* xr, uint32_t d, const uint16_t* __restrict__ packed16,
                                             uint32_t sPad, uint32_t s, uint32_t j0, uint32_t j1, float* xs,
                                             uint32_t* keys) {
  const bool staged = d <= kFallbackStage;
  if (staged) {
    for (uint32_t i = threadIdx.x; i < d; i += blockDim.x) xs[i] = float(xr[i]);
    __syncthreads();
  }
  for (uint32_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
    const uint16_t* in = packed16 + uint64_t(j) * sPad;
    float a = 0.0f;
    if (staged) {
      a = ExactAct(xs, in, s);
    } else {
      for (uint32_t t = 0; t < s; ++t) a += float(xr[in[t]]);
    }
    keys[j] = DeviceKey(a);
  }
}

// blockIdx.y: the listed row (< kFallbackSpread), blockIdx.x: its outputs
// [kFallbackActKeys x, kFallbackActKeys (x + 1)), keys to scratch[y * m + j].
template <typename T>
__global__ void __launch_bounds__(256)
    FallbackActKernel(const T* __restrict__ x, uint32_t d, uint32_t xStride, const uint16_t* __restrict__ packed16,
                      uint32_t sPad, uint32_t s, uint32_t m, const uint32_t* __restrict__ failCount,
                      const uint32_t* __restrict__ failList, uint32_t* scratch) {
  __shared__ float xs[kFallbackStage];
  if (blockIdx.y >= *failCount) return;
  const uint32_t j0 = blockIdx.x * kFallbackActKeys, j1 = min(m, j0 + kFallbackActKeys);
  FallbackKeys(x + uint64_t(failList[blockIdx.y]) * xStride, d, packed16, sPad, s, j0, j1, xs,
               scratch + uint64_t(blockIdx.y) * m);
}

template <typename T>
__global__ void __launch_bounds__(1024)
    FallbackKernel(const T* __restrict__ x, uint32_t d, uint32_t xStride, const uint16_t* __restrict__ packed16,
                   uint32_t sPad, uint32_t s, uint32_t m, uint32_t k, const uint32_t* __restrict__ failCount,
                   const uint32_t* __restrict__ failList, bool indices, uint32_t* __restrict__ out, uint64_t outStride,
                   uint32_t* scratch) {
  __shared__ Scratch sc;
  __shared__ float xs[kFallbackStage];
  // scratch: kFallbackSpread rows of FallbackActKernel's keys, then a row per block.
  uint32_t* own = scratch + uint64_t(kFallbackSpread + blockIdx.x) * m;
  for (uint32_t f = blockIdx.x, nf = *failCount; f < nf; f += gridDim.x) {
    const uint64_t row = failList[f];
    uint32_t* keys = f < kFallbackSpread ? scratch + uint64_t(f) * m : own;
    if (f >= kFallbackSpread) FallbackKeys(x + row * xStride, d, packed16, sPad, s, 0, m, xs, keys);
    __syncthreads();
    SelectWrite(keys, m, k, indices, out + row * outStride, sc);
    __syncthreads();  // before the next row overwrites keys and xs
  }
}

// The rows flagged in fail[0, rows) to list[0, *count) (count zeroed before).
__global__ void FailListKernel(const uint32_t* __restrict__ fail, uint64_t rows, uint32_t* __restrict__ count,
                               uint32_t* __restrict__ list) {
  for (uint64_t r = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < rows; r += uint64_t(gridDim.x) * blockDim.x)
    if (fail[r]) list[atomicAdd(count, 1u)] = uint32_t(r);
}

// ---- int8 tensor cores (byte-valued inputs) ------------------------------------
//
// When every input is an integer in [0, 255] and s * 255 < 2^24, each
// activation is an exact integer, equal bit for bit to the float contract's
// sequential sum. The activations are then X (bytes) times the 0/1 projection
// matrix, which int8 mma.sync computes exactly with int32 accumulators: many
// more multiply-adds than the gathers (the matrix is dense), but at
// tensor-core rates, and no float order to respect. docs/perf/flyhash.md has
// the arithmetic.
//
// A block keeps a 64-row tile of X in shared memory for its whole life; each
// warp computes 64 rows x 32 outputs at a time (4 x 4 m16n8k32 fragments).
// The projection is read as bits, [k-step][mPad] words (one per 32 inputs
// and output, in WordSlot order within each group of 32 outputs), and each
// lane turns its byte of a word into the 0/1 bytes of its B fragment
// (ExpandB): 8x less L2 traffic than int8 bytes.
// Selection is TileLarge's: a sample of outputs (the first S) brackets each
// row's k-th largest (WindowKernel), one pass writes the bits above the
// window and lists the keys inside it (MmaKernel, Sample = false),
// ListKernel selects among the listed keys, FallbackKernel redoes flagged
// rows.

constexpr uint32_t kMmaRows = 64;

// mma.sync on u8 fragments of m16n8k32, cp.async and the warp reductions below
// need sm_80: for older targets (Turing) their bodies trap, and MakePlan never
// picks this path on a GPU without tensor-core kernels (TensorCoreKernels).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define CUSIM_FLY_SM80 0
#else
#define CUSIM_FLY_SM80 1
#endif
// 16 warps per multiprocessor either way: two blocks of 8 warps, or one of
// 16 where the tile leaves room for one block only (wide rows). Both fit
// the 128 registers a thread needs.
constexpr uint32_t kMmaWarpsPerSm = 16;

// Byte tile row stride: a multiple of 16 with an odd quotient, so the eight
// 16-byte rows one ldmatrix phase reads fall in distinct bank groups.
__host__ __device__ inline uint32_t MmaStride(uint32_t kp) { return kp + 16; }
// The byte tile, the rows' windows (lo, hi), 8 words a lane and, where the
// words are staged, two groups' words per warp (MmaKernel).
inline size_t MmaSmem(uint32_t kp, uint32_t warps, bool stageB) {
  return size_t(kMmaRows) * MmaStride(kp) + 2 * kMmaRows * 4 + size_t(warps) * 32 * 8 * 4 +
         (stageB ? size_t(warps) * (kp / 32) * 256 : 0);
}

// 4 bits -> 4 bytes of 0/1 (the shifted copies do not overlap, so no carries).
__device__ __forceinline__ uint32_t ExpandNibble(uint32_t v) { return (v * 0x00204081u) & 0x01010101u; }

// Bit b of a k-step's 32 inputs, as stored: byte t of a word holds the bits
// lane t4 = t needs for its B fragment (inputs 4t..4t+3 in the low nibble,
// 16+4t..16+4t+3 in the high one), so a lane extracts its byte with one PRMT
// and expands each nibble with a multiply and a mask. (A 2 KB shared table
// is no faster: its random lookups conflict in the banks.)
inline uint32_t StoredBit(uint32_t b) { return b < 16 ? (b / 4) * 8 + b % 4 : ((b - 16) / 4) * 8 + 4 + (b - 16) % 4; }

__device__ __forceinline__ void LdMatrixX4(uint32_t (&a)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(addr));
}

// volatile, like the fragment loads: the compiler otherwise sinks each
// ldmatrix to just before its four MMAs and reuses one register set, so
// every four MMAs wait out an ldmatrix latency (seen in the SASS).
__device__ __forceinline__ void MmaU8(int (&c)[4], const uint32_t (&a)[4], uint2 b) {
#if CUSIM_FLY_SM80
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b.x), "r"(b.y));
#else
  __trap();
#endif
}

// The keys of this path are the sums themselves (non-negative integers order
// as their floats do, and exact): the selects below then see the few bits in
// which a row's sums differ, not a float's spread-out mantissa, and finish in
// fewer radix passes.

// A warp's fragments for one k-step of its 64 x 32 block: A from the tile
// (LoadA), B from the words, one per n8 fragment (ExpandB).
__device__ __forceinline__ void LoadA(uint32_t (&a)[4][4], uint32_t aAddr, uint32_t aStep16) {
#pragma unroll
  for (int mt = 0; mt < 4; ++mt) LdMatrixX4(a[mt], aAddr + mt * aStep16);
}

__device__ __forceinline__ void ExpandB(uint2 (&b)[4], uint4 w, uint32_t sel) {
  const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) {
    const uint32_t v = __byte_perm(ws[nt], 0, sel);
    b[nt].x = ExpandNibble(v & 15u);
    b[nt].y = ExpandNibble(v >> 4);
  }
}

__device__ __forceinline__ void MmaTile(int (&acc)[4][4][4], const uint32_t (&a)[4][4], const uint2 (&b)[4]) {
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int mt = 0; mt < 4; ++mt) MmaU8(acc[mt][nt], a[mt], b[nt]);
}

// The words of a k-step are stored so that a lane's four (outputs gid,
// gid + 8, gid + 16, gid + 24 of its group) are adjacent: one 16-byte load.
inline uint64_t WordSlot(uint64_t j) { return j / 32 * 32 + (j % 8) * 4 + (j % 32) / 8; }

#if CUSIM_FLY_SM80
__device__ __forceinline__ void CpAsync16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void CpAsyncWaitOne() { asm volatile("cp.async.wait_group 1;\n" ::); }
#else
__device__ __forceinline__ void CpAsync16(uint32_t, const void*) { __trap(); }
__device__ __forceinline__ void CpAsyncCommit() { __trap(); }
__device__ __forceinline__ void CpAsyncWaitOne() { __trap(); }
#endif

// Sample = true: keys of outputs [0, m) to sample[row * m + j] (m = S).
// Sample = false: all m outputs; keys above hi[row] set their bit and count
// in over[row], keys in [lo[row], hi[row]] are appended to the row's list
// (count[row] entries, cap kept). blockIdx.y splits the 32-output groups
// (few rows). x: rows of kp bytes (kp a multiple of 32, zero-padded).
template <bool Sample, uint32_t Warps, bool StageB>
__global__ void __launch_bounds__(Warps * 32, kMmaWarpsPerSm / Warps)
    MmaKernel(const uint8_t* __restrict__ x, uint64_t rows, uint32_t kp, const uint32_t* __restrict__ wb,
              uint32_t mPad, uint32_t m, uint32_t* __restrict__ sample, const uint32_t* __restrict__ lo,
              const uint32_t* __restrict__ hi, uint32_t cap, uint32_t* __restrict__ bits, uint64_t words,
              uint32_t* __restrict__ listKey, uint32_t* __restrict__ listJ, uint32_t* __restrict__ count,
              uint32_t* __restrict__ over) {
  extern __shared__ __align__(16) unsigned char smem[];
  const uint32_t stride = MmaStride(kp);
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, t4 = lane & 3;
  const uint64_t r0 = uint64_t(blockIdx.x) * kMmaRows;
  const uint32_t vecs = kp / 16;
  for (uint32_t e = threadIdx.x; e < kMmaRows * vecs; e += blockDim.x) {
    const uint32_t r = e / vecs, v = e - r * vecs;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (r0 + r < rows) val = *reinterpret_cast<const uint4*>(x + (r0 + r) * kp + v * 16);
    *reinterpret_cast<uint4*>(smem + r * stride + v * 16) = val;
  }
  // The rows' windows wait in shared memory: the accumulators and the
  // k-loop's fragments need the registers (128 a thread). Behind them, 8
  // words a lane for the append loop below (MmaSmem).
  uint32_t* win = reinterpret_cast<uint32_t*>(smem + kMmaRows * stride);
  uint32_t* pick = win + 2 * kMmaRows + (warp * 32 + lane) * 8;
  const uint32_t ksteps = kp / 32, groups = (m + 31) / 32;
  // StageB: this warp's two buffers of a group's words (ksteps x 32), the
  // next group's copied in (cp.async) while this one computes.
  const uint32_t sB = uint32_t(__cvta_generic_to_shared(win + 2 * kMmaRows + Warps * 256)) + warp * ksteps * 256;
  if constexpr (!Sample)
    for (uint32_t r = threadIdx.x; r < kMmaRows; r += blockDim.x) {
      const uint64_t row = r0 + r;
      win[r] = row < rows ? lo[row] : 0u;
      win[kMmaRows + r] = row < rows ? hi[row] : kFull;
    }
  // This thread's 8 accumulator rows: 16 mt + 8 h + gid, q = 2 mt + h.
  uint32_t ov[8];
#pragma unroll
  for (int q = 0; q < 8; ++q) ov[q] = 0;
  __syncthreads();
  // ldmatrix.x4: lanes 0-7 address rows 0-7 of bytes 0-15 (a0), 8-15 rows 8-15
  // (a1), 16-23 rows 0-7 of bytes 16-31 (a2), 24-31 rows 8-15 (a3).
  const uint32_t aBase = uint32_t(__cvta_generic_to_shared(smem)) + ((lane & 7) + ((lane >> 3) & 1) * 8) * stride +
                         (lane >> 4) * 16;
  const uint32_t aStep16 = 16 * stride;
  const uint32_t sel = 0x4440u | t4;  // PRMT: byte t4 of the word, zeros above
  const uint32_t gStep = gridDim.y * Warps;
  auto stage = [&](uint32_t g, uint32_t buf) {
    if (g < groups)
      for (uint32_t c = lane; c < ksteps * 8; c += 32)
        CpAsync16(sB + buf * ksteps * 128 + c * 16, wb + uint64_t(c >> 3) * mPad + g * 32 + (c & 7) * 4);
    CpAsyncCommit();  // empty past the last group, so the waits below stay uniform
  };
  if constexpr (StageB) stage(blockIdx.y * Warps + warp, 0);
  uint32_t buf = 0;
  for (uint32_t g = blockIdx.y * Warps + warp; g < groups; g += gStep, buf ^= 1) {
    if constexpr (StageB) {
      __syncwarp();  // the warp is done with the other buffer (previous group)
      stage(g + gStep, buf ^ 1);
      CpAsyncWaitOne();
      __syncwarp();  // every lane's copies of this group have landed
    }
    int acc[4][4][4];
#pragma unroll
    for (int mt = 0; mt < 4; ++mt)
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[mt][nt][c] = 0;
    // Column gid of each n8 fragment. Each k-step's words load two steps
    // ahead: from this warp's stage (StageB), else from L2, hundreds of
    // cycles away. (Loading the next step's A fragments during this step's
    // MMAs, with the windows moved to shared memory to free the registers,
    // was slower.)
    const uint4* wp = reinterpret_cast<const uint4*>(wb + g * 32) + gid;
    const uint32_t sw = sB + buf * ksteps * 128 + gid * 16;
    auto loadWords = [&](uint32_t k) {
      if constexpr (StageB) {
        uint4 v;
        asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "r"(sw + k * 128));
        return v;
      } else {
        return __ldg(wp + uint64_t(k) * (mPad / 4));
      }
    };
    uint4 w[2];
    uint32_t a[4][4];
    uint2 b[4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
      if (uint32_t(i) < ksteps) w[i] = loadWords(i);
    for (uint32_t ks = 0; ks < ksteps; ks += 2) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const uint32_t k = ks + i;
        if (k >= ksteps) break;
        LoadA(a, aBase + k * 32, aStep16);
        ExpandB(b, w[i], sel);
        if (k + 2 < ksteps) w[i] = loadWords(k + 2);
        MmaTile(acc, a, b);
      }
    }
    // Fragment c of (mt, nt): row 16 mt + 8 (c >> 1) + gid, output 32 g + 8 nt + 2 t4 + (c & 1).
    const int mRem = int(m - g * 32);  // outputs of this group that exist (>= 32: all)
    if constexpr (Sample) {
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const int mt = q >> 1, h = q & 1;
        const uint64_t row = r0 + 16 * mt + 8 * h + gid;
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const int bit = nt * 8 + 2 * t4 + i;
            if (row < rows && bit < mRem) sample[row * m + g * 32 + bit] = uint32_t(acc[mt][nt][2 * h + i]);
          }
      }
    } else {
      // Which of this lane's outputs exist: as bits of the row's word, and as
      // bits u = 2 nt + i of its 8 values (all, but in the last group).
      const uint32_t validWord = mRem >= 32 ? kFull : (1u << mRem) - 1u;
      uint32_t validIn = 0xffu;
      if (mRem < 32) {
        validIn = 0;
#pragma unroll
        for (int u = 0; u < 8; ++u) validIn |= uint32_t(int((u >> 1) * 8 + 2 * t4 + (u & 1)) < mRem) << u;
      }
      // Three passes over the 8 rows, so that the 8 list reservations
      // (atomics, an L2 round trip each) are in flight together: waiting on
      // each in turn was a visible share of this kernel's stalls.
      // inM[q]: the lane's listed values of row q as bits (8), then from bit 8
      // how many the quad's lower lanes list before it (at most 24).
      uint32_t inM[8], base[8];
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const int mt = q >> 1, h = q & 1;
        const uint32_t r = 16 * mt + 8 * h + gid;
        const uint64_t row = r0 + r;
        const uint32_t rl = win[r], rh = win[kMmaRows + r];
        // Bits at 8 nt + i first (constant shifts), moved to 2 t4 once.
        uint32_t word = 0, inMask = 0;
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const uint32_t v = uint32_t(acc[mt][nt][2 * h + i]);
            word |= uint32_t(v > rh) << (nt * 8 + i);
            inMask |= uint32_t(v >= rl && v <= rh) << (nt * 2 + i);
          }
        word = (word << (2 * t4)) & validWord;
        ov[q] += __popc(word);
        word |= __shfl_xor_sync(kFull, word, 1);
        word |= __shfl_xor_sync(kFull, word, 2);
        const bool live = row < rows;
        if (t4 == 0 && live) bits[row * words + g] = word;
        inM[q] = live ? inMask & validIn : 0u;
      }
      // The four lanes of a row reserve list space with one atomic.
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const uint32_t c = __popc(inM[q]);
        uint32_t incl = c;
        uint32_t t = __shfl_up_sync(kFull, incl, 1, 4);
        if (t4 >= 1) incl += t;
        t = __shfl_up_sync(kFull, incl, 2, 4);
        if (t4 >= 2) incl += t;
        inM[q] |= (incl - c) << 8;
        base[q] = 0;
        const uint64_t row = r0 + 16 * (q >> 1) + 8 * (q & 1) + gid;
        if (t4 == 3 && incl != 0) base[q] = atomicAdd(&count[row], incl);
      }
      // Each lane appends its listed values. The values go through this
      // lane's 8 words of shared memory, so the loop reads value u with one
      // load instead of selecting among 8 registers. (Unrolling over the 8
      // with predicated stores instead costs more instructions.)
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const int mt = q >> 1, h = q & 1;
        uint32_t pos = __shfl_sync(kFull, base[q], 3, 4) + (inM[q] >> 8);
        uint32_t mask = inM[q] & 0xffu;
        if (mask == 0) continue;
        reinterpret_cast<uint4*>(pick)[0] = make_uint4(acc[mt][0][2 * h], acc[mt][0][2 * h + 1], acc[mt][1][2 * h],
                                                       acc[mt][1][2 * h + 1]);
        reinterpret_cast<uint4*>(pick)[1] = make_uint4(acc[mt][2][2 * h], acc[mt][2][2 * h + 1], acc[mt][3][2 * h],
                                                       acc[mt][3][2 * h + 1]);
        const uint64_t row = r0 + 16 * mt + 8 * h + gid;
        uint32_t* lk = listKey + row * cap;
        uint32_t* lj = listJ + row * cap;
        const uint32_t jb = g * 32 + 2 * t4;
        do {
          const uint32_t u = __ffs(mask) - 1;
          mask &= mask - 1;
          if (pos < cap) {
            lk[pos] = pick[u];
            lj[pos] = jb + (u >> 1) * 8 + (u & 1);
          }
          ++pos;
        } while (mask);
      }
    }
  }
  if constexpr (!Sample) {
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      uint32_t v = ov[q];
      v += __shfl_xor_sync(kFull, v, 1);
      v += __shfl_xor_sync(kFull, v, 2);
      const uint64_t row = r0 + 16 * (q >> 1) + 8 * (q & 1) + gid;
      if (t4 == 0 && v != 0 && row < rows) atomicAdd(&over[row], v);
    }
  }
}

template <bool Sample>
auto MmaFor(uint32_t warps, bool stageB) {
  return warps == 16 ? (stageB ? MmaKernel<Sample, 16, true> : MmaKernel<Sample, 16, false>)
                     : (stageB ? MmaKernel<Sample, 8, true> : MmaKernel<Sample, 8, false>);
}

// The row kernels below select among a row's keys several times (min/max,
// then radix passes); each warp first copies up to `stage` of them to shared
// memory (dynamic, stage words per warp), so the passes read shared memory
// instead of waiting on device memory.
__device__ __forceinline__ const uint32_t* StageKeys(const uint32_t* keys, uint32_t n, uint32_t stage, uint32_t* buf) {
  if (n > stage) return keys;
  for (uint32_t i = threadIdx.x & 31; i < n; i += 32) buf[i] = keys[i];
  __syncwarp();
  return buf;
}

constexpr uint32_t kRowWarps = 8;

// ---- float rows on the tensor-core path -----------------------------------------
//
// Float X is quantized per row to bytes, the byte sums Q come from the same
// int8 MMA kernels, and the row's exact float keys are computed only where
// Q cannot decide. Row r: c = min, Δ = 2^e the smallest power of two with
// max - c < 256 Δ, q_i = floor(fl(x_i - c) / Δ) in [0, 255]. An output's
// float key a (the contract's sequential sum) then satisfies
//   a - s c - Δ Q in [-Δ β, Δ α],  α + β <= M,
// with α = s (1 + 257 u) + R / Δ, β = 257 s u + R / Δ (u = 2^-24; fl(x_i - c)
// is off by at most 256 Δ u, the floor by less than Δ; R = γ(s-1) s max|x|
// bounds the float sum's own rounding). So, for Qk the k-th largest Q of the
// row: Q > Qk + M beats every output with Q <= Qk (at least m - k + 1 of
// them), so it is a winner; Q < Qk - M loses to at least k outputs; the
// exact float keys of the outputs within M of Qk decide the rest
// (RefineKernel, ExactKernel). docs/perf/flyhash.md has the numbers.

// Warp per row: the row's bytes (kp per row, zero-padded) and its margin M
// in units of Δ, or kFull where no bound is usable (a range that overflows
// or is below 2^-112, values above 2^100, M >= 2^24): such a row gets an
// empty window and goes to the exact path.
__global__ void __launch_bounds__(256) QuantizeKernel(const float* __restrict__ x, uint64_t rows, uint32_t d,
                                                      uint32_t kp, uint32_t s, uint8_t* __restrict__ xq,
                                                      uint32_t* __restrict__ margin) {
  const unsigned lane = threadIdx.x & 31;
  const uint64_t row = (uint64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (row >= rows) return;
  const float* xr = x + row * d;
  float mn = INFINITY, mx = -INFINITY;
  WarpMinMax(xr, 1, d, mn, mx);
  const float range = __fsub_rn(mx, mn), most = fmaxf(fabsf(mn), fabsf(mx));
  int E = 0;
  frexpf(range, &E);  // range < 2^E
  const int e = range == 0.0f ? 0 : E - 8;
  bool ok = isfinite(range) && most <= 0x1p100f && e >= -120;
  const float inv = ok ? ldexpf(1.0f, -e) : 0.0f;
  uint8_t* qr = xq + row * kp;
  for (uint32_t i = lane; i < kp; i += 32) {
    uint32_t q = 0;
    if (i < d && ok) q = min(255u, uint32_t(floorf(__fmul_rn(__fsub_rn(xr[i], mn), inv))));
    qr[i] = uint8_t(q);
  }
  if (lane == 0) {
    const double u = 0x1p-24, sm1 = double(s) - 1.0;
    const double rOverDelta = sm1 * u / (1.0 - sm1 * u) * double(s) * double(most) / ldexp(1.0, e);
    const double mm = double(s) * (1.0 + 514.0 * u) + 2.0 * rOverDelta;
    ok = ok && mm < 0x1p24;
    // +2: slack for the double arithmetic above.
    margin[row] = ok ? uint32_t(ceil(mm)) + 2u : kFull;
  }
}

// A warp per quantized float row, after MmaKernel: the row's n listed byte
// sums Q (ov lay above the window: their bits are set) bracket Qk in
// [tl, th] (radix passes until at most 2 bits are open: the argument above
// holds for any bracket, with Qk - M and Qk + M widened to tl - M and
// th + M); the listed sure winners get their bits, and the undecided
// outputs move (in order) to the front of the row's list. count[row] becomes their number and over[row]
// k minus the winners still to choose among them, so that ListKernel selects
// among their exact keys (ExactKernel) as among a byte row's list.
// count[row] = kFull where the row needs the exact path: no bound, a list
// overflow, or a window that does not reach M beyond Qk on a bounded side
// (then the outputs above or below it are not surely decided).
// With few undecided outputs a row (in.x set: ~10 on 1M x 128), the warp
// computes their exact keys itself and selects, writing fail[row] as
// ListKernel does: two launches fewer, which cost more there than the work.
struct Inline {
  const float* x = nullptr;  // the batch's float rows, d apart
  uint32_t d = 0, sPad = 0, s = 0;
  const uint16_t* packed16 = nullptr;
  uint32_t* fail = nullptr;
};

__global__ void __launch_bounds__(256) RefineKernel(uint64_t rows, uint32_t k, uint32_t cap, bool forceFail,
                                                    uint32_t stage, uint32_t* __restrict__ count,
                                                    uint32_t* __restrict__ over, uint32_t* listKey, uint32_t* listJ,
                                                    uint32_t* bits, uint64_t words, const uint32_t* __restrict__ margin,
                                                    const uint32_t* __restrict__ lo, const uint32_t* __restrict__ hi,
                                                    Inline in) {
  extern __shared__ __align__(16) uint32_t rowSmem[];
  __shared__ uint32_t wh[kRowWarps][256];
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint64_t row = uint64_t(blockIdx.x) * kRowWarps + warp;
  if (row >= rows) return;
  const uint32_t n = count[row], ov = over[row], M = margin[row];
  bool ok = !forceFail && M != kFull && n <= cap && ov < k && k - ov <= n;
  uint32_t sure = 0, open = 0;
  if (ok) {
    const uint32_t kq = k - ov;
    const uint32_t* lk = StageKeys(listKey + row * cap, n, stage, rowSmem + warp * stage);
    uint32_t* lj = listJ + row * cap;
    uint32_t* rowBits = bits + row * words;
    Sel sq = SelStart(lk, 1, n, kq);
    while (32 - __popc(sq.mask) > 2) SelPass(lk, 1, n, sq, nullptr, wh[warp]);
    const uint32_t tl = sq.prefix, th = sq.prefix | ~sq.mask;
    const uint32_t l = lo[row], h = hi[row];
    ok = (l == 0 || uint64_t(l) + M <= tl) && (h == kFull || uint64_t(th) + M <= h);
    if (ok) {
      const uint64_t top = uint64_t(th) + M;
      for (uint32_t base = 0; base < n; base += 32) {
        const uint32_t i = base + lane;
        const uint32_t q = i < n ? lk[i] : 0u, j = i < n ? lj[i] : 0u;
        const bool win = i < n && q > top;
        const bool undecided = i < n && !win && uint64_t(q) + M >= tl;
        if (win) atomicOr(&rowBits[j >> 5], 1u << (j & 31));
        const unsigned um = __ballot_sync(kFull, undecided);
        sure += __popc(__ballot_sync(kFull, win));
        __syncwarp();  // every lane has read its entry before any is overwritten
        if (undecided) lj[open + __popc(um & LanesBelow())] = j;
        open += __popc(um);
      }
      ok = sure < kq && kq - sure <= open;  // holds while the bounds do
      if (ok && in.x) {
        uint32_t* keys = n <= stage ? rowSmem + warp * stage : listKey + row * cap;  // where lk points
        const float* xr = in.x + row * in.d;
        for (uint32_t i = lane; i < open; i += 32)
          keys[i] = DeviceKey(ExactAct(xr, in.packed16 + uint64_t(lj[i]) * in.sPad, in.s));
        __syncwarp();
        ok = SelectListed(keys, lj, open, 0, kq - sure, cap, false, rowBits, wh[warp]);
      } else if (ok && lane == 0) {
        over[row] = k - (kq - sure);
      }
    }
  }
  if (lane != 0) return;
  if (in.x)
    in.fail[row] = ok ? 0u : 1u;
  else
    count[row] = ok ? open : kFull;
}

// Exact float keys of the undecided outputs RefineKernel listed: rpb rows per
// block (blockDim.x / rpb threads each), each row staged in shared memory.
// Small blocks per row keep many warps resident: the gathers wait on the
// index loads (L2) and on one another.
__global__ void __launch_bounds__(256) ExactKernel(uint64_t rows, uint32_t rpb, uint32_t cap,
                                                   const uint32_t* __restrict__ count, const float* __restrict__ x,
                                                   uint32_t d, const uint16_t* __restrict__ packed16, uint32_t sPad,
                                                   uint32_t s, const uint32_t* __restrict__ listJ,
                                                   uint32_t* __restrict__ listKey) {
  extern __shared__ __align__(16) float rowsSmem[];
  const uint32_t group = blockDim.x / rpb, g = threadIdx.x / group, t = threadIdx.x - g * group;
  const uint64_t row = uint64_t(blockIdx.x) * rpb + g;
  const uint32_t n = row < rows ? count[row] : kFull;
  const bool live = n <= cap;
  float* xs = rowsSmem + g * d;
  if (live)
    for (uint32_t i = t; i < d; i += group) xs[i] = x[row * d + i];
  __syncthreads();
  if (!live) return;
  const uint32_t* lj = listJ + row * cap;
  uint32_t* lk = listKey + row * cap;
  for (uint32_t i = t; i < n; i += group) lk[i] = DeviceKey(ExactAct(xs, packed16 + uint64_t(lj[i]) * sPad, s));
}

// One warp: the hiRank-th and loRank-th largest of S keys held in registers
// (32 KPL slots, zeros past S; rank 0: none), built bit by bit from the top
// differing bit: t takes a bit when at least rank keys are >= t with it.
// Each bit costs KPL compares and one warp reduction per rank; the radix
// select's shared-memory histograms cost ~70 cycles per 32 keys and pass
// (match.any and atomics), several times more on these small samples.
template <int KPL>
__device__ void RankPair(const uint32_t (&v)[KPL], uint32_t S, uint32_t hiRank, uint32_t loRank, uint32_t& tHi,
                         uint32_t& tLo) {
  const unsigned lane = threadIdx.x & 31;
  uint32_t mn = kFull, mx = 0;
#pragma unroll
  for (int i = 0; i < KPL; ++i) {
    const bool valid = uint32_t(i * 32) + lane < S;
    mn = valid ? min(mn, v[i]) : mn;
    mx = valid ? max(mx, v[i]) : mx;
  }
#if CUSIM_FLY_SM80
  mn = __reduce_min_sync(kFull, mn);
  mx = __reduce_max_sync(kFull, mx);
#else
  __trap();
#endif
  const uint32_t diff = mn ^ mx;
  tHi = tLo = mn;
  if (diff == 0) return;
  const int top = 31 - __clz(diff);
  tHi = tLo = top == 31 ? 0u : mx & ~((2u << top) - 1u);  // the bits above top, common to all keys
  for (int b = top; b >= 0; --b) {
    const uint32_t cHi = tHi | (1u << b), cLo = tLo | (1u << b);
    uint32_t nHi = 0, nLo = 0;
#pragma unroll
    for (int i = 0; i < KPL; ++i) {
      nHi += v[i] >= cHi;  // padding zeros never count: candidates are nonzero
      nLo += v[i] >= cLo;
    }
#if CUSIM_FLY_SM80
    if (__reduce_add_sync(kFull, nHi) >= hiRank) tHi = cHi;
    if (__reduce_add_sync(kFull, nLo) >= loRank) tLo = cLo;
#endif
  }
}

// A warp per row: the window [lo, hi] from the row's S sample keys (the
// hiRank-th and loRank-th largest; rank 0 leaves that side open); for
// quantized float rows (margin set) widened by the row's M, or empty where
// the row has no bound.
template <int KPL>
__global__ void __launch_bounds__(256) WindowKernel(const uint32_t* __restrict__ sample, uint64_t rows, uint32_t S,
                                                    uint32_t hiRank, uint32_t loRank,
                                                    const uint32_t* __restrict__ margin, uint32_t* __restrict__ lo,
                                                    uint32_t* __restrict__ hi) {
  const unsigned lane = threadIdx.x & 31;
  const uint64_t row = (uint64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (row >= rows) return;
  const uint32_t* keys = sample + row * S;
  uint32_t v[KPL];
#pragma unroll
  for (int i = 0; i < KPL; ++i) {
    const uint32_t j = uint32_t(i * 32) + lane;
    v[i] = j < S ? keys[j] : 0u;
  }
  uint32_t tHi, tLo;
  RankPair<KPL>(v, S, hiRank ? hiRank : 1u, loRank ? loRank : 1u, tHi, tLo);
  uint32_t l = loRank ? tLo : 0u, h = hiRank ? tHi : kFull;
  if (margin) {
    const uint32_t M = margin[row];
    if (M == kFull) {
      l = h = kFull;
    } else {
      l = l > M ? l - M : 0u;
      h = uint64_t(h) + M >= kFull ? kFull : h + M;
    }
  }
  if (lane == 0) {
    lo[row] = l;
    hi[row] = h;
  }
}

template <int KPL>
void LaunchWindow(const uint32_t* sample, uint64_t rows, uint32_t S, uint32_t hiRank, uint32_t loRank,
                  const uint32_t* margin, uint32_t* lo, uint32_t* hi, cudaStream_t sm) {
  if (uint32_t(KPL * 32) < S) {
    if constexpr (KPL < 64)
      LaunchWindow<KPL * 2>(sample, rows, S, hiRank, loRank, margin, lo, hi, sm);
    else
      throw std::logic_error("FlyHash: sample larger than WindowKernel holds");
    return;
  }
  WindowKernel<KPL><<<unsigned((rows + kRowWarps - 1) / kRowWarps), 256, 0, sm>>>(sample, rows, S, hiRank, loRank,
                                                                                  margin, lo, hi);
  CUSIM_LAUNCH_CHECK();
}

// A warp per row: the winners among the listed keys (SelectListed).
__global__ void __launch_bounds__(256) ListKernel(uint64_t rows, uint32_t k, uint32_t cap, bool forceFail,
                                                  uint32_t stage, const uint32_t* __restrict__ count,
                                                  const uint32_t* __restrict__ over, const uint32_t* listKey,
                                                  const uint32_t* listJ, uint32_t* bits, uint64_t words,
                                                  uint32_t* __restrict__ fail) {
  extern __shared__ __align__(16) uint32_t rowSmem[];
  __shared__ uint32_t wh[kRowWarps][256];
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint64_t row = uint64_t(blockIdx.x) * kRowWarps + warp;
  if (row >= rows) return;
  const uint32_t n = count[row];
  const uint32_t* lk = StageKeys(listKey + row * cap, min(n, cap), stage, rowSmem + warp * stage);
  const bool ok = SelectListed(lk, listJ + row * cap, n, over[row], k, cap, forceFail, bits + row * words, wh[warp]);
  if (lane == 0) fail[row] = ok ? 0u : 1u;
}

enum class Kind { TileSmall, TileLarge, Fused, TwoPass, Mma, MmaQ8 };

const char* KindName(Kind k) {
  switch (k) {
    case Kind::TileSmall: return "tile-small";
    case Kind::TileLarge: return "tile-large";
    case Kind::Fused: return "fused";
    case Kind::Mma: return "mma-u8";
    case Kind::MmaQ8: return "mma-q8";
    default: return "two-pass";
  }
}

struct Plan {
  Kind kind = Kind::Fused;
  int R = 1;
  unsigned threads = 1024;
  size_t smem = 0;   // dynamic shared memory per block
  unsigned grid = 1;
  uint64_t batch = 1;  // rows per batch
  // TileLarge: sample size, window ranks in the sample (0: unbounded), list capacity per row.
  uint32_t S = 0, hiRank = 0, loRank = 0, cap = 0;
  // TileLarge: column chunks (1: the whole row fits) and columns per chunk.
  uint32_t chunks = 1, chunkLen = 0;
  // Mma: bytes per staged row (d rounded up to a k-step of 32), and how many
  // MmaKernel blocks run at once on the whole GPU.
  uint32_t kp = 0, slots = 0;
  // Mma: list keys ListKernel's (and RefineKernel's) warps stage in shared
  // memory (a row with a longer list reads device memory; sized for a
  // typical row, so that more blocks fit).
  uint32_t listStage = 0;
  // MmaQ8: keys RefineKernel's warps stage, and rows per ExactKernel block
  // (0: RefineKernel computes the exact keys and selects itself).
  uint32_t refineStage = 0, exactRows = 1;
  bool stageB = false;  // Mma: MmaKernel stages each group's words in shared memory
  size_t ExactSmem(uint32_t d) const { return size_t(std::max<uint32_t>(exactRows, 1)) * d * 4; }
};

// Keys a row kernel's warp stages in shared memory: up to 4096 (128 KB per
// block of 8 warps).
inline uint32_t RowStage(uint32_t n) { return std::min<uint32_t>(n, 4096); }

template <typename Idx>
void SetSmem(const Plan& pl) {
  if (pl.kind == Kind::Fused) {
    auto f = pl.R == 4 ? FusedKernel<4, Idx> : pl.R == 2 ? FusedKernel<2, Idx> : FusedKernel<1, Idx>;
    CUSIM_CUDA_CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, int(pl.smem)));
  } else if (pl.kind == Kind::TwoPass && pl.smem > 0) {
    auto f = pl.R == 4 ? ActivateKernel<4, Idx, false> : pl.R == 2 ? ActivateKernel<2, Idx, false> : ActivateKernel<1, Idx, false>;
    CUSIM_CUDA_CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, int(pl.smem)));
  } else if (pl.kind == Kind::TileSmall) {
    CUSIM_CUDA_CHECK(cudaFuncSetAttribute(TileSmallKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(pl.smem)));
  } else if (pl.kind == Kind::TileLarge) {
    CUSIM_CUDA_CHECK(cudaFuncSetAttribute(TileLargeKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(pl.smem)));
  } else if (pl.kind == Kind::Mma || pl.kind == Kind::MmaQ8) {
    for (auto f : {MmaKernel<true, 8, false>, MmaKernel<false, 8, false>, MmaKernel<true, 16, false>,
                   MmaKernel<false, 16, false>, MmaKernel<true, 8, true>, MmaKernel<false, 8, true>,
                   MmaKernel<true, 16, true>, MmaKernel<false, 16, true>})
      CUSIM_CUDA_CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, int(pl.smem)));
    const int listSmem = int(pl.listStage * kRowWarps * 4);
    CUSIM_CUDA_CHECK(cudaFuncSetAttribute(ListKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, listSmem));
    if (pl.kind == Kind::MmaQ8) {
      CUSIM_CUDA_CHECK(cudaFuncSetAttribute(RefineKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            int(pl.refineStage * kRowWarps * 4)));
      CUSIM_CUDA_CHECK(cudaFuncSetAttribute(ExactKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            int(pl.ExactSmem(pl.kp))));
    }
  }
}

constexpr uint64_t kStagingBytes = uint64_t(64) << 20;  // input bytes per batch
// TileLarge window lists per batch: at the largest m a row lists many
// thousands of keys, and a batch must still hold a wave of 32-row tiles.
constexpr uint64_t kListBytes = uint64_t(1) << 30;
// Chunked TileLarge partial sums per batch: a wave of tiles of wide rows
// (CIFAR's shape) must fit.
constexpr uint64_t kPartBytes = uint64_t(2) << 30;

// Shared memory of the tile kernels (0 when they cannot run: 16-bit indices).
size_t TileSmallSmem(const Params& p) {
  return Align16(uint64_t(p.d) * kTile * 4) + uint64_t(p.m) * kKeyStride * 4 + 32 * 256 * 4;
}
size_t TileLargeSmem(uint32_t len, uint32_t S) {
  return Align16(uint64_t(len) * kTile * 4) + uint64_t(S) * kKeyStride * 4 + 32 * 256 * 4;
}

// TileLarge's column chunks: the whole row when its tile fits beside a sample
// of 64 outputs, else the fewest chunks (<= kMaxChunks) that leave room for a
// sample of 256. Returns columns per chunk (0: no fit) and sets *count.
uint32_t ChunkLen(const Params& p, size_t limit, uint32_t* count) {
  *count = 1;
  if (TileLargeSmem(p.d, std::min<uint32_t>(p.m, 64)) <= limit) return p.d;
  const size_t fixed = TileLargeSmem(0, std::min<uint32_t>(p.m, 256));
  if (fixed >= limit) return 0;
  const uint64_t maxLen = (limit - fixed) / (kTile * 4);
  if (maxLen == 0) return 0;
  const uint64_t c = (p.d + maxLen - 1) / maxLen;
  if (c > kMaxChunks) return 0;
  const uint32_t len = uint32_t((p.d + c - 1) / c);
  *count = (p.d + len - 1) / len;  // so the last chunk is not empty
  return len;
}

template <typename Idx>
Plan LegacyPlan(const Params& p, size_t limit, int sms, Output o, const Tuning& tuning) {
  Plan pl;
  pl.threads = p.m >= 8192 ? 1024 : p.m >= 2048 ? 512 : 256;
  pl.kind = Kind::TwoPass;
  // tuning.maxRowsPerBlock caps rows per block (more rows share each index
  // load; fewer leave room for a second resident block).
  const int maxR = std::max(1, tuning.maxRowsPerBlock);
  for (int R : {4, 2, 1}) {
    if (R > maxR) continue;
    const size_t need = Align16(uint64_t(p.d) * R * 4) + uint64_t(R) * p.m * 4;
    if (need <= limit) {
      pl.kind = Kind::Fused;
      pl.R = R;
      pl.smem = need;
      break;
    }
  }
  const uint64_t rowBytes = uint64_t(p.d) * 4 + OutStride(p, o) * 4;
  uint64_t batch = std::max<uint64_t>(1, kStagingBytes / rowBytes);
  if (pl.kind == Kind::Fused) {
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
  pl.batch = batch;
  return pl;
}

// Window ranks within a sample of pl.S outputs and the list capacity.
void SetWindow(const Params& p, Plan& pl, double sigmas) {
  // Rank of the k-th largest output within the sample ~ Binomial(S, k/m):
  // bracket it by `sigmas` standard deviations (+2): a row misses (and goes
  // to the exact fallback) with probability ~1e-6 at 5, ~6e-5 at 4.
  const double pr = double(p.k) / p.m, q = pl.S * pr;
  const double delta = sigmas * std::sqrt(pl.S * pr * (1.0 - pr)) + 2.0;
  pl.hiRank = q - delta >= 1.0 ? uint32_t(std::floor(q - delta)) : 0;
  pl.loRank = q + delta <= pl.S ? uint32_t(std::ceil(q + delta)) : 0;
  const double span = double(pl.loRank ? pl.loRank : pl.S) - double(pl.hiRank);
  const double expected = double(p.m) * span / pl.S;
  pl.cap = uint32_t(std::min<double>(p.m, 2.0 * expected + 256.0));
}

inline uint32_t MmaKp(const Params& p) { return (p.d + 31) / 32 * 32; }

// Quantized float rows also list the outputs within M of the window's edges
// (see QuantizeKernel): ~2 M times the density of Q at the k-th largest.
// Estimated for values spread like uniform ones (Q's standard deviation
// ~192 sqrt(s / 12) units of Δ, M ~ s + 2) at a normal quantile; rows that
// list more go to the exact path.
double QuantExtra(const Params& p) {
  const double pr = double(p.k) / p.m;
  double zl = -12.0, zh = 12.0;  // z with upper tail pr
  for (int it = 0; it < 60; ++it) {
    const double z = 0.5 * (zl + zh);
    (0.5 * std::erfc(z / std::sqrt(2.0)) > pr ? zl : zh) = z;
  }
  const double z = 0.5 * (zl + zh), density = std::exp(-0.5 * z * z) / std::sqrt(2.0 * 3.141592653589793);
  return double(p.m) * density * 2.0 * (p.s + 2.0) / (192.0 * std::sqrt(p.s / 12.0));
}

// The tensor-core path (byte-valued X, or quantized floats when quant).
// Samples of m / 12 outputs, between 224 and 2048 (all of m when m <= 224):
// the sample pass costs S / m of the main pass, and the window, so the
// lists, shrink as 1 / sqrt(S); these bounds were the fastest on the paper
// shapes (docs/perf/flyhash.md). 2048 is also what WindowKernel holds in
// registers.
Plan MmaPlan(const Params& p, uint64_t rows, int sms, size_t limit, Output o, bool quant, const Tuning& tuning) {
  Plan pl;
  pl.kind = quant ? Kind::MmaQ8 : Kind::Mma;
  pl.kp = MmaKp(p);
  pl.S = p.m <= 224 ? p.m : std::min<uint32_t>(2048, std::max<uint32_t>(224, p.m / 12 / 32 * 32));
  // A narrower window than TileLarge's: every listed key costs the main
  // kernel an append and the list select a read per pass, while a missed row
  // (~6e-5 of them) costs one exact per-row pass.
  SetWindow(p, pl, 4.0);
  double expected = std::max(0.0, (double(pl.cap) - 256.0) / 2.0);  // SetWindow's cap = 2 expected + 256
  if (quant) {
    expected += QuantExtra(p);
    pl.cap = uint32_t(std::min<double>(p.m, 2.0 * expected + 256.0));
  }
  pl.listStage = std::min<uint32_t>(pl.cap, RowStage(uint32_t(expected * 1.25 + 64)));
  // ExactKernel: about two undecided outputs per thread (CIFAR ~3500 a row:
  // a block of 256 per row; 1M x 128 ~10: 8 rows a block).
  if (quant) {
    const double open = QuantExtra(p);
    pl.exactRows = open >= 512 ? 1 : open >= 256 ? 2 : open >= 128 ? 4 : open >= 32 ? 8 : 0;
    // tuning.exactRows: either way on any shape (tests).
    if (tuning.exactRows >= 0) {
      const uint32_t v = uint32_t(tuning.exactRows);
      pl.exactRows = v >= 8 ? 8 : v >= 4 ? 4 : v >= 2 ? 2 : v;
    }
    // ListKernel selects among the undecided only.
    pl.listStage = std::min<uint32_t>(pl.cap, RowStage(uint32_t(open * 1.25 + 64)));
    // Staged keys only where the list is short: staging long lists leaves
    // room for one block per SM, slower than reading device memory with
    // eight.
    const uint32_t want = uint32_t(expected * 1.25 + 64);
    pl.refineStage = want <= 2048 ? want : 0;
  }
  // Staged keys share a block's opt-in shared memory with the row kernels'
  // static histograms: 99 KB on sm_86/89/120 holds fewer than RowStage's 4096.
  const uint32_t stageCap = uint32_t((limit - sizeof(uint32_t) * kRowWarps * 256) / (sizeof(uint32_t) * kRowWarps));
  pl.listStage = std::min(pl.listStage, stageCap);
  pl.refineStage = std::min(pl.refineStage, stageCap);
  pl.grid = unsigned(std::min<uint64_t>(sms, rows));  // FallbackKernel's blocks
  // Launch shape, the first that keeps 16 warps on a multiprocessor: two
  // blocks of 8 with the words staged in shared memory, two without, one
  // block of 16 staged, one without (wide rows leave no room to stage).
  // tuning.stageProjection = 0 / 1: never / only staged shapes.
  const int stageKnob = tuning.stageProjection;
  int perSm = 0;
  for (const auto& [warps, stage, blocks] :
       {std::tuple{8u, true, 2}, std::tuple{8u, false, 2}, std::tuple{16u, true, 1}, std::tuple{16u, false, 1}}) {
    const bool last = warps == 16 && !stage;
    if (!last && stageKnob >= 0 && stage != (stageKnob == 1)) continue;
    pl.threads = warps * 32;
    pl.stageB = stage;
    pl.smem = MmaSmem(pl.kp, warps, stage);
    if (pl.smem > limit && !last) continue;
    SetSmem<uint16_t>(pl);
    CUSIM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, MmaFor<false>(warps, stage),
                                                                   int(pl.threads), pl.smem));
    if (perSm >= blocks) break;
  }
  pl.slots = uint32_t(std::max(1, perSm) * sms);
  // Rows per batch: what 64 MB of staging holds, but at least a tile per
  // block slot (wide rows such as CIFAR's would otherwise leave slots idle
  // and time unsteady), within the memory for lists (cap keys and indices
  // per row) and sample keys.
  size_t freeB = 0, totalB = 0;
  CUSIM_CUDA_CHECK(cudaMemGetInfo(&freeB, &totalB));
  // Quantized floats arrive as floats and are kept beside their bytes.
  const uint64_t rowBytes = (quant ? uint64_t(p.d) * 4 : pl.kp) + OutStride(p, o) * 4;
  uint64_t batch = std::max<uint64_t>(uint64_t(pl.slots) * kMmaRows, kStagingBytes / rowBytes / kMmaRows * kMmaRows);
  const uint64_t listBytes = std::min<uint64_t>(2 * kListBytes, freeB / 8);
  batch = std::min<uint64_t>(batch, std::max<uint64_t>(kMmaRows, listBytes / (uint64_t(pl.cap) * 8 + uint64_t(pl.S) * 4) /
                                                                     kMmaRows * kMmaRows));
  // tuning.batchRows: small batches, so tests drive both streams with few rows.
  if (tuning.batchRows > 0)
    batch = std::min<uint64_t>(batch, std::max<uint64_t>(1, tuning.batchRows / kMmaRows) * kMmaRows);
  pl.batch = std::min<uint64_t>(batch, rows);
  return pl;
}

// Blocks per row tile (each takes every slices-th group of 32 outputs per
// warp). Every block does the same work, so a launch of B blocks takes
// ceil(B / slots) rounds: a tile count just above the slots would double the
// time. Picks the split with the least
// idle time, counting uneven group shares too; fewer slices on near ties
// (each slice reloads the tile).
unsigned MmaSlices(uint64_t tiles, uint32_t cols, uint32_t slots, uint32_t warps) {
  const uint64_t groups = (uint64_t(cols) + 31) / 32;
  const uint64_t maxS = std::max<uint64_t>(1, std::min<uint64_t>(64, (groups + warps - 1) / warps));
  unsigned best = 1;
  double bestEff = 0;
  for (uint64_t sl = 1; sl <= maxS; ++sl) {
    const uint64_t blocks = tiles * sl, rounds = (blocks + slots - 1) / slots;
    const double share = double(groups) / double(warps * sl);
    const double eff = double(blocks) / double(rounds * slots) * share / std::ceil(share);
    if (eff > bestEff + 0.02) {
      best = unsigned(sl);
      bestEff = eff;
    }
  }
  return best;
}

template <typename Idx>
Plan MakePlan(const Params& p, uint64_t rows, int device, Output o, bool byteValued, const Tuning& tuning) {
  const size_t limit = gpu::MaxSharedPerBlockOptin(device) - sizeof(Scratch) - 64;
  const int sms = gpu::MultiprocessorCount(device);
  const std::string& knob = tuning.kernel;
  // Tensor cores where the GPU has the kernels (sm_80+) and tuning allows.
  // Quantized floats need sums of s bytes in 31 bits and the fallback's
  // 16-bit indices (both hold wherever the tile fits).
  const bool tensorCores = tuning.tensorCores && DeviceTensorCores(device);
  if ((knob == "auto" || knob == "mma") && tensorCores && MmaSmem(MmaKp(p), 16, false) <= limit && sizeof(Idx) == 2 &&
      uint64_t(p.s) * 255 < (uint64_t(1) << 31))
    return MmaPlan(p, rows, sms, limit, o, !(byteValued && ExactForBytes(p)), tuning);
  Plan pl;
  // Tiles need 16-bit indices and, to fill the GPU, at least a wave of 32-row
  // tiles; few rows go to the legacy kernels, which split m across blocks.
  const bool tileOk = sizeof(Idx) == 2 && knob != "legacy";
  const bool enoughRows = (rows + kTile - 1) / kTile >= uint64_t(sms) || knob == "tile-small" || knob == "tile-large";
  const uint64_t rowBytes = uint64_t(p.d) * 4 + OutStride(p, o) * 4;
  uint64_t batch = std::max<uint64_t>(kTile, kStagingBytes / rowBytes / kTile * kTile);
  // Where TileSmall fits (small m), the legacy fused kernel with 4 rows per
  // block is faster (docs/perf/flyhash.md), so auto keeps legacy there and
  // TileSmall runs only when tuning.kernel asks for it.
  const bool smallFits = TileSmallSmem(p) <= limit;
  const bool autoLegacy = smallFits && knob != "tile-small" && knob != "tile-large";
  if (tileOk && enoughRows && knob == "tile-small" && smallFits) {
    pl.kind = Kind::TileSmall;
    pl.smem = TileSmallSmem(p);
  } else if (tileOk && enoughRows && !autoLegacy && ChunkLen(p, limit, &pl.chunks) > 0) {
    pl.kind = Kind::TileLarge;
    pl.chunkLen = ChunkLen(p, limit, &pl.chunks);
    // The largest sample that fits (capped at 1024): the window around the
    // sample's quantile narrows as 1/sqrt(S).
    const uint64_t room = (limit - TileLargeSmem(pl.chunkLen, 0)) / (kKeyStride * 4);
    pl.S = uint32_t(std::min<uint64_t>({uint64_t(p.m), room, 1024}));
    pl.smem = TileLargeSmem(pl.chunkLen, pl.S);
    SetWindow(p, pl, 5.0);
    // Two slots of lists: at most a quarter of what is free (smaller GPUs).
    size_t freeB = 0, totalB = 0;
    CUSIM_CUDA_CHECK(cudaMemGetInfo(&freeB, &totalB));
    const uint64_t listBytes = std::min<uint64_t>(kListBytes, freeB / 8);
    // A batch of at least a wave of tiles (wide rows: the 64 MB staging holds fewer).
    batch = std::max<uint64_t>(batch, uint64_t(sms) * kTile);
    batch = std::min<uint64_t>(batch, std::max<uint64_t>(kTile, listBytes / (uint64_t(pl.cap) * 8) / kTile * kTile));
    if (pl.chunks > 1) {
      // Partial sums: m floats per row between chunks.
      const uint64_t partBytes = std::min<uint64_t>(kPartBytes, freeB / 8);
      batch = std::min<uint64_t>(batch, std::max<uint64_t>(kTile, partBytes / (uint64_t(p.m) * 4) / kTile * kTile));
    }
  } else {
    pl = LegacyPlan<Idx>(p, limit, sms, o, tuning);
    pl.batch = std::min<uint64_t>(pl.batch, rows);
    return pl;
  }
  pl.threads = 1024;
  SetSmem<Idx>(pl);
  pl.grid = unsigned(std::min<uint64_t>(sms, rows));  // FallbackKernel's blocks
  pl.batch = std::min<uint64_t>(batch, rows);
  return pl;
}

// What one FlyHash object keeps on its GPU between calls: the projection in
// the layouts the kernels read (uploaded on first use) and the staging
// buffers, which only grow, so repeated calls skip cudaMallocHost/cudaMalloc
// (tens of ms for the 64 MB pinned slots). Freed by dispose().
struct FlyState : GpuState {
  int device = -1;
  gpu::DeviceBuffer<uint16_t> proj16;  // [s][m], legacy kernels
  gpu::DeviceBuffer<uint32_t> proj32;
  gpu::DeviceBuffer<uint16_t> packed;  // [m][sPad], tile kernels
  gpu::DeviceBuffer<uint16_t> chunkTab, chunkCnt;  // chunked TileLarge (see Chunks)
  gpu::DeviceBuffer<uint32_t> projBits;  // [k-step][mPad] words, tensor-core path
  Chunks chunkInfo;
  gpu::DeviceBuffer<float> dX[2], dPart[2];
  gpu::DeviceBuffer<uint32_t> dOut[2], dKeys[2], dBits[2], dListK[2], dListJ[2], dFail[2], dScratch[2];
  gpu::DeviceBuffer<uint32_t> dRowInfo[2];  // tensor-core path: lo, hi, count, over, margin per row
  gpu::DeviceBuffer<uint8_t> dQ[2];  // tensor-core path on floats: the quantized rows
  gpu::PinnedBuffer<float> hX[2];
  gpu::PinnedBuffer<uint32_t> hOut[2];

  void releaseAll() noexcept {
    proj16.release();
    proj32.release();
    packed.release();
    chunkTab.release();
    chunkCnt.release();
    projBits.release();
    for (int i = 0; i < 2; ++i) {
      dX[i].release();
      dPart[i].release();
      dOut[i].release();
      dKeys[i].release();
      dBits[i].release();
      dListK[i].release();
      dListJ[i].release();
      dFail[i].release();
      dScratch[i].release();
      dRowInfo[i].release();
      dQ[i].release();
      hX[i].release();
      hOut[i].release();
    }
  }
  // Freed with its own device current, whichever thread drops the object.
  ~FlyState() override {
    try {
      gpu::DeviceGuard guard(device);
      releaseAll();
    } catch (...) {
      releaseAll();
    }
  }
};

FlyState* StateFor(int device, std::unique_ptr<GpuState>* state) {
  auto* have = dynamic_cast<FlyState*>(state->get());
  if (have && have->device == device) return have;
  state->reset();  // frees the old buffers (on whatever device) first
  auto fresh = std::make_unique<FlyState>();
  fresh->device = device;
  FlyState* ptr = fresh.get();
  *state = std::move(fresh);
  return ptr;
}

// The projection transposed to [s][m] (a warp's index loads are coalesced).
template <typename Idx>
const Idx* UploadProjection(const Params& p, const uint32_t* proj, gpu::DeviceBuffer<Idx>& buf) {
  if (buf.data()) return buf.data();
  std::vector<Idx> projT(uint64_t(p.m) * p.s);
  for (uint64_t j = 0; j < p.m; ++j)
    for (uint64_t t = 0; t < p.s; ++t) projT[t * p.m + j] = Idx(proj[j * p.s + t]);
  buf.reset(projT.size(), "FlyHash projection");
  CUSIM_CUDA_CHECK(cudaMemcpy(buf.data(), projT.data(), projT.size() * sizeof(Idx), cudaMemcpyHostToDevice));
  return buf.data();
}

inline uint32_t PackedStride(const Params& p) { return (p.s + 7) / 8 * 8; }

// [m][sPad] 16-bit indices, padded with index 0 (never added: TileAct stops at s).
const uint16_t* UploadPacked(const Params& p, const uint32_t* proj, gpu::DeviceBuffer<uint16_t>& buf) {
  if (buf.data()) return buf.data();
  const uint32_t sPad = PackedStride(p);
  std::vector<uint16_t> packed(uint64_t(p.m) * sPad, 0);
  for (uint64_t j = 0; j < p.m; ++j)
    for (uint64_t t = 0; t < p.s; ++t) packed[j * sPad + t] = uint16_t(proj[j * p.s + t]);
  buf.reset(packed.size(), "FlyHash packed projection");
  CUSIM_CUDA_CHECK(cudaMemcpy(buf.data(), packed.data(), packed.size() * 2, cudaMemcpyHostToDevice));
  return buf.data();
}

// Per-chunk tables for TileLarge on wide rows (layout: see Chunks). Cached
// in the state for one (count, len).
Chunks UploadChunks(const Params& p, const uint32_t* proj, uint32_t count, uint32_t len, FlyState& st) {
  if (st.chunkTab.data() && st.chunkInfo.count == count && st.chunkInfo.len == len) return st.chunkInfo;
  Chunks ch;
  ch.count = count;
  ch.len = len;
  std::vector<uint16_t> cnt(uint64_t(count) * p.m, 0);
  for (uint64_t j = 0; j < p.m; ++j)
    for (uint64_t t = 0; t < p.s; ++t) ++cnt[uint64_t(proj[j * p.s + t] / len) * p.m + j];
  uint64_t total = 0;  // uint4 units
  for (uint32_t c = 0; c < count; ++c) {
    uint32_t most = 0;
    for (uint64_t j = 0; j < p.m; ++j) most = std::max<uint32_t>(most, cnt[uint64_t(c) * p.m + j]);
    ch.packs[c] = (most + 7) / 8;
    ch.off[c] = total;
    total += uint64_t(p.m) * ch.packs[c];
  }
  std::vector<uint16_t> tab(total * 8, 0);
  for (uint64_t j = 0; j < p.m; ++j) {
    uint32_t pos[kMaxChunks] = {};
    for (uint64_t t = 0; t < p.s; ++t) {  // ascending, so each chunk's part stays ascending
      const uint32_t i = proj[j * p.s + t], c = i / len;
      tab[(ch.off[c] + j * ch.packs[c]) * 8 + pos[c]++] = uint16_t(i - c * len);
    }
  }
  st.chunkTab.reset(tab.size(), "FlyHash chunked projection");
  CUSIM_CUDA_CHECK(cudaMemcpy(st.chunkTab.data(), tab.data(), tab.size() * 2, cudaMemcpyHostToDevice));
  st.chunkCnt.reset(cnt.size(), "FlyHash chunk counts");
  CUSIM_CUDA_CHECK(cudaMemcpy(st.chunkCnt.data(), cnt.data(), cnt.size() * 2, cudaMemcpyHostToDevice));
  ch.cnt = st.chunkCnt.data();
  st.chunkInfo = ch;
  return ch;
}

// The projection as bits for the tensor-core path: word (ks, j) of
// [kp / 32][mPad] has bit StoredBit(b) set when input 32 ks + b feeds output
// j; columns past m stay zero.
const uint32_t* UploadBits(const Params& p, const uint32_t* proj, uint32_t kp, FlyState& st) {
  if (st.projBits.data()) return st.projBits.data();
  const uint64_t mPad = (uint64_t(p.m) + 31) / 32 * 32;
  std::vector<uint32_t> wb(uint64_t(kp / 32) * mPad, 0);
  for (uint64_t j = 0; j < p.m; ++j)
    for (uint64_t t = 0; t < p.s; ++t) {
      const uint32_t i = proj[j * p.s + t];
      wb[uint64_t(i / 32) * mPad + WordSlot(j)] |= 1u << StoredBit(i % 32);
    }
  st.projBits.reset(wb.size(), "FlyHash projection bits");
  CUSIM_CUDA_CHECK(cudaMemcpy(st.projBits.data(), wb.data(), wb.size() * 4, cudaMemcpyHostToDevice));
  return st.projBits.data();
}

// Rows of n x d bytes, or of floats expected to hold bytes, to rows of kp
// bytes, zero-padded, on all cores. Floats are checked as they convert: false
// (the staging abandoned) as soon as one is not an integer in [0, 255] or is
// not finite.
bool StageBytes(uint8_t* dst, const uint8_t* src, uint64_t n, uint32_t d, uint32_t kp) {
  ParallelFor(n, 256, [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r) {
      std::memcpy(dst + r * kp, src + r * d, d);
      std::memset(dst + r * kp + d, 0, kp - d);
    }
  });
  return true;
}
bool StageBytes(uint8_t* dst, const float* src, uint64_t n, uint32_t d, uint32_t kp) {
  std::atomic<bool> bad{false};
  ParallelFor(n, 256, [&](size_t b, size_t e) {
    for (size_t r = b; r < e && !bad.load(std::memory_order_relaxed); ++r) {
      const float* in = src + r * d;
      uint8_t* outRow = dst + r * kp;
      uint32_t notByte = 0;
      for (uint32_t i = 0; i < d; ++i) {
        // Selects, not branches or fmin/fmax calls (which cost far more here); the
        // conversion sees only in-range values (NaN fails both compares).
        const float v = in[i];
        const bool inRange = (v >= 0.0f) & (v <= 255.0f);
        const int u = int(inRange ? v : 0.0f);
        notByte |= uint32_t(!inRange) | uint32_t(float(u) != v);
        outRow[i] = uint8_t(u);
      }
      std::memset(outRow + d, 0, kp - d);
      if (notByte) bad.store(true, std::memory_order_relaxed);
    }
  });
  return !bad.load();
}

// Whether X's first values are bytes: worth staging it as bytes on the hope
// that all of it is.
bool LooksByteValued(const DenseView& x) {
  const uint64_t n = std::min<uint64_t>(x.rows * x.cols, 4096);
  for (uint64_t i = 0; i < n; ++i) {
    const float v = x.data[i];
    if (!(v >= 0.0f && v <= 255.0f && float(int(v)) == v)) return false;
  }
  return true;
}

// Float rows to the pinned stage, checked for finiteness in the same pass:
// the first non-finite element's index, or UINT64_MAX.
uint64_t CopyFinite(float* dst, const float* src, uint64_t count) {
  constexpr uint64_t kChunk = uint64_t(1) << 19;  // 2 MB of floats
  const uint64_t chunks = (count + kChunk - 1) / kChunk;
  std::atomic<bool> bad{false};
  ParallelFor(chunks, 1, [&](size_t b, size_t e) {
    for (size_t c = b; c < e; ++c) {
      const uint64_t lo = c * kChunk, hi = std::min(count, lo + kChunk);
      uint32_t any = 0;
      for (uint64_t i = lo; i < hi; ++i) {
        const float v = src[i];
        dst[i] = v;
        uint32_t u;
        std::memcpy(&u, &v, 4);
        any |= uint32_t((u & 0x7f800000u) == 0x7f800000u);  // exponent all ones: Inf or NaN
      }
      if (any) bad.store(true, std::memory_order_relaxed);
    }
  });
  if (!bad.load()) return UINT64_MAX;
  for (uint64_t i = 0; i < count; ++i)
    if (!std::isfinite(src[i])) return i;
  return UINT64_MAX;  // X changed under the copy (the caller's array, read in place)
}

// Bytes to floats on all cores (byte input on a path that gathers floats).
void StageFloats(float* dst, const uint8_t* src, uint64_t count) {
  ParallelFor(count, 1 << 16, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) dst[i] = float(src[i]);
  });
}

template <typename Idx>
gpu::DeviceBuffer<Idx>& LegacyBuffer(FlyState& st);
template <>
gpu::DeviceBuffer<uint16_t>& LegacyBuffer<uint16_t>(FlyState& st) { return st.proj16; }
template <>
gpu::DeviceBuffer<uint32_t>& LegacyBuffer<uint32_t>(FlyState& st) { return st.proj32; }

// Hashes x (rows rowBase.. of the caller's X) into out. byteValued: plan for
// byte data (true for xBytes; for floats a hope that staging checks). Returns
// the rows hashed: all of them, or, where float rows staged as bytes turn out
// not to be, the rows before that batch.
template <typename Idx>
uint64_t Run(const Params& p, const uint32_t* proj, const DenseView& x, const uint8_t* xBytes, bool byteValued,
             uint64_t rowBase, Output o, uint32_t* out, int device, const Tuning& tuning, const CancelToken& cancel,
             Timing* timing, std::unique_ptr<GpuState>* state) {
  PhaseLog log("flyhash cuda");
  const uint64_t rows = x.rows, stride = OutStride(p, o), words = OutStride(p, Output::Bits);
  const bool indices = o == Output::Indices;
  const Plan pl = MakePlan<Idx>(p, rows, device, o, byteValued, tuning);
  const bool quant = pl.kind == Kind::MmaQ8, mma = pl.kind == Kind::Mma || quant;
  const bool tile = pl.kind == Kind::TileSmall || pl.kind == Kind::TileLarge || mma;
  FlyState& st = *StateFor(device, state);
  const Idx* dProj = tile ? nullptr : UploadProjection<Idx>(p, proj, LegacyBuffer<Idx>(st));
  const uint16_t* dPacked = tile ? UploadPacked(p, proj, st.packed) : nullptr;  // also the fallback's
  const uint32_t* dWb = mma ? UploadBits(p, proj, pl.kp, st) : nullptr;
  const uint64_t mPad = (uint64_t(p.m) + 31) / 32 * 32;
  // Bytes of one staged row (the tensor-core path stages bytes, except for
  // float rows, which the GPU quantizes).
  const uint64_t xRowBytes = mma && !quant ? pl.kp : uint64_t(p.d) * 4;
  const uint64_t xFloats = (pl.batch * xRowBytes + 3) / 4;
  const uint32_t sPad = PackedStride(p), packs = sPad / 8, full = p.s / 8, rem = p.s % 8;
  const bool forceFail = tuning.forceFallback;
  Chunks chunks;  // TileLarge's tables: the flat one, or per column chunk
  const uint4* tables = reinterpret_cast<const uint4*>(dPacked);
  if (pl.kind == Kind::TileLarge && pl.chunks > 1) {
    chunks = UploadChunks(p, proj, pl.chunks, pl.chunkLen, st);
    tables = reinterpret_cast<const uint4*>(st.chunkTab.data());
  } else {
    chunks.len = p.d;
    chunks.packs[0] = packs;
  }
  gpu::Stream streams[2];
  for (int i = 0; i < 2; ++i) {
    st.dX[i].reserve(xFloats, "FlyHash input batch");
    st.dOut[i].reserve(pl.batch * stride, "FlyHash output batch");
    if (pl.kind == Kind::TwoPass) st.dKeys[i].reserve(pl.batch * p.m, "FlyHash activation keys");
    if (mma) {
      st.dKeys[i].reserve(pl.batch * pl.S, "FlyHash sample keys");
      st.dRowInfo[i].reserve(pl.batch * 5, "FlyHash row windows");
      if (quant) st.dQ[i].reserve(pl.batch * pl.kp, "FlyHash quantized rows");
    }
    if (pl.kind == Kind::TileLarge || mma) {
      if (indices) st.dBits[i].reserve(pl.batch * words, "FlyHash bits batch");
      st.dListK[i].reserve(pl.batch * pl.cap, "FlyHash window keys");
      st.dListJ[i].reserve(pl.batch * pl.cap, "FlyHash window indices");
      st.dFail[i].reserve(2 * pl.batch + 1, "FlyHash row flags");  // flags, count, list
      st.dScratch[i].reserve(uint64_t(kFallbackSpread + pl.grid) * p.m, "FlyHash fallback keys");
      if (pl.kind == Kind::TileLarge && pl.chunks > 1) st.dPart[i].reserve((pl.batch + kTile - 1) / kTile * kTile * p.m, "FlyHash partial sums");
    }
    st.hX[i].reserve(xFloats, "FlyHash pinned input");
    st.hOut[i].reserve(pl.batch * stride, "FlyHash pinned output");
  }

  struct Pending {
    bool live = false;
    uint64_t r0 = 0, n = 0;
  } pending[2];
  gpu::Event ev[8], origin;
  origin.record(streams[0]);
  log.Mark("setup");
  double transferMs = 0;
  // Each batch's kernel interval, from origin. The two streams' intervals
  // overlap (one batch's kernels wait behind or run beside the other's), so
  // the kernel time is their union, not their sum.
  std::vector<std::pair<double, double>> spans;

  auto finish = [&](int slot) {
    streams[slot].sync();
    log.Mark("wait gpu");
    Pending& pd = pending[slot];
    if (!pd.live) return;
    gpu::Event* e = &ev[slot * 4];
    transferMs += gpu::ElapsedMs(e[0], e[1]) + gpu::ElapsedMs(e[2], e[3]);
    spans.emplace_back(gpu::ElapsedMs(origin, e[1]), gpu::ElapsedMs(origin, e[2]));
    gpu::ParallelCopy(out + pd.r0 * stride, st.hOut[slot].data(), pd.n * stride * 4);
    log.Mark("copy out");
    pd.live = false;
  };

  // After TileLarge or the tensor-core path: the indices of the rows that
  // selected (their bits are complete), then the exact redo of flagged rows.
  auto finishFlagged = [&](const auto* xIn, uint32_t xStride, uint32_t* bits, uint32_t* fail, uint64_t n,
                           cudaStream_t sm, uint32_t* dOut, uint32_t* scratch) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(xIn)>>;
    if (indices) {
      BitsToIndicesKernel<<<gpu::GridFor(n * 32, 256, 65535), 256, 0, sm>>>(bits, words, fail, n, p.k, dOut);
      CUSIM_LAUNCH_CHECK();
    }
    // fail holds n flags, then the flagged rows' count and list.
    uint32_t* count = fail + n;
    CUSIM_CUDA_CHECK(cudaMemsetAsync(count, 0, 4, sm));
    FailListKernel<<<gpu::GridFor(n, 256, 1024), 256, 0, sm>>>(fail, n, count, count + 1);
    CUSIM_LAUNCH_CHECK();
    const dim3 spread(unsigned((p.m + kFallbackActKeys - 1) / kFallbackActKeys),
                      unsigned(std::min<uint64_t>(kFallbackSpread, n)));
    FallbackActKernel<T><<<spread, 256, 0, sm>>>(xIn, p.d, xStride, dPacked, sPad, p.s, p.m, count, count + 1, scratch);
    CUSIM_LAUNCH_CHECK();
    const unsigned g = unsigned(std::min<uint64_t>(pl.grid, n));
    FallbackKernel<T><<<g, 1024, 0, sm>>>(xIn, p.d, xStride, dPacked, sPad, p.s, p.m, p.k, count, count + 1, indices, dOut, stride,
                                          scratch);
    CUSIM_LAUNCH_CHECK();
  };

  uint64_t batchNo = 0, rowsDone = rows;
  for (uint64_t r0 = 0; r0 < rows; r0 += pl.batch, ++batchNo) {
    if (cancel.requested()) {
      // Let in-flight copies finish before their buffers are reused.
      streams[0].sync();
      streams[1].sync();
      cancel.check();
    }
    const int slot = int(batchNo & 1);
    finish(slot);
    const uint64_t n = std::min<uint64_t>(pl.batch, rows - r0);
    cudaStream_t sm = streams[slot];
    gpu::Event* e = &ev[slot * 4];
    float* dX = st.dX[slot].data();
    uint32_t* dOut = st.dOut[slot].data();
    // Staging on the host (all cores) overlaps the other slot's copies and
    // kernels, and is where float X is checked.
    if (mma && !quant) {
      auto* dst = reinterpret_cast<uint8_t*>(st.hX[slot].data());
      if (!(xBytes ? StageBytes(dst, xBytes + r0 * p.d, n, p.d, pl.kp)
                   : StageBytes(dst, x.data + r0 * p.d, n, p.d, pl.kp))) {
        // Not bytes after all: the rows from here go to a float plan.
        finish(slot ^ 1);
        finish(slot);
        rowsDone = r0;
        break;
      }
    } else if (xBytes) {
      StageFloats(st.hX[slot].data(), xBytes + r0 * p.d, n * p.d);  // bytes for the float kernels
    } else {
      const uint64_t bad = CopyFinite(st.hX[slot].data(), x.data + r0 * p.d, n * p.d);
      if (bad != UINT64_MAX) {
        // Copies in flight read the stage; let them land first.
        streams[0].sync();
        streams[1].sync();
        ThrowNonFinite(x.data[r0 * p.d + bad], (rowBase + r0) * p.d + bad, p.d, "X");
      }
    }
    log.Mark("stage in");
    e[0].record(sm);
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(dX, st.hX[slot].data(), n * xRowBytes, cudaMemcpyHostToDevice, sm));
    e[1].record(sm);
    const unsigned tiles = unsigned((n + kTile - 1) / kTile);
    const uint4* packed4 = reinterpret_cast<const uint4*>(dPacked);
    if (pl.kind == Kind::TileSmall) {
      TileSmallKernel<<<tiles, 1024, pl.smem, sm>>>(dX, n, p.d, packed4, packs, full, rem, p.m, p.k, indices, dOut,
                                                     stride);
      CUSIM_LAUNCH_CHECK();
    } else if (pl.kind == Kind::TileLarge) {
      uint32_t* bits = indices ? st.dBits[slot].data() : dOut;
      uint32_t* fail = st.dFail[slot].data();
      Chunks ch = chunks;
      ch.part = st.dPart[slot].data();
      TileLargeKernel<<<tiles, 1024, pl.smem, sm>>>(dX, n, p.d, tables, full, rem, p.m, p.k, pl.S, pl.hiRank,
                                                     pl.loRank, pl.cap, forceFail, bits, st.dListK[slot].data(),
                                                     st.dListJ[slot].data(), fail, ch);
      CUSIM_LAUNCH_CHECK();
      finishFlagged(dX, p.d, bits, fail, n, sm, dOut, st.dScratch[slot].data());
    } else if (mma) {
      uint32_t* bits = indices ? st.dBits[slot].data() : dOut;
      uint32_t* fail = st.dFail[slot].data();
      uint32_t* lo = st.dRowInfo[slot].data();
      uint32_t *hi = lo + n, *cnt = hi + n, *over = cnt + n, *margin = quant ? over + n : nullptr;
      CUSIM_CUDA_CHECK(cudaMemsetAsync(cnt, 0, n * 8, sm));  // count and over
      const unsigned warpBlocks = unsigned((n + kRowWarps - 1) / kRowWarps);
      const uint8_t* xb = reinterpret_cast<const uint8_t*>(dX);
      if (quant) {
        QuantizeKernel<<<warpBlocks, 256, 0, sm>>>(dX, n, p.d, pl.kp, p.s, st.dQ[slot].data(), margin);
        CUSIM_LAUNCH_CHECK();
        xb = st.dQ[slot].data();
      }
      const unsigned tilesM = unsigned((n + kMmaRows - 1) / kMmaRows);
      auto slicesFor = [&](uint32_t cols) { return MmaSlices(tilesM, cols, pl.slots, pl.threads / 32); };
      const bool wide = pl.threads == 512;
      auto sampleFn = MmaFor<true>(wide ? 16 : 8, pl.stageB);
      auto mainFn = MmaFor<false>(wide ? 16 : 8, pl.stageB);
      sampleFn<<<dim3(tilesM, slicesFor(pl.S)), pl.threads, pl.smem, sm>>>(
          xb, n, pl.kp, dWb, uint32_t(mPad), pl.S, st.dKeys[slot].data(), nullptr, nullptr, 0, nullptr, 0, nullptr,
          nullptr, nullptr, nullptr);
      CUSIM_LAUNCH_CHECK();
      LaunchWindow<8>(st.dKeys[slot].data(), n, pl.S, pl.hiRank, pl.loRank, margin, lo, hi, sm);
      mainFn<<<dim3(tilesM, slicesFor(p.m)), pl.threads, pl.smem, sm>>>(
          xb, n, pl.kp, dWb, uint32_t(mPad), p.m, nullptr, lo, hi, pl.cap, bits, words, st.dListK[slot].data(),
          st.dListJ[slot].data(), cnt, over);
      CUSIM_LAUNCH_CHECK();
      const uint32_t listSmem = pl.listStage * kRowWarps * 4;
      if (quant) {
        const bool inl = pl.exactRows == 0;
        Inline in;
        if (inl) in = Inline{dX, p.d, sPad, p.s, dPacked, fail};
        RefineKernel<<<warpBlocks, 256, pl.refineStage * kRowWarps * 4, sm>>>(
            n, p.k, pl.cap, forceFail, pl.refineStage, cnt, over, st.dListK[slot].data(), st.dListJ[slot].data(),
            bits, words, margin, lo, hi, in);
        CUSIM_LAUNCH_CHECK();
        if (!inl) {
          const unsigned exactBlocks = unsigned((n + pl.exactRows - 1) / pl.exactRows);
          ExactKernel<<<exactBlocks, 256, pl.ExactSmem(p.d), sm>>>(n, pl.exactRows, pl.cap, cnt, dX, p.d, dPacked,
                                                                   sPad, p.s, st.dListJ[slot].data(),
                                                                   st.dListK[slot].data());
          CUSIM_LAUNCH_CHECK();
        }
      }
      if (!quant || pl.exactRows != 0) {
        ListKernel<<<warpBlocks, 256, listSmem, sm>>>(n, p.k, pl.cap, forceFail, pl.listStage, cnt, over,
                                                      st.dListK[slot].data(), st.dListJ[slot].data(), bits, words,
                                                      fail);
        CUSIM_LAUNCH_CHECK();
      }
      if (quant)
        finishFlagged(static_cast<const float*>(dX), p.d, bits, fail, n, sm, dOut, st.dScratch[slot].data());
      else
        finishFlagged(xb, pl.kp, bits, fail, n, sm, dOut, st.dScratch[slot].data());
    } else if (pl.kind == Kind::Fused) {
      const unsigned grid = unsigned(std::min<uint64_t>(pl.grid, (n + pl.R - 1) / pl.R));
      auto f = pl.R == 4 ? FusedKernel<4, Idx> : pl.R == 2 ? FusedKernel<2, Idx> : FusedKernel<1, Idx>;
      f<<<grid, pl.threads, pl.smem, sm>>>(dX, n, p.d, dProj, p.m, p.s, p.k, indices, dOut, stride);
      CUSIM_LAUNCH_CHECK();
    } else {
      dim3 grid1(unsigned((p.m + 255) / 256), unsigned((n + pl.R - 1) / pl.R));
      auto f = pl.smem == 0 ? ActivateKernel<1, Idx, true>
               : pl.R == 4  ? ActivateKernel<4, Idx, false>
               : pl.R == 2  ? ActivateKernel<2, Idx, false>
                            : ActivateKernel<1, Idx, false>;
      f<<<grid1, 256, pl.smem, sm>>>(dX, n, p.d, dProj, p.m, p.s, st.dKeys[slot].data());
      CUSIM_LAUNCH_CHECK();
      const unsigned grid2 = unsigned(std::min<uint64_t>(pl.grid, n));
      SelectKernel<<<grid2, 1024, 0, sm>>>(st.dKeys[slot].data(), n, p.m, p.k, indices, dOut, stride);
      CUSIM_LAUNCH_CHECK();
    }
    e[2].record(sm);
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(st.hOut[slot].data(), dOut, n * stride * 4, cudaMemcpyDeviceToHost, sm));
    e[3].record(sm);
    pending[slot] = {true, r0, n};
    log.Mark("launch");
  }
  finish(0);
  finish(1);
  if (timing) {
    std::sort(spans.begin(), spans.end());
    double kernelMs = 0, end = -1e300;
    for (const auto& [a, b] : spans) {
      kernelMs += std::max(0.0, b - std::max(a, end));
      end = std::max(end, b);
    }
    timing->kernelMs += kernelMs;
    timing->transferMs += transferMs;
    if (rowsDone > 0) timing->kernel += (timing->kernel.empty() ? "" : "+") + std::string(KindName(pl.kind));
  }
  return rowsDone;
}

}  // namespace

void HashCuda(const Params& p, const uint32_t* proj, const DenseView& x, const uint8_t* xBytes, Output o,
              uint32_t* out, int device, const Tuning& tuning, const CancelToken& cancel, Timing* timing,
              std::unique_ptr<GpuState>* state) {
  if (x.rows == 0) return;
  gpu::DeviceGuard guard(device);
  auto run = p.d <= 65536 ? Run<uint16_t> : Run<uint32_t>;
  // Float X that starts with bytes (pixels, SIFT) is planned as bytes, which
  // halves the tensor-core work and quarters the copy; the staging confirms
  // it batch by batch, and from the first batch that is not, the remaining
  // rows run on the float plan.
  const bool hope = xBytes || LooksByteValued(x);
  uint64_t done = run(p, proj, x, xBytes, hope, 0, o, out, device, tuning, cancel, timing, state);
  if (done < x.rows) {
    const DenseView rest{x.data + done * x.cols, x.rows - done, x.cols};
    // The float plan never stops early (only a byte plan does).
    if (run(p, proj, rest, nullptr, false, done, o, out + done * OutStride(p, o), device, tuning, cancel, timing,
            state) != rest.rows)
      throw std::logic_error("FlyHash: the float plan stopped before the last row");
  }
}

std::vector<std::string> GpuKernelFamilies(bool tensorCores) {
  std::vector<std::string> f;
  if (tensorCores) f = {KindName(Kind::Mma), KindName(Kind::MmaQ8)};
  for (Kind k : {Kind::TileLarge, Kind::Fused, Kind::TwoPass}) f.push_back(KindName(k));
  return f;
}

}  // namespace flyhash
}  // namespace cusim
