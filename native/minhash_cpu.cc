#include <unistd.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <utility>
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
    _mm_storeu_si128(reinterpret_cast<__m128i*>(K + s),
                     _mm_or_si128(_mm_and_si128(lti, vd), _mm_andnot_si128(lti, kOld)));
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

inline void Prefetch(const float* rs, const float* lnCs, const float* betas, uint32_t samples) {
  const size_t lines = std::min<size_t>((size_t(samples) * 4 + 63) / 64, 8);
  for (size_t l = 0; l < lines; ++l) {
    __builtin_prefetch(rs + l * 16);
    __builtin_prefetch(lnCs + l * 16);
    __builtin_prefetch(betas + l * 16);
  }
}

}  // namespace

void GenerateColumn(uint64_t seed, uint32_t d, uint32_t samples, float* rs, float* lnCs, float* betas) {
  Philox p(seed, d, 0);
  for (uint32_t s = 0; s < samples; ++s) {
    float u1 = p.Uniform(), u2 = p.Uniform(), u3 = p.Uniform(), u4 = p.Uniform(), u5 = p.Uniform();
    rs[s] = float(-std::log(double(u1) * double(u2)));
    lnCs[s] = float(std::log(-std::log(double(u3) * double(u4))));
    betas[s] = u5;
  }
}

namespace {
// About 4 MB per table per block: small enough that a narrow corpus stays
// small, large enough that blocks are few.
uint32_t BlockShift(uint32_t samples) {
  uint32_t shift = 0;
  while ((uint64_t(4) << 20) >> (shift + 1) >= uint64_t(samples) * 4) ++shift;
  return shift;
}
}  // namespace

ColumnParams::ColumnParams(uint64_t seed, uint32_t samples)
    : seed_(seed), samples_(samples), blockShift_(BlockShift(samples)), blockMask_((1u << BlockShift(samples)) - 1) {}

ColumnParams::ColumnParams(uint32_t samples, const uint32_t* cols, size_t n, const float* rs, const float* lnCs,
                           const float* betas)
    : ColumnParams(0, samples) {
  injected_ = true;
  std::vector<uint32_t> all(cols, cols + n);
  Add(all);
  const float* src[3] = {rs, lnCs, betas};
  ParallelFor(n, 256, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i)
      for (int t = 0; t < 3; ++t) std::memcpy(MutableAt(t, uint32_t(i)), src[t] + i * samples_, samples_ * 4);
  });
}

void ColumnParams::Add(const std::vector<uint32_t>& cols) {
  const size_t first = cols_.size(), total = first + cols.size();
  if (total > size_t(kNoSlot)) ThrowInvalid("more than 2^32 - 1 distinct columns");
  const size_t perBlock = size_t(1) << blockShift_;
  // Say so instead of letting the allocator (or the OOM killer, under
  // overcommit) answer.
  const uint64_t need = 3 * uint64_t(total) * samples_ * sizeof(float);
  const uint64_t physical = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGE_SIZE));
  if (need > physical)
    ThrowOutOfMemory("weighted MinHash parameters on the host (3 x samples floats for each of " +
                         std::to_string(total) + " distinct columns)",
                     need, physical);
  while (blocks_.size() * perBlock < total) {
    Block b;
    for (auto& t : b.t) t.reset(new float[perBlock * samples_]);
    blocks_.push_back(std::move(b));
  }
  cols_.insert(cols_.end(), cols.begin(), cols.end());
  for (size_t i = first; i < total; ++i) map_.Insert(cols_[i], uint32_t(i));
  // Tables of every block, the slot list and about 8 bytes per column of map.
  bytes_.store(uint64_t(blocks_.size()) * perBlock * samples_ * 12 + uint64_t(total) * 12, std::memory_order_relaxed);
  if (injected_) return;  // the constructor copies the tables in
  ParallelFor(cols.size(), 16, [&](size_t b, size_t e) {
    for (size_t i = first + b; i < first + e; ++i) {
      const uint32_t slot = uint32_t(i);
      GenerateColumn(seed_, cols_[i], samples_, MutableAt(0, slot), MutableAt(1, slot), MutableAt(2, slot));
    }
  });
}

void ColumnParams::Ensure(const CsrView& m, uint64_t a, uint64_t b, const CancelToken& cancel, const char* name) {
  if (b <= a) return;
  const uint64_t nz0 = m.indptr[a], nz1 = m.indptr[b];
  // Absent columns, deduplicated per chunk in a small set, then merged.
  std::vector<uint32_t> missing;
  uint64_t firstMissing = ~0ull;
  {
    std::shared_lock<RwLock> read(lock_);
    std::mutex mu;
    const uint64_t n = nz1 - nz0;
    const uint64_t grain = std::max<uint64_t>(1 << 16, n / (NumThreads() * 4) + 1);
    ParallelFor((n + grain - 1) / grain, 1, [&](size_t cb, size_t ce) {
      cancel.check();
      ColumnMap seen;
      std::vector<uint32_t> local;
      uint64_t firstLocal = ~0ull;
      for (uint64_t j = nz0 + cb * grain; j < std::min<uint64_t>(nz1, nz0 + ce * grain); ++j) {
        const uint32_t d = m.indices[j];
        if (map_.Find(d) != kNoSlot || seen.Find(d) != kNoSlot) continue;
        seen.Insert(d, 0);
        local.push_back(d);
        firstLocal = std::min(firstLocal, j);
      }
      if (local.empty()) return;
      std::lock_guard<std::mutex> l(mu);
      missing.insert(missing.end(), local.begin(), local.end());
      firstMissing = std::min(firstMissing, firstLocal);
    });
  }
  if (missing.empty()) return;
  if (injected_)
    ThrowInvalid(std::string(name) + ".indices[" + std::to_string(firstMissing) +
                 "]=" + std::to_string(m.indices[firstMissing]) +
                 " has no parameters (fromParameters was given other columns)");
  std::sort(missing.begin(), missing.end());
  missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
  std::unique_lock<RwLock> write(lock_);
  // Another call may have added some meanwhile.
  missing.erase(std::remove_if(missing.begin(), missing.end(), [&](uint32_t d) { return map_.Find(d) != kNoSlot; }),
                missing.end());
  cancel.check();
  if (!missing.empty()) Add(missing);
}

void ColumnParams::Gather(const uint32_t* cols, size_t n, float* rs, float* lnCs, float* betas) const {
  std::shared_lock<RwLock> read(lock_);
  ParallelFor(n, 64, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      const uint32_t slot = map_.Find(cols[i]);
      const size_t off = i * samples_;
      if (slot != kNoSlot) {
        std::memcpy(rs + off, At(0, slot), samples_ * 4);
        std::memcpy(lnCs + off, At(1, slot), samples_ * 4);
        std::memcpy(betas + off, At(2, slot), samples_ * 4);
      } else if (!injected_) {
        GenerateColumn(seed_, cols[i], samples_, rs + off, lnCs + off, betas + off);
      } else {
        ThrowInvalid("columns[" + std::to_string(i) + "]=" + std::to_string(cols[i]) +
                     " has no parameters (fromParameters was given other columns)");
      }
    }
  });
}

void HashCpu(const CsrView& m, uint64_t rowStart, uint64_t rowEnd, const ColumnParams& p, uint32_t* out,
             const CancelToken& cancel) {
  const uint64_t rows = rowEnd - rowStart;
  const uint32_t samples = p.samples();
  ParallelFor(rows, 16, [&](size_t b, size_t e) {
    cancel.check();
    std::vector<float> minA(samples), minT(samples);
    std::vector<uint32_t> minK(samples), slots;
    float* A = minA.data();
    float* T = minT.data();
    uint32_t* K = minK.data();
    for (size_t i = b; i < e; ++i) {
      const uint64_t r = rowStart + i;
      std::fill(minA.begin(), minA.end(), std::numeric_limits<float>::infinity());
      std::fill(minK.begin(), minK.end(), kSentinel);
      std::fill(minT.begin(), minT.end(), 0.0f);
      const uint32_t j0 = m.indptr[r], jEnd = m.indptr[r + 1];
      // Slots first, so the loop below can fetch a column's tables ahead.
      slots.resize(jEnd - j0);
      for (uint32_t j = j0; j < jEnd; ++j) {
        const uint32_t slot = p.Find(m.indices[j]);
        if (slot == kNoSlot) throw Error(kInternal, "MinHash column without parameters (Ensure was skipped)");
        slots[j - j0] = slot;
      }
      for (uint32_t j = j0; j < jEnd; ++j) {
        // The tables are far larger than cache and each nonzero reads three
        // scattered runs of `samples` floats: fetch the next column's early.
        if (j + kAhead < jEnd) {
          const uint32_t ahead = slots[j + kAhead - j0];
          Prefetch(p.rs(ahead), p.lnCs(ahead), p.betas(ahead), samples);
        }
        const float w = m.values ? m.values[j] : 1.0f;
        if (!(w > 0.0f)) continue;  // zero, negative and NaN weights carry no mass
        const float lw = float(std::log(double(w)));
        const uint32_t slot = slots[j - j0];
        UpdateRow(lw, m.indices[j], p.rs(slot), p.lnCs(slot), p.betas(slot), samples, A, T, K);
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

namespace {

class CpuHasher final : public WeightedHasher {
 public:
  explicit CpuHasher(std::shared_ptr<ColumnParams> params) : params_(std::move(params)) {}

  void Hash(const CsrView& m, uint32_t* out, Timing*, const CancelToken& cancel) override {
    ValidateCsr(m, "matrix");
    RejectNonFiniteWeights(m, "matrix");
    params_->Ensure(m, 0, m.rows, cancel, "matrix");
    std::shared_lock<RwLock> read(params_->lock());
    HashCpu(m, 0, m.rows, *params_, out, cancel);
  }

  // The glue asks only the cuda backend; this is its answer to any other caller.
  void DeviceParams(size_t, const uint32_t*, size_t, float*, float*, float*) override {
    ThrowInvalid("deviceParameters needs the cuda backend");
  }

 private:
  std::shared_ptr<ColumnParams> params_;
};

}  // namespace

std::unique_ptr<WeightedHasher> MakeCpuHasher(std::shared_ptr<ColumnParams> params) {
  return std::make_unique<CpuHasher>(std::move(params));
}

}  // namespace minhash
}  // namespace cusim
