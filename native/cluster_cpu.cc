// Streaming clustering's CPU scorer: a term -> clusters inverted index, as in
// the paper's CPU baseline.
#include <algorithm>
#include <unordered_map>
#include <vector>

#include "cluster.h"
#include "parallel.h"

namespace cusim {
namespace cluster {
namespace {

class CpuScorer final : public Scorer {
 public:
  CpuScorer(const Config& cfg, const Rows& rows) : cfg_(cfg), rows_(rows) {}

  uint64_t ScoreOne(const uint32_t* terms, const float* w, uint32_t n, uint64_t time) override {
    return Score(terms, w, n, time, &scratch_);
  }

  void ScoreBatch(const Docs& docs, uint64_t begin, uint64_t end, const BatchPostings&, uint64_t time0,
                  uint64_t* keys) override {
    // Documents are independent against a fixed set of rows: score them in
    // parallel, each thread with its own accumulator.
    ParallelFor(end - begin, 1, [&](size_t b, size_t e) {
      static thread_local Scratch s;
      for (size_t i = b; i < e; i++) {
        const uint64_t d = begin + i;
        const uint64_t p = docs.ptr[d], q = docs.ptr[d + 1];
        keys[i] = Score(docs.terms.data() + p, docs.weights.data() + p, uint32_t(q - p), time0 + i, &s);
      }
    });
  }

  // Every posting's position is tracked per (cluster, slot), so rewriting a
  // row costs O(K log K) whatever the lengths of its terms' lists.
  void RowChanged(uint32_t c, const uint32_t* oldTerms, uint32_t oldLen) override {
    const uint32_t K = rows_.K;
    if (pos_.size() < rows_.count * K) pos_.resize(rows_.count * K, 0);
    for (uint32_t k = 0; k < oldLen; k++) {
      auto& l = postings_[oldTerms[k]];
      const uint32_t i = pos_[uint64_t(c) * K + k];
      const Posting moved = l.back();
      l[i] = moved;
      l.pop_back();
      if (i < l.size()) pos_[uint64_t(moved.c) * K + Slot(moved.c, oldTerms[k])] = i;
    }
    Insert(c);
  }

  void Rebuild() override {
    postings_.clear();
    pos_.assign(rows_.count * rows_.K, 0);
    for (uint64_t c = 0; c < rows_.count; c++) Insert(uint32_t(c));
  }

  uint64_t BatchSize() const override { return 64 * NumThreads(); }
  // Batch scoring wins only through threads; alone it adds resolution work.
  bool PreferBatch(uint64_t n) const override { return NumThreads() > 1 && n >= 8; }

 private:
  struct Scratch {
    std::vector<uint64_t> acc;
    std::vector<uint8_t> seen;
    std::vector<uint32_t> touched;
  };

  struct Posting {
    uint32_t c;
    float w;
  };

  // Slot of term t in row c (present by construction): rows are short and sorted.
  uint32_t Slot(uint32_t c, uint32_t t) const {
    const uint32_t* b = rows_.terms.data() + uint64_t(c) * rows_.K;
    return uint32_t(std::lower_bound(b, b + rows_.len[c], t) - b);
  }

  void Insert(uint32_t c) {
    const uint64_t b = uint64_t(c) * rows_.K;
    for (uint32_t k = 0; k < rows_.len[c]; k++) {
      const uint32_t t = rows_.terms[b + k];
      auto& l = postings_[t];
      pos_[b + k] = uint32_t(l.size());
      l.push_back({c, rows_.weights[b + k]});
    }
  }

  uint64_t Score(const uint32_t* terms, const float* w, uint32_t n, uint64_t time, Scratch* s) const {
    if (s->acc.size() < rows_.count) {
      s->acc.resize(rows_.count, 0);
      s->seen.resize(rows_.count, 0);
    }
    s->touched.clear();
    for (uint32_t i = 0; i < n; i++) {
      auto it = postings_.find(terms[i]);
      if (it == postings_.end()) continue;
      for (const Posting& p : it->second) {
        if (!s->seen[p.c]) {
          s->seen[p.c] = 1;
          s->touched.push_back(p.c);
        }
        s->acc[p.c] += FixedProduct(w[i], p.w);
      }
    }
    uint64_t best = 0;
    for (uint32_t c : s->touched) {
      const float sim = FixedToFloat(s->acc[c]);
      s->acc[c] = 0;
      s->seen[c] = 0;
      const bool active = cfg_.maxAge == kNoDecay || time - rows_.lastSeen[c] <= cfg_.maxAge;
      if (active && double(sim) > cfg_.threshold) best = std::max(best, PackKey(sim, c));
    }
    return best;
  }

  const Config& cfg_;
  const Rows& rows_;
  // Hashed, not indexed by term: term ids may be sparse hashes up to 2^32.
  std::unordered_map<uint32_t, std::vector<Posting>> postings_;
  std::vector<uint32_t> pos_;  // (cluster, slot) -> index in its term's postings
  Scratch scratch_;
};

}  // namespace

std::unique_ptr<Scorer> MakeCpuScorer(const Config& cfg, const Rows& rows) {
  return std::make_unique<CpuScorer>(cfg, rows);
}

}  // namespace cluster
}  // namespace cusim
