// Probe batches from prefix sums: the serial greedy cut reads each probe once
// and pushes into growing vectors, about as long as a block's kernels at 10M
// sets. Here the probes with a table are compacted and their capacities and
// candidate bounds summed on all cores; a batch's end is then a binary search
// in the capacity sums (a few per block), and the batches' arrays are filled
// in parallel. The cuts are the greedy scan's exactly.
#include "join_plan.h"

#include <algorithm>

#include "parallel.h"
#include "uninit_vector.h"

namespace cusim {
namespace join {

void PlanBatches(const uint8_t* lg, const uint64_t* cands, uint64_t np, uint64_t p0, uint64_t budget,
                 uint64_t maxProbes, BatchPlan* out) {
  maxProbes = std::max<uint64_t>(maxProbes, 1);
  // Fixed slices (not one per thread): the sums do not depend on the thread
  // count, and neither could the plan.
  constexpr uint64_t kSlice = 1 << 16;
  const uint64_t slices = (np + kSlice - 1) / kSlice;
  std::vector<uint64_t> kept(slices + 1, 0), capSum(slices + 1, 0), candSum(slices + 1, 0);
  ParallelFor(slices, 1, [&](size_t b, size_t e) {
    for (size_t s = b; s < e; s++) {
      uint64_t k = 0, c = 0, m = 0;
      for (uint64_t j = s * kSlice, end = std::min(np, j + kSlice); j < end; j++) {
        const bool on = lg[j] != 0;
        k += on;
        c += on ? uint64_t(1) << lg[j] : 0;
        m += on ? cands[j] : 0;
      }
      kept[s + 1] = k, capSum[s + 1] = c, candSum[s + 1] = m;
    }
  });
  for (uint64_t s = 0; s < slices; s++) {
    kept[s + 1] += kept[s];
    capSum[s + 1] += capSum[s];
    candSum[s + 1] += candSum[s];
  }
  const uint64_t K = kept[slices];
  out->probes.resize(K);
  // Inclusive sums over the kept probes: C[k] = capacity of kept probes [0, k).
  UninitVector<uint64_t>& C = out->capSum;
  UninitVector<uint64_t>& M = out->candSum;
  C.resize(K + 1);
  M.resize(K + 1);
  C[0] = 0, M[0] = 0;
  ParallelFor(slices, 1, [&](size_t b, size_t e) {
    for (size_t s = b; s < e; s++) {
      uint64_t k = kept[s], c = capSum[s], m = candSum[s];
      for (uint64_t j = s * kSlice, end = std::min(np, j + kSlice); j < end; j++) {
        if (lg[j] == 0) continue;
        out->probes[k] = uint32_t(p0 + j);
        c += uint64_t(1) << lg[j];
        m += cands[j];
        k++;
        C[k] = c, M[k] = m;
      }
    }
  });
  // The greedy cut: a batch from s takes probe k > s while C[k + 1] - C[s] <=
  // budget and k - s < maxProbes.
  out->start.assign(1, 0);
  out->maxCands.clear();
  for (uint64_t s = 0; s < K;) {
    const uint64_t bound = C[s] > UINT64_MAX - budget ? UINT64_MAX : C[s] + budget;
    const uint64_t i = uint64_t(std::upper_bound(C.begin() + s + 1, C.end(), bound) - C.begin());
    const uint64_t e = std::min(std::max(i - 1, s + 1), s + maxProbes);
    out->start.push_back(e);
    out->maxCands.push_back(M[e] - M[s]);
    s = e;
  }
  const uint64_t nb = out->batches();
  out->tableOff.resize(K + nb);
  ParallelFor(K, 1 << 14, [&](size_t b, size_t e) {
    uint64_t bi =
        uint64_t(std::upper_bound(out->start.begin(), out->start.end(), uint64_t(b)) - out->start.begin()) - 1;
    for (size_t k = b; k < e; k++) {
      while (k >= out->start[bi + 1]) bi++;
      out->tableOff[k + bi] = C[k] - C[out->start[bi]];
    }
  });
  for (uint64_t bi = 0; bi < nb; bi++)
    out->tableOff[out->start[bi + 1] + bi] = C[out->start[bi + 1]] - C[out->start[bi]];
}

}  // namespace join
}  // namespace cusim
