// What the host side knows about GPUs, as plain C++ (no CUDA headers), so the
// N-API glue can ask without being compiled by nvcc. cuda/common/runtime.cu
// defines these in a CUDA build, native/cpu_only/no_cuda.cc in a CPU-only one.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <memory>
#include <utility>
#include <vector>

namespace cusim {

struct GpuInfo {
  int index = 0;
  std::string name;
  uint64_t memoryBytes = 0;
  int ccMajor = 0;
  int ccMinor = 0;
  int multiprocessors = 0;
  bool tensorCores = false;  // runs the tensor-core kernel families (TensorCoreKernels)
  // Per engine that has a choice, the kernel families this GPU runs, in the
  // order `auto` prefers them (shapes decide among them).
  std::vector<std::pair<std::string, std::vector<std::string>>> kernels;
};

struct DeviceReport {
  bool cuda = false;
  // Why cuda is false: not compiled, no driver, driver too old, no device, no supported GPU.
  std::string reason;
  std::vector<GpuInfo> gpus;  // the usable GPUs; gpus[i].index is the CUDA ordinal
  int driverVersion = 0;      // CUDA version the driver supports (0: none), as cudaDriverGetVersion
  int runtimeVersion = 0;     // CUDA version of the runtime linked in (0: not compiled)
  std::string driverRelease;  // the driver's own version ("580.159.04") where known
  bool compiled = false;      // whether the CUDA kernels are compiled into this addon
  std::string architectures;  // the CUDA architectures compiled in ("75-real,...,120")
};

// Cached after the first call: probing the driver is slow and its answer does
// not change within a process.
const DeviceReport& QueryDevices();

// Checks `requested` (empty means every GPU) against the report and returns the
// device indices to use; throws cusim::Error when CUDA is unavailable.
std::vector<int> ResolveDevices(const std::vector<int>& requested);

// Whether the tensor-core kernel families run on CUDA device `device` (an
// ordinal from ResolveDevices): compute capability 8.0 or newer.
bool DeviceTensorCores(int device);

// Free and total bytes on one device (CUDA builds only).
void DeviceMemory(int device, uint64_t* free_bytes, uint64_t* total_bytes);
// `bytes` of device memory held until the pointer's last copy goes (tests
// fill a GPU with it to reach the out-of-memory paths).
std::shared_ptr<void> HoldDeviceMemory(int device, uint64_t bytes);

// Page-locked host memory every GPU can DMA from and into (cudaHostAlloc,
// portable), zero-filled unless `zero` is false; nullptr where CUDA is
// unavailable or the allocation fails, so callers fall back to ordinary
// memory. Engines that find their inputs or outputs in such memory skip the
// staging copies.
void* HostPinnedAlloc(uint64_t bytes, bool zero = true);
void HostPinnedFree(void* p) noexcept;

// What page-locking `bytes` costs two ways, on device 0, each block freed after
// (bench/minhash.js; staging pays it for a stream's first chunks): cudaHostAlloc
// (what the staging pool does), and memory advised onto huge pages, faulted in
// on all cores (FirstTouch), then cudaHostRegister'ed; with the rate of one
// host-to-device copy from each, to show both DMA at page-locked speed. A
// field is -1 where its step failed (registerMs: cudaHostRegister refused).
// Throws where CUDA is unavailable.
struct PageLockProbe {
  double hostAllocMs = -1, hostFreeMs = -1, hostAllocH2dGBs = -1;
  double touchMs = -1, registerMs = -1, unregisterMs = -1, registeredH2dGBs = -1;
};
PageLockProbe ProbePageLocking(uint64_t bytes);

// Runs `release` (which drops state holding GPU or large host memory) on a
// background thread, in queue order: a call whose results are ready need not
// wait for cudaFree's implicit device synchronizations.
// Where memory decides success, the wait happens: a GPU allocation that finds
// too little free memory, and DeviceMemory, first wait for pending releases,
// so deferring causes no out-of-memory error that freeing at once would have
// avoided. (Batch planners that read cudaMemGetInfo directly may size one
// batch smaller while a release is pending.) Releases must not allocate.
// If the thread cannot be started, `release` runs at once.
void ReleaseInBackground(std::function<void()> release) noexcept;
// Returns at once on the releasing thread itself.
void WaitForReleases();
// Runs every queued release, then ends the releasing thread (the next
// ReleaseInBackground starts another): called when the last environment
// using the addon ends, before Node unloads it (EnvEnded, napi_util.h).
void StopReleases();

}  // namespace cusim
