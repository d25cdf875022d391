// CUDA scorer for streaming clustering. The cluster rows live in an ELL matrix:
// K slots per row, slot-major (column k of every row contiguous, each column
// padded to a multiple of 32 rows = 128 bytes), so one thread per row reads
// coalesced. The host engine owns the exact state; rows it rewrote are "dirty"
// here and reach the device as update records staged through pinned memory:
// up to kFused of them are written by the owning thread inside the next
// scoring launch (the paper's update buffer), more by one apply launch.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "../native/cluster.h"
#include "../native/parallel.h"
#include "common/gpu.cuh"

namespace cusim {
namespace cluster {
namespace {

constexpr uint32_t kFused = 4;
constexpr unsigned kThreads = 256;
constexpr unsigned kWarps = kThreads / 32;
// Documents per micro-batch (per-warp accumulators live in shared memory):
// tuning.batch = 256 | 512 | 1024 picks one; kBatch is the default.
constexpr uint32_t kBatch = 512;

struct Ell {
  uint32_t* terms;
  float* w;
  uint64_t* last;
  uint64_t ld;
  uint32_t K;
};

// Update records: row ids[u] becomes terms/w[u * K, (u + 1) * K) (kNone-padded).
struct Updates {
  const uint32_t* ids;
  const uint64_t* last;
  const uint32_t* terms;
  const float* w;
  uint32_t count;
};

__device__ __forceinline__ uint32_t LowerBound(const uint32_t* a, uint32_t lo, uint32_t hi, uint32_t t) {
  while (lo < hi) {
    const uint32_t mid = (lo + hi) >> 1;
    if (a[mid] < t)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// A 65,536-bit filter of the document's terms in shared memory: nearly every
// row term misses it in one load, so the binary search runs only for likely
// matches. It only filters (no false negatives), so results are unchanged.
constexpr uint32_t kFilterWords = 2048;
__device__ __forceinline__ bool MayHave(const uint32_t* filter, uint32_t t) {
  return (filter[(t >> 5) & (kFilterWords - 1)] >> (t & 31)) & 1u;
}

// Merge-seek of one row (slot stride `stride`) against the document in shared
// memory (n >= 1 terms, ascending). Slots are loaded four at a time so each
// thread keeps several reads in flight (the kernel is bandwidth-bound);
// weights are read only for shared terms. Reading past the row's end stays
// inside the K x ld matrix; kNone (> every term) ends the row.
__device__ __forceinline__ uint64_t RowDot(const uint32_t* terms, const float* w, uint64_t stride, uint32_t K,
                                           const uint32_t* sT, const float* sW, uint32_t n, const uint32_t* filter) {
  uint64_t acc = 0;
  uint32_t lo = 0;
  const uint32_t maxT = sT[n - 1];
  for (uint32_t k = 0; k < K; k += 4) {
    uint32_t t[4];
#pragma unroll
    for (uint32_t j = 0; j < 4; j++) t[j] = k + j < K ? terms[(k + j) * stride] : kNone;
#pragma unroll
    for (uint32_t j = 0; j < 4; j++) {
      if (t[j] > maxT) return acc;
      if (!MayHave(filter, t[j])) continue;
      lo = LowerBound(sT, lo, n, t[j]);
      if (sT[lo] == t[j]) {
        acc += FixedProduct(sW[lo], w[(k + j) * stride]);
        lo++;
      }
    }
  }
  return acc;
}

__device__ __forceinline__ uint64_t WarpMax(uint64_t v) {
  for (int o = 16; o > 0; o >>= 1) {
    const uint64_t x = __shfl_xor_sync(0xffffffffu, v, o);
    v = x > v ? x : v;
  }
  return v;
}

__device__ __forceinline__ bool Active(uint64_t time, uint64_t last, uint64_t maxAge) {
  return maxAge == kNoDecay || time - last <= maxAge;
}

// One document against every row; thread per row (grid-stride). keys[parity]
// collects the answer; keys[parity ^ 1] is cleared for the next launch, so no
// memset is needed between documents.
__global__ void ScoreOneKernel(Ell m, uint64_t rows, Updates upd, const uint32_t* __restrict__ docT,
                               const float* __restrict__ docW, uint32_t n, uint64_t time, uint64_t maxAge, double T,
                               unsigned long long* keys, int parity) {
  extern __shared__ uint32_t smem[];
  uint32_t* sT = smem;
  float* sW = reinterpret_cast<float*>(smem + n);
  __shared__ unsigned long long blockKey;
  __shared__ uint32_t sUpd[kFused];
  __shared__ uint32_t filter[kFilterWords];
  for (uint32_t i = threadIdx.x; i < kFilterWords; i += blockDim.x) filter[i] = 0;
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
    sT[i] = docT[i];
    sW[i] = docW[i];
    atomicOr(&filter[(docT[i] >> 5) & (kFilterWords - 1)], 1u << (docT[i] & 31));
  }
  if (threadIdx.x < upd.count) sUpd[threadIdx.x] = upd.ids[threadIdx.x];
  if (threadIdx.x == 0) {
    blockKey = 0;
    if (blockIdx.x == 0) keys[parity ^ 1] = 0;
  }
  __syncthreads();
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  uint64_t best = 0;
  for (uint64_t r = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < rows; r += stride) {
    int u = -1;
    for (uint32_t j = 0; j < upd.count; j++)
      if (sUpd[j] == r) u = int(j);
    uint64_t acc;
    if (u >= 0) {
      // This thread owns row r in this launch: write it, then score from the record.
      const uint32_t* ut = upd.terms + uint64_t(u) * m.K;
      const float* uw = upd.w + uint64_t(u) * m.K;
      for (uint32_t k = 0; k < m.K; k++) {
        m.terms[k * m.ld + r] = ut[k];
        m.w[k * m.ld + r] = uw[k];
      }
      m.last[r] = upd.last[u];
      acc = RowDot(ut, uw, 1, m.K, sT, sW, n, filter);
    } else {
      acc = RowDot(m.terms + r, m.w + r, m.ld, m.K, sT, sW, n, filter);
    }
    if (acc == 0) continue;
    const float sim = FixedToFloat(acc);
    if (double(sim) > T && Active(time, m.last[r], maxAge)) {
      const uint64_t key = PackKey(sim, uint32_t(r));
      best = key > best ? key : best;
    }
  }
  best = WarpMax(best);
  if ((threadIdx.x & 31) == 0 && best) atomicMax(&blockKey, (unsigned long long)best);
  __syncthreads();
  if (threadIdx.x == 0 && blockKey) atomicMax(&keys[parity], blockKey);
}

__global__ void ApplyKernel(Ell m, Updates upd) {
  for (uint32_t u = blockIdx.x; u < upd.count; u += gridDim.x) {
    const uint64_t r = upd.ids[u];
    for (uint32_t k = threadIdx.x; k < m.K; k += blockDim.x) {
      m.terms[k * m.ld + r] = upd.terms[uint64_t(u) * m.K + k];
      m.w[k * m.ld + r] = upd.w[uint64_t(u) * m.K + k];
    }
    if (threadIdx.x == 0) m.last[r] = upd.last[u];
  }
}

// The batch's documents as an inverted table: distinct term u's postings are
// (doc, weight) pairs [off[u], off[u + 1]); terms map to u through an
// open-addressing hash table (load <= 1/2, empty slots hold kNone), so a row
// slot finds its postings in one or two probes.
struct BatchTable {
  const uint2* hash;  // (term, u); 2^bits entries
  const uint32_t* off;
  const uint32_t* doc;
  const float* w;
  const uint32_t* filter;  // kFilterWords words: bit (t mod 65536) set for every batch term
  uint32_t bits;
  uint32_t nDocs;
};

__device__ __forceinline__ uint32_t HashFind(const uint2* h, uint32_t bits, uint32_t t) {
  const uint32_t mask = (1u << bits) - 1;
  for (uint32_t i = HashSlot(t, bits);; i = (i + 1) & mask) {
    const uint2 e = h[i];
    if (e.x == t) return e.y;
    if (e.x == kNone) return kNone;
  }
}

// Micro-batch: one warp per row. Lanes read the row's slots and look their
// terms up in the batch table; then the whole warp walks the hit terms'
// postings as one list, 32 postings a round, so a term shared by many batch
// documents costs postings/32 rounds instead of serializing one lane, and
// terms with few postings share rounds instead of idling most lanes. Products
// go to the warp's per-document accumulator in shared memory by integer atomics (order-free, so the sum equals the
// sequential merge); afterwards the lanes sweep the B accumulators, zero them and keep the best key per document. The
// matrix is read once per batch of B documents.
template <uint32_t B>
__global__ void __launch_bounds__(kThreads) ScoreBatchKernel(Ell m, uint64_t rows, BatchTable tab, uint64_t time0,
                                                             uint64_t maxAge, uint64_t accT, unsigned long long* keys) {
  extern __shared__ __align__(16) unsigned char bsmem[];
  auto* acc = reinterpret_cast<unsigned long long*>(bsmem);  // kWarps x B
  auto* bkey = acc + kWarps * B;                             // B
  auto* filter = reinterpret_cast<uint32_t*>(bkey + B);      // kFilterWords
  const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (unsigned i = threadIdx.x; i < kFilterWords; i += blockDim.x) filter[i] = tab.filter[i];
  for (unsigned i = threadIdx.x; i < kWarps * B; i += blockDim.x) acc[i] = 0;
  for (unsigned i = threadIdx.x; i < B; i += blockDim.x) bkey[i] = 0;
  __syncthreads();
  unsigned long long* wacc = acc + warp * B;
  const uint64_t nw = uint64_t(gridDim.x) * kWarps;
  // The loop bound is warp-uniform (r depends only on the warp), so every
  // lane reaches each warp-wide intrinsic below.
  for (uint64_t r = uint64_t(blockIdx.x) * kWarps + warp; r < rows; r += nw) {
    for (uint32_t base = 0; base < m.K; base += 32) {
      const uint32_t k = base + lane;
      const uint32_t t = k < m.K ? m.terms[k * m.ld + r] : kNone;
      if (__all_sync(0xffffffffu, t == kNone)) break;
      uint32_t pb = 0, pe = 0;
      float cw = 0.f;
      if (t != kNone && MayHave(filter, t)) {
        const uint32_t u = HashFind(tab.hash, tab.bits, t);
        if (u != kNone) {
          pb = tab.off[u];
          pe = tab.off[u + 1];
          cw = m.w[k * m.ld + r];
        }
      }
      // The 32 slots' postings as one list (exclusive prefix sum of their
      // lengths): each round gives every lane a product, where walking one
      // hit term per round would spend a whole round on a term with 1-3
      // batch postings (most of a Zipf row's hit terms). Lane i finds its
      // slot as the last one whose list starts at or before position i
      // (binary search over the lanes' starts; empty slots share the next
      // start and lose to it). Rounds mix terms, so two lanes may add to the same
      // document: the atomics keep that exact.
      const uint32_t len = pe - pb;
      uint32_t incl = len;
      for (int o = 1; o < 32; o <<= 1) {
        const uint32_t v = __shfl_up_sync(0xffffffffu, incl, o);
        if (int(lane) >= o) incl += v;
      }
      const uint32_t total = __shfl_sync(0xffffffffu, incl, 31);
      const uint32_t start = incl - len;
      for (uint32_t q0 = 0; q0 < total; q0 += 32) {
        const uint32_t q = q0 + lane;
        uint32_t s = 0;
        for (uint32_t step = 16; step; step >>= 1) {
          const uint32_t v = __shfl_sync(0xffffffffu, start, s + step);
          if (v <= q) s += step;
        }
        const uint32_t ps = __shfl_sync(0xffffffffu, pb, s) + (q - __shfl_sync(0xffffffffu, start, s));
        const float c = __shfl_sync(0xffffffffu, cw, s);
        if (q < total) atomicAdd(&wacc[tab.doc[ps]], (unsigned long long)FixedProduct(tab.w[ps], c));
      }
    }
    // Every lane's atomics are visible to the sweep (and the sweep's zeros to
    // the next row's atomics) across these warp barriers.
    __syncwarp();
    // ~150 of 512 accumulators are nonzero per row and few pass T, so the
    // sweep tests the integer sum against accT (see FixedThreshold) and
    // converts only the passing ones.
    for (uint32_t d = lane; d < tab.nDocs; d += 32) {
      const uint64_t a = wacc[d];
      wacc[d] = 0;
      if (a > accT && Active(time0 + d, m.last[r], maxAge))
        atomicMax(&bkey[d], (unsigned long long)PackKey(FixedToFloat(a), uint32_t(r)));
    }
    __syncwarp();
  }
  __syncthreads();
  for (unsigned d = threadIdx.x; d < tab.nDocs; d += blockDim.x)
    if (bkey[d]) atomicMax(&keys[d], bkey[d]);
}

// The largest fixed-point sum whose similarity is not above T. FixedToFloat
// is monotone (an exact scaling between two round-to-nearest conversions), so
// FixedToFloat(a) > T exactly when a > FixedThreshold(T): the batch sweep's
// integer test decides what the float test decides.
uint64_t FixedThreshold(double T) {
  uint64_t lo = 0, hi = uint64_t(1) << 63;  // FixedToFloat(lo) = 0 <= T, FixedToFloat(hi) = 4 > T
  while (hi - lo > 1) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (double(FixedToFloat(mid)) > T)
      hi = mid;
    else
      lo = mid;
  }
  return lo;
}

constexpr size_t BatchSmemFor(uint32_t B) { return (size_t(kWarps) * B + B) * 8 + size_t(kFilterWords) * 4; }
template <uint32_t B>
constexpr size_t BatchSmem() {
  return BatchSmemFor(B);
}

inline uint64_t Align8(uint64_t x) { return (x + 7) & ~uint64_t(7); }

class CudaScorer final : public Scorer {
 public:
  CudaScorer(const Config& cfg, const Rows& rows, int device, const Tuning& tuning)
      : cfg_(cfg), rows_(rows), device_(device), onDevice_(device), K_(cfg.maxTerms) {
    sms_ = unsigned(gpu::MultiprocessorCount(device));
    if (tuning.batch == 256 || tuning.batch == 512 || tuning.batch == 1024) batch_ = tuning.batch;
    // A GPU with less opt-in shared memory per block gets a smaller batch
    // (B = 256 needs 26 KiB, within every CUDA GPU's default 48 KiB).
    const size_t optin = gpu::MaxSharedPerBlockOptin(device);
    while (batch_ > 256 && BatchSmemFor(batch_) > optin) batch_ /= 2;
    // Above 48 KiB, dynamic shared memory needs an opt-in per kernel.
    if (batch_ == 512)
      CUSIM_CUDA_CHECK(cudaFuncSetAttribute(ScoreBatchKernel<512>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            int(BatchSmem<512>())));
    if (batch_ == 1024)
      CUSIM_CUDA_CHECK(cudaFuncSetAttribute(ScoreBatchKernel<1024>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            int(BatchSmem<1024>())));
    // Grid-stride kernels get exactly one wave of resident blocks: a partial
    // second wave would leave most SMs idle while it runs.
    seqGrid_ = Resident(ScoreOneKernel, size_t(K_) * 8);
    batchGrid_ = batch_ == 256   ? Resident(ScoreBatchKernel<256>, BatchSmem<256>())
                 : batch_ == 512 ? Resident(ScoreBatchKernel<512>, BatchSmem<512>())
                                 : Resident(ScoreBatchKernel<1024>, BatchSmem<1024>());
    Grow(std::max<uint64_t>(cfg.capacity, 1));
    keys_.reset(2, "cluster keys");
    batchKeys_.reset(batch_, "cluster batch keys");
    hKeys_.reserve(batch_, "cluster keys (pinned)");
    CUSIM_CUDA_CHECK(cudaMemsetAsync(keys_.data(), 0, 2 * sizeof(unsigned long long), stream_));
    stream_.sync();
  }

  uint64_t ScoreOne(const uint32_t* terms, const float* w, uint32_t n, uint64_t time) override {
    gpu::DeviceGuard g(device_);
    const uint64_t rows = rows_.count;
    if (rows == 0 || n == 0) return 0;
    if (dirty_.size() > kFused) Flush();
    // One staging copy carries the document and the pending update records.
    const uint64_t P = dirty_.size();
    Layout L = Stage(P, n);
    std::copy(terms, terms + n, reinterpret_cast<uint32_t*>(hBlob_.data() + L.docT));
    std::copy(w, w + n, reinterpret_cast<float*>(hBlob_.data() + L.docW));
    t0_.record(stream_);
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(dBlob_.data(), hBlob_.data(), L.total, cudaMemcpyHostToDevice, stream_));
    t1_.record(stream_);
    const unsigned blocks = gpu::GridFor(rows, kThreads, seqGrid_);
    ScoreOneKernel<<<blocks, kThreads, n * 8, stream_>>>(Matrix(), rows, DeviceUpdates(L, uint32_t(P)),
                                                         reinterpret_cast<const uint32_t*>(dBlob_.data() + L.docT),
                                                         reinterpret_cast<const float*>(dBlob_.data() + L.docW), n,
                                                         time, cfg_.maxAge, cfg_.threshold, keys_.data(), parity_);
    CUSIM_LAUNCH_CHECK();
    t2_.record(stream_);
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(hKeys_.data(), keys_.data() + parity_, 8, cudaMemcpyDeviceToHost, stream_));
    t3_.record(stream_);
    stream_.sync();
    parity_ ^= 1;
    ClearDirty();
    Account();
    return hKeys_.data()[0];
  }

  void ScoreBatch(const Docs&, uint64_t begin, uint64_t end, const BatchPostings& post, uint64_t time0,
                  uint64_t* keys) override {
    gpu::DeviceGuard g(device_);
    const uint64_t rows = rows_.count;
    const uint32_t nDocs = uint32_t(end - begin);
    if (rows == 0) {
      std::fill(keys, keys + nDocs, 0);
      return;
    }
    if (!dirty_.empty()) Flush();
    // The engine grouped the batch by term; the device gets the postings and
    // a hash table (term -> u) at load <= 1/2 for one- or two-probe lookups.
    const uint64_t np = post.doc.size();
    const uint32_t nU = uint32_t(post.terms.size());
    uint32_t db = 1;
    while ((uint64_t(1) << db) < 2 * uint64_t(nU)) db++;
    Layout L;
    L.hash = 0;
    L.off = L.hash + (uint64_t(8) << db);
    L.pd = Align8(L.off + uint64_t(nU + 1) * 4);
    L.pw = Align8(L.pd + np * 4);
    L.filter = Align8(L.pw + np * 4);
    L.total = L.filter + kFilterWords * 4;
    Reserve(L.total);
    auto* hash = reinterpret_cast<uint2*>(hBlob_.data() + L.hash);
    auto* filter = reinterpret_cast<uint32_t*>(hBlob_.data() + L.filter);
    std::fill(hash, hash + (uint64_t(1) << db), make_uint2(kNone, kNone));
    std::fill(filter, filter + kFilterWords, 0u);
    for (uint32_t u = 0; u < nU; u++) {
      const uint32_t t = post.terms[u];
      uint32_t i = HashSlot(t, db);
      while (hash[i].x != kNone) i = (i + 1) & ((1u << db) - 1);
      hash[i] = make_uint2(t, u);
      filter[(t >> 5) & (kFilterWords - 1)] |= 1u << (t & 31);
    }
    std::copy(post.off.begin(), post.off.end(), reinterpret_cast<uint32_t*>(hBlob_.data() + L.off));
    std::copy(post.doc.begin(), post.doc.end(), reinterpret_cast<uint32_t*>(hBlob_.data() + L.pd));
    std::copy(post.w.begin(), post.w.end(), reinterpret_cast<float*>(hBlob_.data() + L.pw));
    t0_.record(stream_);
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(dBlob_.data(), hBlob_.data(), L.total, cudaMemcpyHostToDevice, stream_));
    CUSIM_CUDA_CHECK(cudaMemsetAsync(batchKeys_.data(), 0, uint64_t(nDocs) * 8, stream_));
    t1_.record(stream_);
    if (nU > 0) {
      BatchTable tab{reinterpret_cast<const uint2*>(dBlob_.data() + L.hash),
                     reinterpret_cast<const uint32_t*>(dBlob_.data() + L.off),
                     reinterpret_cast<const uint32_t*>(dBlob_.data() + L.pd),
                     reinterpret_cast<const float*>(dBlob_.data() + L.pw),
                     reinterpret_cast<const uint32_t*>(dBlob_.data() + L.filter),
                     db,
                     nDocs};
      const unsigned blocks = gpu::GridFor(rows, kWarps, batchGrid_);
      const uint64_t accT = FixedThreshold(cfg_.threshold);
      if (batch_ == 256) {
        ScoreBatchKernel<256><<<blocks, kThreads, BatchSmem<256>(), stream_>>>(Matrix(), rows, tab, time0, cfg_.maxAge,
                                                                               accT, batchKeys_.data());
      } else if (batch_ == 512) {
        ScoreBatchKernel<512><<<blocks, kThreads, BatchSmem<512>(), stream_>>>(Matrix(), rows, tab, time0, cfg_.maxAge,
                                                                               accT, batchKeys_.data());
      } else {
        ScoreBatchKernel<1024><<<blocks, kThreads, BatchSmem<1024>(), stream_>>>(Matrix(), rows, tab, time0,
                                                                                 cfg_.maxAge, accT, batchKeys_.data());
      }
      CUSIM_LAUNCH_CHECK();
    }
    t2_.record(stream_);
    CUSIM_CUDA_CHECK(
        cudaMemcpyAsync(hKeys_.data(), batchKeys_.data(), uint64_t(nDocs) * 8, cudaMemcpyDeviceToHost, stream_));
    t3_.record(stream_);
    stream_.sync();
    Account();
    std::copy(hKeys_.data(), hKeys_.data() + nDocs, keys);
  }

  void RowChanged(uint32_t c, const uint32_t*, uint32_t) override {
    if (isDirty_.size() <= c) isDirty_.resize(uint64_t(c) + 1, 0);
    if (!isDirty_[c]) {
      isDirty_[c] = 1;
      dirty_.push_back(c);
    }
  }

  void Rebuild() override {
    gpu::DeviceGuard g(device_);
    ClearDirty();
    const uint64_t n = rows_.count;
    if (n > ld_) Grow(n);
    if (n == 0) return;
    // Only the n live rows are transposed and uploaded (column pitch n on the
    // host, ld_ on the device); rows past n are written by update records
    // before any kernel reads them.
    std::vector<uint32_t> t(uint64_t(K_) * n);
    std::vector<float> w(uint64_t(K_) * n);
    ParallelFor(K_, 1, [&](size_t b, size_t e) {
      for (size_t k = b; k < e; k++)
        for (uint64_t r = 0; r < n; r++) {
          t[k * n + r] = rows_.terms[r * K_ + k];
          w[k * n + r] = rows_.weights[r * K_ + k];
        }
    });
    CUSIM_CUDA_CHECK(
        cudaMemcpy2DAsync(terms_.data(), ld_ * 4, t.data(), n * 4, n * 4, K_, cudaMemcpyHostToDevice, stream_));
    CUSIM_CUDA_CHECK(
        cudaMemcpy2DAsync(w_.data(), ld_ * 4, w.data(), n * 4, n * 4, K_, cudaMemcpyHostToDevice, stream_));
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(last_.data(), rows_.lastSeen.data(), n * 8, cudaMemcpyHostToDevice, stream_));
    stream_.sync();
  }

  Timing TakeTiming() override { return std::exchange(timing_, Timing{}); }
  uint64_t BatchSize() const override { return batch_; }
  // One pass over the matrix serves up to batch_ documents instead of one.
  bool PreferBatch(uint64_t n) const override { return n >= 2; }

 private:
  struct Layout {
    uint64_t ids = 0, last = 0, terms = 0, w = 0, docT = 0, docW = 0;
    uint64_t hash = 0, off = 0, pd = 0, pw = 0, filter = 0;
    uint64_t total = 0;
  };

  template <typename F>
  unsigned Resident(F kernel, size_t smem) {
    int perSm = 0;
    CUSIM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, kernel, int(kThreads), smem));
    return sms_ * unsigned(std::max(perSm, 1));
  }

  Ell Matrix() { return Ell{terms_.data(), w_.data(), last_.data(), ld_, K_}; }

  void Reserve(uint64_t bytes) {
    if (bytes > hBlob_.size()) {
      const uint64_t n = std::max<uint64_t>(bytes, hBlob_.size() * 2);
      hBlob_.reserve(n, "cluster staging (pinned)");
      dBlob_.reset(n, "cluster staging");
    }
  }

  // Stages P dirty rows' update records (and room for an n-term document).
  Layout Stage(uint64_t P, uint32_t n) {
    Layout L;
    L.ids = 0;
    L.last = Align8(P * 4);
    L.terms = L.last + P * 8;
    L.w = Align8(L.terms + P * K_ * 4);
    L.docT = Align8(L.w + P * K_ * 4);
    L.docW = Align8(L.docT + uint64_t(n) * 4);
    L.total = Align8(L.docW + uint64_t(n) * 4);
    Reserve(L.total);
    if (rows_.count > ld_) Grow(rows_.count);
    uint8_t* h = hBlob_.data();
    for (uint64_t u = 0; u < P; u++) {
      const uint32_t c = dirty_[u];
      reinterpret_cast<uint32_t*>(h + L.ids)[u] = c;
      reinterpret_cast<uint64_t*>(h + L.last)[u] = rows_.lastSeen[c];
      std::copy(rows_.terms.begin() + uint64_t(c) * K_, rows_.terms.begin() + uint64_t(c + 1) * K_,
                reinterpret_cast<uint32_t*>(h + L.terms) + u * K_);
      std::copy(rows_.weights.begin() + uint64_t(c) * K_, rows_.weights.begin() + uint64_t(c + 1) * K_,
                reinterpret_cast<float*>(h + L.w) + u * K_);
    }
    return L;
  }

  Updates DeviceUpdates(const Layout& L, uint32_t P) {
    const uint8_t* d = dBlob_.data();
    return Updates{reinterpret_cast<const uint32_t*>(d + L.ids), reinterpret_cast<const uint64_t*>(d + L.last),
                   reinterpret_cast<const uint32_t*>(d + L.terms), reinterpret_cast<const float*>(d + L.w), P};
  }

  // Writes every dirty row with one copy and one launch.
  void Flush() {
    const uint64_t P = dirty_.size();
    if (P == 0) return;
    Layout L = Stage(P, 0);
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(dBlob_.data(), hBlob_.data(), L.total, cudaMemcpyHostToDevice, stream_));
    ApplyKernel<<<unsigned(std::min<uint64_t>(P, 65535)), 64, 0, stream_>>>(Matrix(), DeviceUpdates(L, uint32_t(P)));
    CUSIM_LAUNCH_CHECK();
    // The staging buffer is rewritten by the next call: finish reading it.
    stream_.sync();
    ClearDirty();
  }

  void ClearDirty() {
    for (uint32_t c : dirty_) isDirty_[c] = 0;
    dirty_.clear();
  }

  // Capacity growth: a larger matrix, old columns copied at the new pitch.
  void Grow(uint64_t need) {
    uint64_t ld = std::max<uint64_t>(ld_ * 2, (need + 31) / 32 * 32);
    gpu::DeviceBuffer<uint32_t> t(uint64_t(K_) * ld, "cluster ELL terms");
    gpu::DeviceBuffer<float> w(uint64_t(K_) * ld, "cluster ELL weights");
    gpu::DeviceBuffer<uint64_t> last(ld, "cluster last-seen");
    if (ld_ > 0) {
      CUSIM_CUDA_CHECK(
          cudaMemcpy2DAsync(t.data(), ld * 4, terms_.data(), ld_ * 4, ld_ * 4, K_, cudaMemcpyDeviceToDevice, stream_));
      CUSIM_CUDA_CHECK(
          cudaMemcpy2DAsync(w.data(), ld * 4, w_.data(), ld_ * 4, ld_ * 4, K_, cudaMemcpyDeviceToDevice, stream_));
      CUSIM_CUDA_CHECK(cudaMemcpyAsync(last.data(), last_.data(), ld_ * 8, cudaMemcpyDeviceToDevice, stream_));
      stream_.sync();
    }
    terms_ = std::move(t);
    w_ = std::move(w);
    last_ = std::move(last);
    ld_ = ld;
  }

  void Account() {
    timing_.kernelMs += gpu::ElapsedMs(t1_, t2_);
    timing_.transferMs += gpu::ElapsedMs(t0_, t1_) + gpu::ElapsedMs(t2_, t3_);
  }

  const Config& cfg_;
  const Rows& rows_;
  int device_;
  // Selects `device_` before the members below (stream, buffers) are created.
  struct OnDevice {
    explicit OnDevice(int d) { CUSIM_CUDA_CHECK(cudaSetDevice(d)); }
  } onDevice_;
  uint32_t K_;
  unsigned sms_ = 1;
  uint64_t ld_ = 0;
  gpu::Stream stream_;
  gpu::Event t0_, t1_, t2_, t3_;
  gpu::DeviceBuffer<uint32_t> terms_;
  gpu::DeviceBuffer<float> w_;
  gpu::DeviceBuffer<uint64_t> last_;
  gpu::DeviceBuffer<unsigned long long> keys_, batchKeys_;
  gpu::PinnedBuffer<unsigned long long> hKeys_;
  gpu::PinnedBuffer<uint8_t> hBlob_;
  gpu::DeviceBuffer<uint8_t> dBlob_;
  std::vector<uint32_t> dirty_;
  std::vector<uint8_t> isDirty_;
  uint32_t batch_ = kBatch;
  unsigned seqGrid_ = 1, batchGrid_ = 1;
  int parity_ = 0;
  Timing timing_;
};

}  // namespace

std::unique_ptr<Scorer> MakeCudaScorer(const Config& cfg, const Rows& rows, int device, const Tuning& tuning) {
  return std::make_unique<CudaScorer>(cfg, rows, device, tuning);
}

}  // namespace cluster
}  // namespace cusim
