// Float rows on the tensor-core path: per-row quantization to bytes, and the
// kernels that decide the outputs the byte sums cannot (refine, exact, window,
// list).
// Internal to cuda/flyhash.cu, which includes every family header: one
// translation unit, so the kernels keep internal linkage.
#pragma once
#include "common.cuh"

namespace cusim {
namespace flyhash {
namespace {

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
__global__ void __launch_bounds__(256)
    QuantizeKernel(const float* __restrict__ x, uint64_t rows, uint32_t d, uint32_t kp, uint32_t s,
                   uint8_t* __restrict__ xq, uint32_t* __restrict__ margin) {
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

__global__ void __launch_bounds__(256)
    RefineKernel(uint64_t rows, uint32_t k, uint32_t cap, bool forceFail, uint32_t stage, uint32_t* __restrict__ count,
                 uint32_t* __restrict__ over, uint32_t* listKey, uint32_t* listJ, uint32_t* bits, uint64_t words,
                 const uint32_t* __restrict__ margin, const uint32_t* __restrict__ lo, const uint32_t* __restrict__ hi,
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
__global__ void __launch_bounds__(256)
    ExactKernel(uint64_t rows, uint32_t rpb, uint32_t cap, const uint32_t* __restrict__ count,
                const float* __restrict__ x, uint32_t d, const uint16_t* __restrict__ packed16, uint32_t sPad,
                uint32_t s, const uint32_t* __restrict__ listJ, uint32_t* __restrict__ listKey) {
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
__global__ void __launch_bounds__(256)
    WindowKernel(const uint32_t* __restrict__ sample, uint64_t rows, uint32_t S, uint32_t hiRank, uint32_t loRank,
                 const uint32_t* __restrict__ margin, uint32_t* __restrict__ lo, uint32_t* __restrict__ hi) {
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
  WindowKernel<KPL>
      <<<unsigned((rows + kRowWarps - 1) / kRowWarps), 256, 0, sm>>>(sample, rows, S, hiRank, loRank, margin, lo, hi);
  CUSIM_LAUNCH_CHECK();
}

// A warp per row: the winners among the listed keys (SelectListed).
__global__ void __launch_bounds__(256)
    ListKernel(uint64_t rows, uint32_t k, uint32_t cap, bool forceFail, uint32_t stage,
               const uint32_t* __restrict__ count, const uint32_t* __restrict__ over, const uint32_t* listKey,
               const uint32_t* listJ, uint32_t* bits, uint64_t words, uint32_t* __restrict__ fail) {
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

}  // namespace
}  // namespace flyhash
}  // namespace cusim
