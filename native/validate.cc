#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <string>

#include "common.h"
#include "parallel.h"

namespace cusim {

// The smallest position in [begin, end) where bad(i) holds, or UINT64_MAX.
// Chunks race to report; the smallest wins so messages do not depend on the
// thread count.
template <typename Bad>
static uint64_t FirstBad(uint64_t begin, uint64_t end, const Bad& bad) {
  std::atomic<uint64_t> firstBad{UINT64_MAX};
  ParallelFor(end - begin, 1 << 16, [&](size_t b, size_t e) {
    for (size_t i = begin + b; i < begin + e; ++i) {
      if (bad(i)) {
        uint64_t cur = firstBad.load();
        while (i < cur && !firstBad.compare_exchange_weak(cur, i)) {
        }
        return;
      }
    }
  });
  return firstBad.load();
}

void ValidateIndptr(const CsrView& m, const char* name) {
  // On all cores: the first bad row wins, as in a serial scan.
  const uint64_t r = FirstBad(0, m.rows, [&](size_t i) { return m.indptr[i + 1] < m.indptr[i]; });
  if (r != UINT64_MAX)
    ThrowInvalid(std::string(name) + ".indptr must be non-decreasing (indptr[" + std::to_string(r + 1) + "] < indptr[" +
                 std::to_string(r) + "])");
}

void ValidateCsr(const CsrView& m, const char* name) {
  std::string n(name);
  ValidateIndptr(m, name);
  const uint64_t begin = m.rows ? m.indptr[0] : 0, end = m.rows ? m.indptr[m.rows] : 0;
  const uint64_t bad = FirstBad(begin, end, [&](size_t i) { return m.indices[i] >= m.cols; });
  if (bad != UINT64_MAX)
    ThrowInvalid(n + ".indices[" + std::to_string(m.base + bad) + "]=" + std::to_string(m.indices[bad]) +
                 " is out of range for cols=" + std::to_string(m.cols));
}

void RejectNonFiniteWeights(const CsrView& m, const char* name) {
  if (!m.values || m.rows == 0) return;
  const uint64_t bad =
      FirstBad(m.indptr[0], m.indptr[m.rows], [&](size_t i) { return !(std::fabs(m.values[i]) <= FLT_MAX); });
  if (bad != UINT64_MAX) {
    const float v = m.values[bad];
    // As JavaScript prints the number. The row is this view's (the last row
    // starting at or before the entry); lib/minhash.ts adds the call's rowStart.
    const char* shown = std::isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity";
    const uint64_t row = uint64_t(std::upper_bound(m.indptr, m.indptr + m.rows, uint32_t(bad)) - m.indptr) - 1;
    ThrowInvalid(std::string(name) + ".values[" + std::to_string(m.base + bad) + "]=" + shown + " in row " +
                 std::to_string(row) + ": weights must be finite");
  }
}

}  // namespace cusim
