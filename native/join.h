// Exact set similarity join (AllPairs / PPJoin on the CPU, fgssjoin-style
// index-filter-verify on the GPU) behind one backend-neutral interface.
// Included by cuda/join.cu: no napi.h, no CUDA headers.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "common.h"
#include "host_buffer.h"
#include "uninit_vector.h"

namespace cusim {
namespace join {

enum class Measure : int { Jaccard = 0, Cosine = 1, Dice = 2, Overlap = 3 };

// Overlap/size bounds for the filters. Each is computed in double and then
// loosened by a relative epsilon before ceil/floor, so a pair that the exact
// final test (Accept) admits is never pruned by a filter. The final test itself
// never uses an epsilon: it is the similarity in double compared with t.
struct Bounds {
  Measure m;
  double t;

  static CUSIM_HD uint32_t CeilLoose(double v) {
    double c = ceil(v - 1e-9 * (1.0 + fabs(v)));
    return c < 1.0 ? 1u : (c > 4294967295.0 ? 0xffffffffu : uint32_t(c));
  }
  static CUSIM_HD uint32_t FloorLoose(double v) {
    double f = floor(v + 1e-9 * (1.0 + fabs(v)));
    return f > 4294967295.0 ? 0xffffffffu : uint32_t(f);
  }
  // Least overlap a pair of sizes a, b needs.
  CUSIM_HD uint32_t Alpha(uint32_t a, uint32_t b) const {
    switch (m) {
      case Measure::Jaccard: return CeilLoose(t / (1.0 + t) * (double(a) + double(b)));
      case Measure::Dice: return CeilLoose(t * (double(a) + double(b)) / 2.0);
      case Measure::Cosine: return CeilLoose(t * sqrt(double(a) * double(b)));
      default: return uint32_t(t);
    }
  }
  // Sizes a partner of a size-a set may have.
  CUSIM_HD uint32_t MinSize(uint32_t a) const {
    switch (m) {
      case Measure::Jaccard: return CeilLoose(t * a);
      case Measure::Dice: return CeilLoose(t * a / (2.0 - t));
      case Measure::Cosine: return CeilLoose(t * t * a);
      default: return uint32_t(t);
    }
  }
  CUSIM_HD uint32_t MaxSize(uint32_t a) const {
    switch (m) {
      case Measure::Jaccard: return FloorLoose(a / t);
      case Measure::Dice: return FloorLoose((2.0 - t) * a / t);
      case Measure::Cosine: return FloorLoose(a / (t * t));
      default: return 0xffffffffu;
    }
  }
  // Probe ("max") prefix: covers every partner size, since the least Alpha
  // over allowed partner sizes equals MinSize(a) for the ratio measures.
  CUSIM_HD uint32_t ProbePrefix(uint32_t a) const { return Prefix(a, MinSize(a)); }
  // Index ("mid") prefix for a self-join on a size-sorted collection: every
  // probe is at least as large as the indexed set, so Alpha(a, a) suffices.
  CUSIM_HD uint32_t IndexPrefix(uint32_t a) const { return Prefix(a, Alpha(a, a)); }
  static CUSIM_HD uint32_t Prefix(uint32_t a, uint32_t need) { return need > a ? 0u : a - need + 1; }
};

// The exact membership test, shared by both backends and mirrored by the
// tests' brute-force oracle: the similarity in double compared with t.
// CUSIM_HD: the GPU applies it too (IEEE double division and sqrt, so the
// same pairs and the same float similarities).
CUSIM_HD bool Accept(Measure m, double t, uint32_t a, uint32_t b, uint32_t o, double* sim) {
  double s;
  switch (m) {
    case Measure::Jaccard: s = double(o) / double(uint64_t(a) + b - o); break;
    case Measure::Dice: s = 2.0 * double(o) / double(uint64_t(a) + b); break;
    case Measure::Cosine: s = double(o) / sqrt(double(a) * double(b)); break;
    default: s = double(o); break;
  }
  *sim = s;
  return o > 0 && s >= t;
}

// Wall time per stage of a join, summed over its calls (the result's
// stageMs): where a call's time goes, on any host, without a profiler.
// normalize: input checks and staging; prepare: token document frequencies
// and ranks; build: rows ordered, mapped to ranks, sorted and deduplicated,
// and the CPU joiner's index; plan: the GPU's probe windows and batches;
// transfer: host <-> device copies; kernel: waiting on the GPU's kernels;
// verify: the CPU's probes and verification; output: results gathered and
// sorted on the host.
enum Stage : int { kNormalize, kPrepare, kBuild, kPlan, kTransfer, kKernel, kVerify, kOutput, kStages };
inline const char* const kStageNames[kStages] = {"normalize", "prepare", "build",  "plan",
                                                 "transfer",  "kernel",  "verify", "output"};
class StageClock {
 public:
  // Charges the time since the last mark (or Skip) to `s`.
  void Mark(Stage s) {
    const auto now = std::chrono::steady_clock::now();
    ms_[s] += std::chrono::duration<double, std::milli>(now - last_).count();
    last_ = now;
  }
  void Skip() { last_ = std::chrono::steady_clock::now(); }
  double ms(Stage s) const { return ms_[s]; }
  void Add(const StageClock& o) {
    for (int s = 0; s < kStages; s++) ms_[s] += o.ms_[s];
  }

 private:
  double ms_[kStages] = {};
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

// One collection after preprocessing: rows deduplicated, tokens replaced by
// their global rank (ascending document frequency, ties by token id), each row
// sorted by rank, rows sorted by (size, input id), empty rows dropped.
struct Collection {
  // All three filled in parallel by Prepare: no serial zero fill first.
  UninitVector<uint64_t> offsets;  // n + 1
  UninitVector<uint32_t> tokens;
  UninitVector<uint32_t> ids;  // input row id of each sorted position
  uint64_t n() const { return ids.size(); }
  uint32_t size(uint64_t i) const { return uint32_t(offsets[i + 1] - offsets[i]); }
  const uint32_t* row(uint64_t i) const { return tokens.data() + offsets[i]; }
};

struct Prepared {
  Bounds bounds{Measure::Jaccard, 1.0};
  bool self = true;
  Collection probe;    // `sets`
  Collection index;    // `against`; empty (unused) for a self-join
  uint32_t vocab = 0;  // distinct tokens over both collections
  const Collection& indexed() const { return self ? probe : index; }
  uint64_t IndexPrefix(uint64_t i) const {
    uint32_t a = indexed().size(i);
    return self ? bounds.IndexPrefix(a) : bounds.ProbePrefix(a);
  }
};

// Indices i of the nonzero key[i], by ascending key and then i (the token
// order's sort; exported for its test against a plain stable sort).
UninitVector<uint32_t> OrderByKey(const uint32_t* key, uint64_t n);

// Charges its time to clock's prepare and build stages (clock may be null).
std::shared_ptr<Prepared> Prepare(const CsrView& sets, const CsrView* against, Measure m, double t,
                                  StageClock* clock = nullptr);

// A chunk of verified pairs in input row ids.
struct Chunk {
  std::vector<uint32_t> left, right, overlap;
  std::vector<float> similarity;
  // The GPU's chunks instead: `count` lefts, rights, overlaps and similarity
  // bits end to end in one block, written by the device copy without a
  // zero-fill first.
  HostBlock block;
  uint64_t count = 0;
  uint64_t candidates = 0;  // pairs that survived the filters and were verified
  double kernelMs = 0;
};

// Raw (probe position, index position, overlap) record from a verifier.
struct Hit {
  uint32_t x, y, o;
};

// Applies Accept, maps sorted positions to input ids (self-join: left < right)
// and sorts the chunk by (left, right).
void Finalize(const Prepared& p, const Hit* hits, size_t count, Chunk* out);

// Sorts parallel result arrays by (left, right) in place.
void SortPairs(std::vector<uint32_t>& left, std::vector<uint32_t>& right, std::vector<uint32_t>& overlap,
               std::vector<float>& sim);

// A join in progress: Next() fills the next chunk and returns false when the
// join is exhausted (then the chunk is empty).
class Joiner {
 public:
  virtual ~Joiner() = default;
  virtual bool Next(Chunk* out, const CancelToken& cancel) = 0;
  // Time spent so far, by stage (from construction; waits between calls excluded).
  StageClock stages;
};

enum class Algorithm { PPJoin, AllPairs };

// maxChunk: the most pairs one CPU chunk holds (a step's surplus waits for the next Next()).
std::unique_ptr<Joiner> MakeCpuJoiner(std::shared_ptr<const Prepared> p, Algorithm algo, uint64_t maxChunk);
// The GPU joiner's part of the `tuning` option.
struct CudaTuning {
  // The most pairs one chunk holds (at most the joiner's own 2^26).
  uint64_t maxChunkPairs = uint64_t(1) << 26;
  // Candidates in 16-byte slots even where the 8-byte ones fit: the tests'
  // way to run the wide slots on small inputs (same pairs either way).
  bool wideSlots = false;
};
std::unique_ptr<Joiner> MakeCudaJoiner(std::shared_ptr<const Prepared> p, int device, uint64_t blockSize,
                                       const CudaTuning& tuning);

}  // namespace join
}  // namespace cusim
