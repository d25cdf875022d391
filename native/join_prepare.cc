// Shared preprocessing and result handling for both join backends: global
// token order, rank-mapped size-sorted collections, the exact final test.
#include <algorithm>
#include <numeric>

#include "join.h"
#include "parallel.h"

namespace cusim {
namespace join {
namespace {

// Deduplicated rows in input order (tokens still raw ids).
struct Deduped {
  std::vector<uint64_t> offsets;
  std::vector<uint32_t> tokens;
};

Deduped Dedupe(const CsrView& m) {
  Deduped d;
  d.offsets.assign(m.rows + 1, 0);
  std::vector<uint32_t> sizes(m.rows);
  const uint32_t base = m.rows ? m.indptr[0] : 0;
  d.tokens.resize(m.nnz());
  ParallelFor(m.rows, 256, [&](size_t b, size_t e) {
    for (size_t r = b; r < e; r++) {
      uint32_t* out = d.tokens.data() + (m.indptr[r] - base);
      const uint32_t len = m.indptr[r + 1] - m.indptr[r];
      std::copy(m.indices + m.indptr[r], m.indices + m.indptr[r + 1], out);
      std::sort(out, out + len);
      sizes[r] = uint32_t(std::unique(out, out + len) - out);
    }
  });
  // Compact the rows in place: each row moves left, never past its source.
  uint64_t w = 0;
  for (uint64_t r = 0; r < m.rows; r++) {
    const uint64_t src = m.indptr[r] - base;
    if (w != src) std::copy(d.tokens.begin() + src, d.tokens.begin() + src + sizes[r], d.tokens.begin() + w);
    w += sizes[r];
    d.offsets[r + 1] = w;
  }
  d.tokens.resize(w);
  return d;
}

Collection Build(const Deduped& d, const std::vector<uint32_t>& rankOf, bool dense,
                 const std::vector<uint32_t>& vocab) {
  const uint64_t rows = d.offsets.size() - 1;
  Collection c;
  std::vector<uint32_t> order;
  order.reserve(rows);
  for (uint64_t r = 0; r < rows; r++)
    if (d.offsets[r + 1] > d.offsets[r]) order.push_back(uint32_t(r));
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return d.offsets[a + 1] - d.offsets[a] < d.offsets[b + 1] - d.offsets[b];
  });
  c.ids = order;
  c.offsets.assign(order.size() + 1, 0);
  for (size_t i = 0; i < order.size(); i++) c.offsets[i + 1] = c.offsets[i] + (d.offsets[order[i] + 1] - d.offsets[order[i]]);
  c.tokens.resize(c.offsets.back());
  ParallelFor(order.size(), 256, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; i++) {
      const uint32_t* src = d.tokens.data() + d.offsets[order[i]];
      const uint64_t len = c.offsets[i + 1] - c.offsets[i];
      uint32_t* out = c.tokens.data() + c.offsets[i];
      for (uint64_t k = 0; k < len; k++) {
        out[k] = dense ? rankOf[src[k]]
                       : rankOf[std::lower_bound(vocab.begin(), vocab.end(), src[k]) - vocab.begin()];
      }
      std::sort(out, out + len);
    }
  });
  return c;
}

}  // namespace

std::shared_ptr<Prepared> Prepare(const CsrView& sets, const CsrView* against, Measure m, double t) {
  auto p = std::make_shared<Prepared>();
  p->bounds = Bounds{m, t};
  p->self = against == nullptr;
  Deduped r = Dedupe(sets);
  Deduped s;
  if (against) s = Dedupe(*against);
  const uint64_t cols = std::max<uint64_t>(sets.cols, against ? against->cols : 0);
  const uint64_t nnz = r.tokens.size() + s.tokens.size();
  // Dense per-column arrays when the id space is not much larger than the data;
  // otherwise a sorted vocabulary, so a huge `cols` with few tokens stays cheap.
  const bool dense = cols <= 4 * nnz + (1u << 20);
  std::vector<uint32_t> vocab;  // distinct ids (sparse path)
  std::vector<uint32_t> df;     // per column (dense) or per vocab entry (sparse)
  if (dense) {
    df.assign(cols, 0);
    for (uint32_t x : r.tokens) df[x]++;
    for (uint32_t x : s.tokens) df[x]++;
  } else {
    std::vector<uint32_t> all(r.tokens);
    all.insert(all.end(), s.tokens.begin(), s.tokens.end());
    std::sort(all.begin(), all.end());
    for (size_t i = 0; i < all.size();) {
      size_t j = i;
      while (j < all.size() && all[j] == all[i]) j++;
      vocab.push_back(all[i]);
      df.push_back(uint32_t(j - i));
      i = j;
    }
  }
  // Rare tokens first, so prefixes hold the most selective tokens.
  std::vector<uint32_t> present;  // index into df
  for (uint32_t i = 0; i < df.size(); i++)
    if (df[i]) present.push_back(i);
  std::sort(present.begin(), present.end(), [&](uint32_t a, uint32_t b) {
    if (df[a] != df[b]) return df[a] < df[b];
    return (dense ? a : vocab[a]) < (dense ? b : vocab[b]);
  });
  std::vector<uint32_t> rankOf(df.size(), 0);
  for (uint32_t k = 0; k < present.size(); k++) rankOf[present[k]] = k;
  p->vocab = uint32_t(present.size());
  p->probe = Build(r, rankOf, dense, vocab);
  if (against) p->index = Build(s, rankOf, dense, vocab);
  return p;
}

void SortPairs(std::vector<uint32_t>& left, std::vector<uint32_t>& right, std::vector<uint32_t>& overlap,
               std::vector<float>& sim) {
  const size_t n = left.size();
  if (n < 2) return;
  const uint32_t maxL = *std::max_element(left.begin(), left.end());
  std::vector<uint32_t> perm(n);
  if (uint64_t(maxL) < 4 * uint64_t(n) + 1024) {
    // Counting sort by left (one pass), then each left's few rights in
    // parallel: O(n) where a comparison sort of millions of pairs dominated.
    std::vector<uint64_t> start(uint64_t(maxL) + 2, 0);
    for (uint32_t l : left) start[uint64_t(l) + 1]++;
    for (uint64_t v = 0; v <= maxL; v++) start[v + 1] += start[v];
    std::vector<uint64_t> fill(start.begin(), start.end() - 1);
    for (size_t i = 0; i < n; i++) perm[fill[left[i]]++] = uint32_t(i);
    ParallelFor(uint64_t(maxL) + 1, 1024, [&](size_t b, size_t e) {
      for (size_t v = b; v < e; v++)
        std::sort(perm.begin() + start[v], perm.begin() + start[v + 1], [&](uint32_t x, uint32_t y) { return right[x] < right[y]; });
    });
  } else {
    std::iota(perm.begin(), perm.end(), 0u);
    std::sort(perm.begin(), perm.end(), [&](uint32_t x, uint32_t y) {
      return left[x] != left[y] ? left[x] < left[y] : right[x] < right[y];
    });
  }
  auto apply = [&](auto& v) {
    std::remove_reference_t<decltype(v)> out(n);
    for (size_t i = 0; i < n; i++) out[i] = v[perm[i]];
    v.swap(out);
  };
  apply(left);
  apply(right);
  apply(overlap);
  apply(sim);
}

void Finalize(const Prepared& p, const std::vector<Hit>& hits, Chunk* out) {
  const Collection& X = p.probe;
  const Collection& Y = p.indexed();
  for (const Hit& h : hits) {
    double s;
    if (!Accept(p.bounds.m, p.bounds.t, X.size(h.x), Y.size(h.y), h.o, &s)) continue;
    uint32_t l = X.ids[h.x], r = Y.ids[h.y];
    if (p.self && l > r) std::swap(l, r);
    out->left.push_back(l);
    out->right.push_back(r);
    out->overlap.push_back(h.o);
    out->similarity.push_back(float(s));
  }
  SortPairs(out->left, out->right, out->overlap, out->similarity);
}

}  // namespace join
}  // namespace cusim
