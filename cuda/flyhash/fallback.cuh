// Exact per-row fallback for rows whose window missed (tile and tensor-core
// paths), and ExactAct, the contract's float activation of one output.
// Internal to cuda/flyhash.cu, which includes every family header: one
// translation unit, so the kernels keep internal linkage.
#pragma once
#include "common.cuh"

namespace cusim {
namespace flyhash {
namespace {

// Exact path for the flagged rows of TileLarge and of the tensor-core path
// (T = uint8_t: rows of xStride bytes), listed by FailListKernel. The keys of
// the first kFallbackSpread listed rows come from FallbackActKernel, spread
// over many blocks; FallbackKernel then selects with SelectWrite, a block per
// row. Rows past those (many misses: ties, forced fallback) have their keys
// computed by their selecting block: one block computing all of a row's keys
// made a batch's one or two misses cost as much as a large share of the
// batch. Rows of up to kFallbackStage values are copied to shared
// memory as floats and the keys summed by ExactAct (8 indices per load).
constexpr uint32_t kFallbackStage = 8192;
constexpr uint32_t kFallbackSpread = 16;
constexpr uint32_t kFallbackActKeys = 1024;  // keys per FallbackActKernel block

template <typename T>
__device__ __forceinline__ void FallbackKeys(const T* xr, uint32_t d, const uint16_t* __restrict__ packed16,
                                             uint32_t sPad, uint32_t s, uint32_t j0, uint32_t j1, float* xs,
                                             uint32_t* keys) {
  const bool staged = d <= kFallbackStage;
  if (staged) {
    for (uint32_t i = threadIdx.x; i < d; i += blockDim.x) xs[i] = float(xr[i]);
    __syncthreads();
  }
  for (uint32_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
    const uint16_t* in = packed16 + uint64_t(j) * sPad;
    float a = 0.0f;
    if (staged) {
      a = ExactAct(xs, in, s);
    } else {
      for (uint32_t t = 0; t < s; ++t) a += float(xr[in[t]]);
    }
    keys[j] = DeviceKey(a);
  }
}

// blockIdx.y: the listed row (< kFallbackSpread), blockIdx.x: its outputs
// [kFallbackActKeys x, kFallbackActKeys (x + 1)), keys to scratch[y * m + j].
template <typename T>
__global__ void __launch_bounds__(256)
    FallbackActKernel(const T* __restrict__ x, uint32_t d, uint32_t xStride, const uint16_t* __restrict__ packed16,
                      uint32_t sPad, uint32_t s, uint32_t m, const uint32_t* __restrict__ failCount,
                      const uint32_t* __restrict__ failList, uint32_t* scratch) {
  __shared__ float xs[kFallbackStage];
  if (blockIdx.y >= *failCount) return;
  const uint32_t j0 = blockIdx.x * kFallbackActKeys, j1 = min(m, j0 + kFallbackActKeys);
  FallbackKeys(x + uint64_t(failList[blockIdx.y]) * xStride, d, packed16, sPad, s, j0, j1, xs,
               scratch + uint64_t(blockIdx.y) * m);
}

template <typename T>
__global__ void __launch_bounds__(1024)
    FallbackKernel(const T* __restrict__ x, uint32_t d, uint32_t xStride, const uint16_t* __restrict__ packed16,
                   uint32_t sPad, uint32_t s, uint32_t m, uint32_t k, const uint32_t* __restrict__ failCount,
                   const uint32_t* __restrict__ failList, bool indices, uint32_t* __restrict__ out, uint64_t outStride,
                   uint32_t* scratch) {
  __shared__ Scratch sc;
  __shared__ float xs[kFallbackStage];
  // scratch: kFallbackSpread rows of FallbackActKernel's keys, then a row per block.
  uint32_t* own = scratch + uint64_t(kFallbackSpread + blockIdx.x) * m;
  for (uint32_t f = blockIdx.x, nf = *failCount; f < nf; f += gridDim.x) {
    const uint64_t row = failList[f];
    uint32_t* keys = f < kFallbackSpread ? scratch + uint64_t(f) * m : own;
    if (f >= kFallbackSpread) FallbackKeys(x + row * xStride, d, packed16, sPad, s, 0, m, xs, keys);
    __syncthreads();
    SelectWrite(keys, m, k, indices, out + row * outStride, sc);
    __syncthreads();  // before the next row overwrites keys and xs
  }
}

// The rows flagged in fail[0, rows) to list[0, *count) (count zeroed before).
__global__ void FailListKernel(const uint32_t* __restrict__ fail, uint64_t rows, uint32_t* __restrict__ count,
                               uint32_t* __restrict__ list) {
  for (uint64_t r = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < rows; r += uint64_t(gridDim.x) * blockDim.x)
    if (fail[r]) list[atomicAdd(count, 1u)] = uint32_t(r);
}

}  // namespace
}  // namespace flyhash
}  // namespace cusim
