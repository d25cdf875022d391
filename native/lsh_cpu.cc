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
// keyOf(band, i) is rep i's key in that band. Bands are done one after
// another, each on the whole pool (the sort, and the pairs of its runs), so
// every core works however few the bands.
template <class KeyOf>
std::vector<uint64_t> BandPairs(const std::vector<uint32_t>& reps, uint32_t bands, const KeyOf& keyOf) {
  const size_t R = reps.size();
  const size_t chunks = std::max<size_t>(1, std::min<size_t>(NumThreads() * 8, R >> 12));
  std::vector<uint64_t> all;
  std::vector<Keyed> keyed;
  std::vector<size_t> count(chunks + 1);
  for (uint32_t band = 0; band < bands; ++band) {
    SortedKeyed(
        R,
        [&](size_t i, Keyed* k) {
          *k = {keyOf(band, i), reps[i]};
          return true;
        },
        &keyed);
    const std::vector<size_t> cut = RunCuts(keyed, chunks);
    // Pairs per chunk, then written in place after what earlier bands found.
    auto runs = [&](size_t c, auto&& emit) { ForRuns(keyed, cut, c, emit); };
    ParallelFor(chunks, 1, [&](size_t b, size_t e) {
      for (size_t c = b; c < e; ++c) {
        uint64_t m = 0;
        runs(c, [&](size_t s, size_t t) { m += uint64_t(t - s) * (t - s - 1) / 2; });
        count[c + 1] = m;
      }
    });
    count[0] = all.size();
    for (size_t c = 0; c < chunks; ++c) count[c + 1] += count[c];
    all.resize(count[chunks]);
    ParallelFor(chunks, 1, [&](size_t b, size_t e) {
      for (size_t c = b; c < e; ++c) {
        uint64_t* out = all.data() + count[c];
        runs(c, [&](size_t s, size_t t) {
          for (size_t i = s; i < t; ++i)
            for (size_t j = i + 1; j < t; ++j) *out++ = Pack(keyed[i].second, keyed[j].second);
        });
      }
    });
  }
  std::vector<Keyed>().swap(keyed);
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
