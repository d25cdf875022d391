// The host side of LSH both backends share (duplicate collapsing, pair
// expansion, verification, union-find, queries), so CPU and CUDA differ only
// in the bucketing step (Bucketer) and return identical results.
//
// Buckets of identical signatures: n identical rows would emit n(n-1)/2 pairs
// in every band. Rows are first collapsed into classes of interchangeable rows
// (identical signatures; for exact verification also identical vectors), and
// only one representative per class enters the band tables. Interchangeable
// rows have the same candidates and the same similarities, so:
//  - candidatePairs() expands the representatives' pairs back to all rows
//    (the output is what it is, but nothing is emitted twice on the way);
//  - groups() adds one edge (representative, member) per member, similarity 1,
//    which yields the same connected components as every pairwise edge.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <numeric>

#include "lsh.h"
#include "parallel.h"
#include "phase_log.h"
#include "uninit_vector.h"

namespace cusim {
namespace lsh {

// Sorts and deduplicates packed (hi << 32 | lo) values in parallel: values are
// scattered into buckets by their high word (whose largest value is maxHigh),
// so sorted buckets concatenate into a sorted whole.
void SortUnique(std::vector<uint64_t>& v, uint64_t maxHigh) {
  const size_t n = v.size();
  if (n < (1u << 16)) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return;
  }
  const size_t nb = NumThreads() * 8;
  const size_t chunks = NumThreads() * 4;
  const size_t per = (n + chunks - 1) / chunks;
  auto bucketOf = [&](uint64_t x) { return size_t(((x >> 32) * nb) / (maxHigh + 1)); };
  std::vector<size_t> counts(chunks * nb, 0);
  ParallelFor(chunks, 1, [&](size_t b, size_t e) {
    for (size_t c = b; c < e; ++c)
      for (size_t i = c * per; i < std::min(n, (c + 1) * per); ++i) ++counts[c * nb + bucketOf(v[i])];
  });
  std::vector<size_t> start(chunks * nb), bstart(nb + 1, 0);
  size_t acc = 0;
  for (size_t k = 0; k < nb; ++k) {
    bstart[k] = acc;
    for (size_t c = 0; c < chunks; ++c) {
      start[c * nb + k] = acc;
      acc += counts[c * nb + k];
    }
  }
  bstart[nb] = acc;
  std::vector<uint64_t> out(n);
  ParallelFor(chunks, 1, [&](size_t b, size_t e) {
    for (size_t c = b; c < e; ++c) {
      size_t* pos = &start[c * nb];
      for (size_t i = c * per; i < std::min(n, (c + 1) * per); ++i) out[pos[bucketOf(v[i])]++] = v[i];
    }
  });
  std::vector<size_t> kept(nb);
  ParallelFor(nb, 1, [&](size_t b, size_t e) {
    for (size_t k = b; k < e; ++k) {
      auto first = out.begin() + bstart[k], last = out.begin() + bstart[k + 1];
      std::sort(first, last);
      kept[k] = size_t(std::unique(first, last) - first);
    }
  });
  size_t w = 0;
  for (size_t k = 0; k < nb; ++k) {
    std::memmove(out.data() + w, out.data() + bstart[k], kept[k] * sizeof(uint64_t));
    w += kept[k];
  }
  out.resize(w);
  v.swap(out);
}

namespace {

// Classes of interchangeable rows. rep[i] is the smallest row of i's class
// (kNoGroup for empty rows); reps lists class representatives ascending;
// members[memberPtr[c] .. memberPtr[c+1]) lists class c's rows ascending.
struct Classes {
  std::vector<uint32_t> rep, reps, memberPtr, members;
};

using SameFn = std::function<bool(uint32_t, uint32_t)>;

// What BuildClasses reads of a row: signatures, or band keys.
struct SigRows {
  const SigView& sig;
  uint64_t n() const { return sig.n; }
  bool empty(uint64_t i) const { return IsEmptyRow(sig.row(i), sig.samples, sig.width); }
  uint64_t hash(uint64_t i) const { return FullHash(sig.row(i), sig.samples, sig.width); }
  bool equal(uint64_t i, uint64_t j) const {
    return std::memcmp(sig.row(i), sig.row(j), sig.words() * sizeof(uint32_t)) == 0;
  }
};

struct KeyRows {
  const KeyView& keys;
  const uint8_t* isEmpty;
  uint64_t n() const { return keys.n; }
  bool empty(uint64_t i) const { return isEmpty[i] != 0; }
  uint64_t hash(uint64_t i) const {
    uint64_t h = 0x13198a2e03707344ull;
    for (uint32_t b = 0; b < keys.bands; ++b) h = HashRound(h, keys.row(i)[b]);
    return Fmix64(h ^ keys.bands);
  }
  bool equal(uint64_t i, uint64_t j) const {
    return std::memcmp(keys.row(i), keys.row(j), uint64_t(keys.bands) * sizeof(uint64_t)) == 0;
  }
};

// Rows that need their vectors before classes are split by them (Prepare),
// and the extra test that splits them (Same).
using PrepareFn = std::function<void(const std::vector<uint32_t>&)>;

// Every step on the pool: 10M rows made each serial pass here a cost of its
// own on a many-core host. Rows are sorted by hash (then row), so a class
// lies within one run of equal hashes and its rows come in ascending order.
template <class Rows>
Classes BuildClasses(const Rows& rows, const PrepareFn& prepare, const SameFn& sameExtra) {
  const uint64_t n = rows.n();
  Classes c;
  // Every row its own class to begin with; only runs of shared hashes
  // (rare) are then looked at in hash order, which is random in memory, so
  // every other pass goes in row order.
  c.rep.resize(n);
  UninitVector<uint32_t> size(n);  // written whole below, on the pool
  UninitVector<uint8_t> empty(n);
  ParallelFor(n, 4096, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      empty[i] = rows.empty(i);
      c.rep[i] = empty[i] ? kNoGroup : uint32_t(i);
      size[i] = !empty[i];
    }
  });
  std::vector<Keyed> keyed;
  SortedKeyed(
      n,
      [&](size_t i, Keyed* k) {
        if (empty[i]) return false;
        *k = {rows.hash(i), uint32_t(i)};
        return true;
      },
      &keyed);
  UninitVector<uint8_t>().swap(empty);
  const size_t chunks = std::max<size_t>(1, std::min<size_t>(NumThreads() * 8, keyed.size() >> 12));
  const std::vector<size_t> cut = RunCuts(keyed, chunks);
  auto runs = [&](size_t c, auto&& fn) { ForRuns(keyed, cut, c, fn); };
  if (prepare) {
    // Rows of shared hashes: only they are ever compared.
    std::vector<std::vector<uint32_t>> shared(chunks);
    ParallelFor(chunks, 1, [&](size_t b, size_t e) {
      for (size_t ch = b; ch < e; ++ch)
        runs(ch, [&](size_t s, size_t t) {
          if (t - s > 1)
            for (size_t k = s; k < t; ++k) shared[ch].push_back(keyed[k].second);
        });
    });
    std::vector<uint32_t> all;
    for (auto& v : shared) {
      all.insert(all.end(), v.begin(), v.end());
      std::vector<uint32_t>().swap(v);
    }
    prepare(all);
  }
  ParallelFor(chunks, 1, [&](size_t b, size_t e) {
    std::vector<uint32_t> local;
    for (size_t ch = b; ch < e; ++ch)
      runs(ch, [&](size_t s, size_t t) {
        if (t - s == 1) return;
        local.clear();
        for (size_t k = s; k < t; ++k) size[keyed[k].second] = 0;
        for (size_t k = s; k < t; ++k) {
          const uint32_t i = keyed[k].second;
          uint32_t found = kNoGroup;
          for (uint32_t j : local) {
            if (rows.equal(i, j) && (!sameExtra || sameExtra(j, i))) {
              found = j;
              break;
            }
          }
          if (found == kNoGroup) local.push_back(i);
          c.rep[i] = found == kNoGroup ? i : found;
          ++size[c.rep[i]];
        }
      });
  });
  // Representatives ascending, and where each class's members start.
  std::vector<uint32_t> index(n, kNoGroup);
  ChunkedScan(
      n,
      [&](size_t b, size_t e) {
        size_t m = 0;
        for (size_t i = b; i < e; ++i) m += c.rep[i] == i;
        return m;
      },
      [&](size_t total) { c.reps.resize(total); },
      [&](size_t b, size_t e, size_t w) {
        for (size_t i = b; i < e; ++i)
          if (c.rep[i] == i) {
            index[i] = uint32_t(w);
            c.reps[w++] = uint32_t(i);
          }
      });
  c.memberPtr.assign(c.reps.size() + 1, 0);
  ChunkedScan(
      c.reps.size(),
      [&](size_t b, size_t e) {
        size_t m = 0;
        for (size_t k = b; k < e; ++k) m += size[c.reps[k]];
        return m;
      },
      [](size_t) {},
      [&](size_t b, size_t e, size_t w) {
        for (size_t k = b; k < e; ++k) c.memberPtr[k + 1] = uint32_t(w += size[c.reps[k]]);
      });
  c.members.resize(c.memberPtr.back());
  // Classes of one row, in row order; then the others, run by run.
  ParallelFor(n, 4096, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i)
      if (c.rep[i] == i && size[i] == 1) c.members[c.memberPtr[index[i]]] = uint32_t(i);
  });
  ParallelFor(chunks, 1, [&](size_t b, size_t e) {
    std::vector<std::pair<uint32_t, uint32_t>> next;  // (representative, its next member slot)
    for (size_t ch = b; ch < e; ++ch)
      runs(ch, [&](size_t s, size_t t) {
        if (t - s == 1) return;
        next.clear();
        for (size_t k = s; k < t; ++k) {
          const uint32_t i = keyed[k].second, r = c.rep[i];
          if (size[r] == 1) continue;
          auto it = std::find_if(next.begin(), next.end(), [r](auto& x) { return x.first == r; });
          if (it == next.end()) it = next.insert(next.end(), {r, c.memberPtr[index[r]]});
          c.members[it->second++] = i;
        }
      });
  });
  return c;
}

// Matrix rows in canonical form (ascending columns, duplicates summed,
// weights <= 0 or NaN dropped), built only for the rows a call needs. As
// `sets` (classic MinHash), every stored column is a member of weight 1 and
// repeats count once, and no weights are kept. ids null: row i is matrix row i.
class NormRows {
 public:
  // Rows are built only where a call needs them (a few percent): each row
  // has a 4-byte slot (kNone until built), the built rows' starts and
  // lengths go with the slots, so a 100M-row job holds 400 MB here, not 1.2 GB.
  NormRows(const RowBlocks& m, const uint32_t* ids, uint64_t n, bool sets) : m_(m), ids_(ids), sets_(sets), slot_(n) {
    ParallelFor(n, 1 << 16, [&](size_t b, size_t e) { std::fill(slot_.begin() + b, slot_.begin() + e, kNone); });
  }

  // Builds the rows at `positions` (distinct) not built yet.
  void Need(const std::vector<uint32_t>& positions) {
    std::vector<uint32_t> todo;
    ChunkedScan(
        positions.size(),
        [&](size_t b, size_t e) {
          size_t m = 0;
          for (size_t k = b; k < e; ++k) m += slot_[positions[k]] == kNone;
          return m;
        },
        [&](size_t total) { todo.resize(total); },
        [&](size_t b, size_t e, size_t w) {
          for (size_t k = b; k < e; ++k)
            if (slot_[positions[k]] == kNone) todo[w++] = positions[k];
        });
    std::vector<uint64_t> off(todo.size() + 1, col_.size());
    ChunkedScan(
        todo.size(),
        [&](size_t b, size_t e) {
          size_t m = 0;
          for (size_t k = b; k < e; ++k) m += m_.Length(RowOf(todo[k]));
          return m;
        },
        [](size_t) {},
        [&](size_t b, size_t e, size_t w) {
          for (size_t k = b; k < e; ++k) off[k + 1] = col_.size() + (w += m_.Length(RowOf(todo[k])));
        });
    col_.resize(off.back());
    if (!sets_) val_.resize(off.back());
    const size_t first = start_.size();
    if (first + todo.size() >= kNone) ThrowInvalid("more than 2^32 - 1 rows to verify");
    start_.resize(first + todo.size());
    len_.resize(first + todo.size());
    ParallelFor(todo.size(), 256, [&](size_t b, size_t e) {
      std::vector<std::pair<uint32_t, double>> tmp;
      std::vector<uint32_t> idx;  // a row read from a file
      std::vector<float> val;
      for (size_t k = b; k < e; ++k) {
        const RowBlocks::Row r = m_.Fetch(RowOf(todo[k]), &idx, sets_ ? nullptr : &val);
        tmp.clear();
        for (uint32_t j = 0; j < r.length; ++j) {
          const float w = r.values && !sets_ ? r.values[j] : 1.0f;
          if (w > 0) tmp.emplace_back(r.indices[j], double(w));  // false for NaN
        }
        std::sort(tmp.begin(), tmp.end(), [](auto& a, auto& b) { return a.first < b.first; });
        uint64_t w = off[k];
        for (size_t t = 0; t < tmp.size(); ++t) {
          if (w > off[k] && col_[w - 1] == tmp[t].first) {
            if (!sets_) val_[w - 1] += tmp[t].second;
          } else {
            col_[w] = tmp[t].first;
            if (!sets_) val_[w] = tmp[t].second;
            ++w;
          }
        }
        start_[first + k] = off[k];
        len_[first + k] = uint32_t(w - off[k]);
        slot_[todo[k]] = uint32_t(first + k);
      }
    });
  }

  uint64_t rows() const { return slot_.size(); }

  bool Same(uint32_t ra, uint32_t rb) const {
    const uint32_t a = slot_[ra], b = slot_[rb];
    if (len_[a] != len_[b]) return false;
    return std::equal(col_.begin() + start_[a], col_.begin() + start_[a] + len_[a], col_.begin() + start_[b]) &&
           (sets_ ||
            std::equal(val_.begin() + start_[a], val_.begin() + start_[a] + len_[a], val_.begin() + start_[b]));
  }

  // Weighted Jaccard: sum of minima over sum of maxima (0 when both are empty);
  // for sets, |a ∩ b| / |a ∪ b|.
  double Jaccard(uint32_t ra, uint32_t rb) const {
    const uint32_t a = slot_[ra], b = slot_[rb];
    const uint32_t* ca = col_.data() + start_[a];
    const uint32_t* cb = col_.data() + start_[b];
    if (sets_) {
      uint32_t i = 0, j = 0, both = 0;
      while (i < len_[a] && j < len_[b]) {
        if (ca[i] == cb[j]) {
          ++both, ++i, ++j;
        } else if (ca[i] < cb[j]) {
          ++i;
        } else {
          ++j;
        }
      }
      const uint64_t any = uint64_t(len_[a]) + len_[b] - both;
      return any > 0 ? double(both) / double(any) : 0.0;
    }
    const double* va = val_.data() + start_[a];
    const double* vb = val_.data() + start_[b];
    uint32_t i = 0, j = 0;
    double mn = 0, mx = 0;
    while (i < len_[a] && j < len_[b]) {
      if (ca[i] == cb[j]) {
        mn += std::min(va[i], vb[j]);
        mx += std::max(va[i], vb[j]);
        ++i, ++j;
      } else if (ca[i] < cb[j]) {
        mx += va[i++];
      } else {
        mx += vb[j++];
      }
    }
    for (; i < len_[a]; ++i) mx += va[i];
    for (; j < len_[b]; ++j) mx += vb[j];
    return mx > 0 ? mn / mx : 0.0;
  }

 private:
  uint64_t RowOf(uint32_t position) const { return ids_ ? ids_[position] : position; }
  const RowBlocks& m_;
  const uint32_t* ids_;
  bool sets_;
  static constexpr uint32_t kNone = 0xFFFFFFFFu;
  UninitVector<uint32_t> slot_;  // per row: its built row, or kNone
  std::vector<uint64_t> start_;  // per built row
  std::vector<uint32_t> len_;
  std::vector<uint32_t> col_;
  std::vector<double> val_;
};

// Packed position pairs -> id pairs with left < right, sorted.
PairList ToIdPairs(const std::vector<uint64_t>& pos, const std::vector<float>* sim, const uint32_t* ids, uint64_t n) {
  PairList out;
  std::vector<uint64_t> key(pos.size());
  uint32_t maxId = 0;
  for (uint64_t i = 0; i < n; ++i) maxId = std::max(maxId, ids[i]);
  ParallelFor(pos.size(), 1 << 14, [&](size_t b, size_t e) {
    for (size_t k = b; k < e; ++k) {
      uint32_t x = ids[pos[k] >> 32], y = ids[uint32_t(pos[k])];
      key[k] = Pack(std::min(x, y), std::max(x, y));
    }
  });
  if (sim) {
    std::vector<uint32_t> order(pos.size());
    std::iota(order.begin(), order.end(), 0u);
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return key[a] < key[b]; });
    out.similarity.resize(pos.size());
    std::vector<uint64_t> sorted(pos.size());
    for (size_t k = 0; k < order.size(); ++k) {
      sorted[k] = key[order[k]];
      out.similarity[k] = (*sim)[order[k]];
    }
    key.swap(sorted);
  } else {
    SortUnique(key, maxId);  // the pairs are distinct: this only sorts
  }
  out.left.resize(key.size());
  out.right.resize(key.size());
  ParallelFor(key.size(), 1 << 14, [&](size_t b, size_t e) {
    for (size_t k = b; k < e; ++k) {
      out.left[k] = uint32_t(key[k] >> 32);
      out.right[k] = uint32_t(key[k]);
    }
  });
  return out;
}

}  // namespace

std::vector<float> EstimatePairs(const SigView& sig, const std::vector<uint64_t>& pairs) {
  std::vector<float> out(pairs.size());
  ParallelFor(pairs.size(), 1024, [&](size_t b, size_t e) {
    for (size_t k = b; k < e; ++k) {
      const uint32_t* x = sig.row(pairs[k] >> 32);
      const uint32_t* y = sig.row(uint32_t(pairs[k]));
      uint32_t eq = 0;
      for (uint32_t s = 0; s < sig.samples; ++s) eq += SampleValue(x, s, sig.width) == SampleValue(y, s, sig.width);
      out[k] = float(eq) / float(sig.samples);
    }
  });
  return out;
}

void RowPairs(const CsrView& m, const uint32_t* a, const uint32_t* b, uint64_t n, bool sets, double* jaccard,
              uint8_t* same) {
  const RowBlocks blocks(m);
  NormRows norm(blocks, nullptr, m.rows, sets);
  std::vector<uint32_t> ends(a, a + n);
  ends.insert(ends.end(), b, b + n);
  std::sort(ends.begin(), ends.end());
  ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
  norm.Need(ends);
  ParallelFor(n, 256, [&](size_t lo, size_t hi) {
    for (size_t k = lo; k < hi; ++k) {
      if (jaccard) jaccard[k] = norm.Jaccard(a[k], b[k]);
      if (same) same[k] = norm.Same(a[k], b[k]);
    }
  });
}

PairList CandidatePairs(const SigView& sig, const uint32_t* ids, const Params& p, const Bucketer& bucketer,
                        const CancelToken& cancel, Timing* timing) {
  Classes c = BuildClasses(SigRows{sig}, nullptr, nullptr);
  cancel.check();
  std::vector<uint64_t> rp = bucketer.RepPairs(sig, c.reps, p, nullptr, timing);
  cancel.check();
  std::vector<uint32_t> classOf(sig.n, kNoGroup);
  for (size_t k = 0; k < c.reps.size(); ++k) classOf[c.reps[k]] = uint32_t(k);
  auto sizeOf = [&](uint32_t r) { return uint64_t(c.memberPtr[classOf[r] + 1] - c.memberPtr[classOf[r]]); };
  // Representatives' pairs expand to member cross products; each class adds
  // its own internal pairs. These sets are disjoint, so nothing repeats.
  std::vector<uint64_t> off(rp.size() + c.reps.size() + 1, 0);
  for (size_t k = 0; k < rp.size(); ++k) off[k + 1] = off[k] + sizeOf(rp[k] >> 32) * sizeOf(uint32_t(rp[k]));
  for (size_t k = 0; k < c.reps.size(); ++k) {
    const uint64_t m = sizeOf(c.reps[k]);
    off[rp.size() + k + 1] = off[rp.size() + k] + m * (m - 1) / 2;
  }
  if (off.back() > MaxTypedLength())
    ThrowInvalid("candidatePairs would return " + std::to_string(off.back()) +
                 " pairs, more than one typed array holds (" + std::to_string(MaxTypedLength()) +
                 "); groups() links rows with identical signatures to their first copy "
                 "instead of listing every pair");
  std::vector<uint64_t> pos(off.back());
  ParallelFor(rp.size() + c.reps.size(), 256, [&](size_t b, size_t e2) {
    for (size_t k = b; k < e2; ++k) {
      uint64_t w = off[k];
      if (k < rp.size()) {
        const uint32_t ca = classOf[rp[k] >> 32], cb = classOf[uint32_t(rp[k])];
        for (uint32_t i = c.memberPtr[ca]; i < c.memberPtr[ca + 1]; ++i)
          for (uint32_t j = c.memberPtr[cb]; j < c.memberPtr[cb + 1]; ++j) pos[w++] = Pack(c.members[i], c.members[j]);
      } else {
        const size_t cl = k - rp.size();
        for (uint32_t i = c.memberPtr[cl]; i < c.memberPtr[cl + 1]; ++i)
          for (uint32_t j = i + 1; j < c.memberPtr[cl + 1]; ++j) pos[w++] = Pack(c.members[i], c.members[j]);
      }
    }
  });
  cancel.check();
  return ToIdPairs(pos, nullptr, ids, sig.n);
}

GroupsResult Components(const std::vector<uint32_t>& rep, std::vector<uint64_t> edges, std::vector<float> edgeSim,
                        const uint32_t* ids) {
  const uint64_t n = rep.size();
  const size_t verified = edges.size();
  ChunkedScan(
      n,
      [&](size_t b, size_t e) {
        size_t m = 0;
        for (size_t i = b; i < e; ++i) m += rep[i] != kNoGroup && rep[i] != i;
        return m;
      },
      [&](size_t total) {
        edges.resize(verified + total);
        edgeSim.resize(verified + total, 1.0f);
      },
      [&](size_t b, size_t e, size_t w) {
        for (size_t i = b; i < e; ++i)
          if (rep[i] != kNoGroup && rep[i] != i) edges[verified + w++] = Pack(rep[i], uint32_t(i));
      });
  // Union-find whose root is always the smallest row of its component, so
  // numbering roots in row order numbers groups by their smallest member.
  UninitVector<uint32_t> parent(n);
  UninitVector<uint8_t> linked(n);
  ParallelFor(n, 1 << 16, [&](size_t b, size_t e) {
    std::iota(parent.begin() + b, parent.begin() + e, uint32_t(b));
    std::fill(linked.begin() + b, linked.begin() + e, uint8_t(0));
  });
  auto find = [&](uint32_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  for (uint64_t x : edges) {
    uint32_t a = find(uint32_t(x >> 32)), b = find(uint32_t(x));
    linked[x >> 32] = linked[uint32_t(x)] = 1;
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
  // Each linked row's root (in out.group for now), then the roots numbered
  // in row order (in parent, no longer needed), then every row labelled.
  GroupsResult out;
  out.group.resize(n);
  ParallelFor(n, 1 << 14, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      uint32_t r = linked[i] ? uint32_t(i) : kNoGroup;
      if (r != kNoGroup)
        while (parent[r] != r) r = parent[r];
      out.group[i] = r;
    }
  });
  out.count = uint32_t(ChunkedScan(
      n,
      [&](size_t b, size_t e) {
        size_t m = 0;
        for (size_t i = b; i < e; ++i) m += out.group[i] == i;
        return m;
      },
      [](size_t) {},
      [&](size_t b, size_t e, size_t w) {
        for (size_t i = b; i < e; ++i)
          if (out.group[i] == i) parent[i] = uint32_t(w++);
      }));
  ParallelFor(n, 1 << 14, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i)
      if (out.group[i] != kNoGroup) out.group[i] = parent[out.group[i]];
  });
  out.pairs = ToIdPairs(edges, &edgeSim, ids, n);
  return out;
}

namespace {

// Classes for exact verification: rows with equal signatures (or keys) are
// split by vector equality, so only truly interchangeable rows collapse.
template <class Rows>
Classes ExactClasses(const Rows& rows, NormRows& norm) {
  return BuildClasses(
      rows, [&norm](const std::vector<uint32_t>& v) { norm.Need(v); },
      [&norm](uint32_t a, uint32_t b) { return norm.Same(a, b); });
}

// True Jaccard of every candidate pair (progress stage 1); keep[k] when >= threshold.
void VerifyExact(const std::vector<uint64_t>& rp, NormRows& norm, double threshold, const CancelToken& cancel,
                 std::vector<float>* sim, std::vector<uint8_t>* keep) {
  // The rows of every pair, ascending: marked, then listed.
  const uint64_t n = norm.rows();
  std::unique_ptr<std::atomic<uint8_t>[]> used(new std::atomic<uint8_t>[n]());
  ParallelFor(rp.size(), 1 << 14, [&](size_t b, size_t e) {
    for (size_t k = b; k < e; ++k) {
      used[rp[k] >> 32].store(1, std::memory_order_relaxed);
      used[uint32_t(rp[k])].store(1, std::memory_order_relaxed);
    }
  });
  std::vector<uint32_t> ends;
  ChunkedScan(
      n,
      [&](size_t b, size_t e) {
        size_t m = 0;
        for (size_t i = b; i < e; ++i) m += used[i].load(std::memory_order_relaxed);
        return m;
      },
      [&](size_t total) { ends.resize(total); },
      [&](size_t b, size_t e, size_t w) {
        for (size_t i = b; i < e; ++i)
          if (used[i].load(std::memory_order_relaxed)) ends[w++] = uint32_t(i);
      });
  used.reset();
  norm.Need(ends);
  std::vector<uint32_t>().swap(ends);
  sim->resize(rp.size());
  keep->assign(rp.size(), 1);
  cancel.begin(1, rp.size());
  ParallelFor(rp.size(), 256, [&](size_t b, size_t e2) {
    for (size_t k = b; k < e2; ++k) {
      if (((k - b) & 255) == 0) cancel.check();
      const double j = norm.Jaccard(uint32_t(rp[k] >> 32), uint32_t(rp[k]));
      (*sim)[k] = float(j);
      (*keep)[k] = j >= threshold;
      if (((k - b) & 255) == 255) cancel.advance(256);
    }
    cancel.advance((e2 - b) & 255);
  });
}

GroupsResult KeptComponents(const Classes& c, const std::vector<uint64_t>& rp, const std::vector<float>& sim,
                            const std::vector<uint8_t>& keep, const uint32_t* ids) {
  std::vector<uint64_t> edges;
  std::vector<float> edgeSim;
  for (size_t k = 0; k < rp.size(); ++k)
    if (keep[k]) {
      edges.push_back(rp[k]);
      edgeSim.push_back(sim[k]);
    }
  return Components(c.rep, std::move(edges), std::move(edgeSim), ids);
}

}  // namespace

GroupsResult Groups(const SigView& sig, const uint32_t* ids, const Params& p, Verify verify, double threshold,
                    const CsrView* matrix, bool sets, const Bucketer& bucketer, const CancelToken& cancel,
                    Timing* timing) {
  const uint64_t n = sig.n;
  cancel.begin(0, 0);
  const SigRows rows{sig};
  std::unique_ptr<RowBlocks> blocks;
  std::unique_ptr<NormRows> norm;
  Classes c;
  if (verify == Verify::Exact) {
    if (!matrix) ThrowInvalid("matrix is required for verify 'exact'", "TypeError");
    for (uint64_t i = 0; i < n; ++i)
      if (ids[i] >= matrix->rows)
        ThrowInvalid("id " + std::to_string(ids[i]) +
                     " has no row in matrix (matrix.rows = " + std::to_string(matrix->rows) + ")");
    blocks = std::make_unique<RowBlocks>(*matrix);
    norm = std::make_unique<NormRows>(*blocks, ids, n, sets);
    c = ExactClasses(rows, *norm);
  } else {
    c = BuildClasses(rows, nullptr, nullptr);
  }
  cancel.check();
  std::vector<float> sim;
  std::vector<uint64_t> rp = bucketer.RepPairs(sig, c.reps, p, verify == Verify::Exact ? nullptr : &sim, timing);
  cancel.check();
  std::vector<uint8_t> keep(rp.size(), 1);
  if (verify == Verify::Exact) {
    VerifyExact(rp, *norm, threshold, cancel, &sim, &keep);
  } else if (verify == Verify::Estimate) {
    for (size_t k = 0; k < rp.size(); ++k) keep[k] = double(sim[k]) >= threshold;
  }
  cancel.check();
  return KeptComponents(c, rp, sim, keep, ids);
}

GroupsResult GroupsFromKeys(const KeyView& keys, const uint8_t* empty, double threshold, const RowBlocks& rows,
                            bool sets, const Bucketer& bucketer, const CancelToken& cancel, Timing* timing) {
  const uint64_t n = keys.n;
  if (rows.rows() != n)
    ThrowInvalid("the token sets hold " + std::to_string(rows.rows()) + " rows, the band keys " + std::to_string(n));
  cancel.begin(0, 0);
  PhaseLog log("lsh groups from keys");  // CUSIM_PROFILE=1
  log.Mark("start");
  NormRows norm(rows, nullptr, n, sets);
  log.Mark("row slots");
  Classes c = ExactClasses(KeyRows{keys, empty}, norm);
  log.Mark("classes");
  cancel.check();
  std::vector<uint64_t> rp = bucketer.RepPairsFromKeys(keys, c.reps, timing);
  log.Mark("candidate pairs");
  cancel.check();
  std::vector<float> sim;
  std::vector<uint8_t> keep;
  VerifyExact(rp, norm, threshold, cancel, &sim, &keep);
  log.Mark("verify");
  cancel.check();
  std::vector<uint32_t> ids(n);
  ParallelFor(n, 1 << 16, [&](size_t b, size_t e) { std::iota(ids.begin() + b, ids.begin() + e, uint32_t(b)); });
  GroupsResult out = KeptComponents(c, rp, sim, keep, ids.data());
  log.Mark("components");
  return out;
}

void BandKeys(const SigView& sig, const Params& p, uint64_t* keys, uint8_t* empty) {
  ParallelFor(sig.n, 2048, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      for (uint32_t band = 0; band < p.bands; ++band)
        keys[i * p.bands + band] = BandKey(sig.row(i), band, p.rows, sig.width);
      empty[i] = IsEmptyRow(sig.row(i), sig.samples, sig.width);
    }
  });
}

void Query(const SigView& stored, const uint32_t* ids, const SigView& queries, const Params& p,
           std::vector<uint32_t>* indptr, std::vector<uint32_t>* out) {
  std::vector<uint32_t> live;
  for (uint64_t i = 0; i < stored.n; ++i)
    if (!IsEmptyRow(stored.row(i), stored.samples, stored.width)) live.push_back(uint32_t(i));
  std::vector<std::vector<std::pair<uint64_t, uint32_t>>> tables(p.bands);
  ParallelFor(p.bands, 1, [&](size_t b, size_t e) {
    std::vector<Keyed> tmp;
    for (size_t band = b; band < e; ++band) {
      auto& t = tables[band];
      t.resize(live.size());
      for (size_t k = 0; k < live.size(); ++k)
        t[k] = {BandKey(stored.row(live[k]), uint32_t(band), p.rows, stored.width), live[k]};
      SortKeyed(t, tmp);
    }
  });
  std::vector<std::vector<uint32_t>> hits(queries.n);
  ParallelFor(queries.n, 64, [&](size_t b, size_t e) {
    for (size_t q = b; q < e; ++q) {
      if (IsEmptyRow(queries.row(q), queries.samples, queries.width)) continue;
      auto& h = hits[q];
      for (uint32_t band = 0; band < p.bands; ++band) {
        const auto& t = tables[band];
        const uint64_t key = BandKey(queries.row(q), band, p.rows, queries.width);
        auto it = std::lower_bound(t.begin(), t.end(), std::make_pair(key, uint32_t(0)));
        for (; it != t.end() && it->first == key; ++it) h.push_back(ids[it->second]);
      }
      std::sort(h.begin(), h.end());
      h.erase(std::unique(h.begin(), h.end()), h.end());
    }
  });
  uint64_t total = 0;
  for (const auto& h : hits) total += h.size();
  // indptr is uint32 (one typed array of ids, at most 2^32 - 1 long).
  if (total > std::min<uint64_t>(MaxTypedLength(), 0xFFFFFFFFull))
    ThrowInvalid("query would return " + std::to_string(total) +
                 " candidate ids, more than one typed array holds; "
                 "query fewer signatures per call");
  indptr->assign(queries.n + 1, 0);
  for (uint64_t q = 0; q < queries.n; ++q) (*indptr)[q + 1] = (*indptr)[q] + uint32_t(hits[q].size());
  out->resize(indptr->back());
  for (uint64_t q = 0; q < queries.n; ++q) std::copy(hits[q].begin(), hits[q].end(), out->begin() + (*indptr)[q]);
}

}  // namespace lsh
}  // namespace cusim
