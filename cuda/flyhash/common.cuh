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

}  // namespace
}  // namespace flyhash
}  // namespace cusim
