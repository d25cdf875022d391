// The CPU token hasher (text_hash.h): the tokenizer's batch, each distinct
// token hashed once and repeated by its count.
#include <algorithm>
#include <string>

#include "classic_minhash.h"
#include "common.h"
#include "lsh.h"
#include "parallel.h"
#include "text.h"
#include "text_unicode.h"

namespace cusim {
namespace text {
namespace {

class CpuTokenHasher : public TokenHasher {
 public:
  explicit CpuTokenHasher(const Options& o) : tok_(o) {}
  void Hash(const uint8_t* bytes, const uint64_t* offsets, size_t docs, bool wtf8, bool sorted, TokenHashes* out,
            const Sketch* sketch) override {
    // The tokenizer takes 32-bit offsets: a document set over 4 GiB goes in parts.
    out->indptr.assign(1, 0);
    out->hashes.clear();
    std::vector<uint32_t> local;
    for (size_t d0 = 0; d0 < docs;) {
      size_t d1 = d0 + 1;
      while (d1 < docs && offsets[d1 + 1] - offsets[d0] < (uint64_t(1) << 32)) ++d1;
      if (offsets[d0 + 1] - offsets[d0] >= (uint64_t(1) << 32)) ThrowInvalid("a document is over 4 GiB");
      local.resize(d1 - d0 + 1);
      for (size_t d = d0; d <= d1; ++d) local[d - d0] = uint32_t(offsets[d] - offsets[d0]);
      Batch b;
      tok_.Run(bytes + offsets[d0], local.data(), d1 - d0, 0, &b, wtf8);
      std::vector<uint32_t> termHash(b.termEnds.size());
      for (size_t i = 0; i < termHash.size(); ++i) {
        const uint32_t a = i ? b.termEnds[i - 1] : 0;
        termHash[i] = HashToken(b.termBytes.data() + a, b.termEnds[i] - a);
      }
      for (size_t d = 0; d < d1 - d0; ++d) {
        if (b.tokens[d] == kFallback) ThrowInvalid("the Unicode tables are not installed");
        const size_t at = out->hashes.size();
        for (uint32_t k = b.indptr[d]; k < b.indptr[d + 1]; ++k)
          out->hashes.insert(out->hashes.end(), b.counts[k], termHash[b.ids[k]]);
        if (sorted) std::sort(out->hashes.begin() + at, out->hashes.end());
        out->indptr.push_back(out->hashes.size());
      }
      d0 = d1;
    }
    if (sketch) SketchCpu(*sketch, out);
  }

 private:
  Tokenizer tok_;
};

}  // namespace

void SketchCpu(const Sketch& s, TokenHashes* h) {
  const size_t docs = h->indptr.size() - 1;
  const uint32_t samples = s.samples();
  if (s.b.size() != samples || s.bands == 0 || s.rows == 0 || uint64_t(s.bands) * s.rows > samples)
    ThrowInvalid("a sketch needs bands × rows <= samples and one b per a");
  h->keys.resize(docs * s.bands);
  h->empty.resize(docs);
  ParallelFor(docs, 256, [&](size_t lo, size_t hi) {
    std::vector<uint32_t> sig(samples);
    for (size_t d = lo; d < hi; ++d) {
      std::fill(sig.begin(), sig.end(), minhash::kMaxHash);
      for (uint64_t k = h->indptr[d]; k < h->indptr[d + 1]; ++k)
        for (uint32_t j = 0; j < samples; ++j)
          sig[j] = std::min(sig[j], minhash::UniversalHash(s.a[j], s.b[j], h->hashes[k]));
      for (uint32_t band = 0; band < s.bands; ++band)
        h->keys[d * s.bands + band] = lsh::BandKey(sig.data(), band, s.rows, 1);
      h->empty[d] = lsh::IsEmptyRow(sig.data(), samples, 1);
    }
  });
}

std::unique_ptr<TokenHasher> MakeCpuTokenHasher(const Options& options) {
  return std::make_unique<CpuTokenHasher>(options);
}

}  // namespace text
}  // namespace cusim
