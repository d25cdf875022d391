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

}  // namespace
}  // namespace hamming
}  // namespace cusim
