// LSH bucketing on the CPU: per band, the band keys of every representative
// row sorted with the rows, and every pair within a run of equal keys.
#include <algorithm>
#include <memory>
#include <vector>

#include "lsh.h"
#include "parallel.h"

namespace cusim {
namespace lsh {
namespace {

// Every pair of reps sharing a key in some band, unique and ascending;
// keyOf(band, i) is rep i's key in that band.
template <class KeyOf>
std::vector<uint64_t> BandPairs(const std::vector<uint32_t>& reps, uint32_t bands, const KeyOf& keyOf) {
  const size_t R = reps.size();
  std::vector<std::vector<uint64_t>> perBand(bands);
  ParallelFor(bands, 1, [&](size_t b, size_t e) {
    std::vector<Keyed> keyed(R), tmp;
    for (size_t band = b; band < e; ++band) {
      for (size_t i = 0; i < R; ++i) keyed[i] = {keyOf(band, i), reps[i]};
      SortKeyed(keyed, tmp);
      auto& out = perBand[band];
      for (size_t s = 0; s < keyed.size();) {
        size_t t = s + 1;
        while (t < keyed.size() && keyed[t].first == keyed[s].first) ++t;
        for (size_t i = s; i < t; ++i)
          for (size_t j = i + 1; j < t; ++j) out.push_back(Pack(keyed[i].second, keyed[j].second));
        s = t;
      }
    }
  });
  std::vector<size_t> off(bands + 1, 0);
  for (uint32_t b = 0; b < bands; ++b) off[b + 1] = off[b] + perBand[b].size();
  std::vector<uint64_t> all(off.back());
  ParallelFor(bands, 1, [&](size_t b, size_t e) {
    for (size_t band = b; band < e; ++band) {
      std::copy(perBand[band].begin(), perBand[band].end(), all.begin() + off[band]);
      std::vector<uint64_t>().swap(perBand[band]);
    }
  });
  SortUnique(all, reps.empty() ? 0 : reps.back());
  return all;
}

class CpuBucketer final : public Bucketer {
 public:
  std::vector<uint64_t> RepPairs(const SigView& sig, const std::vector<uint32_t>& reps, const Params& p,
                                 std::vector<float>* estimate, Timing*) const override {
    // All band keys of a row in one pass over it (rows are long, bands short),
    // band-major so each band's table is then built from contiguous keys.
    const size_t R = reps.size();
    std::vector<uint64_t> keys(R * p.bands);
    ParallelFor(R, 2048, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i)
        for (uint32_t band = 0; band < p.bands; ++band)
          keys[band * R + i] = BandKey(sig.row(reps[i]), band, p.rows, sig.width);
    });
    std::vector<uint64_t> all = BandPairs(reps, p.bands, [&](size_t band, size_t i) { return keys[band * R + i]; });
    std::vector<uint64_t>().swap(keys);
    if (estimate) *estimate = EstimatePairs(sig, all);
    return all;
  }

  std::vector<uint64_t> RepPairsFromKeys(const KeyView& keys, const std::vector<uint32_t>& reps,
                                         Timing*) const override {
    return BandPairs(reps, keys.bands, [&](size_t band, size_t i) { return keys.row(reps[i])[band]; });
  }
};

}  // namespace

std::unique_ptr<Bucketer> MakeCpuBucketer() { return std::make_unique<CpuBucketer>(); }

}  // namespace lsh
}  // namespace cusim
