// Hamming k-NN on the GPU.
// Exact: tiles of queries x database rows produce distances through either
// scalar __popc or the 1-bit tensor-core MMA (|a| + |b| - 2|a AND b|). Top-k is
// exact with the (distance, id) rule in three passes over integer distances:
// a sampled histogram bounds the k-th distance, a bounded histogram finds it
// (D), and a collect pass keeps every d < D and the ties at D, which a final
// per-query block sorts (falling back to an in-order scan when ties overflow).
// EWH: CSR buckets built by count / scan / scatter, atomic scoring over the
// probes within e bits, an in-order shortlist, then an exact re-rank.
//
// Layout: the kernels are in cuda/hamming/: the families exact.cuh and
// ewh.cuh, over common.cuh and the top-k selection both use (topk.cuh), all
// compiled in this one translation unit; this file keeps the host side.
#include "hamming/ewh.cuh"
#include "hamming/exact.cuh"
#include "hamming/topk.cuh"

namespace cusim {
namespace hamming {
namespace {

// ---- host helpers ----------------------------------------------------------------

unsigned Blocks(uint64_t n, int device) {
  return gpu::GridFor(n, kThreads, unsigned(gpu::MultiprocessorCount(device)) * 16);
}

DeviceIndex& Upload(HostIndex& ix, int device, cudaStream_t stream, Timing* timing) {
  if (ix.device && ix.device->device == device) return *ix.device;
  auto d = std::make_shared<DeviceIndex>();
  d->device = device;
  d->rows = ix.rows;
  d->wp = PaddedWords(ix.bits);
  d->codes.reset(ix.rows * d->wp, "hamming codes");
  d->pops.reset(ix.rows, "hamming code popcounts");
  std::vector<uint32_t> padded = Pad(ix.codes.data(), ix.rows, ix.wordsPerRow(), d->wp);
  gpu::Event t0, t1;
  t0.record(stream);
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(d->codes.data(), padded.data(), padded.size() * 4, cudaMemcpyHostToDevice, stream));
  t1.record(stream);
  PopsKernel<<<Blocks(ix.rows, device), kThreads, 0, stream>>>(d->codes.data(), ix.rows, d->wp, d->pops.data());
  CUSIM_LAUNCH_CHECK();
  CUSIM_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (timing) timing->transferMs += gpu::ElapsedMs(t0, t1);
  ix.device = d;
  return *d;
}

void BuildOnDevice(HostIndex& ix, DeviceIndex& d, cudaStream_t stream, Timing* timing) {
  const EwhParams& p = ix.params;
  const uint32_t buckets = 1u << p.keyBits;
  const uint64_t slots = uint64_t(p.tables) * buckets;
  const auto masks = ProbeMasks(p.keyBits, p.maxErrors);
  std::vector<uint32_t> mw(masks.size());
  for (size_t i = 0; i < masks.size(); ++i) mw[i] = uint32_t(p.weights[__builtin_popcount(masks[i])]);
  d.positions.reset(ix.positions.size(), "ewh positions");
  d.masks.reset(masks.size(), "ewh probe masks");
  d.maskWeights.reset(masks.size(), "ewh probe weights");
  d.offsets.reset(slots + 1, "ewh bucket offsets");
  d.ids.reset(uint64_t(p.tables) * d.rows, "ewh bucket ids");
  gpu::DeviceBuffer<uint32_t> keys(uint64_t(p.tables) * d.rows, "ewh keys");
  gpu::DeviceBuffer<unsigned long long> counts(slots + 1, "ewh bucket counts");
  size_t scanBytes = 0;
  CUSIM_CUDA_CHECK(
      cub::DeviceScan::ExclusiveSum(nullptr, scanBytes, counts.data(), d.offsets.data(), slots + 1, stream));
  gpu::DeviceBuffer<uint8_t> scanTmp(std::max<size_t>(scanBytes, 1), "ewh scan scratch");
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(d.positions.data(), ix.positions.data(), ix.positions.size() * 4,
                                   cudaMemcpyHostToDevice, stream));
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(d.masks.data(), masks.data(), masks.size() * 4, cudaMemcpyHostToDevice, stream));
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(d.maskWeights.data(), mw.data(), mw.size() * 4, cudaMemcpyHostToDevice, stream));
  gpu::Event t0, t1;
  t0.record(stream);
  CUSIM_CUDA_CHECK(cudaMemsetAsync(counts.data(), 0, (slots + 1) * 8, stream));
  KeysKernel<<<Blocks(d.rows, d.device), kThreads, 0, stream>>>(d.codes.data(), d.rows, d.wp, d.positions.data(),
                                                                p.tables, p.keyBits, keys.data(), counts.data());
  CUSIM_LAUNCH_CHECK();
  CUSIM_CUDA_CHECK(
      cub::DeviceScan::ExclusiveSum(scanTmp.data(), scanBytes, counts.data(), d.offsets.data(), slots + 1, stream));
  // counts becomes the scatter cursor: a copy of the offsets.
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(counts.data(), d.offsets.data(), (slots + 1) * 8, cudaMemcpyDeviceToDevice, stream));
  ScatterKernel<<<Blocks(d.rows, d.device), kThreads, 0, stream>>>(keys.data(), d.rows, p.tables, p.keyBits,
                                                                   counts.data(), d.ids.data());
  CUSIM_LAUNCH_CHECK();
  t1.record(stream);
  CUSIM_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (timing) timing->buildMs += gpu::ElapsedMs(t0, t1);
  d.built = true;
}

DeviceIndex& Ready(HostIndex& ix, int device, cudaStream_t stream, Timing* timing) {
  DeviceIndex& d = Upload(ix, device, stream, timing);
  if (ix.ewh && !d.built) BuildOnDevice(ix, d, stream, timing);
  return d;
}

void UploadQueries(QueryBatch& b, const BitsView& q, uint64_t q0, uint32_t nb, uint32_t wp, int device,
                   cudaStream_t stream) {
  b.host = Pad(q.words + q0 * q.wordsPerRow(), nb, q.wordsPerRow(), wp);
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(b.codes.data(), b.host.data(), b.host.size() * 4, cudaMemcpyHostToDevice, stream));
  PopsKernel<<<Blocks(nb, device), kThreads, 0, stream>>>(b.codes.data(), nb, wp, b.pops.data());
  CUSIM_LAUNCH_CHECK();
}

// Queries per batch: what the per-query scratch allows in half the free memory.
uint32_t BatchSize(uint64_t nq, uint64_t perQuery, int device, uint32_t cap) {
  uint64_t freeB = 0, total = 0;
  DeviceMemory(device, &freeB, &total);
  uint64_t b = std::max<uint64_t>(1, (freeB / 2) / std::max<uint64_t>(perQuery, 1));
  return uint32_t(std::min<uint64_t>({b, nq, cap}));
}

// The end of one query batch of a search: its kernels are queued after event
// t[1]; download the top-k and the per-query counts, wait, and charge the
// batch's kernel and copy time (t[0] was recorded before its upload).
void FinishBatch(gpu::Event (&t)[4], uint32_t* ids, uint16_t* dist, uint64_t q0, uint32_t nb, uint32_t k,
                 const uint32_t* dIds, const uint16_t* dDist, const uint32_t* dCounts, uint32_t* counts,
                 const gpu::Stream& stream, Timing* timing) {
  t[2].record(stream);
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(ids + q0 * k, dIds, uint64_t(nb) * k * 4, cudaMemcpyDeviceToHost, stream));
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(dist + q0 * k, dDist, uint64_t(nb) * k * 2, cudaMemcpyDeviceToHost, stream));
  CUSIM_CUDA_CHECK(cudaMemcpyAsync(counts, dCounts, uint64_t(nb) * 4, cudaMemcpyDeviceToHost, stream));
  t[3].record(stream);
  stream.sync();
  if (timing) {
    timing->kernelMs += gpu::ElapsedMs(t[1], t[2]);
    timing->transferMs += gpu::ElapsedMs(t[0], t[1]) + gpu::ElapsedMs(t[2], t[3]);
  }
}

enum class Tile { Popc, Mma2 };

template <int KS, class Epi>
void LaunchMma2(const DeviceIndex& d, uint64_t nrows, uint32_t lev, uint32_t sstep, const QueryBatch& qb, uint32_t nb,
                Epi epi, cudaStream_t stream) {
  const uint32_t qblocks = (nb + kM2Queries - 1) / kM2Queries;
  // ~8 CTAs per SM (2 resident x 4 waves) whatever the batch; CTAs of one row split
  // launch together, so their shared rows come from L2 and HBM is read ~once per batch.
  const uint64_t want = (uint64_t(gpu::MultiprocessorCount(d.device)) * 8 + qblocks - 1) / qblocks;
  const unsigned splits =
      unsigned(std::max<uint64_t>(1, std::min<uint64_t>({want, (nrows + kM2Rows - 1) / kM2Rows, 65535})));
  MmaTile2<KS><<<dim3(qblocks, splits), kM2Warps * 32, 0, stream>>>(d.codes.data(), d.pops.data(), d.wp, nrows, lev,
                                                                    sstep, qb.codes.data(), qb.pops.data(), nb, epi);
}

// Tile row i reads index row SampleRow(i, lev, sstep): lev = sstep = 1 scans the index itself.
template <class Epi>
void LaunchTile(Tile tile, const DeviceIndex& d, uint64_t nrows, uint32_t lev, uint32_t sstep, const QueryBatch& qb,
                uint32_t nb, Epi epi, cudaStream_t stream) {
  if (nrows == 0) return;
  const unsigned rowBlocks = unsigned(std::min<uint64_t>((nrows + 255) / 256, 65535));
  if (tile == Tile::Mma2) {
    // Query fragments stay in registers for 256- and 512-bit codes (the benchmarked sizes).
    if (d.wp == 8)
      LaunchMma2<1>(d, nrows, lev, sstep, qb, nb, epi, stream);
    else if (d.wp == 16)
      LaunchMma2<2>(d, nrows, lev, sstep, qb, nb, epi, stream);
    else
      LaunchMma2<0>(d, nrows, lev, sstep, qb, nb, epi, stream);
  } else {
    dim3 grid((nb + 15) / 16, rowBlocks);
    PopcTile<16><<<grid, kThreads, 0, stream>>>(d.codes.data(), d.wp, nrows, lev, sstep, qb.codes.data(), nb, epi);
  }
  CUSIM_LAUNCH_CHECK();
}

Tile ChooseTile(ExactKernel kernel, uint32_t bits, int device) {
  if (kernel == ExactKernel::Popc) return Tile::Popc;
  // The 1-bit MMA (m16n8k256 AND + popc) is sm_80's: older GPUs scan with popcount.
  const bool tensorCores = DeviceTensorCores(device);
  if (kernel == ExactKernel::Mma2) {
    if (!tensorCores)
      throw Error(kInvalidArgument, "exactKernel 'mma2' needs a GPU of compute capability 8.0 or newer", "RangeError");
    return Tile::Mma2;
  }
  // Codes under 128 bits would be padded to 256 for the MMA: scalar popcount wins there.
  return tensorCores && bits >= 128 ? Tile::Mma2 : Tile::Popc;
}

void BuildCuda(HostIndex& ix, int device, Timing* timing) {
  gpu::DeviceGuard guard(device);
  gpu::Stream stream;
  DeviceIndex& d = Upload(ix, device, stream, timing);
  d.built = false;
  BuildOnDevice(ix, d, stream, timing);
}

void SearchExactCuda(HostIndex& ix, const BitsView& queries, uint32_t k, ExactKernel kernel, uint32_t* ids,
                     uint16_t* dist, int device, Timing* timing, const CancelToken& cancel) {
  gpu::DeviceGuard guard(device);
  gpu::Stream stream;
  DeviceIndex& d = Ready(ix, device, stream, timing);
  const Tile tile = ChooseTile(kernel, ix.bits, device);
  const uint64_t n = d.rows;
  const uint32_t bins = ix.bits + 1, kk = uint32_t(std::min<uint64_t>(k, n));
  // The k-th distance within a sample bounds the true k-th distance from above.
  // Sized so that about 512 rows per query fall within the bound: they fit the
  // fast path's buffer, and the sample costs ~k/512 of a full pass.
  const uint64_t sample = std::min<uint64_t>(n, std::max<uint64_t>({8192, 64ull * k, (uint64_t(k) * n + 511) / 512}));
  const uint32_t stride = uint32_t(n / sample);  // n < 2^32: ids are 32-bit
  const uint64_t perQuery = uint64_t(bins) * 4 + uint64_t(k) * 8 + kTieCap * 4 + uint64_t(d.wp) * 16 + 48 +
                            uint64_t(k) * 6 + uint64_t(kCandCap) * 8;
  const uint32_t batch = BatchSize(queries.rows, perQuery, device, 1u << 16);
  QueryBatch& qb = d.exQueries;
  QueryBatch sub;
  qb.codes.reserve(uint64_t(batch) * d.wp, "hamming queries");
  qb.pops.reserve(batch, "hamming query popcounts");
  auto& hist = d.exHist;
  auto& bound = d.exBound;
  auto& candCnt = d.exCandCnt;
  auto& cand = d.exCand;
  auto& outIds = d.exOutIds;
  auto& outDist = d.exOutDist;
  hist.reserve(uint64_t(batch) * bins, "hamming distance histograms");
  bound.reserve(batch, "hamming bounds");
  candCnt.reserve(batch, "hamming candidate counts");
  cand.reserve(uint64_t(batch) * kCandCap, "hamming bounded candidates");
  outIds.reserve(uint64_t(batch) * k, "hamming result ids");
  outDist.reserve(uint64_t(batch) * k, "hamming result distances");
  // Only the rare overflowing queries need these: allocated on first use, sized for the whole batch
  // as BatchSize budgeted, so that the common search pays for no extra allocations.
  gpu::DeviceBuffer<uint32_t> thr, below, lessCnt, tieCnt, ties;
  gpu::DeviceBuffer<unsigned long long> less;
  std::vector<uint32_t> counts(batch), redo, subIds;
  std::vector<uint16_t> subDist;
  const size_t finalShared = size_t(d.wp) * 4;

  // mma2 bounds the sample's k-th distance level by level: the k-th distance among every
  // r^L-th sampled row (a subset of every r^(L-1)-th, ..., of the sample) bounds the next
  // level's, whose histogram then counts only the pairs within it (~k*r per query). The
  // final bound equals one full histogram of the sample for ~S/r^L + L*k*r global atomics
  // per query instead of S (4M x 512, top-50: ~3e3 instead of 4e5).
  std::vector<uint64_t> levels;  // row steps within the sample, coarsest first
  for (int L = 2; L >= 1 && tile == Tile::Mma2 && levels.empty(); --L) {
    auto fits = [&](uint64_t r) {
      uint64_t p = kk;
      for (int i = 0; i <= L; ++i) p *= r;
      return p <= sample;
    };
    uint64_t r = 1;
    while (fits(r + 1)) ++r;
    if (r < 4) continue;  // r^(L+1) * k <= S with r >= 4 keeps every level >= 4k rows
    uint64_t f = 1;
    for (int i = 0; i < L; ++i) f *= r;
    for (; f > 1; f /= r) levels.push_back(f);
  }
  auto sampleBound = [&](const QueryBatch& b, uint32_t nb) {
    CUSIM_CUDA_CHECK(cudaMemsetAsync(hist.data(), 0, uint64_t(nb) * bins * 4, stream));
    for (size_t i = 0; i < levels.size(); ++i) {
      if (i == 0)
        LaunchTile(tile, d, sample / levels[i], uint32_t(levels[i]), stride, b, nb, HistAll{hist.data(), bins}, stream);
      else
        LaunchTile(tile, d, sample / levels[i], uint32_t(levels[i]), stride, b, nb,
                   HistBound{hist.data(), bins, bound.data()}, stream);
      ThresholdKernel<<<(nb + 255) / 256, 256, 0, stream>>>(hist.data(), bins, nb, kk, bound.data(), nullptr);
      CUSIM_LAUNCH_CHECK();
      CUSIM_CUDA_CHECK(cudaMemsetAsync(hist.data(), 0, uint64_t(nb) * bins * 4, stream));
    }
    if (levels.empty())
      LaunchTile(tile, d, sample, 1, stride, b, nb, HistAll{hist.data(), bins}, stream);
    else
      LaunchTile(tile, d, sample, 1, stride, b, nb, HistBound{hist.data(), bins, bound.data()}, stream);
    ThresholdKernel<<<(nb + 255) / 256, 256, 0, stream>>>(hist.data(), bins, nb, kk, bound.data(), nullptr);
    CUSIM_LAUNCH_CHECK();
  };
  // Exact for any input: a bounded histogram finds the k-th distance D, then
  // d < D and the ties at D are collected and sorted per query.
  auto histogramPasses = [&](const QueryBatch& b, uint32_t nb) {
    thr.reserve(batch, "hamming thresholds");
    below.reserve(batch, "hamming counts below");
    lessCnt.reserve(batch, "hamming less counts");
    tieCnt.reserve(batch, "hamming tie counts");
    less.reserve(uint64_t(batch) * k, "hamming candidates");
    ties.reserve(uint64_t(batch) * kTieCap, "hamming ties");
    sampleBound(b, nb);
    CUSIM_CUDA_CHECK(cudaMemsetAsync(hist.data(), 0, uint64_t(nb) * bins * 4, stream));
    LaunchTile(tile, d, n, 1, 1, b, nb, HistBound{hist.data(), bins, bound.data()}, stream);
    ThresholdKernel<<<(nb + 255) / 256, 256, 0, stream>>>(hist.data(), bins, nb, kk, thr.data(), below.data());
    CUSIM_LAUNCH_CHECK();
    CUSIM_CUDA_CHECK(cudaMemsetAsync(lessCnt.data(), 0, uint64_t(nb) * 4, stream));
    CUSIM_CUDA_CHECK(cudaMemsetAsync(tieCnt.data(), 0, uint64_t(nb) * 4, stream));
    LaunchTile(tile, d, n, 1, 1, b, nb, Collect{thr.data(), lessCnt.data(), less.data(), k, tieCnt.data(), ties.data()},
               stream);
    FinalizeKernel<<<nb, kThreads, finalShared, stream>>>(d.codes.data(), d.wp, n, b.codes.data(), thr.data(),
                                                          lessCnt.data(), less.data(), tieCnt.data(), ties.data(), k,
                                                          ix.bits, outIds.data(), outDist.data());
    CUSIM_LAUNCH_CHECK();
  };

  for (uint64_t q0 = 0; q0 < queries.rows; q0 += batch) {
    cancel.check();
    cancel.report(q0, queries.rows);
    const uint32_t nb = uint32_t(std::min<uint64_t>(batch, queries.rows - q0));
    gpu::Event t[4];
    t[0].record(stream);
    UploadQueries(qb, queries, q0, nb, d.wp, device, stream);
    t[1].record(stream);
    sampleBound(qb, nb);
    gpu::Event stage[2];  // sample | scan | sort, for the split of kernelMs
    stage[0].record(stream);
    CUSIM_CUDA_CHECK(cudaMemsetAsync(candCnt.data(), 0, uint64_t(nb) * 4, stream));
    LaunchTile(tile, d, n, 1, 1, qb, nb, CollectBound{bound.data(), candCnt.data(), cand.data()}, stream);
    stage[1].record(stream);
    SortCandidatesKernel<<<nb, kThreads, 0, stream>>>(candCnt.data(), cand.data(), n, k, ix.bits, outIds.data(),
                                                      outDist.data());
    CUSIM_LAUNCH_CHECK();
    FinishBatch(t, ids, dist, q0, nb, k, outIds.data(), outDist.data(), candCnt.data(), counts.data(), stream, timing);
    if (timing) {
      timing->exactSampleMs += gpu::ElapsedMs(t[1], stage[0]);
      timing->exactScanMs += gpu::ElapsedMs(stage[0], stage[1]);
      timing->exactSortMs += gpu::ElapsedMs(stage[1], t[2]);
    }
    // Queries whose bounded set overflowed (heavy ties, skewed data) go through the histogram passes.
    redo.clear();
    for (uint32_t i = 0; i < nb; ++i)
      if (counts[i] > kCandCap) redo.push_back(i);
    if (redo.empty()) continue;
    const uint32_t w = queries.wordsPerRow(), ns = uint32_t(redo.size());
    std::vector<uint32_t> gathered(uint64_t(ns) * w);
    for (uint32_t i = 0; i < ns; ++i)
      std::copy(queries.words + (q0 + redo[i]) * w, queries.words + (q0 + redo[i] + 1) * w,
                gathered.begin() + uint64_t(i) * w);
    BitsView gv{gathered.data(), ns, queries.bits};
    sub.codes.reserve(uint64_t(batch) * d.wp, "hamming redo queries");
    sub.pops.reserve(batch, "hamming redo query popcounts");
    gpu::Event r0, r1;
    UploadQueries(sub, gv, 0, ns, d.wp, device, stream);
    r0.record(stream);
    histogramPasses(sub, ns);
    r1.record(stream);
    subIds.resize(uint64_t(ns) * k);
    subDist.resize(uint64_t(ns) * k);
    CUSIM_CUDA_CHECK(
        cudaMemcpyAsync(subIds.data(), outIds.data(), uint64_t(ns) * k * 4, cudaMemcpyDeviceToHost, stream));
    CUSIM_CUDA_CHECK(
        cudaMemcpyAsync(subDist.data(), outDist.data(), uint64_t(ns) * k * 2, cudaMemcpyDeviceToHost, stream));
    stream.sync();
    if (timing) {
      const float ms = gpu::ElapsedMs(r0, r1);
      timing->kernelMs += ms;
      timing->exactRedoMs += ms;
      timing->exactRedoQueries += ns;
    }
    for (uint32_t i = 0; i < ns; ++i) {
      std::copy(subIds.begin() + uint64_t(i) * k, subIds.begin() + uint64_t(i + 1) * k, ids + (q0 + redo[i]) * k);
      std::copy(subDist.begin() + uint64_t(i) * k, subDist.begin() + uint64_t(i + 1) * k, dist + (q0 + redo[i]) * k);
    }
  }
}

// Scores of one query batch into `scores` (nb x n), after uploading the queries.
void ScoreBatch(const HostIndex& ix, const DeviceIndex& d, QueryBatch& qb, gpu::DeviceBuffer<uint32_t>& qkeys,
                uint32_t* scores, uint32_t nb, cudaStream_t stream) {
  const EwhParams& p = ix.params;
  const uint32_t probes = uint32_t(d.masks.size());
  QueryKeysKernel<<<(nb * p.tables + 255) / 256, 256, 0, stream>>>(qb.codes.data(), nb, d.wp, d.positions.data(),
                                                                   p.tables, p.keyBits, qkeys.data());
  CUSIM_LAUNCH_CHECK();
  CUSIM_CUDA_CHECK(cudaMemsetAsync(scores, 0, uint64_t(nb) * d.rows * 4, stream));
  dim3 grid(p.tables * probes, nb);
  ScoreKernel<<<grid, kThreads, 0, stream>>>(qkeys.data(), d.offsets.data(), d.ids.data(), d.masks.data(),
                                             d.maskWeights.data(), probes, p.tables, p.keyBits, d.rows, scores);
  CUSIM_LAUNCH_CHECK();
}

void ScoresCuda(HostIndex& ix, const BitsView& queries, uint32_t* scores, int device) {
  gpu::DeviceGuard guard(device);
  gpu::Stream stream;
  DeviceIndex& d = Ready(ix, device, stream, nullptr);
  const uint32_t batch = BatchSize(queries.rows, d.rows * 4 + d.wp * 8 + 64 * 4, device, 65535);
  QueryBatch qb;
  qb.codes.reset(uint64_t(batch) * d.wp, "ewh queries");
  qb.pops.reset(batch, "ewh query popcounts");
  gpu::DeviceBuffer<uint32_t> qkeys(uint64_t(batch) * ix.params.tables, "ewh query keys");
  gpu::DeviceBuffer<uint32_t> dScores(uint64_t(batch) * d.rows, "ewh scores");
  for (uint64_t q0 = 0; q0 < queries.rows; q0 += batch) {
    const uint32_t nb = uint32_t(std::min<uint64_t>(batch, queries.rows - q0));
    UploadQueries(qb, queries, q0, nb, d.wp, device, stream);
    ScoreBatch(ix, d, qb, qkeys, dScores.data(), nb, stream);
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(scores + q0 * d.rows, dScores.data(), uint64_t(nb) * d.rows * 4,
                                     cudaMemcpyDeviceToHost, stream));
    stream.sync();
  }
}

void SearchEwhCuda(HostIndex& ix, const BitsView& queries, uint32_t k, uint32_t* ids, uint16_t* dist, int device,
                   Timing* timing, const CancelToken& cancel) {
  gpu::DeviceGuard guard(device);
  gpu::Stream stream;
  DeviceIndex& d = Ready(ix, device, stream, timing);
  const EwhParams& p = ix.params;
  const uint64_t n = d.rows;
  const uint32_t bins = ix.bits + 1;
  const uint64_t perQuery = n * 8 + uint64_t(bins) * 4 + uint64_t(d.wp) * 8 + uint64_t(k) * 6 + p.tables * 4 + 16;
  const uint32_t batch = BatchSize(queries.rows, perQuery, device, 4096);
  QueryBatch qb;
  qb.codes.reset(uint64_t(batch) * d.wp, "ewh queries");
  qb.pops.reset(batch, "ewh query popcounts");
  gpu::DeviceBuffer<uint32_t> qkeys(uint64_t(batch) * p.tables, "ewh query keys");
  gpu::DeviceBuffer<uint32_t> scores(uint64_t(batch) * n, "ewh scores");
  gpu::DeviceBuffer<uint32_t> cand(uint64_t(batch) * n, "ewh shortlist");
  gpu::DeviceBuffer<uint32_t> candCount(batch, "ewh shortlist sizes");
  gpu::DeviceBuffer<uint32_t> hist(uint64_t(batch) * bins, "ewh distance histograms");
  gpu::DeviceBuffer<unsigned long long> scored(1, "ewh scored counter");
  gpu::DeviceBuffer<uint32_t> outIds(uint64_t(batch) * k, "ewh result ids");
  gpu::DeviceBuffer<uint16_t> outDist(uint64_t(batch) * k, "ewh result distances");
  std::vector<uint32_t> counts(batch);
  CUSIM_CUDA_CHECK(cudaMemsetAsync(scored.data(), 0, 8, stream));
  const uint32_t minCut = uint32_t(std::max<int32_t>(p.minScore, 0));
  for (uint64_t q0 = 0; q0 < queries.rows; q0 += batch) {
    cancel.check();
    cancel.report(q0, queries.rows);
    const uint32_t nb = uint32_t(std::min<uint64_t>(batch, queries.rows - q0));
    gpu::Event t[4];
    t[0].record(stream);
    UploadQueries(qb, queries, q0, nb, d.wp, device, stream);
    t[1].record(stream);
    ScoreBatch(ix, d, qb, qkeys, scores.data(), nb, stream);
    ShortlistKernel<<<nb, kThreads, 0, stream>>>(scores.data(), n, p.shortlist, minCut, cand.data(), candCount.data(),
                                                 scored.data());
    CUSIM_LAUNCH_CHECK();
    CUSIM_CUDA_CHECK(cudaMemsetAsync(hist.data(), 0, uint64_t(nb) * bins * 4, stream));
    RerankKernel<<<nb, kThreads, size_t(d.wp) * 4, stream>>>(d.codes.data(), d.wp, n, qb.codes.data(), cand.data(),
                                                             candCount.data(), hist.data(), k, ix.bits, outIds.data(),
                                                             outDist.data());
    CUSIM_LAUNCH_CHECK();
    FinishBatch(t, ids, dist, q0, nb, k, outIds.data(), outDist.data(), candCount.data(), counts.data(), stream,
                timing);
    if (timing)
      for (uint32_t i = 0; i < nb; ++i) timing->shortlisted += counts[i];
  }
  unsigned long long total = 0;
  CUSIM_CUDA_CHECK(cudaMemcpy(&total, scored.data(), 8, cudaMemcpyDeviceToHost));
  if (timing) timing->scored = total;
}

class CudaSearcher final : public Searcher {
 public:
  CudaSearcher(int device, ExactKernel exactKernel) : device_(device), exactKernel_(exactKernel) {}
  void Build(HostIndex& index, Timing* timing) override { BuildCuda(index, device_, timing); }
  void Search(HostIndex& index, const BitsView& queries, uint32_t k, uint32_t* ids, uint16_t* dist, Timing* timing,
              const CancelToken& cancel) override {
    if (index.ewh)
      SearchEwhCuda(index, queries, k, ids, dist, device_, timing, cancel);
    else
      SearchExactCuda(index, queries, k, exactKernel_, ids, dist, device_, timing, cancel);
  }
  void Scores(HostIndex& index, const BitsView& queries, uint32_t* scores) override {
    ScoresCuda(index, queries, scores, device_);
  }

 private:
  const int device_;
  const ExactKernel exactKernel_;
};

}  // namespace

std::unique_ptr<Searcher> MakeCudaSearcher(int device, ExactKernel exactKernel) {
  return std::make_unique<CudaSearcher>(device, exactKernel);
}

std::vector<std::string> GpuKernelFamilies(bool tensorCores) {
  if (tensorCores) return {"mma2", "popc"};
  return {"popc"};
}

}  // namespace hamming
}  // namespace cusim
