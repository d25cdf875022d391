// Sorting (key, row) pairs by key, then row, on every core: band tables and
// duplicate classes sort one pair per row (10M rows at the 10M-document job),
// and a serial sort of them bounded a many-core host.
#include <algorithm>
#include <cstring>
#include <vector>

#include "lsh.h"
#include "parallel.h"

namespace cusim {
namespace lsh {

// SortedKeyed (lsh.h) over the table itself: one scatter by the key's top bits
// into buckets (the keys are hashes, so buckets come out even), then each
// bucket sorted on its own: buckets are small enough for the cache and spread
// over the pool. Called from inside a ParallelFor it runs on the calling
// thread only (nested calls run inline), with the same result.
void SortKeyed(std::vector<Keyed>& v, std::vector<Keyed>& tmp) {
  SortedKeyed(
      v.size(),
      [&](size_t i, Keyed* k) {
        *k = v[i];
        return true;
      },
      &tmp);
  v.swap(tmp);
}

std::vector<size_t> RunCuts(const std::vector<Keyed>& t, size_t chunks) {
  std::vector<size_t> cut(chunks + 1, t.size());
  cut[0] = 0;
  for (size_t c = 1; c < chunks; ++c) {
    size_t i = std::max(cut[c - 1], t.size() * c / chunks);
    while (i > 0 && i < t.size() && t[i].first == t[i - 1].first) ++i;
    cut[c] = i;
  }
  return cut;
}

}  // namespace lsh
}  // namespace cusim
