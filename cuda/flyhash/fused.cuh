// The fused family (tuning.kernel 'fused', auto's choice for small m): a
// thread per output, R rows per block. The fused kernel keeps the R rows' keys
// in shared memory; its two-pass variant (keys in device memory) serves wide
// inputs or few rows.
// Internal to cuda/flyhash.cu, which includes every family header: one
// translation unit, so the kernels keep internal linkage.
#pragma once
#include "common.cuh"

namespace cusim {
namespace flyhash {
namespace {

// Loads rows [r0, r0 + R) into xs as [d][R] (zeros past the last row).
template <int R>
__device__ void LoadRows(const float* __restrict__ x, uint64_t rows, uint32_t d, uint64_t r0, float* xs) {
  for (uint32_t r = 0; r < R; ++r) {
    const bool ok = r0 + r < rows;
    const float* src = x + (r0 + r) * d;
    for (uint32_t i = threadIdx.x; i < d; i += blockDim.x) xs[uint64_t(i) * R + r] = ok ? src[i] : 0.0f;
  }
}

template <int R>
struct Vec;
template <>
struct Vec<1> {
  using T = float;
};
template <>
struct Vec<2> {
  using T = float2;
};
template <>
struct Vec<4> {
  using T = float4;
};

__device__ __forceinline__ void Add(float* acc, float v) { acc[0] += v; }
__device__ __forceinline__ void Add(float* acc, float2 v) {
  acc[0] += v.x;
  acc[1] += v.y;
}
__device__ __forceinline__ void Add(float* acc, float4 v) {
  acc[0] += v.x;
  acc[1] += v.y;
  acc[2] += v.z;
  acc[3] += v.w;
}

// Activations of output j for the R rows in xs; projT is [s][m] so a warp's
// index loads are coalesced. Inputs arrive in ascending order, as on the CPU.
template <int R, typename Idx>
__device__ __forceinline__ void Activate(const float* xs, const Idx* __restrict__ projT, uint32_t m, uint32_t s,
                                         uint32_t j, float* acc) {
  using V = typename Vec<R>::T;
  const V* xv = reinterpret_cast<const V*>(xs);
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  const Idx* col = projT + j;
  // Unrolled so 8 index loads (from L2 or HBM: CIFAR's table is 30 MB) are in
  // flight at once instead of one load's latency per add.
#pragma unroll 8
  for (uint32_t t = 0; t < s; ++t) Add(acc, xv[col[uint64_t(t) * m]]);
}

template <int R, typename Idx>
__global__ void __launch_bounds__(1024)
    FusedKernel(const float* __restrict__ x, uint64_t rows, uint32_t d, const Idx* __restrict__ projT, uint32_t m,
                uint32_t s, uint32_t k, bool indices, uint32_t* __restrict__ out, uint64_t outStride) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ Scratch sc;
  float* xs = reinterpret_cast<float*>(smem);
  uint32_t* keys = reinterpret_cast<uint32_t*>(smem + Align16(uint64_t(d) * R * 4));
  for (uint64_t g = blockIdx.x; g * R < rows; g += gridDim.x) {
    const uint64_t r0 = g * R;
    __syncthreads();  // the previous group is done with xs and keys
    LoadRows<R>(x, rows, d, r0, xs);
    __syncthreads();
    for (uint32_t j = threadIdx.x; j < m; j += blockDim.x) {
      float acc[R];
      Activate<R, Idx>(xs, projT, m, s, j, acc);
#pragma unroll
      for (int r = 0; r < R; ++r) keys[uint64_t(r) * m + j] = DeviceKey(acc[r]);
    }
    __syncthreads();
    for (int r = 0; r < R; ++r)
      if (r0 + r < rows) SelectWrite(keys + uint64_t(r) * m, m, k, indices, out + (r0 + r) * outStride, sc);
  }
}

// Two-pass path, pass 1: blockIdx.y picks R rows, blockIdx.x a chunk of
// outputs. When even one row exceeds shared memory (Global), the row is read
// from device memory in place (R = 1, so the layouts agree).
template <int R, typename Idx, bool Global>
__global__ void __launch_bounds__(256)
    ActivateKernel(const float* __restrict__ x, uint64_t rows, uint32_t d, const Idx* __restrict__ projT, uint32_t m,
                   uint32_t s, uint32_t* __restrict__ keysOut) {
  extern __shared__ __align__(16) unsigned char smem[];
  const uint64_t r0 = uint64_t(blockIdx.y) * R;
  const float* xs = x + r0 * d;
  if (!Global) {
    LoadRows<R>(x, rows, d, r0, reinterpret_cast<float*>(smem));
    xs = reinterpret_cast<const float*>(smem);
    __syncthreads();
  }
  const uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= m) return;
  float acc[R];
  Activate<R, Idx>(xs, projT, m, s, j, acc);
#pragma unroll
  for (int r = 0; r < R; ++r)
    if (r0 + r < rows) keysOut[(r0 + r) * m + j] = DeviceKey(acc[r]);
}

// Two-pass path, pass 2: one block per row selects from device memory.
__global__ void __launch_bounds__(1024)
    SelectKernel(const uint32_t* __restrict__ keys, uint64_t rows, uint32_t m, uint32_t k, bool indices,
                 uint32_t* __restrict__ out, uint64_t outStride) {
  __shared__ Scratch sc;
  for (uint64_t r = blockIdx.x; r < rows; r += gridDim.x)
    SelectWrite(keys + r * m, m, k, indices, out + r * outStride, sc);
}

}  // namespace
}  // namespace flyhash
}  // namespace cusim
