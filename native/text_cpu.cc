// CPU tokenizers. Phase 1 (parallel over documents) tokenizes each document
// and counts its distinct tokens in first-occurrence order; phase 2 (in
// document order) numbers distinct tokens against the batch dictionary, which
// fixes the order a sequential JavaScript pass would give.
#include <algorithm>
#include <cstring>
#include <string_view>
#include <unordered_set>

#include "common.h"
#include "parallel.h"
#include "text.h"

namespace cusim {
namespace text {
namespace {

// Character classes of tokenize.ts's CLASS table, for ASCII; every byte >= 0x80
// is 0 (a separator), as every UTF-16 unit >= 0x80 is there.
constexpr uint8_t kLowerC = 1, kUpperC = 2, kDigitC = 4, kOtherIdent = 8;
constexpr uint8_t kIdentStart = kLowerC | kUpperC | kOtherIdent;
constexpr uint8_t kIdentPart = kIdentStart | kDigitC;

struct Tables {
  uint8_t cls[256] = {};
  uint8_t lower[256] = {};
  Tables() {
    for (int c = 0; c < 256; ++c) lower[c] = uint8_t(c);
    for (int c = 'a'; c <= 'z'; ++c) cls[c] = kLowerC;
    for (int c = 'A'; c <= 'Z'; ++c) {
      cls[c] = kUpperC;
      lower[c] = uint8_t(c - 'A' + 'a');
    }
    for (int c = '0'; c <= '9'; ++c) cls[c] = kDigitC;
    cls['_'] = cls['$'] = kOtherIdent;
  }
};
const Tables kT;

inline bool IsUpper(uint8_t c) { return kT.cls[c] == kUpperC; }
inline bool IsLower(uint8_t c) { return kT.cls[c] == kLowerC; }

inline uint64_t Mix(uint64_t h) {
  h ^= h >> 32;
  h *= 0xd6e8feb86659fd93ull;
  h ^= h >> 32;
  return h;
}

// Not the JS hashToken: only the batch dictionary uses it, never a column.
inline uint64_t HashBytes(const uint8_t* p, size_t n) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xff51afd7ed558ccdull);
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * 0x94d049bb133111ebull;
  }
  return Mix(h);
}

inline bool IsAscii(const uint8_t* p, size_t n) {
  uint64_t acc = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    acc |= w;
  }
  for (; i < n; ++i) acc |= p[i];
  return (acc & 0x8080808080808080ull) == 0;
}

// A distinct token of one document; off points into the batch's lowered text.
struct Tok {
  uint64_t hash;
  uint64_t off;
  uint32_t len;
  uint32_t count;
};

// Counts one document's tokens in first-occurrence order.
class DocCounter {
 public:
  void Reset(std::vector<Tok>* out, const uint8_t* base) {
    out_ = out;
    base_ = base;
    total_ = 0;
    if (table_.size() != 256) table_.assign(256, 0);
    else std::fill(table_.begin(), table_.end(), 0u);
    mask_ = table_.size() - 1;
  }
  void Add(uint64_t off, uint32_t len) {
    ++total_;
    const uint64_t h = HashBytes(base_ + off, len);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      uint32_t slot = table_[i];
      if (slot == 0) {
        out_->push_back(Tok{h, off, len, 1});
        table_[i] = uint32_t(out_->size());
        if (out_->size() * 2 > table_.size()) Grow();
        return;
      }
      Tok& t = (*out_)[slot - 1];
      if (t.hash == h && t.len == len && std::memcmp(base_ + t.off, base_ + off, len) == 0) {
        ++t.count;
        return;
      }
    }
  }
  uint64_t total() const { return total_; }

 private:
  void Grow() {
    table_.assign(table_.size() * 2, 0);
    mask_ = table_.size() - 1;
    for (size_t k = 0; k < out_->size(); ++k) {
      size_t i = (*out_)[k].hash & mask_;
      while (table_[i] != 0) i = (i + 1) & mask_;
      table_[i] = uint32_t(k + 1);
    }
  }
  std::vector<uint32_t> table_;
  size_t mask_ = 0;
  std::vector<Tok>* out_ = nullptr;
  const uint8_t* base_ = nullptr;
  uint64_t total_ = 0;
};

// A set of byte strings looked up by string_view without allocating.
class WordSet {
 public:
  explicit WordSet(const std::vector<std::string>& words) : owned_(words) {
    for (const auto& w : owned_) set_.insert(std::string_view(w));
  }
  bool Has(const uint8_t* p, size_t n) const {
    return !set_.empty() && set_.count(std::string_view(reinterpret_cast<const char*>(p), n)) != 0;
  }

 private:
  const std::vector<std::string> owned_;
  std::unordered_set<std::string_view> set_;
};

}  // namespace

struct Tokenizer::Impl {
  Options o;
  WordSet keywords;
  WordSet stop;
  explicit Impl(const Options& opt) : o(opt), keywords(opt.keywords), stop(opt.stopWords) {}

  // splitIdentifier() of tokenize.ts over id = src[0, n); tokens are emitted
  // as ranges of the lowered copy, which sits at the same positions.
  void SplitIdentifier(const uint8_t* id, size_t n, uint64_t at, DocCounter& c) const {
    ptrdiff_t start = -1;
    for (size_t i = 0; i <= n; ++i) {
      const uint8_t ch = i < n ? id[i] : 0;
      bool cut = false, begin = false;
      if (IsUpper(ch)) {
        if (start < 0) {
          begin = true;
        } else {
          const uint8_t prev = id[i - 1];
          const uint8_t next = i + 1 < n ? id[i + 1] : 0;
          if (IsLower(prev) || (IsUpper(prev) && IsLower(next))) cut = begin = true;
        }
      } else if (IsLower(ch)) {
        if (start < 0) begin = true;
      } else if (start >= 0) {
        cut = true;
      }
      if (cut) {
        if (i - size_t(start) >= o.minLength) c.Add(at + size_t(start), uint32_t(i - size_t(start)));
        start = -1;
      }
      if (begin) start = ptrdiff_t(i);
    }
  }

  // codeTokens(): identifiers, keywords dropped whole, numeric runs skipped.
  void Code(const uint8_t* s, size_t n, uint64_t at, DocCounter& c) const {
    size_t i = 0;
    while (i < n) {
      const uint8_t k = kT.cls[s[i]];
      if (k & kIdentStart) {
        size_t j = i + 1;
        while (j < n && (kT.cls[s[j]] & kIdentPart)) ++j;
        const size_t len = j - i;
        if (!(o.dropKeywords && len >= 2 && len <= 12 && keywords.Has(s + i, len))) SplitIdentifier(s + i, len, at + i, c);
        i = j;
      } else if (k == kDigitC) {
        size_t j = i + 1;
        while (j < n && (kT.cls[s[j]] & kIdentPart)) ++j;
        i = j;
      } else {
        ++i;
      }
    }
  }

  // wordTokens() on ASCII: after lowercasing, [\p{L}\p{N}\p{M}]+ is [a-z0-9]+.
  void Words(const uint8_t* low, size_t n, uint64_t at, DocCounter& c) const {
    size_t i = 0;
    while (i < n) {
      if (!(kT.cls[low[i]] & (kLowerC | kDigitC))) {
        ++i;
        continue;
      }
      size_t j = i + 1;
      while (j < n && (kT.cls[low[j]] & (kLowerC | kDigitC))) ++j;
      const size_t len = j - i;
      if (len >= o.minLength && !stop.Has(low + i, len)) c.Add(at + i, uint32_t(len));
      i = j;
    }
  }

  // qgramTokens() on the (padded) region: one gram per window, or the whole
  // non-empty string when it is shorter than q.
  void Qgrams(size_t n, uint64_t at, DocCounter& c) const {
    if (n == 0) return;
    if (n < o.q) {
      c.Add(at, uint32_t(n));
      return;
    }
    for (size_t i = 0; i + o.q <= n; ++i) c.Add(at + i, o.q);
  }

  size_t RegionLength(size_t len) const {
    return o.mode == Mode::Qgrams && o.pad && len > 0 ? len + 2 * size_t(o.q - 1) : len;
  }
};

Tokenizer::Tokenizer(const Options& options) : impl_(new Impl(options)) {
  if (options.q < 1) ThrowInvalid("q must be at least 1");
  if (options.minLength < 1) ThrowInvalid("minLength must be at least 1");
}
Tokenizer::~Tokenizer() = default;
const Options& Tokenizer::options() const { return impl_->o; }

void Tokenizer::Run(const uint8_t* bytes, const uint32_t* offsets, size_t docs, uint32_t minTokens, Batch* out) const {
  const Impl& im = *impl_;
  const Options& o = im.o;
  // The lowered (and padded) text of every document, at fixed offsets.
  std::vector<uint64_t> region(docs + 1, 0);
  for (size_t d = 0; d < docs; ++d) region[d + 1] = region[d] + im.RegionLength(offsets[d + 1] - offsets[d]);
  std::vector<uint8_t> low(region[docs]);
  std::vector<std::vector<Tok>> distinct(docs);
  out->tokens.assign(docs, 0);

  ParallelFor(docs, 16, [&](size_t b, size_t e) {
    DocCounter counter;
    for (size_t d = b; d < e; ++d) {
      const uint8_t* src = bytes + offsets[d];
      const size_t n = offsets[d + 1] - offsets[d];
      if (o.mode != Mode::Code && !IsAscii(src, n)) {
        out->tokens[d] = kFallback;
        continue;
      }
      uint8_t* dst = low.data() + region[d];
      const uint64_t at = region[d];
      counter.Reset(&distinct[d], low.data());
      if (o.mode == Mode::Qgrams) {
        const size_t pad = im.RegionLength(n) - n;
        std::memset(dst, 0x02, pad / 2);
        if (o.lowercase) {
          for (size_t i = 0; i < n; ++i) dst[pad / 2 + i] = kT.lower[src[i]];
        } else {
          std::memcpy(dst + pad / 2, src, n);
        }
        std::memset(dst + pad / 2 + n, 0x03, pad / 2);
        im.Qgrams(n + pad, at, counter);
      } else {
        for (size_t i = 0; i < n; ++i) dst[i] = kT.lower[src[i]];
        if (o.mode == Mode::Code) im.Code(src, n, at, counter);
        else im.Words(dst, n, at, counter);
      }
      if (counter.total() >= kFallback) ThrowInvalid("a document has more than 2^32 - 2 tokens");
      out->tokens[d] = uint32_t(counter.total());
    }
  });

  // Phase 2, in document order: the batch dictionary.
  size_t pairs = 0;
  auto kept = [&](size_t d) { return out->tokens[d] != kFallback && out->tokens[d] >= minTokens; };
  for (size_t d = 0; d < docs; ++d)
    if (kept(d)) pairs += distinct[d].size();
  if (pairs >= (uint64_t(1) << 32)) ThrowInvalid("a batch has more than 2^32 - 1 (document, token) pairs");
  out->indptr.assign(docs + 1, 0);
  out->ids.resize(pairs);
  out->counts.resize(pairs);
  out->termBytes.clear();
  out->termEnds.clear();
  std::vector<const Tok*> terms;
  std::vector<uint32_t> table(1024, 0);
  size_t mask = table.size() - 1;
  size_t k = 0;
  for (size_t d = 0; d < docs; ++d) {
    if (kept(d)) {
      for (const Tok& t : distinct[d]) {
        size_t i = t.hash & mask;
        uint32_t id;
        for (;; i = (i + 1) & mask) {
          const uint32_t slot = table[i];
          if (slot == 0) {
            id = uint32_t(terms.size());
            terms.push_back(&t);
            table[i] = id + 1;
            if (terms.size() * 2 > table.size()) {
              table.assign(table.size() * 2, 0);
              mask = table.size() - 1;
              for (size_t x = 0; x < terms.size(); ++x) {
                size_t j = terms[x]->hash & mask;
                while (table[j] != 0) j = (j + 1) & mask;
                table[j] = uint32_t(x + 1);
              }
            }
            break;
          }
          const Tok& u = *terms[slot - 1];
          if (u.hash == t.hash && u.len == t.len && std::memcmp(low.data() + u.off, low.data() + t.off, t.len) == 0) {
            id = slot - 1;
            break;
          }
        }
        out->ids[k] = id;
        out->counts[k] = t.count;
        ++k;
      }
    }
    out->indptr[d + 1] = uint32_t(k);
  }
  size_t termBytes = 0;
  for (const Tok* t : terms) termBytes += t->len;
  if (termBytes >= (uint64_t(1) << 32)) ThrowInvalid("a batch's distinct tokens exceed 4 GiB");
  out->termBytes.reserve(termBytes);
  out->termEnds.reserve(terms.size());
  for (const Tok* t : terms) {
    out->termBytes.append(reinterpret_cast<const char*>(low.data() + t->off), t->len);
    out->termEnds.push_back(uint32_t(out->termBytes.size()));
  }
}

}  // namespace text
}  // namespace cusim
