// Classic MinHash for sets, as datasketch computes it: per sample s a
// universal hash of each 32-bit token hash h,
//   ((a_s * h + b_s) mod 2^64) mod (2^61 - 1), low 32 bits,
// and the minimum over the row's tokens (a CSR row's column ids are its token
// hashes; weights are ignored, repeats change nothing). datasketch multiplies
// in numpy uint64, so the product wraps modulo 2^64 before the Mersenne
// reduction; reproducing that is what makes its hashvalues match bit for bit.
// An empty row is 2^32 - 1 in every sample (datasketch's empty hashvalues).
// No tables: the permutations (a, b) are all the state.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common.h"
#include "minhash.h"

namespace cusim {
namespace minhash {

inline constexpr uint64_t kMersenne61 = (1ull << 61) - 1;
inline constexpr uint32_t kMaxHash = 0xFFFFFFFFu;

CUSIM_HD uint32_t UniversalHash(uint64_t a, uint64_t b, uint32_t h) {
  const uint64_t x = a * h + b;                      // mod 2^64
  const uint64_t y = (x & kMersenne61) + (x >> 61);  // = x (mod p), at most p + 7
  return uint32_t(y >= kMersenne61 ? y - kMersenne61 : y);
}

// datasketch's MinHash(num_perm=samples, seed=seed).permutations: numpy's
// RandomState(seed) (MT19937 seeded by init_genrand) drawing, per sample,
// a = randint(1, p) then b = randint(0, p) as uint64, by numpy's masked
// rejection over 64-bit words (high half first). seed < 2^32.
void SeedPermutations(uint32_t seed, uint32_t samples, uint64_t* a, uint64_t* b);

// Signatures of rows [rowStart, rowEnd) into out (rows x samples).
void ClassicHashCpu(const CsrView& m, uint64_t rowStart, uint64_t rowEnd, const uint64_t* a, const uint64_t* b,
                    uint32_t samples, uint32_t* out, const CancelToken& cancel);

// The classic engine's backends over permutations a and b (samples each).
std::unique_ptr<Hasher> MakeCpuClassicHasher(std::vector<uint64_t> a, std::vector<uint64_t> b);
// Per-device copies of the permutations plus staging slots, built on the
// first call. Rows are split across the devices balanced by nnz; columns must
// be < m.cols (checked by the kernel, named by the host).
std::unique_ptr<Hasher> MakeCudaClassicHasher(std::vector<uint64_t> a, std::vector<uint64_t> b,
                                              const std::vector<int>& devices, const Tuning& tuning);

}  // namespace minhash
}  // namespace cusim
