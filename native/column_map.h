// Column id -> compact slot maps, so per-column tables cost what the columns
// in use cost, not what `dim` allows (dim reaches 2^32). The same hash and
// probe order serve the host map here and the device map in cuda/minhash.cu.
// No napi.h and no CUDA headers: cuda/ includes this.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "common.h"

namespace cusim {

// Never a column: columns are < dim <= 2^32 - 1.
inline constexpr uint32_t kNoColumn = 0xFFFFFFFFu;
inline constexpr uint32_t kNoSlot = 0xFFFFFFFFu;

// Fibonacci hashing: the top log2(capacity) bits of d * 2^32 / phi, so runs of
// consecutive columns spread over the table. shift = 32 - log2(capacity).
CUSIM_HD uint32_t ColumnHome(uint32_t d, uint32_t shift) { return uint32_t(d * 2654435769u) >> shift; }

// Open addressing with linear probing, at most half full. Not thread-safe for
// writers; readers may share it while nothing inserts.
class ColumnMap {
 public:
  ColumnMap() { Reset(1u << 10); }

  uint32_t Find(uint32_t d) const {
    for (uint32_t h = ColumnHome(d, shift_);; h = (h + 1) & mask_) {
      const uint32_t k = keys_[h];
      if (k == d) return vals_[h];
      if (k == kNoColumn) return kNoSlot;
    }
  }
  // Adds d -> slot (d absent).
  void Insert(uint32_t d, uint32_t slot) {
    if (2 * (size_ + 1) > keys_.size()) Grow();
    Place(d, slot);
    ++size_;
  }
  size_t size() const { return size_; }

 private:
  void Reset(size_t capacity) {
    keys_.assign(capacity, kNoColumn);
    vals_.assign(capacity, 0);
    mask_ = uint32_t(capacity - 1);
    shift_ = 32 - uint32_t(__builtin_ctzll(capacity));
  }
  void Place(uint32_t d, uint32_t slot) {
    uint32_t h = ColumnHome(d, shift_);
    while (keys_[h] != kNoColumn) h = (h + 1) & mask_;
    keys_[h] = d;
    vals_[h] = slot;
  }
  void Grow() {
    std::vector<uint32_t> k, v;
    k.swap(keys_), v.swap(vals_);
    Reset(k.size() * 2);
    for (size_t i = 0; i < k.size(); ++i)
      if (k[i] != kNoColumn) Place(k[i], v[i]);
  }
  std::vector<uint32_t> keys_, vals_;
  uint32_t mask_ = 0, shift_ = 0;
  size_t size_ = 0;
};

// Shared for calls that read the tables, exclusive for one that adds columns.
// A waiting writer holds new readers back, so a stream of overlapping calls
// cannot starve it.
class RwLock {
 public:
  void lock_shared() {
    std::unique_lock<std::mutex> l(m_);
    cv_.wait(l, [&] { return !writer_ && waiting_ == 0; });
    ++readers_;
  }
  void unlock_shared() {
    std::lock_guard<std::mutex> l(m_);
    if (--readers_ == 0) cv_.notify_all();
  }
  void lock() {
    std::unique_lock<std::mutex> l(m_);
    ++waiting_;
    cv_.wait(l, [&] { return !writer_ && readers_ == 0; });
    --waiting_;
    writer_ = true;
  }
  void unlock() {
    std::lock_guard<std::mutex> l(m_);
    writer_ = false;
    cv_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int readers_ = 0, waiting_ = 0;
  bool writer_ = false;
};

}  // namespace cusim
