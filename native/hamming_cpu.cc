#include <algorithm>
#include <cstring>

#include "hamming.h"
#include "parallel.h"
#include "philox.h"

// The addon is built for baseline x86-64, where __builtin_popcountll is a
// library call; the hot loops get a POPCNT clone chosen at load time.
#if defined(__x86_64__) && defined(__linux__)
#define CUSIM_POPCNT_CLONES __attribute__((target_clones("popcnt", "default")))
#else
#define CUSIM_POPCNT_CLONES
#endif

namespace cusim {
namespace hamming {

std::vector<uint32_t> DrawPositions(uint32_t bits, uint32_t tables, uint32_t keyBits, uint64_t seed) {
  std::vector<uint32_t> pos(size_t(tables) * keyBits);
  for (uint32_t t = 0; t < tables; ++t) {
    Philox rng(seed, t, 0);
    for (uint32_t j = 0; j < keyBits; ++j) {
      // Rejection keeps the positions of one table distinct, so a key has keyBits real bits.
      for (;;) {
        uint32_t p = rng.Next() % bits;
        bool dup = false;
        for (uint32_t i = 0; i < j; ++i) dup |= pos[size_t(t) * keyBits + i] == p;
        if (!dup) {
          pos[size_t(t) * keyBits + j] = p;
          break;
        }
      }
    }
  }
  return pos;
}

std::vector<uint32_t> ProbeMasks(uint32_t keyBits, uint32_t maxErrors) {
  std::vector<uint32_t> masks;
  for (uint32_t r = 0; r <= maxErrors; ++r)
    for (uint32_t m = 0; m < (1u << keyBits); ++m)
      if (uint32_t(__builtin_popcount(m)) == r) masks.push_back(m);
  return masks;
}

void AddCodes(HostIndex& index, const uint32_t* words, uint64_t rows) {
  index.codes.insert(index.codes.end(), words, words + rows * index.wordsPerRow());
  if (!index.rowIds.empty())
    for (uint64_t i = 0; i < rows; ++i) index.rowIds.push_back(uint32_t(index.nextId + i));
  index.nextId += rows;
  index.rows += rows;
  index.built = false;
  index.device.reset();
}

namespace {

inline uint32_t KeyOf(const uint32_t* code, const uint32_t* pos, uint32_t h) {
  uint32_t key = 0;
  for (uint32_t j = 0; j < h; ++j) key |= ((code[pos[j] >> 5] >> (pos[j] & 31)) & 1u) << j;
  return key;
}

inline uint32_t Distance(const uint32_t* a, const uint32_t* b, uint32_t w) {
  uint32_t d = 0;
  uint32_t i = 0;
  for (; i + 2 <= w; i += 2) {
    uint64_t x, y;
    std::memcpy(&x, a + i, 8);
    std::memcpy(&y, b + i, 8);
    d += uint32_t(__builtin_popcountll(x ^ y));
  }
  if (i < w) d += uint32_t(__builtin_popcount(a[i] ^ b[i]));
  return d;
}

// Bounded max-heap of (distance << 32 | id). Ids arrive in increasing order per
// query, so a strict "key < top" test implements the (distance, id) tie rule.
struct TopK {
  std::vector<uint64_t> heap;
  uint32_t k = 0;
  void reset(uint32_t k_) {
    k = k_;
    heap.clear();
  }
  void push(uint64_t key) {
    if (heap.size() < k) {
      heap.push_back(key);
      std::push_heap(heap.begin(), heap.end());
    } else if (key < heap.front()) {
      std::pop_heap(heap.begin(), heap.end());
      heap.back() = key;
      std::push_heap(heap.begin(), heap.end());
    }
  }
  void emit(uint32_t bits, uint32_t* ids, uint16_t* dist) {
    std::sort(heap.begin(), heap.end());
    for (uint32_t i = 0; i < k; ++i) {
      if (i < heap.size()) {
        ids[i] = uint32_t(heap[i]);
        dist[i] = uint16_t(heap[i] >> 32);
      } else {
        ids[i] = kMissing;
        dist[i] = uint16_t(bits);
      }
    }
  }
};

// One tile of queries against all rows, in L2-sized row blocks.
CUSIM_POPCNT_CLONES void ScanTile(const uint32_t* codes, uint64_t n, uint32_t w, uint64_t block, const uint32_t* qwords,
                                  uint64_t q0, uint64_t q1, TopK* tops) {
  for (uint64_t r0 = 0; r0 < n; r0 += block) {
    const uint64_t r1 = std::min(n, r0 + block);
    for (uint64_t q = q0; q < q1; ++q) {
      const uint32_t* qc = qwords + q * w;
      TopK& top = tops[q - q0];
      for (uint64_t r = r0; r < r1; ++r) top.push((uint64_t(Distance(qc, codes + r * w, w)) << 32) | r);
    }
  }
}

// Exact re-rank of the ids kept by the shortlist rule (score > cut, or == cut for the first atCut ids).
CUSIM_POPCNT_CLONES void ShortlistRerank(const uint32_t* codes, uint64_t n, uint32_t w, const uint32_t* qc,
                                         const uint32_t* score, uint32_t cut, uint64_t atCut, TopK& top,
                                         uint64_t& scored, uint64_t& listed) {
  for (uint64_t r = 0; r < n; ++r) {
    const uint32_t s = score[r];
    scored += s != 0;
    if (s < cut || (s == cut && atCut == 0)) continue;
    if (s == cut) --atCut;
    ++listed;
    top.push((uint64_t(Distance(qc, codes + r * w, w)) << 32) | r);
  }
}

void SearchExactCpu(const HostIndex& index, const BitsView& queries, uint32_t k, uint32_t* ids, uint16_t* dist,
                    const CancelToken& cancel) {
  const uint32_t w = index.wordsPerRow();
  const uint64_t n = index.rows;
  // Query tiles against database blocks that stay in L2 while a tile scans them.
  constexpr size_t kQueryTile = 16;
  const uint64_t block = std::max<uint64_t>(256, (256u << 10) / (uint64_t(w) * 4));
  const size_t tiles = (queries.rows + kQueryTile - 1) / kQueryTile;
  ParallelFor(tiles, 1, [&](size_t tb, size_t te) {
    std::vector<TopK> tops(kQueryTile);
    for (size_t tile = tb; tile < te; ++tile) {
      cancel.check();
      const uint64_t q0 = tile * kQueryTile, q1 = std::min<uint64_t>(queries.rows, q0 + kQueryTile);
      for (auto& t : tops) t.reset(k);
      ScanTile(index.codes.data(), n, w, block, queries.words, q0, q1, tops.data());
      for (uint64_t q = q0; q < q1; ++q) tops[q - q0].emit(index.bits, ids + q * k, dist + q * k);
      cancel.advance(q1 - q0);
    }
  });
}

void BuildCpu(HostIndex& index) {
  if (index.built) return;
  const EwhParams& p = index.params;
  const uint32_t buckets = 1u << p.keyBits, w = index.wordsPerRow();
  const uint64_t n = index.rows;
  index.offsets.assign(size_t(p.tables) * (buckets + 1), 0);
  index.ids.assign(size_t(p.tables) * n, 0);
  ParallelFor(p.tables, 1, [&](size_t tb, size_t te) {
    std::vector<uint32_t> keys(n);
    for (size_t t = tb; t < te; ++t) {
      const uint32_t* pos = index.positions.data() + t * p.keyBits;
      uint32_t* off = index.offsets.data() + t * (buckets + 1);
      for (uint64_t r = 0; r < n; ++r) {
        keys[r] = KeyOf(index.codes.data() + r * w, pos, p.keyBits);
        ++off[keys[r] + 1];
      }
      for (uint32_t b = 0; b < buckets; ++b) off[b + 1] += off[b];
      std::vector<uint32_t> cursor(off, off + buckets);
      uint32_t* out = index.ids.data() + t * n;
      for (uint64_t r = 0; r < n; ++r) out[cursor[keys[r]]++] = uint32_t(r);
    }
  });
  index.built = true;
}

// Algorithm 3's scoring for one query: every id in a bucket within maxErrors
// bits of the query's key gains weights[distance].
void ScoreOne(const HostIndex& index, const uint32_t* q, const std::vector<uint32_t>& masks, uint32_t* score) {
  const EwhParams& p = index.params;
  const uint32_t buckets = 1u << p.keyBits;
  std::memset(score, 0, index.rows * sizeof(uint32_t));
  for (uint32_t t = 0; t < p.tables; ++t) {
    const uint32_t key = KeyOf(q, index.positions.data() + size_t(t) * p.keyBits, p.keyBits);
    const uint32_t* off = index.offsets.data() + size_t(t) * (buckets + 1);
    const uint32_t* ids = index.ids.data() + size_t(t) * index.rows;
    for (uint32_t m : masks) {
      const uint32_t b = key ^ m, wgt = uint32_t(p.weights[__builtin_popcount(m)]);
      for (uint32_t j = off[b]; j < off[b + 1]; ++j) score[ids[j]] += wgt;
    }
  }
}

void ScoresCpu(HostIndex& index, const BitsView& queries, uint32_t* scores) {
  BuildCpu(index);
  const auto masks = ProbeMasks(index.params.keyBits, index.params.maxErrors);
  ParallelFor(queries.rows, 1, [&](size_t b, size_t e) {
    for (size_t q = b; q < e; ++q)
      ScoreOne(index, queries.words + q * index.wordsPerRow(), masks, scores + q * index.rows);
  });
}

void SearchEwhCpu(HostIndex& index, const BitsView& queries, uint32_t k, uint32_t* ids, uint16_t* dist, Timing* timing,
                  const CancelToken& cancel) {
  BuildCpu(index);
  const EwhParams& p = index.params;
  const auto masks = ProbeMasks(p.keyBits, p.maxErrors);
  const uint32_t w = index.wordsPerRow();
  const uint64_t n = index.rows;
  std::atomic<uint64_t> scored{0}, shortlisted{0};
  ParallelFor(queries.rows, 1, [&](size_t b, size_t e) {
    std::vector<uint32_t> score(n);
    std::vector<uint64_t> hist;
    TopK top;
    uint64_t localScored = 0, localShort = 0;
    for (size_t q = b; q < e; ++q) {
      cancel.check();
      const uint32_t* qc = queries.words + q * w;
      ScoreOne(index, qc, masks, score.data());
      // Shortlist threshold: score > cut, plus the first `atCut` ids (by id) with score == cut.
      uint32_t cut;
      uint64_t atCut;
      if (p.shortlist > 0) {
        hist.assign(kMaxScore + 2, 0);
        for (uint64_t r = 0; r < n; ++r) ++hist[score[r]];
        uint64_t above = 0;
        cut = 0;
        atCut = 0;
        for (int64_t s = kMaxScore + 1; s >= 0; --s) {
          if (above + hist[s] >= p.shortlist) {
            cut = uint32_t(s);
            atCut = p.shortlist - above;
            break;
          }
          above += hist[s];
          if (s == 0) cut = 0, atCut = hist[0];  // fewer than L ids: take all
        }
      } else {
        cut = uint32_t(std::max<int32_t>(p.minScore, 0));
        atCut = UINT64_MAX;
      }
      top.reset(k);
      ShortlistRerank(index.codes.data(), n, w, qc, score.data(), cut, atCut, top, localScored, localShort);
      top.emit(index.bits, ids + q * k, dist + q * k);
      cancel.advance(1);
    }
    scored += localScored;
    shortlisted += localShort;
  });
  if (timing) {
    timing->scored = scored;
    timing->shortlisted = shortlisted;
  }
}

class CpuSearcher final : public Searcher {
 public:
  void Build(HostIndex& index, Timing*) override {
    index.built = false;
    BuildCpu(index);
  }
  void Search(HostIndex& index, const BitsView& queries, uint32_t k, uint32_t* ids, uint16_t* dist, Timing* timing,
              const CancelToken& cancel) override {
    if (index.ewh)
      SearchEwhCpu(index, queries, k, ids, dist, timing, cancel);
    else
      SearchExactCpu(index, queries, k, ids, dist, cancel);
  }
  void Scores(HostIndex& index, const BitsView& queries, uint32_t* scores) override {
    ScoresCpu(index, queries, scores);
  }
};

}  // namespace

std::unique_ptr<Searcher> MakeCpuSearcher() { return std::make_unique<CpuSearcher>(); }

}  // namespace hamming
}  // namespace cusim
