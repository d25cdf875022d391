// Backend-neutral types shared by every engine's CPU and CUDA implementations.
// This header must stay free of napi.h and of CUDA headers: cuda/*.cu includes it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

// Marks helpers that host and device code share (philox, similarity keys).
#if defined(__CUDACC__)
#define CUSIM_HD __host__ __device__ __forceinline__
#else
#define CUSIM_HD inline
#endif

namespace cusim {

// Error codes surface to JavaScript as `err.code`.
inline constexpr const char* kInvalidArgument = "CUSIM_INVALID_ARGUMENT";
inline constexpr const char* kCudaError = "CUSIM_CUDA_ERROR";
inline constexpr const char* kOutOfMemory = "CUSIM_OUT_OF_MEMORY";
inline constexpr const char* kAborted = "ABORT_ERR";
inline constexpr const char* kInternal = "CUSIM_INTERNAL";

struct Error : std::runtime_error {
  std::string code;
  // kind picks the JavaScript class: "Error", "TypeError" or "RangeError".
  std::string kind;
  // Out of memory: what was asked and what was free (err.bytesRequested and
  // err.bytesFree in JavaScript), when known.
  bool hasBytes = false;
  uint64_t bytesRequested = 0, bytesFree = 0;
  Error(std::string code_, const std::string& msg, std::string kind_ = "Error")
      : std::runtime_error(msg), code(std::move(code_)), kind(std::move(kind_)) {}
};

[[noreturn]] void ThrowInvalid(const std::string& msg, const char* kind = "RangeError");
// Elements one typed array holds (buffer.constants.MAX_LENGTH: 2^32 on Node
// 20), so engines can refuse a result that could never reach JavaScript
// before building it.
uint64_t MaxTypedLength();
[[noreturn]] void ThrowOutOfMemory(const std::string& what, uint64_t asked, uint64_t free_bytes);
std::string FormatBytes(uint64_t bytes);

// Cancellation requested from JavaScript through an AbortSignal. The flag lives
// in an Int32Array that the worker keeps referenced; engines poll it between chunks.
// The token also carries the call's progress when JavaScript asked for it: a
// BigUint64Array [done, total, stage] that engines bump where they poll the
// flag, and that the JS thread reads on a timer (no callbacks from workers).
struct CancelToken {
  const int32_t* flag = nullptr;
  uint64_t* progress = nullptr;
  bool requested() const {
    return flag != nullptr && reinterpret_cast<const std::atomic<int32_t>*>(flag)->load(std::memory_order_relaxed) != 0;
  }
  void check() const {
    if (requested()) throw Error(kAborted, "The operation was aborted");
  }
  // Starts stage `stage` (engine-specific index) with `total` units (0: unknown).
  void begin(uint64_t stage, uint64_t total) const {
    if (!progress) return;
    slot(0)->store(0, std::memory_order_relaxed);
    slot(1)->store(total, std::memory_order_relaxed);
    slot(2)->store(stage, std::memory_order_relaxed);
  }
  void advance(uint64_t n) const {
    if (progress) slot(0)->fetch_add(n, std::memory_order_relaxed);
  }
  void report(uint64_t done, uint64_t total) const {
    if (!progress) return;
    slot(1)->store(total, std::memory_order_relaxed);
    slot(0)->store(done, std::memory_order_relaxed);
  }

 private:
  std::atomic<uint64_t>* slot(int i) const { return reinterpret_cast<std::atomic<uint64_t>*>(progress + i); }
};

enum class Backend { Cpu, Cuda };

// Compressed sparse rows. indptr has rows + 1 entries; values may be null
// (then every stored entry has weight 1).
struct CsrView {
  uint64_t rows = 0;
  uint64_t cols = 0;
  const uint32_t* indptr = nullptr;
  const uint32_t* indices = nullptr;
  const float* values = nullptr;
  // Position of indices[0] in the caller's arrays when this is an owned copy
  // of a slice (native/owned.h); error messages add it so they name the
  // caller's positions.
  uint64_t base = 0;
  uint64_t nnz() const { return rows == 0 ? 0 : uint64_t(indptr[rows]) - indptr[0]; }
};

struct DenseView {
  const float* data = nullptr;
  uint64_t rows = 0;
  uint64_t cols = 0;
};

// The same layout with one byte per value (8-bit data: pixels, SIFT).
struct DenseBytesView {
  const uint8_t* data = nullptr;
  uint64_t rows = 0;
  uint64_t cols = 0;
};

// Packed bit codes: row r occupies words [r * wordsPerRow, (r + 1) * wordsPerRow),
// bit b of a code is bit (b % 32) of word b / 32.
struct BitsView {
  const uint32_t* words = nullptr;
  uint64_t rows = 0;
  uint32_t bits = 0;
  uint32_t wordsPerRow() const { return (bits + 31) / 32; }
};

// O(nnz) checks that kernels rely on: indptr non-decreasing and every column
// index < cols. Multi-threaded; reports the first bad element by position.
void ValidateCsr(const CsrView& m, const char* name);
// The indptr part of ValidateCsr alone, for paths that check every element
// while they copy it anyway (the MinHash CUDA staging).
void ValidateIndptr(const CsrView& m, const char* name);
// Non-finite weights (NaN, ±Infinity) are refused, naming the first one;
// w <= 0 stays legal (skipped as massless). Call after ValidateCsr. On all
// cores, in the call's worker, so the JavaScript thread never scans values.
void RejectNonFiniteWeights(const CsrView& m, const char* name);

}  // namespace cusim
