// Kernel-family choice and launch plans (Plan): which family runs a call, and
// its shared memory, grid and batch sizes, from the shape, the GPU and tuning.
// Internal to cuda/flyhash.cu, which includes every family header: one
// translation unit, so the kernels keep internal linkage.
#pragma once
#include "fallback.cuh"
#include "fused.cuh"
#include "mma.cuh"
#include "mma_float.cuh"
#include "tile.cuh"

namespace cusim {
namespace flyhash {
namespace {

enum class Kind { TileLarge, Fused, TwoPass, Mma, MmaQ8 };

const char* KindName(Kind k) {
  switch (k) {
    case Kind::TileLarge: return "tile-large";
    case Kind::Fused: return "fused";
    case Kind::Mma: return "mma-u8";
    case Kind::MmaQ8: return "mma-q8";
    default: return "two-pass";
  }
}

struct Plan {
  Kind kind = Kind::Fused;
  int R = 1;
  unsigned threads = 1024;
  size_t smem = 0;  // dynamic shared memory per block
  unsigned grid = 1;
  uint64_t batch = 1;  // rows per batch
  // TileLarge: sample size, window ranks in the sample (0: unbounded), list capacity per row.
  uint32_t S = 0, hiRank = 0, loRank = 0, cap = 0;
  // TileLarge: column chunks (1: the whole row fits) and columns per chunk.
  uint32_t chunks = 1, chunkLen = 0;
  // Mma: bytes per staged row (d rounded up to a k-step of 32), and how many
  // MmaKernel blocks run at once on the whole GPU.
  uint32_t kp = 0, slots = 0;
  // Mma: list keys ListKernel's (and RefineKernel's) warps stage in shared
  // memory (a row with a longer list reads device memory; sized for a
  // typical row, so that more blocks fit).
  uint32_t listStage = 0;
  // MmaQ8: keys RefineKernel's warps stage, and rows per ExactKernel block
  // (0: RefineKernel computes the exact keys and selects itself).
  uint32_t refineStage = 0, exactRows = 1;
  bool stageB = false;  // Mma: MmaKernel stages each group's words in shared memory
  size_t ExactSmem(uint32_t d) const { return size_t(std::max<uint32_t>(exactRows, 1)) * d * 4; }
};

// Keys a row kernel's warp stages in shared memory: up to 4096 (128 KB per
// block of 8 warps).
inline uint32_t RowStage(uint32_t n) { return std::min<uint32_t>(n, 4096); }

template <typename Idx>
void SetSmem(const Plan& pl) {
  if (pl.kind == Kind::Fused) {
    auto f = pl.R == 4 ? FusedKernel<4, Idx> : pl.R == 2 ? FusedKernel<2, Idx> : FusedKernel<1, Idx>;
    CUSIM_CUDA_CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, int(pl.smem)));
  } else if (pl.kind == Kind::TwoPass && pl.smem > 0) {
    auto f = pl.R == 4   ? ActivateKernel<4, Idx, false>
             : pl.R == 2 ? ActivateKernel<2, Idx, false>
                         : ActivateKernel<1, Idx, false>;
    CUSIM_CUDA_CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, int(pl.smem)));
  } else if (pl.kind == Kind::TileLarge) {
    CUSIM_CUDA_CHECK(cudaFuncSetAttribute(TileLargeKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(pl.smem)));
  } else if (pl.kind == Kind::Mma || pl.kind == Kind::MmaQ8) {
    for (auto f : {MmaKernel<true, 8, false>, MmaKernel<false, 8, false>, MmaKernel<true, 16, false>,
                   MmaKernel<false, 16, false>, MmaKernel<true, 8, true>, MmaKernel<false, 8, true>,
                   MmaKernel<true, 16, true>, MmaKernel<false, 16, true>})
      CUSIM_CUDA_CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, int(pl.smem)));
    const int listSmem = int(pl.listStage * kRowWarps * 4);
    CUSIM_CUDA_CHECK(cudaFuncSetAttribute(ListKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, listSmem));
    if (pl.kind == Kind::MmaQ8) {
      CUSIM_CUDA_CHECK(cudaFuncSetAttribute(RefineKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            int(pl.refineStage * kRowWarps * 4)));
      CUSIM_CUDA_CHECK(
          cudaFuncSetAttribute(ExactKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(pl.ExactSmem(pl.kp))));
    }
  }
}

constexpr uint64_t kStagingBytes = uint64_t(64) << 20;  // input bytes per batch
// TileLarge window lists per batch: at the largest m a row lists many
// thousands of keys, and a batch must still hold a wave of 32-row tiles.
constexpr uint64_t kListBytes = uint64_t(1) << 30;
// Chunked TileLarge partial sums per batch: a wave of tiles of wide rows
// (CIFAR's shape) must fit.
constexpr uint64_t kPartBytes = uint64_t(2) << 30;

// Shared memory of the tile kernels (0 when they cannot run: 16-bit indices).
// AllKeysSmem: a tile holding the keys of all m outputs of its 32 rows, which
// fits only for small m, where the fused kernel is faster.
size_t AllKeysSmem(const Params& p) {
  return Align16(uint64_t(p.d) * kTile * 4) + uint64_t(p.m) * kKeyStride * 4 + 32 * 256 * 4;
}
size_t TileLargeSmem(uint32_t len, uint32_t S) {
  return Align16(uint64_t(len) * kTile * 4) + uint64_t(S) * kKeyStride * 4 + 32 * 256 * 4;
}

// TileLarge's column chunks: the whole row when its tile fits beside a sample
// of 64 outputs, else the fewest chunks (<= kMaxChunks) that leave room for a
// sample of 256. Returns columns per chunk (0: no fit) and sets *count.
uint32_t ChunkLen(const Params& p, size_t limit, uint32_t* count) {
  *count = 1;
  if (TileLargeSmem(p.d, std::min<uint32_t>(p.m, 64)) <= limit) return p.d;
  const size_t fixed = TileLargeSmem(0, std::min<uint32_t>(p.m, 256));
  if (fixed >= limit) return 0;
  const uint64_t maxLen = (limit - fixed) / (kTile * 4);
  if (maxLen == 0) return 0;
  const uint64_t c = (p.d + maxLen - 1) / maxLen;
  if (c > kMaxChunks) return 0;
  const uint32_t len = uint32_t((p.d + c - 1) / c);
  *count = (p.d + len - 1) / len;  // so the last chunk is not empty
  return len;
}

template <typename Idx>
Plan FusedPlan(const Params& p, size_t limit, int sms, Output o, const Tuning& tuning) {
  Plan pl;
  pl.threads = p.m >= 8192 ? 1024 : p.m >= 2048 ? 512 : 256;
  pl.kind = Kind::TwoPass;
  // tuning.maxRowsPerBlock caps rows per block (more rows share each index
  // load; fewer leave room for a second resident block).
  const int maxR = std::max(1, tuning.maxRowsPerBlock);
  for (int R : {4, 2, 1}) {
    if (R > maxR) continue;
    const size_t need = Align16(uint64_t(p.d) * R * 4) + uint64_t(R) * p.m * 4;
    if (need <= limit) {
      pl.kind = Kind::Fused;
      pl.R = R;
      pl.smem = need;
      break;
    }
  }
  const uint64_t rowBytes = uint64_t(p.d) * 4 + OutStride(p, o) * 4;
  uint64_t batch = std::max<uint64_t>(1, kStagingBytes / rowBytes);
  if (pl.kind == Kind::Fused) {
    SetSmem<Idx>(pl);
    int perSm = 0;
    auto f = pl.R == 4 ? FusedKernel<4, Idx> : pl.R == 2 ? FusedKernel<2, Idx> : FusedKernel<1, Idx>;
    CUSIM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, f, int(pl.threads), pl.smem));
    if (perSm < 1) perSm = 1;
    pl.grid = unsigned(sms * perSm);
  } else {
    pl.threads = 256;
    pl.R = 1;
    pl.smem = 0;  // 0: rows are read from device memory
    for (int R : {4, 2, 1}) {
      if (Align16(uint64_t(p.d) * R * 4) <= limit) {
        pl.R = R;
        pl.smem = Align16(uint64_t(p.d) * R * 4);
        break;
      }
    }
    SetSmem<Idx>(pl);
    // The keys of a batch live in device memory; 128 MB per slot keeps a good
    // part of them in L2 between the select kernel's passes while still giving
    // it a few hundred rows (blocks) per launch at m ~ 100k.
    batch = std::min<uint64_t>(batch, std::max<uint64_t>(4, (uint64_t(128) << 20) / (uint64_t(p.m) * 4)));
    pl.grid = unsigned(sms * 2);
  }
  pl.batch = batch;
  return pl;
}

// Window ranks within a sample of pl.S outputs and the list capacity.
void SetWindow(const Params& p, Plan& pl, double sigmas) {
  // Rank of the k-th largest output within the sample ~ Binomial(S, k/m):
  // bracket it by `sigmas` standard deviations (+2): a row misses (and goes
  // to the exact fallback) with probability ~1e-6 at 5, ~6e-5 at 4.
  const double pr = double(p.k) / p.m, q = pl.S * pr;
  const double delta = sigmas * std::sqrt(pl.S * pr * (1.0 - pr)) + 2.0;
  pl.hiRank = q - delta >= 1.0 ? uint32_t(std::floor(q - delta)) : 0;
  pl.loRank = q + delta <= pl.S ? uint32_t(std::ceil(q + delta)) : 0;
  const double span = double(pl.loRank ? pl.loRank : pl.S) - double(pl.hiRank);
  const double expected = double(p.m) * span / pl.S;
  pl.cap = uint32_t(std::min<double>(p.m, 2.0 * expected + 256.0));
}

inline uint32_t MmaKp(const Params& p) { return (p.d + 31) / 32 * 32; }

// Quantized float rows also list the outputs within M of the window's edges
// (see QuantizeKernel): ~2 M times the density of Q at the k-th largest.
// Estimated for values spread like uniform ones (Q's standard deviation
// ~192 sqrt(s / 12) units of Δ, M ~ s + 2) at a normal quantile; rows that
// list more go to the exact path.
double QuantExtra(const Params& p) {
  const double pr = double(p.k) / p.m;
  double zl = -12.0, zh = 12.0;  // z with upper tail pr
  for (int it = 0; it < 60; ++it) {
    const double z = 0.5 * (zl + zh);
    (0.5 * std::erfc(z / std::sqrt(2.0)) > pr ? zl : zh) = z;
  }
  const double z = 0.5 * (zl + zh), density = std::exp(-0.5 * z * z) / std::sqrt(2.0 * 3.141592653589793);
  return double(p.m) * density * 2.0 * (p.s + 2.0) / (192.0 * std::sqrt(p.s / 12.0));
}

// The tensor-core path (byte-valued X, or quantized floats when quant).
// Samples of m / 12 outputs, between 224 and 2048 (all of m when m <= 224):
// the sample pass costs S / m of the main pass, and the window, so the
// lists, shrink as 1 / sqrt(S); these bounds were the fastest on the paper
// shapes (docs/perf/flyhash.md). 2048 is also what WindowKernel holds in
// registers.
Plan MmaPlan(const Params& p, uint64_t rows, int sms, size_t limit, Output o, bool quant, const Tuning& tuning) {
  Plan pl;
  pl.kind = quant ? Kind::MmaQ8 : Kind::Mma;
  pl.kp = MmaKp(p);
  pl.S = p.m <= 224 ? p.m : std::min<uint32_t>(2048, std::max<uint32_t>(224, p.m / 12 / 32 * 32));
  // A narrower window than TileLarge's: every listed key costs the main
  // kernel an append and the list select a read per pass, while a missed row
  // (~6e-5 of them) costs one exact per-row pass.
  SetWindow(p, pl, 4.0);
  double expected = std::max(0.0, (double(pl.cap) - 256.0) / 2.0);  // SetWindow's cap = 2 expected + 256
  if (quant) {
    expected += QuantExtra(p);
    pl.cap = uint32_t(std::min<double>(p.m, 2.0 * expected + 256.0));
  }
  pl.listStage = std::min<uint32_t>(pl.cap, RowStage(uint32_t(expected * 1.25 + 64)));
  // ExactKernel: about two undecided outputs per thread (CIFAR ~3500 a row:
  // a block of 256 per row; 1M x 128 ~10: 8 rows a block).
  if (quant) {
    const double open = QuantExtra(p);
    pl.exactRows = open >= 512 ? 1 : open >= 256 ? 2 : open >= 128 ? 4 : open >= 32 ? 8 : 0;
    // tuning.exactRows: either way on any shape (tests).
    if (tuning.exactRows >= 0) {
      const uint32_t v = uint32_t(tuning.exactRows);
      pl.exactRows = v >= 8 ? 8 : v >= 4 ? 4 : v >= 2 ? 2 : v;
    }
    // ListKernel selects among the undecided only.
    pl.listStage = std::min<uint32_t>(pl.cap, RowStage(uint32_t(open * 1.25 + 64)));
    // Staged keys only where the list is short: staging long lists leaves
    // room for one block per SM, slower than reading device memory with
    // eight.
    const uint32_t want = uint32_t(expected * 1.25 + 64);
    pl.refineStage = want <= 2048 ? want : 0;
  }
  // Staged keys share a block's opt-in shared memory with the row kernels'
  // static histograms: 99 KB on sm_86/89/120 holds fewer than RowStage's 4096.
  const uint32_t stageCap = uint32_t((limit - sizeof(uint32_t) * kRowWarps * 256) / (sizeof(uint32_t) * kRowWarps));
  pl.listStage = std::min(pl.listStage, stageCap);
  pl.refineStage = std::min(pl.refineStage, stageCap);
  pl.grid = unsigned(std::min<uint64_t>(sms, rows));  // FallbackKernel's blocks
  // Launch shape, the first that keeps 16 warps on a multiprocessor: two
  // blocks of 8 with the words staged in shared memory, two without, one
  // block of 16 staged, one without (wide rows leave no room to stage).
  // tuning.stageProjection = 0 / 1: never / only staged shapes.
  const int stageKnob = tuning.stageProjection;
  int perSm = 0;
  for (const auto& [warps, stage, blocks] :
       {std::tuple{8u, true, 2}, std::tuple{8u, false, 2}, std::tuple{16u, true, 1}, std::tuple{16u, false, 1}}) {
    const bool last = warps == 16 && !stage;
    if (!last && stageKnob >= 0 && stage != (stageKnob == 1)) continue;
    pl.threads = warps * 32;
    pl.stageB = stage;
    pl.smem = MmaSmem(pl.kp, warps, stage);
    if (pl.smem > limit && !last) continue;
    SetSmem<uint16_t>(pl);
    CUSIM_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, MmaFor<false>(warps, stage), int(pl.threads), pl.smem));
    if (perSm >= blocks) break;
  }
  pl.slots = uint32_t(std::max(1, perSm) * sms);
  // Rows per batch: what 64 MB of staging holds, but at least a tile per
  // block slot (wide rows such as CIFAR's would otherwise leave slots idle
  // and time unsteady), within the memory for lists (cap keys and indices
  // per row) and sample keys.
  size_t freeB = 0, totalB = 0;
  CUSIM_CUDA_CHECK(cudaMemGetInfo(&freeB, &totalB));
  // Quantized floats arrive as floats and are kept beside their bytes.
  const uint64_t rowBytes = (quant ? uint64_t(p.d) * 4 : pl.kp) + OutStride(p, o) * 4;
  uint64_t batch = std::max<uint64_t>(uint64_t(pl.slots) * kMmaRows, kStagingBytes / rowBytes / kMmaRows * kMmaRows);
  const uint64_t listBytes = std::min<uint64_t>(2 * kListBytes, freeB / 8);
  batch = std::min<uint64_t>(
      batch,
      std::max<uint64_t>(kMmaRows, listBytes / (uint64_t(pl.cap) * 8 + uint64_t(pl.S) * 4) / kMmaRows * kMmaRows));
  // tuning.batchRows: small batches, so tests drive both streams with few rows.
  if (tuning.batchRows > 0)
    batch = std::min<uint64_t>(batch, std::max<uint64_t>(1, tuning.batchRows / kMmaRows) * kMmaRows);
  pl.batch = std::min<uint64_t>(batch, rows);
  return pl;
}

// Blocks per row tile (each takes every slices-th group of 32 outputs per
// warp). Every block does the same work, so a launch of B blocks takes
// ceil(B / slots) rounds: a tile count just above the slots would double the
// time. Picks the split with the least
// idle time, counting uneven group shares too; fewer slices on near ties
// (each slice reloads the tile).
unsigned MmaSlices(uint64_t tiles, uint32_t cols, uint32_t slots, uint32_t warps) {
  const uint64_t groups = (uint64_t(cols) + 31) / 32;
  const uint64_t maxS = std::max<uint64_t>(1, std::min<uint64_t>(64, (groups + warps - 1) / warps));
  unsigned best = 1;
  double bestEff = 0;
  for (uint64_t sl = 1; sl <= maxS; ++sl) {
    const uint64_t blocks = tiles * sl, rounds = (blocks + slots - 1) / slots;
    const double share = double(groups) / double(warps * sl);
    const double eff = double(blocks) / double(rounds * slots) * share / std::ceil(share);
    if (eff > bestEff + 0.02) {
      best = unsigned(sl);
      bestEff = eff;
    }
  }
  return best;
}

template <typename Idx>
Plan MakePlan(const Params& p, uint64_t rows, int device, Output o, bool byteValued, const Tuning& tuning) {
  const size_t limit = gpu::MaxSharedPerBlockOptin(device) - sizeof(Scratch) - 64;
  const int sms = gpu::MultiprocessorCount(device);
  const std::string& knob = tuning.kernel;
  // Tensor cores where the GPU has the kernels (sm_80+) and tuning allows.
  // Quantized floats need sums of s bytes in 31 bits and the fallback's
  // 16-bit indices (both hold wherever the tile fits).
  const bool tensorCores = tuning.tensorCores && DeviceTensorCores(device);
  if ((knob == "auto" || knob == "mma") && tensorCores && MmaSmem(MmaKp(p), 16, false) <= limit && sizeof(Idx) == 2 &&
      uint64_t(p.s) * 255 < (uint64_t(1) << 31))
    return MmaPlan(p, rows, sms, limit, o, !(byteValued && ExactForBytes(p)), tuning);
  Plan pl;
  // Tiles need 16-bit indices and, to fill the GPU, at least a wave of 32-row
  // tiles; few rows go to the fused family, which split m across blocks.
  const bool tileOk = sizeof(Idx) == 2 && knob != "fused";
  const bool enoughRows = (rows + kTile - 1) / kTile >= uint64_t(sms) || knob == "tile-large";
  const uint64_t rowBytes = uint64_t(p.d) * 4 + OutStride(p, o) * 4;
  uint64_t batch = std::max<uint64_t>(kTile, kStagingBytes / rowBytes / kTile * kTile);
  // Where all m keys of a tile fit (small m), the fused kernel with 4 rows
  // per block is faster (docs/perf/flyhash.md), so auto keeps the fused
  // family there; TileLarge runs there only when tuning.kernel asks for it.
  const bool smallFits = AllKeysSmem(p) <= limit;
  const bool autoFused = smallFits && knob != "tile-large";
  if (tileOk && enoughRows && !autoFused && ChunkLen(p, limit, &pl.chunks) > 0) {
    pl.kind = Kind::TileLarge;
    pl.chunkLen = ChunkLen(p, limit, &pl.chunks);
    // The largest sample that fits (capped at 1024): the window around the
    // sample's quantile narrows as 1/sqrt(S).
    const uint64_t room = (limit - TileLargeSmem(pl.chunkLen, 0)) / (kKeyStride * 4);
    pl.S = uint32_t(std::min<uint64_t>({uint64_t(p.m), room, 1024}));
    pl.smem = TileLargeSmem(pl.chunkLen, pl.S);
    SetWindow(p, pl, 5.0);
    // Two slots of lists: at most a quarter of what is free (smaller GPUs).
    size_t freeB = 0, totalB = 0;
    CUSIM_CUDA_CHECK(cudaMemGetInfo(&freeB, &totalB));
    const uint64_t listBytes = std::min<uint64_t>(kListBytes, freeB / 8);
    // A batch of at least a wave of tiles (wide rows: the 64 MB staging holds fewer).
    batch = std::max<uint64_t>(batch, uint64_t(sms) * kTile);
    batch = std::min<uint64_t>(batch, std::max<uint64_t>(kTile, listBytes / (uint64_t(pl.cap) * 8) / kTile * kTile));
    if (pl.chunks > 1) {
      // Partial sums: m floats per row between chunks.
      const uint64_t partBytes = std::min<uint64_t>(kPartBytes, freeB / 8);
      batch = std::min<uint64_t>(batch, std::max<uint64_t>(kTile, partBytes / (uint64_t(p.m) * 4) / kTile * kTile));
    }
  } else {
    pl = FusedPlan<Idx>(p, limit, sms, o, tuning);
    pl.batch = std::min<uint64_t>(pl.batch, rows);
    return pl;
  }
  pl.threads = 1024;
  SetSmem<Idx>(pl);
  pl.grid = unsigned(std::min<uint64_t>(sms, rows));  // FallbackKernel's blocks
  pl.batch = std::min<uint64_t>(batch, rows);
  return pl;
}

}  // namespace
}  // namespace flyhash
}  // namespace cusim
