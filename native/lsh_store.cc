// MinHashLSH's Redis storage, the compute side (lsh_store.h).
#include "lsh_store.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "common.h"
#include "parallel.h"

namespace cusim {
namespace lsh_store {
namespace {

// murmur3's fmix32: lib/lsh-redis.ts computes the same partition of an id.
inline uint32_t Fmix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  return h ^ (h >> 16);
}
inline uint32_t IdPartition(uint32_t id, uint32_t parts) { return Fmix32(id) % parts; }
inline uint32_t KeyPartition(uint64_t key, uint32_t parts) { return uint32_t(key >> 32) % parts; }

inline uint64_t Get64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint32_t Get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Index of id in the ascending live ids, or kNone.
inline uint32_t IndexOf(const uint32_t* live, uint64_t n, uint32_t id) {
  const uint32_t* it = std::lower_bound(live, live + n, id);
  return it != live + n && *it == id ? uint32_t(it - live) : kNone;
}

}  // namespace

Entries MakeEntries(const lsh::SigView& s, const uint32_t* idd, const lsh::Params& p, uint32_t P) {
  Entries out;
  const uint64_t n = s.n;
  const uint32_t samples = s.samples, width = s.width;
  const uint64_t K = uint64_t(p.bands) * P;
  std::vector<uint64_t> keys(n * p.bands);
  std::vector<uint64_t> fp(n);
  std::vector<uint8_t> empty(n);
  ParallelFor(n, 1024, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      empty[i] = lsh::IsEmptyRow(s.row(i), samples, width);
      fp[i] = empty[i] ? 0 : lsh::FullHash(s.row(i), samples, width);
      if (!empty[i])
        for (uint32_t band = 0; band < p.bands; ++band)
          keys[i * p.bands + band] = lsh::BandKey(s.row(i), band, p.rows, width);
    }
  });
  std::vector<uint64_t> count(K + 1, 0), rcount(P + 1, 0);
  for (uint64_t i = 0; i < n; ++i) {
    ++rcount[IdPartition(idd[i], P) + 1];
    if (!empty[i])
      for (uint32_t band = 0; band < p.bands; ++band)
        ++count[uint64_t(band) * P + KeyPartition(keys[i * p.bands + band], P) + 1];
  }
  for (uint64_t k = 0; k < K; ++k) count[k + 1] += count[k];
  for (uint32_t k = 0; k < P; ++k) rcount[k + 1] += rcount[k];
  out.band.resize(count[K] * kBandEntry);
  out.rec.resize(n * kRecord);
  std::vector<uint64_t> cur(count.begin(), count.end() - 1), rcur(rcount.begin(), rcount.end() - 1);
  for (uint64_t i = 0; i < n; ++i) {
    uint8_t* r = out.rec.data() + rcur[IdPartition(idd[i], P)]++ * kRecord;
    const uint32_t flags = empty[i] ? kEmptyFlag : 0;
    std::memcpy(r, &idd[i], 4);
    std::memcpy(r + 4, &flags, 4);
    std::memcpy(r + 8, &fp[i], 8);
    if (empty[i]) continue;
    for (uint32_t band = 0; band < p.bands; ++band) {
      const uint64_t key = keys[i * p.bands + band];
      uint8_t* e = out.band.data() + cur[uint64_t(band) * P + KeyPartition(key, P)]++ * kBandEntry;
      std::memcpy(e, &key, 8);
      std::memcpy(e + 8, &idd[i], 4);
    }
  }
  out.bandOffsets.resize(K + 1);
  out.recOffsets.resize(P + 1);
  for (uint64_t k = 0; k <= K; ++k) out.bandOffsets[k] = double(count[k] * kBandEntry);
  for (uint32_t k = 0; k <= P; ++k) out.recOffsets[k] = double(rcount[k] * kRecord);
  return out;
}

Hits Query(const std::vector<Bytes>& stored, const std::vector<Bytes>& queries, uint64_t nq, const uint32_t* rm,
           uint64_t nrm) {
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> perKey(stored.size());  // (query, id)
  ParallelFor(stored.size(), 1, [&](size_t b, size_t e) {
    for (size_t k = b; k < e; ++k) {
      if (stored[k].size % kBandEntry || queries[k].size % kBandEntry)
        ThrowInvalid("band entries must be 12 bytes each");
      std::vector<std::pair<uint64_t, uint32_t>> s(stored[k].size / kBandEntry);
      for (size_t i = 0; i < s.size(); ++i)
        s[i] = {Get64(stored[k].data + i * kBandEntry), Get32(stored[k].data + i * kBandEntry + 8)};
      std::sort(s.begin(), s.end());
      for (size_t j = 0; j < queries[k].size / kBandEntry; ++j) {
        const uint64_t key = Get64(queries[k].data + j * kBandEntry);
        const uint32_t q = Get32(queries[k].data + j * kBandEntry + 8);
        if (q >= nq) ThrowInvalid("query entry out of range");
        for (auto it = std::lower_bound(s.begin(), s.end(), std::make_pair(key, uint32_t(0)));
             it != s.end() && it->first == key; ++it)
          if (!std::binary_search(rm, rm + nrm, it->second)) perKey[k].emplace_back(q, it->second);
      }
    }
  });
  std::vector<std::pair<uint32_t, uint32_t>> all;
  for (auto& v : perKey) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  Hits out;
  out.indptr.assign(nq + 1, 0);
  for (auto& [q, id] : all) ++out.indptr[q + 1];
  for (uint64_t q = 0; q < nq; ++q) out.indptr[q + 1] += out.indptr[q];
  out.ids.resize(all.size());
  for (size_t i = 0; i < all.size(); ++i) out.ids[i] = all[i].second;
  return out;
}

LiveRows Records(const std::vector<Bytes>& recs, const uint32_t* rm, uint64_t nrm) {
  struct Rec {
    uint32_t id, flags;
    uint64_t fp;
    bool operator<(const Rec& o) const { return id != o.id ? id < o.id : fp != o.fp ? fp < o.fp : flags < o.flags; }
    bool operator==(const Rec& o) const { return id == o.id && fp == o.fp && flags == o.flags; }
  };
  std::vector<Rec> all;
  for (const Bytes& b : recs) {
    if (b.size % kRecord)
      throw Error("CUSIM_STORAGE_ERROR", "a record key holds a partial record: not a cusim LSH index, or damaged");
    for (size_t i = 0; i < b.size; i += kRecord)
      all.push_back({Get32(b.data + i), Get32(b.data + i + 4), Get64(b.data + i + 8)});
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  LiveRows out;
  for (size_t i = 0; i < all.size(); ++i) {
    if (i > 0 && all[i].id == all[i - 1].id)
      throw Error("CUSIM_STORAGE_ERROR",
                  "id " + std::to_string(all[i].id) + " was inserted twice with different signatures");
    if (all[i].flags > kEmptyFlag) throw Error("CUSIM_STORAGE_ERROR", "a record has unknown flags: damaged index");
    if (std::binary_search(rm, rm + nrm, all[i].id)) continue;
    out.ids.push_back(all[i].id);
    out.fp.push_back(all[i].fp);
    out.empty.push_back(uint8_t(all[i].flags & kEmptyFlag));
  }
  return out;
}

Classes FingerprintClasses(const uint64_t* fp, const uint8_t* empty, uint64_t n) {
  std::vector<std::pair<uint64_t, uint32_t>> k;
  for (uint32_t i = 0; i < n; ++i)
    if (!empty[i]) k.emplace_back(fp[i], i);
  std::sort(k.begin(), k.end());
  std::vector<std::pair<uint32_t, std::pair<size_t, size_t>>> runs;  // (first member, [b, e))
  for (size_t s = 0; s < k.size();) {
    size_t t = s + 1;
    while (t < k.size() && k[t].first == k[s].first) ++t;
    if (t - s > 1) runs.push_back({k[s].second, {s, t}});
    s = t;
  }
  std::sort(runs.begin(), runs.end());
  Classes out;
  out.ptr.push_back(0);
  for (auto& r : runs) {
    for (size_t i = r.second.first; i < r.second.second; ++i) out.members.push_back(k[i].second);
    out.ptr.push_back(uint32_t(out.members.size()));
  }
  return out;
}

std::vector<uint64_t> Pairs(const uint8_t* ed, uint64_t ne, const uint32_t* ld, const uint32_t* rd, uint64_t nl) {
  std::vector<std::pair<uint64_t, uint32_t>> s;
  s.reserve(ne);
  for (uint64_t i = 0; i < ne; ++i) {
    const uint32_t idx = IndexOf(ld, nl, Get32(ed + i * kBandEntry + 8));
    if (idx == kNone || rd[idx] == kNone) continue;
    s.emplace_back(Get64(ed + i * kBandEntry), rd[idx]);
  }
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  std::vector<uint64_t> out;
  for (size_t a = 0; a < s.size();) {
    size_t b = a + 1;
    while (b < s.size() && s[b].first == s[a].first) ++b;
    for (size_t i = a; i < b; ++i)
      for (size_t j = i + 1; j < b; ++j) out.push_back((uint64_t(s[i].second) << 32) | s[j].second);
    a = b;
  }
  return out;
}

std::vector<uint64_t> Merge(const std::vector<std::pair<const uint64_t*, uint64_t>>& chunks) {
  uint64_t total = 0, maxHigh = 0;
  for (auto& c : chunks) total += c.second;
  std::vector<uint64_t> out;
  out.reserve(total);
  for (auto& c : chunks) out.insert(out.end(), c.first, c.first + c.second);
  for (uint64_t x : out) maxHigh = std::max(maxHigh, x >> 32);
  lsh::SortUnique(out, maxHigh);
  return out;
}

}  // namespace lsh_store
}  // namespace cusim
