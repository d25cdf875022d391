#include "host_buffer.h"

#include <algorithm>
#include <cstring>

#include "parallel.h"

namespace cusim {

void FirstTouch(void* p, uint64_t bytes) {
  constexpr uint64_t kPage = 4096, kChunk = 2ull << 20;
  auto* c = static_cast<volatile char*>(p);
  ParallelFor((bytes + kChunk - 1) / kChunk, 1, [&](size_t b, size_t e) {
    const uint64_t hi = std::min<uint64_t>(bytes, e * kChunk);
    for (uint64_t at = b * kChunk; at < hi; at += kPage) c[at] = 0;
  });
}

void ParallelCopy(void* dst, const void* src, uint64_t bytes) {
  // Below a few MB the pool's wake-up costs more than it saves.
  constexpr uint64_t kChunk = uint64_t(2) << 20;
  if (bytes <= 2 * kChunk) {
    if (bytes) std::memcpy(dst, src, bytes);
    return;
  }
  ParallelFor((bytes + kChunk - 1) / kChunk, 1, [&](size_t b, size_t e) {
    const uint64_t lo = b * kChunk, hi = std::min<uint64_t>(bytes, e * kChunk);
    std::memcpy(static_cast<char*>(dst) + lo, static_cast<const char*>(src) + lo, hi - lo);
  });
}

}  // namespace cusim
