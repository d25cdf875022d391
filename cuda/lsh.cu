// LSH bucketing on the GPU. Per band: hash the band of every representative
// row, CUB radix sort (key, row), find equal-key runs, and emit every pair of
// each run with one warp per sorted element (element i of a run writes its
// pairs with the later elements), so one huge bucket spreads over the GPU.
// Pairs of all bands are sorted and made unique at the end, on the device.
#include <cub/cub.cuh>

#include <memory>
#include <vector>

#include "../native/lsh.h"
#include "common/gpu.cuh"

namespace cusim {
namespace lsh {
namespace {

constexpr unsigned kThreads = 256;

__global__ void BandKeysKernel(const uint32_t* __restrict__ sig, uint32_t samples, uint32_t width,
                               const uint32_t* __restrict__ reps, uint64_t count, uint32_t band, uint32_t r,
                               uint64_t* __restrict__ keys, uint32_t* __restrict__ vals) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const uint32_t row = reps[i];
    keys[i] = BandKey(sig + uint64_t(row) * samples * width, band, r, width);
    vals[i] = row;
  }
}

// Band `band` of each rep's precomputed keys (row-major, `bands` per row).
__global__ void GatherKeysKernel(const uint64_t* __restrict__ rowKeys, uint32_t bands,
                                 const uint32_t* __restrict__ reps, uint64_t count, uint32_t band,
                                 uint64_t* __restrict__ keys, uint32_t* __restrict__ vals) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const uint32_t row = reps[i];
    keys[i] = rowKeys[uint64_t(row) * bands + band];
    vals[i] = row;
  }
}

// pairCount[run] = c (c - 1) / 2; the extra last entry is 0 so that an
// exclusive scan over runs + 1 entries ends with the band's total.
__global__ void PairCountKernel(const uint32_t* __restrict__ counts, const int* __restrict__ numRuns,
                                uint64_t* __restrict__ pairCount) {
  const int runs = *numRuns;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i <= runs; i += gridDim.x * blockDim.x) {
    const uint64_t c = i < runs ? counts[i] : 0;
    pairCount[i] = c * (c - (c > 0)) / 2;
  }
}

// One warp per sorted element e: with its run starting at s (found by binary
// search over run starts) and holding c elements, element i = e - s pairs
// with elements i+1..c-1. Pair (i, j) of a run lands at
//   runOffset + i*c - i(i+1)/2 + (j - i - 1).
__global__ void EmitPairsKernel(const uint32_t* __restrict__ vals, uint64_t count, const uint32_t* __restrict__ starts,
                                const uint32_t* __restrict__ counts, const uint64_t* __restrict__ pairOffset,
                                int numRuns, uint64_t* __restrict__ out) {
  const unsigned lane = threadIdx.x & 31;
  const uint64_t warps = uint64_t(gridDim.x) * blockDim.x / 32;
  for (uint64_t e = (uint64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; e < count; e += warps) {
    int lo = 0, hi = numRuns - 1;  // last run whose start <= e
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (starts[mid] <= e)
        lo = mid;
      else
        hi = mid - 1;
    }
    const uint64_t s = starts[lo], c = counts[lo], i = e - s;
    if (i + 1 >= c) continue;
    const uint64_t base = pairOffset[lo] + i * c - i * (i + 1) / 2 - i - 1;
    const uint64_t a = uint64_t(vals[e]) << 32;
    for (uint64_t j = i + 1 + lane; j < c; j += 32) out[base + j] = a | vals[s + j];
  }
}

// One warp per pair: lanes compare sample values ((k, t) pairs or words).
__global__ void EstimateKernel(const uint32_t* __restrict__ sig, uint32_t samples, uint32_t width,
                               const uint64_t* __restrict__ pairs, uint64_t count, float* __restrict__ out) {
  const unsigned lane = threadIdx.x & 31;
  const uint64_t warps = uint64_t(gridDim.x) * blockDim.x / 32;
  const uint64_t words = uint64_t(samples) * width;
  for (uint64_t k = (uint64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; k < count; k += warps) {
    const uint32_t* x = sig + (pairs[k] >> 32) * words;
    const uint32_t* y = sig + uint64_t(uint32_t(pairs[k])) * words;
    uint32_t eq = 0;
    for (uint32_t s0 = 0; s0 < samples; s0 += 32) {
      const uint32_t s = s0 + lane;
      bool same = false;
      if (s < samples) same = SampleValue(x, s, width) == SampleValue(y, s, width);
      eq += __popc(__ballot_sync(0xffffffffu, same));
    }
    if (lane == 0) out[k] = float(eq) / float(samples);
  }
}

unsigned Blocks(uint64_t threadsNeeded, int device) {
  return gpu::GridFor(threadsNeeded, kThreads, unsigned(gpu::MultiprocessorCount(device)) * 32);
}

// The band keys come from signatures (sig; BandKey on the device) or are
// given (keys, with sig null; no estimate then).
std::vector<uint64_t> RepPairsCuda(const SigView* sig, const KeyView* given, const std::vector<uint32_t>& reps,
                                   const Params& p, std::vector<float>* estimate, int device, Timing* timing) {
  const uint64_t R = reps.size();
  if (R > uint64_t(INT32_MAX)) ThrowInvalid("too many rows for one GPU LSH pass (at most 2^31 - 1)");
  if (R < 2) {
    if (estimate) estimate->clear();
    return {};
  }
  gpu::DeviceGuard guard(device);
  gpu::Stream stream;
  const uint64_t sigWords = sig ? sig->n * sig->words() : 0;
  const uint64_t keyWords = given ? given->n * given->bands : 0;
  gpu::DeviceBuffer<uint32_t> dSig(sigWords, "LSH signatures");
  gpu::DeviceBuffer<uint64_t> dRowKeys(keyWords, "LSH row band keys");
  gpu::DeviceBuffer<uint32_t> dReps(R, "LSH row list");
  gpu::DeviceBuffer<uint64_t> keys(R, "LSH band keys"), keysSorted(R, "LSH sorted band keys");
  gpu::DeviceBuffer<uint32_t> vals(R, "LSH band rows"), valsSorted(R, "LSH sorted band rows");
  gpu::DeviceBuffer<uint64_t> uniqueKeys(R, "LSH bucket keys");
  gpu::DeviceBuffer<uint32_t> counts(R, "LSH bucket sizes"), starts(R, "LSH bucket starts");
  gpu::DeviceBuffer<uint64_t> pairCount(R + 1, "LSH bucket pair counts"), pairOffset(R + 1, "LSH bucket pair offsets");
  gpu::DeviceBuffer<int> numRuns(1, "LSH bucket count");
  gpu::DeviceBuffer<uint8_t> temp;
  const int n = int(R);

  // Temporary storage for every CUB call below, sized once.
  size_t need = 0, t = 0;
  CUSIM_CUDA_CHECK(
      cub::DeviceRadixSort::SortPairs(nullptr, t, keys.data(), keysSorted.data(), vals.data(), valsSorted.data(), n));
  need = std::max(need, t);
  CUSIM_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(nullptr, t, keysSorted.data(), uniqueKeys.data(), counts.data(),
                                                      numRuns.data(), n));
  need = std::max(need, t);
  CUSIM_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, t, counts.data(), starts.data(), n));
  need = std::max(need, t);
  CUSIM_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, t, pairCount.data(), pairOffset.data(), n + 1));
  need = std::max(need, t);
  temp.reserve(std::max<size_t>(need, 256), "LSH CUB temporary storage");  // never null: CUB reads null as a size query

  gpu::Event t0, t1, t2, t3;
  t0.record(stream);
  if (sig) CUSIM_CUDA_CHECK(cudaMemcpyAsync(dSig.data(), sig->data, sigWords * 4, cudaMemcpyHostToDevice, stream));
  if (given)
    for (size_t k = 0; k < given->parts(); ++k)
      CUSIM_CUDA_CHECK(cudaMemcpyAsync(dRowKeys.data() + given->partStart(k) * given->bands, given->part(k),
                                       given->partRows(k) * given->bands * 8, cudaMemcpyHostToDevice, stream));
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(dReps.data(), reps.data(), R * 4, cudaMemcpyHostToDevice, stream));
  t1.record(stream);

  gpu::DeviceBuffer<uint64_t> pairs;
  uint64_t used = 0;
  for (uint32_t band = 0; band < p.bands; ++band) {
    if (sig)
      BandKeysKernel<<<Blocks(R, device), kThreads, 0, stream>>>(dSig.data(), sig->samples, sig->width, dReps.data(), R,
                                                                 band, p.rows, keys.data(), vals.data());
    else
      GatherKeysKernel<<<Blocks(R, device), kThreads, 0, stream>>>(dRowKeys.data(), given->bands, dReps.data(), R, band,
                                                                   keys.data(), vals.data());
    CUSIM_LAUNCH_CHECK();
    size_t bytes = temp.size();
    // Reps ascend and the sort is stable, so each run lists rows ascending and
    // every emitted pair has its smaller row first.
    CUSIM_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data(), bytes, keys.data(), keysSorted.data(), vals.data(),
                                                     valsSorted.data(), n, 0, 64, stream));
    bytes = temp.size();
    CUSIM_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(temp.data(), bytes, keysSorted.data(), uniqueKeys.data(),
                                                        counts.data(), numRuns.data(), n, stream));
    int runs = 0;
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(&runs, numRuns.data(), sizeof(int), cudaMemcpyDeviceToHost, stream));
    stream.sync();
    if (runs == n) continue;  // every bucket holds one row
    bytes = temp.size();
    CUSIM_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.data(), bytes, counts.data(), starts.data(), runs, stream));
    PairCountKernel<<<Blocks(uint64_t(runs) + 1, device), kThreads, 0, stream>>>(counts.data(), numRuns.data(),
                                                                                 pairCount.data());
    CUSIM_LAUNCH_CHECK();
    bytes = temp.size();
    CUSIM_CUDA_CHECK(
        cub::DeviceScan::ExclusiveSum(temp.data(), bytes, pairCount.data(), pairOffset.data(), runs + 1, stream));
    uint64_t total = 0;
    CUSIM_CUDA_CHECK(
        cudaMemcpyAsync(&total, pairOffset.data() + runs, sizeof(uint64_t), cudaMemcpyDeviceToHost, stream));
    stream.sync();
    if (total == 0) continue;
    if (used + total > pairs.size()) {
      // Grow geometrically; the pairs so far move to the new buffer.
      gpu::DeviceBuffer<uint64_t> bigger(std::max(used + total, 2 * pairs.size()), "LSH candidate pairs");
      if (used)
        CUSIM_CUDA_CHECK(cudaMemcpyAsync(bigger.data(), pairs.data(), used * 8, cudaMemcpyDeviceToDevice, stream));
      stream.sync();
      pairs = std::move(bigger);
    }
    EmitPairsKernel<<<Blocks(R * 32, device), kThreads, 0, stream>>>(valsSorted.data(), R, starts.data(), counts.data(),
                                                                     pairOffset.data(), runs, pairs.data() + used);
    CUSIM_LAUNCH_CHECK();
    used += total;
  }

  std::vector<uint64_t> out;
  if (used == 0) {
    stream.sync();
    if (estimate) estimate->clear();
    if (timing) {
      timing->transferMs = gpu::ElapsedMs(t0, t1);
      timing->kernelMs = 0;
    }
    return out;
  }
  // Sort and unique all bands' pairs. Rows fit in 32 bits, so only the bits
  // that can differ are sorted.
  int endBit = 32;
  while (endBit < 64 && (uint64_t(reps.back()) >> (endBit - 32)) != 0) ++endBit;
  gpu::DeviceBuffer<uint64_t> sorted(used, "LSH sorted candidate pairs");
  size_t bytes = 0;
  CUSIM_CUDA_CHECK(
      cub::DeviceRadixSort::SortKeys(nullptr, bytes, pairs.data(), sorted.data(), used, 0, endBit, stream));
  gpu::DeviceBuffer<uint64_t> numUnique(1, "LSH unique pair count");
  size_t bytes2 = 0;
  CUSIM_CUDA_CHECK(
      cub::DeviceSelect::Unique(nullptr, bytes2, sorted.data(), pairs.data(), numUnique.data(), used, stream));
  temp.reserve(std::max(bytes, bytes2), "LSH CUB temporary storage");
  bytes = temp.size();
  CUSIM_CUDA_CHECK(
      cub::DeviceRadixSort::SortKeys(temp.data(), bytes, pairs.data(), sorted.data(), used, 0, endBit, stream));
  bytes = temp.size();
  CUSIM_CUDA_CHECK(
      cub::DeviceSelect::Unique(temp.data(), bytes, sorted.data(), pairs.data(), numUnique.data(), used, stream));
  uint64_t uniq = 0;
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(&uniq, numUnique.data(), sizeof(uint64_t), cudaMemcpyDeviceToHost, stream));
  stream.sync();
  gpu::DeviceBuffer<float> dEst;
  if (estimate && uniq > 0) {
    dEst.reset(uniq, "LSH pair estimates");
    EstimateKernel<<<Blocks(uniq * 32, device), kThreads, 0, stream>>>(dSig.data(), sig->samples, sig->width,
                                                                       pairs.data(), uniq, dEst.data());
    CUSIM_LAUNCH_CHECK();
  }
  t2.record(stream);
  out.resize(uniq);
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(out.data(), pairs.data(), out.size() * 8, cudaMemcpyDeviceToHost, stream));
  if (estimate) {
    estimate->resize(out.size());
    if (uniq > 0)
      CUSIM_CUDA_CHECK(cudaMemcpyAsync(estimate->data(), dEst.data(), out.size() * 4, cudaMemcpyDeviceToHost, stream));
  }
  t3.record(stream);
  stream.sync();
  if (timing) {
    timing->transferMs = gpu::ElapsedMs(t0, t1) + gpu::ElapsedMs(t2, t3);
    timing->kernelMs = gpu::ElapsedMs(t1, t2);
  }
  return out;
}

class CudaBucketer final : public Bucketer {
 public:
  explicit CudaBucketer(int device) : device_(device) {}
  std::vector<uint64_t> RepPairs(const SigView& sig, const std::vector<uint32_t>& reps, const Params& p,
                                 std::vector<float>* estimate, Timing* timing) const override {
    return RepPairsCuda(&sig, nullptr, reps, p, estimate, device_, timing);
  }
  std::vector<uint64_t> RepPairsFromKeys(const KeyView& keys, const std::vector<uint32_t>& reps,
                                         Timing* timing) const override {
    Params p;
    p.bands = keys.bands;
    p.rows = 1;  // unused: the keys are given
    return RepPairsCuda(nullptr, &keys, reps, p, nullptr, device_, timing);
  }

 private:
  int device_;
};

}  // namespace

std::unique_ptr<Bucketer> MakeCudaBucketer(int device) { return std::make_unique<CudaBucketer>(device); }

}  // namespace lsh
}  // namespace cusim
