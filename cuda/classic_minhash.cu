// Classic MinHash kernel: one warp per segment of at most kSegment tokens,
// lanes over samples (kPer each per pass, their (a, b) in registers), the
// segment's tokens loaded 32 at a time and broadcast by shuffle. A row that
// spans several segments merges with a 32-bit atomicMin on its output, which
// starts at the empty value 2^32 - 1, so no finalize pass is needed. The
// result is the CPU's bit for bit: integer arithmetic only.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "../native/classic_minhash.h"
#include "common/gpu.cuh"
#include "common/minhash_batch.cuh"

namespace cusim {
namespace minhash {
namespace {

constexpr unsigned kClassicThreads = 256;
constexpr int kPer = 4;  // samples per lane per pass: 128 in one pass

// UniversalHash's value is the low 32 bits of (x & p) + (x >> 61), plus 1
// when that sum reaches p. The sum can reach p only when bits 32..60 of x are
// all set (probability 2^-29), so the scan takes the cheap part alone and
// keeps in `guard` the minimum of ~hi over those bits: 0 means the case may
// have occurred and the segment's samples are computed again exactly.
__device__ __forceinline__ uint32_t FastHash(uint64_t a, uint64_t b, uint32_t h, uint32_t& guard) {
  const uint64_t x = a * h + b;
  const uint32_t hi = uint32_t(x >> 32);
  guard = min(guard, ~hi & 0x1FFFFFFFu);
  return uint32_t(x) + (hi >> 29);
}

__global__ void __launch_bounds__(kClassicThreads)
    ClassicKernel(const Seg* __restrict__ segs, uint64_t nseg, const uint32_t* __restrict__ tokens,
                  const ulonglong2* __restrict__ ab, uint32_t samples, uint64_t cols, uint32_t* __restrict__ out,
                  unsigned* bad) {
  const uint64_t w = (uint64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (w >= nseg) return;  // uniform per warp
  const unsigned lane = threadIdx.x & 31;
  const Seg sg = segs[w];
  for (uint32_t s0 = 0; s0 < samples; s0 += 32 * kPer) {
    uint64_t a[kPer], b[kPer];
    uint32_t best[kPer], guard[kPer];
#pragma unroll
    for (int q = 0; q < kPer; ++q) {
      const uint32_t s = s0 + q * 32 + lane;
      const ulonglong2 p = s < samples ? __ldg(ab + s) : make_ulonglong2(0, 0);
      a[q] = p.x, b[q] = p.y, best[q] = kMaxHash, guard[q] = 0xFFFFFFFFu;
    }
    for (uint32_t base = sg.begin; base < sg.end; base += 32) {
      const uint32_t n = min(32u, sg.end - base);
      uint32_t tok = 0;
      if (lane < n) {
        tok = __ldg(tokens + base + lane);
        if (tok >= cols) atomicOr(bad, 1u);  // the host names it; the output is discarded
      }
      for (uint32_t j = 0; j < n; ++j) {
        const uint32_t h = __shfl_sync(0xffffffffu, tok, j);
#pragma unroll
        for (int q = 0; q < kPer; ++q) best[q] = min(best[q], FastHash(a[q], b[q], h, guard[q]));
      }
    }
    bool redo = false;
#pragma unroll
    for (int q = 0; q < kPer; ++q) redo |= guard[q] == 0;
    if (__any_sync(0xffffffffu, redo)) {
      // Rare: the exact hash for the samples whose guard fell to 0.
#pragma unroll
      for (int q = 0; q < kPer; ++q)
        if (guard[q] == 0) best[q] = kMaxHash;
      for (uint32_t base = sg.begin; base < sg.end; base += 32) {
        const uint32_t n = min(32u, sg.end - base);
        const uint32_t tok = lane < n ? __ldg(tokens + base + lane) : 0;
        for (uint32_t j = 0; j < n; ++j) {
          const uint32_t h = __shfl_sync(0xffffffffu, tok, j);
#pragma unroll
          for (int q = 0; q < kPer; ++q)
            if (guard[q] == 0) best[q] = min(best[q], UniversalHash(a[q], b[q], h));
        }
      }
    }
#pragma unroll
    for (int q = 0; q < kPer; ++q) {
      const uint32_t s = s0 + q * 32 + lane;
      if (s >= samples) continue;
      uint32_t* o = out + uint64_t(sg.row) * samples + s;
      if (sg.split == kNone)
        *o = best[q];
      else
        atomicMin(o, best[q]);
    }
  }
}

struct ClassicDevice : Pipe {
  gpu::DeviceBuffer<ulonglong2> ab;  // (a, b) per sample
};

void RunClassicBatch(ClassicDevice& dev, Slot& sl, const BatchJob& job, uint32_t samples, Timing* timing) {
  const Batch& bt = *job.bt;
  StageBatch(sl, job, timing);
  const auto t1 = std::chrono::steady_clock::now();
  cudaStream_t st = sl.stream;
  sl.e1.record(st);
  CUSIM_CUDA_CHECK(cudaMemsetAsync(sl.dBad.data(), 0, sizeof(unsigned), st));
  // Split rows merge by atomicMin into outputs that start empty.
  if (bt.nsplit) CUSIM_CUDA_CHECK(cudaMemsetAsync(sl.dOut.data(), 0xFF, (bt.r1 - bt.r0) * samples * 4ull, st));
  ClassicKernel<<<gpu::GridFor(bt.nseg * 32, kClassicThreads, 0x7fffffffu), kClassicThreads, 0, st>>>(
      sl.dSeg.data(), bt.nseg, sl.dIdx.data(), dev.ab.data(), samples, job.m->cols, sl.dOut.data(), sl.dBad.data());
  CUSIM_LAUNCH_CHECK();
  sl.e2.record(st);
  QueueDownload(sl, job);
  WaitBatch(sl);
  timing->kernelMs += gpu::ElapsedMs(sl.e1, sl.e2);
  timing->transferMs += gpu::ElapsedMs(sl.e0, sl.e1) + gpu::ElapsedMs(sl.e2, sl.e3);
  timing->waitMs += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
  if (*sl.hBad.data()) throw BadInput{};
  CopyOut(sl, job, timing);
}

struct ClassicCudaEngine {
  uint32_t samples = 0;
  std::vector<std::unique_ptr<ClassicDevice>> devs;
  ~ClassicCudaEngine() {
    for (auto& d : devs) {
      gpu::DeviceGuard g(d->id);
      d.reset();
    }
  }
};

std::shared_ptr<ClassicCudaEngine> CreateClassicCudaEngine(const std::vector<int>& devices, const uint64_t* a,
                                                           const uint64_t* b, uint32_t samples) {
  auto e = std::make_shared<ClassicCudaEngine>();
  e->samples = samples;
  std::vector<ulonglong2> ab(samples);
  for (uint32_t s = 0; s < samples; ++s) ab[s] = make_ulonglong2(a[s], b[s]);
  for (int id : devices) {
    gpu::DeviceGuard g(id);
    auto d = std::make_unique<ClassicDevice>();
    d->id = id;
    d->ab.reset(samples, "MinHash permutations");
    CUSIM_CUDA_CHECK(cudaMemcpy(d->ab.data(), ab.data(), samples * sizeof(ulonglong2), cudaMemcpyHostToDevice));
    e->devs.push_back(std::move(d));
  }
  return e;
}

void ClassicHashCuda(ClassicCudaEngine& e, const CsrView& m, uint64_t rowStart, uint64_t rowEnd, uint32_t* out,
                     const Tuning& tuning, Timing* timing, const CancelToken& cancel) {
  const int perDevice = tuning.overlap ? kSlots : 1;
  std::vector<Pipe*> pipes;
  for (auto& d : e.devs) pipes.push_back(d.get());
  const bool bad = RunBatches(
      pipes, m, rowStart, rowEnd, out, e.samples, false, perDevice,
      [&](size_t k, Slot& sl, const BatchJob& job, Timing* t) { RunClassicBatch(*e.devs[k], sl, job, e.samples, t); },
      timing, cancel);
  if (bad) {
    CsrView part = m;
    part.rows = rowEnd - rowStart;
    part.indptr = m.indptr + rowStart;
    ValidateCsr(part, "matrix");  // names the first column out of range
    ThrowInvalid("matrix has a column out of range");
  }
}

class CudaClassicHasher final : public Hasher {
 public:
  CudaClassicHasher(std::vector<uint64_t> a, std::vector<uint64_t> b, const std::vector<int>& devices,
                    const Tuning& tuning)
      : a_(std::move(a)), b_(std::move(b)), devices_(devices), tuning_(tuning) {}

  void Hash(const CsrView& m, uint32_t* out, Timing* timing, const CancelToken& cancel) override {
    ValidateIndptr(m, "matrix");  // columns are checked by the kernel that reads them
    ClassicHashCuda(Engine(), m, 0, m.rows, out, tuning_, timing, cancel);
  }

 private:
  ClassicCudaEngine& Engine() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!engine_) engine_ = CreateClassicCudaEngine(devices_, a_.data(), b_.data(), uint32_t(a_.size()));
    return *engine_;
  }

  std::vector<uint64_t> a_, b_;
  std::vector<int> devices_;
  Tuning tuning_;
  std::mutex mutex_;
  std::shared_ptr<ClassicCudaEngine> engine_;
};

}  // namespace

std::unique_ptr<Hasher> MakeCudaClassicHasher(std::vector<uint64_t> a, std::vector<uint64_t> b,
                                              const std::vector<int>& devices, const Tuning& tuning) {
  return std::make_unique<CudaClassicHasher>(std::move(a), std::move(b), devices, tuning);
}

}  // namespace minhash
}  // namespace cusim
