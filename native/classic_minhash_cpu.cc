#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "classic_minhash.h"
#include "parallel.h"

namespace cusim {
namespace minhash {
namespace {

// MT19937 as numpy's legacy RandomState runs it.
class Mt19937 {
 public:
  explicit Mt19937(uint32_t seed) {
    mt_[0] = seed;
    for (uint32_t k = 1; k < kN; ++k) mt_[k] = 1812433253u * (mt_[k - 1] ^ (mt_[k - 1] >> 30)) + k;
    i_ = kN;
  }
  uint32_t Next() {
    if (i_ >= kN) Twist();
    uint32_t y = mt_[i_++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
  }
  uint64_t Next64() {
    const uint64_t hi = Next();
    return (hi << 32) | Next();
  }

 private:
  static constexpr uint32_t kN = 624, kM = 397;
  void Twist() {
    for (uint32_t k = 0; k < kN; ++k) {
      const uint32_t y = (mt_[k] & 0x80000000u) | (mt_[(k + 1) % kN] & 0x7fffffffu);
      mt_[k] = mt_[(k + kM) % kN] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    i_ = 0;
  }
  uint32_t mt_[kN];
  uint32_t i_;
};

// randint(low, low + range + 1) for a range above 2^32: numpy draws 64-bit
// words masked to the range's bit length and rejects those above it.
uint64_t Bounded(Mt19937& g, uint64_t low, uint64_t range) {
  uint64_t mask = range;
  for (int s = 1; s < 64; s <<= 1) mask |= mask >> s;
  for (;;) {
    const uint64_t v = g.Next64() & mask;
    if (v <= range) return low + v;
  }
}

}  // namespace

void SeedPermutations(uint32_t seed, uint32_t samples, uint64_t* a, uint64_t* b) {
  Mt19937 g(seed);
  for (uint32_t s = 0; s < samples; ++s) {
    a[s] = Bounded(g, 1, kMersenne61 - 2);  // [1, p)
    b[s] = Bounded(g, 0, kMersenne61 - 1);  // [0, p)
  }
}

void ClassicHashCpu(const CsrView& m, uint64_t rowStart, uint64_t rowEnd, const uint64_t* a, const uint64_t* b,
                    uint32_t samples, uint32_t* out, const CancelToken& cancel) {
  ParallelFor(rowEnd - rowStart, 64, [&](size_t lo, size_t hi) {
    cancel.check();
    for (size_t i = lo; i < hi; ++i) {
      uint32_t* o = out + i * uint64_t(samples);
      std::fill(o, o + samples, kMaxHash);
      const uint64_t r = rowStart + i;
      for (uint32_t j = m.indptr[r]; j < m.indptr[r + 1]; ++j) {
        const uint32_t h = m.indices[j];
        for (uint32_t s = 0; s < samples; ++s) o[s] = std::min(o[s], UniversalHash(a[s], b[s], h));
      }
    }
    cancel.advance(hi - lo);
  });
}

namespace {

class CpuClassicHasher final : public Hasher {
 public:
  CpuClassicHasher(std::vector<uint64_t> a, std::vector<uint64_t> b) : a_(std::move(a)), b_(std::move(b)) {}

  void Hash(const CsrView& m, uint32_t* out, Timing*, const CancelToken& cancel) override {
    ValidateCsr(m, "matrix");
    ClassicHashCpu(m, 0, m.rows, a_.data(), b_.data(), uint32_t(a_.size()), out, cancel);
  }

 private:
  std::vector<uint64_t> a_, b_;
};

}  // namespace

std::unique_ptr<Hasher> MakeCpuClassicHasher(std::vector<uint64_t> a, std::vector<uint64_t> b) {
  return std::make_unique<CpuClassicHasher>(std::move(a), std::move(b));
}

}  // namespace minhash
}  // namespace cusim
