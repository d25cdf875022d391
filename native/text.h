// Native tokenization for the text featurizers (lib/text/tokenize.ts). The
// JavaScript tokenizers stay the definition: this engine reproduces them token
// for token where that is exact, and says so per document where it is not, so
// the caller tokenizes those documents in JavaScript instead.
//
// Exactness: 'code' mode only ever looks at ASCII bytes (every other UTF-16
// unit is a separator there, and so is every byte of a multi-byte UTF-8
// sequence), so it handles every document. 'words' and 'qgrams' handle every
// document once the Unicode tables are installed (text_unicode.h); before
// that, a document with any byte >= 0x80 comes back as kFallback.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cusim {
namespace text {

enum class Mode : uint8_t { Code, Words, Qgrams };

struct Options {
  Mode mode = Mode::Words;
  // 'code' and 'words': shortest token kept, in characters.
  uint32_t minLength = 1;
  // 'code': identifiers dropped whole when 2–12 characters long (the JS rule).
  bool dropKeywords = true;
  std::vector<std::string> keywords;
  // 'words': dropped words (already lowercased by the caller).
  std::vector<std::string> stopWords;
  // 'qgrams'.
  uint32_t q = 3;
  bool lowercase = true;
  bool pad = false;
};

// tokens[d] for a document the caller must tokenize itself.
inline constexpr uint32_t kFallback = 0xffffffffu;

// One batch, counted against a batch-local dictionary. Only documents with at
// least minTokens tokens (and not kFallback) contribute pairs and terms, so
// the dictionary's first-occurrence order is the order in which a sequential
// pass over the kept documents would meet new tokens.
struct Batch {
  std::string termBytes;           // distinct tokens, concatenated in first-occurrence order
  std::vector<uint32_t> termEnds;  // end of term i in termBytes
  std::vector<uint32_t> tokens;    // per document: tokens before any vocabulary filter, or kFallback
  std::vector<uint32_t> indptr;    // documents + 1: document d's pairs are [indptr[d], indptr[d+1])
  std::vector<uint32_t> ids;       // local term id, in first-occurrence order within the document
  std::vector<uint32_t> counts;    // occurrences of that term in the document
};

// A counted batch's kept documents as rows of a vocabulary: remap[id] is the
// column of local term id (-1: dropped by a frozen vocabulary). Each row has
// its distinct columns ascending, equal columns (hash collisions) summed in
// integers and rounded to float32 once: TextFeaturizer's appendRow().
struct Rows {
  std::vector<uint32_t> rowPtr;  // kept rows + 1
  std::vector<uint32_t> cols;
  std::vector<float> values;
  uint64_t kept = 0;  // token occurrences with a column
};

// Throws if an id is out of range for remap (terms entries) or indptr is not
// monotone within pairs; multi-threaded over documents.
void AssembleRows(const uint32_t* indptr, const uint32_t* tokens, size_t docs, uint32_t minTokens, const uint32_t* ids,
                  const uint32_t* counts, size_t pairs, const int32_t* remap, size_t terms, Rows* out);

// lib/text/vocabulary.ts hashToken() of a token in UTF-8 (hashed as UTF-16 units).
uint32_t HashToken(const char* p, size_t n);

// A counted batch's documents with at least minTokens tokens (kFallback ones
// left out) as rows over columns HashToken(term) & mask: feature hashing with
// no vocabulary, every step multi-threaded.
void AssembleHashedRows(const Batch& b, uint32_t minTokens, uint32_t mask, Rows* out);

class Tokenizer {
 public:
  explicit Tokenizer(const Options& options);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  const Options& options() const;

  // Documents are bytes[offsets[d], offsets[d+1]) in UTF-8, decoded as
  // JavaScript's decoders do (invalid bytes become U+FFFD); wtf8: the bytes
  // encode JavaScript strings, lone surrogates as ED A0-BF xx (text_unicode.h).
  // Multi-threaded over documents (ParallelFor); the dictionary is merged in
  // document order.
  void Run(const uint8_t* bytes, const uint32_t* offsets, size_t docs, uint32_t minTokens, Batch* out,
           bool wtf8 = false) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---- token hashes per document ----
// Token hashes per document: what classic MinHash reads. For each document,
// the multiset of lib/text/vocabulary.ts hashToken(token) over the tokens the
// JavaScript tokenizers give (repeats kept; the order is the backend's). The
// CPU backend is text_cpu.cc's Tokenizer; the CUDA backend
// (cuda/text.cu) splits and hashes on the device to the same
// hashes, bit for bit, in all three modes, ASCII or not.
struct TokenHashes {
  std::vector<uint64_t> indptr;  // documents + 1: document d's hashes are [indptr[d], indptr[d+1])
  std::vector<uint32_t> hashes;
  // With a Sketch: per document, its band keys (documents × bands, row-major)
  // and whether its signature is empty (no token).
  std::vector<uint64_t> keys;
  std::vector<uint8_t> empty;
};

// Classic MinHash band keys of each document's set of token hashes, made by
// the hasher where the hashes are (on the GPU: no round trip of the hashes or
// of a signature): the signature of samples a.size() (minhash::UniversalHash
// under the permutations (a[s], b[s]), the minimum over the document's
// hashes; repeats do not change it) cut into `bands` bands of `rows` samples,
// each hashed by lsh::BandKey. Equal, bit for bit, to hashing the document's
// row (its distinct hashes) with classic MinHash and taking lshBandKeys of
// the signature: what a dedup keeps of a row.
struct Sketch {
  std::vector<uint64_t> a, b;
  uint32_t bands = 0, rows = 0;
  uint32_t samples() const { return uint32_t(a.size()); }
};

// The sketch of documents [0, docs) of `h` on the CPU, into h->keys and h->empty.
void SketchCpu(const Sketch& s, TokenHashes* h);

class TokenHasher {
 public:
  virtual ~TokenHasher() = default;
  // Documents are bytes[offsets[d], offsets[d+1]) in UTF-8 (wtf8: see
  // Tokenizer::Run). 'words' and 'qgrams' need the Unicode tables installed
  // (text_unicode.h) when any byte is >= 0x80. sorted: each document's
  // hashes ascending (a set's reader then only drops repeats; the GPU sorts
  // them where they already are).
  // With a `sketch`, out->keys and out->empty too.
  virtual void Hash(const uint8_t* bytes, const uint64_t* offsets, size_t docs, bool wtf8, bool sorted,
                    TokenHashes* out, const Sketch* sketch = nullptr) = 0;
};

std::unique_ptr<TokenHasher> MakeCpuTokenHasher(const Options& options);
// One device; documents go up in page-locked chunks of about chunkBytes (a
// longer document is a chunk by itself). Throws for 'words'/'qgrams' when
// the Unicode tables are not installed.
std::unique_ptr<TokenHasher> MakeCudaTokenHasher(const Options& options, int device, uint64_t chunkBytes);

}  // namespace text
}  // namespace cusim
