// GPU set similarity join, fgssjoin's index / filter / verify scheme without
// its dense block x block score matrix:
//  - the size-sorted indexed collection is cut into blocks of `blockSize` sets;
//    per block an inverted index of prefixes is built (count, CUB scan,
//    scatter, then each posting list sorted by set position);
//  - a probe's partners are a contiguous range of set positions (the size
//    window, and in a self-join only smaller positions), so in each sorted
//    posting list the probe reads exactly that range, found by a warp-wide
//    32-ary search: no posting outside the window is ever loaded;
//  - probes go in batches sized so their candidate tables fit a fixed budget;
//    each probe owns a SPARSE open-addressing table (capacity from an exact
//    upper bound on its in-window postings), filled by one warp without
//    atomics (a set holds a token once): partial overlap, last matched
//    positions; the same warp applies the positional filter and compacts the
//    survivors through a shared-memory stage (one atomic per 64);
//  - a verify kernel merges the suffixes after the last prefix match with
//    early termination, applies the exact final test (join::Accept, shared with
//    the CPU), maps positions to input ids and appends (left, right) keys with
//    (overlap, similarity) values to a device result buffer;
//  - batches run back to back; the result buffer is sorted on the GPU (CUB
//    radix sort on left << 32 | right) and downloaded once per chunk.
#include <cub/cub.cuh>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <vector>

#include "../native/host_buffer.h"
#include "../native/join.h"
#include "../native/join_plan.h"
#include "../native/parallel.h"
#include "../native/phase_log.h"
#include "common/gpu.cuh"

namespace cusim {
namespace join {
namespace {

// A candidate-table slot: one 16-byte record, so the three updates a posting
// makes touch one memory sector. key = candidate position + 1 (0 = empty), so
// clearing a table is a single memset to zero.
struct alignas(16) Slot {
  uint32_t key;
  uint32_t count;
  unsigned long long last;
};
constexpr unsigned kThreads = 256;
constexpr unsigned kFull = 0xffffffffu;
constexpr int kIlp = 2;
constexpr uint32_t kStage = 64;  // staged candidates per warp in FilterKernel

struct Cand {
  uint32_t x, y, count, lastX, lastY;
};

// Counters in device memory: candidates of the running batch (the filter's
// write cursor), result pairs and candidates since the last chunk.
enum Counter { kBatchCands = 0, kPairs = 1, kCands = 2, kCounters = 3 };

// A posting: indexed set position << 32 | the token's position in that set.
// Sorting a list sorts it by set position. Where every indexed set has fewer
// than 2^16 tokens ("packed"), the low word also carries the set's size
// (size << 16 | position), so the filter's final pass needs no load of the
// set's offsets per candidate.
__device__ __forceinline__ unsigned long long Posting(uint64_t set, uint32_t pos, uint32_t size, bool packed) {
  return (static_cast<unsigned long long>(set) << 32) | (packed ? size << 16 | pos : pos);
}

__device__ __forceinline__ uint32_t SizeOf(const uint64_t* off, uint64_t i) { return uint32_t(off[i + 1] - off[i]); }

__device__ __forceinline__ uint32_t Mix(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

__device__ __forceinline__ uint32_t PrefixLen(const Bounds& B, bool mid, uint32_t a) {
  return mid ? B.IndexPrefix(a) : B.ProbePrefix(a);
}

// First q in [s, e) whose set position is >= lo (e if none); lists are sorted
// by set position. 32-ary: each round the warp samples 32 evenly spaced
// postings and keeps the gap where the position crosses lo.
__device__ uint64_t WarpLowerBound(const unsigned long long* __restrict__ p, uint64_t s, uint64_t e, uint32_t lo,
                                   unsigned lane) {
  while (e - s > 32) {
    const uint64_t step = (e - s + 31) / 32;
    const uint64_t i = s + lane * step;
    const bool below = i < e && uint32_t(p[i] >> 32) < lo;
    const unsigned c = __popc(__ballot_sync(kFull, below));
    if (c == 0) return s;
    const uint64_t ns = s + (c - 1) * step + 1;
    e = min(e, s + c * step);
    s = ns;
  }
  const uint64_t i = s + lane;
  const bool below = i < e && uint32_t(p[i] >> 32) < lo;
  return s + __popc(__ballot_sync(kFull, below));
}

// The same search by one thread (binary).
__device__ __forceinline__ uint64_t LowerBound(const unsigned long long* __restrict__ p, uint64_t s, uint64_t e,
                                               uint32_t lo) {
  while (s < e) {
    const uint64_t mid = s + (e - s) / 2;
    if (uint32_t(p[mid] >> 32) < lo)
      s = mid + 1;
    else
      e = mid;
  }
  return s;
}

__global__ void CountPrefixKernel(const uint32_t* __restrict__ tok, const uint64_t* __restrict__ off, uint64_t i0,
                                  uint64_t i1, Bounds B, bool mid, unsigned long long* __restrict__ cnt) {
  for (uint64_t i = i0 + uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < i1;
       i += uint64_t(gridDim.x) * blockDim.x) {
    const uint32_t L = PrefixLen(B, mid, SizeOf(off, i));
    for (uint32_t k = 0; k < L; k++) atomicAdd(&cnt[tok[off[i] + k]], 1ull);
  }
}

// Unordered within each list; the lists are sorted afterwards.
__global__ void ScatterPrefixKernel(const uint32_t* __restrict__ tok, const uint64_t* __restrict__ off, uint64_t i0,
                                    uint64_t i1, Bounds B, bool mid, bool packed,
                                    unsigned long long* __restrict__ cursor,
                                    unsigned long long* __restrict__ postings) {
  for (uint64_t i = i0 + uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < i1;
       i += uint64_t(gridDim.x) * blockDim.x) {
    const uint32_t size = SizeOf(off, i), L = PrefixLen(B, mid, size);
    for (uint32_t k = 0; k < L; k++) {
      const unsigned long long at = atomicAdd(&cursor[tok[off[i] + k]], 1ull);
      postings[at] = Posting(i, k, size, packed);
    }
  }
}

// Upper bound on each probe's distinct candidates: the postings of its prefix
// tokens inside its window [lo, hi) of set positions.
__global__ void PostingsPerProbeKernel(const uint32_t* __restrict__ tok, const uint64_t* __restrict__ off, uint64_t p0,
                                       uint64_t p1, Bounds B, const unsigned long long* __restrict__ start,
                                       const unsigned long long* __restrict__ postings, const uint32_t* __restrict__ lo,
                                       const uint32_t* __restrict__ hi, uint64_t* __restrict__ hits) {
  for (uint64_t i = p0 + uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < p1;
       i += uint64_t(gridDim.x) * blockDim.x) {
    const uint32_t wl = lo[i - p0], wh = hi[i - p0];
    uint64_t h = 0;
    if (wl < wh) {
      const uint32_t L = B.ProbePrefix(SizeOf(off, i));
      for (uint32_t k = 0; k < L; k++) {
        const uint32_t t = tok[off[i] + k];
        const uint64_t s = start[t], e = start[t + 1];
        const uint64_t a = LowerBound(postings, s, e, wl);
        h += LowerBound(postings, a, e, wh) - a;
      }
    }
    hits[i - p0] = h;
  }
}

// Compact slots (8 bytes, one word: CAS claims and fills a slot at once,
// and the tables, their clearing and the final pass move half the bytes),
// where every field fits: the key relative to the probe's window start (the
// window is at most a block, 2^20 sets), the count and last probe position
// (probes of at most 1023 tokens), the last indexed position and the indexed
// set's size (at most 2047 tokens).
namespace compact {
constexpr unsigned long long kKey = (1ull << 21) - 1;
constexpr int kCount = 21, kLastX = 31, kLastY = 42, kSize = 53;
constexpr unsigned long long kField10 = 1023, kField11 = 2047;
}  // namespace compact

// One warp per probe. Table traffic goes through L2 (__ldcg/__stcg): slots are
// claimed by atomicCAS, which L1 does not see.
template <bool Compact>
__global__ void FilterKernel(const uint32_t* __restrict__ ptok, const uint64_t* __restrict__ poff,
                             const uint64_t* __restrict__ ioff, const unsigned long long* __restrict__ start,
                             const unsigned long long* __restrict__ postings, const uint32_t* __restrict__ probes,
                             const uint64_t* __restrict__ tableOff, uint64_t nProbes, uint64_t p0,
                             const uint32_t* __restrict__ winLo, const uint32_t* __restrict__ winHi, Bounds B,
                             bool packed, Slot* table, Cand* __restrict__ cands,
                             unsigned long long* __restrict__ counters) {
  unsigned long long* const table64 = reinterpret_cast<unsigned long long*>(table);
  __shared__ Cand stage[kThreads / 32][kStage];
  const unsigned lane = threadIdx.x & 31;
  const uint64_t warps = uint64_t(gridDim.x) * blockDim.x / 32;
  for (uint64_t w = (uint64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; w < nProbes; w += warps) {
    const uint32_t x = probes[w];
    const uint32_t lo = winLo[x - p0], hi = winHi[x - p0];
    const uint64_t base = tableOff[w];
    const uint32_t mask = uint32_t(tableOff[w + 1] - base) - 1;
    const uint32_t a = SizeOf(poff, x);
    const uint32_t* xr = ptok + poff[x];
    for (uint32_t k = 0, L = B.ProbePrefix(a); k < L; k++) {
      const uint32_t t = xr[k];
      const uint64_t e = start[t + 1];
      // kIlp postings per lane per round, their first table probes loaded
      // together: the filter waits on memory, one load chain per posting.
      for (uint64_t qb = WarpLowerBound(postings, start[t], e, lo, lane) + lane;; qb += 32 * kIlp) {
        unsigned long long pe[kIlp];
        bool live[kIlp];
        uint32_t slot[kIlp];
        uint4 cur[kIlp];
        unsigned long long cur64[kIlp];
#pragma unroll
        for (int u = 0; u < kIlp; u++) {
          const uint64_t q = qb + 32 * u;
          pe[u] = q < e ? postings[q] : ~0ull;
          live[u] = uint32_t(pe[u] >> 32) < hi;  // sorted: past the window, or past the list
        }
#pragma unroll
        for (int u = 0; u < kIlp; u++) {
          slot[u] = Mix(uint32_t(pe[u] >> 32)) & mask;
          if constexpr (Compact) {
            if (live[u]) cur64[u] = __ldcg(&table64[base + slot[u]]);
          } else {
            if (live[u]) cur[u] = __ldcg(reinterpret_cast<const uint4*>(&table[base + slot[u]]));
          }
        }
#pragma unroll
        for (int u = 0; u < kIlp; u++) {
          if (!live[u]) continue;
          if constexpr (Compact) {
            // The same protocol in one word: an empty slot is claimed and
            // filled by one CAS; a slot holding the key gets a plain store
            // (no other lane holds that key).
            using namespace compact;
            const unsigned long long key = uint32_t(pe[u] >> 32) - lo + 1;
            const unsigned long long posY = uint32_t(pe[u]) & 0xffffu, size = uint32_t(pe[u]) >> 16;
            const unsigned long long last = (static_cast<unsigned long long>(k) << kLastX) | (posY << kLastY);
            uint32_t sl = slot[u];
            unsigned long long c = cur64[u];
            for (;;) {
              if (c == 0) {
                c = atomicCAS(&table64[base + sl], 0ull, key | (1ull << kCount) | last | (size << kSize));
                if (c == 0) break;
              }
              if ((c & kKey) == key) {
                const unsigned long long count = ((c >> kCount) & kField10) + 1;
                __stcg(&table64[base + sl], (c & (kKey | (kField11 << kSize))) | (count << kCount) | last);
                break;
              }
              sl = (sl + 1) & mask;
              c = __ldcg(&table64[base + sl]);
            }
            continue;
          }
          const uint32_t key = uint32_t(pe[u] >> 32) + 1;
          // A set holds a token once, so within one token's list no two
          // postings share a key, and the __syncwarp below orders the lists:
          // a slot already holding the key was not touched since the load
          // above. Only empty slots are raced for (by the lanes, and by this
          // lane's earlier posting), so they are claimed by CAS. An empty
          // first slot is claimed at once, without loading it again: one L2
          // round trip fewer per new candidate. A slot never changes key once
          // claimed, so a probe that misses goes on from the next slot.
          uint4* at = reinterpret_cast<uint4*>(&table[base + slot[u]]);
          uint4 c = cur[u];
          bool claimed = false;
          if (c.x == 0) {
            const uint32_t old = atomicCAS(&table[base + slot[u]].key, 0u, key);
            claimed = old == 0;
            c = make_uint4(claimed ? key : old, 0, 0, 0);
            if (!claimed && old == key) c = __ldcg(at);
          }
          if (!claimed && c.x != key) {
            uint32_t sl = (slot[u] + 1) & mask;
            for (;;) {
              at = reinterpret_cast<uint4*>(&table[base + sl]);
              c = __ldcg(at);
              if (c.x == 0) {
                const uint32_t old = atomicCAS(&table[base + sl].key, 0u, key);
                if (old == 0) {
                  c = make_uint4(key, 0, 0, 0);
                  break;
                }
                c.x = old;
              }
              if (c.x == key) break;
              sl = (sl + 1) & mask;
            }
          }
          // Matches of one pair come in rising (probe, indexed) positions:
          // the latest is the last match.
          __stcg(at, make_uint4(key, c.y + 1, uint32_t(pe[u]), k));
        }
        if (!__shfl_sync(kFull, live[kIlp - 1], 31)) break;
      }
      __syncwarp();
    }
    __syncwarp();
    // Survivors gather in this warp's shared-memory stage and go out kStage
    // at a time: one atomic on the shared cursor per flush, not per 32 slots
    // (that atomic was the filter's largest stall).
    Cand* st = stage[threadIdx.x >> 5];
    uint32_t staged = 0;  // warp-uniform
    auto flush = [&]() {
      unsigned long long at = 0;
      if (lane == 0) at = atomicAdd(&counters[kBatchCands], (unsigned long long)staged);
      at = __shfl_sync(kFull, at, 0);
      __syncwarp();
      for (uint32_t i = lane; i < staged; i += 32) cands[at + i] = st[i];
      __syncwarp();
      staged = 0;
    };
    for (uint64_t s0 = 0; s0 <= mask; s0 += 32) {
      const uint64_t slot = base + s0 + lane;
      bool keep = false;
      Cand c{};
      if (Compact && s0 + lane <= mask) {
        using namespace compact;
        const unsigned long long v = __ldcg(&table64[slot]);
        if (v != 0) {
          c = Cand{x, lo + uint32_t(v & kKey) - 1, uint32_t(v >> kCount) & uint32_t(kField10),
                   uint32_t(v >> kLastX) & uint32_t(kField11), uint32_t(v >> kLastY) & uint32_t(kField11)};
          const uint32_t b = uint32_t(v >> kSize);
          keep = c.count + min(a - 1 - c.lastX, b - 1 - c.lastY) >= B.Alpha(a, b);
        }
      } else if (s0 + lane <= mask) {
        // The whole slot in one load (key, count, last match).
        const uint4 sv = __ldcg(reinterpret_cast<const uint4*>(&table[slot]));
        if (sv.x != 0) {
          const uint32_t y = sv.x - 1;
          const uint32_t lastY = packed ? sv.z & 0xffffu : sv.z;
          c = Cand{x, y, sv.y, sv.w, lastY};
          const uint32_t b = packed ? sv.z >> 16 : SizeOf(ioff, y);
          // PPJoin's positional bound at the last prefix match.
          keep = c.count + min(a - 1 - c.lastX, b - 1 - c.lastY) >= B.Alpha(a, b);
        }
      }
      const unsigned ballot = __ballot_sync(kFull, keep);
      const uint32_t nk = __popc(ballot);
      if (staged + nk > kStage) flush();
      if (keep) st[staged + __popc(ballot & ((1u << lane) - 1))] = c;
      staged += nk;
    }
    if (staged) flush();
  }
}

// Every common token up to the last prefix match is already counted, so only
// the suffixes after it are merged; stop as soon as the bound cannot be met.
// Survivors of the exact test go to the chunk's result buffer as
// (left << 32 | right, overlap | float similarity bits << 32) in input ids.
__global__ void VerifyKernel(const uint32_t* __restrict__ ptok, const uint64_t* __restrict__ poff,
                             const uint32_t* __restrict__ itok, const uint64_t* __restrict__ ioff,
                             const uint32_t* __restrict__ pids, const uint32_t* __restrict__ iids,
                             const Cand* __restrict__ cands, uint64_t begin, uint64_t end, Bounds B, bool self,
                             unsigned long long* __restrict__ keys, unsigned long long* __restrict__ vals,
                             unsigned long long* __restrict__ counters) {
  for (uint64_t i = begin + uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < end;
       i += uint64_t(gridDim.x) * blockDim.x) {
    const Cand c = cands[i];
    const uint32_t a = SizeOf(poff, c.x), b = SizeOf(ioff, c.y);
    const uint32_t need = B.Alpha(a, b);
    const uint32_t* xr = ptok + poff[c.x];
    const uint32_t* yr = itok + ioff[c.y];
    uint32_t o = c.count, p = c.lastX + 1, q = c.lastY + 1;
    while (p < a && q < b) {
      if (o + min(a - p, b - q) < need) break;
      const uint32_t u = xr[p], v = yr[q];
      o += u == v;
      p += u <= v;
      q += v <= u;
    }
    double sim;
    if (o >= need && Accept(B.m, B.t, a, b, o, &sim)) {
      uint32_t l = pids[c.x], r = iids[c.y];
      if (self && l > r) {
        const uint32_t tmp = l;
        l = r;
        r = tmp;
      }
      const unsigned long long at = atomicAdd(&counters[kPairs], 1ull);
      keys[at] = (static_cast<unsigned long long>(l) << 32) | r;
      vals[at] = o | (static_cast<unsigned long long>(__float_as_uint(float(sim))) << 32);
    }
  }
}

// Closes a batch: its candidates join the chunk's count, the cursor rewinds.
__global__ void TallyKernel(unsigned long long* counters) {
  counters[kCands] += counters[kBatchCands];
  counters[kBatchCands] = 0;
}

// Sorted (key, value) records to the chunk's four arrays: lefts then rights
// in lr, overlaps then similarity bits in os.
__global__ void SplitKernel(const unsigned long long* __restrict__ keys, const unsigned long long* __restrict__ vals,
                            uint64_t n, uint32_t* __restrict__ lr, uint32_t* __restrict__ os) {
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    const unsigned long long k = keys[i], v = vals[i];
    lr[i] = uint32_t(k >> 32);
    lr[n + i] = uint32_t(k);
    os[i] = uint32_t(v);
    os[n + i] = uint32_t(v >> 32);
  }
}

int Log2Ceil(uint64_t v) { return v <= 1 ? 0 : 64 - __builtin_clzll(v - 1); }
uint64_t NextPow2(uint64_t v) { return uint64_t(1) << Log2Ceil(v); }

// sum of f(i) over [0, n), on all cores.
template <typename F>
uint64_t SumParallel(uint64_t n, F f) {
  std::atomic<uint64_t> total{0};
  ParallelFor(n, 16384, [&](size_t b, size_t e) {
    uint64_t s = 0;
    for (size_t i = b; i < e; i++) s += f(i);
    total += s;
  });
  return total;
}

int BitsFor(uint64_t v) {
  int b = 1;
  while (b < 64 && (v >> b)) b++;
  return b;
}

class CudaJoiner final : public Joiner {
 public:
  CudaJoiner(std::shared_ptr<const Prepared> p, int device, uint64_t blockSize, const CudaTuning& tuning)
      : p_(std::move(p)), device_(device), guard_(device) {
    const uint64_t m = p_->indexed().n();
    // Capped so a probe's table (up to 2 * block entries) has 32-bit slots.
    block_ = std::min<uint64_t>(blockSize ? blockSize : kDefaultBlock, 1ull << 24);
    sms_ = unsigned(gpu::MultiprocessorCount(device));
    Upload(p_->probe, &dPtok_, &dPoff_, &dPids_, "join probe sets");
    if (!p_->self) Upload(p_->index, &dItok_, &dIoff_, &dIids_, "join indexed sets");
    Mark("setup upload", kTransfer);
    start_.reset(uint64_t(p_->vocab) + 1, "join inverted index offsets");
    cursor_.reset(uint64_t(p_->vocab) + 1, "join inverted index cursors");
    counters_.reset(kCounters, "join counters");
    CUSIM_CUDA_CHECK(cudaMemsetAsync(counters_.data(), 0, kCounters * 8, stream_));
    // Measured after the uploads. A single probe's table holds up to 2 * block
    // entries; the budget must fit one.
    size_t freeB = 0, totalB = 0;
    CUSIM_CUDA_CHECK(cudaMemGetInfo(&freeB, &totalB));
    tableBudget_ = std::max<uint64_t>(std::min<uint64_t>(kTableBudget, freeB / 8 / sizeof(Slot)), 1ull << 22);
    tableBudget_ = std::max<uint64_t>(tableBudget_, NextPow2(2 * std::min<uint64_t>(block_, std::max<uint64_t>(m, 1))));
    std::atomic<uint64_t> maxId{0};
    for (const Collection* c : {&p_->probe, &p_->index}) {
      ParallelFor(c->ids.size(), 1 << 16, [&](size_t b, size_t e) {
        const uint64_t m = *std::max_element(c->ids.begin() + b, c->ids.begin() + e);
        uint64_t cur = maxId.load();
        while (m > cur && !maxId.compare_exchange_weak(cur, m)) {
        }
      });
    }
    keyBits_ = 32 + BitsFor(maxId.load());
    packed_ = m > 0 && p_->indexed().size(m - 1) < (1u << 16);  // sizes ascend
    const uint64_t np = p_->probe.n();
    compact_ = packed_ && p_->indexed().size(m - 1) <= compact::kField11 && np > 0 &&
               p_->probe.size(np - 1) <= compact::kField10 && block_ <= (1ull << 20) && !tuning.wideSlots;
    chunkPairs_ = std::max<uint64_t>(1, std::min(tuning.maxChunkPairs, kChunkPairs));
    Mark("setup", kBuild);
  }

  bool Next(Chunk* out, const CancelToken& cancel) override {
    gpu::DeviceGuard guard(device_);
    log_.Skip();
    stages.Skip();
    for (;;) {
      cancel.check();
      cancel.report(blockStart_, p_->indexed().n());
      if (pendingDone_ < pendingCands_) {
        // The filtered batch is verified in slices that cannot overflow the
        // chunk (a candidate yields at most one pair); a full chunk goes out
        // first.
        if (pairs_ >= chunkPairs_) {
          Flush(out);
          return true;
        }
        Verify(out);
        continue;
      }
      if (batch_ < batches_.size()) {
        Filter(batch_++, out);
        continue;
      }
      if (blockStart_ < p_->indexed().n()) {
        BuildBlock(out);
        continue;
      }
      // The last chunk; also carries the statistics of batches without pairs.
      if (pairs_ > 0 || out->candidates > 0 || out->kernelMs > 0) {
        Flush(out);
        return true;
      }
      return false;
    }
  }

 private:
  static constexpr uint64_t kDefaultBlock = 1ull << 20;
  // Candidate-table entries (16 B each) per probe batch: up to 4 GiB, an
  // eighth of free memory. Many probes per batch keep every SM's warps busy
  // (the filter waits on memory); the cost of clearing scales with use, not size.
  static constexpr uint64_t kTableBudget = 1ull << 28;
  static constexpr uint64_t kMaxBatchProbes = 1ull << 22;
  // Result pairs gathered on the GPU before a chunk is sorted and returned
  // (16 B each, twice for the sort: 2 GiB).
  static constexpr uint64_t kChunkPairs = 1ull << 26;

  // The profile's phase and the result's stage (join.h) in one mark.
  void Mark(const char* phase, Stage s) {
    log_.Mark(phase);
    stages.Mark(s);
  }

  const uint32_t* Ptok() const { return dPtok_.data(); }
  const uint64_t* Poff() const { return dPoff_.data(); }
  const uint32_t* Itok() const { return p_->self ? dPtok_.data() : dItok_.data(); }
  const uint64_t* Ioff() const { return p_->self ? dPoff_.data() : dIoff_.data(); }
  const uint32_t* Iids() const { return p_->self ? dPids_.data() : dIids_.data(); }

  void Upload(const Collection& c, gpu::DeviceBuffer<uint32_t>* tok, gpu::DeviceBuffer<uint64_t>* off,
              gpu::DeviceBuffer<uint32_t>* ids, const char* what) {
    tok->reset(std::max<size_t>(c.tokens.size(), 1), what);
    off->reset(c.offsets.size(), what);
    ids->reset(std::max<size_t>(c.ids.size(), 1), what);
    Mark("setup alloc", kTransfer);
    if (!c.tokens.empty())
      CUSIM_CUDA_CHECK(
          cudaMemcpyAsync(tok->data(), c.tokens.data(), c.tokens.size() * 4, cudaMemcpyHostToDevice, stream_));
    CUSIM_CUDA_CHECK(
        cudaMemcpyAsync(off->data(), c.offsets.data(), c.offsets.size() * 8, cudaMemcpyHostToDevice, stream_));
    if (!c.ids.empty())
      CUSIM_CUDA_CHECK(cudaMemcpyAsync(ids->data(), c.ids.data(), c.ids.size() * 4, cudaMemcpyHostToDevice, stream_));
    stream_.sync();
  }

  unsigned Grid(uint64_t work) const { return gpu::GridFor(work, kThreads, sms_ * 16); }

  // Grows a page-locked staging buffer by half again at least, so blocks of
  // slowly rising probe counts do not pin memory anew each time.
  template <typename T>
  static void Grow(gpu::PinnedBuffer<T>* b, uint64_t n, const char* what) {
    if (n > b->size()) b->reserve(std::max<uint64_t>(n, b->size() + b->size() / 2), what);
  }

  // First position in [lo, hi) of `c` whose size satisfies pred (pred monotone).
  template <typename Pred>
  static uint64_t FirstWhere(const Collection& c, uint64_t lo, uint64_t hi, Pred pred) {
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo) / 2;
      if (pred(c.size(mid)))
        hi = mid;
      else
        lo = mid + 1;
    }
    return lo;
  }

  // Indexes the next block and plans its probe batches.
  void BuildBlock(Chunk* out) {
    const Prepared& p = *p_;
    const Bounds& B = p.bounds;
    const Collection& Y = p.indexed();
    const Collection& X = p.probe;
    const uint64_t i0 = blockStart_, i1 = std::min(Y.n(), i0 + block_);
    blockStart_ = i1;
    batches_.clear();
    batch_ = 0;
    const uint32_t smin = Y.size(i0), smax = Y.size(i1 - 1);
    // Skip the block when no probe's size bounds reach its sizes.
    const uint64_t pLo = p.self ? i0 : FirstWhere(X, 0, X.n(), [&](uint32_t a) { return B.MaxSize(a) >= smin; });
    const uint64_t pHi = FirstWhere(X, pLo, X.n(), [&](uint32_t a) { return B.MinSize(a) > smax; });
    if (pLo >= pHi) return;
    const uint64_t entries = SumParallel(i1 - i0, [&](uint64_t i) { return p.IndexPrefix(i0 + i); });
    if (entries == 0) return;

    // The index first: its kernels run while the host computes the windows.
    gpu::Event e0, e1;
    e0.record(stream_);
    const uint64_t V = uint64_t(p.vocab) + 1;
    CUSIM_CUDA_CHECK(cudaMemsetAsync(cursor_.data(), 0, V * 8, stream_));
    CountPrefixKernel<<<Grid(i1 - i0), kThreads, 0, stream_>>>(Itok(), Ioff(), i0, i1, B, p.self, cursor_.data());
    CUSIM_LAUNCH_CHECK();
    size_t tempBytes = 0;
    CUSIM_CUDA_CHECK(
        cub::DeviceScan::ExclusiveSum(nullptr, tempBytes, cursor_.data(), start_.data(), int64_t(V), stream_));
    scanTemp_.reserve(std::max<size_t>(tempBytes, 1), "join scan scratch");
    CUSIM_CUDA_CHECK(
        cub::DeviceScan::ExclusiveSum(scanTemp_.data(), tempBytes, cursor_.data(), start_.data(), int64_t(V), stream_));
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(cursor_.data(), start_.data(), V * 8, cudaMemcpyDeviceToDevice, stream_));
    sortTemp_.reserve(entries, "join prefix postings");
    ScatterPrefixKernel<<<Grid(i1 - i0), kThreads, 0, stream_>>>(Itok(), Ioff(), i0, i1, B, p.self, packed_,
                                                                 cursor_.data(), sortTemp_.data());
    CUSIM_LAUNCH_CHECK();
    // Each list sorted by set position, so a probe reads just its window.
    // DoubleBuffer: CUB needs no third copy; the sorted lists end up in either.
    postings_.reserve(entries, "join prefix postings");
    cub::DoubleBuffer<unsigned long long> lists(sortTemp_.data(), postings_.data());
    tempBytes = 0;
    CUSIM_CUDA_CHECK(cub::DeviceSegmentedSort::SortKeys(nullptr, tempBytes, lists, int64_t(entries), int64_t(V - 1),
                                                        start_.data(), start_.data() + 1, stream_));
    scanTemp_.reserve(std::max<size_t>(tempBytes, 1), "join sort scratch");
    CUSIM_CUDA_CHECK(cub::DeviceSegmentedSort::SortKeys(scanTemp_.data(), tempBytes, lists, int64_t(entries),
                                                        int64_t(V - 1), start_.data(), start_.data() + 1, stream_));
    lists_ = lists.Current();
    e1.record(stream_);

    // Each probe's window of partner positions in this block: the allowed
    // sizes, and in a self-join only sets before the probe. Probes come in
    // size order, so the window's ends are searched once per distinct size
    // (per slice of probes, on all cores).
    const uint64_t np = pHi - pLo;
    // Page-locked and kept across blocks: pageable copies are staged by the
    // driver on one thread (with a sync), and fresh buffers per block fault
    // their pages in again.
    Grow(&hLo_, np, "join probe windows (host)");
    Grow(&hHi_, np, "join probe windows (host)");
    uint32_t* const lo = hLo_.data();
    uint32_t* const hi = hHi_.data();
    ParallelFor(np, 8192, [&](size_t b, size_t e) {
      uint32_t lastA = 0;
      uint64_t wl = 0, wh = 0;
      for (size_t j = b; j < e; j++) {
        const uint64_t x = pLo + j;
        const uint32_t a = X.size(x);
        if (a != lastA || j == b) {
          lastA = a;
          const uint32_t minS = B.MinSize(a), maxS = B.MaxSize(a);
          wl = FirstWhere(Y, i0, i1, [&](uint32_t v) { return v >= minS; });
          wh = FirstWhere(Y, wl, i1, [&](uint32_t v) { return v > maxS; });
        }
        const uint64_t h = p.self ? std::min(wh, x) : wh;
        lo[j] = uint32_t(wl);
        hi[j] = uint32_t(std::max(h, wl));
      }
    });
    Mark("block windows", kPlan);
    winLo_.reserve(np, "join probe windows");
    winHi_.reserve(np, "join probe windows");
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(winLo_.data(), lo, np * 4, cudaMemcpyHostToDevice, stream_));
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(winHi_.data(), hi, np * 4, cudaMemcpyHostToDevice, stream_));
    hits_.reserve(np, "join postings per probe");
    // Kernel time excludes the gap where the GPU may wait for the windows.
    gpu::Event e2, e3;
    e2.record(stream_);
    PostingsPerProbeKernel<<<Grid(np), kThreads, 0, stream_>>>(Ptok(), Poff(), pLo, pHi, B, start_.data(), lists_,
                                                               winLo_.data(), winHi_.data(), hits_.data());
    CUSIM_LAUNCH_CHECK();
    e3.record(stream_);
    Grow(&hHits_, np, "join postings per probe (host)");
    const uint64_t* const hits = hHits_.data();
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(hHits_.data(), hits_.data(), np * 8, cudaMemcpyDeviceToHost, stream_));
    stream_.sync();
    out->kernelMs += gpu::ElapsedMs(e0, e1) + gpu::ElapsedMs(e2, e3);
    blockP0_ = pLo;
    Mark("block index", kKernel);

    // Plan batches: per probe a power-of-two table at least 1.5x its distinct
    // candidates, bounded by its in-window postings (which count a candidate
    // once per shared prefix token) and the window's width: loaded at most 2/3.
    lg_.resize(np);  // log2 of the capacity; 0: no candidates
    most_.resize(np);
    uint8_t* const lg = lg_.data();
    uint64_t* const most = most_.data();
    ParallelFor(np, 8192, [&](size_t b, size_t e) {
      for (size_t j = b; j < e; j++) {
        const uint64_t distinct = std::min<uint64_t>(hits[j], hi[j] - lo[j]);
        lg[j] = distinct == 0 ? 0 : uint8_t(Log2Ceil(std::max<uint64_t>(distinct + distinct / 2 + 1, 8)));
        most[j] = distinct;
      }
    });
    // The cut on all cores (join_plan.h), the same as a serial greedy scan.
    PlanBatches(lg, most, np, pLo, tableBudget_, kMaxBatchProbes, &plan_);
    batches_.resize(plan_.batches());
    for (uint64_t b = 0; b < batches_.size(); b++) {
      Batch& cur = batches_[b];
      cur.n = plan_.start[b + 1] - plan_.start[b];
      cur.at = plan_.start[b];
      cur.tableOff = plan_.tableOff.data() + plan_.start[b] + b;
      cur.maxCands = plan_.maxCands[b];
    }
    Mark("block plan", kPlan);
    // The whole block's probes and table offsets go up in one copy from
    // page-locked memory (the batches' filters are ordered after it on the
    // stream), not in two pageable copies per batch. The staging is rewritten
    // only by the next block, after every batch's sync.
    const uint64_t K = plan_.probes.size(), nt = plan_.tableOff.size();
    if (K > 0) {
      Grow(&hProbes_, K, "join batch probes (host)");
      Grow(&hTableOff_, nt, "join batch table offsets (host)");
      ParallelCopy(hProbes_.data(), plan_.probes.data(), K * 4);
      ParallelCopy(hTableOff_.data(), plan_.tableOff.data(), nt * 8);
      probes_.reserve(K, "join batch probes");
      tableOff_.reserve(nt, "join batch table offsets");
      CUSIM_CUDA_CHECK(cudaMemcpyAsync(probes_.data(), hProbes_.data(), K * 4, cudaMemcpyHostToDevice, stream_));
      CUSIM_CUDA_CHECK(cudaMemcpyAsync(tableOff_.data(), hTableOff_.data(), nt * 8, cudaMemcpyHostToDevice, stream_));
    }
    Mark("block plan upload", kTransfer);
  }

  // Filters one batch into cands_; reads back its candidate count.
  void Filter(size_t bi, Chunk* out) {
    const Prepared& p = *p_;
    const Batch& b = batches_[bi];
    const uint64_t n = b.n, slots = b.tableOff[n];
    const uint64_t slotBytes = compact_ ? 8 : sizeof(Slot);
    table_.reserve((slots * slotBytes + sizeof(Slot) - 1) / sizeof(Slot), "join candidate tables");
    cands_.reserve(b.maxCands, "join candidates");
    gpu::Event e0, e1;
    e0.record(stream_);
    CUSIM_CUDA_CHECK(cudaMemsetAsync(table_.data(), 0, slots * slotBytes, stream_));
    auto filter = compact_ ? FilterKernel<true> : FilterKernel<false>;
    filter<<<Grid(n * 32), kThreads, 0, stream_>>>(
        Ptok(), Poff(), Ioff(), start_.data(), lists_, probes_.data() + b.at, tableOff_.data() + b.at + bi, n, blockP0_,
        winLo_.data(), winHi_.data(), p.bounds, packed_, table_.data(), cands_.data(), counters_.data());
    CUSIM_LAUNCH_CHECK();
    e1.record(stream_);
    unsigned long long nc = 0;
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(&nc, counters_.data() + kBatchCands, 8, cudaMemcpyDeviceToHost, stream_));
    stream_.sync();
    out->kernelMs += gpu::ElapsedMs(e0, e1);
    Mark("filter", kKernel);
    if (nc == 0) return;
    pendingCands_ = nc;
    pendingDone_ = 0;
  }

  // Verifies the next slice of the filtered batch into the result buffer,
  // at most the chunk's remaining room.
  void Verify(Chunk* out) {
    const Prepared& p = *p_;
    const uint64_t begin = pendingDone_;
    const uint64_t end = begin + std::min(pendingCands_ - begin, chunkPairs_ - pairs_);
    EnsureCapacity(pairs_ + (end - begin));
    gpu::Event e0, e1;
    e0.record(stream_);
    VerifyKernel<<<Grid(end - begin), kThreads, 0, stream_>>>(Ptok(), Poff(), Itok(), Ioff(), dPids_.data(), Iids(),
                                                              cands_.data(), begin, end, p.bounds, p.self, keys_.data(),
                                                              vals_.data(), counters_.data());
    CUSIM_LAUNCH_CHECK();
    pendingDone_ = end;
    if (end == pendingCands_) {
      TallyKernel<<<1, 1, 0, stream_>>>(counters_.data());
      CUSIM_LAUNCH_CHECK();
    }
    e1.record(stream_);
    unsigned long long c[kCounters];
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(c, counters_.data(), sizeof(c), cudaMemcpyDeviceToHost, stream_));
    stream_.sync();
    pairs_ = c[kPairs];
    out->candidates = c[kCands];
    out->kernelMs += gpu::ElapsedMs(e0, e1);
    Mark("verify", kKernel);
  }

  // Room for `n` result pairs, keeping those already gathered.
  void EnsureCapacity(uint64_t n) {
    if (n <= capacity_) return;
    // Doubling, from 2^20, up to the chunk budget (n never exceeds it).
    const uint64_t cap = std::max(n, std::min(std::max<uint64_t>(2 * capacity_, 1ull << 20), chunkPairs_));
    gpu::DeviceBuffer<unsigned long long> k(cap, "join result pairs"), v(cap, "join result pairs");
    if (pairs_ > 0) {
      CUSIM_CUDA_CHECK(cudaMemcpyAsync(k.data(), keys_.data(), pairs_ * 8, cudaMemcpyDeviceToDevice, stream_));
      CUSIM_CUDA_CHECK(cudaMemcpyAsync(v.data(), vals_.data(), pairs_ * 8, cudaMemcpyDeviceToDevice, stream_));
      stream_.sync();  // before the old buffers are freed
    }
    keys_ = std::move(k);
    vals_ = std::move(v);
    capacity_ = cap;
  }

  // Sorts the gathered pairs by (left, right) on the GPU and hands them over.
  void Flush(Chunk* out) {
    const uint64_t n = pairs_;
    if (n > 0) {
      gpu::Event e0, e1;
      e0.record(stream_);
      keysAlt_.reserve(n, "join result sort");
      valsAlt_.reserve(n, "join result sort");
      // DoubleBuffer: no third copy inside CUB; the idle halves then take the
      // four output arrays (left, right | overlap, similarity).
      cub::DoubleBuffer<unsigned long long> k(keys_.data(), keysAlt_.data()), v(vals_.data(), valsAlt_.data());
      size_t tempBytes = 0;
      CUSIM_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, tempBytes, k, v, int64_t(n), 0, keyBits_, stream_));
      scanTemp_.reserve(std::max<size_t>(tempBytes, 1), "join result sort scratch");
      CUSIM_CUDA_CHECK(
          cub::DeviceRadixSort::SortPairs(scanTemp_.data(), tempBytes, k, v, int64_t(n), 0, keyBits_, stream_));
      auto* lr = reinterpret_cast<uint32_t*>(k.Alternate());
      auto* os = reinterpret_cast<uint32_t*>(v.Alternate());
      SplitKernel<<<Grid(n), kThreads, 0, stream_>>>(k.Current(), v.Current(), n, lr, os);
      CUSIM_LAUNCH_CHECK();
      e1.record(stream_);
      Mark("flush sort launch", kKernel);
      out->block.allocate(n * 16);
      FirstTouch(out->block.data(), n * 16);  // while the GPU sorts
      Mark("flush host alloc", kOutput);
      out->count = n;
      auto* host = static_cast<char*>(out->block.data());
      CUSIM_CUDA_CHECK(cudaMemcpyAsync(host, lr, n * 8, cudaMemcpyDeviceToHost, stream_));
      CUSIM_CUDA_CHECK(cudaMemcpyAsync(host + n * 8, os, n * 8, cudaMemcpyDeviceToHost, stream_));
      stream_.sync();
      out->kernelMs += gpu::ElapsedMs(e0, e1);
      Mark("flush sort+copy", kTransfer);
    }
    pairs_ = 0;
    // A pending batch's candidate count (kBatchCands) survives the flush.
    CUSIM_CUDA_CHECK(cudaMemsetAsync(counters_.data() + kPairs, 0, 2 * 8, stream_));
  }

  // A batch's slices of plan_.
  struct Batch {
    uint64_t n = 0;
    uint64_t at = 0;                     // its first probe in plan_.probes (and in probes_ on the device)
    const uint64_t* tableOff = nullptr;  // n + 1 (host)
    uint64_t maxCands = 0;
  };

  PhaseLog log_{"join cuda"};  // first member: its clock starts before setup
  std::shared_ptr<const Prepared> p_;
  int device_;
  gpu::DeviceGuard guard_;
  gpu::Stream stream_;
  uint64_t block_ = 0, tableBudget_ = 0;
  unsigned sms_ = 1;
  int keyBits_ = 64;
  bool packed_ = false;   // postings carry their set's size (see Posting)
  bool compact_ = false;  // 8-byte candidate slots (see compact::)
  gpu::DeviceBuffer<uint32_t> dPtok_, dItok_, dPids_, dIids_;
  gpu::DeviceBuffer<uint64_t> dPoff_, dIoff_;
  gpu::DeviceBuffer<unsigned long long> start_, cursor_, counters_;
  gpu::DeviceBuffer<uint8_t> scanTemp_;
  gpu::DeviceBuffer<unsigned long long> postings_, sortTemp_;
  gpu::DeviceBuffer<uint32_t> winLo_, winHi_;
  gpu::DeviceBuffer<uint64_t> hits_;
  gpu::DeviceBuffer<uint32_t> probes_;
  gpu::DeviceBuffer<uint64_t> tableOff_;
  // Host staging kept across blocks (page-locked) and the plan's inputs.
  gpu::PinnedBuffer<uint32_t> hLo_, hHi_, hProbes_;
  gpu::PinnedBuffer<uint64_t> hHits_, hTableOff_;
  UninitVector<uint8_t> lg_;
  UninitVector<uint64_t> most_;
  gpu::DeviceBuffer<Slot> table_;
  gpu::DeviceBuffer<Cand> cands_;
  gpu::DeviceBuffer<unsigned long long> keys_, vals_, keysAlt_, valsAlt_;
  uint64_t pairs_ = 0, capacity_ = 0, chunkPairs_ = kChunkPairs;
  // The filtered batch: its candidates, and how many of them are verified.
  uint64_t pendingCands_ = 0, pendingDone_ = 0;
  const unsigned long long* lists_ = nullptr;  // the sorted posting lists (postings_ or sortTemp_)
  uint64_t blockStart_ = 0, blockP0_ = 0;
  std::vector<Batch> batches_;
  BatchPlan plan_;  // the current block's batches, which point into it
  size_t batch_ = 0;
};

}  // namespace

std::unique_ptr<Joiner> MakeCudaJoiner(std::shared_ptr<const Prepared> p, int device, uint64_t blockSize,
                                       const CudaTuning& tuning) {
  return std::make_unique<CudaJoiner>(std::move(p), device, blockSize, tuning);
}

}  // namespace join
}  // namespace cusim
