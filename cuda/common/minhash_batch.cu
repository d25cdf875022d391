// The MinHash engines' shared batch pipeline (minhash_batch.cuh).
#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>

#include "../../native/parallel.h"
#include "minhash_batch.cuh"

namespace cusim {
namespace minhash {
namespace {

// Per slot: 128 MB of indices + values and at most 128 MB of output. Small
// enough that filling and draining the pipeline (the first batch's upload, the
// last one's download) stays a few ms, which is what bounds 2-GPU scaling once
// the host copies are gone.
constexpr uint64_t kBatchNnz = 16ull << 20;
constexpr uint64_t kBatchOutBytes = 128ull << 20;
constexpr uint64_t kBatchRows = 1ull << 18;

// Segments of one row: an empty row still gets one (empty) segment so the
// kernel writes its sentinel.
inline uint64_t SegmentsOf(uint64_t len) { return std::max<uint64_t>(1, (len + kSegment - 1) / kSegment); }

// Greedy cut of [a, b) so each batch fits a slot's buffers (a lone huge row is its own batch).
std::vector<Batch> PlanBatches(const CsrView& m, uint64_t a, uint64_t b, uint32_t wordsPerRow) {
  const uint64_t maxRows = std::max<uint64_t>(1, std::min(kBatchRows, kBatchOutBytes / (uint64_t(wordsPerRow) * 4)));
  std::vector<Batch> out;
  uint64_t r = a;
  while (r < b) {
    uint64_t e = r + 1;
    while (e < b && e - r < maxRows && uint64_t(m.indptr[e + 1]) - m.indptr[r] <= kBatchNnz) ++e;
    Batch bt{r, e, uint64_t(m.indptr[e]) - m.indptr[r], 0, 0};
    for (uint64_t i = r; i < e; ++i) {
      const uint64_t k = SegmentsOf(uint64_t(m.indptr[i + 1]) - m.indptr[i]);
      bt.nseg += k;
      bt.nsplit += k > 1;
    }
    out.push_back(bt);
    r = e;
  }
  return out;
}

bool IsPinned(const void* p) {
  cudaPointerAttributes a;
  if (!p || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeHost;
}

}  // namespace

Pipe::Pipe() {
  for (auto& s : slots) s = std::make_unique<Slot>();
}

int Pipe::Acquire() {
  std::unique_lock<std::mutex> lock(m);
  for (;;) {
    for (int i = 0; i < kSlots; ++i)
      if (!busy[i]) return busy[i] = true, i;
    cv.wait(lock);
  }
}

void Pipe::Release(int i) {
  {
    std::lock_guard<std::mutex> lock(m);
    busy[i] = false;
  }
  cv.notify_one();
}

void StageBatch(Slot& sl, const BatchJob& job, Timing* timing) {
  const CsrView& m = *job.m;
  const Batch& bt = *job.bt;
  const Need& need = *job.need;
  const bool values = job.values && m.values;
  const uint64_t nnz = bt.nnz, nseg = bt.nseg, nsplit = bt.nsplit;
  const uint32_t nz0 = m.indptr[bt.r0];
  if (!job.direct.indices) sl.hIdx.reserve(need.nnz, "MinHash staged indices");
  if (values && !job.direct.values) sl.hVal.reserve(need.nnz, "MinHash staged values");
  sl.hSeg.reserve(need.nseg, "MinHash segments");
  sl.hSplit.reserve(std::max<uint64_t>(need.nsplit, 1), "MinHash split rows");
  if (!job.direct.out) sl.hOut.reserve(need.rows * job.wordsPerRow, "MinHash staged signatures");
  sl.dBad.reserve(1, "MinHash input check flag");
  sl.hBad.reserve(1, "MinHash input check flag");
  sl.dIdx.reserve(need.nnz, "MinHash indices");
  if (values) sl.dVal.reserve(need.nnz, "MinHash values");
  sl.dSeg.reserve(need.nseg, "MinHash segments");
  sl.dSplit.reserve(std::max<uint64_t>(need.nsplit, 1), "MinHash split rows");
  sl.dOut.reserve(need.rows * job.wordsPerRow, "MinHash signatures");

  const auto t0 = std::chrono::steady_clock::now();
  const uint32_t* srcIdx = m.indices + nz0;
  const float* srcVal = values ? m.values + nz0 : nullptr;
  if (!job.direct.indices) gpu::ParallelCopy(sl.hIdx.data(), srcIdx, nnz * 4), srcIdx = sl.hIdx.data();
  if (srcVal && !job.direct.values) gpu::ParallelCopy(sl.hVal.data(), srcVal, nnz * 4), srcVal = sl.hVal.data();
  Seg* seg = sl.hSeg.data();
  uint32_t* split = sl.hSplit.data();
  uint64_t si = 0, sp = 0;
  for (uint64_t r = bt.r0; r < bt.r1; ++r) {
    const uint32_t b = m.indptr[r] - nz0, e = m.indptr[r + 1] - nz0;
    const uint32_t local = uint32_t(r - bt.r0);
    if (e - b <= kSegment) {
      seg[si++] = {local, b, e, kNone};
      continue;
    }
    const uint32_t slot = uint32_t(sp);
    split[sp++] = local;
    for (uint32_t x = b; x < e; x += std::min(kSegment, e - x))
      seg[si++] = {local, x, x + std::min(kSegment, e - x), slot};
  }
  timing->stageInMs += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  cudaStream_t st = sl.stream;
  sl.e0.record(st);
  if (nnz) CUSIM_CUDA_CHECK(cudaMemcpyAsync(sl.dIdx.data(), srcIdx, nnz * 4, cudaMemcpyHostToDevice, st));
  if (nnz && srcVal) CUSIM_CUDA_CHECK(cudaMemcpyAsync(sl.dVal.data(), srcVal, nnz * 4, cudaMemcpyHostToDevice, st));
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(sl.dSeg.data(), seg, nseg * sizeof(Seg), cudaMemcpyHostToDevice, st));
  if (nsplit) CUSIM_CUDA_CHECK(cudaMemcpyAsync(sl.dSplit.data(), split, nsplit * 4, cudaMemcpyHostToDevice, st));
}

void QueueDownload(Slot& sl, const BatchJob& job) {
  cudaStream_t st = sl.stream;
  const uint64_t words = (job.bt->r1 - job.bt->r0) * job.wordsPerRow;
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(job.direct.out ? job.dst : sl.hOut.data(), sl.dOut.data(), words * 4,
                                   cudaMemcpyDeviceToHost, st));
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(sl.hBad.data(), sl.dBad.data(), sizeof(unsigned), cudaMemcpyDeviceToHost, st));
  sl.e3.record(st);
}

void CopyOut(Slot& sl, const BatchJob& job, Timing* timing) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!job.direct.out) gpu::ParallelCopy(job.dst, sl.hOut.data(), (job.bt->r1 - job.bt->r0) * job.wordsPerRow * 4);
  timing->stageOutMs += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

bool RunBatches(const std::vector<Pipe*>& pipes, const CsrView& m, uint64_t rowStart, uint64_t rowEnd, uint32_t* out,
                uint32_t wordsPerRow, bool values, int perDevice, const BatchRunner& run, Timing* timing,
                const CancelToken& cancel) {
  const size_t nd = pipes.size();
  // Rows cut by nnz so every device gets about the same work.
  const std::vector<uint64_t> cut = SplitRowsByNnz(m, rowStart, rowEnd, nd);
  std::vector<std::vector<Batch>> plans(nd);
  std::vector<std::atomic<size_t>> next(nd);
  std::vector<Need> needs(nd);
  Direct direct;
  {
    gpu::DeviceGuard g(pipes[0]->id);
    const uint64_t nz0 = m.indptr[rowStart];
    direct.indices = IsPinned(m.indices + nz0);
    direct.values = values && m.values && IsPinned(m.values + nz0);
    direct.out = IsPinned(out);
  }
  for (size_t k = 0; k < nd; ++k) {
    plans[k] = PlanBatches(m, cut[k], cut[k + 1], wordsPerRow);
    for (const Batch& b : plans[k]) needs[k].add(b);
    next[k] = 0;
  }
  std::vector<Timing> timings(nd * kSlots);
  std::vector<std::exception_ptr> errors(nd * kSlots);
  std::atomic<bool> failed{false}, badInput{false};
  std::vector<std::thread> threads;
  for (size_t k = 0; k < nd; ++k) {
    for (int t = 0; t < perDevice; ++t) {
      threads.emplace_back([&, k, t] {
        try {
          Pipe& pipe = *pipes[k];
          gpu::DeviceGuard g(pipe.id);
          for (;;) {
            if (failed.load() || cancel.requested()) return;
            const size_t i = next[k].fetch_add(1);
            if (i >= plans[k].size()) return;
            const Batch& bt = plans[k][i];
            const BatchJob job{&m, &bt, &needs[k], direct, values, wordsPerRow, out + (bt.r0 - rowStart) * wordsPerRow};
            const int s = pipe.Acquire();
            try {
              run(k, *pipe.slots[s], job, &timings[k * kSlots + t]);
              cancel.advance(bt.r1 - bt.r0);
            } catch (...) {
              pipe.Release(s);
              throw;
            }
            pipe.Release(s);
          }
        } catch (const BadInput&) {
          badInput = true;
          failed = true;
        } catch (...) {
          errors[k * kSlots + t] = std::current_exception();
          failed = true;
        }
      });
    }
  }
  for (auto& th : threads) th.join();
  for (auto& err : errors)
    if (err && !badInput) std::rethrow_exception(err);
  if (!badInput) cancel.check();
  for (const Timing& t : timings) {
    timing->kernelMs += t.kernelMs, timing->transferMs += t.transferMs;
    timing->stageInMs += t.stageInMs, timing->waitMs += t.waitMs, timing->stageOutMs += t.stageOutMs;
  }
  return badInput;
}

}  // namespace minhash
}  // namespace cusim
