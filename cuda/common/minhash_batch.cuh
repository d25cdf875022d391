// The host side both MinHash engines (weighted and classic) share on the GPU:
// a call's rows are split across devices by nnz, cut into batches that fit a
// slot's buffers, and fed by three host threads per device into three slots,
// so one batch uploads while another runs its kernels and a third downloads.
// Rows are cut into segments of at most kSegment nonzeros, one warp each, so a
// 1M-nnz row among millions of short rows spreads over the whole GPU.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "../../native/common.h"
#include "../../native/minhash.h"
#include "gpu.cuh"

namespace cusim {
namespace minhash {

constexpr uint32_t kSegment = 1024;  // nonzeros per warp task
constexpr uint32_t kNone = 0xFFFFFFFFu;

struct Seg {
  uint32_t row;    // batch-local row
  uint32_t begin;  // batch-local nnz positions
  uint32_t end;
  uint32_t split;  // scratch slot of a row spanning several segments, else kNone
};

// One in-flight batch: its own stream, pinned staging and device buffers.
// Engines use what they need (dSlot and dScratch are the weighted engine's).
struct Slot {
  gpu::Stream stream;
  gpu::Event e0, e1, e2;
  // Recorded last on the stream (QueueDownload): feeding threads wait on it
  // asleep (blocking), so 3 threads per GPU do not spin on the cores that
  // stage and copy out the other batches.
  gpu::Event e3{true, true};
  gpu::PinnedBuffer<uint32_t> hIdx, hSplit, hOut;
  gpu::PinnedBuffer<float> hVal;
  gpu::PinnedBuffer<Seg> hSeg;
  gpu::DeviceBuffer<uint32_t> dIdx, dSlot, dSplit, dOut;
  gpu::DeviceBuffer<float> dVal;
  gpu::DeviceBuffer<Seg> dSeg;
  gpu::DeviceBuffer<unsigned long long> dScratch;
  gpu::DeviceBuffer<unsigned> dBad;  // flags raised by the batch's kernels
  gpu::PinnedBuffer<unsigned> hBad;
};

constexpr int kSlots = 3;

// One GPU's slots; engines derive their per-device state from it.
struct Pipe {
  int id = 0;
  std::unique_ptr<Slot> slots[kSlots];
  std::mutex m;
  std::condition_variable cv;
  bool busy[kSlots] = {};

  Pipe();
  int Acquire();
  void Release(int i);
};

struct Batch {
  uint64_t r0, r1;
  uint64_t nnz, nseg, nsplit;
};

// The largest batch of a call: every slot is sized for it once, so no batch
// reallocates (cudaFree would stall the other slots' work).
struct Need {
  uint64_t nnz = 0, rows = 0, nseg = 0, nsplit = 0;
  void add(const Batch& b) {
    nnz = std::max(nnz, b.nnz), rows = std::max(rows, b.r1 - b.r0);
    nseg = std::max(nseg, b.nseg), nsplit = std::max(nsplit, b.nsplit);
  }
};

// Which of a call's host buffers are already page-locked (pinnedArray): the
// copies then DMA straight from and into them, with no staging copy.
struct Direct {
  bool indices = false, values = false, out = false;
};

// What one batch is: its rows, where its output goes, and the call's shape.
struct BatchJob {
  const CsrView* m;
  const Batch* bt;
  const Need* need;
  Direct direct;
  bool values;           // stage matrix values (the weighted engine)
  uint32_t wordsPerRow;  // output words per row
  uint32_t* dst;         // the batch's first output word on the host
};

// Reserves the slot's buffers for the call, copies the batch's CSR slice into
// pinned staging (unless direct), builds its segments, records e0 and queues
// the uploads on the slot's stream. Adds the staging time to timing.
void StageBatch(Slot& sl, const BatchJob& job, Timing* timing);
// Queues the output and flag downloads (after the engine's kernels), records e3.
void QueueDownload(Slot& sl, const BatchJob& job);
// Waits, asleep, until the batch queued on the slot's stream (through e3) is done.
inline void WaitBatch(Slot& sl) { sl.e3.sync(); }
// After the stream is synced: copies the output out of staging (unless direct).
void CopyOut(Slot& sl, const BatchJob& job, Timing* timing);

// Thrown by a batch whose kernels met a bad column or weight; the engine then
// names the element with the ordinary host checks.
struct BadInput {};

// Runs run(device index, slot, job, timing) for every batch of rows
// [rowStart, rowEnd), rows split across pipes by nnz, `perDevice` threads per
// pipe. Returns whether a batch threw BadInput; rethrows other errors.
using BatchRunner = std::function<void(size_t device, Slot& sl, const BatchJob& job, Timing* timing)>;
bool RunBatches(const std::vector<Pipe*>& pipes, const CsrView& m, uint64_t rowStart, uint64_t rowEnd, uint32_t* out,
                uint32_t wordsPerRow, bool values, int perDevice, const BatchRunner& run, Timing* timing,
                const CancelToken& cancel);

}  // namespace minhash
}  // namespace cusim
