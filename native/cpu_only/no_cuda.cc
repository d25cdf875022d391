// The CUDA factories of an addon built without CUDA kernels (CMakeLists.txt
// adds this file only then; binding.gyp's build is always CPU-only). Each
// throws the coded error the engine reports for a GPU it cannot reach, so the
// glue calls the factories without #ifdef.
#include "../cluster.h"
#include "../flyhash.h"
#include "../hamming.h"
#include "../join.h"

namespace cusim {

// flyhash, hamming, join, cluster

namespace flyhash {
std::unique_ptr<Hasher> MakeCudaHasher(const Params&, int) {
  throw Error(kCudaError, "this addon was built without CUDA");
}
}  // namespace flyhash

namespace hamming {
std::unique_ptr<Searcher> MakeCudaSearcher(int, ExactKernel) {
  throw Error(kCudaError, "this addon was built without CUDA");
}
}  // namespace hamming

namespace join {
std::unique_ptr<Joiner> MakeCudaJoiner(std::shared_ptr<const Prepared>, int, uint64_t, const CudaTuning&) {
  throw Error(kCudaError, "this addon was built without CUDA");
}
}  // namespace join

namespace cluster {
std::unique_ptr<Scorer> MakeCudaScorer(const Config&, const Rows&, int, const Tuning&) {
  throw Error(kCudaError, "this build of cusim has no CUDA kernels");
}
}  // namespace cluster

}  // namespace cusim
