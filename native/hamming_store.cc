// Hamming index save/load in the persistence container (removal, which
// saving compacts first, is hamming_removal.cc).
#include <algorithm>

#include "hamming.h"
#include "persist.h"

namespace cusim {
namespace hamming {
namespace {

constexpr uint32_t kParm = persist::Tag("PARM"), kCode = persist::Tag("CODE"), kIds = persist::Tag("IDS_");
constexpr uint32_t kVersion = 1;

}  // namespace

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
