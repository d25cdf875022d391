#include <memory>

#include "../native/ops.h"
#include "common/gpu.cuh"

namespace cusim {
namespace ops {
namespace {

// One warp per row: lanes stride the row's words so a warp reads contiguous
// memory, then a shuffle reduction.
__global__ void PopcountRowsKernel(const uint32_t* __restrict__ words, uint64_t rows, uint32_t w,
                                   uint32_t* __restrict__ out) {
  const uint64_t warp = (uint64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const unsigned lane = threadIdx.x & 31;
  const uint64_t warps = uint64_t(gridDim.x) * blockDim.x / 32;
  for (uint64_t r = warp; r < rows; r += warps) {
    const uint32_t* row = words + r * w;
    uint32_t c = 0;
    for (uint32_t i = lane; i < w; i += 32) c += __popc(row[i]);
    for (int o = 16; o > 0; o >>= 1) c += __shfl_down_sync(0xffffffffu, c, o);
    if (lane == 0) out[r] = c;
  }
}

void PopcountRowsCuda(const BitsView& codes, uint32_t* out, int device, Timing* timing) {
  gpu::DeviceGuard guard(device);
  gpu::Stream stream;
  const uint64_t words = codes.rows * codes.wordsPerRow();
  gpu::DeviceBuffer<uint32_t> dIn(words, "popcount input");
  gpu::DeviceBuffer<uint32_t> dOut(codes.rows, "popcount output");
  gpu::Event t0, t1, t2, t3;
  t0.record(stream);
  if (words) CUSIM_CUDA_CHECK(cudaMemcpyAsync(dIn.data(), codes.words, words * 4, cudaMemcpyHostToDevice, stream));
  t1.record(stream);
  if (codes.rows) {
    const unsigned threads = 256;
    const unsigned blocks = gpu::GridFor(codes.rows * 32, threads, unsigned(gpu::MultiprocessorCount(device)) * 32);
    PopcountRowsKernel<<<blocks, threads, 0, stream>>>(dIn.data(), codes.rows, codes.wordsPerRow(), dOut.data());
    CUSIM_LAUNCH_CHECK();
  }
  t2.record(stream);
  if (codes.rows) CUSIM_CUDA_CHECK(cudaMemcpyAsync(out, dOut.data(), codes.rows * 4, cudaMemcpyDeviceToHost, stream));
  t3.record(stream);
  stream.sync();
  if (timing) {
    timing->kernelMs = gpu::ElapsedMs(t1, t2);
    timing->transferMs = gpu::ElapsedMs(t0, t1) + gpu::ElapsedMs(t2, t3);
  }
}

class CudaOps final : public Ops {
 public:
  explicit CudaOps(int device) : device_(device) {}
  void PopcountRows(const BitsView& codes, uint32_t* out, Timing* timing) const override {
    PopcountRowsCuda(codes, out, device_, timing);
  }

 private:
  int device_;
};

}  // namespace

std::unique_ptr<Ops> MakeCudaOps(int device) { return std::make_unique<CudaOps>(device); }

}  // namespace ops
}  // namespace cusim
