// What a build without CUDA kernels links in place of cuda/*.cu (CMakeLists.txt
// adds this file only then, binding.gyp always): the runtime answers that no
// GPU is usable, so the glue's ResolveDevices rejects backend 'cuda' with the
// reason before any engine is made, and each engine's CUDA factory throws
// CUSIM_CUDA_ERROR should it be reached anyway. One section per engine.
#include <string>

#include "../classic_minhash.h"
#include "../cluster.h"
#include "../flyhash.h"
#include "../gpu.h"
#include "../hamming.h"
#include "../join.h"
#include "../lsh.h"
#include "../minhash.h"
#include "../ops.h"
#include "../text.h"

#ifndef CUSIM_NO_CUDA_REASON
#define CUSIM_NO_CUDA_REASON "built without CUDA"
#endif

namespace cusim {
namespace {

[[noreturn]] void ThrowNoCuda() { throw Error(kCudaError, "this addon was built without CUDA"); }

}  // namespace

// ---- runtime (gpu.h) ----

const DeviceReport& QueryDevices() {
  static const DeviceReport report = [] {
    DeviceReport r;
    r.reason = std::string("not compiled: this addon was built without CUDA kernels (") + CUSIM_NO_CUDA_REASON + ")";
    return r;
  }();
  return report;
}
void DeviceMemory(int, uint64_t*, uint64_t*) { throw Error(kCudaError, "CUDA is not compiled into this addon"); }
std::shared_ptr<void> HoldDeviceMemory(int, uint64_t) {
  throw Error(kCudaError, "CUDA is not compiled into this addon");
}
void* HostPinnedAlloc(uint64_t, bool) { return nullptr; }
void HostPinnedFree(void*) noexcept {}
PageLockProbe ProbePageLocking(uint64_t) { throw Error(kCudaError, "CUDA is not compiled into this addon"); }

// ---- minhash (weighted and classic) ----

namespace minhash {
std::unique_ptr<WeightedHasher> MakeCudaHasher(std::shared_ptr<ColumnParams>, uint32_t, const std::vector<int>&,
                                               const Tuning&) {
  ThrowNoCuda();
}
std::unique_ptr<Hasher> MakeCudaClassicHasher(std::vector<uint64_t>, std::vector<uint64_t>, const std::vector<int>&,
                                              const Tuning&) {
  ThrowNoCuda();
}
}  // namespace minhash

// ---- lsh ----

namespace lsh {
std::unique_ptr<Bucketer> MakeCudaBucketer(int) { ThrowNoCuda(); }
}  // namespace lsh

// ---- ops ----

namespace ops {
std::unique_ptr<Ops> MakeCudaOps(int) { ThrowNoCuda(); }
}  // namespace ops

// ---- flyhash ----

namespace flyhash {
std::unique_ptr<Hasher> MakeCudaHasher(const Params&, int) { ThrowNoCuda(); }
}  // namespace flyhash

// ---- hamming ----

namespace hamming {
std::unique_ptr<Searcher> MakeCudaSearcher(int, ExactKernel) { ThrowNoCuda(); }
}  // namespace hamming

// ---- join ----

namespace join {
std::unique_ptr<Joiner> MakeCudaJoiner(std::shared_ptr<const Prepared>, int, uint64_t, const CudaTuning&) {
  ThrowNoCuda();
}
}  // namespace join

// ---- cluster ----

namespace cluster {
std::unique_ptr<Scorer> MakeCudaScorer(const Config&, const Rows&, int, const Tuning&) { ThrowNoCuda(); }
}  // namespace cluster

// ---- text ----

namespace text {
std::unique_ptr<TokenHasher> MakeCudaTokenHasher(const Options&, int, uint64_t) { ThrowNoCuda(); }
}  // namespace text

}  // namespace cusim
