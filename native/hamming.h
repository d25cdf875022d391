// Hamming k-NN over packed binary codes: an exact scan and Error Weighted
// Hashing (Esmaeili et al., TPAMI 2012; CUDA scoring after Bhatia & Badarla
// 2016). Both backends return identical results: distances and EWH scores are
// integers, and every ordering is by (distance, id) or (score desc, id).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common.h"
#include "uninit_vector.h"

namespace cusim {
namespace persist {
class Writer;
class Reader;
}  // namespace persist
namespace hamming {

constexpr uint32_t kMissing = 0xFFFFFFFFu;
constexpr uint32_t kMaxK = 1024;
constexpr uint32_t kMaxBits = 32768;  // distances must fit a Uint16
constexpr uint32_t kMaxScore = 8191;  // tables * max(weight): bounds the score histogram

struct Timing {
  double kernelMs = 0;       // device time of the kernels (CUDA events)
  double transferMs = 0;     // host<->device copies (CUDA events)
  double buildMs = 0;        // EWH bucket build (device time on CUDA)
  uint64_t scored = 0;       // EWH: ids with a nonzero score, summed over queries
  uint64_t shortlisted = 0;  // EWH: ids re-ranked by exact distance, summed over queries
  // CUDA exact scan, the stages inside kernelMs (device time): sample bound, full scan
  // (every distance, pairs within the bound kept), sort of the kept pairs, and the
  // histogram passes of the queries whose kept set overflowed (redoQueries of them).
  double exactSampleMs = 0, exactScanMs = 0, exactSortMs = 0, exactRedoMs = 0;
  uint64_t exactRedoQueries = 0;
};

struct EwhParams {
  uint32_t tables = 4;
  uint32_t keyBits = 5;
  uint32_t maxErrors = 2;
  std::vector<int32_t> weights{10, 5, 2};  // weights[r] for a probe r bits away
  int32_t minScore = 20;
  uint32_t shortlist = 0;  // > 0: top-L by score instead of minScore
  uint64_t seed = 1;
};

enum class ExactKernel { Auto, Popc, Mma2 };

struct DeviceIndex;  // CUDA-side copy of the codes and buckets (cuda/hamming.cu)

// The database: codes in insertion order plus, for EWH, CSR buckets per table.
// Searches see row positions; rowIds maps them to the ids callers know (empty:
// row r has id r). Removal marks rows dead, and the next operation that reads
// the codes compacts them away (Compact), so every backend sees only live rows,
// still in ascending id order, and the (distance, id) tie rule holds on positions.
struct HostIndex {
  uint32_t bits = 0;
  bool ewh = false;
  EwhParams params;
  std::vector<uint32_t> positions;  // tables * keyBits bit positions, drawn once
  UninitVector<uint32_t> codes;     // rows * wordsPerRow (a load reads straight into it)
  uint64_t rows = 0;
  std::vector<uint32_t> rowIds;  // ascending; empty while every id is its row
  uint64_t nextId = 0;           // the id the next added code gets
  std::vector<uint64_t> dead;    // bitmap over rows removed since the last Compact
  uint64_t deadCount = 0;
  // Buckets (built lazily after adds): offsets[t * (2^h + 1) + b], ids[t * rows + j].
  bool built = false;
  std::vector<uint32_t> offsets;
  std::vector<uint32_t> ids;
  // Cached device copy; dropped whenever the codes change.
  std::shared_ptr<DeviceIndex> device;
  uint32_t wordsPerRow() const { return bits / 32; }
};

// Bit positions for every table from Philox(seed, table, 0), distinct within a table.
std::vector<uint32_t> DrawPositions(uint32_t bits, uint32_t tables, uint32_t keyBits, uint64_t seed);
// Probe masks within maxErrors bits of a key, by increasing popcount.
std::vector<uint32_t> ProbeMasks(uint32_t keyBits, uint32_t maxErrors);

void AddCodes(HostIndex& index, const uint32_t* words, uint64_t rows);
// Marks the rows holding these ids dead; unknown and already removed ids are
// skipped. Returns how many were removed.
uint64_t RemoveIds(HostIndex& index, const uint32_t* ids, uint64_t n);
// Drops dead rows (codes and ids); drops the buckets and the device copy if any.
void Compact(HostIndex& index);
inline uint64_t LiveRows(const HostIndex& index) { return index.rows - index.deadCount; }
// Row positions in search results -> ids (kMissing stays).
void MapToIds(const HostIndex& index, uint32_t* ids, uint64_t n);

// Save and load (docs/persistence.md, kind "hamming"). Save compacts first.
void SaveIndex(HostIndex& index, persist::Writer& w);
HostIndex LoadIndex(const persist::Reader& r);

// One backend's work on an index whose dead rows the caller compacted away,
// under the index's lock. Results are row positions (MapToIds maps them).
class Searcher {
 public:
  virtual ~Searcher() = default;
  // Builds the EWH buckets now (searches build them when they need them).
  virtual void Build(HostIndex& index, Timing* timing) = 0;
  // k nearest rows per query by the index's method (exact scan or EWH).
  virtual void Search(HostIndex& index, const BitsView& queries, uint32_t k, uint32_t* ids, uint16_t* dist,
                      Timing* timing, const CancelToken& cancel) = 0;
  // scores[q * rows + id]: the EWH score of every id for every query.
  virtual void Scores(HostIndex& index, const BitsView& queries, uint32_t* scores) = 0;
};

std::unique_ptr<Searcher> MakeCpuSearcher();
// On GPU `device`, whose copy of the codes and buckets the index keeps
// (HostIndex::device) until they change. exactKernel picks the exact scan's
// kernel (options.exactKernel).
std::unique_ptr<Searcher> MakeCudaSearcher(int device, ExactKernel exactKernel);
// The exact-scan kernels `auto` picks from on a GPU with (or without)
// tensor-core kernels; the code length decides among them.
std::vector<std::string> GpuKernelFamilies(bool tensorCores);

}  // namespace hamming
}  // namespace cusim
