// Hamming index removal (dead rows compacted before the next read, so both
// backends search live rows only) and save/load in the persistence container.
#include <algorithm>
#include <numeric>

#include "hamming.h"
#include "persist.h"

namespace cusim {
namespace hamming {
namespace {

constexpr uint32_t kParm = persist::Tag("PARM"), kCode = persist::Tag("CODE"), kIds = persist::Tag("IDS_");
constexpr uint32_t kVersion = 1;

}  // namespace

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

void SaveIndex(HostIndex& ix, persist::Writer& w) {
  Compact(ix);
  const EwhParams& p = ix.params;
  persist::FieldWriter f;
  f.Put(ix.bits).Put(uint32_t(ix.ewh)).Put(p.tables).Put(p.keyBits).Put(p.maxErrors).Put(p.shortlist).Put(p.minScore);
  for (uint32_t i = 0; i < 4; ++i) f.Put(i < p.weights.size() ? p.weights[i] : int32_t(0));
  f.Put(p.seed).Put(ix.rows).Put(ix.nextId).Put(uint32_t(!ix.rowIds.empty())).Put(uint32_t(0));
  w.Section(kParm, f.bytes().data(), f.bytes().size());
  w.Section(kCode, ix.codes.data(), ix.rows * ix.wordsPerRow() * 4);
  if (!ix.rowIds.empty()) w.Section(kIds, ix.rowIds.data(), ix.rows * 4);
}

HostIndex LoadIndex(const persist::Reader& r) {
  const auto parm = r.ReadSmall(kParm, 256);
  persist::Fields f(parm, r);
  HostIndex ix;
  EwhParams& p = ix.params;
  ix.bits = f.Get<uint32_t>();
  const uint32_t method = f.Get<uint32_t>();
  p.tables = f.Get<uint32_t>();
  p.keyBits = f.Get<uint32_t>();
  p.maxErrors = f.Get<uint32_t>();
  p.shortlist = f.Get<uint32_t>();
  p.minScore = f.Get<int32_t>();
  int32_t weights[4];
  for (auto& x : weights) x = f.Get<int32_t>();
  p.seed = f.Get<uint64_t>();
  const uint64_t rows = f.Get<uint64_t>(), nextId = f.Get<uint64_t>();
  const uint32_t hasIds = f.Get<uint32_t>(), zero = f.Get<uint32_t>();
  f.End();
  // The constructor's bounds (lib/hamming.ts, native/hamming_napi.cc).
  if (ix.bits < 32 || ix.bits > kMaxBits || ix.bits % 32 || method > 1) r.Bad("bad bits or method");
  if (p.tables < 1 || p.tables > 64 || p.keyBits < 1 || p.keyBits > std::min<uint32_t>(24, ix.bits) ||
      p.maxErrors > std::min<uint32_t>(3, p.keyBits) || p.minScore < -1000000000 || p.minScore > 1000000000 ||
      p.seed > 9007199254740991ull)
    r.Bad("EWH parameters out of range");
  int32_t maxW = 0;
  p.weights.assign(weights, weights + p.maxErrors + 1);
  for (uint32_t i = 0; i < 4; ++i) {
    if (weights[i] < 0 || (i > p.maxErrors && weights[i] != 0)) r.Bad("bad EWH weights");
    maxW = std::max(maxW, weights[i]);
  }
  if (uint64_t(maxW) * p.tables > kMaxScore) r.Bad("tables * max(weights) exceeds 8191");
  if (nextId > 0xFFFFFFFEull || rows > nextId || hasIds > 1 || zero != 0 || (!hasIds && rows != nextId))
    r.Bad("bad row count or next id");
  ix.ewh = method == 1;
  ix.rows = rows;
  ix.nextId = nextId;
  const uint64_t codeBytes = rows * ix.wordsPerRow() * 4;
  // Sizes first, then the final buffers, read into in place.
  if (r.Bytes(kCode) != codeBytes) r.Read(kCode, nullptr, codeBytes);
  if (hasIds && r.Bytes(kIds) != rows * 4) r.Read(kIds, nullptr, rows * 4);
  if (!hasIds && r.Has(kIds)) r.Bad("unexpected id section");
  ix.codes.resize(rows * ix.wordsPerRow());
  r.Read(kCode, ix.codes.data(), codeBytes);
  if (hasIds) {
    ix.rowIds.resize(rows);
    r.Read(kIds, ix.rowIds.data(), rows * 4);
    for (uint64_t i = 0; i < rows; ++i)
      if (ix.rowIds[i] >= nextId || (i > 0 && ix.rowIds[i] <= ix.rowIds[i - 1]))
        r.Bad("ids are not ascending below the next id");
  }
  if (ix.ewh) ix.positions = DrawPositions(ix.bits, p.tables, p.keyBits, p.seed);
  return ix;
}

}  // namespace hamming
}  // namespace cusim
