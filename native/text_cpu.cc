// CPU tokenizers. Phase 1 (parallel over documents) tokenizes each document
// and counts its distinct tokens in first-occurrence order; phase 2 (in
// document order) numbers distinct tokens against the batch dictionary, which
// fixes the order a sequential JavaScript pass would give.
#include <algorithm>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "common.h"
#include "parallel.h"
#include "text.h"
#include "text_unicode.h"

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
  Tables() {
    for (int c = 'a'; c <= 'z'; ++c) cls[c] = kLowerC;
    for (int c = 'A'; c <= 'Z'; ++c) cls[c] = kUpperC;
    for (int c = '0'; c <= '9'; ++c) cls[c] = kDigitC;
    cls['_'] = cls['$'] = kOtherIdent;
  }
};
const Tables kT;

inline uint64_t Mix(uint64_t h) {
  h ^= h >> 32;
  h *= 0xd6e8feb86659fd93ull;
  h ^= h >> 32;
  return h;
}

inline uint64_t Load8(const uint8_t* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}
inline uint64_t Load4(const uint8_t* p) {
  uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}

// Not the JS hashToken: only the batch dictionary uses it, never a column.
// Tails are read as overlapping fixed-size loads (no byte loops, no memcpy
// calls, never past the token), which is what makes short tokens cheap.
inline uint64_t HashBytes(const uint8_t* p, size_t n) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xff51afd7ed558ccdull);
  if (n >= 8) {
    const uint8_t* end = p + n - 8;
    for (; p < end; p += 8) {
      h = (h ^ Load8(p)) * 0xbf58476d1ce4e5b9ull;
      h ^= h >> 29;
    }
    h = (h ^ Load8(end)) * 0x94d049bb133111ebull;
  } else if (n >= 4) {
    h = (h ^ (Load4(p) | (Load4(p + n - 4) << 32))) * 0x94d049bb133111ebull;
  } else if (n > 0) {
    h = (h ^ (uint64_t(p[0]) | uint64_t(p[n >> 1]) << 8 | uint64_t(p[n - 1]) << 16)) * 0x94d049bb133111ebull;
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

// ASCII lowercasing in a form the compiler vectorizes (bytes >= 0x80 kept).
inline void Lower(const uint8_t* src, size_t n, uint8_t* dst) {
  for (size_t i = 0; i < n; ++i) {
    const uint8_t c = src[i];
    dst[i] = c | (uint8_t(c - 'A') < 26 ? 0x20 : 0);
  }
}

// A token's bytes packed into two words by overlapping fixed-size loads:
// injective for a given length up to 16 bytes, so short tokens compare as
// three integers without touching the text again; longer ones also memcmp.
struct Key {
  uint64_t a = 0, b = 0;
  uint32_t len = 0;
  uint64_t hash = 0;
};

inline Key KeyOf(const uint8_t* p, size_t n) {
  Key k;
  k.len = uint32_t(n);
  if (n >= 8) {
    k.a = Load8(p);
    k.b = Load8(p + n - 8);
  } else if (n >= 4) {
    k.a = Load4(p) | (Load4(p + n - 4) << 32);
  } else if (n > 0) {
    k.a = uint64_t(p[0]) | uint64_t(p[n >> 1]) << 8 | uint64_t(p[n - 1]) << 16;
  }
  k.hash = n > 16 ? HashBytes(p, n)
                  : Mix((k.a * 0xbf58476d1ce4e5b9ull) ^ (k.b * 0x94d049bb133111ebull) ^ (n * 0xff51afd7ed558ccdull));
  return k;
}

inline bool SameKey(const Key& x, const uint8_t* xp, const Key& y, const uint8_t* yp) {
  return x.a == y.a && x.b == y.b && x.len == y.len && (x.len <= 16 || std::memcmp(xp, yp, x.len) == 0);
}

// A distinct token of one document; off points into the batch's lowered text.
struct Tok {
  Key key;
  uint64_t off;
  uint32_t count;
};

// Open addressing over keys kept elsewhere: a slot holds the hash's high half
// as a tag and 1 + the key's index (0: empty), so most probes that miss never
// load the key.
class KeyTable {
 public:
  void Reset(size_t cap) {
    if (slots_.size() != cap)
      slots_.assign(cap, 0);
    else
      std::fill(slots_.begin(), slots_.end(), 0ull);
    mask_ = cap - 1;
  }
  // Index of the key equal to k, or -1 with *empty set to the free slot
  // where it belongs. keyAt(i, &text) gives key i and its bytes.
  template <typename KeyAt>
  int64_t Find(const Key& k, const uint8_t* text, const KeyAt& keyAt, size_t* empty) const {
    const uint64_t tag = k.hash >> 32;
    for (size_t i = k.hash & mask_;; i = (i + 1) & mask_) {
      const uint64_t slot = slots_[i];
      if (slot == 0) {
        *empty = i;
        return -1;
      }
      if ((slot >> 32) == tag) {
        const uint32_t idx = uint32_t(slot) - 1;
        const uint8_t* other = nullptr;
        const Key& o = keyAt(idx, &other);
        if (SameKey(o, other, k, text)) return idx;
      }
    }
  }
  void Put(size_t slot, uint64_t hash, uint32_t index) { slots_[slot] = ((hash >> 32) << 32) | (uint64_t(index) + 1); }
  size_t capacity() const { return slots_.size(); }
  template <typename HashAt>
  void Rehash(size_t cap, size_t n, const HashAt& hashAt) {
    slots_.assign(cap, 0);
    mask_ = cap - 1;
    for (size_t x = 0; x < n; ++x) {
      const uint64_t h = hashAt(x);
      size_t i = h & mask_;
      while (slots_[i] != 0) i = (i + 1) & mask_;
      slots_[i] = ((h >> 32) << 32) | (uint64_t(x) + 1);
    }
  }

 private:
  std::vector<uint64_t> slots_;
  size_t mask_ = 0;
};

// Counts one document's tokens in first-occurrence order.
class DocCounter {
 public:
  void Reset(std::vector<Tok>* out, const uint8_t* base) {
    out_ = out;
    base_ = base;
    total_ = 0;
    table_.Reset(256);
  }
  void Add(uint64_t off, uint32_t len) {
    ++total_;
    const uint8_t* p = base_ + off;
    const Key k = KeyOf(p, len);
    auto& toks = *out_;
    size_t empty;
    const int64_t found = table_.Find(
        k, p,
        [&](uint32_t i, const uint8_t** text) -> const Key& {
          *text = base_ + toks[i].off;
          return toks[i].key;
        },
        &empty);
    if (found >= 0) {
      ++toks[size_t(found)].count;
      return;
    }
    table_.Put(empty, k.hash, uint32_t(toks.size()));
    toks.push_back(Tok{k, off, 1});
    if (toks.size() * 2 > table_.capacity())
      table_.Rehash(table_.capacity() * 2, toks.size(), [&](size_t i) { return toks[i].key.hash; });
  }
  uint64_t total() const { return total_; }

 private:
  KeyTable table_;
  std::vector<Tok>* out_ = nullptr;
  const uint8_t* base_ = nullptr;
  uint64_t total_ = 0;
};

// A set of byte strings (keywords, stop words) probed once per identifier or word.
class WordSet {
 public:
  explicit WordSet(const std::vector<std::string>& words) : words_(words) {
    size_t cap = 16;
    while (cap < 2 * words_.size()) cap *= 2;
    table_.Reset(cap);
    for (const auto& w : words_) {
      const auto* p = reinterpret_cast<const uint8_t*>(w.data());
      const Key k = KeyOf(p, w.size());
      size_t empty;
      if (table_.Find(k, p, KeyAt(), &empty) >= 0) continue;
      if (!w.empty()) {
        const size_t l = std::min<size_t>(w.size(), 15);
        first_[l][p[0]] = last_[l][p[w.size() - 1]] = true;
      } else {
        hasEmpty_ = true;
      }
      table_.Put(empty, k.hash, uint32_t(keys_.size()));
      keys_.push_back(k);
      text_.push_back(p);
    }
  }
  bool Has(const uint8_t* p, size_t n) const {
    if (keys_.empty()) return false;
    // Most probes are not words of the set: two table loads reject them
    // before any hashing.
    if (n == 0 ? !hasEmpty_ : !(first_[std::min<size_t>(n, 15)][p[0]] && last_[std::min<size_t>(n, 15)][p[n - 1]]))
      return false;
    size_t empty;
    return table_.Find(KeyOf(p, n), p, KeyAt(), &empty) >= 0;
  }

 private:
  struct KeyAtFn {
    const WordSet* set;
    const Key& operator()(uint32_t i, const uint8_t** text) const {
      *text = set->text_[i];
      return set->keys_[i];
    }
  };
  KeyAtFn KeyAt() const { return KeyAtFn{this}; }
  bool first_[16][256] = {};  // [min(length, 15)][first byte] of some word
  bool last_[16][256] = {};   // [min(length, 15)][last byte] of some word
  bool hasEmpty_ = false;
  const std::vector<std::string> words_;  // text_ points into these
  std::vector<Key> keys_;
  std::vector<const uint8_t*> text_;
  KeyTable table_;
};

// Bitmaps of 64 bytes: [A-Za-z0-9_$], [a-z], [A-Z] (bytes >= 0x80 in none).
#if defined(__SSE2__)
inline uint64_t InRange16(__m128i v, char lo, char hi) {
  const __m128i ge = _mm_cmpeq_epi8(_mm_max_epu8(v, _mm_set1_epi8(lo)), v);
  const __m128i le = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(hi)), v);
  return uint32_t(_mm_movemask_epi8(_mm_and_si128(ge, le)));
}
inline void Classify64(const uint8_t* b, uint64_t* part, uint64_t* lower, uint64_t* upper) {
  uint64_t p = 0, lo = 0, up = 0;
  for (int k = 0; k < 4; ++k) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16 * k));
    const uint64_t l = InRange16(v, 'a', 'z'), u = InRange16(v, 'A', 'Z'), d = InRange16(v, '0', '9');
    const uint64_t o = uint32_t(
        _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('_')), _mm_cmpeq_epi8(v, _mm_set1_epi8('$')))));
    p |= (l | u | d | o) << (16 * k);
    lo |= l << (16 * k);
    up |= u << (16 * k);
  }
  *part = p;
  *lower = lo;
  *upper = up;
}
#else
inline void Classify64(const uint8_t* b, uint64_t* part, uint64_t* lower, uint64_t* upper) {
  uint64_t p = 0, lo = 0, up = 0;
  for (size_t j = 0; j < 64; ++j) {
    const uint8_t c = kT.cls[b[j]];
    p |= uint64_t(c != 0) << j;
    lo |= uint64_t(c == kLowerC) << j;
    up |= uint64_t(c == kUpperC) << j;
  }
  *part = p;
  *lower = lo;
  *upper = up;
}
#endif

// Code mode scans bitmaps of character classes (bit i of word i / 64 is byte
// i) instead of branching per byte: identifier runs, their all-lowercase test
// and splitIdentifier()'s cut points become word operations, which removed
// most branch mispredictions from the scan.
struct CodeMasks {
  std::vector<uint64_t> part, lower, starts, bounds;

  // part: [A-Za-z0-9_$]; lower: [a-z]; starts: where a sub-token begins (a
  // letter after a non-letter, an upper after a lower, an upper between an
  // upper and a lower); bounds: starts plus every non-letter.
  void Build(const uint8_t* s, size_t n) {
    const size_t words = n / 64 + 1;  // always one word past the end
    part.assign(words, 0);
    lower.assign(words, 0);
    upper_.assign(words, 0);
    for (size_t w = 0; w * 64 < n; ++w) {
      const uint8_t* b = s + w * 64;
      uint8_t tail[64];
      if (n - w * 64 < 64) {
        // Zero bytes are separators, like the end of the document.
        std::memset(tail, 0, 64);
        std::memcpy(tail, b, n - w * 64);
        b = tail;
      }
      Classify64(b, &part[w], &lower[w], &upper_[w]);
    }
    starts.assign(words, 0);
    bounds.assign(words, 0);
    for (size_t w = 0; w < words; ++w) {
      const uint64_t lo = lower[w], up = upper_[w], let = lo | up;
      const uint64_t pl = w ? lower[w - 1] >> 63 : 0, pu = w ? upper_[w - 1] >> 63 : 0;
      const uint64_t nl = w + 1 < words ? lower[w + 1] << 63 : 0;
      const uint64_t letPrev = (let << 1) | pl | pu;
      const uint64_t lowPrev = (lo << 1) | pl;
      const uint64_t upPrev = (up << 1) | pu;
      const uint64_t lowNext = (lo >> 1) | nl;
      starts[w] = (let & ~letPrev) | (up & lowPrev) | (up & upPrev & lowNext);
      bounds[w] = starts[w] | ~let;
    }
  }

 private:
  std::vector<uint64_t> upper_;
};

// First i in [from, limit) with bit i set in m (or limit); m covers limit.
inline size_t NextSet(const std::vector<uint64_t>& m, size_t from, size_t limit) {
  if (from >= limit) return limit;
  size_t w = from / 64;
  uint64_t x = m[w] & (~uint64_t(0) << (from % 64));
  while (x == 0) {
    if (++w * 64 >= limit) return limit;
    x = m[w];
  }
  return std::min(limit, w * 64 + size_t(__builtin_ctzll(x)));
}

// First i in [from, limit) with bit i clear in m (or limit).
inline size_t NextClear(const std::vector<uint64_t>& m, size_t from, size_t limit) {
  if (from >= limit) return limit;
  size_t w = from / 64;
  uint64_t x = ~m[w] & (~uint64_t(0) << (from % 64));
  while (x == 0) {
    if (++w * 64 >= limit) return limit;
    x = ~m[w];
  }
  return std::min(limit, w * 64 + size_t(__builtin_ctzll(x)));
}

}  // namespace

struct Tokenizer::Impl {
  Options o;
  WordSet keywords;
  WordSet stop;
  explicit Impl(const Options& opt) : o(opt), keywords(opt.keywords), stop(opt.stopWords) {}

  // codeTokens(): maximal runs of [A-Za-z0-9_$] are the units; a run that
  // starts with a digit is a number and skipped whole, a keyword is dropped
  // whole, any other identifier splits (splitIdentifier()) into the letter
  // runs between consecutive `starts`/`bounds` bits. Tokens are emitted as
  // ranges of the lowered copy, which sits at the same positions.
  void Code(const uint8_t* s, size_t n, uint64_t at, CodeMasks& m, DocCounter& c) const {
    m.Build(s, n);
    for (size_t rs = NextSet(m.part, 0, n); rs < n; rs = NextSet(m.part, rs, n)) {
      const size_t re = NextClear(m.part, rs, n);
      const size_t len = re - rs;
      const size_t from = rs;
      rs = re;
      if (kT.cls[s[from]] == kDigitC) continue;
      if (o.dropKeywords && len >= 2 && len <= 12 && keywords.Has(s + from, len)) continue;
      // All lowercase (most names): the identifier is the one token.
      if (NextClear(m.lower, from, re) == re) {
        if (len >= o.minLength) c.Add(at + from, uint32_t(len));
        continue;
      }
      for (size_t t = NextSet(m.starts, from, re); t < re;) {
        const size_t e = NextSet(m.bounds, t + 1, re);
        if (e - t >= o.minLength) c.Add(at + t, uint32_t(e - t));
        t = NextSet(m.starts, e, re);
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

  // wordTokens() on a non-ASCII document's lowered UTF-8: runs of word
  // characters ([\p{L}\p{N}\p{M}] from the tables), minLength in code points.
  void WordsUtf8(const UnicodeTables& u, const uint8_t* low, size_t n, uint64_t at, DocCounter& c) const {
    size_t i = 0;
    while (i < n) {
      uint32_t len;
      if (!(u.Entry(NextCodePoint(low + i, &len)) & kUniWord)) {
        i += len;
        continue;
      }
      size_t j = i + len;
      uint64_t count = 1;
      while (j < n && (u.Entry(NextCodePoint(low + j, &len)) & kUniWord)) {
        j += len;
        ++count;
      }
      if (count >= o.minLength && !stop.Has(low + i, j - i)) c.Add(at + i, uint32_t(j - i));
      i = j;
    }
  }

  // qgramTokens() over code points of a non-ASCII document's (padded) UTF-8.
  void QgramsUtf8(const uint8_t* s, size_t n, uint64_t at, std::vector<uint32_t>& starts, DocCounter& c) const {
    if (n == 0) return;
    starts.clear();
    for (size_t i = 0; i < n;) {
      starts.push_back(uint32_t(i));
      uint32_t len;
      NextCodePoint(s + i, &len);
      i += len;
    }
    const size_t m = starts.size();
    if (m < o.q) {
      c.Add(at, uint32_t(n));
      return;
    }
    starts.push_back(uint32_t(n));
    for (size_t i = 0; i + o.q <= m; ++i) c.Add(at + starts[i], starts[i + o.q] - starts[i]);
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

void Tokenizer::Run(const uint8_t* bytes, const uint32_t* offsets, size_t docs, uint32_t minTokens, Batch* out,
                    bool wtf8) const {
  const Impl& im = *impl_;
  const Options& o = im.o;
  // Non-ASCII documents in 'words' and 'qgrams' are decoded and lowered
  // first (their lowered UTF-8 can be longer or shorter than the source);
  // without tables they are left to JavaScript.
  const UnicodeTables* uni = o.mode == Mode::Code ? nullptr : CurrentUnicodeTables();
  std::vector<std::vector<uint8_t>> wide(docs);
  std::vector<uint8_t> state(docs, 0);  // 0 ASCII (or code), 1 wide, 2 fallback
  std::vector<uint64_t> region(docs + 1, 0);
  ParallelFor(docs, 1, [&](size_t b, size_t e) {
    std::vector<uint32_t> cps, lowered;
    for (size_t d = b; d < e; ++d) {
      const uint8_t* src = bytes + offsets[d];
      const size_t n = offsets[d + 1] - offsets[d];
      if (o.mode == Mode::Code || IsAscii(src, n)) {
        region[d + 1] = im.RegionLength(n);
        continue;
      }
      if (!uni) {
        state[d] = 2;
        continue;
      }
      DecodeUtf8(src, n, wtf8, &cps);
      const std::vector<uint32_t>* text = &cps;
      if (o.mode == Mode::Words || o.lowercase) {
        if (!LowerCodePoints(*uni, cps, &lowered)) {
          state[d] = 2;
          continue;
        }
        text = &lowered;
      }
      AppendUtf8(*text, &wide[d]);
      state[d] = 1;
      region[d + 1] = im.RegionLength(wide[d].size());
    }
  });
  // The lowered (and padded) text of every document, at fixed offsets.
  for (size_t d = 0; d < docs; ++d) region[d + 1] += region[d];
  std::vector<uint8_t> low(region[docs]);
  std::vector<std::vector<Tok>> distinct(docs);
  out->tokens.assign(docs, 0);

  // Grain 1: document sizes vary by orders of magnitude (node_modules).
  ParallelFor(docs, 1, [&](size_t b, size_t e) {
    DocCounter counter;
    CodeMasks masks;
    std::vector<uint32_t> starts;
    for (size_t d = b; d < e; ++d) {
      if (state[d] == 2) {
        out->tokens[d] = kFallback;
        continue;
      }
      const bool isWide = state[d] == 1;
      const uint8_t* src = isWide ? wide[d].data() : bytes + offsets[d];
      const size_t n = isWide ? wide[d].size() : offsets[d + 1] - offsets[d];
      uint8_t* dst = low.data() + region[d];
      const uint64_t at = region[d];
      counter.Reset(&distinct[d], low.data());
      if (o.mode == Mode::Qgrams) {
        const size_t pad = im.RegionLength(n) - n;
        std::memset(dst, 0x02, pad / 2);
        if (o.lowercase && !isWide) {
          Lower(src, n, dst + pad / 2);
        } else if (n) {
          std::memcpy(dst + pad / 2, src, n);
        }
        std::memset(dst + pad / 2 + n, 0x03, pad / 2);
        if (isWide)
          im.QgramsUtf8(dst, n + pad, at, starts, counter);
        else
          im.Qgrams(n + pad, at, counter);
      } else if (isWide) {
        std::memcpy(dst, src, n);
        im.WordsUtf8(*uni, dst, n, at, counter);
      } else {
        Lower(src, n, dst);
        if (o.mode == Mode::Code)
          im.Code(src, n, at, masks, counter);
        else
          im.Words(dst, n, at, counter);
      }
      if (isWide) std::vector<uint8_t>().swap(wide[d]);
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
  KeyTable dict;
  dict.Reset(1024);
  auto termAt = [&](uint32_t i, const uint8_t** text) -> const Key& {
    *text = low.data() + terms[i]->off;
    return terms[i]->key;
  };
  size_t k = 0;
  for (size_t d = 0; d < docs; ++d) {
    if (kept(d)) {
      for (const Tok& t : distinct[d]) {
        size_t empty;
        int64_t id = dict.Find(t.key, low.data() + t.off, termAt, &empty);
        if (id < 0) {
          id = int64_t(terms.size());
          dict.Put(empty, t.key.hash, uint32_t(id));
          terms.push_back(&t);
          if (terms.size() * 2 > dict.capacity())
            dict.Rehash(dict.capacity() * 2, terms.size(), [&](size_t i) { return terms[i]->key.hash; });
        }
        out->ids[k] = uint32_t(id);
        out->counts[k] = t.count;
        ++k;
      }
    }
    out->indptr[d + 1] = uint32_t(k);
  }
  size_t termBytes = 0;
  for (const Tok* t : terms) termBytes += t->key.len;
  if (termBytes >= (uint64_t(1) << 32)) ThrowInvalid("a batch's distinct tokens exceed 4 GiB");
  out->termBytes.reserve(termBytes);
  out->termEnds.reserve(terms.size());
  for (const Tok* t : terms) {
    out->termBytes.append(reinterpret_cast<const char*>(low.data() + t->off), t->key.len);
    out->termEnds.push_back(uint32_t(out->termBytes.size()));
  }
}

namespace {
// Rows of the kept documents: keep(d) says which; column(id, &col) maps a
// local term id to its column (false: dropped).
template <typename Keep, typename Column>
void AssembleRowsWith(const uint32_t* indptr, size_t docs, const uint32_t* ids, const uint32_t* counts, size_t pairs,
                      size_t terms, Keep keep, Column column, Rows* out) {
  if (indptr[0] != 0 || indptr[docs] > pairs) ThrowInvalid("indptr must start at 0 and end within ids");
  for (size_t d = 0; d < docs; ++d)
    if (indptr[d + 1] < indptr[d]) ThrowInvalid("indptr must be non-decreasing");
  // Rows are first written at their documents' pair offsets (an upper
  // bound), then packed.
  std::vector<uint32_t> cols(indptr[docs]);
  std::vector<float> vals(indptr[docs]);
  std::vector<uint32_t> len(docs, 0);
  std::vector<uint64_t> kept(docs, 0);
  ParallelFor(docs, 64, [&](size_t b, size_t e) {
    // (column << 32 | count): one integer sort orders a row by column.
    std::vector<uint64_t> row;
    for (size_t d = b; d < e; ++d) {
      if (!keep(d)) continue;
      row.clear();
      for (size_t k = indptr[d]; k < indptr[d + 1]; ++k) {
        if (ids[k] >= terms)
          ThrowInvalid("ids[" + std::to_string(k) + "]=" + std::to_string(ids[k]) + " is out of range for " +
                       std::to_string(terms) + " terms");
        uint32_t col;
        if (!column(ids[k], &col)) continue;
        row.push_back(uint64_t(col) << 32 | counts[k]);
        kept[d] += counts[k];
      }
      std::sort(row.begin(), row.end());
      size_t m = 0;
      const size_t at = indptr[d];
      for (size_t i = 0; i < row.size();) {
        const uint32_t col = uint32_t(row[i] >> 32);
        uint64_t sum = 0;
        size_t j = i;
        for (; j < row.size() && uint32_t(row[j] >> 32) == col; ++j) sum += uint32_t(row[j]);
        cols[at + m] = col;
        vals[at + m] = float(double(sum));
        ++m;
        i = j;
      }
      len[d] = uint32_t(m);
    }
  });
  out->rowPtr.assign(1, 0);
  size_t nnz = 0;
  for (size_t d = 0; d < docs; ++d) {
    if (!keep(d)) continue;
    nnz += len[d];
    out->rowPtr.push_back(uint32_t(nnz));
    out->kept += kept[d];
  }
  out->cols.resize(nnz);
  out->values.resize(nnz);
  std::vector<size_t> dst(docs, 0);
  for (size_t d = 0, r = 0; d < docs; ++d)
    if (keep(d)) dst[d] = out->rowPtr[r++];
  ParallelFor(docs, 256, [&](size_t b, size_t e) {
    for (size_t d = b; d < e; ++d) {
      if (!keep(d) || len[d] == 0) continue;
      std::memcpy(out->cols.data() + dst[d], cols.data() + indptr[d], len[d] * sizeof(uint32_t));
      std::memcpy(out->values.data() + dst[d], vals.data() + indptr[d], len[d] * sizeof(float));
    }
  });
}
}  // namespace

void AssembleRows(const uint32_t* indptr, const uint32_t* tokens, size_t docs, uint32_t minTokens, const uint32_t* ids,
                  const uint32_t* counts, size_t pairs, const int32_t* remap, size_t terms, Rows* out) {
  AssembleRowsWith(
      indptr, docs, ids, counts, pairs, terms, [&](size_t d) { return tokens[d] >= minTokens; },
      [&](uint32_t id, uint32_t* col) {
        if (remap[id] < 0) return false;
        *col = uint32_t(remap[id]);
        return true;
      },
      out);
}

uint32_t HashToken(const char* p, size_t n) {
  // FNV-1a over the token's UTF-16 units, then murmur3's fmix32:
  // lib/text/vocabulary.ts hashToken(). Tokens are UTF-8 as text_unicode.cc
  // writes it (a lone surrogate as its 3-byte form).
  const auto* b = reinterpret_cast<const uint8_t*>(p);
  uint32_t h = 0x811c9dc5u;
  for (size_t i = 0; i < n;) {
    if (b[i] < 0x80) {
      h = (h ^ b[i++]) * 0x01000193u;
      continue;
    }
    // A sequence cut off by the token's end (never in tokens this file
    // makes) reads as U+FFFD instead of past the end.
    const size_t need = b[i] < 0xe0 ? 2 : b[i] < 0xf0 ? 3 : 4;
    uint32_t len = 1, c = 0xfffdu;
    if (i + need <= n) c = NextCodePoint(b + i, &len);
    i += len;
    if (c >= 0x10000) {
      h = (h ^ (0xd800u + ((c - 0x10000) >> 10))) * 0x01000193u;
      h = (h ^ (0xdc00u + (c & 0x3ff))) * 0x01000193u;
    } else {
      h = (h ^ c) * 0x01000193u;
    }
  }
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  return h ^ (h >> 16);
}

void AssembleHashedRows(const Batch& b, uint32_t minTokens, uint32_t mask, Rows* out) {
  const size_t terms = b.termEnds.size();
  std::vector<uint32_t> col(terms);
  ParallelFor(terms, 4096, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) {
      const uint32_t a = i ? b.termEnds[i - 1] : 0;
      col[i] = HashToken(b.termBytes.data() + a, b.termEnds[i] - a) & mask;
    }
  });
  const size_t docs = b.tokens.size();
  AssembleRowsWith(
      b.indptr.data(), docs, b.ids.data(), b.counts.data(), b.ids.size(), terms,
      [&](size_t d) { return b.tokens[d] != kFallback && b.tokens[d] >= minTokens; },
      [&](uint32_t id, uint32_t* c) {
        *c = col[id];
        return true;
      },
      out);
}

}  // namespace text
}  // namespace cusim
