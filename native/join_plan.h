// The GPU join's probe-batch plan, computed on the host on all cores. Host
// only (no CUDA headers), so the CPU build and its tests check it too.
#pragma once

#include <cstdint>
#include <vector>

#include "uninit_vector.h"

namespace cusim {
namespace join {

// Probes with a candidate table, cut into batches the way a serial greedy
// scan cuts them: a batch takes probes in order until the next one would
// bring its table slots past `budget` or its probes to `maxProbes` (a batch
// always takes at least one probe).
struct BatchPlan {
  std::vector<uint32_t> probes;    // every batch's probes end to end
  std::vector<uint64_t> start;     // batch b holds probes[start[b], start[b + 1])
  std::vector<uint64_t> tableOff;  // batch b: its n + 1 table offsets (from 0) at tableOff[start[b] + b]
  std::vector<uint64_t> maxCands;  // per batch: the most candidates its probes may yield
  // Scratch kept across calls (the GPU joiner plans one block after another):
  // the kept probes' capacity and candidate sums, not allocated and faulted
  // in again per block.
  UninitVector<uint64_t> capSum, candSum;
  uint64_t batches() const { return start.empty() ? 0 : start.size() - 1; }
};

// lg[j]: log2 of probe p0 + j's table capacity, 0 for a probe without
// candidates (skipped); cands[j]: the most candidates it may yield.
void PlanBatches(const uint8_t* lg, const uint64_t* cands, uint64_t np, uint64_t p0, uint64_t budget,
                 uint64_t maxProbes, BatchPlan* out);

}  // namespace join
}  // namespace cusim
