// Device helpers every FlyHash kernel family shares: order-preserving keys,
// warp and block ranks, and the block-wide exact top-k select (SelectWrite).
// Internal to cuda/flyhash.cu, which includes every family header: one
// translation unit, so the kernels keep internal linkage.
#pragma once

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

#include "../../native/flyhash.h"
#include "../../native/gpu.h"
#include "../../native/parallel.h"
#include "../../native/phase_log.h"
#include "../common/gpu.cuh"

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
__device__ __forceinline__ uint32_t BlockRank(uint32_t* slots, unsigned mask, unsigned warp, unsigned nw, unsigned lane,
                                              uint32_t& total) {
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

// ---- shared by the families -----------------------------------------------------

// Byte offsets of shared-memory regions: 16-byte aligned.
__host__ __device__ inline uint64_t Align16(uint64_t b) { return (b + 15) & ~uint64_t(15); }

// Warp radix selection over a row's 32-bit keys (TileLarge, the tensor-core
// list kernels).
constexpr uint32_t kEqCap = 256;  // tied keys a row selection can rank in its warp's 256-word scratch

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

}  // namespace
}  // namespace flyhash
}  // namespace cusim
