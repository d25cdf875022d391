// Shared preprocessing and result handling for both join backends: global
// token order, rank-mapped size-sorted collections, the exact final test.
#include <algorithm>
#include <memory>
#include <numeric>

#include "join.h"
#include "parallel.h"
#include "phase_log.h"

namespace cusim {
namespace join {
namespace {

// One input collection with its tokens as column ids: the raw ids (dense
// path) or indices into the sorted vocabulary (sparse path).
struct Source {
  uint64_t rows = 0;
  const uint32_t* indptr = nullptr;
  uint32_t base = 0;
  const uint32_t* tok = nullptr;  // row r: tok[indptr[r] - base, indptr[r + 1] - base)
  UninitVector<uint32_t> owned;   // sparse path: the vocabulary indices
  uint64_t nnz() const { return rows ? uint64_t(indptr[rows]) - base : 0; }
  uint32_t len(uint64_t r) const { return indptr[r + 1] - indptr[r]; }
  const uint32_t* row(uint64_t r) const { return tok + (indptr[r] - base); }
};

// Sorts and deduplicates a short row in place; returns its new length.
uint32_t SortUnique(uint32_t* a, uint32_t n) {
  if (n > 32) {
    std::sort(a, a + n);
  } else {  // below this insertion sort beats std::sort's set-up
    for (uint32_t i = 1; i < n; i++) {
      const uint32_t v = a[i];
      uint32_t j = i;
      for (; j > 0 && a[j - 1] > v; j--) a[j] = a[j - 1];
      a[j] = v;
    }
  }
  return uint32_t(std::unique(a, a + n) - a);
}

// Sorts and deduplicates rows of ranks through a two-level bitmap (a bit per
// rank, a bit per nonempty word), all zero between rows: setting bits needs no
// comparisons, so rows of a few dozen random ranks avoid the mispredicted
// branches that dominate a comparison sort. Reading a row back scans the
// upper level, so rows shorter than that stay with SortUnique.
class RowBitmap {
 public:
  // Largest rank count kept in a bitmap (128 KiB per block of rows).
  static constexpr uint64_t kMaxRanks = uint64_t(1) << 20;

  explicit RowBitmap(uint64_t ranks) : lo_((ranks + 63) / 64, 0), hi_((lo_.size() + 63) / 64, 0) {}

  static bool Pays(uint64_t ranks, uint32_t len) { return (ranks + 4095) / 4096 <= 4 * uint64_t(len); }

  // Writes the sorted distinct ranks of in[0, len) mapped through rankOf to
  // out, which has room for kSlack more.
  static constexpr uint32_t kSlack = 1;
  uint32_t MapSortUnique(const uint32_t* in, uint32_t len, const uint32_t* rankOf, uint32_t* out) {
    uint64_t* lo = lo_.data();
    uint64_t* hi = hi_.data();
    for (uint32_t j = 0; j < len; j++) {
      const uint32_t x = rankOf[in[j]];
      lo[x >> 6] |= uint64_t(1) << (x & 63);
      hi[x >> 12] |= uint64_t(1) << ((x >> 6) & 63);
    }
    // A word's first four ranks are written without branching: a write past
    // the word's last rank (the top bit stands in for it) lands one past the
    // output, where the next rank or the slack goes. Only words holding more
    // than four ranks branch. (No popcount: the baseline x86-64 target lacks it.)
    constexpr uint64_t kTop = uint64_t(1) << 63;
    uint32_t* w = out;
    for (size_t h = 0; h < hi_.size(); h++) {
      for (uint64_t hb = hi[h]; hb; hb &= hb - 1) {
        const size_t word = h * 64 + size_t(__builtin_ctzll(hb));
        const uint32_t base = uint32_t(word * 64);
        uint64_t b = lo[word];
        lo[word] = 0;
        w[0] = base + uint32_t(__builtin_ctzll(b | kTop));
        w += b != 0;  // always: the upper level marks nonempty words
        b &= b - 1;
        w[0] = base + uint32_t(__builtin_ctzll(b | kTop));
        w += b != 0;
        b &= b - 1;
        w[0] = base + uint32_t(__builtin_ctzll(b | kTop));
        w += b != 0;
        b &= b - 1;
        w[0] = base + uint32_t(__builtin_ctzll(b | kTop));
        w += b != 0;
        b &= b - 1;
        for (; b; b &= b - 1) *w++ = base + uint32_t(__builtin_ctzll(b));
      }
      hi[h] = 0;
    }
    return uint32_t(w - out);
  }

 private:
  std::vector<uint64_t> lo_, hi_;
};

// Rows containing each of V columns (a token repeated inside a row counts
// once) and each row's distinct token count, without sorting any row: a "last
// row seen" tag per column. Blocks of rows count in parallel into private
// arrays, as many blocks as keeps those arrays within a few times the token
// count.
std::vector<uint32_t> DocFreq(const Source* src, int k, uint64_t V, UninitVector<uint32_t>* sizes) {
  uint64_t rows = 0, nnz = 0;
  for (int i = 0; i < k; i++) {
    rows += src[i].rows, nnz += src[i].nnz();
    // Unset: the blocks below write every row's size (a serial zero fill of
    // 4 bytes a row would come first otherwise).
    sizes[i].resize(src[i].rows);
  }
  std::vector<uint32_t> df(V, 0);
  if (nnz == 0) {
    for (int i = 0; i < k; i++) std::fill(sizes[i].begin(), sizes[i].end(), 0u);
    return df;
  }
  const uint64_t blocks = std::max<uint64_t>(
      1, std::min<uint64_t>({uint64_t(NumThreads()), rows, 2 * nnz / std::max<uint64_t>(V, 1), nnz / 16384}));
  // A column's tag and count side by side: one cache line per token where
  // two arrays took two misses (the columns are read at random).
  struct TagCount {
    uint32_t tag, count;
  };
  std::vector<std::vector<TagCount>> counts(blocks);
  ParallelFor(blocks, 1, [&](size_t b, size_t e) {
    for (size_t blk = b; blk < e; blk++) {
      std::vector<TagCount>& tc = counts[blk];
      tc.assign(V, TagCount{0, 0});
      uint32_t now = 0;
      // Rows [lo, hi) of both collections laid end to end.
      const uint64_t lo = rows * blk / blocks, hi = rows * (blk + 1) / blocks;
      uint64_t first = 0;
      for (int i = 0; i < k; first += src[i].rows, i++) {
        const uint64_t rb = std::max(lo, first), re = std::min(hi, first + src[i].rows);
        for (uint64_t g = rb; g < re; g++) {
          if (++now == 0) {  // tags wrapped: forget them all
            for (TagCount& x : tc) x.tag = 0;
            now = 1;
          }
          const uint64_t r = g - first;
          if (g + 2 < re) {  // a later row's columns, requested while this row counts
            const uint32_t* next = src[i].row(r + 2);
            for (uint32_t j = 0, l = std::min<uint32_t>(src[i].len(r + 2), 64); j < l; j++)
              __builtin_prefetch(&tc[next[j]]);
          }
          const uint32_t* t = src[i].row(r);
          uint32_t distinct = 0;
          for (uint32_t j = 0, len = src[i].len(r); j < len; j++) {
            TagCount& x = tc[t[j]];
            const bool fresh = x.tag != now;
            x.tag = now;
            x.count += fresh;
            distinct += fresh;
          }
          sizes[i][r] = distinct;
        }
      }
    }
  });
  ParallelFor(V, 8192, [&](size_t b, size_t e) {
    for (uint64_t blk = 0; blk < blocks; blk++)
      for (size_t v = b; v < e; v++) df[v] += counts[blk][v].count;
  });
  return df;
}

}  // namespace

// Indices of the nonzero keys, by ascending key and then index. Keys below
// kDense (nearly all: keys sum to at most the token count) take a stable
// counting sort, blocks of keys counting and scattering in parallel; the few
// larger ones are sorted as (key, index) pairs and go last. A counting array
// as long as the largest key (a Zipf corpus's commonest token is in most
// rows) would be a serial zero fill and prefix scan of that length.
UninitVector<uint32_t> OrderByKey(const uint32_t* key, uint64_t n) {
  constexpr uint64_t kDense = 4096;
  const uint64_t blocks = std::max<uint64_t>(1, std::min<uint64_t>(4 * NumThreads(), n >> 16));
  std::vector<uint64_t> hist(blocks * kDense, 0);
  std::vector<std::vector<uint64_t>> big(blocks);
  ParallelFor(blocks, 1, [&](size_t b, size_t e) {
    for (size_t blk = b; blk < e; blk++) {
      uint64_t* h = hist.data() + blk * kDense;
      for (uint64_t i = n * blk / blocks, end = n * (blk + 1) / blocks; i < end; i++) {
        const uint32_t k = key[i];
        if (k < kDense)
          h[k]++;
        else
          big[blk].push_back(uint64_t(k) << 32 | i);
      }
    }
  });
  // Key-major, block-minor exclusive starts; key 0 is dropped.
  uint64_t run = 0;
  for (uint64_t k = 1; k < kDense; k++) {
    for (uint64_t blk = 0; blk < blocks; blk++) {
      const uint64_t c = hist[blk * kDense + k];
      hist[blk * kDense + k] = run;
      run += c;
    }
  }
  std::vector<uint64_t> large;
  for (const auto& v : big) large.insert(large.end(), v.begin(), v.end());
  std::sort(large.begin(), large.end());
  UninitVector<uint32_t> order(run + large.size());
  ParallelFor(blocks, 1, [&](size_t b, size_t e) {
    for (size_t blk = b; blk < e; blk++) {
      uint64_t* at = hist.data() + blk * kDense;
      for (uint64_t i = n * blk / blocks, end = n * (blk + 1) / blocks; i < end; i++) {
        const uint32_t k = key[i];
        if (k != 0 && k < kDense) order[at[k]++] = uint32_t(i);
      }
    }
  });
  for (uint64_t j = 0; j < large.size(); j++) order[run + j] = uint32_t(large[j]);
  return order;
}

namespace {

// Rank of each present column: ascending df, ties by column id. Returns the
// ranks used.
uint32_t Rank(const std::vector<uint32_t>& df, std::vector<uint32_t>* rankOf) {
  const UninitVector<uint32_t> order = OrderByKey(df.data(), df.size());
  rankOf->resize(df.size());
  ParallelFor(order.size(), 1 << 16, [&](size_t b, size_t e) {
    for (size_t k = b; k < e; k++) (*rankOf)[order[k]] = uint32_t(k);
  });
  return uint32_t(order.size());
}

// Sorts a short row (ascending, repeats kept) from in to out: an element's
// place is the count of smaller elements plus that of equal ones before it.
// The loops have no data-dependent branches and vectorize, where an
// insertion sort mispredicted about once per element.
void SortShort(const uint32_t* in, uint32_t n, uint32_t* out) {
  for (uint32_t i = 0; i < n; i++) {
    const uint32_t v = in[i];
    uint32_t p = 0;
    for (uint32_t j = 0; j < n; j++) p += in[j] < v;
    for (uint32_t j = 0; j < i; j++) p += in[j] == v;
    out[p] = v;
  }
}

// Rows ordered by (size, input id), empty rows dropped: c->ids and
// c->offsets, and pos[r], the sorted position of input row r (unset for empty
// rows). A stable counting sort by size, blocks of rows counting and
// scattering in parallel; a size's rows are contiguous and all that long, so
// each offset follows from its size's first position with no serial scan.
void OrderRows(const UninitVector<uint32_t>& size, Collection* c, UninitVector<uint32_t>* pos) {
  const uint64_t R = size.size();
  const size_t threads = NumThreads();
  const size_t grain = 1 << 16;
  const uint64_t parts = std::max<uint64_t>(1, (R + grain - 1) / grain);
  std::vector<uint32_t> partMax(parts, 0);
  ParallelFor(parts, 1, [&](size_t b, size_t e) {
    for (size_t q = b; q < e; q++)
      for (uint64_t r = R * q / parts, end = R * (q + 1) / parts; r < end; r++)
        partMax[q] = std::max(partMax[q], size[r]);
  });
  const uint64_t K = uint64_t(*std::max_element(partMax.begin(), partMax.end())) + 1;
  // Per-block histograms stay within about the row count.
  const uint64_t blocks = std::max<uint64_t>(1, std::min<uint64_t>(4 * threads, R / std::max<uint64_t>(K, grain)));
  std::vector<uint64_t> hist(blocks * K, 0);
  ParallelFor(blocks, 1, [&](size_t b, size_t e) {
    for (size_t blk = b; blk < e; blk++) {
      uint64_t* h = hist.data() + blk * K;
      for (uint64_t r = R * blk / blocks, end = R * (blk + 1) / blocks; r < end; r++) h[size[r]]++;
    }
  });
  // Key-major, block-minor exclusive starts; key 0 (empty rows) is dropped.
  std::vector<uint64_t> first(K + 1, 0), tokFirst(K + 1, 0);
  uint64_t run = 0, tok = 0;
  for (uint64_t k = 1; k < K; k++) {
    first[k] = run;
    tokFirst[k] = tok;
    for (uint64_t blk = 0; blk < blocks; blk++) {
      const uint64_t cnt = hist[blk * K + k];
      hist[blk * K + k] = run;
      run += cnt;
    }
    tok += (run - first[k]) * k;
  }
  first[K] = run;
  tokFirst[K] = tok;
  c->ids.resize(run);
  pos->resize(R);
  ParallelFor(blocks, 1, [&](size_t b, size_t e) {
    for (size_t blk = b; blk < e; blk++) {
      uint64_t* at = hist.data() + blk * K;
      for (uint64_t r = R * blk / blocks, end = R * (blk + 1) / blocks; r < end; r++) {
        const uint32_t k = size[r];
        if (k == 0) continue;
        const uint64_t i = at[k]++;
        c->ids[i] = uint32_t(r);
        (*pos)[r] = uint32_t(i);
      }
    }
  });
  c->offsets.resize(run + 1);
  ParallelFor(run, grain, [&](size_t b, size_t e) {
    uint64_t k = uint64_t(std::upper_bound(first.begin() + 1, first.begin() + K, uint64_t(b)) - first.begin()) - 1;
    for (size_t i = b; i < e; i++) {
      while (i >= first[k + 1]) k++;
      c->offsets[i] = tokFirst[k] + (i - first[k]) * k;
    }
  });
  c->offsets[run] = tok;
}

// Rows in (size, input id) order, empty rows dropped.
Collection Build(const Source& s, const UninitVector<uint32_t>& size, const std::vector<uint32_t>& rankOf,
                 uint32_t ranks) {
  Collection c;
  UninitVector<uint32_t> pos;
  OrderRows(size, &c, &pos);
  c.tokens.resize(c.offsets.back());
  // Each row is mapped to ranks, sorted and deduplicated once. Rows are read
  // in input order (sequentially) and each written at its sorted place.
  const bool bitmap = ranks <= RowBitmap::kMaxRanks;
  ParallelFor(s.rows, 1024, [&](size_t b, size_t e) {
    std::unique_ptr<RowBitmap> bits;
    std::vector<uint32_t> tmp, tmp2;
    for (size_t r = b; r < e; r++) {
      // The loads that miss: a later row's ranks (rankOf is read at random)
      // and its sorted place (offsets at a scattered position), requested
      // while this row is sorted.
      if (r + 2 < e) {
        const uint32_t* next = s.row(r + 2);
        for (uint32_t j = 0, l = std::min<uint32_t>(s.len(r + 2), 64); j < l; j++) __builtin_prefetch(&rankOf[next[j]]);
      }
      if (r + 8 < e && size[r + 8] != 0) __builtin_prefetch(&c.offsets[pos[r + 8]]);
      const uint32_t n = size[r];
      if (n == 0) continue;
      const uint32_t* in = s.row(r);
      const uint32_t len = s.len(r);
      uint32_t* out = c.tokens.data() + c.offsets[pos[r]];
      if (bitmap && RowBitmap::Pays(ranks, len)) {
        if (!bits) bits.reset(new RowBitmap(ranks));
        // The slack may run past the row: through tmp.
        tmp.resize(n + RowBitmap::kSlack);
        bits->MapSortUnique(in, len, rankOf.data(), tmp.data());
        std::copy_n(tmp.data(), n, out);
      } else if (len <= 32) {
        uint32_t a[32], o[32];
        for (uint32_t j = 0; j < len; j++) a[j] = rankOf[in[j]];
        SortShort(a, len, o);
        if (len != n) {  // the previous value in a register, not reloaded past a store
          uint32_t w = 1, last = o[0];
          for (uint32_t j = 1; j < len; j++) {
            const uint32_t v = o[j];
            o[w] = v;
            w += v != last;
            last = v;
          }
        }
        std::copy_n(o, n, out);
      } else {
        // Repeats need room for the whole row before they are removed.
        uint32_t* at = len == n ? out : (tmp.resize(len), tmp.data());
        for (uint32_t j = 0; j < len; j++) at[j] = rankOf[in[j]];
        SortUnique(at, len);
        if (at != out) std::copy_n(at, n, out);
      }
    }
  });
  return c;
}

// The sorted distinct ids of a sparse id space, bucketed by their top bits:
// buckets are sorted independently (in parallel) and an id's index is a
// search within its small bucket rather than over the whole vocabulary.
class Vocabulary {
 public:
  Vocabulary(const Source* src, int k) {
    // Both collections' tokens end to end, cut into fixed parts (so the
    // bucket order below does not depend on the thread count): the largest
    // id, then a stable counting scatter by top bits, parts counting and
    // scattering in parallel, where serial passes over every token were.
    uint64_t nnz = 0;
    for (int i = 0; i < k; i++) nnz += src[i].nnz();
    auto token = [&](uint64_t g) { return g < src[0].nnz() ? src[0].tok[g] : src[1].tok[g - src[0].nnz()]; };
    constexpr uint64_t kPart = 1 << 18;
    const uint64_t parts = std::max<uint64_t>(1, (nnz + kPart - 1) / kPart);
    std::vector<uint32_t> partMax(parts, 0);
    ParallelFor(parts, 1, [&](size_t b, size_t e) {
      for (size_t q = b; q < e; q++) {
        uint32_t m = 0;
        for (uint64_t g = q * kPart, end = std::min(nnz, g + kPart); g < end; g++) m = std::max(m, token(g));
        partMax[q] = m;
      }
    });
    const uint32_t maxId = *std::max_element(partMax.begin(), partMax.end());
    // About 16 tokens a bucket, at most 2^16 buckets.
    const uint64_t want = std::min<uint64_t>(uint64_t(1) << 16, std::max<uint64_t>(1, nnz / 16));
    while ((uint64_t(maxId) >> shift_) + 1 > want) shift_++;
    const uint64_t buckets = (uint64_t(maxId) >> shift_) + 1;
    // Per-block histograms: blocks of parts, as many as keeps them within
    // about the token count.
    const uint64_t blocks = std::max<uint64_t>(1, std::min<uint64_t>({4 * NumThreads(), parts, nnz / buckets}));
    std::vector<uint64_t> hist(blocks * buckets, 0);
    auto blockRange = [&](uint64_t blk, uint64_t* lo, uint64_t* hi) {
      *lo = std::min(nnz, parts * blk / blocks * kPart);
      *hi = std::min(nnz, parts * (blk + 1) / blocks * kPart);
    };
    ParallelFor(blocks, 1, [&](size_t b, size_t e) {
      for (size_t blk = b; blk < e; blk++) {
        uint64_t lo, hi;
        blockRange(blk, &lo, &hi);
        uint64_t* h = hist.data() + blk * buckets;
        for (uint64_t g = lo; g < hi; g++) h[Bucket(token(g))]++;
      }
    });
    // Bucket-major, block-minor exclusive starts.
    std::vector<uint64_t> at(buckets + 1, 0);
    uint64_t run = 0;
    for (uint64_t v = 0; v < buckets; v++) {
      at[v] = run;
      for (uint64_t blk = 0; blk < blocks; blk++) {
        const uint64_t c = hist[blk * buckets + v];
        hist[blk * buckets + v] = run;
        run += c;
      }
    }
    at[buckets] = run;
    UninitVector<uint32_t> all(nnz);
    ParallelFor(blocks, 1, [&](size_t b, size_t e) {
      for (size_t blk = b; blk < e; blk++) {
        uint64_t lo, hi;
        blockRange(blk, &lo, &hi);
        uint64_t* fill = hist.data() + blk * buckets;
        for (uint64_t g = lo; g < hi; g++) {
          const uint32_t t = token(g);
          all[fill[Bucket(t)]++] = t;
        }
      }
    });
    std::vector<uint64_t> distinct(buckets + 1, 0);
    ParallelFor(buckets, 64, [&](size_t b, size_t e) {
      for (size_t v = b; v < e; v++) {
        std::sort(all.begin() + at[v], all.begin() + at[v + 1]);
        distinct[v + 1] = uint64_t(std::unique(all.begin() + at[v], all.begin() + at[v + 1]) - (all.begin() + at[v]));
      }
    });
    for (uint64_t b = 0; b < buckets; b++) distinct[b + 1] += distinct[b];
    ids_.resize(distinct[buckets]);  // 2^16 buckets at most: a short serial scan
    ParallelFor(buckets, 64, [&](size_t b, size_t e) {
      for (size_t v = b; v < e; v++)
        std::copy_n(all.begin() + at[v], distinct[v + 1] - distinct[v], ids_.begin() + distinct[v]);
    });
    start_ = std::move(distinct);
  }
  uint64_t size() const { return ids_.size(); }
  // An id's bucket. In 64 bits: a few tokens with large ids make the shift 32,
  // which on a 32-bit id is undefined (on x86 a shift by 0: a bucket far past
  // the table, and a crash).
  uint64_t Bucket(uint32_t id) const { return uint64_t(id) >> shift_; }
  // Index of an id that occurs.
  uint32_t Index(uint32_t id) const {
    const uint64_t b = Bucket(id);
    return uint32_t(std::lower_bound(ids_.begin() + start_[b], ids_.begin() + start_[b + 1], id) - ids_.begin());
  }

 private:
  int shift_ = 0;
  UninitVector<uint32_t> ids_;   // every entry copied in by the constructor
  std::vector<uint64_t> start_;  // per bucket, into ids_
};

}  // namespace

std::shared_ptr<Prepared> Prepare(const CsrView& sets, const CsrView* against, Measure m, double t, StageClock* clock) {
  PhaseLog log("join prepare");
  StageClock local;
  if (!clock) clock = &local;
  clock->Skip();
  auto p = std::make_shared<Prepared>();
  p->bounds = Bounds{m, t};
  p->self = against == nullptr;
  const CsrView* in[2] = {&sets, against};
  const int k = against ? 2 : 1;
  Source src[2];
  uint64_t nnz = 0, cols = 0;
  for (int i = 0; i < k; i++) {
    src[i].rows = in[i]->rows;
    src[i].indptr = in[i]->indptr;
    src[i].base = in[i]->rows ? in[i]->indptr[0] : 0;
    src[i].tok = in[i]->indices + src[i].base;
    nnz += src[i].nnz();
    cols = std::max(cols, in[i]->cols);
  }
  // Per-column arrays when the id space is not much larger than the data;
  // otherwise columns are renumbered through the sorted vocabulary, so a huge
  // `cols` with few tokens stays cheap. Ranks are the same either way.
  uint64_t V = cols;
  if (cols > 4 * nnz + (1u << 20)) {
    const Vocabulary vocab(src, k);
    V = vocab.size();
    for (int i = 0; i < k; i++) {
      src[i].owned.resize(src[i].nnz());
      const uint32_t* raw = src[i].tok;
      ParallelFor(src[i].owned.size(), 4096, [&](size_t b, size_t e) {
        for (size_t j = b; j < e; j++) src[i].owned[j] = vocab.Index(raw[j]);
      });
      src[i].tok = src[i].owned.data();
    }
    log.Mark("vocabulary");
  }
  // Rare tokens first, so prefixes hold the most selective tokens.
  UninitVector<uint32_t> sizes[2];  // distinct tokens per row
  std::vector<uint32_t> rankOf;
  const std::vector<uint32_t> df = DocFreq(src, k, V, sizes);
  log.Mark("docfreq");
  p->vocab = Rank(df, &rankOf);
  log.Mark("rank");
  clock->Mark(kPrepare);
  p->probe = Build(src[0], sizes[0], rankOf, p->vocab);
  if (against) p->index = Build(src[1], sizes[1], rankOf, p->vocab);
  log.Mark("build");
  clock->Mark(kBuild);
  return p;
}

void SortPairs(std::vector<uint32_t>& left, std::vector<uint32_t>& right, std::vector<uint32_t>& overlap,
               std::vector<float>& sim) {
  const size_t n = left.size();
  if (n < 2) return;
  const size_t threads = NumThreads();
  const size_t chunks = std::max<size_t>(1, std::min<size_t>(threads * 4, n / 65536));
  std::vector<uint32_t> chunkMax(chunks, 0);
  ParallelFor(chunks, 1, [&](size_t b, size_t e) {
    for (size_t c = b; c < e; c++)
      chunkMax[c] = *std::max_element(left.begin() + n * c / chunks, left.begin() + n * (c + 1) / chunks);
  });
  const uint32_t maxL = *std::max_element(chunkMax.begin(), chunkMax.end());
  // Sorted position -> (right << 32 | source index): sorting these plain
  // integers beats comparing through an index.
  UninitVector<uint64_t> key(n);
  auto gather = [&](auto& v) {
    UninitVector<typename std::remove_reference_t<decltype(v)>::value_type> out(n);
    ParallelFor(n, 65536, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; i++) out[i] = v[uint32_t(key[i])];
    });
    ParallelFor(n, 65536, [&](size_t b, size_t e) { std::copy(out.begin() + b, out.begin() + e, v.begin() + b); });
  };
  if (uint64_t(maxL) < 4 * uint64_t(n) + 1024) {
    // Counting sort by left, then each left's few rights in parallel: O(n)
    // where a comparison sort of millions of pairs dominated. Blocks of pairs
    // count and scatter in parallel while their histograms stay O(n); block b
    // of bucket v lands after every block's smaller buckets and the earlier
    // blocks' bucket v, so the sort stays stable.
    const uint64_t K = uint64_t(maxL) + 1;
    const size_t blocks = std::max<size_t>(1, std::min<size_t>(threads, n / std::max<uint64_t>(K, 32768)));
    std::vector<uint32_t> hist(blocks * K, 0);
    ParallelFor(blocks, 1, [&](size_t b, size_t e) {
      for (size_t blk = b; blk < e; blk++) {
        uint32_t* h = hist.data() + blk * K;
        for (size_t i = n * blk / blocks, end = n * (blk + 1) / blocks; i < end; i++) h[left[i]]++;
      }
    });
    std::vector<uint64_t> start(K + 1, 0);
    if (blocks == 1) {
      for (uint64_t v = 0; v < K; v++) start[v + 1] = start[v] + hist[v];
      for (uint64_t v = 0; v < K; v++) hist[v] = uint32_t(start[v]);
    } else {
      ParallelFor(K, 4096, [&](size_t b, size_t e) {
        for (size_t v = b; v < e; v++) {
          uint64_t total = 0;
          for (size_t blk = 0; blk < blocks; blk++) total += hist[blk * K + v];
          start[v + 1] = total;
        }
      });
      for (uint64_t v = 0; v < K; v++) start[v + 1] += start[v];
      ParallelFor(K, 4096, [&](size_t b, size_t e) {
        for (size_t v = b; v < e; v++) {
          uint64_t run = start[v];
          for (size_t blk = 0; blk < blocks; blk++) {
            const uint32_t c = hist[blk * K + v];
            hist[blk * K + v] = uint32_t(run);
            run += c;
          }
        }
      });
    }
    ParallelFor(blocks, 1, [&](size_t b, size_t e) {
      for (size_t blk = b; blk < e; blk++) {
        uint32_t* at = hist.data() + blk * K;
        for (size_t i = n * blk / blocks, end = n * (blk + 1) / blocks; i < end; i++)
          key[at[left[i]]++] = uint64_t(right[i]) << 32 | i;
      }
    });
    // Each bucket sorted by right; left and right then follow from the
    // buckets and the keys without gathering.
    ParallelFor(K, 1024, [&](size_t b, size_t e) {
      for (size_t v = b; v < e; v++) {
        std::sort(key.begin() + start[v], key.begin() + start[v + 1]);
        std::fill(left.begin() + start[v], left.begin() + start[v + 1], uint32_t(v));
        for (uint64_t i = start[v]; i < start[v + 1]; i++) right[i] = uint32_t(key[i] >> 32);
      }
    });
  } else {
    std::vector<uint32_t> perm(n);
    std::iota(perm.begin(), perm.end(), 0u);
    std::sort(perm.begin(), perm.end(),
              [&](uint32_t x, uint32_t y) { return left[x] != left[y] ? left[x] < left[y] : right[x] < right[y]; });
    for (size_t i = 0; i < n; i++) key[i] = perm[i];
    gather(left);
    gather(right);
  }
  gather(overlap);
  gather(sim);
}

void Finalize(const Prepared& p, const Hit* hits, size_t count, Chunk* out) {
  const Collection& X = p.probe;
  const Collection& Y = p.indexed();
  // Two parallel passes over blocks of hits: count the accepted ones, then
  // write each block's at its offset, so the output order is the hits' order.
  constexpr size_t kBlock = 16384;
  const size_t blocks = (count + kBlock - 1) / kBlock;
  std::vector<uint64_t> at(blocks + 1, 0);
  auto accept = [&](const Hit& h, double* s) {
    return Accept(p.bounds.m, p.bounds.t, X.size(h.x), Y.size(h.y), h.o, s);
  };
  ParallelFor(blocks, 1, [&](size_t b, size_t e) {
    for (size_t blk = b; blk < e; blk++) {
      uint64_t c = 0;
      double s;
      for (size_t i = blk * kBlock, end = std::min(count, i + kBlock); i < end; i++) c += accept(hits[i], &s);
      at[blk + 1] = c;
    }
  });
  for (size_t blk = 0; blk < blocks; blk++) at[blk + 1] += at[blk];
  const size_t base = out->left.size();
  out->left.resize(base + at[blocks]);
  out->right.resize(base + at[blocks]);
  out->overlap.resize(base + at[blocks]);
  out->similarity.resize(base + at[blocks]);
  ParallelFor(blocks, 1, [&](size_t b, size_t e) {
    for (size_t blk = b; blk < e; blk++) {
      size_t w = base + at[blk];
      for (size_t i = blk * kBlock, end = std::min(count, i + kBlock); i < end; i++) {
        const Hit& h = hits[i];
        double s;
        if (!accept(h, &s)) continue;
        uint32_t l = X.ids[h.x], r = Y.ids[h.y];
        if (p.self && l > r) std::swap(l, r);
        out->left[w] = l;
        out->right[w] = r;
        out->overlap[w] = h.o;
        out->similarity[w] = float(s);
        w++;
      }
    }
  });
  SortPairs(out->left, out->right, out->overlap, out->similarity);
}

}  // namespace join
}  // namespace cusim
