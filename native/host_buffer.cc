#include "host_buffer.h"

#include <algorithm>

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

}  // namespace cusim
