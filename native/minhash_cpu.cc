#include <cmath>
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "minhash.h"
#include "parallel.h"
#include "philox.h"

namespace cusim {
namespace minhash {
namespace {

// floorf without a libm call, so the sample loop vectorizes on baseline SSE2:
// truncate through int32 and step down for negative fractions. |x| >= 2^23 is
// already integral (and NaN passes through), exactly as floorf.
inline float FloorF(float x) {
  float t = float(int32_t(std::fabs(x) < 8388608.0f ? x : 0.0f));
  t = t > x ? t - 1.0f : t;
  return std::fabs(x) < 8388608.0f ? t : x;
}

// The float -> int32 conversion the GPU's __float2int_rz does: saturating,
// NaN -> 0, so out-of-range t* agrees across backends.
inline uint32_t ToInt32Bits(float t) {
  if (t != t) return 0;
  if (t >= 2147483648.0f) return 0x7FFFFFFFu;
  if (t < -2147483648.0f) return 0x80000000u;
  return uint32_t(int32_t(t));
}

// One nonzero (column d, lw = ln w) against every sample of one row's running
// minima. GCC will not if-convert the float compares under -ftrapping-math,
// so x86 gets the loop in SSE2 by hand; the ops and their order are the
// scalar loop's, so results are identical.
void UpdateRow(float lw, uint32_t d, const float* R, const float* C, const float* B, uint32_t samples, float* A,
               float* T, uint32_t* K) {
  uint32_t s = 0;
#if defined(__SSE2__)
  const __m128 vlw = _mm_set1_ps(lw), one = _mm_set1_ps(1.0f), big = _mm_set1_ps(8388608.0f);
  const __m128 absMask = _mm_castsi128_ps(_mm_set1_epi32(0x7FFFFFFF));
  const __m128i vd = _mm_set1_epi32(int32_t(d));
  for (; s + 4 <= samples; s += 4) {
    const __m128 rr = _mm_loadu_ps(R + s), bb = _mm_loadu_ps(B + s), cc = _mm_loadu_ps(C + s);
    const __m128 x = _mm_add_ps(_mm_div_ps(vlw, rr), bb);
    // floorf: truncate, step down where that rounded up; |x| >= 2^23 and NaN pass through.
    __m128 t = _mm_cvtepi32_ps(_mm_cvttps_epi32(x));
    t = _mm_sub_ps(t, _mm_and_ps(_mm_cmpgt_ps(t, x), one));
    const __m128 small = _mm_cmplt_ps(_mm_and_ps(x, absMask), big);
    t = _mm_or_ps(_mm_and_ps(small, t), _mm_andnot_ps(small, x));
    const __m128 lna = _mm_sub_ps(_mm_sub_ps(cc, _mm_mul_ps(_mm_sub_ps(t, bb), rr)), rr);
    const __m128 a = _mm_loadu_ps(A + s);
    const __m128 lt = _mm_cmplt_ps(lna, a);
    _mm_storeu_ps(A + s, _mm_or_ps(_mm_and_ps(lt, lna), _mm_andnot_ps(lt, a)));
    const __m128 tOld = _mm_loadu_ps(T + s);
    _mm_storeu_ps(T + s, _mm_or_ps(_mm_and_ps(lt, t), _mm_andnot_ps(lt, tOld)));
    const __m128i lti = _mm_castps_si128(lt);
    const __m128i kOld = _mm_loadu_si128(reinterpret_cast<const __m128i*>(K + s));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(K + s), _mm_or_si128(_mm_and_si128(lti, vd), _mm_andnot_si128(lti, kOld)));
  }
#endif
  for (; s < samples; ++s) {
    const float rr = R[s], bb = B[s];
    const float t = FloorF(lw / rr + bb);
    const float lna = C[s] - (t - bb) * rr - rr;
    if (lna < A[s]) A[s] = lna, T[s] = t, K[s] = d;  // strict: the first minimum in CSR order wins
  }
}

constexpr uint32_t kAhead = 2;

inline void Prefetch(const float* rs, const float* lnCs, const float* betas, size_t off, uint32_t samples) {
  const size_t lines = std::min<size_t>((size_t(samples) * 4 + 63) / 64, 8);
  for (size_t l = 0; l < lines; ++l) {
    __builtin_prefetch(rs + off + l * 16);
    __builtin_prefetch(lnCs + off + l * 16);
    __builtin_prefetch(betas + off + l * 16);
  }
}

}  // namespace

void GenerateParamsCpu(uint64_t seed, uint32_t dim, uint32_t samples, float* rs, float* lnCs, float* betas) {
  ParallelFor(dim, 256, [&](size_t b, size_t e) {
    for (size_t d = b; d < e; ++d) {
      Philox p(seed, d, 0);
      const size_t off = d * size_t(samples);
      for (uint32_t s = 0; s < samples; ++s) {
        float u1 = p.Uniform(), u2 = p.Uniform(), u3 = p.Uniform(), u4 = p.Uniform(), u5 = p.Uniform();
        rs[off + s] = float(-std::log(double(u1) * double(u2)));
        lnCs[off + s] = float(std::log(-std::log(double(u3) * double(u4))));
        betas[off + s] = u5;
      }
    }
  });
}

void HashCpu(const CsrView& m, uint64_t rowStart, uint64_t rowEnd, uint32_t samples, const float* rs,
             const float* lnCs, const float* betas, uint32_t* out, const CancelToken& cancel) {
  const uint64_t rows = rowEnd - rowStart;
  ParallelFor(rows, 16, [&](size_t b, size_t e) {
    cancel.check();
    std::vector<float> minA(samples), minT(samples);
    std::vector<uint32_t> minK(samples);
    float* A = minA.data();
    float* T = minT.data();
    uint32_t* K = minK.data();
    for (size_t i = b; i < e; ++i) {
      const uint64_t r = rowStart + i;
      std::fill(minA.begin(), minA.end(), std::numeric_limits<float>::infinity());
      std::fill(minK.begin(), minK.end(), kSentinel);
      std::fill(minT.begin(), minT.end(), 0.0f);
      const uint32_t jEnd = m.indptr[r + 1];
      for (uint32_t j = m.indptr[r]; j < jEnd; ++j) {
        // The tables are far larger than cache and each nonzero reads three
        // scattered runs of `samples` floats: fetch the next column's early.
        if (j + kAhead < jEnd) Prefetch(rs, lnCs, betas, size_t(m.indices[j + kAhead]) * samples, samples);
        const float w = m.values ? m.values[j] : 1.0f;
        if (!(w > 0.0f)) continue;  // zero, negative and NaN weights carry no mass
        const float lw = float(std::log(double(w)));
        const uint32_t d = m.indices[j];
        const size_t off = size_t(d) * samples;
        UpdateRow(lw, d, rs + off, lnCs + off, betas + off, samples, A, T, K);
      }
      uint32_t* o = out + i * size_t(samples) * 2;
      for (uint32_t s = 0; s < samples; ++s) {
        o[2 * s] = K[s];
        o[2 * s + 1] = K[s] == kSentinel ? kSentinel : ToInt32Bits(T[s]);
      }
      cancel.advance(1);
    }
  });
}

std::vector<uint64_t> SplitRowsByNnz(const CsrView& m, uint64_t rowStart, uint64_t rowEnd, size_t parts) {
  std::vector<uint64_t> cut(parts + 1, rowStart);
  cut[parts] = rowEnd;
  if (rowEnd <= rowStart) return cut;
  const uint64_t nzA = m.indptr[rowStart], nzB = m.indptr[rowEnd];
  for (size_t k = 1; k < parts; ++k) {
    // The first row starting at or after the k-th nnz quantile.
    const uint64_t target = nzA + (nzB - nzA) * k / parts;
    const uint32_t* p = std::lower_bound(m.indptr + cut[k - 1], m.indptr + rowEnd, uint32_t(target));
    cut[k] = std::max<uint64_t>(cut[k - 1], uint64_t(p - m.indptr));
  }
  return cut;
}

void JaccardPairsCpu(const uint32_t* sigs, uint32_t samples, const uint32_t* left, const uint32_t* right,
                     uint64_t pairs, float* out) {
  const size_t stride = size_t(samples) * 2;
  ParallelFor(pairs, 1024, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      const uint32_t* a = sigs + left[i] * stride;
      const uint32_t* c = sigs + right[i] * stride;
      if (a[0] == kSentinel || c[0] == kSentinel) {
        out[i] = 0.0f;
        continue;
      }
      uint32_t same = 0;
      for (uint32_t s = 0; s < samples; ++s) same += (a[2 * s] == c[2 * s]) & (a[2 * s + 1] == c[2 * s + 1]);
      out[i] = float(same) / float(samples);
    }
  });
}

}  // namespace minhash
}  // namespace cusim
