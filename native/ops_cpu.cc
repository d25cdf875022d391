#include <memory>

#include "ops.h"
#include "parallel.h"

namespace cusim {
namespace ops {
namespace {

class CpuOps final : public Ops {
 public:
  void PopcountRows(const BitsView& codes, uint32_t* out, Timing*) const override {
    const uint32_t w = codes.wordsPerRow();
    ParallelFor(codes.rows, 4096, [&](size_t b, size_t e) {
      for (size_t r = b; r < e; ++r) {
        const uint32_t* row = codes.words + r * w;
        uint32_t c = 0;
        for (uint32_t i = 0; i < w; ++i) c += uint32_t(__builtin_popcount(row[i]));
        out[r] = c;
      }
    });
  }
};

}  // namespace

std::unique_ptr<Ops> MakeCpuOps() { return std::make_unique<CpuOps>(); }

}  // namespace ops
}  // namespace cusim
