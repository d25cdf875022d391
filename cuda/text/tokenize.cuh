// Token hashes on the GPU, the kernels (cuda/text.cu runs them): one thread
// per document. 'words' and 'qgrams' first decode and lowercase each document
// into UTF-16 units (LowerKernel; String.prototype.toLowerCase with
// Final_Sigma, from the tables JavaScript built), so that the split and the
// hash then read the same units the JavaScript tokenizers read. 'code' reads
// the bytes, as the CPU does (only ASCII ever forms a token there). Each
// document is split twice: once to count its tokens, once, after a scan, to
// write their hashes. Every offset is 64-bit.
#pragma once

#include <cstdint>

#include "../../native/text.h"
#include "common.cuh"

namespace cusim {
namespace text {
namespace dev {

constexpr unsigned kThreads = 128;

struct Params {
  Mode mode;
  uint32_t minLength, q;
  bool lowercase, pad, dropKeywords, wtf8;
};

// ---- lowercase into UTF-16 ----------------------------------------------------------------

// Whether, from byte i on, skipping case-ignorable code points, a cased one comes (Final_Sigma).
__device__ bool CasedAhead(const Tables& t, const uint8_t* p, uint64_t n, uint64_t i, bool wtf8) {
  while (i < n) {
    const uint32_t e = Entry(t, DecodeAt(p, n, &i, wtf8));
    if (e & kUniIgnorable) continue;
    return (e & kUniCased) != 0;
  }
  return false;
}

// units[off[d], off[d] + ulen[d]): document d decoded (and lowered); a
// document's units never outnumber its bytes (checked on the host for the tables).
__global__ void LowerKernel(const uint8_t* __restrict__ bytes, const uint64_t* __restrict__ off, uint64_t docs,
                            Tables t, Params pr, uint16_t* __restrict__ units, uint64_t* __restrict__ ulen,
                            unsigned* bad) {
  const uint64_t d = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= docs) return;
  const uint8_t* p = bytes + off[d];
  const uint64_t n = off[d + 1] - off[d];
  uint16_t* u = units + off[d];
  uint64_t k = 0;
  bool prevCased = false;  // the last code point that is not case-ignorable was cased
  auto put = [&](uint32_t c) {
    if (c >= 0x10000) {
      if (k + 2 > n) return false;
      u[k++] = uint16_t(0xd800 + ((c - 0x10000) >> 10));
      u[k++] = uint16_t(0xdc00 + (c & 0x3ff));
    } else {
      if (k + 1 > n) return false;
      u[k++] = uint16_t(c);
    }
    return true;
  };
  for (uint64_t i = 0; i < n;) {
    const uint32_t c = DecodeAt(p, n, &i, pr.wtf8);
    const uint32_t e = Entry(t, c);
    bool ok = true;
    if (!pr.lowercase) {
      ok = put(c);
    } else if (e & kUniContext) {
      // Only U+03A3 (the host refuses tables with any other).
      ok = put(prevCased && !CasedAhead(t, p, n, i, pr.wtf8) ? kFinalSigma : kSmallSigma);
    } else if (e & kUniMulti) {
      const uint32_t x = e & kUniDelta;
      const uint32_t cnt = __ldg(t.extra + x);
      for (uint32_t j = 1; j <= cnt && ok; ++j) ok = put(__ldg(t.extra + x + j));
    } else {
      ok = put((c + (e & kUniDelta)) & kUniDelta);
    }
    if (!ok) {
      atomicOr(bad, 1u);
      break;
    }
    if (!(e & kUniIgnorable)) prevCased = (e & kUniCased) != 0;
  }
  ulen[d] = k;
}

// ---- split and hash -----------------------------------------------------------------------

struct Sink {
  uint32_t* out;  // null: count only
  uint64_t n = 0;
  __device__ void Emit(uint32_t h) {
    if (out) out[n] = h;
    ++n;
  }
};

__device__ __forceinline__ bool IsHigh(uint32_t u) { return u >= 0xd800 && u <= 0xdbff; }
__device__ __forceinline__ bool IsLow(uint32_t u) { return u >= 0xdc00 && u <= 0xdfff; }

// wordTokens() over lowered units.
__device__ void Words(const uint16_t* u, uint64_t m, const Tables& t, const WordList<uint16_t>& stop,
                      uint32_t minLength, Sink& s) {
  uint64_t v = 0;
  auto cpAt = [&](uint64_t i, uint32_t* len) -> uint32_t {
    const uint32_t a = u[i];
    if (IsHigh(a) && i + 1 < m && IsLow(u[i + 1])) {
      *len = 2;
      return 0x10000 + ((a - 0xd800) << 10) + (u[i + 1] - 0xdc00);
    }
    *len = 1;
    return a;
  };
  while (v < m) {
    uint32_t len;
    if (!(Entry(t, cpAt(v, &len)) & kUniWord)) {
      v += len;
      continue;
    }
    const uint64_t a = v;
    uint64_t count = 0;
    while (v < m && (Entry(t, cpAt(v, &len)) & kUniWord)) {
      v += len;
      ++count;
    }
    if (count < minLength) continue;
    const uint32_t h = HashUnits(u, a, v);
    if (stop.n && InList(stop, h, u + a, v - a)) continue;
    s.Emit(h);
  }
}

// qgramTokens() over units, padded virtually with q - 1 U+0002 and U+0003.
__device__ void Qgrams(const uint16_t* u, uint64_t m, uint32_t q, bool pad, Sink& s) {
  if (m == 0) return;
  const uint64_t P = pad ? q - 1 : 0, V = m + 2 * P;
  auto unit = [&](uint64_t v) -> uint32_t { return v < P ? 2u : v < P + m ? uint32_t(u[v - P]) : 3u; };
  // The next code point's start: a surrogate pair inside the text is one.
  auto next = [&](uint64_t v) -> uint64_t {
    if (v >= P && v + 1 < P + m && IsHigh(u[v - P]) && IsLow(u[v - P + 1])) return v + 2;
    return v + 1;
  };
  auto hash = [&](uint64_t a, uint64_t b) {
    uint32_t h = kFnvBasis;
    for (uint64_t k = a; k < b; ++k) h = FnvStep(h, unit(k));
    return Fmix(h);
  };
  uint64_t right = 0;
  uint32_t have = 0;
  while (have < q && right < V) {
    right = next(right);
    ++have;
  }
  if (have < q) {
    s.Emit(hash(0, V));  // shorter than q: the whole string is the gram
    return;
  }
  for (uint64_t left = 0;;) {
    s.Emit(hash(left, right));
    if (right >= V) break;
    left = next(left);
    right = next(right);
  }
}

__device__ __forceinline__ bool Up(uint32_t c) { return c - 'A' < 26u; }
__device__ __forceinline__ bool Lo(uint32_t c) { return c - 'a' < 26u; }
__device__ __forceinline__ bool Dig(uint32_t c) { return c - '0' < 10u; }
__device__ __forceinline__ bool IdStart(uint32_t c) { return Up(c) || Lo(c) || c == '_' || c == '$'; }
__device__ __forceinline__ bool IdPart(uint32_t c) { return IdStart(c) || Dig(c); }

// codeTokens() over bytes (every byte >= 0x80 a separator, as every unit >= 0x80 is in JavaScript).
__device__ void Code(const uint8_t* b, uint64_t n, const WordList<uint8_t>& keywords, const Params& pr, Sink& s) {
  uint64_t i = 0;
  while (i < n) {
    const uint32_t c = b[i];
    if (!IdPart(c)) {
      ++i;
      continue;
    }
    uint64_t j = i + 1;
    while (j < n && IdPart(b[j])) ++j;
    const uint64_t from = i, len = j - i;
    i = j;
    if (Dig(c)) continue;  // a number, skipped whole
    if (pr.dropKeywords && len >= 2 && len <= 12 && keywords.n) {
      uint32_t h = kFnvBasis;
      for (uint64_t k = from; k < j; ++k) h = FnvStep(h, b[k]);
      if (InList(keywords, Fmix(h), b + from, len)) continue;
    }
    // splitIdentifier(): the JavaScript loop, with a 0 after the end.
    int64_t start = -1;
    for (uint64_t x = from; x <= j; ++x) {
      const uint32_t ch = x < j ? b[x] : 0;
      bool cut = false, begin = false;
      if (Up(ch)) {
        if (start < 0) {
          begin = true;
        } else {
          const uint32_t prev = b[x - 1];
          const uint32_t nx = x + 1 < j ? b[x + 1] : 0;
          if (Lo(prev) || (Up(prev) && Lo(nx))) cut = begin = true;
        }
      } else if (Lo(ch)) {
        if (start < 0) begin = true;
      } else if (start >= 0) {
        cut = true;
      }
      if (cut) {
        if (x - uint64_t(start) >= pr.minLength) {
          uint32_t h = kFnvBasis;
          for (uint64_t k = uint64_t(start); k < x; ++k) h = FnvStep(h, b[k] | (Up(b[k]) ? 0x20u : 0u));
          s.Emit(Fmix(h));
        }
        start = -1;
      }
      if (begin) start = int64_t(x);
    }
  }
}

// Per document: its token count (out null) or its hashes at out + at[d].
__global__ void TokenKernel(const uint8_t* __restrict__ bytes, const uint64_t* __restrict__ off, uint64_t docs,
                            const uint16_t* __restrict__ units, const uint64_t* __restrict__ ulen, Tables t,
                            WordList<uint16_t> stop, WordList<uint8_t> keywords, Params pr,
                            uint64_t* __restrict__ counts, const uint64_t* __restrict__ at,
                            uint32_t* __restrict__ out) {
  const uint64_t d = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= docs) return;
  Sink s{out ? out + at[d] : nullptr};
  if (pr.mode == Mode::Code)
    Code(bytes + off[d], off[d + 1] - off[d], keywords, pr, s);
  else if (pr.mode == Mode::Words)
    Words(units + off[d], ulen[d], t, stop, pr.minLength, s);
  else
    Qgrams(units + off[d], ulen[d], pr.q, pr.pad, s);
  if (!out) counts[d] = s.n;
}

}  // namespace dev
}  // namespace text
}  // namespace cusim
