// Weighted MinHash (Ioffe's improved consistent weighted sampling) behind one
// backend-neutral interface. Parameter tables are [slot][samples], one slot per
// column in use, so that for one column every sample's (r, ln c, beta) is
// contiguous: the CPU inner loop vectorizes over samples and a GPU warp's
// gather is coalesced.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "column_map.h"
#include "common.h"

namespace cusim {
namespace minhash {

struct Timing {
  double kernelMs = 0;    // device time of the kernels alone (CUDA events), summed over batches
  double transferMs = 0;  // host<->device copies (CUDA events), summed over batches
  // Host wall-clock phases of the CUDA path, summed over the feeding threads
  // (three per GPU), so the bench can say where a call's time goes.
  double stageInMs = 0;   // copying the CSR slice into pinned staging + segment tables
  double waitMs = 0;      // waiting for the batch's copies and kernels
  double stageOutMs = 0;  // copying signatures out of pinned staging
  double nativeMs = 0;    // the whole native call on its worker thread, validation included
};

// Signature entry of a row with no positive weight, in both k* and t*.
inline constexpr uint32_t kSentinel = 0xFFFFFFFFu;

// Parameters of one column: samples (r, ln c, beta) from the seed contract,
// Philox(seed, d, 0), five uniforms per sample, logs in double rounded to float.
void GenerateColumn(uint64_t seed, uint32_t d, uint32_t samples, float* rs, float* lnCs, float* betas);

// Parameters of the columns met so far, so memory and setup grow with the
// columns a corpus uses, not with dim (up to 2^32). Each column gets a slot
// on first use; per-slot tables ([samples] of r, ln c, beta) live in blocks
// that never move, so readers keep their pointers while columns are added.
// Seeded parameters are generated on demand; injected ones (fromParameters)
// are a fixed set and any other column is an error.
class ColumnParams {
 public:
  ColumnParams(uint64_t seed, uint32_t samples);
  // Column cols[i] gets row i of the [n][samples] tables; cols are distinct.
  ColumnParams(uint32_t samples, const uint32_t* cols, size_t n, const float* rs, const float* lnCs,
               const float* betas);
  ColumnParams(const ColumnParams&) = delete;
  ColumnParams& operator=(const ColumnParams&) = delete;

  bool injected() const { return injected_; }
  uint64_t seed() const { return seed_; }
  uint32_t samples() const { return samples_; }
  // Host bytes held (tables and the column map), read without the lock: an
  // estimate for V8's external-memory accounting.
  uint64_t Bytes() const { return bytes_.load(std::memory_order_relaxed); }

  // Makes every column of m's rows [a, b) present: seeded ones are generated
  // (multi-threaded); for injected tables the first absent column is named in
  // a RangeError. Takes the lock itself.
  void Ensure(const CsrView& m, uint64_t a, uint64_t b, const CancelToken& cancel, const char* name);

  // Readers (Find, the table pointers, size, column) hold lock() shared.
  RwLock& lock() const { return lock_; }
  uint32_t Find(uint32_t d) const { return map_.Find(d); }
  size_t size() const { return cols_.size(); }
  uint32_t column(uint32_t slot) const { return cols_[slot]; }
  const float* rs(uint32_t slot) const { return At(0, slot); }
  const float* lnCs(uint32_t slot) const { return At(1, slot); }
  const float* betas(uint32_t slot) const { return At(2, slot); }

  // Tables of the given columns into [n][samples] arrays (present or not:
  // seeded columns are generated, not cached; an absent injected column throws).
  void Gather(const uint32_t* cols, size_t n, float* rs, float* lnCs, float* betas) const;

 private:
  const float* At(int table, uint32_t slot) const {
    return blocks_[slot >> blockShift_].t[table].get() + size_t(slot & blockMask_) * samples_;
  }
  float* MutableAt(int table, uint32_t slot) { return const_cast<float*>(At(table, slot)); }
  void Add(const std::vector<uint32_t>& cols);  // absent columns, under the exclusive lock

  struct Block {
    std::unique_ptr<float[]> t[3];
  };
  uint64_t seed_ = 0;
  uint32_t samples_ = 0;
  bool injected_ = false;
  uint32_t blockShift_ = 0, blockMask_ = 0;
  ColumnMap map_;
  std::vector<uint32_t> cols_;  // slot -> column
  std::vector<Block> blocks_;
  mutable RwLock lock_;
  std::atomic<uint64_t> bytes_{0};
};

// Signatures of rows [rowStart, rowEnd) into out (rows x samples x 2). Every
// column of those rows must be present in p (Ensure); the caller holds p's
// lock shared.
void HashCpu(const CsrView& m, uint64_t rowStart, uint64_t rowEnd, const ColumnParams& p, uint32_t* out,
             const CancelToken& cancel);

// out[i] = fraction of samples where signatures left[i] and right[i] agree on
// both k* and t*; 0 when either row is the empty-row sentinel.
void JaccardPairsCpu(const uint32_t* sigs, uint32_t samples, const uint32_t* left, const uint32_t* right,
                     uint64_t pairs, float* out);

// Cuts rows [rowStart, rowEnd) into `parts` contiguous ranges of about equal
// nnz (multi-GPU split): returns parts + 1 boundaries, first rowStart, last
// rowEnd, non-decreasing; any part count, empty parts allowed.
std::vector<uint64_t> SplitRowsByNnz(const CsrView& m, uint64_t rowStart, uint64_t rowEnd, size_t parts);

// The engines' `tuning` option: GPU choices that never change the signatures.
struct Tuning {
  // The weighted engine has one hash kernel, prune (the tests hold it to the
  // CPU backend), and so has the classic engine: nothing to choose.
  // false: one batch in flight per device, so each kernel has the GPU to
  // itself and its CUDA-event time is its own (the bench's kernel rate).
  bool overlap = true;
};

// One MinHash engine's backend (the weighted and the classic engines each
// have a CPU and a CUDA one).
class Hasher {
 public:
  virtual ~Hasher() = default;
  // Signatures of all of m's rows into out (rows x words per row). m is
  // checked here, as fully as this backend needs (the GPU's kernels check
  // the elements they read); concurrent calls are allowed.
  virtual void Hash(const CsrView& m, uint32_t* out, Timing* timing, const CancelToken& cancel) = 0;
};

// The weighted engine's backend over the glue's host parameters.
class WeightedHasher : public Hasher {
 public:
  // Device `slot`'s (index into the backend's device list) tables of the
  // given columns, [n][samples] each; seeded columns not yet used are added first.
  virtual void DeviceParams(size_t slot, const uint32_t* cols, size_t n, float* rs, float* lnCs, float* betas) = 0;
};

std::unique_ptr<WeightedHasher> MakeCpuHasher(std::shared_ptr<ColumnParams> params);
// Per-device column maps and parameter tables plus staging slots, built on
// the first call that needs them. Seeded engines generate each column's
// parameters on the device on first use; injected ones upload params'
// columns once and reject others. Rows are split across the devices
// balanced by nnz.
std::unique_ptr<WeightedHasher> MakeCudaHasher(std::shared_ptr<ColumnParams> params, uint32_t dim,
                                               const std::vector<int>& devices, const Tuning& tuning);

}  // namespace minhash
}  // namespace cusim
