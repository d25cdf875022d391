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

// One stable scatter by the key's top bits into buckets (the keys are hashes,
// so buckets come out even), then each bucket sorted on its own: buckets are
// small enough for the cache and spread over the pool. Keys of a bucket all
// precede the next bucket's, so the whole is sorted by (key, row) exactly as
// std::sort leaves it. Called from inside a ParallelFor it runs on the
// calling thread only (nested calls run inline), with the same result.
void SortKeyed(std::vector<Keyed>& v, std::vector<Keyed>& tmp) {
  const size_t n = v.size();
  if (n < (1u << 16)) {
    std::sort(v.begin(), v.end());
    return;
  }
  // About 2,048 pairs (32 KiB) a bucket, 2^8 .. 2^14 buckets.
  int bits = 8;
  while (bits < 14 && (n >> (bits + 11)) > 0) ++bits;
  const size_t nb = size_t(1) << bits;
  const int shift = 64 - bits;
  const size_t chunks = std::max<size_t>(1, std::min<size_t>(NumThreads() * 4, n >> 14));
  const size_t per = (n + chunks - 1) / chunks;
  std::vector<size_t> pos(chunks * nb, 0);
  ParallelFor(chunks, 1, [&](size_t b, size_t e) {
    for (size_t c = b; c < e; ++c) {
      size_t* cnt = &pos[c * nb];
      for (size_t i = c * per; i < std::min(n, (c + 1) * per); ++i) ++cnt[v[i].first >> shift];
    }
  });
  // Bucket k of chunk c lands after every earlier bucket and after bucket k of earlier chunks.
  std::vector<size_t> start(nb + 1, 0);
  size_t acc = 0;
  for (size_t k = 0; k < nb; ++k) {
    start[k] = acc;
    for (size_t c = 0; c < chunks; ++c) {
      const size_t t = pos[c * nb + k];
      pos[c * nb + k] = acc;
      acc += t;
    }
  }
  start[nb] = acc;
  tmp.resize(n);
  ParallelFor(chunks, 1, [&](size_t b, size_t e) {
    for (size_t c = b; c < e; ++c) {
      size_t* at = &pos[c * nb];
      for (size_t i = c * per; i < std::min(n, (c + 1) * per); ++i) tmp[at[v[i].first >> shift]++] = v[i];
    }
  });
  ParallelFor(nb, 1, [&](size_t b, size_t e) {
    for (size_t k = b; k < e; ++k) std::sort(tmp.begin() + start[k], tmp.begin() + start[k + 1]);
  });
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
