// Philox4x32-10 exactly as cuRAND's device API lays out its stream, usable on
// host and device. The CPU backends use it to reproduce curand_init(seed,
// subsequence, offset) + curand()/curand_uniform() bit for bit, so seeded
// parameters are portable across CPU, GPU and GPU counts
// (test/philox.test.ts checks it against ../shared/kat).
#pragma once

#include <cstdint>

#include "common.h"

namespace cusim {

struct Philox {
  uint32_t ctr[4];
  uint32_t key[2];
  uint32_t out[4];
  uint32_t idx;

  CUSIM_HD static void MulHiLo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
    uint64_t p = uint64_t(a) * uint64_t(b);
    *hi = uint32_t(p >> 32);
    *lo = uint32_t(p);
  }

  CUSIM_HD static void Block(const uint32_t c[4], const uint32_t k[2], uint32_t o[4]) {
    uint32_t x0 = c[0], x1 = c[1], x2 = c[2], x3 = c[3];
    uint32_t k0 = k[0], k1 = k[1];
    for (int round = 0; round < 10; ++round) {
      uint32_t hi0, lo0, hi1, lo1;
      MulHiLo(0xD2511F53u, x0, &hi0, &lo0);
      MulHiLo(0xCD9E8D57u, x2, &hi1, &lo1);
      uint32_t y0 = hi1 ^ x1 ^ k0, y1 = lo1, y2 = hi0 ^ x3 ^ k1, y3 = lo0;
      x0 = y0, x1 = y1, x2 = y2, x3 = y3;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    o[0] = x0, o[1] = x1, o[2] = x2, o[3] = x3;
  }

  // 128-bit counter += (hi64 << 64) + lo64, with carries, as cuRAND's skipahead.
  CUSIM_HD void Advance(uint64_t lo64, uint64_t hi64) {
    uint64_t lo = (uint64_t(ctr[1]) << 32) | ctr[0];
    uint64_t hi = (uint64_t(ctr[3]) << 32) | ctr[2];
    uint64_t nlo = lo + lo64;
    hi += hi64 + (nlo < lo ? 1 : 0);
    ctr[0] = uint32_t(nlo), ctr[1] = uint32_t(nlo >> 32), ctr[2] = uint32_t(hi), ctr[3] = uint32_t(hi >> 32);
  }

  CUSIM_HD Philox(uint64_t seed, uint64_t subsequence, uint64_t offset) {
    key[0] = uint32_t(seed);
    key[1] = uint32_t(seed >> 32);
    ctr[0] = ctr[1] = ctr[2] = ctr[3] = 0;
    Advance(offset / 4, subsequence);
    Block(ctr, key, out);
    idx = uint32_t(offset % 4);
  }

  // curand(&state)
  CUSIM_HD uint32_t Next() {
    uint32_t r = out[idx++];
    if (idx == 4) {
      Advance(1, 0);
      Block(ctr, key, out);
      idx = 0;
    }
    return r;
  }

  // curand_uniform(&state): in (0, 1], computed in float without contraction.
  CUSIM_HD float Uniform() {
    const float k = 2.3283064e-10f;
    float x = float(Next());
#if defined(__CUDA_ARCH__)
    return __fadd_rn(__fmul_rn(x, k), k / 2.0f);
#else
    return x * k + k / 2.0f;
#endif
  }
};

}  // namespace cusim
