// UTF-8 decoding and lowercasing for the native tokenizer (text_unicode.h).
#include "text_unicode.h"

#include <atomic>
#include <string>

#include "common.h"

namespace cusim {
namespace text {
namespace {
std::atomic<const UnicodeTables*> gTables{nullptr};

// The code point an entry lowers c to, when it is a single one.
inline uint32_t LowerOne(uint32_t c, uint32_t e) { return (c + (e & kUniDelta)) & kUniDelta; }
}  // namespace

void SetUnicodeTables(UnicodeTables&& t) {
  if (gTables.load(std::memory_order_acquire)) return;
  if (t.stage1.size() != kUniCodePoints / kUniBlock) ThrowInvalid("unicode tables: stage1 must have 4352 entries");
  if (t.blocks.empty() || t.blocks.size() % kUniBlock)
    ThrowInvalid("unicode tables: blocks must be whole blocks of 256");
  const size_t nblocks = t.blocks.size() / kUniBlock;
  for (uint16_t b : t.stage1)
    if (b >= nblocks) ThrowInvalid("unicode tables: a stage1 entry names a missing block");
  for (uint32_t c = 0; c < kUniCodePoints; ++c) {
    const uint32_t e = t.Entry(c);
    if (e >> 26) ThrowInvalid("unicode tables: unknown entry bits");
    if (e & kUniMulti) {
      const size_t i = e & kUniDelta;
      if (i >= t.extra.size() || t.extra[i] == 0 || t.extra[i] > t.extra.size() - i - 1)
        ThrowInvalid("unicode tables: an expansion lies outside extra");
      for (size_t k = 1; k <= t.extra[i]; ++k)
        if (t.extra[i + k] >= kUniCodePoints) ThrowInvalid("unicode tables: an expansion is not a code point");
    } else if (LowerOne(c, e) >= kUniCodePoints) {
      ThrowInvalid("unicode tables: a lowercase mapping is not a code point");
    }
  }
  // Installed once and kept for the process's life: tokenizers on worker
  // threads read it without locks.
  auto* owned = new UnicodeTables(std::move(t));
  const UnicodeTables* expected = nullptr;
  if (!gTables.compare_exchange_strong(expected, owned, std::memory_order_acq_rel)) delete owned;
}

const UnicodeTables* CurrentUnicodeTables() { return gTables.load(std::memory_order_acquire); }

void DecodeUtf8(const uint8_t* p, size_t n, bool wtf8, std::vector<uint32_t>* out) {
  out->clear();
  out->reserve(n);
  for (uint64_t i = 0; i < n;) out->push_back(DecodeAt(p, n, &i, wtf8));
}

bool LowerCodePoints(const UnicodeTables& t, const std::vector<uint32_t>& in, std::vector<uint32_t>* out) {
  out->clear();
  out->reserve(in.size());
  const size_t n = in.size();
  // ICU's Final_Sigma, as V8's toLowerCase runs it: Σ is ς when, skipping
  // case-ignorable code points (checked before Cased), a cased one comes
  // before it and none after it.
  auto casedAt = [&](size_t i, int dir) {
    for (ptrdiff_t k = ptrdiff_t(i) + dir; k >= 0 && size_t(k) < n; k += dir) {
      const uint32_t e = t.Entry(in[size_t(k)]);
      if (e & kUniIgnorable) continue;
      return (e & kUniCased) != 0;
    }
    return false;
  };
  for (size_t i = 0; i < n; ++i) {
    const uint32_t c = in[i];
    const uint32_t e = t.Entry(c);
    if (e & kUniContext) {
      if (c != kCapitalSigma) return false;
      out->push_back(casedAt(i, -1) && !casedAt(i, 1) ? kFinalSigma : kSmallSigma);
    } else if (e & kUniMulti) {
      const size_t x = e & kUniDelta;
      for (uint32_t k = 1; k <= t.extra[x]; ++k) out->push_back(t.extra[x + k]);
    } else {
      out->push_back(LowerOne(c, e));
    }
  }
  return true;
}

void AppendUtf8(const std::vector<uint32_t>& cps, std::vector<uint8_t>* out) {
  for (uint32_t c : cps) {
    if (c < 0x80) {
      out->push_back(uint8_t(c));
    } else if (c < 0x800) {
      out->push_back(uint8_t(0xc0 | c >> 6));
      out->push_back(uint8_t(0x80 | (c & 0x3f)));
    } else if (c < 0x10000) {
      out->push_back(uint8_t(0xe0 | c >> 12));
      out->push_back(uint8_t(0x80 | (c >> 6 & 0x3f)));
      out->push_back(uint8_t(0x80 | (c & 0x3f)));
    } else {
      out->push_back(uint8_t(0xf0 | c >> 18));
      out->push_back(uint8_t(0x80 | (c >> 12 & 0x3f)));
      out->push_back(uint8_t(0x80 | (c >> 6 & 0x3f)));
      out->push_back(uint8_t(0x80 | (c & 0x3f)));
    }
  }
}

}  // namespace text
}  // namespace cusim
