// Streaming clustering: the host-side engine (exact state, sequential and
// micro-batch resolution, save/load) that both backends' scorers serve.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <unordered_set>

#include <unistd.h>

#include "cluster.h"
#include "parallel.h"
#include "phase_log.h"
#include "persist.h"

namespace cusim {
namespace cluster {
namespace {

// Top-k of (term, value) by value descending, ties to the lower term; result
// sorted by term. Norm summed in double in ascending term order.
template <typename V>
uint32_t TopKNormalized(std::vector<std::pair<uint32_t, V>>& e, uint32_t k, uint32_t* outT, float* outW) {
  auto better = [](const std::pair<uint32_t, V>& a, const std::pair<uint32_t, V>& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  };
  if (e.size() > k) {
    std::nth_element(e.begin(), e.begin() + k, e.end(), better);
    e.resize(k);
  }
  std::sort(e.begin(), e.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  double ss = 0;
  for (auto& x : e) ss += double(x.second) * double(x.second);
  const double norm = std::sqrt(ss);
  for (size_t i = 0; i < e.size(); i++) {
    outT[i] = e[i].first;
    outW[i] = float(double(e[i].second) / norm);
  }
  return uint32_t(e.size());
}

// Fixed-point dot of two term-ascending sparse vectors (order-free, see FixedProduct).
uint64_t MergeDot(const uint32_t* t, const float* w, uint32_t n, const uint32_t* ct, const float* cw, uint32_t m) {
  uint64_t acc = 0;
  for (uint32_t i = 0, j = 0; i < n && j < m;) {
    if (t[i] < ct[j])
      i++;
    else if (ct[j] < t[i])
      j++;
    else
      acc += FixedProduct(w[i++], cw[j++]);
  }
  return acc;
}

}  // namespace

void BatchPostings::Build(const Docs& docs, uint64_t begin, uint64_t end) {
  const uint64_t p0 = docs.ptr[begin], np = docs.ptr[end] - p0;
  uint32_t bits = 1;
  while ((uint64_t(1) << bits) < 2 * np) bits++;
  const uint32_t mask = uint32_t((uint64_t(1) << bits) - 1);
  slots_.assign(uint64_t(1) << bits, kNone);
  terms.clear();
  off.assign(1, 0);  // off[u + 1] counts term u's entries until the prefix sum below
  entryTerm.resize(np);
  for (uint64_t p = 0; p < np; p++) {
    const uint32_t t = docs.terms[p0 + p];
    uint32_t i = HashSlot(t, bits);
    while (slots_[i] != kNone && terms[slots_[i]] != t) i = (i + 1) & mask;
    if (slots_[i] == kNone) {
      slots_[i] = uint32_t(terms.size());
      terms.push_back(t);
      off.push_back(0);
    }
    entryTerm[p] = slots_[i];
    off[slots_[i] + 1]++;
  }
  for (size_t u = 0; u < terms.size(); u++) off[u + 1] += off[u];
  std::vector<uint32_t>& cursor = slots_;  // reused: the hash is no longer needed
  cursor.assign(off.begin(), off.end() - 1);
  doc.resize(np);
  w.resize(np);
  for (uint64_t d = begin; d < end; d++)
    for (uint64_t p = docs.ptr[d]; p < docs.ptr[d + 1]; p++) {
      const uint32_t q = cursor[entryTerm[p - p0]]++;
      doc[q] = uint32_t(d - begin);
      w[q] = docs.weights[p];
    }
}

// ---- engine -------------------------------------------------------------------
Engine::Engine(const Config& cfg, Backend backend, int device, const Tuning& tuning)
    : cfg_(cfg), backend_(backend), device_(device), tuning_(tuning) {
  rows_.K = cfg.maxTerms;
  Reserve(cfg.capacity);
  MakeScorer();
}

// Host rows are reserved up front (virtual memory: pages are touched only as
// rows arrive), so a stream never pays a reallocation that copies every row
// (at 1.6M clusters that copy was ~0.45 s, inside the first timed add).
void Engine::Reserve(uint64_t cap) {
  // Beyond 2^22 rows, or a quarter of the host's memory, vectors double as usual.
  const uint64_t physical = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGE_SIZE));
  cap = std::min<uint64_t>({cap, uint64_t(1) << 22, physical / 4 / (uint64_t(rows_.K) * 8 + 64)});
  rows_.terms.reserve(cap * rows_.K);
  rows_.weights.reserve(cap * rows_.K);
  rows_.len.reserve(cap);
  rows_.lastSeen.reserve(cap);
  sums_.reserve(cap);
  members_.reserve(cap);
}

void Engine::MakeScorer() {
  rows_.K = cfg_.maxTerms;
  scorer_ = backend_ == Backend::Cuda ? MakeCudaScorer(cfg_, rows_, device_, tuning_) : MakeCpuScorer(cfg_, rows_);
}

bool Engine::active(uint32_t c, uint64_t t) const {
  return cfg_.maxAge == kNoDecay || t - rows_.lastSeen[c] <= cfg_.maxAge;
}

void Engine::Prepare(const CsrView& m, Docs* docs) const {
  const uint32_t K = cfg_.maxTerms;
  docs->ptr.assign(m.rows + 1, 0);
  std::vector<uint32_t> lens(m.rows);
  ParallelFor(m.rows, 256, [&](size_t b, size_t e) {
    for (size_t r = b; r < e; r++) {
      uint32_t n = 0;
      for (uint32_t p = m.indptr[r]; p < m.indptr[r + 1]; p++) n += (m.values ? m.values[p] : 1.f) > 0.f;
      lens[r] = std::min(n, K);
    }
  });
  for (uint64_t r = 0; r < m.rows; r++) docs->ptr[r + 1] = docs->ptr[r] + lens[r];
  docs->terms.resize(docs->ptr[m.rows]);
  docs->weights.resize(docs->ptr[m.rows]);
  ParallelFor(m.rows, 256, [&](size_t b, size_t e) {
    std::vector<std::pair<uint32_t, float>> tmp;
    for (size_t r = b; r < e; r++) {
      tmp.clear();
      for (uint32_t p = m.indptr[r]; p < m.indptr[r + 1]; p++) {
        const float v = m.values ? m.values[p] : 1.f;
        if (v > 0.f) tmp.emplace_back(m.indices[p], v);
      }
      TopKNormalized(tmp, K, docs->terms.data() + docs->ptr[r], docs->weights.data() + docs->ptr[r]);
    }
  });
}

uint64_t Engine::Dot(const uint32_t* t, const float* w, uint32_t n, uint32_t c) const {
  return MergeDot(t, w, n, rows_.terms.data() + uint64_t(c) * rows_.K, rows_.weights.data() + uint64_t(c) * rows_.K,
                  rows_.len[c]);
}

void Engine::SetRowFromSum(uint32_t c) {
  std::vector<std::pair<uint32_t, double>> e;
  e.reserve(sums_[c].size());
  for (auto& s : sums_[c]) e.emplace_back(s.term, s.v);
  rows_.len[c] = TopKNormalized(e, rows_.K, rows_.terms.data() + uint64_t(c) * rows_.K,
                                rows_.weights.data() + uint64_t(c) * rows_.K);
}

uint32_t Engine::Apply(const uint32_t* t, const float* w, uint32_t n, uint64_t key, uint64_t time, bool* created) {
  const uint32_t K = rows_.K;
  if (key == 0) {
    if (rows_.count >= kNone) throw Error(kInvalidArgument, "too many clusters (2^32 - 1)", "RangeError");
    const uint32_t c = uint32_t(rows_.count++);
    rows_.terms.resize(rows_.count * K, kNone);
    rows_.weights.resize(rows_.count * K, 0.f);
    rows_.len.push_back(n);
    rows_.lastSeen.push_back(time);
    std::copy(t, t + n, rows_.terms.begin() + uint64_t(c) * K);
    std::copy(w, w + n, rows_.weights.begin() + uint64_t(c) * K);
    std::vector<SumEntry> s(n);
    for (uint32_t i = 0; i < n; i++) s[i] = {t[i], double(w[i])};
    sums_.push_back(std::move(s));
    members_.push_back(1);
    scorer_->RowChanged(c, nullptr, 0);
    *created = true;
    return c;
  }
  const uint32_t c = KeyId(key);
  Remember(c);
  auto& sum = sums_[c];
  std::vector<SumEntry> merged;
  merged.reserve(sum.size() + n);
  size_t i = 0, j = 0;
  while (i < sum.size() || j < n) {
    if (j == n || (i < sum.size() && sum[i].term < t[j]))
      merged.push_back(sum[i++]);
    else if (i == sum.size() || t[j] < sum[i].term)
      merged.push_back({t[j], double(w[j])}), j++;
    else
      merged.push_back({t[j], sum[i].v + double(w[j])}), i++, j++;
  }
  sum.swap(merged);
  members_[c]++;
  rows_.lastSeen[c] = time;
  const uint32_t oldLen = rows_.len[c];
  std::vector<uint32_t> old(rows_.terms.begin() + uint64_t(c) * K, rows_.terms.begin() + uint64_t(c) * K + oldLen);
  std::fill(rows_.terms.begin() + uint64_t(c) * K, rows_.terms.begin() + uint64_t(c + 1) * K, kNone);
  std::fill(rows_.weights.begin() + uint64_t(c) * K, rows_.weights.begin() + uint64_t(c + 1) * K, 0.f);
  SetRowFromSum(c);
  scorer_->RowChanged(c, old.data(), oldLen);
  *created = false;
  return c;
}

// Pre-add copies of the clusters an add changed, taken as each is first
// changed, plus the cluster count and clock: an add that throws puts them
// back, drops the clusters it created and rebuilds the scorer's index, so an
// aborted add leaves nothing behind.
struct Engine::Undo {
  struct Row {
    uint32_t c, members, len;
    uint64_t lastSeen;
    std::vector<SumEntry> sum;
    std::vector<uint32_t> terms;
    std::vector<float> weights;
  };
  uint64_t count = 0, time = 0;
  std::vector<Row> rows;
  std::unordered_set<uint32_t> saved;
};

void Engine::Remember(uint32_t c) {
  if (!undo_ || c >= undo_->count || !undo_->saved.insert(c).second) return;
  const uint64_t b = uint64_t(c) * rows_.K;
  undo_->rows.push_back({c, members_[c], rows_.len[c], rows_.lastSeen[c], sums_[c],
                         std::vector<uint32_t>(rows_.terms.begin() + b, rows_.terms.begin() + b + rows_.K),
                         std::vector<float>(rows_.weights.begin() + b, rows_.weights.begin() + b + rows_.K)});
}

void Engine::Rollback(Undo& u) {
  const uint32_t K = rows_.K;
  for (auto& r : u.rows) {
    const uint64_t b = uint64_t(r.c) * K;
    sums_[r.c] = std::move(r.sum);
    members_[r.c] = r.members;
    rows_.len[r.c] = r.len;
    rows_.lastSeen[r.c] = r.lastSeen;
    std::copy(r.terms.begin(), r.terms.end(), rows_.terms.begin() + b);
    std::copy(r.weights.begin(), r.weights.end(), rows_.weights.begin() + b);
  }
  rows_.count = u.count;
  rows_.terms.resize(u.count * K);
  rows_.weights.resize(u.count * K);
  rows_.len.resize(u.count);
  rows_.lastSeen.resize(u.count);
  sums_.resize(u.count);
  members_.resize(u.count);
  time_ = u.time;
  try {
    scorer_->Rebuild();
  } catch (...) {
    stale_ = true;  // the host state is right; the scorer is rebuilt before it is used again
  }
}

uint64_t Engine::bytes() const {
  uint64_t b = (rows_.terms.capacity() + rows_.weights.capacity() + rows_.len.capacity() + members_.capacity()) * 4 +
               rows_.lastSeen.capacity() * 8 + sums_.capacity() * sizeof(std::vector<SumEntry>);
  for (const auto& s : sums_) b += s.capacity() * sizeof(SumEntry);
  return b;
}

void Engine::Add(const CsrView& m, Mode mode, const CancelToken& cancel, AddOutput* out) {
  if (stale_) {
    scorer_->Rebuild();
    stale_ = false;
  }
  Undo u;
  u.count = rows_.count;
  u.time = time_;
  undo_ = &u;
  try {
    AddAll(m, mode, cancel, out);
  } catch (...) {
    undo_ = nullptr;
    Rollback(u);
    throw;
  }
  undo_ = nullptr;
}

void Engine::AddAll(const CsrView& m, Mode mode, const CancelToken& cancel, AddOutput* out) {
  Docs docs;
  const auto tPrep = std::chrono::steady_clock::now();
  Prepare(m, &docs);
  const double prepMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - tPrep).count();
  const uint64_t n = docs.size();
  out->cluster.assign(n, kNone);
  out->similarity.assign(n, 0.f);
  out->created.assign(n, 0);
  const bool batch = mode == Mode::Batch || (mode == Mode::Auto && scorer_->PreferBatch(n));
  out->batched = batch;
  auto commit = [&](uint64_t d, uint64_t key) {
    const uint64_t p = docs.ptr[d];
    const uint32_t len = uint32_t(docs.ptr[d + 1] - p);
    const uint64_t t = time_++;
    if (len == 0) return;  // empty documents take a time step but no cluster
    bool created = false;
    out->cluster[d] = Apply(docs.terms.data() + p, docs.weights.data() + p, len, key, t, &created);
    out->created[d] = created;
    out->similarity[d] = created ? 0.f : KeySim(key);
  };
  if (!batch) {
    for (uint64_t d = 0; d < n; d++) {
      if ((d & 63) == 0) {
        cancel.check();
        cancel.report(d, n);
      }
      const uint64_t p = docs.ptr[d];
      const uint32_t len = uint32_t(docs.ptr[d + 1] - p);
      commit(d, len ? scorer_->ScoreOne(docs.terms.data() + p, docs.weights.data() + p, len, time_) : 0);
    }
    out->timing = scorer_->TakeTiming();
    return;
  }
  // Micro-batch: score B documents against the rows at batch start, then
  // resolve in order. For document i, rows untouched by earlier documents in
  // the batch still score as computed; the touched ones (created or updated)
  // are re-scored on the host. If the batch best itself was touched, the
  // best among the untouched rows is unknown, so the document is re-scored in
  // full against the current rows. Either way the result equals sequential.
  // A cluster created in the batch and not touched since is exactly its
  // creating document, so its score against document i is the doc-doc dot,
  // computed for all pairs in parallel before the (sequential) resolution.
  const uint64_t B = std::max<uint64_t>(1, scorer_->BatchSize());
  std::vector<uint64_t> keys(B);
  const uint64_t maxDocs = std::min(B, n);                  // a small add allocates only what it uses
  std::vector<uint64_t> pair(maxDocs * (maxDocs - 1) / 2);  // docs (i, j < i) of a batch at i(i-1)/2 + j (0 if n = 0)
  BatchPostings post;
  double prof[4] = {0, 0, 0, 0};
  std::vector<uint64_t> stamp;              // batch number in which a cluster last changed
  std::vector<uint32_t> from;               // batch doc that created the cluster, kNone once updated
  std::vector<uint32_t> updated;            // clusters updated (not just created) in this batch, each once
  std::vector<uint32_t> cand(pair.size());  // per doc i (same layout as pair): docs j < i whose dot passes T
  std::vector<uint32_t> nCand(maxDocs);
  uint64_t batchNo = 0;
  for (uint64_t b = 0; b < n; b += B) {
    cancel.check();
    cancel.report(b, n);
    const uint64_t e = std::min(n, b + B);
    const auto c0 = std::chrono::steady_clock::now();
    post.Build(docs, b, e);
    const auto c1 = std::chrono::steady_clock::now();
    scorer_->ScoreBatch(docs, b, e, post, time_, keys.data());
    const auto c2 = std::chrono::steady_clock::now();
    // Doc-doc dots through the batch's postings: work is the number of shared
    // (term, doc pair) entries, and doc i writes only its own row of `pair`.
    ParallelFor(e - b, 16, [&](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; i++) {
        uint64_t* row = pair.data() + i * (i - 1) / 2;
        std::fill(row, row + i, 0);
        const uint64_t p0 = docs.ptr[b], pi = docs.ptr[b + i];
        for (uint64_t p = pi; p < docs.ptr[b + i + 1]; p++) {
          const uint32_t u = post.entryTerm[p - p0];
          const float wi = docs.weights[p];
          for (uint32_t q = post.off[u]; q < post.off[u + 1] && post.doc[q] < i; q++)
            row[post.doc[q]] += FixedProduct(wi, post.w[q]);
        }
        // Only pairs above T can decide a join: resolution visits these
        // instead of every cluster created earlier in the batch (~B^2/2
        // visits per batch, most of the v2 resolve time).
        uint32_t* cl = cand.data() + i * (i - 1) / 2;
        uint32_t nc = 0;
        for (uint32_t j = 0; j < i; j++)
          if (row[j] != 0 && double(FixedToFloat(row[j])) > cfg_.threshold) cl[nc++] = j;
        nCand[i] = nc;
      }
    });
    const auto c3 = std::chrono::steady_clock::now();
    prof[0] += std::chrono::duration<double, std::milli>(c1 - c0).count();
    prof[1] += std::chrono::duration<double, std::milli>(c2 - c1).count();
    prof[2] += std::chrono::duration<double, std::milli>(c3 - c2).count();
    batchNo++;
    updated.clear();
    for (uint64_t d = b; d < e; d++) {
      const uint64_t i = d - b;
      const uint64_t p = docs.ptr[d];
      const uint32_t len = uint32_t(docs.ptr[d + 1] - p);
      const uint32_t* t = docs.terms.data() + p;
      const float* w = docs.weights.data() + p;
      uint64_t key = keys[i];
      if (len && key != 0 && KeyId(key) < stamp.size() && stamp[KeyId(key)] == batchNo) {
        key = scorer_->ScoreOne(t, w, len, time_);
        out->rescored++;
      } else if (len) {
        // Clusters changed in this batch: those created by an earlier batch
        // document j and untouched since score pair(i, j) (only pairs above
        // T can matter); the updated ones are merge-dotted.
        const uint32_t* cl = cand.data() + i * (i - 1) / 2;
        for (uint32_t k = 0; k < nCand[i]; k++) {
          const uint32_t j = cl[k];
          const uint32_t c = out->cluster[b + j];
          if (c == kNone || !out->created[b + j] || from[c] != j || !active(c, time_)) continue;
          const float sim = FixedToFloat(pair[i * (i - 1) / 2 + j]);
          key = std::max(key, PackKey(sim, c));
        }
        for (uint32_t c : updated) {
          if (!active(c, time_)) continue;
          const uint64_t acc = Dot(t, w, len, c);
          const float sim = FixedToFloat(acc);
          if (acc != 0 && double(sim) > cfg_.threshold) key = std::max(key, PackKey(sim, c));
        }
      }
      commit(d, key);
      const uint32_t c = out->cluster[d];
      if (c != kNone) {
        if (stamp.size() <= c) {
          stamp.resize(uint64_t(c) + 1, 0);
          from.resize(uint64_t(c) + 1, kNone);
        }
        if (!out->created[d] && (stamp[c] != batchNo || from[c] != kNone)) updated.push_back(c);
        stamp[c] = batchNo;
        from[c] = out->created[d] ? uint32_t(i) : kNone;
      }
    }
    prof[3] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c3).count();
  }
  // Host/device split of a micro-batch add (stderr, CUSIM_PROFILE=1).
  if (PhaseLog::Enabled())
    std::fprintf(stderr,
                 "cluster batch: %llu docs, prepare %.1f ms, postings %.1f ms, score %.1f ms, pair dots %.1f ms, "
                 "resolve %.1f ms\n",
                 (unsigned long long)n, prepMs, prof[0], prof[1], prof[2], prof[3]);
  out->timing = scorer_->TakeTiming();
}

// ---- persistence ----------------------------------------------------------------
// Container kind "stream-cluster", version 1 (docs/persistence.md): one section
// per column, so every size is known from PARM before anything is allocated.
namespace {
constexpr uint32_t kParm = persist::Tag("PARM"), kMemb = persist::Tag("MEMB"), kSeen = persist::Tag("SEEN"),
                   kRlen = persist::Tag("RLEN"), kRtrm = persist::Tag("RTRM"), kRwgt = persist::Tag("RWGT"),
                   kSlen = persist::Tag("SLEN"), kStrm = persist::Tag("STRM"), kSval = persist::Tag("SVAL");
}  // namespace

void Engine::Save(persist::Writer& w) const {
  const uint64_t count = rows_.count, K = rows_.K;
  uint64_t rowEntries = 0, sumEntries = 0;
  std::vector<uint64_t> slen(count);
  for (uint64_t c = 0; c < count; c++) {
    rowEntries += rows_.len[c];
    slen[c] = sums_[c].size();
    sumEntries += slen[c];
  }
  persist::FieldWriter f;
  f.Put(cfg_.threshold)
      .Put(cfg_.maxTerms)
      .Put(uint32_t(0))
      .Put(cfg_.maxAge)
      .Put(time_)
      .Put(count)
      .Put(rowEntries)
      .Put(sumEntries);
  w.Section(kParm, f.bytes().data(), f.bytes().size());
  w.Section(kMemb, members_.data(), count * 4);
  w.Section(kSeen, rows_.lastSeen.data(), count * 8);
  w.Section(kRlen, rows_.len.data(), count * 4);
  w.Begin(kRtrm);
  for (uint64_t c = 0; c < count; c++) w.Append(rows_.terms.data() + c * K, rows_.len[c] * 4);
  w.End();
  w.Begin(kRwgt);
  for (uint64_t c = 0; c < count; c++) w.Append(rows_.weights.data() + c * K, rows_.len[c] * 4);
  w.End();
  w.Section(kSlen, slen.data(), count * 8);
  w.Begin(kStrm);
  for (uint64_t c = 0; c < count; c++)
    for (const auto& e : sums_[c]) w.Append(&e.term, 4);
  w.End();
  w.Begin(kSval);
  for (uint64_t c = 0; c < count; c++)
    for (const auto& e : sums_[c]) w.Append(&e.v, 8);
  w.End();
}

void Engine::Load(const persist::Reader& r) {
  const auto parm = r.ReadSmall(kParm, 256);
  persist::Fields f(parm, r);
  Config cfg;
  cfg.threshold = f.Get<double>();
  cfg.maxTerms = f.Get<uint32_t>();
  const uint32_t reserved = f.Get<uint32_t>();
  cfg.maxAge = f.Get<uint64_t>();
  const uint64_t time = f.Get<uint64_t>(), count = f.Get<uint64_t>(), rowEntries = f.Get<uint64_t>(),
                 sumEntries = f.Get<uint64_t>();
  f.End();
  if (!(cfg.threshold >= 0 && cfg.threshold <= 1)) r.Bad("threshold is not in [0, 1]");
  if (cfg.maxTerms == 0 || cfg.maxTerms > kMaxTerms) r.Bad("maxTerms is not in [1, 1024]");
  if (reserved != 0) r.Bad("bad parameters");
  if (count >= kNone || count > time) r.Bad("more clusters than documents");
  if (rowEntries > count * cfg.maxTerms) r.Bad("more row entries than clusters * maxTerms");
  // Every size now follows from PARM; the sections must match before anything is allocated.
  const std::pair<uint32_t, uint64_t> want[] = {{kMemb, count * 4},      {kSeen, count * 8},      {kRlen, count * 4},
                                                {kRtrm, rowEntries * 4}, {kRwgt, rowEntries * 4}, {kSlen, count * 8},
                                                {kStrm, sumEntries * 4}, {kSval, sumEntries * 8}};
  if (sumEntries > (uint64_t(1) << 40)) r.Bad("sum entry count out of range");
  for (const auto& [tag, bytes] : want)
    if (r.Bytes(tag) != bytes) r.Read(tag, nullptr, bytes);  // names the mismatch
  std::vector<uint32_t> members(count), len(count), rterms(rowEntries), sterms(sumEntries);
  std::vector<uint64_t> seen(count), slen(count);
  std::vector<float> rweights(rowEntries);
  std::vector<double> svals(sumEntries);
  r.Read(kMemb, members.data(), count * 4);
  r.Read(kSeen, seen.data(), count * 8);
  r.Read(kRlen, len.data(), count * 4);
  r.Read(kRtrm, rterms.data(), rowEntries * 4);
  r.Read(kRwgt, rweights.data(), rowEntries * 4);
  r.Read(kSlen, slen.data(), count * 8);
  r.Read(kStrm, sterms.data(), sumEntries * 4);
  r.Read(kSval, svals.data(), sumEntries * 8);
  // Scorers index rows by binary search and sums feed every later row: a
  // file whose checksums hold but whose values do not must not reach them.
  uint64_t rowAt = 0, sumAt = 0, memberTotal = 0;
  for (uint64_t c = 0; c < count; c++) {
    if (len[c] > cfg.maxTerms || len[c] > rowEntries - rowAt)
      r.Bad("cluster " + std::to_string(c) + ": bad row length");
    if (slen[c] > sumEntries - sumAt || len[c] > slen[c]) r.Bad("cluster " + std::to_string(c) + ": bad sum length");
    if (members[c] == 0 || seen[c] >= time)
      r.Bad("cluster " + std::to_string(c) + ": bad member count or last-seen time");
    memberTotal += members[c];
    const uint32_t* t = rterms.data() + rowAt;
    const float* w = rweights.data() + rowAt;
    for (uint32_t k = 0; k < len[c]; k++)
      if (t[k] == kNone || (k > 0 && t[k] <= t[k - 1]) || !(w[k] >= 0.f && w[k] <= 1.f))
        r.Bad("cluster " + std::to_string(c) + ": bad row");
    const uint32_t* st = sterms.data() + sumAt;
    const double* sv = svals.data() + sumAt;
    for (uint64_t i = 0; i < slen[c]; i++)
      if ((i > 0 && st[i] <= st[i - 1]) || !(sv[i] > 0 && std::isfinite(sv[i])))
        r.Bad("cluster " + std::to_string(c) + ": bad sum");
    // A row holds terms of its cluster's sum.
    for (uint64_t k = 0, i = 0; k < len[c]; k++) {
      while (i < slen[c] && st[i] < t[k]) i++;
      if (i == slen[c] || st[i] != t[k]) r.Bad("cluster " + std::to_string(c) + ": row term outside its sum");
    }
    rowAt += len[c];
    sumAt += slen[c];
  }
  if (rowAt != rowEntries || sumAt != sumEntries) r.Bad("row or sum lengths do not add up");
  if (memberTotal > time) r.Bad("more members than documents");
  // Geometric headroom: the stream that follows a load grows into it without
  // copying the matrix (host and device).
  cfg.capacity = std::max<uint64_t>(cfg_.capacity, count + count / 2);
  Rows rows;
  rows.K = cfg.maxTerms;
  rows.count = count;
  rows.terms.reserve(cfg.capacity * rows.K);
  rows.weights.reserve(cfg.capacity * rows.K);
  rows.terms.assign(count * rows.K, kNone);
  rows.weights.assign(count * rows.K, 0.f);
  rows.len = std::move(len);
  rows.len.reserve(cfg.capacity);
  rows.lastSeen = std::move(seen);
  rows.lastSeen.reserve(cfg.capacity);
  std::vector<std::vector<SumEntry>> sums;
  sums.reserve(cfg.capacity);
  sums.resize(count);
  rowAt = sumAt = 0;
  for (uint64_t c = 0; c < count; c++) {
    std::copy(rterms.begin() + rowAt, rterms.begin() + rowAt + rows.len[c], rows.terms.begin() + c * rows.K);
    std::copy(rweights.begin() + rowAt, rweights.begin() + rowAt + rows.len[c], rows.weights.begin() + c * rows.K);
    rowAt += rows.len[c];
    sums[c].resize(slen[c]);
    for (uint64_t i = 0; i < slen[c]; i++) sums[c][i] = {sterms[sumAt + i], svals[sumAt + i]};
    sumAt += slen[c];
  }
  members.reserve(cfg.capacity);
  cfg_ = cfg;
  time_ = time;
  rows_ = std::move(rows);
  sums_ = std::move(sums);
  members_ = std::move(members);
  MakeScorer();
  scorer_->Rebuild();
}

}  // namespace cluster
}  // namespace cusim
