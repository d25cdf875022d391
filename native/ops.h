// Small utility kernels (row popcount) behind one backend-neutral interface.
// They double as the bench harness's smoke workload on both backends.
#pragma once

#include <cstdint>

#include "common.h"

namespace cusim {
namespace ops {

struct Timing {
  double kernelMs = 0;    // device time of the kernels alone (CUDA events)
  double transferMs = 0;  // host<->device copies (CUDA events)
};

// out[r] = number of set bits in row r.
void PopcountRowsCpu(const BitsView& codes, uint32_t* out);
#ifdef CUSIM_WITH_CUDA
void PopcountRowsCuda(const BitsView& codes, uint32_t* out, int device, Timing* timing);
#endif

}  // namespace ops
}  // namespace cusim
