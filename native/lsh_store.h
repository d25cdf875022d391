// The compute side of MinHashLSH's Redis storage (lib/lsh-redis.ts,
// docs/redis-lsh.md), without N-API: native/lsh_store_napi.cc reads the
// arguments and calls these. Redis holds append-only binary entries; these
// turn signatures into entries grouped by key, and entries read back into
// query hits, candidate pairs and classes, with the same hashing as the
// in-memory index (lsh.h), so both give the same results. Entries: band (u64
// band key, u32 id), 12 bytes; record (u32 id, u32 flags, u64 signature
// fingerprint), 16 bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "lsh.h"

namespace cusim {
namespace lsh_store {

constexpr uint32_t kNone = 0xFFFFFFFFu;
constexpr size_t kBandEntry = 12, kRecord = 16;
constexpr uint32_t kEmptyFlag = 1;

// A byte range read from Redis (a Uint8Array's contents).
struct Bytes {
  const uint8_t* data;
  size_t size;
};

struct Entries {
  std::vector<uint8_t> band, rec;
  // bandOffsets: K + 1 byte offsets, K = bands * partitions; recOffsets: partitions + 1.
  std::vector<double> bandOffsets, recOffsets;
};

// Band entries grouped by key band * partitions + partition (empty rows have
// none); one record per row grouped by id partition (murmur3's fmix32 of the
// id, as lib/lsh-redis.ts computes it). Multi-threaded.
Entries MakeEntries(const lsh::SigView& signatures, const uint32_t* ids, const lsh::Params& p, uint32_t partitions);

struct Hits {
  std::vector<uint32_t> indptr, ids;
};

// stored[k] and queries[k] are band entries of one key (query entries carry
// the query's index as id): per query, the stored ids sharing a bucket,
// deduplicated, ascending, removed ids (ascending) dropped.
Hits Query(const std::vector<Bytes>& stored, const std::vector<Bytes>& queries, uint64_t queryCount,
           const uint32_t* removed, uint64_t nremoved);

struct LiveRows {
  std::vector<uint32_t> ids;
  std::vector<uint64_t> fp;
  std::vector<uint8_t> empty;
};

// Live rows, ascending by id; repeated identical records (a batch inserted
// again after a restart) count once; one id with two signatures, a partial
// record or unknown flags is a CUSIM_STORAGE_ERROR.
LiveRows Records(const std::vector<Bytes>& records, const uint32_t* removed, uint64_t nremoved);

struct Classes {
  std::vector<uint32_t> ptr, members;
};

// Runs of two or more non-empty rows with one fingerprint (members ascending,
// runs by first member): the only rows whose signatures can be identical.
Classes FingerprintClasses(const uint64_t* fp, const uint8_t* empty, uint64_t n);

// Pairs (a << 32 | b, a < b) of representatives (rep[index of id in the
// ascending live ids]) sharing a bucket in one band key; ids not live are dropped.
std::vector<uint64_t> Pairs(const uint8_t* entries, uint64_t count, const uint32_t* live, const uint32_t* rep,
                            uint64_t nlive);

// The chunks end to end, sorted and unique.
std::vector<uint64_t> Merge(const std::vector<std::pair<const uint64_t*, uint64_t>>& chunks);

}  // namespace lsh_store
}  // namespace cusim
