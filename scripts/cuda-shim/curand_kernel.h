// Used only by scripts/check-cuda.sh, on machines whose nvcc has no cuRAND
// headers (CI): declares the slice of cuRAND's device API that cuda/minhash.cu
// calls, so its kernels compile. The values are not Philox's; nothing built
// with this header is linked or run, and the real builds require the real one
// (CMakeLists.txt).
#pragma once

struct curandStatePhilox4_32_10_t {
  unsigned long long key, counter, offset;
};

__device__ inline void curand_init(unsigned long long seed, unsigned long long subsequence, unsigned long long offset,
                                   curandStatePhilox4_32_10_t* state) {
  state->key = seed;
  state->counter = subsequence;
  state->offset = offset;
}

__device__ inline float curand_uniform(curandStatePhilox4_32_10_t* state) {
  return float(++state->offset & 0xffffff) * (1.0f / 16777216.0f);
}
