// CUDA plumbing shared by every engine: error checks, device selection, RAII
// device/pinned buffers with up-front OOM reports, streams and event timers.
// Allocation discipline: each engine computes its sizes first and allocates
// through DeviceBuffer, which checks free memory and reports what was asked.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <utility>

#include "../../native/common.h"

namespace cusim {
namespace gpu {

[[noreturn]] void ThrowCuda(cudaError_t e, const char* expr, const char* file, int line);

#define CUSIM_CUDA_CHECK(expr)                                                                     \
  do {                                                                                             \
    cudaError_t cusim_err_ = (expr);                                                               \
    if (cusim_err_ != cudaSuccess) ::cusim::gpu::ThrowCuda(cusim_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// After every launch: catches bad configurations at once; execution faults
// surface at the next synchronizing call, which is checked too.
#define CUSIM_LAUNCH_CHECK() CUSIM_CUDA_CHECK(cudaGetLastError())

class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

void* DeviceAlloc(size_t bytes, const char* what);
void DeviceFree(void* p) noexcept;
void* PinnedAlloc(size_t bytes, const char* what);
void PinnedFree(void* p) noexcept;

// Device memory owned by one device. Move-only.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t n, const char* what) { reset(n, what); }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Reallocates (contents lost) only when n exceeds the current capacity.
  void reserve(size_t n, const char* what) {
    if (n > n_) reset(n, what);
  }
  void reset(size_t n, const char* what) {
    release();
    if (n) p_ = static_cast<T*>(DeviceAlloc(n * sizeof(T), what));
    n_ = n;
  }
  void release() noexcept {
    if (p_) DeviceFree(p_);
    p_ = nullptr;
    n_ = 0;
  }
  T* data() const { return p_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

// Page-locked host memory: staging for chunked inputs, so copies run
// asynchronously and overlap kernels on another stream.
template <typename T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(size_t n, const char* what) { reserve(n, what); }
  ~PinnedBuffer() { release(); }
  PinnedBuffer(PinnedBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void reserve(size_t n, const char* what) {
    if (n <= n_) return;
    release();
    p_ = static_cast<T*>(PinnedAlloc(n * sizeof(T), what));
    n_ = n;
  }
  void release() noexcept {
    if (p_) PinnedFree(p_);
    p_ = nullptr;
    n_ = 0;
  }
  T* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }
  operator cudaStream_t() const { return s_; }
  void sync() const;

 private:
  cudaStream_t s_ = nullptr;
};

// A `blocking` event's sync() sleeps until the event completes instead of
// spinning: with the default device scheduling (spin while a process has fewer
// CUDA contexts than cores), every host thread waiting on a GPU holds a core,
// and a pipeline feeding several GPUs from several threads each then leaves
// too few cores for the host copies it waits on.
class Event {
 public:
  explicit Event(bool timing = true, bool blocking = false);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(cudaStream_t s);
  void sync() const;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

// Milliseconds between two recorded events (synchronizes on `end`).
float ElapsedMs(const Event& start, const Event& end);

inline unsigned GridFor(uint64_t n, unsigned threads, unsigned cap = 1u << 30) {
  uint64_t b = (n + threads - 1) / threads;
  if (b == 0) b = 1;
  return unsigned(b > cap ? cap : b);
}

// memcpy spread over the CPU pool (ParallelFor). One core copies into pinned
// staging at only a few GB/s, well below PCIe; large host<->pinned copies go
// through this so staging keeps up with the DMA engines.
void ParallelCopy(void* dst, const void* src, size_t bytes);

int MultiprocessorCount(int device);
size_t MaxSharedPerBlockOptin(int device);

}  // namespace gpu
}  // namespace cusim
