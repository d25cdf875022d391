// Device code shared by the text kernels: the Unicode tables
// (native/text_unicode.h layout), UTF-8 decoding as TextDecoder does, and
// lib/text/vocabulary.ts hashToken() over UTF-16 units or ASCII bytes.
#pragma once

#include <cstdint>

#include "../../native/text_unicode.h"

namespace cusim {
namespace text {
namespace dev {

struct Tables {
  const uint16_t* stage1 = nullptr;
  const uint32_t* blocks = nullptr;
  const uint32_t* extra = nullptr;
};

__device__ __forceinline__ uint32_t Entry(const Tables& t, uint32_t c) {
  return __ldg(t.blocks + size_t(__ldg(t.stage1 + (c >> 8))) * kUniBlock + (c & 0xff));
}

// One code point of p[*i, n): text_unicode.h DecodeAt, shared with the host.
using ::cusim::text::DecodeAt;

__device__ __forceinline__ uint32_t FnvStep(uint32_t h, uint32_t unit) { return (h ^ unit) * 0x01000193u; }
constexpr uint32_t kFnvBasis = 0x811c9dc5u;
__device__ __forceinline__ uint32_t Fmix(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  return h ^ (h >> 16);
}

// hashToken() of units[a, b).
__device__ __forceinline__ uint32_t HashUnits(const uint16_t* u, uint64_t a, uint64_t b) {
  uint32_t h = kFnvBasis;
  for (uint64_t k = a; k < b; ++k) h = FnvStep(h, u[k]);
  return Fmix(h);
}

// A sorted word list (stop words as UTF-16, keywords as bytes): entries by
// hashToken, with their units at text[off[i], off[i + 1]).
template <typename Unit>
struct WordList {
  const uint32_t* hash = nullptr;
  const uint64_t* off = nullptr;
  const Unit* text = nullptr;
  uint32_t n = 0;
};

// Whether s[0, len) (units or bytes, compared as values) is in the list.
template <typename Unit, typename S>
__device__ bool InList(const WordList<Unit>& w, uint32_t h, const S* s, uint64_t len) {
  uint32_t lo = 0, hi = w.n;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (w.hash[mid] < h)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (uint32_t i = lo; i < w.n && w.hash[i] == h; ++i) {
    if (w.off[i + 1] - w.off[i] != len) continue;
    bool same = true;
    for (uint64_t k = 0; k < len && same; ++k) same = uint32_t(w.text[w.off[i] + k]) == uint32_t(s[k]);
    if (same) return true;
  }
  return false;
}

}  // namespace dev
}  // namespace text
}  // namespace cusim
