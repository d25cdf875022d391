// Hamming index removal: ids marked dead, and dead rows compacted before the
// next read, so both backends search live rows only.
#include <algorithm>
#include <numeric>

#include "hamming.h"

namespace cusim {
namespace hamming {

uint64_t RemoveIds(HostIndex& ix, const uint32_t* ids, uint64_t n) {
  if (ix.dead.size() * 64 < ix.rows) ix.dead.resize((ix.rows + 63) / 64, 0);
  uint64_t removed = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t row;
    if (ix.rowIds.empty()) {
      if (ids[i] >= ix.rows) continue;
      row = ids[i];
    } else {
      auto it = std::lower_bound(ix.rowIds.begin(), ix.rowIds.end(), ids[i]);
      if (it == ix.rowIds.end() || *it != ids[i]) continue;
      row = uint64_t(it - ix.rowIds.begin());
    }
    uint64_t& word = ix.dead[row / 64];
    const uint64_t bit = uint64_t(1) << (row % 64);
    if (word & bit) continue;
    word |= bit;
    ++removed;
  }
  ix.deadCount += removed;
  return removed;
}

void Compact(HostIndex& ix) {
  if (ix.deadCount == 0) return;
  if (ix.rowIds.empty()) {
    ix.rowIds.resize(ix.rows);
    std::iota(ix.rowIds.begin(), ix.rowIds.end(), 0u);
  }
  const uint32_t w = ix.wordsPerRow();
  uint64_t out = 0;
  for (uint64_t r = 0; r < ix.rows; ++r) {
    if (r / 64 < ix.dead.size() && (ix.dead[r / 64] >> (r % 64)) & 1) continue;
    if (out != r) {
      std::copy(ix.codes.begin() + r * w, ix.codes.begin() + (r + 1) * w, ix.codes.begin() + out * w);
      ix.rowIds[out] = ix.rowIds[r];
    }
    ++out;
  }
  ix.rows = out;
  ix.codes.resize(out * w);
  ix.rowIds.resize(out);
  ix.dead.clear();
  ix.deadCount = 0;
  ix.built = false;
  ix.offsets.clear();
  ix.ids.clear();
  ix.device.reset();
}

void MapToIds(const HostIndex& ix, uint32_t* ids, uint64_t n) {
  if (ix.rowIds.empty()) return;
  for (uint64_t i = 0; i < n; ++i)
    if (ids[i] != kMissing) ids[i] = ix.rowIds[ids[i]];
}

}  // namespace hamming
}  // namespace cusim
