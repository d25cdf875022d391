// CPU backend: PPJoin (size + prefix + positional filters, suffix verification)
// and AllPairs (size + prefix filters, full verification), multi-threaded over
// probes of the size-sorted collection with one static prefix index.
#include <algorithm>
#include <mutex>

#include "join.h"
#include "parallel.h"

namespace cusim {
namespace join {
namespace {

struct Posting {
  uint32_t set;  // sorted position in the indexed collection
  uint32_t pos;  // position of the token in that set
};

// Per-thread candidate table, dense over the indexed collection and reset
// through the touched list, so each probe costs only what it touches.
struct Scratch {
  std::vector<uint32_t> count, lastX, lastY, touched;
  std::vector<uint32_t> alpha;  // Alpha(a, b) for the probe's partner sizes b, from MinSize(a)
  std::vector<Hit> hits;
  uint64_t candidates = 0;
};
constexpr uint32_t kPruned = 0xffffffffu;

class CpuJoiner final : public Joiner {
 public:
  CpuJoiner(std::shared_ptr<const Prepared> p, Algorithm algo, uint64_t maxChunk)
      : p_(std::move(p)), algo_(algo), maxChunkHits_(maxChunk) {
    stages.Skip();
    BuildIndex();
    stages.Mark(kBuild);
  }

  bool Next(Chunk* out, const CancelToken& cancel) override {
    stages.Skip();
    if (pendingAt_ < pending_.size()) return EmitPending(out);
    const uint64_t n = p_->probe.n();
    if (next_ >= n) return false;
    const uint64_t end = std::min<uint64_t>(n, next_ + step_);
    cancel.report(next_, n);
    std::vector<Scratch*> used;
    std::mutex mu;
    ParallelFor(end - next_, 16, [&](size_t b, size_t e) {
      Scratch* s = Acquire(&mu);
      for (size_t i = b; i < e; i++) {
        if (((i - b) & 63) == 0) cancel.check();
        Probe(next_ + i, s);
        cancel.advance(1);
      }
      std::lock_guard<std::mutex> lock(mu);
      used.push_back(s);
      free_.push_back(s);
    });
    std::vector<Hit> hits;
    for (Scratch* s : pool_) {
      hits.insert(hits.end(), s->hits.begin(), s->hits.end());
      out->candidates += s->candidates;
      s->hits.clear();
      s->candidates = 0;
    }
    // Aim for chunks of a few million pairs whatever the output density.
    if (hits.size() > (4u << 20) && step_ > 64)
      step_ /= 2;
    else if (hits.size() < (1u << 20) && step_ < (1u << 20))
      step_ *= 2;
    next_ = end;
    stages.Mark(kVerify);
    if (hits.size() <= maxChunkHits_) {
      Finalize(*p_, hits.data(), hits.size(), out);
      stages.Mark(kOutput);
      return true;
    }
    // One step's hits past a chunk's cap (a few dense probes) leave in
    // several chunks, so no chunk's arrays approach a typed array's limit.
    pending_ = std::move(hits);
    pendingAt_ = 0;
    return EmitPending(out);
  }

 private:
  Scratch* Acquire(std::mutex* mu) {
    std::lock_guard<std::mutex> lock(*mu);
    if (!free_.empty()) {
      Scratch* s = free_.back();
      free_.pop_back();
      return s;
    }
    owned_.push_back(std::make_unique<Scratch>());
    Scratch* s = owned_.back().get();
    const uint64_t m = p_->indexed().n();
    s->count.assign(m, 0);
    s->lastX.assign(m, 0);
    s->lastY.assign(m, 0);
    pool_.push_back(s);
    return s;
  }

  // Prefix postings per token, each list in sorted-position order. Blocks of
  // sets count and scatter in parallel: block b's part of a list lands after
  // the earlier blocks' parts, so the lists are the serial fill's.
  void BuildIndex() {
    const Collection& Y = p_->indexed();
    const uint64_t n = Y.n(), V = p_->vocab;
    maxSize_ = n ? Y.size(n - 1) : 0;
    listStart_.assign(V + 1, 0);
    if (n == 0) return;
    // Per-block histograms stay within a few times the set count.
    const uint64_t blocks = std::max<uint64_t>(1, std::min<uint64_t>(NumThreads(), n / std::max<uint64_t>(V, 1 << 16)));
    std::vector<uint64_t> at(blocks * V, 0);
    ParallelFor(blocks, 1, [&](size_t b, size_t e) {
      for (size_t blk = b; blk < e; blk++) {
        uint64_t* h = at.data() + blk * V;
        for (uint64_t i = n * blk / blocks, end = n * (blk + 1) / blocks; i < end; i++) {
          const uint32_t* row = Y.row(i);
          for (uint64_t k = 0, L = p_->IndexPrefix(i); k < L; k++) h[row[k]]++;
        }
      }
    });
    ParallelFor(V, 1 << 14, [&](size_t b, size_t e) {
      for (size_t v = b; v < e; v++) {
        uint64_t total = 0;
        for (uint64_t blk = 0; blk < blocks; blk++) total += at[blk * V + v];
        listStart_[v + 1] = total;
      }
    });
    for (uint64_t v = 0; v < V; v++) listStart_[v + 1] += listStart_[v];
    ParallelFor(V, 1 << 14, [&](size_t b, size_t e) {
      for (size_t v = b; v < e; v++) {
        uint64_t run = listStart_[v];
        for (uint64_t blk = 0; blk < blocks; blk++) {
          const uint64_t c = at[blk * V + v];
          at[blk * V + v] = run;
          run += c;
        }
      }
    });
    postings_.resize(listStart_.back());
    ParallelFor(blocks, 1, [&](size_t b, size_t e) {
      for (size_t blk = b; blk < e; blk++) {
        uint64_t* fill = at.data() + blk * V;
        for (uint64_t i = n * blk / blocks, end = n * (blk + 1) / blocks; i < end; i++) {
          const uint32_t* row = Y.row(i);
          for (uint32_t k = 0, L = uint32_t(p_->IndexPrefix(i)); k < L; k++)
            postings_[fill[row[k]]++] = {uint32_t(i), k};
        }
      }
    });
  }

  void Probe(uint64_t xi, Scratch* s) const {
    const Prepared& p = *p_;
    const Bounds& B = p.bounds;
    const Collection& X = p.probe;
    const Collection& Y = p.indexed();
    const uint32_t a = X.size(xi);
    const uint32_t* x = X.row(xi);
    const uint32_t minS = B.MinSize(a), maxS = B.MaxSize(a);
    const uint32_t limit = p.self ? uint32_t(xi) : 0xffffffffu;
    const bool ppjoin = algo_ == Algorithm::PPJoin;
    // The positional filter needs Alpha per posting; a table over the partner
    // sizes that exist saves a division and a ceil per posting.
    const uint32_t hiS = std::min(maxS, maxSize_);
    s->alpha.clear();
    for (uint32_t b = minS; b <= hiS && b >= minS; b++) s->alpha.push_back(B.Alpha(a, b));
    s->touched.clear();
    for (uint32_t k = 0, L = B.ProbePrefix(a); k < L; k++) {
      const Posting* lo = postings_.data() + listStart_[x[k]];
      const Posting* hi = postings_.data() + listStart_[x[k] + 1];
      lo = std::lower_bound(lo, hi, minS, [&](const Posting& e, uint32_t v) { return Y.size(e.set) < v; });
      for (const Posting* e = lo; e < hi; e++) {
        const uint32_t y = e->set;
        if (y >= limit) break;  // self-join: only earlier sets (lists are in position order)
        const uint32_t b = Y.size(y);
        if (b > maxS) break;
        uint32_t& c = s->count[y];
        if (c == kPruned) continue;
        if (c == 0) s->touched.push_back(y);
        if (ppjoin && c + 1 + std::min(a - 1 - k, b - 1 - e->pos) < s->alpha[b - minS]) {
          c = kPruned;
          continue;
        }
        c++;
        s->lastX[y] = k;
        s->lastY[y] = e->pos;
      }
    }
    for (uint32_t y : s->touched) {
      uint32_t c = s->count[y];
      s->count[y] = 0;
      if (c == kPruned) continue;
      s->candidates++;
      const uint32_t b = Y.size(y);
      const uint32_t need = s->alpha[b - minS];
      const uint32_t* yr = Y.row(y);
      // PPJoin: every common token up to the last prefix match is counted, so
      // only the suffixes after it need merging. AllPairs merges from scratch.
      uint32_t i = ppjoin ? s->lastX[y] + 1 : 0, j = ppjoin ? s->lastY[y] + 1 : 0, o = ppjoin ? c : 0;
      while (i < a && j < b) {
        if (o + std::min(a - i, b - j) < need) break;
        if (x[i] == yr[j]) {
          o++;
          i++;
          j++;
        } else if (x[i] < yr[j]) {
          i++;
        } else {
          j++;
        }
      }
      if (o >= need) s->hits.push_back({uint32_t(xi), y, o});
    }
  }

  std::shared_ptr<const Prepared> p_;
  Algorithm algo_;
  std::vector<uint64_t> listStart_;
  std::vector<Posting> postings_;
  uint32_t maxSize_ = 0;
  std::vector<std::unique_ptr<Scratch>> owned_;
  std::vector<Scratch*> pool_, free_;
  uint64_t next_ = 0;
  uint64_t step_ = 4096;
  uint64_t maxChunkHits_;
  std::vector<Hit> pending_;
  size_t pendingAt_ = 0;

  bool EmitPending(Chunk* out) {
    const size_t take = size_t(std::min<uint64_t>(maxChunkHits_, pending_.size() - pendingAt_));
    Finalize(*p_, pending_.data() + pendingAt_, take, out);
    pendingAt_ += take;
    if (pendingAt_ == pending_.size()) std::vector<Hit>().swap(pending_), pendingAt_ = 0;
    stages.Mark(kOutput);
    return true;
  }
};

}  // namespace

std::unique_ptr<Joiner> MakeCpuJoiner(std::shared_ptr<const Prepared> p, Algorithm algo, uint64_t maxChunk) {
  return std::make_unique<CpuJoiner>(std::move(p), algo, maxChunk);
}

}  // namespace join
}  // namespace cusim
