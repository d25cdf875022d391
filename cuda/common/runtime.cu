// Device discovery and the shared CUDA plumbing from gpu.cuh.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>

#include "../../native/cuda_support.h"
#include "../../native/flyhash.h"
#include "../../native/gpu.h"
#include "../../native/hamming.h"
#include "../../native/host_buffer.h"
#include "../../native/parallel.h"
#include "gpu.cuh"

// CMake passes the architectures compiled in (CMAKE_CUDA_ARCHITECTURES).
#ifndef CUSIM_CUDA_ARCHITECTURES
#error "CUSIM_CUDA_ARCHITECTURES must name the architectures this build compiles (\"75-real,...,120\")"
#endif

namespace cusim {
namespace gpu {

void ThrowCuda(cudaError_t e, const char* expr, const char* file, int line) {
  // Clear sticky-free errors so the next call on this thread starts clean.
  cudaGetLastError();
  std::string msg = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e) + " (" + expr + " at " + file +
                    ":" + std::to_string(line) + ")";
  if (e == cudaErrorMemoryAllocation) throw Error(kOutOfMemory, msg);
  throw Error(kCudaError, msg);
}

DeviceGuard::DeviceGuard(int device) {
  CUSIM_CUDA_CHECK(cudaGetDevice(&prev_));
  if (prev_ != device) CUSIM_CUDA_CHECK(cudaSetDevice(device));
}

DeviceGuard::~DeviceGuard() {
  int cur = -1;
  if (cudaGetDevice(&cur) == cudaSuccess && cur != prev_ && prev_ >= 0) cudaSetDevice(prev_);
}

void* DeviceAlloc(size_t bytes, const char* what) {
  if (bytes == 0) return nullptr;
  size_t freeB = 0, totalB = 0;
  CUSIM_CUDA_CHECK(cudaMemGetInfo(&freeB, &totalB));
  if (bytes > freeB) {
    // Memory a background release is about to return counts as free.
    WaitForReleases();
    CUSIM_CUDA_CHECK(cudaMemGetInfo(&freeB, &totalB));
    if (bytes > freeB) ThrowOutOfMemory(std::string("GPU allocation for ") + what, bytes, freeB);
  }
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    WaitForReleases();
    e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      ThrowOutOfMemory(std::string("GPU allocation for ") + what, bytes, freeB);
    }
  }
  CUSIM_CUDA_CHECK(e);
  return p;
}

void DeviceFree(void* p) noexcept { cudaFree(p); }

void* PinnedAlloc(size_t bytes, const char* what) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  cudaError_t e = cudaMallocHost(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    ThrowOutOfMemory(std::string("pinned host allocation for ") + what, bytes, 0);
  }
  CUSIM_CUDA_CHECK(e);
  return p;
}

void PinnedFree(void* p) noexcept { cudaFreeHost(p); }

}  // namespace gpu

void* HostPinnedAlloc(uint64_t bytes, bool zero) {
  if (bytes == 0 || !QueryDevices().cuda) return nullptr;
  void* p = nullptr;
  if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  if (!zero) return p;
  // Typed arrays start zeroed; spread the first touch over the CPU pool.
  ParallelFor((bytes + (4 << 20) - 1) / (4 << 20), 1, [&](size_t b, size_t e) {
    const uint64_t lo = uint64_t(b) << 22, hi = std::min<uint64_t>(bytes, uint64_t(e) << 22);
    std::memset(static_cast<char*>(p) + lo, 0, hi - lo);
  });
  return p;
}

void HostPinnedFree(void* p) noexcept { cudaFreeHost(p); }

PageLockProbe ProbePageLocking(uint64_t bytes) {
  if (!QueryDevices().cuda) throw Error(kCudaError, "no usable GPU");
  using Clock = std::chrono::steady_clock;
  const auto since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  PageLockProbe r;
  gpu::DeviceGuard g(0);
  gpu::DeviceBuffer<uint8_t> dev(bytes, "the page-locking probe");
  const auto h2d = [&](const void* p) {
    const auto t = Clock::now();
    CUSIM_CUDA_CHECK(cudaMemcpy(dev.data(), p, bytes, cudaMemcpyHostToDevice));
    return double(bytes) / 1e6 / since(t);
  };
  auto t = Clock::now();
  void* p = nullptr;
  if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) == cudaSuccess) {
    r.hostAllocMs = since(t);
    r.hostAllocH2dGBs = h2d(p);
    t = Clock::now();
    cudaFreeHost(p);
    r.hostFreeMs = since(t);
  } else {
    (void)cudaGetLastError();
  }
  t = Clock::now();
  p = AllocHostResult(bytes);
  FirstTouch(p, bytes);
  r.touchMs = since(t);
  t = Clock::now();
  if (cudaHostRegister(p, bytes, cudaHostRegisterPortable) == cudaSuccess) {
    r.registerMs = since(t);
    r.registeredH2dGBs = h2d(p);
    t = Clock::now();
    cudaHostUnregister(p);
    r.unregisterMs = since(t);
  } else {
    (void)cudaGetLastError();
  }
  std::free(p);
  return r;
}

namespace gpu {

Stream::Stream() { CUSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
Stream::~Stream() {
  if (s_) cudaStreamDestroy(s_);
}
void Stream::sync() const { CUSIM_CUDA_CHECK(cudaStreamSynchronize(s_)); }

Event::Event(bool timing, bool blocking) {
  const unsigned flags = (timing ? cudaEventDefault : cudaEventDisableTiming) | (blocking ? cudaEventBlockingSync : 0u);
  CUSIM_CUDA_CHECK(cudaEventCreateWithFlags(&e_, flags));
}
Event::~Event() {
  if (e_) cudaEventDestroy(e_);
}
void Event::record(cudaStream_t s) { CUSIM_CUDA_CHECK(cudaEventRecord(e_, s)); }
void Event::sync() const { CUSIM_CUDA_CHECK(cudaEventSynchronize(e_)); }

float ElapsedMs(const Event& start, const Event& end) {
  end.sync();
  float ms = 0;
  CUSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), end.get()));
  return ms;
}

void ParallelCopy(void* dst, const void* src, size_t bytes) { ::cusim::ParallelCopy(dst, src, bytes); }

int MultiprocessorCount(int device) {
  int v = 0;
  CUSIM_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, device));
  return v;
}

size_t MaxSharedPerBlockOptin(int device) {
  int v = 0;
  CUSIM_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return size_t(v);
}

}  // namespace gpu

namespace {

// The driver's own version from its kernel module ("NVRM version: NVIDIA UNIX
// x86_64 Kernel Module  580.159.04  ..."), for messages; "" where unknown.
std::string DriverRelease() {
  std::ifstream f("/proc/driver/nvidia/version");
  std::string line;
  if (!std::getline(f, line)) return "";
  const size_t at = line.find("Kernel Module");
  if (at == std::string::npos) return "";
  // "... Kernel Module  580.95.05  Release Build ..." or, for the open
  // modules, "... Open Kernel Module for x86_64  580.159.04  Release Build ...":
  // the first word made of digits and dots.
  std::istringstream words(line.substr(at + 13));
  std::string w;
  while (words >> w)
    if (!w.empty() && w.find_first_not_of("0123456789.") == std::string::npos && w.find('.') != std::string::npos)
      return w;
  return "";
}

}  // namespace

const DeviceReport& QueryDevices() {
  static DeviceReport report;
  static std::once_flag once;
  std::call_once(once, [] {
    report.compiled = true;
    report.architectures = CUSIM_CUDA_ARCHITECTURES;
    // Both work without a driver (the driver version is then 0), so an old or
    // missing driver is named before any call that would fail on it.
    if (cudaDriverGetVersion(&report.driverVersion) != cudaSuccess) report.driverVersion = 0;
    if (cudaRuntimeGetVersion(&report.runtimeVersion) != cudaSuccess) report.runtimeVersion = CUDART_VERSION;
    cudaGetLastError();
    report.driverRelease = report.driverVersion > 0 ? DriverRelease() : "";
    report.reason = DriverTooOld(report.driverVersion, report.runtimeVersion, report.driverRelease);
    if (!report.reason.empty()) return;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      cudaGetLastError();
      report.cuda = false;
      if (e == cudaErrorNoDevice)
        report.reason = "no device: the CUDA driver found no GPU";
      else if (e == cudaErrorInsufficientDriver)
        report.reason =
            "no driver: no CUDA driver (libcuda) is installed, or it is older than this addon's CUDA runtime";
      else
        report.reason = std::string("no device: cudaGetDeviceCount failed with ") + cudaGetErrorName(e) + " (" +
                        cudaGetErrorString(e) + ")";
      return;
    }
    if (n == 0) {
      report.reason = "no device: the CUDA driver found no GPU";
      return;
    }
    std::string unsupported;  // GPUs no kernel image in this binary runs on
    for (int i = 0; i < n; ++i) {
      cudaDeviceProp p{};
      if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
        cudaGetLastError();
        continue;
      }
      if (!ArchSupported(p.major, p.minor, CUSIM_CUDA_ARCHITECTURES)) {
        unsupported += (unsupported.empty() ? "" : "; ") + std::string("GPU ") + std::to_string(i) + " (" + p.name +
                       ") has compute capability " + std::to_string(p.major) + "." + std::to_string(p.minor);
        continue;
      }
      GpuInfo g;
      g.index = i;
      g.name = p.name;
      g.memoryBytes = p.totalGlobalMem;
      g.ccMajor = p.major;
      g.ccMinor = p.minor;
      g.multiprocessors = p.multiProcessorCount;
      g.tensorCores = TensorCoreKernels(p.major);
      g.kernels = {{"flyhash", flyhash::GpuKernelFamilies(g.tensorCores)},
                   {"hamming", hamming::GpuKernelFamilies(g.tensorCores)}};
      report.gpus.push_back(g);
    }
    report.cuda = !report.gpus.empty();
    if (report.cuda) return;
    report.reason = unsupported.empty()
                        ? "no device: no GPU could be queried"
                        : "no supported GPU: " + unsupported + ", but this addon's kernels were built for " +
                              CUSIM_CUDA_ARCHITECTURES + "; every engine runs on the CPU";
  });
  return report;
}

std::shared_ptr<void> HoldDeviceMemory(int device, uint64_t bytes) {
  gpu::DeviceGuard g(device);
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    uint64_t f = 0, t = 0;
    DeviceMemory(device, &f, &t);
    ThrowOutOfMemory("held device memory", bytes, f);
  }
  return std::shared_ptr<void>(p, [device](void* q) {
    gpu::DeviceGuard g2(device);
    cudaFree(q);
  });
}

void DeviceMemory(int device, uint64_t* free_bytes, uint64_t* total_bytes) {
  WaitForReleases();  // callers compare it with what they need
  gpu::DeviceGuard g(device);
  size_t f = 0, t = 0;
  CUSIM_CUDA_CHECK(cudaMemGetInfo(&f, &t));
  *free_bytes = f;
  *total_bytes = t;
}

}  // namespace cusim
