// Token hashes on the GPU (native/text.h TokenHasher): chunks of documents
// go up through page-locked staging, the kernels of cuda/text/tokenize.cuh
// split and hash them, and each chunk's hashes come back with 64-bit offsets.
#include <cub/cub.cuh>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../native/text.h"
#include "../native/text_unicode.h"
#include "common/gpu.cuh"
#include "text/tokenize.cuh"

namespace cusim {
namespace text {
namespace {

using dev::kThreads;
using dev::LowerKernel;
using dev::Params;
using dev::TokenKernel;

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
    for (auto* b : {&blocks_, &extra_, &dHashes_}) b->release();
    for (auto* b : {&dOff_, &dCounts_, &dAt_, &dUlen_}) b->release();
    dBytes_.release();
    dTemp_.release();
    dUnits_.release();
    pinned_.release();
    pinnedOff_.release();
  }

  void Hash(const uint8_t* bytes, const uint64_t* offsets, size_t docs, bool wtf8, TokenHashes* out) override {
    std::lock_guard<std::mutex> lock(mu_);  // one call at a time owns the buffers
    gpu::DeviceGuard g(device_);
    out->indptr.assign(1, 0);
    out->hashes.clear();
    // 'words' lowercases whatever options.lowercase says (wordTokens() always does).
    const bool lower = o_.mode == Mode::Words || o_.lowercase;
    const Params pr{o_.mode, o_.minLength, o_.q, lower, o_.pad, o_.dropKeywords, wtf8};
    const dev::Tables t{stage1_.data(), blocks_.data(), extra_.data()};
    for (size_t d0 = 0; d0 < docs;) {
      // Documents [d0, d1): about chunk_ bytes, at least one document.
      size_t d1 = d0 + 1;
      while (d1 < docs && offsets[d1 + 1] - offsets[d0] <= chunk_) ++d1;
      RunChunk(bytes, offsets, d0, d1, pr, t, out);
      d0 = d1;
    }
  }

 private:
  void RunChunk(const uint8_t* bytes, const uint64_t* offsets, size_t d0, size_t d1, const Params& pr,
                const dev::Tables& t, TokenHashes* out) {
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
    gpu::ParallelCopy(pinned_.data(), bytes + base, len);
    for (uint64_t i = 0; i <= n; ++i) pinnedOff_.data()[i] = offsets[d0 + i] - base;
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
    uint64_t total = 0;
    unsigned bad = 0;
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(&total, dAt_.data() + n, 8, cudaMemcpyDeviceToHost, st));
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(&bad, bad_, sizeof(unsigned), cudaMemcpyDeviceToHost, st));
    stream_->sync();
    if (bad) ThrowInvalid("a document's lowercase text outgrew its bytes on the GPU");
    const size_t at0 = out->hashes.size();
    out->hashes.resize(at0 + total);
    if (total) {
      dHashes_.reserve(total, "text token hashes");
      TokenKernel<<<grid, kThreads, 0, st>>>(dBytes_.data(), dOff_.data(), n, dUnits_.data(), dUlen_.data(), t,
                                             stop_.View(), keywords_.View(), pr, nullptr, dAt_.data(), dHashes_.data());
      CUSIM_LAUNCH_CHECK();
      CUSIM_CUDA_CHECK(
          cudaMemcpyAsync(out->hashes.data() + at0, dHashes_.data(), total * 4, cudaMemcpyDeviceToHost, st));
    }
    std::vector<uint64_t> at(n + 1);
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(at.data(), dAt_.data(), (n + 1) * 8, cudaMemcpyDeviceToHost, st));
    stream_->sync();
    for (uint64_t i = 1; i <= n; ++i) out->indptr.push_back(at0 + at[i]);
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
  gpu::DeviceBuffer<uint32_t> dHashes_;
};

}  // namespace

std::unique_ptr<TokenHasher> MakeCudaTokenHasher(const Options& options, int device, uint64_t chunkBytes) {
  return std::make_unique<CudaTokenHasher>(options, device, chunkBytes);
}

}  // namespace text
}  // namespace cusim
