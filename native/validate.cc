#include <algorithm>
#include <atomic>
#include <string>

#include "common.h"
#include "parallel.h"

namespace cusim {

void ValidateCsr(const CsrView& m, const char* name) {
  std::string n(name);
  for (uint64_t r = 0; r < m.rows; ++r) {
    if (m.indptr[r + 1] < m.indptr[r])
      ThrowInvalid(n + ".indptr must be non-decreasing (indptr[" + std::to_string(r + 1) + "] < indptr[" + std::to_string(r) + "])");
  }
  const uint64_t begin = m.rows ? m.indptr[0] : 0, end = m.rows ? m.indptr[m.rows] : 0;
  // Chunks race to report; the smallest bad position wins so the message is
  // the same whatever the thread count.
  std::atomic<uint64_t> firstBad{UINT64_MAX};
  ParallelFor(end - begin, 1 << 16, [&](size_t b, size_t e) {
    for (size_t i = begin + b; i < begin + e; ++i) {
      if (m.indices[i] >= m.cols) {
        uint64_t cur = firstBad.load();
        while (i < cur && !firstBad.compare_exchange_weak(cur, i)) {
        }
        return;
      }
    }
  });
  uint64_t bad = firstBad.load();
  if (bad != UINT64_MAX)
    ThrowInvalid(n + ".indices[" + std::to_string(bad) + "]=" + std::to_string(m.indices[bad]) +
                 " is out of range for cols=" + std::to_string(m.cols));
}

}  // namespace cusim
