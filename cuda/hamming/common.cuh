// Device state of a Hamming index and the helpers every kernel family uses
// (padding, popcounts, launch constants).
// Internal to cuda/hamming.cu, which includes every kernel header: one
// translation unit, so the kernels keep internal linkage.
#pragma once

#include <cub/cub.cuh>

#include <algorithm>
#include <vector>

#include "../../native/gpu.h"
#include "../../native/hamming.h"
#include "../common/gpu.cuh"

namespace cusim {
namespace hamming {

// Queries padded to wp words plus their popcounts, on the device.
struct QueryBatch {
  gpu::DeviceBuffer<uint32_t> codes, pops;
  std::vector<uint32_t> host;
};

struct DeviceIndex {
  int device = 0;
  uint64_t rows = 0;
  uint32_t wp = 0;  // words per row padded to a multiple of 8 (one 256-bit MMA k-step)
  gpu::DeviceBuffer<uint32_t> codes, pops;
  bool built = false;
  gpu::DeviceBuffer<uint32_t> positions, ids, masks, maskWeights;
  gpu::DeviceBuffer<unsigned long long> offsets;  // tables * 2^h + 1 global positions into ids
  // Exact-search scratch, kept between searches (which the index mutex serializes) so that a
  // search allocates nothing once warm: the candidate buffer alone is 32 KiB per query.
  QueryBatch exQueries;
  gpu::DeviceBuffer<uint32_t> exHist, exBound, exCandCnt, exOutIds;
  gpu::DeviceBuffer<unsigned long long> exCand;
  gpu::DeviceBuffer<uint16_t> exOutDist;
};

namespace {

constexpr int kThreads = 256;
constexpr uint32_t kTieCap = 1024;   // >= kMaxK, so an overflow is always resolvable in order
constexpr uint32_t kCandCap = 4096;  // fast path: every d <= bound fits here for nearly all queries
using BlockScan = cub::BlockScan<uint32_t, kThreads>;

inline uint32_t PaddedWords(uint32_t bits) { return (bits / 32 + 7) / 8 * 8; }

// Copies rows of w words into rows of wp words (zero padding keeps distances and ANDs unchanged).
std::vector<uint32_t> Pad(const uint32_t* src, uint64_t rows, uint32_t w, uint32_t wp) {
  std::vector<uint32_t> out(rows * wp, 0);
  for (uint64_t r = 0; r < rows; ++r) std::copy(src + r * w, src + r * w + w, out.begin() + r * wp);
  return out;
}

__device__ __forceinline__ uint32_t KeyOf(const uint32_t* code, const uint32_t* pos, uint32_t h) {
  uint32_t key = 0;
  for (uint32_t j = 0; j < h; ++j) key |= ((code[pos[j] >> 5] >> (pos[j] & 31)) & 1u) << j;
  return key;
}

__device__ __forceinline__ uint32_t RowDistance(const uint32_t* row, const uint32_t* q, uint32_t wp) {
  uint32_t d = 0;
  for (uint32_t i = 0; i < wp; ++i) d += __popc(row[i] ^ q[i]);
  return d;
}

__global__ void PopsKernel(const uint32_t* __restrict__ codes, uint64_t rows, uint32_t wp,
                           uint32_t* __restrict__ pops) {
  for (uint64_t r = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; r < rows; r += uint64_t(gridDim.x) * blockDim.x) {
    uint32_t c = 0;
    for (uint32_t i = 0; i < wp; ++i) c += __popc(codes[r * wp + i]);
    pops[r] = c;
  }
}

// ---- top-k pieces shared by the exact epilogue (topk.cuh) and EWH's re-rank ----

__device__ void BitonicSort(unsigned long long* keys, uint32_t p) {
  for (uint32_t size = 2; size <= p; size <<= 1) {
    for (uint32_t stride = size >> 1; stride > 0; stride >>= 1) {
      __syncthreads();
      for (uint32_t i = threadIdx.x; i < p; i += blockDim.x) {
        const uint32_t j = i ^ stride;
        if (j > i) {
          const bool up = (i & size) == 0;
          const unsigned long long a = keys[i], b = keys[j];
          if ((a > b) == up) keys[i] = b, keys[j] = a;
        }
      }
    }
  }
  __syncthreads();
}

__device__ uint32_t Pow2(uint32_t x) {
  uint32_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

// Scans candidates in order (cand == nullptr: ids 0..count-1). The first `need`
// with distance == D go to keys[tieBase...] in id order; with takeLess, every
// d < D goes to keys[0...] through the shared counter.
__device__ void CollectOrdered(const uint32_t* __restrict__ codes, uint32_t wp, const uint32_t* sq,
                               const uint32_t* __restrict__ cand, uint64_t count, uint32_t D, uint32_t need,
                               uint32_t tieBase, bool takeLess, uint32_t* sLess, unsigned long long* keys,
                               BlockScan::TempStorage& tmp) {
  uint32_t taken = 0;
  for (uint64_t base = 0; base < count; base += kThreads) {
    if (!takeLess && taken >= need) break;
    const uint64_t i = base + threadIdx.x;
    uint32_t d = 0xFFFFFFFFu, id = 0;
    if (i < count) {
      id = cand ? cand[i] : uint32_t(i);
      d = RowDistance(codes + uint64_t(id) * wp, sq, wp);
    }
    uint32_t rank, agg;
    BlockScan(tmp).ExclusiveSum(d == D ? 1u : 0u, rank, agg);
    __syncthreads();
    if (d == D && taken + rank < need) keys[tieBase + taken + rank] = (uint64_t(D) << 32) | id;
    if (takeLess && d < D) keys[atomicAdd(sLess, 1u)] = (uint64_t(d) << 32) | id;
    taken += agg;
  }
}

__device__ void WriteOut(const unsigned long long* keys, uint32_t kk, uint32_t k, uint32_t bits, uint32_t* ids,
                         uint16_t* dist) {
  for (uint32_t i = threadIdx.x; i < k; i += blockDim.x) {
    if (i < kk) {
      ids[i] = uint32_t(keys[i]);
      dist[i] = uint16_t(keys[i] >> 32);
    } else {
      ids[i] = kMissing;
      dist[i] = uint16_t(bits);
    }
  }
}

}  // namespace
}  // namespace hamming
}  // namespace cusim
