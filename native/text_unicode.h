// Unicode for the native tokenizer's 'words' and 'qgrams' modes: decoding
// UTF-8 as JavaScript does, and String.prototype.toLowerCase over code points.
// The tables come from the JavaScript engine itself (lib/text/unicode-tables.ts
// builds them once per process and hands them over), so that the word-character
// class and the lowercase mapping are the ones the JavaScript tokenizers use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common.h"

namespace cusim {
namespace text {

// Entry bits (lib/text/unicode-tables.ts ENTRY): bits 0-20 are
// (lower(c) - c) mod 2^21, or with kMulti an index into extra.
inline constexpr uint32_t kUniDelta = 0x1fffffu;
inline constexpr uint32_t kUniWord = 1u << 21;       // [\p{L}\p{N}\p{M}]
inline constexpr uint32_t kUniIgnorable = 1u << 22;  // Case_Ignorable (Final_Sigma)
inline constexpr uint32_t kUniCased = 1u << 23;      // Cased (Final_Sigma)
inline constexpr uint32_t kUniMulti = 1u << 24;      // lowers to extra[i + 1 .. i + extra[i]]
inline constexpr uint32_t kUniContext = 1u << 25;    // lowering depends on the text around it
inline constexpr uint32_t kUniBlock = 256;
inline constexpr uint32_t kUniCodePoints = 0x110000;
inline constexpr uint32_t kCapitalSigma = 0x3a3, kSmallSigma = 0x3c3, kFinalSigma = 0x3c2;

struct UnicodeTables {
  std::vector<uint16_t> stage1;  // kUniCodePoints / kUniBlock block numbers
  std::vector<uint32_t> blocks;  // blocks of kUniBlock entries
  std::vector<uint32_t> extra;   // lowercase expansions: count, then code points
  uint32_t Entry(uint32_t c) const { return blocks[size_t(stage1[c >> 8]) * kUniBlock + (c & 0xff)]; }
};

// Checks and installs the process's tables (throws cusim::Error when they are
// malformed). The first tables installed stay; later calls are no-ops.
void SetUnicodeTables(UnicodeTables&& t);
// The installed tables, or null (then non-ASCII documents fall back).
const UnicodeTables* CurrentUnicodeTables();

// One code point of p[*i, n) as JavaScript's decoders read it (*i advances):
// a lead byte fixes the length and the range of the second byte; the first
// byte that does not fit ends a maximal subpart, which becomes one U+FFFD,
// and is read again as a new start. wtf8: see DecodeUtf8. Host and device.
CUSIM_HD uint32_t DecodeAt(const uint8_t* p, uint64_t n, uint64_t* i, bool wtf8) {
  const uint8_t b = p[*i];
  if (b < 0x80) {
    ++*i;
    return b;
  }
  uint32_t need, cp;
  uint8_t lo = 0x80, hi = 0xbf;
  if (b >= 0xc2 && b <= 0xdf) {
    need = 1;
    cp = b & 0x1f;
  } else if (b >= 0xe0 && b <= 0xef) {
    need = 2;
    cp = b & 0x0f;
    if (b == 0xe0) lo = 0xa0;
    if (b == 0xed && !wtf8) hi = 0x9f;
  } else if (b >= 0xf0 && b <= 0xf4) {
    need = 3;
    cp = b & 0x07;
    if (b == 0xf0) lo = 0x90;
    if (b == 0xf4) hi = 0x8f;
  } else {
    ++*i;
    return 0xfffd;
  }
  uint64_t j = *i + 1;
  for (uint32_t k = 0; k < need; ++k, ++j) {
    if (j >= n) {
      *i = j;
      return 0xfffd;
    }
    const uint8_t c = p[j];
    if (k == 0 ? (c < lo || c > hi) : (c & 0xc0) != 0x80) {
      *i = j;
      return 0xfffd;
    }
    cp = cp << 6 | (c & 0x3f);
  }
  *i = j;
  return cp;
}

// Decodes UTF-8 into code points as JavaScript's decoders do (TextDecoder,
// Buffer#toString: each maximal invalid subpart becomes U+FFFD). wtf8: also
// accept ED A0-BF 80-BF as a lone surrogate (how lib/text/batch.ts writes the
// lone surrogates of an ill-formed JavaScript string).
void DecodeUtf8(const uint8_t* p, size_t n, bool wtf8, std::vector<uint32_t>* out);

// String.prototype.toLowerCase over code points (Final_Sigma included).
// Returns false when some code point's lowering depends on context in a way
// this does not reproduce (none in current Unicode besides U+03A3).
bool LowerCodePoints(const UnicodeTables& t, const std::vector<uint32_t>& in, std::vector<uint32_t>* out);

// UTF-8 of code points (surrogates as 3-byte sequences), appended to out.
void AppendUtf8(const std::vector<uint32_t>& cps, std::vector<uint8_t>* out);

// Code point at p (well-formed UTF-8 as AppendUtf8 writes it); *len its bytes.
inline uint32_t NextCodePoint(const uint8_t* p, uint32_t* len) {
  const uint32_t b = p[0];
  if (b < 0x80) {
    *len = 1;
    return b;
  }
  if (b < 0xe0) {
    *len = 2;
    return (b & 0x1f) << 6 | (p[1] & 0x3f);
  }
  if (b < 0xf0) {
    *len = 3;
    return (b & 0x0f) << 12 | (p[1] & 0x3f) << 6 | (p[2] & 0x3f);
  }
  *len = 4;
  return (b & 0x07) << 18 | (p[1] & 0x3f) << 12 | (p[2] & 0x3f) << 6 | (p[3] & 0x3f);
}

}  // namespace text
}  // namespace cusim
