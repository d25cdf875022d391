// Token hashes on the GPU (native/text.h TokenHasher): chunks of documents
// go up through page-locked staging, the kernels below split and hash them,
// and each chunk's hashes come back with 64-bit offsets.
#include <cub/cub.cuh>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../native/classic_minhash.h"
#include "../native/lsh.h"
#include "../native/phase_log.h"
#include "../native/text.h"
#include "../native/text_unicode.h"
#include "common/gpu.cuh"

// Device code shared by the text kernels: the Unicode tables
// (native/text_unicode.h layout), UTF-8 decoding as TextDecoder does, and
// lib/text/vocabulary.ts hashToken() over UTF-16 units or ASCII bytes.

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

// The kernels: one thread
// per document. 'words' and 'qgrams' first decode and lowercase each document
// into UTF-16 units (LowerKernel; String.prototype.toLowerCase with
// Final_Sigma, from the tables JavaScript built), so that the split and the
// hash then read the same units the JavaScript tokenizers read. 'code' reads
// the bytes, as the CPU does (only ASCII ever forms a token there). Each
// document is split twice: once to count its tokens, once, after a scan, to
// write their hashes. Every offset is 64-bit.

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

namespace cusim {
namespace text {
namespace {

using dev::kThreads;
using dev::LowerKernel;
using dev::Params;
using dev::TokenKernel;

// Classic MinHash of each document's token hashes (text.h Sketch): one warp
// per document, lanes over samples (kSketchPer per lane per pass, their (a, b)
// in registers), the document's hashes read 32 at a time and broadcast by
// shuffle. Repeats leave a minimum as it is, so the unsorted hashes do too.
// Exact integer arithmetic (minhash::UniversalHash): the CPU's bit for bit.
constexpr int kSketchPer = 4;

__global__ void SketchKernel(const uint32_t* __restrict__ hashes, const uint64_t* __restrict__ at, uint64_t docs,
                             const ulonglong2* __restrict__ ab, uint32_t samples, uint32_t* __restrict__ sig) {
  const uint64_t w = (uint64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (w >= docs) return;  // uniform per warp
  const unsigned lane = threadIdx.x & 31;
  const uint64_t begin = at[w], end = at[w + 1];
  for (uint32_t s0 = 0; s0 < samples; s0 += 32 * kSketchPer) {
    uint64_t a[kSketchPer], b[kSketchPer];
    uint32_t best[kSketchPer];
#pragma unroll
    for (int q = 0; q < kSketchPer; ++q) {
      const uint32_t s = s0 + q * 32 + lane;
      const ulonglong2 p = s < samples ? ab[s] : make_ulonglong2(1, 0);
      a[q] = p.x, b[q] = p.y, best[q] = minhash::kMaxHash;
    }
    for (uint64_t base = begin; base < end; base += 32) {
      const uint32_t n = end - base < 32 ? uint32_t(end - base) : 32u;
      const uint32_t tok = lane < n ? hashes[base + lane] : 0;
      for (uint32_t j = 0; j < n; ++j) {
        const uint32_t h = __shfl_sync(0xffffffffu, tok, j);
#pragma unroll
        for (int q = 0; q < kSketchPer; ++q) best[q] = min(best[q], minhash::UniversalHash(a[q], b[q], h));
      }
    }
#pragma unroll
    for (int q = 0; q < kSketchPer; ++q) {
      const uint32_t s = s0 + q * 32 + lane;
      if (s < samples) sig[w * samples + s] = best[q];
    }
  }
}

// Each document's band keys (lsh::BandKey, as lshBandKeys makes them) and
// whether its signature is empty: one thread per document.
__global__ void BandKeysKernel(const uint32_t* __restrict__ sig, uint64_t docs, uint32_t samples, uint32_t bands,
                               uint32_t rows, uint64_t* __restrict__ keys, uint8_t* __restrict__ empty) {
  const uint64_t d = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= docs) return;
  const uint32_t* row = sig + d * samples;
  for (uint32_t band = 0; band < bands; ++band) keys[d * bands + band] = lsh::BandKey(row, band, rows, 1);
  bool none = true;
  for (uint32_t s = 0; s < samples && none; ++s) none = row[s] == lsh::kSentinel;
  empty[d] = none;
}

template <typename Unit>
struct HostList {
  std::vector<uint32_t> hash;
  std::vector<uint64_t> off{0};
  std::vector<Unit> text;
  gpu::DeviceBuffer<uint32_t> dHash;
  gpu::DeviceBuffer<uint64_t> dOff;
  gpu::DeviceBuffer<Unit> dText;

  // Words as unit strings, sorted by hash, uploaded.
  void Build(std::vector<std::pair<uint32_t, std::vector<Unit>>> words, const char* what) {
    std::sort(words.begin(), words.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& w : words) {
      hash.push_back(w.first);
      text.insert(text.end(), w.second.begin(), w.second.end());
      off.push_back(text.size());
    }
    if (hash.empty()) return;
    dHash.reset(hash.size(), what);
    dOff.reset(off.size(), what);
    dText.reset(std::max<size_t>(text.size(), 1), what);
    CUSIM_CUDA_CHECK(cudaMemcpy(dHash.data(), hash.data(), hash.size() * 4, cudaMemcpyHostToDevice));
    CUSIM_CUDA_CHECK(cudaMemcpy(dOff.data(), off.data(), off.size() * 8, cudaMemcpyHostToDevice));
    if (!text.empty())
      CUSIM_CUDA_CHECK(cudaMemcpy(dText.data(), text.data(), text.size() * sizeof(Unit), cudaMemcpyHostToDevice));
  }
  dev::WordList<Unit> View() const { return {dHash.data(), dOff.data(), dText.data(), uint32_t(hash.size())}; }
};

uint32_t HashOf(const std::vector<uint16_t>& u) {
  uint32_t h = 0x811c9dc5u;
  for (uint16_t x : u) h = (h ^ x) * 0x01000193u;
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  return h ^ (h >> 16);
}

std::vector<uint16_t> Utf16Of(const std::string& s) {
  std::vector<uint32_t> cps;
  DecodeUtf8(reinterpret_cast<const uint8_t*>(s.data()), s.size(), true, &cps);
  std::vector<uint16_t> u;
  for (uint32_t c : cps) {
    if (c >= 0x10000) {
      u.push_back(uint16_t(0xd800 + ((c - 0x10000) >> 10)));
      u.push_back(uint16_t(0xdc00 + (c & 0x3ff)));
    } else {
      u.push_back(uint16_t(c));
    }
  }
  return u;
}

uint32_t Utf8Length(uint32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }

class CudaTokenHasher : public TokenHasher {
 public:
  CudaTokenHasher(const Options& o, int device, uint64_t chunkBytes)
      : o_(o), device_(device), chunk_(std::max<uint64_t>(chunkBytes, 1 << 16)) {
    if (o.q < 1 || o.minLength < 1) ThrowInvalid("q and minLength must be at least 1");
    gpu::DeviceGuard g(device_);
    if (o.mode != Mode::Code) {
      const UnicodeTables* t = CurrentUnicodeTables();
      if (!t) ThrowInvalid("the Unicode tables are not installed (lib/text/unicode-tables.ts)");
      // LowerKernel writes a document's units where its bytes are: every
      // code point must lower to no more UTF-16 units than its UTF-8 bytes.
      for (uint32_t c = 0; c < kUniCodePoints; ++c) {
        const uint32_t e = t->Entry(c);
        uint32_t units = 0;
        if (e & kUniContext) {
          if (c != kCapitalSigma) ThrowInvalid("the Unicode tables have a context rule the GPU tokenizer lacks");
          units = 1;
        } else if (e & kUniMulti) {
          const uint32_t x = e & kUniDelta;
          for (uint32_t k = 1; k <= t->extra[x]; ++k) units += t->extra[x + k] >= 0x10000 ? 2 : 1;
        } else {
          units = ((c + (e & kUniDelta)) & kUniDelta) >= 0x10000 ? 2 : 1;
        }
        if (units > Utf8Length(c)) ThrowInvalid("a lowercase mapping is longer in UTF-16 than its UTF-8 source");
      }
      stage1_.reset(t->stage1.size(), "unicode tables");
      blocks_.reset(t->blocks.size(), "unicode tables");
      extra_.reset(std::max<size_t>(t->extra.size(), 1), "unicode tables");
      CUSIM_CUDA_CHECK(cudaMemcpy(stage1_.data(), t->stage1.data(), t->stage1.size() * 2, cudaMemcpyHostToDevice));
      CUSIM_CUDA_CHECK(cudaMemcpy(blocks_.data(), t->blocks.data(), t->blocks.size() * 4, cudaMemcpyHostToDevice));
      if (!t->extra.empty())
        CUSIM_CUDA_CHECK(cudaMemcpy(extra_.data(), t->extra.data(), t->extra.size() * 4, cudaMemcpyHostToDevice));
    }
    std::vector<std::pair<uint32_t, std::vector<uint16_t>>> stop;
    for (const auto& w : o.stopWords) {
      auto u = Utf16Of(w);
      stop.emplace_back(HashOf(u), std::move(u));
    }
    stop_.Build(std::move(stop), "stop words");
    std::vector<std::pair<uint32_t, std::vector<uint8_t>>> kw;
    for (const auto& w : o.keywords) {
      std::vector<uint16_t> asUnits(w.begin(), w.end());  // bytes hashed as units, as Code() does
      for (auto& x : asUnits) x = uint8_t(x);
      kw.emplace_back(HashOf(asUnits), std::vector<uint8_t>(w.begin(), w.end()));
    }
    keywords_.Build(std::move(kw), "keywords");
    CUSIM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&bad_), sizeof(unsigned)));
    stream_ = std::make_unique<gpu::Stream>();  // on device_ (the guard above)
  }
  ~CudaTokenHasher() override {
    // Everything freed on its own device.
    gpu::DeviceGuard g(device_);
    stream_.reset();
    if (bad_) cudaFree(bad_);
    stop_ = HostList<uint16_t>();
    keywords_ = HostList<uint8_t>();
    stage1_.release();
    for (auto* b : {&blocks_, &extra_, &dHashes_, &dSorted_, &dSig_}) b->release();
    dKeys_.release();
    dEmpty_.release();
    dAb_.release();
    for (auto* b : {&dOff_, &dCounts_, &dAt_, &dUlen_}) b->release();
    dBytes_.release();
    dTemp_.release();
    dUnits_.release();
    pinned_.release();
    pinnedOff_.release();
    small_.release();
    hostAt_.release();
    hostKeys_.release();
    hostHashes_.release();
    hostEmpty_.release();
  }

  void Hash(const uint8_t* bytes, const uint64_t* offsets, size_t docs, bool wtf8, bool sorted, TokenHashes* out,
            const Sketch* sketch) override {
    std::lock_guard<std::mutex> lock(mu_);  // one call at a time owns the buffers
    gpu::DeviceGuard g(device_);
    out->indptr.assign(1, 0);
    out->hashes.clear();
    out->keys.clear();
    out->empty.clear();
    if (sketch) UploadSketch(*sketch);
    // 'words' lowercases whatever options.lowercase says (wordTokens() always does).
    const bool lower = o_.mode == Mode::Words || o_.lowercase;
    const Params pr{o_.mode, o_.minLength, o_.q, lower, o_.pad, o_.dropKeywords, wtf8};
    const dev::Tables t{stage1_.data(), blocks_.data(), extra_.data()};
    for (size_t d0 = 0; d0 < docs;) {
      // Documents [d0, d1): about chunk_ bytes, at least one document.
      size_t d1 = d0 + 1;
      while (d1 < docs && offsets[d1 + 1] - offsets[d0] <= chunk_) ++d1;
      RunChunk(bytes, offsets, d0, d1, pr, t, sorted, sketch, out);
      d0 = d1;
    }
  }

 private:
  // The sketch's permutations on the device, uploaded when they change (a
  // dedup passes the same ones with every block).
  void UploadSketch(const Sketch& sk) {
    const uint32_t samples = sk.samples();
    if (sk.b.size() != samples || sk.bands == 0 || sk.rows == 0 || uint64_t(sk.bands) * sk.rows > samples)
      ThrowInvalid("a sketch needs bands × rows <= samples and one b per a");
    if (sk.a == sketchA_ && sk.b == sketchB_) return;
    std::vector<ulonglong2> ab(samples);
    for (uint32_t i = 0; i < samples; ++i) ab[i] = make_ulonglong2(sk.a[i], sk.b[i]);
    dAb_.reserve(std::max<uint32_t>(samples, 1), "sketch permutations");
    CUSIM_CUDA_CHECK(cudaMemcpy(dAb_.data(), ab.data(), samples * sizeof(ulonglong2), cudaMemcpyHostToDevice));
    sketchA_ = sk.a;
    sketchB_ = sk.b;
  }

  void RunChunk(const uint8_t* bytes, const uint64_t* offsets, size_t d0, size_t d1, const Params& pr,
                const dev::Tables& t, bool sorted, const Sketch* sketch, TokenHashes* out) {
    const uint64_t n = d1 - d0, base = offsets[d0], len = offsets[d1] - base;
    const uint64_t cap = std::max<uint64_t>(len, 1);
    pinned_.reserve(cap, "text chunk staging");
    pinnedOff_.reserve(n + 1, "text chunk staging");
    dBytes_.reserve(cap, "text chunk");
    dOff_.reserve(n + 1, "text chunk offsets");
    dCounts_.reserve(n + 1, "text token counts");
    dAt_.reserve(n + 1, "text token offsets");
    if (pr.mode != Mode::Code) {
      dUnits_.reserve(cap, "text units");
      dUlen_.reserve(n, "text units");
    }
    // CUSIM_PROFILE=1: the host copy, the counting round trip, and the rest.
    PhaseLog log("text hasher chunk");
    gpu::ParallelCopy(pinned_.data(), bytes + base, len);
    for (uint64_t i = 0; i <= n; ++i) pinnedOff_.data()[i] = offsets[d0 + i] - base;
    log.Mark("stage");
    cudaStream_t st = stream_->get();
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(dBytes_.data(), pinned_.data(), len, cudaMemcpyHostToDevice, st));
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(dOff_.data(), pinnedOff_.data(), (n + 1) * 8, cudaMemcpyHostToDevice, st));
    CUSIM_CUDA_CHECK(cudaMemsetAsync(bad_, 0, sizeof(unsigned), st));
    const unsigned grid = gpu::GridFor(n, kThreads, 0x7fffffffu);
    if (pr.mode != Mode::Code) {
      LowerKernel<<<grid, kThreads, 0, st>>>(dBytes_.data(), dOff_.data(), n, t, pr, dUnits_.data(), dUlen_.data(),
                                             bad_);
      CUSIM_LAUNCH_CHECK();
    }
    // Count, scan (the entry after the last document is 0, so at[n] is the total), write.
    CUSIM_CUDA_CHECK(cudaMemsetAsync(dCounts_.data() + n, 0, 8, st));
    TokenKernel<<<grid, kThreads, 0, st>>>(dBytes_.data(), dOff_.data(), n, dUnits_.data(), dUlen_.data(), t,
                                           stop_.View(), keywords_.View(), pr, dCounts_.data(), nullptr, nullptr);
    CUSIM_LAUNCH_CHECK();
    size_t tempBytes = 0;
    CUSIM_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, tempBytes, dCounts_.data(), dAt_.data(), n + 1, st));
    dTemp_.reserve(std::max<size_t>(tempBytes, 1), "text scan");
    CUSIM_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(dTemp_.data(), tempBytes, dCounts_.data(), dAt_.data(), n + 1, st));
    // Every download lands in page-locked memory: a copy to pageable memory
    // is staged by the driver on the calling thread, and with a few hashers
    // per GPU those copies, not the kernels, set a 10M job's pace.
    small_.reserve(2, "text chunk counts");
    small_.data()[1] = 0;  // the 4-byte flag lands in the low half
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(small_.data(), dAt_.data() + n, 8, cudaMemcpyDeviceToHost, st));
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(small_.data() + 1, bad_, sizeof(unsigned), cudaMemcpyDeviceToHost, st));
    stream_->sync();
    log.Mark("count");
    const uint64_t total = small_.data()[0];
    if (uint32_t(small_.data()[1])) ThrowInvalid("a document's lowercase text outgrew its bytes on the GPU");
    const size_t at0 = out->hashes.size();
    const uint32_t* back = nullptr;
    if (total) {
      dHashes_.reserve(total, "text token hashes");
      TokenKernel<<<grid, kThreads, 0, st>>>(dBytes_.data(), dOff_.data(), n, dUnits_.data(), dUlen_.data(), t,
                                             stop_.View(), keywords_.View(), pr, nullptr, dAt_.data(), dHashes_.data());
      CUSIM_LAUNCH_CHECK();
      back = dHashes_.data();
      if (sorted) {
        // Each document's hashes ascending, segment by segment, before they come back.
        dSorted_.reserve(total, "text token hashes, sorted");
        size_t sortBytes = 0;
        CUSIM_CUDA_CHECK(cub::DeviceSegmentedSort::SortKeys(nullptr, sortBytes, dHashes_.data(), dSorted_.data(),
                                                            int64_t(total), int64_t(n), dAt_.data(), dAt_.data() + 1,
                                                            st));
        dTemp_.reserve(std::max<size_t>(sortBytes, 1), "text sort");
        CUSIM_CUDA_CHECK(cub::DeviceSegmentedSort::SortKeys(dTemp_.data(), sortBytes, dHashes_.data(), dSorted_.data(),
                                                            int64_t(total), int64_t(n), dAt_.data(), dAt_.data() + 1,
                                                            st));
        back = dSorted_.data();
      }
      Grow(hostHashes_, total, "text token hashes, host");
      CUSIM_CUDA_CHECK(cudaMemcpyAsync(hostHashes_.data(), back, total * 4, cudaMemcpyDeviceToHost, st));
    }
    if (sketch) {
      // The band keys made here, from the hashes where they are.
      const uint32_t samples = sketch->samples(), bands = sketch->bands;
      dSig_.reserve(std::max<uint64_t>(n * samples, 1), "sketch signatures");
      dKeys_.reserve(std::max<uint64_t>(n * bands, 1), "sketch band keys");
      dEmpty_.reserve(std::max<uint64_t>(n, 1), "sketch empty rows");
      SketchKernel<<<gpu::GridFor(n * 32, kThreads, 0x7fffffffu), kThreads, 0, st>>>(back, dAt_.data(), n, dAb_.data(),
                                                                                     samples, dSig_.data());
      CUSIM_LAUNCH_CHECK();
      BandKeysKernel<<<grid, kThreads, 0, st>>>(dSig_.data(), n, samples, bands, sketch->rows, dKeys_.data(),
                                                dEmpty_.data());
      CUSIM_LAUNCH_CHECK();
      Grow(hostKeys_, n * bands, "sketch band keys, host");
      Grow(hostEmpty_, n, "sketch empty rows, host");
      CUSIM_CUDA_CHECK(cudaMemcpyAsync(hostKeys_.data(), dKeys_.data(), n * bands * 8, cudaMemcpyDeviceToHost, st));
      CUSIM_CUDA_CHECK(cudaMemcpyAsync(hostEmpty_.data(), dEmpty_.data(), n, cudaMemcpyDeviceToHost, st));
    }
    Grow(hostAt_, n + 1, "text token offsets, host");
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(hostAt_.data(), dAt_.data(), (n + 1) * 8, cudaMemcpyDeviceToHost, st));
    log.Mark("queue");
    stream_->sync();
    log.Mark("hash, sort, sketch, download");
    out->hashes.insert(out->hashes.end(), hostHashes_.data(), hostHashes_.data() + total);
    if (sketch) {
      out->keys.insert(out->keys.end(), hostKeys_.data(), hostKeys_.data() + n * sketch->bands);
      out->empty.insert(out->empty.end(), hostEmpty_.data(), hostEmpty_.data() + n);
    }
    const uint64_t* at = hostAt_.data();
    for (uint64_t i = 1; i <= n; ++i) out->indptr.push_back(at0 + at[i]);
    log.Mark("copy out");
  }

  // Page-locked room for at least n, with a quarter to spare: chunks vary a
  // little in size, and page-locking anew costs milliseconds.
  template <typename T>
  static void Grow(gpu::PinnedBuffer<T>& b, uint64_t n, const char* what) {
    if (n > b.size()) b.reserve(std::max<uint64_t>(n + n / 4, 1), what);
  }

  std::mutex mu_;
  Options o_;
  int device_;
  uint64_t chunk_;
  gpu::DeviceBuffer<uint16_t> stage1_;
  gpu::DeviceBuffer<uint32_t> blocks_, extra_;
  HostList<uint16_t> stop_;
  HostList<uint8_t> keywords_;
  unsigned* bad_ = nullptr;
  std::unique_ptr<gpu::Stream> stream_;
  gpu::PinnedBuffer<uint8_t> pinned_;
  gpu::PinnedBuffer<uint64_t> pinnedOff_;
  gpu::DeviceBuffer<uint8_t> dBytes_;
  gpu::DeviceBuffer<uint64_t> dOff_, dCounts_, dAt_, dUlen_;
  gpu::DeviceBuffer<uint16_t> dUnits_;
  gpu::DeviceBuffer<uint8_t> dTemp_;
  gpu::DeviceBuffer<uint32_t> dHashes_, dSorted_;
  // Sketch: permutations, signatures, band keys and empty flags of a chunk.
  gpu::DeviceBuffer<ulonglong2> dAb_;
  gpu::DeviceBuffer<uint32_t> dSig_;
  gpu::DeviceBuffer<uint64_t> dKeys_;
  gpu::DeviceBuffer<uint8_t> dEmpty_;
  std::vector<uint64_t> sketchA_, sketchB_;
  // Downloads (see RunChunk): the count and flag, then the chunk's results.
  gpu::PinnedBuffer<uint64_t> small_, hostAt_, hostKeys_;
  gpu::PinnedBuffer<uint32_t> hostHashes_;
  gpu::PinnedBuffer<uint8_t> hostEmpty_;
};

}  // namespace

std::unique_ptr<TokenHasher> MakeCudaTokenHasher(const Options& options, int device, uint64_t chunkBytes) {
  return std::make_unique<CudaTokenHasher>(options, device, chunkBytes);
}

}  // namespace text
}  // namespace cusim
