// Streaming document clustering (Szasz & Samet; TwitterStand): each document
// joins its most similar cluster when the similarity exceeds T, else starts a
// new one. The host owns the exact cluster state (sums, rows, ages); a Scorer
// (CPU inverted index or CUDA ELL matrix) only finds the best cluster.
// No napi.h and no CUDA headers here: cuda/cluster.cu includes it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common.h"

namespace cusim {
namespace persist {
class Writer;
class Reader;
}  // namespace persist
namespace cluster {

inline constexpr uint32_t kNone = 0xFFFFFFFFu;      // "no cluster" / empty ELL slot
inline constexpr uint64_t kNoDecay = ~uint64_t(0);  // maxAge meaning "never inactive"
inline constexpr uint32_t kMaxTerms = 1024;

// Similarity is an order-free fixed-point sum: each product of two float
// weights is exact in double, scaled by 2^61 (exact) and truncated to an
// integer, so any summation order (CPU index, GPU merge, GPU SpMM) gives the
// same integer and therefore the same float. Weights are in [0, 1] and the
// vectors unit-norm, so the sum stays below 2^62.
CUSIM_HD uint64_t FixedProduct(float a, float b) {
  return uint64_t(double(a) * double(b) * 2305843009213693952.0 /* 2^61 */);
}
CUSIM_HD float FixedToFloat(uint64_t acc) { return float(double(acc) * (1.0 / 2305843009213693952.0)); }
// Candidate key: larger similarity wins, then the lower cluster id. sim >= 0,
// so its IEEE bits order like the value. 0 means "no candidate".
CUSIM_HD uint64_t PackKey(float sim, uint32_t id) {
  union {
    float f;
    uint32_t u;
  } b;
  b.f = sim;
  return (uint64_t(b.u) << 32) | uint64_t(~id);
}
CUSIM_HD uint32_t KeyId(uint64_t key) { return ~uint32_t(key & 0xFFFFFFFFu); }
CUSIM_HD float KeySim(uint64_t key) {
  union {
    float f;
    uint32_t u;
  } b;
  b.u = uint32_t(key >> 32);
  return b.f;
}

struct Config {
  double threshold = 0.5;      // join iff similarity > threshold
  uint32_t maxTerms = 35;      // K
  uint64_t capacity = 1024;    // initial rows (grows by doubling)
  uint64_t maxAge = kNoDecay;  // active iff time - lastSeen <= maxAge
};

// Cluster rows as the scorers see them: K slots per cluster, terms ascending,
// len[c] slots used. Owned by the Engine; scorers read it.
struct Rows {
  uint32_t K = 0;
  uint64_t count = 0;
  std::vector<uint32_t> terms;  // count * K
  std::vector<float> weights;   // count * K
  std::vector<uint32_t> len;
  std::vector<uint64_t> lastSeen;
};

// Documents after truncation and normalization, flat: doc i is
// [ptr[i], ptr[i+1]) of terms/weights, terms ascending.
struct Docs {
  std::vector<uint64_t> ptr;
  std::vector<uint32_t> terms;
  std::vector<float> weights;
  uint64_t size() const { return ptr.empty() ? 0 : ptr.size() - 1; }
};

// Multiplicative hash of a term into 2^bits slots (bits in [1, 31]); host and
// device tables use the same function.
CUSIM_HD uint32_t HashSlot(uint32_t t, uint32_t bits) { return (t * 2654435761u) >> (32 - bits); }

// A micro-batch's documents grouped by term, without sorting (counting sort
// through an open-addressing hash): distinct term u = terms[u] has postings
// [off[u], off[u + 1]) of (doc - begin, weight), in document order; the
// batch's p-th (term, weight) entry belongs to term u = entryTerm[p].
struct BatchPostings {
  std::vector<uint32_t> terms, off, doc, entryTerm;
  std::vector<float> w;
  void Build(const Docs& docs, uint64_t begin, uint64_t end);

 private:
  std::vector<uint32_t> slots_;
};

struct Timing {
  double kernelMs = 0;
  double transferMs = 0;
};

// Finds the best active cluster with similarity > T (as a key; 0 = none).
class Scorer {
 public:
  virtual ~Scorer() = default;
  // Against the rows as they are now (every RowChanged so far applied).
  virtual uint64_t ScoreOne(const uint32_t* terms, const float* w, uint32_t n, uint64_t time) = 0;
  // Docs [begin, end) against the rows as they are now; doc i is at time
  // time0 + (i - begin). keys[i - begin] receives its best key.
  // `post` holds docs [begin, end) grouped by term.
  virtual void ScoreBatch(const Docs& docs, uint64_t begin, uint64_t end, const BatchPostings& post, uint64_t time0,
                          uint64_t* keys) = 0;
  // Row c (possibly new: c == previous count) was rewritten; old slots given.
  virtual void RowChanged(uint32_t c, const uint32_t* oldTerms, uint32_t oldLen) = 0;
  // Rows were replaced wholesale (load).
  virtual void Rebuild() = 0;
  virtual Timing TakeTiming() { return {}; }
  // Documents per micro-batch on this scorer.
  virtual uint64_t BatchSize() const = 0;
  // Mode::Auto: whether micro-batch beats sequential for n documents.
  virtual bool PreferBatch(uint64_t n) const = 0;
};

std::unique_ptr<Scorer> MakeCpuScorer(const Config& cfg, const Rows& rows);
// The engine's `tuning` option: GPU choices that never change the clusters.
struct Tuning {
  // Documents per GPU micro-batch: 256, 512 or 1024; 0 picks 512 (lowered
  // where the GPU's shared memory per block holds less).
  uint32_t batch = 0;
};
std::unique_ptr<Scorer> MakeCudaScorer(const Config& cfg, const Rows& rows, int device, const Tuning& tuning);

enum class Mode { Auto, Sequential, Batch };

struct AddOutput {
  std::vector<uint32_t> cluster;
  std::vector<float> similarity;
  std::vector<uint8_t> created;
  bool batched = false;
  uint64_t rescored = 0;  // batch documents re-scored in full (their batch best changed)
  Timing timing;
};

class Engine {
 public:
  Engine(const Config& cfg, Backend backend, int device, const Tuning& tuning = {});
  // All or nothing: an add that throws (aborted, out of memory, a CUDA error)
  // leaves the state as it was before the call.
  void Add(const CsrView& docs, Mode mode, const CancelToken& cancel, AddOutput* out);
  // Host memory the state holds (rows, sums, ages), about; for V8.
  uint64_t bytes() const;
  uint64_t size() const { return rows_.count; }
  const Config& config() const { return cfg_; }
  uint64_t time() const { return time_; }
  const Rows& rows() const { return rows_; }
  uint32_t members(uint32_t c) const { return members_[c]; }
  bool active(uint32_t c, uint64_t t) const;
  // Sections of the "stream-cluster" file (the caller opened it and commits it).
  void Save(persist::Writer& w) const;
  void Load(const persist::Reader& r);  // replaces config and state; throws before changing anything

 private:
  struct Undo;  // what an add changed, to put back (cluster_engine.cc)
  void AddAll(const CsrView& docs, Mode mode, const CancelToken& cancel, AddOutput* out);
  void Remember(uint32_t c);
  void Rollback(Undo& u);
  void Prepare(const CsrView& m, Docs* docs) const;
  uint64_t Dot(const uint32_t* t, const float* w, uint32_t n, uint32_t c) const;
  // Commits doc's decision (key 0 = create); returns the cluster id.
  uint32_t Apply(const uint32_t* t, const float* w, uint32_t n, uint64_t key, uint64_t time, bool* created);
  void SetRowFromSum(uint32_t c);
  void MakeScorer();
  void Reserve(uint64_t cap);

  struct SumEntry {
    uint32_t term;
    double v;
  };
  Config cfg_;
  Backend backend_;
  int device_;
  Tuning tuning_;      // not part of the saved state
  uint64_t time_ = 0;  // documents seen, empty ones included
  Rows rows_;
  std::vector<std::vector<SumEntry>> sums_;
  std::vector<uint32_t> members_;
  std::unique_ptr<Scorer> scorer_;
  Undo* undo_ = nullptr;  // during an add
  bool stale_ = false;    // a rollback could not rebuild the scorer: the next add does
};

}  // namespace cluster
}  // namespace cusim
