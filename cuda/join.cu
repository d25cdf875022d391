// GPU set similarity join, fgssjoin's index / filter / verify scheme without
// its dense block x block score matrix:
//  - the size-sorted indexed collection is cut into blocks of `blockSize` sets;
//    per block an inverted index of prefixes is built (count, CUB scan, scatter);
//  - only probes whose size bounds can meet the block's sizes are run against it;
//  - probes go in batches sized so their candidate tables fit a fixed budget;
//    each probe owns a SPARSE open-addressing table (capacity from an exact
//    upper bound on its postings), filled by one warp: partial overlap, last
//    matched positions; the same warp applies the size and positional filters
//    and compacts survivors in one pass (warp ballot + one atomic per 32);
//  - a verify kernel merges the suffixes after the last prefix match with
//    early termination and emits (probe, candidate, overlap) records.
// The host applies the exact final test (join::Accept), shared with the CPU.
#include <cub/cub.cuh>

#include <algorithm>
#include <vector>

#include "../native/join.h"
#include "gpu.cuh"

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

struct Cand {
  uint32_t x, y, count, lastX, lastY;
};

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

__global__ void CountPrefixKernel(const uint32_t* __restrict__ tok, const uint64_t* __restrict__ off, uint64_t i0,
                                  uint64_t i1, Bounds B, bool mid, unsigned long long* __restrict__ cnt) {
  for (uint64_t i = i0 + uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < i1; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint32_t L = PrefixLen(B, mid, SizeOf(off, i));
    for (uint32_t k = 0; k < L; k++) atomicAdd(&cnt[tok[off[i] + k]], 1ull);
  }
}

__global__ void ScatterPrefixKernel(const uint32_t* __restrict__ tok, const uint64_t* __restrict__ off, uint64_t i0,
                                    uint64_t i1, Bounds B, bool mid, unsigned long long* __restrict__ cursor,
                                    uint2* __restrict__ postings) {
  for (uint64_t i = i0 + uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < i1; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint32_t L = PrefixLen(B, mid, SizeOf(off, i));
    for (uint32_t k = 0; k < L; k++) {
      const unsigned long long at = atomicAdd(&cursor[tok[off[i] + k]], 1ull);
      postings[at] = make_uint2(uint32_t(i), k);
    }
  }
}

// Upper bound on each probe's candidates: the postings its prefix touches.
__global__ void PostingsPerProbeKernel(const uint32_t* __restrict__ tok, const uint64_t* __restrict__ off, uint64_t p0,
                                       uint64_t p1, Bounds B, const unsigned long long* __restrict__ start,
                                       uint64_t* __restrict__ hits) {
  for (uint64_t i = p0 + uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < p1; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint32_t L = B.ProbePrefix(SizeOf(off, i));
    uint64_t h = 0;
    for (uint32_t k = 0; k < L; k++) {
      const uint32_t t = tok[off[i] + k];
      h += start[t + 1] - start[t];
    }
    hits[i - p0] = h;
  }
}

// One warp per probe. Table reads go through L2 (__ldcg) because the entries
// are written by atomics, which L1 does not see.
__global__ void FilterKernel(const uint32_t* __restrict__ ptok, const uint64_t* __restrict__ poff,
                             const uint64_t* __restrict__ ioff, const unsigned long long* __restrict__ start,
                             const uint2* __restrict__ postings, const uint32_t* __restrict__ probes,
                             const uint64_t* __restrict__ tableOff, uint64_t nProbes, Bounds B, bool self,
                             Slot* table, Cand* __restrict__ cands,
                             unsigned long long* __restrict__ nCands) {
  const unsigned lane = threadIdx.x & 31;
  const uint64_t warps = uint64_t(gridDim.x) * blockDim.x / 32;
  for (uint64_t w = (uint64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; w < nProbes; w += warps) {
    const uint32_t x = probes[w];
    const uint64_t base = tableOff[w];
    const uint32_t mask = uint32_t(tableOff[w + 1] - base) - 1;
    const uint32_t a = SizeOf(poff, x);
    const uint32_t minS = B.MinSize(a), maxS = B.MaxSize(a);
    const uint32_t* xr = ptok + poff[x];
    for (uint32_t k = 0, L = B.ProbePrefix(a); k < L; k++) {
      const uint32_t t = xr[k];
      for (unsigned long long q = start[t] + lane; q < start[t + 1]; q += 32) {
        const uint2 e = postings[q];
        const uint32_t y = e.x;
        if (self && y >= x) continue;
        const uint32_t b = SizeOf(ioff, y);
        if (b < minS || b > maxS) continue;
        const uint32_t key = y + 1;
        uint32_t slot = Mix(y) & mask;
        Slot* at;
        for (;;) {
          at = &table[base + slot];
          uint32_t cur = __ldcg(&at->key);
          if (cur == 0) cur = atomicCAS(&at->key, 0u, key);
          if (cur == 0 || cur == key) break;
          slot = (slot + 1) & mask;
        }
        atomicAdd(&at->count, 1u);
        // Matches of one pair rise in both sets together, so the largest
        // (probe position, indexed position) word is the last match.
        atomicMax(&at->last, (static_cast<unsigned long long>(k) << 32) | e.y);
      }
    }
    __syncwarp();
    for (uint64_t s0 = 0; s0 <= mask; s0 += 32) {
      const uint64_t slot = base + s0 + lane;
      bool keep = false;
      Cand c{};
      if (s0 + lane <= mask) {
        const uint32_t key = __ldcg(&table[slot].key);
        if (key != 0) {
          const uint32_t y = key - 1;
          const unsigned long long l = __ldcg(&table[slot].last);
          c = Cand{x, y, __ldcg(&table[slot].count), uint32_t(l >> 32), uint32_t(l)};
          const uint32_t b = SizeOf(ioff, y);
          // PPJoin's positional bound at the last prefix match.
          keep = c.count + min(a - 1 - c.lastX, b - 1 - c.lastY) >= B.Alpha(a, b);
        }
      }
      const unsigned ballot = __ballot_sync(0xffffffffu, keep);
      if (ballot) {
        unsigned long long at = 0;
        if (lane == 0) at = atomicAdd(nCands, (unsigned long long)__popc(ballot));
        at = __shfl_sync(0xffffffffu, at, 0);
        if (keep) cands[at + __popc(ballot & ((1u << lane) - 1))] = c;
      }
    }
  }
}

// Every common token up to the last prefix match is already counted, so only
// the suffixes after it are merged; stop as soon as the bound cannot be met.
__global__ void VerifyKernel(const uint32_t* __restrict__ ptok, const uint64_t* __restrict__ poff,
                             const uint32_t* __restrict__ itok, const uint64_t* __restrict__ ioff,
                             const Cand* __restrict__ cands, uint64_t n, Bounds B, Hit* __restrict__ out,
                             unsigned long long* __restrict__ nOut) {
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
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
    if (o >= need) out[atomicAdd(nOut, 1ull)] = Hit{c.x, c.y, o};
  }
}

uint64_t NextPow2(uint64_t v) {
  uint64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

class CudaJoiner final : public Joiner {
 public:
  CudaJoiner(std::shared_ptr<const Prepared> p, int device, uint64_t blockSize)
      : p_(std::move(p)), device_(device), guard_(device) {
    const uint64_t m = p_->indexed().n();
    // Capped so a probe's table (up to 2 * block entries) has 32-bit slots.
    block_ = std::min<uint64_t>(blockSize ? blockSize : kDefaultBlock, 1ull << 24);
    sms_ = unsigned(gpu::MultiprocessorCount(device));
    // A single probe's table holds up to 2 * block entries; the budget must fit one.
    tableBudget_ = std::max<uint64_t>(kTableBudget, NextPow2(2 * std::min<uint64_t>(block_, std::max<uint64_t>(m, 1))));
    Upload(p_->probe, &dPtok_, &dPoff_, "join probe sets");
    if (!p_->self) Upload(p_->index, &dItok_, &dIoff_, "join indexed sets");
    start_.reset(uint64_t(p_->vocab) + 1, "join inverted index offsets");
    cursor_.reset(uint64_t(p_->vocab) + 1, "join inverted index cursors");
    counters_.reset(2, "join counters");
  }

  bool Next(Chunk* out, const CancelToken& cancel) override {
    gpu::DeviceGuard guard(device_);
    for (;;) {
      cancel.check();
      if (batch_ < batches_.size()) {
        RunBatch(batch_++, out);
        return true;
      }
      if (blockStart_ >= p_->indexed().n()) return false;
      BuildBlock(out);
    }
  }

 private:
  static constexpr uint64_t kDefaultBlock = 1ull << 20;
  // Candidate-table entries (16 B each) per probe batch: 1 GiB. Bigger batches
  // mean fewer host round trips; the cost of clearing scales with use, not size.
  static constexpr uint64_t kTableBudget = 1ull << 26;
  static constexpr uint64_t kMaxBatchProbes = 1ull << 22;

  const uint32_t* Ptok() const { return dPtok_.data(); }
  const uint64_t* Poff() const { return dPoff_.data(); }
  const uint32_t* Itok() const { return p_->self ? dPtok_.data() : dItok_.data(); }
  const uint64_t* Ioff() const { return p_->self ? dPoff_.data() : dIoff_.data(); }

  void Upload(const Collection& c, gpu::DeviceBuffer<uint32_t>* tok, gpu::DeviceBuffer<uint64_t>* off, const char* what) {
    tok->reset(std::max<size_t>(c.tokens.size(), 1), what);
    off->reset(c.offsets.size(), what);
    if (!c.tokens.empty())
      CUSIM_CUDA_CHECK(cudaMemcpyAsync(tok->data(), c.tokens.data(), c.tokens.size() * 4, cudaMemcpyHostToDevice, stream_));
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(off->data(), c.offsets.data(), c.offsets.size() * 8, cudaMemcpyHostToDevice, stream_));
    stream_.sync();
  }

  unsigned Grid(uint64_t work) const {
    return gpu::GridFor(work, kThreads, sms_ * 16);
  }

  // First position in [lo, hi) of `c` whose size satisfies pred (pred monotone).
  template <typename Pred>
  static uint64_t FirstWhere(const Collection& c, uint64_t lo, uint64_t hi, Pred pred) {
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo) / 2;
      if (pred(c.size(mid))) hi = mid;
      else lo = mid + 1;
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
    uint64_t entries = 0;
    for (uint64_t i = i0; i < i1; i++) entries += p.IndexPrefix(i);
    if (entries == 0) return;

    gpu::Event e0, e1;
    e0.record(stream_);
    const uint64_t V = uint64_t(p.vocab) + 1;
    CUSIM_CUDA_CHECK(cudaMemsetAsync(cursor_.data(), 0, V * 8, stream_));
    CountPrefixKernel<<<Grid(i1 - i0), kThreads, 0, stream_>>>(Itok(), Ioff(), i0, i1, B, p.self, cursor_.data());
    CUSIM_LAUNCH_CHECK();
    size_t tempBytes = 0;
    CUSIM_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, tempBytes, cursor_.data(), start_.data(), int64_t(V), stream_));
    scanTemp_.reserve(std::max<size_t>(tempBytes, 1), "join scan scratch");
    CUSIM_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(scanTemp_.data(), tempBytes, cursor_.data(), start_.data(), int64_t(V), stream_));
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(cursor_.data(), start_.data(), V * 8, cudaMemcpyDeviceToDevice, stream_));
    postings_.reserve(entries, "join prefix postings");
    ScatterPrefixKernel<<<Grid(i1 - i0), kThreads, 0, stream_>>>(Itok(), Ioff(), i0, i1, B, p.self, cursor_.data(),
                                                                 postings_.data());
    CUSIM_LAUNCH_CHECK();
    hits_.reserve(pHi - pLo, "join postings per probe");
    PostingsPerProbeKernel<<<Grid(pHi - pLo), kThreads, 0, stream_>>>(Ptok(), Poff(), pLo, pHi, B, start_.data(),
                                                                      hits_.data());
    CUSIM_LAUNCH_CHECK();
    e1.record(stream_);
    std::vector<uint64_t> hits(pHi - pLo);
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(hits.data(), hits_.data(), hits.size() * 8, cudaMemcpyDeviceToHost, stream_));
    stream_.sync();
    out->kernelMs += gpu::ElapsedMs(e0, e1);

    // Plan batches: per probe a power-of-two table at least twice its distinct
    // candidates, bounded by its postings and by the block's window of allowed
    // sizes (in a self-join, only sets before the probe). Probes come in size
    // order, so the window's ends are searched once per distinct size.
    Batch cur;
    uint32_t lastA = 0;
    uint64_t winLo = 0, winHi = 0;
    for (uint64_t j = 0; j < hits.size(); j++) {
      if (hits[j] == 0) continue;
      const uint64_t x = pLo + j;
      const uint32_t a = X.size(x);
      if (a != lastA || j == 0) {
        lastA = a;
        const uint32_t minS = B.MinSize(a), maxS = B.MaxSize(a);
        winLo = FirstWhere(Y, i0, i1, [&](uint32_t b) { return b >= minS; });
        winHi = FirstWhere(Y, winLo, i1, [&](uint32_t b) { return b > maxS; });
      }
      const uint64_t hi = p.self ? std::min(winHi, x) : winHi;
      if (hi <= winLo) continue;
      const uint64_t distinct = std::min(hits[j], hi - winLo);
      const uint64_t cap = NextPow2(std::max<uint64_t>(2 * distinct, 8));
      if (!cur.probes.empty() && (cur.tableOff.back() + cap > tableBudget_ || cur.probes.size() >= kMaxBatchProbes)) {
        batches_.push_back(std::move(cur));
        cur = Batch();
      }
      if (cur.tableOff.empty()) cur.tableOff.push_back(0);
      cur.probes.push_back(uint32_t(x));
      cur.tableOff.push_back(cur.tableOff.back() + cap);
      cur.maxCands += distinct;
    }
    if (!cur.probes.empty()) batches_.push_back(std::move(cur));
  }

  void RunBatch(size_t bi, Chunk* out) {
    const Prepared& p = *p_;
    const Batch& b = batches_[bi];
    const uint64_t n = b.probes.size(), slots = b.tableOff.back();
    probes_.reserve(n, "join batch probes");
    tableOff_.reserve(n + 1, "join batch table offsets");
    table_.reserve(slots, "join candidate tables");
    cands_.reserve(b.maxCands, "join candidates");
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(probes_.data(), b.probes.data(), n * 4, cudaMemcpyHostToDevice, stream_));
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(tableOff_.data(), b.tableOff.data(), (n + 1) * 8, cudaMemcpyHostToDevice, stream_));
    gpu::Event e0, e1, e2, e3;
    e0.record(stream_);
    CUSIM_CUDA_CHECK(cudaMemsetAsync(table_.data(), 0, slots * sizeof(Slot), stream_));
    CUSIM_CUDA_CHECK(cudaMemsetAsync(counters_.data(), 0, 2 * 8, stream_));
    FilterKernel<<<Grid(n * 32), kThreads, 0, stream_>>>(Ptok(), Poff(), Ioff(), start_.data(), postings_.data(),
                                                         probes_.data(), tableOff_.data(), n, p.bounds, p.self,
                                                         table_.data(),
                                                         cands_.data(), counters_.data());
    CUSIM_LAUNCH_CHECK();
    e1.record(stream_);
    unsigned long long nc = 0;
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(&nc, counters_.data(), 8, cudaMemcpyDeviceToHost, stream_));
    stream_.sync();
    out->candidates += nc;
    float ms = gpu::ElapsedMs(e0, e1);
    if (nc == 0) {
      out->kernelMs += ms;
      return;
    }
    hitsOut_.reserve(nc, "join verified pairs");
    e2.record(stream_);
    VerifyKernel<<<Grid(nc), kThreads, 0, stream_>>>(Ptok(), Poff(), Itok(), Ioff(), cands_.data(), nc, p.bounds,
                                                     hitsOut_.data(), counters_.data() + 1);
    CUSIM_LAUNCH_CHECK();
    e3.record(stream_);
    unsigned long long no = 0;
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(&no, counters_.data() + 1, 8, cudaMemcpyDeviceToHost, stream_));
    stream_.sync();
    ms += gpu::ElapsedMs(e2, e3);
    out->kernelMs += ms;
    std::vector<Hit> hits(no);
    if (no) CUSIM_CUDA_CHECK(cudaMemcpyAsync(hits.data(), hitsOut_.data(), no * sizeof(Hit), cudaMemcpyDeviceToHost, stream_));
    stream_.sync();
    Finalize(p, hits, out);
  }

  struct Batch {
    std::vector<uint32_t> probes;
    std::vector<uint64_t> tableOff;
    uint64_t maxCands = 0;
  };

  std::shared_ptr<const Prepared> p_;
  int device_;
  gpu::DeviceGuard guard_;
  gpu::Stream stream_;
  uint64_t block_ = 0, tableBudget_ = 0;
  unsigned sms_ = 1;
  gpu::DeviceBuffer<uint32_t> dPtok_, dItok_;
  gpu::DeviceBuffer<uint64_t> dPoff_, dIoff_;
  gpu::DeviceBuffer<unsigned long long> start_, cursor_, counters_;
  gpu::DeviceBuffer<uint8_t> scanTemp_;
  gpu::DeviceBuffer<uint2> postings_;
  gpu::DeviceBuffer<uint64_t> hits_;
  gpu::DeviceBuffer<uint32_t> probes_;
  gpu::DeviceBuffer<uint64_t> tableOff_;
  gpu::DeviceBuffer<Slot> table_;
  gpu::DeviceBuffer<Cand> cands_;
  gpu::DeviceBuffer<Hit> hitsOut_;
  uint64_t blockStart_ = 0;
  std::vector<Batch> batches_;
  size_t batch_ = 0;
};

}  // namespace

std::unique_ptr<Joiner> MakeCudaJoiner(std::shared_ptr<const Prepared> p, int device, uint64_t blockSize) {
  return std::make_unique<CudaJoiner>(std::move(p), device, blockSize);
}

}  // namespace join
}  // namespace cusim
