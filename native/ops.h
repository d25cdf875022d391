// Small utility kernels (row popcount) behind one backend-neutral interface.
// They double as the bench harness's smoke workload on both backends.
#pragma once

#include <cstdint>
#include <memory>

#include "common.h"

namespace cusim {
namespace ops {

struct Timing {
  double kernelMs = 0;    // device time of the kernels alone (CUDA events)
  double transferMs = 0;  // host<->device copies (CUDA events)
};

// The utility kernels of one backend.
class Ops {
 public:
  virtual ~Ops() = default;
  // out[r] = number of set bits in row r.
  virtual void PopcountRows(const BitsView& codes, uint32_t* out, Timing* timing) const = 0;
};

std::unique_ptr<Ops> MakeCpuOps();
std::unique_ptr<Ops> MakeCudaOps(int device);

}  // namespace ops
}  // namespace cusim
