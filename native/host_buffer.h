// Uninitialized host memory for large results that go to JavaScript without a
// copy. std::vector would zero-fill it first, a serial pass as long as the
// copy into it. Large blocks are 2 MB aligned and advised onto transparent
// huge pages: every page of a fresh buffer faults on first write, and at 4 KB
// pages the faults of a 1 GB result cost as much as the copy itself.
// No napi.h and no CUDA headers: the CUDA backends fill these directly.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <new>
#include <utility>
#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace cusim {

// Freed with std::free.
inline void* AllocHostResult(uint64_t bytes) {
  constexpr uint64_t kHuge = 2ull << 20;
  void* p = nullptr;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (bytes >= 32 * kHuge) {
    p = std::aligned_alloc(kHuge, (bytes + kHuge - 1) / kHuge * kHuge);
    if (p) madvise(p, bytes, MADV_HUGEPAGE);
  }
#endif
  if (!p) p = std::malloc(bytes ? bytes : 1);
  if (!p) throw std::bad_alloc();
  return p;
}

// Faults the pages of [p, p + bytes) in on all cores. A device-to-host copy
// into fresh pageable memory otherwise takes every page fault on the copying
// thread, far below the bus's rate.
void FirstTouch(void* p, uint64_t bytes);

// dst <- src on all cores when large, so the first touch of fresh pages is
// spread too. The ranges must not overlap.
void ParallelCopy(void* dst, const void* src, uint64_t bytes);

// One such block, owned until release() hands it on.
class HostBlock {
 public:
  HostBlock() = default;
  HostBlock(const HostBlock&) = delete;
  HostBlock& operator=(const HostBlock&) = delete;
  ~HostBlock() { std::free(p_); }
  void allocate(uint64_t bytes) {
    std::free(std::exchange(p_, nullptr));
    p_ = AllocHostResult(bytes);
    bytes_ = bytes;
  }
  void* data() const { return p_; }
  uint64_t bytes() const { return bytes_; }
  void* release() {
    bytes_ = 0;
    return std::exchange(p_, nullptr);
  }

 private:
  void* p_ = nullptr;
  uint64_t bytes_ = 0;
};

}  // namespace cusim
