#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <string>

#include "flyhash.h"
#include "parallel.h"
#include "philox.h"
#include "uninit_vector.h"

namespace cusim {
namespace flyhash {
namespace {

// Uniform in [0, n), n >= 1: Lemire's multiply-shift, rejecting the short
// range so every value is equally likely.
uint32_t Bounded(Philox& rng, uint32_t n) {
  uint64_t p = uint64_t(rng.Next()) * n;
  uint32_t low = uint32_t(p);
  if (low < n) {
    const uint32_t threshold = (0u - n) % n;
    while (low < threshold) {
      p = uint64_t(rng.Next()) * n;
      low = uint32_t(p);
    }
  }
  return uint32_t(p >> 32);
}

uint32_t FloatKey(float a) {
  uint32_t u;
  std::memcpy(&u, &a, 4);
  return OrderKeyBits(u);
}

}  // namespace

std::vector<uint32_t> MakeProjection(const Params& p) {
  std::vector<uint32_t> proj(uint64_t(p.m) * p.s);
  // Floyd's membership test needs the output's inputs drawn so far: a bitset
  // over the d inputs where d is within 4096 s, else a hash set of O(s)
  // (d reaches 2^30: a d-sized mark per chunk of outputs was gigabytes).
  const bool dense = uint64_t(p.d) <= 4096 * uint64_t(p.s);
  uint32_t bits = 1;
  while ((uint64_t(1) << bits) < 2 * uint64_t(p.s)) ++bits;
  ParallelFor(p.m, 64, [&](size_t b, size_t e) {
    std::vector<uint64_t> mark(dense ? (uint64_t(p.d) + 63) / 64 : 0, 0);
    // Slot: (output + 1) << 32 | input, live only for the current output.
    std::vector<uint64_t> set(dense ? 0 : uint64_t(1) << bits, 0);
    const uint64_t mask = (uint64_t(1) << bits) - 1;
    for (size_t j = b; j < e; ++j) {
      const uint64_t stamp = uint64_t(j + 1) << 32;
      // Inserts t; true when it was already there.
      auto seen = [&](uint32_t t) {
        if (dense) {
          const uint64_t bit = uint64_t(1) << (t & 63), was = mark[t >> 6] & bit;
          mark[t >> 6] |= bit;
          return was != 0;
        }
        for (uint64_t h = (uint32_t(t * 2654435761u) >> (32 - std::min(bits, 31u))) & mask;; h = (h + 1) & mask) {
          if ((set[h] & ~uint64_t(0xFFFFFFFFu)) != stamp) {
            set[h] = stamp | t;
            return false;
          }
          if (uint32_t(set[h]) == t) return true;
        }
      };
      Philox rng(p.seed, j, 0);
      uint32_t* out = proj.data() + j * p.s;
      uint32_t n = 0;
      for (uint32_t i = p.d - p.s; i < p.d; ++i) {
        uint32_t t = Bounded(rng, i + 1);
        if (seen(t)) {
          t = i;
          seen(t);
        }
        out[n++] = t;
      }
      std::sort(out, out + p.s);
      if (dense)
        for (uint32_t q = 0; q < p.s; ++q) mark[out[q] >> 6] = 0;
    }
  });
  return proj;
}

bool CheckFinite(const DenseView& x, const char* name) {
  const uint64_t total = x.rows * x.cols;
  std::mutex mu;
  uint64_t first = std::numeric_limits<uint64_t>::max();
  std::atomic<bool> bytes{true};
  ParallelFor(total, 1 << 16, [&](size_t b, size_t e) {
    bool chunkBytes = true;
    for (size_t i = b; i < e; ++i) {
      const float v = x.data[i];
      if (!std::isfinite(v)) {
        std::lock_guard<std::mutex> lock(mu);
        first = std::min<uint64_t>(first, i);
        return;
      }
      // In range first, so the conversion to int is defined.
      chunkBytes &= v >= 0.0f && v <= 255.0f && float(int(v)) == v;
    }
    if (!chunkBytes) bytes.store(false, std::memory_order_relaxed);
  });
  if (first == std::numeric_limits<uint64_t>::max()) return bytes.load();
  ThrowNonFinite(x.data[first], first, x.cols, name);
}

void ThrowNonFinite(float v, uint64_t index, uint64_t cols, const char* name) {
  const std::string what = std::isnan(v) ? "NaN" : (v > 0 ? "Infinity" : "-Infinity");
  ThrowInvalid(std::string(name) + ".data[" + std::to_string(index) + "] (row " + std::to_string(index / cols) +
               ", column " + std::to_string(index % cols) + ") is " + what + "; the input must be finite");
}

namespace {

void HashFloats(const Params& p, const uint32_t* proj, const DenseView& x, Output o, uint32_t* out,
                const CancelToken& cancel) {
  const uint64_t stride = OutStride(p, o);
  // Rows go in tiles so each output's index list is read once per tile, not
  // once per row; every row still sums its inputs in ascending order.
  constexpr uint32_t kTile = 8;
  const uint64_t tiles = (x.rows + kTile - 1) / kTile;
  ParallelFor(tiles, 1, [&](size_t b, size_t e) {
    std::vector<uint32_t> keys(uint64_t(kTile) * p.m), scratch(p.m);
    for (size_t tile = b; tile < e; ++tile) {
      cancel.check();
      const uint64_t r0 = tile * kTile;
      const uint32_t nr = uint32_t(std::min<uint64_t>(kTile, x.rows - r0));
      const float* xr[kTile];
      for (uint32_t r = 0; r < kTile; ++r) xr[r] = x.data + (r0 + std::min(r, nr - 1)) * x.cols;
      for (uint32_t j = 0; j < p.m; ++j) {
        const uint32_t* in = proj + uint64_t(j) * p.s;
        float a[kTile] = {};
        for (uint32_t t = 0; t < p.s; ++t) {
          const uint32_t i = in[t];
          for (uint32_t r = 0; r < kTile; ++r) a[r] += xr[r][i];
        }
        for (uint32_t r = 0; r < nr; ++r) keys[uint64_t(r) * p.m + j] = FloatKey(a[r]);
      }
      for (uint32_t r = 0; r < nr; ++r) {
        const uint32_t* rk = keys.data() + uint64_t(r) * p.m;
        std::copy(rk, rk + p.m, scratch.begin());
        std::nth_element(scratch.begin(), scratch.begin() + (p.k - 1), scratch.end(), std::greater<uint32_t>());
        const uint32_t v = scratch[p.k - 1];
        uint32_t greater = 0;
        for (uint32_t j = 0; j < p.m; ++j) greater += rk[j] > v;
        uint32_t ties = p.k - greater;  // equal values still to take, lowest index first
        uint32_t* dst = out + (r0 + r) * stride;
        if (o == Output::Bits) std::fill(dst, dst + stride, 0u);
        uint32_t n = 0;
        for (uint32_t j = 0; j < p.m; ++j) {
          bool win = rk[j] > v;
          if (!win && rk[j] == v && ties > 0) {
            --ties;
            win = true;
          }
          if (!win) continue;
          if (o == Output::Bits) {
            dst[j >> 5] |= 1u << (j & 31);
          } else {
            dst[n++] = j;
          }
        }
      }
    }
  });
}

class CpuHasher final : public Hasher {
 public:
  explicit CpuHasher(const Params& p) : p_(p) {}
  void Hash(const uint32_t* proj, const DenseView& x, const uint8_t* xBytes, Output o, uint32_t* out, const Tuning&,
            const CancelToken& cancel, Timing*) override {
    if (!xBytes) return HashFloats(p_, proj, x, o, out, cancel);
    // The kernel gathers floats; the copy is small beside its work.
    UninitVector<float> xf(x.rows * x.cols);
    ParallelFor(xf.size(), 1 << 16, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) xf[i] = float(xBytes[i]);
    });
    HashFloats(p_, proj, DenseView{xf.data(), x.rows, x.cols}, o, out, cancel);
  }

 private:
  const Params p_;
};

}  // namespace

std::unique_ptr<Hasher> MakeCpuHasher(const Params& p) { return std::make_unique<CpuHasher>(p); }

}  // namespace flyhash
}  // namespace cusim
