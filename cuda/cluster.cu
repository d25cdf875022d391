// CUDA scorer for streaming clustering. The cluster rows live in an ELL matrix:
// K slots per row, slot-major (column k of every row contiguous, each column
// padded to a multiple of 32 rows = 128 bytes), so one thread per row reads
// coalesced. The host engine owns the exact state; rows it rewrote are "dirty"
// here and reach the device as update records staged through pinned memory:
// up to kFused of them are written by the owning thread inside the next
// scoring launch (the paper's update buffer), more by one apply launch.
#include <algorithm>
#include <vector>

#include "../native/cluster.h"
#include "gpu.cuh"

namespace cusim {
namespace cluster {
namespace {

constexpr uint32_t kFused = 4;
constexpr unsigned kThreads = 256;
constexpr unsigned kWarps = kThreads / 32;
constexpr uint32_t kBatch = 256;  // documents per micro-batch: per-warp accumulators live in shared memory

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
    if (a[mid] < t) lo = mid + 1;
    else hi = mid;
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

// The batch's documents as an inverted table: sorted distinct terms U, and for
// U[i] the (document, weight) pairs [off[i], off[i + 1]).
struct BatchTable {
  const uint32_t* U;
  const uint32_t* off;
  const uint32_t* doc;
  const float* w;
  const uint32_t* filter;  // kFilterWords words: bit (t mod 65536) set for every t in U
  uint32_t nU;
  uint32_t nDocs;
};

// Micro-batch SpMM: one warp per row, lanes over the row's slots. Each slot's
// term is looked up once in the batch table and its products go to a per-warp
// accumulator per document (integer adds: order-free, so the result equals
// the sequential merge). The matrix is read once for the whole batch.
__global__ void __launch_bounds__(kThreads) ScoreBatchKernel(Ell m, uint64_t rows, BatchTable tab, uint64_t time0,
                                                             uint64_t maxAge, double T, unsigned long long* keys) {
  __shared__ unsigned long long acc[kWarps][kBatch];
  __shared__ uint32_t touched[kWarps][kBatch / 32];
  __shared__ unsigned long long bkey[kBatch];
  __shared__ uint32_t filter[kFilterWords];
  const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (unsigned i = threadIdx.x; i < kFilterWords; i += blockDim.x) filter[i] = tab.filter[i];
  for (unsigned i = threadIdx.x; i < kWarps * kBatch; i += blockDim.x) (&acc[0][0])[i] = 0;
  for (unsigned i = threadIdx.x; i < kWarps * (kBatch / 32); i += blockDim.x) (&touched[0][0])[i] = 0;
  for (unsigned i = threadIdx.x; i < kBatch; i += blockDim.x) bkey[i] = 0;
  __syncthreads();
  const uint64_t nw = uint64_t(gridDim.x) * kWarps;
  for (uint64_t r = uint64_t(blockIdx.x) * kWarps + warp; r < rows; r += nw) {
    for (uint32_t base = 0; base < m.K; base += 32) {
      const uint32_t k = base + lane;
      const uint32_t t = k < m.K ? m.terms[k * m.ld + r] : kNone;
      if (__all_sync(0xffffffffu, t == kNone)) break;
      if (t != kNone && MayHave(filter, t)) {
        const uint32_t i = LowerBound(tab.U, 0, tab.nU, t);
        if (i < tab.nU && tab.U[i] == t) {
          const float cw = m.w[k * m.ld + r];
          for (uint32_t p = tab.off[i]; p < tab.off[i + 1]; p++) {
            const uint32_t d = tab.doc[p];
            atomicAdd(&acc[warp][d], (unsigned long long)FixedProduct(tab.w[p], cw));
            atomicOr(&touched[warp][d >> 5], 1u << (d & 31));
          }
        }
      }
    }
    __syncwarp();
    for (uint32_t wi = lane; wi < kBatch / 32; wi += 32) {
      uint32_t bits = touched[warp][wi];
      touched[warp][wi] = 0;
      while (bits) {
        const uint32_t d = wi * 32 + (__ffs(bits) - 1);
        bits &= bits - 1;
        const uint64_t a = acc[warp][d];
        acc[warp][d] = 0;
        const float sim = FixedToFloat(a);
        if (a != 0 && double(sim) > T && Active(time0 + d, m.last[r], maxAge))
          atomicMax(&bkey[d], (unsigned long long)PackKey(sim, uint32_t(r)));
      }
    }
    __syncwarp();
  }
  __syncthreads();
  for (unsigned d = threadIdx.x; d < tab.nDocs; d += blockDim.x)
    if (bkey[d]) atomicMax(&keys[d], bkey[d]);
}

inline uint64_t Align8(uint64_t x) { return (x + 7) & ~uint64_t(7); }

class CudaScorer final : public Scorer {
 public:
  CudaScorer(const Config& cfg, const Rows& rows, int device)
      : cfg_(cfg), rows_(rows), device_(device), onDevice_(device), K_(cfg.maxTerms) {
    sms_ = unsigned(gpu::MultiprocessorCount(device));
    Grow(std::max<uint64_t>(cfg.capacity, 1));
    keys_.reset(2, "cluster keys");
    batchKeys_.reset(kBatch, "cluster batch keys");
    hKeys_.reserve(kBatch, "cluster keys (pinned)");
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
    const unsigned blocks = gpu::GridFor(rows, kThreads, sms_ * 8);
    ScoreOneKernel<<<blocks, kThreads, n * 8, stream_>>>(Matrix(), rows, DeviceUpdates(L, uint32_t(P)),
                                                        reinterpret_cast<const uint32_t*>(dBlob_.data() + L.docT),
                                                        reinterpret_cast<const float*>(dBlob_.data() + L.docW), n, time,
                                                        cfg_.maxAge, cfg_.threshold, keys_.data(), parity_);
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

  void ScoreBatch(const Docs& docs, uint64_t begin, uint64_t end, uint64_t time0, uint64_t* keys) override {
    gpu::DeviceGuard g(device_);
    const uint64_t rows = rows_.count;
    const uint32_t nDocs = uint32_t(end - begin);
    if (rows == 0) {
      std::fill(keys, keys + nDocs, 0);
      return;
    }
    if (!dirty_.empty()) Flush();
    // Inverted table of the batch: (term, doc) pairs sorted by term then doc.
    pairs_.clear();
    for (uint64_t d = begin; d < end; d++)
      for (uint64_t p = docs.ptr[d]; p < docs.ptr[d + 1]; p++) pairs_.push_back({docs.terms[p], uint32_t(d - begin), docs.weights[p]});
    std::sort(pairs_.begin(), pairs_.end(), [](const Pair& a, const Pair& b) { return a.t != b.t ? a.t < b.t : a.d < b.d; });
    uint32_t nU = 0;
    for (size_t i = 0; i < pairs_.size(); i++) nU += (i == 0 || pairs_[i].t != pairs_[i - 1].t);
    const uint64_t np = pairs_.size();
    Layout L;
    L.U = 0;
    L.off = Align8(L.U + uint64_t(nU) * 4);
    L.pd = Align8(L.off + uint64_t(nU + 1) * 4);
    L.pw = Align8(L.pd + np * 4);
    L.filter = Align8(L.pw + np * 4);
    L.total = L.filter + kFilterWords * 4;
    Reserve(L.total);
    auto* U = reinterpret_cast<uint32_t*>(hBlob_.data() + L.U);
    auto* off = reinterpret_cast<uint32_t*>(hBlob_.data() + L.off);
    auto* pd = reinterpret_cast<uint32_t*>(hBlob_.data() + L.pd);
    auto* pw = reinterpret_cast<float*>(hBlob_.data() + L.pw);
    auto* filter = reinterpret_cast<uint32_t*>(hBlob_.data() + L.filter);
    std::fill(filter, filter + kFilterWords, 0u);
    uint32_t u = 0;
    for (size_t i = 0; i < np; i++) {
      if (i == 0 || pairs_[i].t != pairs_[i - 1].t) {
        U[u] = pairs_[i].t;
        off[u++] = uint32_t(i);
        filter[(pairs_[i].t >> 5) & (kFilterWords - 1)] |= 1u << (pairs_[i].t & 31);
      }
      pd[i] = pairs_[i].d;
      pw[i] = pairs_[i].w;
    }
    off[nU] = uint32_t(np);
    t0_.record(stream_);
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(dBlob_.data(), hBlob_.data(), L.total, cudaMemcpyHostToDevice, stream_));
    CUSIM_CUDA_CHECK(cudaMemsetAsync(batchKeys_.data(), 0, uint64_t(nDocs) * 8, stream_));
    t1_.record(stream_);
    if (nU > 0) {
      BatchTable tab{reinterpret_cast<const uint32_t*>(dBlob_.data() + L.U), reinterpret_cast<const uint32_t*>(dBlob_.data() + L.off),
                     reinterpret_cast<const uint32_t*>(dBlob_.data() + L.pd), reinterpret_cast<const float*>(dBlob_.data() + L.pw),
                     reinterpret_cast<const uint32_t*>(dBlob_.data() + L.filter), nU, nDocs};
      const unsigned blocks = gpu::GridFor(rows, kWarps, sms_ * 8);
      ScoreBatchKernel<<<blocks, kThreads, 0, stream_>>>(Matrix(), rows, tab, time0, cfg_.maxAge, cfg_.threshold, batchKeys_.data());
      CUSIM_LAUNCH_CHECK();
    }
    t2_.record(stream_);
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(hKeys_.data(), batchKeys_.data(), uint64_t(nDocs) * 8, cudaMemcpyDeviceToHost, stream_));
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
    std::vector<uint32_t> t(uint64_t(K_) * ld_, kNone);
    std::vector<float> w(uint64_t(K_) * ld_, 0.f);
    for (uint64_t r = 0; r < n; r++)
      for (uint32_t k = 0; k < K_; k++) {
        t[k * ld_ + r] = rows_.terms[r * K_ + k];
        w[k * ld_ + r] = rows_.weights[r * K_ + k];
      }
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(terms_.data(), t.data(), t.size() * 4, cudaMemcpyHostToDevice, stream_));
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(w_.data(), w.data(), w.size() * 4, cudaMemcpyHostToDevice, stream_));
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(last_.data(), rows_.lastSeen.data(), n * 8, cudaMemcpyHostToDevice, stream_));
    stream_.sync();
  }

  Timing TakeTiming() override { return std::exchange(timing_, Timing{}); }
  uint64_t BatchSize() const override { return kBatch; }
  // One pass over the matrix serves up to kBatch documents instead of one.
  bool PreferBatch(uint64_t n) const override { return n >= 2; }

 private:
  struct Pair {
    uint32_t t, d;
    float w;
  };
  struct Layout {
    uint64_t ids = 0, last = 0, terms = 0, w = 0, docT = 0, docW = 0;
    uint64_t U = 0, off = 0, pd = 0, pw = 0, filter = 0;
    uint64_t total = 0;
  };

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
      CUSIM_CUDA_CHECK(cudaMemcpy2DAsync(t.data(), ld * 4, terms_.data(), ld_ * 4, ld_ * 4, K_, cudaMemcpyDeviceToDevice, stream_));
      CUSIM_CUDA_CHECK(cudaMemcpy2DAsync(w.data(), ld * 4, w_.data(), ld_ * 4, ld_ * 4, K_, cudaMemcpyDeviceToDevice, stream_));
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
  std::vector<Pair> pairs_;
  int parity_ = 0;
  Timing timing_;
};

}  // namespace

std::unique_ptr<Scorer> MakeCudaScorer(const Config& cfg, const Rows& rows, int device) {
  return std::make_unique<CudaScorer>(cfg, rows, device);
}

}  // namespace cluster
}  // namespace cusim
