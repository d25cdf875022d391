// Weighted MinHash (Ioffe's improved consistent weighted sampling) behind one
// backend-neutral interface. Parameter tables are [dim][samples] so that, for
// one column, every sample's (r, ln c, beta) is contiguous: the CPU inner loop
// vectorizes over samples and a GPU warp's gather is coalesced.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common.h"

namespace cusim {
namespace minhash {

struct Timing {
  double kernelMs = 0;    // device time of the kernels alone (CUDA events), summed over batches
  double transferMs = 0;  // host<->device copies (CUDA events), summed over batches
  // Host wall-clock phases of the CUDA path, summed over the feeding threads
  // (three per GPU), so the bench can say where a call's time goes.
  double stageInMs = 0;   // copying the CSR slice into pinned staging + segment tables
  double waitMs = 0;      // waiting for the batch's copies and kernels
  double stageOutMs = 0;  // copying signatures out of pinned staging
  double nativeMs = 0;    // the whole native call on its worker thread, validation included
};

// Signature entry of a row with no positive weight, in both k* and t*.
inline constexpr uint32_t kSentinel = 0xFFFFFFFFu;

// Fills [dim][samples] tables from the seed contract: Philox(seed, d, 0), five
// uniforms per sample, logs in double rounded to float. Multi-threaded over d.
void GenerateParamsCpu(uint64_t seed, uint32_t dim, uint32_t samples, float* rs, float* lnCs, float* betas);

// Signatures of rows [rowStart, rowEnd) into out (rows x samples x 2).
void HashCpu(const CsrView& m, uint64_t rowStart, uint64_t rowEnd, uint32_t samples, const float* rs,
             const float* lnCs, const float* betas, uint32_t* out, const CancelToken& cancel);

// out[i] = fraction of samples where signatures left[i] and right[i] agree on
// both k* and t*; 0 when either row is the empty-row sentinel.
void JaccardPairsCpu(const uint32_t* sigs, uint32_t samples, const uint32_t* left, const uint32_t* right,
                     uint64_t pairs, float* out);

// Cuts rows [rowStart, rowEnd) into `parts` contiguous ranges of about equal
// nnz (multi-GPU split): returns parts + 1 boundaries, first rowStart, last
// rowEnd, non-decreasing; any part count, empty parts allowed.
std::vector<uint64_t> SplitRowsByNnz(const CsrView& m, uint64_t rowStart, uint64_t rowEnd, size_t parts);

#ifdef CUSIM_WITH_CUDA
// Per-device parameter tables plus staging slots; opaque to the glue.
struct CudaEngine;

// Builds tables on every device: generated from the seed, or uploaded from
// host tables ([dim][samples]) when rs is non-null.
std::shared_ptr<CudaEngine> CreateCudaEngine(const std::vector<int>& devices, uint64_t seed, uint32_t dim,
                                             uint32_t samples, const float* rs, const float* lnCs,
                                             const float* betas);
// Rows are split across the engine's devices balanced by nnz.
void HashCuda(CudaEngine& e, const CsrView& m, uint64_t rowStart, uint64_t rowEnd, uint32_t* out, Timing* timing,
              const CancelToken& cancel);
// Copies device `slot`'s (index into the engine's device list) tables back, [dim][samples].
void DeviceParamsCuda(CudaEngine& e, size_t slot, float* rs, float* lnCs, float* betas);
#endif

}  // namespace minhash
}  // namespace cusim
