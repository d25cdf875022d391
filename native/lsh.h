// MinHash LSH banding over MinHash signatures: candidate pairs and verified
// duplicate groups. A sample is one 64-bit value: (k, t) for weighted MinHash
// (two words), the hash value for classic MinHash (one word). Backend-neutral:
// the backends differ only in the bucketing step (Bucketer; native/lsh_cpu.cc,
// cuda/lsh.cu), and native/lsh_engine.cc holds what both share.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "common.h"
#include "parallel.h"

namespace cusim {
class RowFile;  // row_file.h

namespace lsh {

// A signature sample (k, t) of an empty row; a row whose samples all equal it
// never becomes a candidate.
inline constexpr uint32_t kSentinel = 0xFFFFFFFFu;
inline constexpr uint32_t kNoGroup = 0xFFFFFFFFu;

// n signatures of `samples` samples of `width` words each (2: weighted
// (k, t); 1: classic), row-major.
struct SigView {
  const uint32_t* data = nullptr;
  uint64_t n = 0;
  uint32_t samples = 0;
  uint32_t width = 2;
  uint64_t words() const { return uint64_t(samples) * width; }
  const uint32_t* row(uint64_t i) const { return data + i * words(); }
};

// Sample s of a row as one value: (k | t << 32) for width 2, the word itself for width 1.
CUSIM_HD uint64_t SampleValue(const uint32_t* row, uint32_t s, uint32_t width) {
  return width == 2 ? uint64_t(row[2 * s]) | (uint64_t(row[2 * s + 1]) << 32) : uint64_t(row[s]);
}

// Band keys (BandKey) of n rows, row-major within consecutive row blocks:
// what the band tables read; a dedup keeps these instead of whole signatures.
// The blocks are read where they are, never joined: a dedup's keys arrive a
// slice at a time (4.8 GB at 100M rows), and one joined copy was the peak of
// its memory.
class KeyView {
 public:
  uint64_t n = 0;
  uint32_t bands = 0;

  KeyView() = default;
  explicit KeyView(uint32_t bands) : bands(bands) {}
  // One block: rows [n, n + rows) at data.
  void Add(const uint64_t* data, uint64_t rows) {
    if (rows == 0) return;
    data_.push_back(data);
    start_.push_back(n);
    n += rows;
    while ((uint64_t(hint_.size()) << kHintShift) < n) hint_.push_back(uint32_t(data_.size() - 1));
  }
  const uint64_t* row(uint64_t i) const {
    // The block holding row i lies between the blocks holding the hint rows
    // around it, and is almost always the first of them (blocks are long).
    const uint64_t j = i >> kHintShift;
    size_t k = hint_[j];
    if (k + 1 < start_.size() && start_[k + 1] <= i) {
      const size_t hi = j + 1 < hint_.size() ? hint_[j + 1] : start_.size() - 1;
      k = size_t(std::upper_bound(start_.begin() + k + 1, start_.begin() + hi + 1, i) - start_.begin()) - 1;
    }
    return data_[k] + (i - start_[k]) * bands;
  }
  size_t parts() const { return data_.size(); }
  const uint64_t* part(size_t k) const { return data_[k]; }
  uint64_t partStart(size_t k) const { return start_[k]; }
  uint64_t partRows(size_t k) const { return (k + 1 < start_.size() ? start_[k + 1] : n) - start_[k]; }

 private:
  static constexpr unsigned kHintShift = 10;
  std::vector<const uint64_t*> data_;
  std::vector<uint64_t> start_;
  // hint_[j]: the block holding row j << kHintShift.
  std::vector<uint32_t> hint_;
};

// A CSR matrix held as consecutive blocks of rows (a dedup's token sets arrive
// block by block and are never joined into one matrix); blocks past a dedup's
// memory budget are kept in a file (row_file.h) and read back row by row.
class RowBlocks {
 public:
  struct Row {
    const uint32_t* indices;
    const float* values;  // null when the block has none
    uint32_t length;
  };
  RowBlocks() = default;
  explicit RowBlocks(const CsrView& m) { Add(m); }
  void Add(const CsrView& m) {
    parts_.push_back(m);
    files_.push_back(nullptr);
    first_.push_back(rows_);
    rows_ += m.rows;
  }
  // Every row of `f` (which is not appended to any more), after those added so far.
  void AddFile(std::shared_ptr<const RowFile> f);
  uint64_t rows() const { return rows_; }
  size_t parts() const { return parts_.size(); }
  // Part k in memory (file parts have no view: rows only).
  bool inFile(size_t k) const { return files_[k] != nullptr; }
  const CsrView& part(size_t k) const { return parts_[k]; }
  uint32_t Length(uint64_t r) const;
  // Row r: a view of memory, or read from its file into *idx and *val (which
  // the returned row then points into; values null where none are kept).
  Row Fetch(uint64_t r, std::vector<uint32_t>* idx, std::vector<float>* val) const;

 private:
  size_t PartOf(uint64_t r) const {
    return parts_.size() > 1 ? size_t(std::upper_bound(first_.begin(), first_.end(), r) - first_.begin()) - 1 : 0;
  }
  std::vector<CsrView> parts_;
  std::vector<std::shared_ptr<const RowFile>> files_;
  std::vector<uint64_t> first_;
  uint64_t rows_ = 0;
};

struct Params {
  uint32_t bands = 0;
  uint32_t rows = 0;  // samples per band; bands * rows <= samples
};

struct Timing {
  double kernelMs = 0;
  double transferMs = 0;
};

CUSIM_HD uint64_t Fmix64(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

// One xxHash64 round: cheap per sample, and the final Fmix64 avalanches.
CUSIM_HD uint64_t HashRound(uint64_t acc, uint64_t v) {
  acc += v * 0xc2b2ae3d27d4eb4full;
  acc = (acc << 31) | (acc >> 33);
  return acc * 0x9e3779b185ebca87ull;
}

// 64-bit key of band `band` of a signature: its r sample values chained
// through xxHash64 rounds, seeded by the band index (tables are per band
// anyway, but distinct seeds keep keys of different bands apart), then Fmix64.
// Colliding keys of unequal bands only add candidates, which verification removes.
CUSIM_HD uint64_t BandKey(const uint32_t* sig, uint32_t band, uint32_t r, uint32_t width) {
  const uint32_t* p = sig + uint64_t(band) * r * width;
  uint64_t h = 0x27d4eb2f165667c5ull + band * 0x9e3779b97f4a7c15ull;
  for (uint32_t i = 0; i < r; ++i) h = HashRound(h, SampleValue(p, i, width));
  return Fmix64(h ^ r);
}

// The band keys of every row (keys: n * bands, row-major) and whether each
// row is empty (every word the sentinel), in parallel.
void BandKeys(const SigView& sig, const Params& p, uint64_t* keys, uint8_t* empty);

inline bool IsEmptyRow(const uint32_t* s, uint32_t samples, uint32_t width) {
  for (uint64_t i = 0; i < uint64_t(width) * samples; ++i)
    if (s[i] != kSentinel) return false;
  return true;
}

// 64-bit fingerprint of a whole signature: equal signatures collide, always.
inline uint64_t FullHash(const uint32_t* s, uint32_t samples, uint32_t width) {
  uint64_t h = 0x13198a2e03707344ull;
  for (uint32_t i = 0; i < samples; ++i) h = HashRound(h, SampleValue(s, i, width));
  return Fmix64(h ^ samples);
}

inline uint64_t Pack(uint32_t a, uint32_t b) { return (uint64_t(a) << 32) | b; }

// Sorts and deduplicates packed (hi << 32 | lo) values, in parallel when large.
void SortUnique(std::vector<uint64_t>& v, uint64_t maxHigh);
// Sorts (key, row) pairs by key, then row; tmp is scratch space.
using Keyed = std::pair<uint64_t, uint32_t>;
void SortKeyed(std::vector<Keyed>& v, std::vector<Keyed>& tmp);
// The pairs gen(i, &pair) yields for i in [0, n) (it returns false for none),
// sorted by key, then row, as SortKeyed leaves them: counted per bucket of the
// key's top bits, scattered straight into their buckets and each bucket
// sorted, all on the pool. No unsorted copy and no scratch of the table's
// size (16 bytes a row: 1.6 GB at 100M rows); gen runs twice per row.
template <class Gen>
void SortedKeyed(size_t n, const Gen& gen, std::vector<Keyed>* out) {
  if (n < (size_t(1) << 16)) {
    out->clear();
    Keyed k;
    for (size_t i = 0; i < n; ++i)
      if (gen(i, &k)) out->push_back(k);
    std::sort(out->begin(), out->end());
    return;
  }
  int bits = 8;  // about 2,048 pairs a bucket, 2^8 .. 2^14 buckets (SortKeyed's)
  while (bits < 14 && (n >> (bits + 11)) > 0) ++bits;
  const size_t nb = size_t(1) << bits;
  const int shift = 64 - bits;
  const size_t chunks = std::max<size_t>(1, std::min<size_t>(NumThreads() * 4, n >> 14));
  const size_t per = (n + chunks - 1) / chunks;
  std::vector<size_t> pos(chunks * nb, 0);
  ParallelFor(chunks, 1, [&](size_t b, size_t e) {
    Keyed k;
    for (size_t c = b; c < e; ++c)
      for (size_t i = c * per; i < std::min(n, (c + 1) * per); ++i)
        if (gen(i, &k)) ++pos[c * nb + (k.first >> shift)];
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
  out->resize(acc);
  ParallelFor(chunks, 1, [&](size_t b, size_t e) {
    Keyed k;
    for (size_t c = b; c < e; ++c) {
      size_t* at = &pos[c * nb];
      for (size_t i = c * per; i < std::min(n, (c + 1) * per); ++i)
        if (gen(i, &k)) (*out)[at[k.first >> shift]++] = k;
    }
  });
  ParallelFor(nb, 1, [&](size_t b, size_t e) {
    for (size_t k = b; k < e; ++k) std::sort(out->begin() + start[k], out->begin() + start[k + 1]);
  });
}
// Cuts a table sorted by key into `chunks` pieces [cut[c], cut[c + 1]) that
// hold whole runs of equal keys, so pieces can be worked on independently.
std::vector<size_t> RunCuts(const std::vector<Keyed>& t, size_t chunks);

// fn(s, t) for each run [s, t) of equal keys in piece c of RunCuts' cut.
template <class Fn>
void ForRuns(const std::vector<Keyed>& t, const std::vector<size_t>& cut, size_t c, const Fn& fn) {
  for (size_t s = cut[c]; s < cut[c + 1];) {
    size_t e = s + 1;
    while (e < cut[c + 1] && t[e].first == t[s].first) ++e;
    fn(s, e);
    s = e;
  }
}

// Parallel two-pass compaction over [0, n): count(b, e) says how many outputs
// a piece yields; alloc(total) sizes the output; write(b, e, at) writes the
// piece's outputs from position `at` on, in order. Returns the total.
template <class Count, class Alloc, class Write>
size_t ChunkedScan(size_t n, const Count& count, const Alloc& alloc, const Write& write) {
  const size_t chunks = std::max<size_t>(1, std::min<size_t>(NumThreads() * 8, n >> 14));
  const size_t per = (n + chunks - 1) / chunks;
  std::vector<size_t> at(chunks + 1, 0);
  ParallelFor(chunks, 1, [&](size_t b, size_t e) {
    for (size_t c = b; c < e; ++c) at[c + 1] = count(std::min(n, c * per), std::min(n, (c + 1) * per));
  });
  for (size_t c = 0; c < chunks; ++c) at[c + 1] += at[c];
  alloc(at[chunks]);
  ParallelFor(chunks, 1, [&](size_t b, size_t e) {
    for (size_t c = b; c < e; ++c) write(std::min(n, c * per), std::min(n, (c + 1) * per), at[c]);
  });
  return at[chunks];
}

// Per packed pair of rows, the fraction of equal samples (float(equal) / float(samples)).
std::vector<float> EstimatePairs(const SigView& sig, const std::vector<uint64_t>& pairs);
// For rows a[k], b[k] of m in verification's canonical form (ascending columns,
// duplicates summed, weights <= 0 or NaN dropped): the weighted Jaccard, and
// whether the rows are equal; with `sets`, each stored column is a member of
// weight 1 (set Jaccard, as classic signatures stand for). Either output may be null.
void RowPairs(const CsrView& m, const uint32_t* a, const uint32_t* b, uint64_t n, bool sets, double* jaccard,
              uint8_t* same);

// The bucketing step of one backend.
class Bucketer {
 public:
  virtual ~Bucketer() = default;
  // Candidate pairs among representative rows: positions (a < b) packed as
  // (a << 32) | b, unique and ascending. `reps` is ascending. When `estimate`
  // is not null it receives, per returned pair, the fraction of equal samples
  // (float(equal) / float(samples), the same rounding on both backends).
  virtual std::vector<uint64_t> RepPairs(const SigView& sig, const std::vector<uint32_t>& reps, const Params& p,
                                         std::vector<float>* estimate, Timing* timing) const = 0;
  // The same pairs from the rows' band keys (keys.row(i)[band] is what
  // BandKey gives row i's signature), so both paths bucket identically.
  virtual std::vector<uint64_t> RepPairsFromKeys(const KeyView& keys, const std::vector<uint32_t>& reps,
                                                 Timing* timing) const = 0;
};

std::unique_ptr<Bucketer> MakeCpuBucketer();
std::unique_ptr<Bucketer> MakeCudaBucketer(int device);

struct PairList {
  std::vector<uint32_t> left, right;
  std::vector<float> similarity;
};

// Every unique pair of inserted rows sharing at least one band bucket, as ids
// (left < right), sorted. ids[i] names row i.
PairList CandidatePairs(const SigView& sig, const uint32_t* ids, const Params& p, const Bucketer& bucketer,
                        const CancelToken& cancel, Timing* timing);

enum class Verify { None, Estimate, Exact };

struct GroupsResult {
  std::vector<uint32_t> group;  // per row, kNoGroup when the row has no verified partner
  uint32_t count = 0;
  PairList pairs;
};

// Groups from verified representative pairs (packed a << 32 | b, a < b) plus an
// edge (rep[i], i) with similarity 1 for every other member of a class
// (rep[i] == kNoGroup: an empty row): union-find labels groups by smallest
// row; the edges come back as id pairs (ids[row]), sorted.
GroupsResult Components(const std::vector<uint32_t>& rep, std::vector<uint64_t> edges, std::vector<float> edgeSim,
                        const uint32_t* ids);

// Connected components of verified candidate pairs. For Exact, row i's vector
// is matrix row ids[i]: its weighted Jaccard, or with `sets` (classic
// signatures) the Jaccard of its distinct columns, weights ignored.
GroupsResult Groups(const SigView& sig, const uint32_t* ids, const Params& p, Verify verify, double threshold,
                    const CsrView* matrix, bool sets, const Bucketer& bucketer, const CancelToken& cancel,
                    Timing* timing);

// Groups() with exact verification, from band keys and the rows' token sets
// (or weighted vectors) instead of signatures: row i has id i; empty[i] marks
// rows whose signature was empty. Classes of interchangeable rows are rows
// with equal vectors (which have equal signatures, hence equal keys), so the
// result equals Groups(sig, identity ids, p, Exact, threshold, matrix, sets).
GroupsResult GroupsFromKeys(const KeyView& keys, const uint8_t* empty, double threshold, const RowBlocks& rows,
                            bool sets, const Bucketer& bucketer, const CancelToken& cancel, Timing* timing);

// For each query, the ids of inserted rows sharing a band bucket with it,
// deduplicated and ascending. indptr has queries + 1 entries.
void Query(const SigView& stored, const uint32_t* ids, const SigView& queries, const Params& p,
           std::vector<uint32_t>* indptr, std::vector<uint32_t>* out);

}  // namespace lsh
}  // namespace cusim
