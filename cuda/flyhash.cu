// FlyHash on one GPU. Three families of kernels (docs/perf/flyhash.md says
// why, with the arithmetic and the current numbers):
//  - tile kernels (d < 65536 and a 32-row tile of X fits in shared memory): a
//    block takes 32 rows, lane r of every warp computes row r, so each index
//    load serves 32 rows and the gathers xs[i][lane] never conflict.
//    TileLarge computes a sample of outputs first, brackets each row's k-th
//    largest, then makes one pass that writes the sure winners' bits and
//    lists the bracketed keys in device memory; a warp per row then selects
//    exactly among the listed keys. Rows whose bracket misses are flagged
//    and redone exactly by FallbackKernel.
//  - fused path, and
//  - two-pass path (fused family), for wide inputs or few rows.
// Fused path: a block takes R rows, keeps them in shared
// memory (interleaved so one vector load fetches all R values of an input),
// computes the R*m activations into shared memory as order-preserving keys,
// selects the exact k-th largest by a 4-pass radix select (8 bits a pass,
// shared-memory histograms with warp-aggregated atomics), and writes packed
// bits (one ballot per word) or sorted indices. Activations never reach device
// memory. When m keys do not fit in shared memory, a two-pass path writes the
// keys of a batch of rows to device memory and a second kernel selects from
// there with the same routine. Batches alternate between two streams with
// pinned staging, so copies of one batch overlap the kernels of the other.
// The tensor-core family (int8 MMA on byte-valued rows, or on rows quantized
// to bytes) is described in flyhash/mma.cuh and flyhash/mma_float.cuh.
//
// Layout: cuda/flyhash/ is a star. common.cuh holds what several families
// share (keys, block and warp selection, the exact activation); each family
// header (fused, tile, fallback, mma, mma_float) includes only common.cuh;
// plan.cuh includes the families, picks one and sizes its launch. All are
// compiled in this one translation unit; this file keeps the per-object GPU
// state, staging and the batch loop (Run), and the public interface.
#include "flyhash/plan.cuh"

namespace cusim {
namespace flyhash {
namespace {

// What one FlyHash object keeps on its GPU between calls: the projection in
// the layouts the kernels read (uploaded on first use) and the staging
// buffers, which only grow, so repeated calls skip cudaMallocHost/cudaMalloc
// (tens of ms for the 64 MB pinned slots). Freed by dispose().
struct FlyState {
  int device = -1;
  gpu::DeviceBuffer<uint16_t> proj16;  // [s][m], fused-family kernels
  gpu::DeviceBuffer<uint32_t> proj32;
  gpu::DeviceBuffer<uint16_t> packed;              // [m][sPad], tile kernels
  gpu::DeviceBuffer<uint16_t> chunkTab, chunkCnt;  // chunked TileLarge (see Chunks)
  gpu::DeviceBuffer<uint32_t> projBits;            // [k-step][mPad] words, tensor-core path
  Chunks chunkInfo;
  gpu::DeviceBuffer<float> dX[2], dPart[2];
  gpu::DeviceBuffer<uint32_t> dOut[2], dKeys[2], dBits[2], dListK[2], dListJ[2], dFail[2], dScratch[2];
  gpu::DeviceBuffer<uint32_t> dRowInfo[2];  // tensor-core path: lo, hi, count, over, margin per row
  gpu::DeviceBuffer<uint8_t> dQ[2];         // tensor-core path on floats: the quantized rows
  gpu::PinnedBuffer<float> hX[2];
  gpu::PinnedBuffer<uint32_t> hOut[2];

  void releaseAll() noexcept {
    proj16.release();
    proj32.release();
    packed.release();
    chunkTab.release();
    chunkCnt.release();
    projBits.release();
    for (int i = 0; i < 2; ++i) {
      dX[i].release();
      dPart[i].release();
      dOut[i].release();
      dKeys[i].release();
      dBits[i].release();
      dListK[i].release();
      dListJ[i].release();
      dFail[i].release();
      dScratch[i].release();
      dRowInfo[i].release();
      dQ[i].release();
      hX[i].release();
      hOut[i].release();
    }
  }
  // Freed with its own device current, whichever thread drops the object.
  ~FlyState() {
    try {
      gpu::DeviceGuard guard(device);
      releaseAll();
    } catch (...) {
      releaseAll();
    }
  }
};

// The projection transposed to [s][m] (a warp's index loads are coalesced).
template <typename Idx>
const Idx* UploadProjection(const Params& p, const uint32_t* proj, gpu::DeviceBuffer<Idx>& buf) {
  if (buf.data()) return buf.data();
  std::vector<Idx> projT(uint64_t(p.m) * p.s);
  for (uint64_t j = 0; j < p.m; ++j)
    for (uint64_t t = 0; t < p.s; ++t) projT[t * p.m + j] = Idx(proj[j * p.s + t]);
  buf.reset(projT.size(), "FlyHash projection");
  CUSIM_CUDA_CHECK(cudaMemcpy(buf.data(), projT.data(), projT.size() * sizeof(Idx), cudaMemcpyHostToDevice));
  return buf.data();
}

inline uint32_t PackedStride(const Params& p) { return (p.s + 7) / 8 * 8; }

// [m][sPad] 16-bit indices, padded with index 0 (never added: TileAct stops at s).
const uint16_t* UploadPacked(const Params& p, const uint32_t* proj, gpu::DeviceBuffer<uint16_t>& buf) {
  if (buf.data()) return buf.data();
  const uint32_t sPad = PackedStride(p);
  std::vector<uint16_t> packed(uint64_t(p.m) * sPad, 0);
  for (uint64_t j = 0; j < p.m; ++j)
    for (uint64_t t = 0; t < p.s; ++t) packed[j * sPad + t] = uint16_t(proj[j * p.s + t]);
  buf.reset(packed.size(), "FlyHash packed projection");
  CUSIM_CUDA_CHECK(cudaMemcpy(buf.data(), packed.data(), packed.size() * 2, cudaMemcpyHostToDevice));
  return buf.data();
}

// Per-chunk tables for TileLarge on wide rows (layout: see Chunks). Cached
// in the state for one (count, len).
Chunks UploadChunks(const Params& p, const uint32_t* proj, uint32_t count, uint32_t len, FlyState& st) {
  if (st.chunkTab.data() && st.chunkInfo.count == count && st.chunkInfo.len == len) return st.chunkInfo;
  Chunks ch;
  ch.count = count;
  ch.len = len;
  std::vector<uint16_t> cnt(uint64_t(count) * p.m, 0);
  for (uint64_t j = 0; j < p.m; ++j)
    for (uint64_t t = 0; t < p.s; ++t) ++cnt[uint64_t(proj[j * p.s + t] / len) * p.m + j];
  uint64_t total = 0;  // uint4 units
  for (uint32_t c = 0; c < count; ++c) {
    uint32_t most = 0;
    for (uint64_t j = 0; j < p.m; ++j) most = std::max<uint32_t>(most, cnt[uint64_t(c) * p.m + j]);
    ch.packs[c] = (most + 7) / 8;
    ch.off[c] = total;
    total += uint64_t(p.m) * ch.packs[c];
  }
  std::vector<uint16_t> tab(total * 8, 0);
  for (uint64_t j = 0; j < p.m; ++j) {
    uint32_t pos[kMaxChunks] = {};
    for (uint64_t t = 0; t < p.s; ++t) {  // ascending, so each chunk's part stays ascending
      const uint32_t i = proj[j * p.s + t], c = i / len;
      tab[(ch.off[c] + j * ch.packs[c]) * 8 + pos[c]++] = uint16_t(i - c * len);
    }
  }
  st.chunkTab.reset(tab.size(), "FlyHash chunked projection");
  CUSIM_CUDA_CHECK(cudaMemcpy(st.chunkTab.data(), tab.data(), tab.size() * 2, cudaMemcpyHostToDevice));
  st.chunkCnt.reset(cnt.size(), "FlyHash chunk counts");
  CUSIM_CUDA_CHECK(cudaMemcpy(st.chunkCnt.data(), cnt.data(), cnt.size() * 2, cudaMemcpyHostToDevice));
  ch.cnt = st.chunkCnt.data();
  st.chunkInfo = ch;
  return ch;
}

// The projection as bits for the tensor-core path: word (ks, j) of
// [kp / 32][mPad] has bit StoredBit(b) set when input 32 ks + b feeds output
// j; columns past m stay zero.
const uint32_t* UploadBits(const Params& p, const uint32_t* proj, uint32_t kp, FlyState& st) {
  if (st.projBits.data()) return st.projBits.data();
  const uint64_t mPad = (uint64_t(p.m) + 31) / 32 * 32;
  std::vector<uint32_t> wb(uint64_t(kp / 32) * mPad, 0);
  for (uint64_t j = 0; j < p.m; ++j)
    for (uint64_t t = 0; t < p.s; ++t) {
      const uint32_t i = proj[j * p.s + t];
      wb[uint64_t(i / 32) * mPad + WordSlot(j)] |= 1u << StoredBit(i % 32);
    }
  st.projBits.reset(wb.size(), "FlyHash projection bits");
  CUSIM_CUDA_CHECK(cudaMemcpy(st.projBits.data(), wb.data(), wb.size() * 4, cudaMemcpyHostToDevice));
  return st.projBits.data();
}

// Rows of n x d bytes, or of floats expected to hold bytes, to rows of kp
// bytes, zero-padded, on all cores. Floats are checked as they convert: false
// (the staging abandoned) as soon as one is not an integer in [0, 255] or is
// not finite.
bool StageBytes(uint8_t* dst, const uint8_t* src, uint64_t n, uint32_t d, uint32_t kp) {
  ParallelFor(n, 256, [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r) {
      std::memcpy(dst + r * kp, src + r * d, d);
      std::memset(dst + r * kp + d, 0, kp - d);
    }
  });
  return true;
}
bool StageBytes(uint8_t* dst, const float* src, uint64_t n, uint32_t d, uint32_t kp) {
  std::atomic<bool> bad{false};
  ParallelFor(n, 256, [&](size_t b, size_t e) {
    for (size_t r = b; r < e && !bad.load(std::memory_order_relaxed); ++r) {
      const float* in = src + r * d;
      uint8_t* outRow = dst + r * kp;
      uint32_t notByte = 0;
      for (uint32_t i = 0; i < d; ++i) {
        // Selects, not branches or fmin/fmax calls (which cost far more here); the
        // conversion sees only in-range values (NaN fails both compares).
        const float v = in[i];
        const bool inRange = (v >= 0.0f) & (v <= 255.0f);
        const int u = int(inRange ? v : 0.0f);
        notByte |= uint32_t(!inRange) | uint32_t(float(u) != v);
        outRow[i] = uint8_t(u);
      }
      std::memset(outRow + d, 0, kp - d);
      if (notByte) bad.store(true, std::memory_order_relaxed);
    }
  });
  return !bad.load();
}

// Whether X's first values are bytes: worth staging it as bytes on the hope
// that all of it is.
bool LooksByteValued(const DenseView& x) {
  const uint64_t n = std::min<uint64_t>(x.rows * x.cols, 4096);
  for (uint64_t i = 0; i < n; ++i) {
    const float v = x.data[i];
    if (!(v >= 0.0f && v <= 255.0f && float(int(v)) == v)) return false;
  }
  return true;
}

// Float rows to the pinned stage, checked for finiteness in the same pass:
// the first non-finite element's index, or UINT64_MAX.
uint64_t CopyFinite(float* dst, const float* src, uint64_t count) {
  constexpr uint64_t kChunk = uint64_t(1) << 19;  // 2 MB of floats
  const uint64_t chunks = (count + kChunk - 1) / kChunk;
  std::atomic<bool> bad{false};
  ParallelFor(chunks, 1, [&](size_t b, size_t e) {
    for (size_t c = b; c < e; ++c) {
      const uint64_t lo = c * kChunk, hi = std::min(count, lo + kChunk);
      uint32_t any = 0;
      for (uint64_t i = lo; i < hi; ++i) {
        const float v = src[i];
        dst[i] = v;
        uint32_t u;
        std::memcpy(&u, &v, 4);
        any |= uint32_t((u & 0x7f800000u) == 0x7f800000u);  // exponent all ones: Inf or NaN
      }
      if (any) bad.store(true, std::memory_order_relaxed);
    }
  });
  if (!bad.load()) return UINT64_MAX;
  for (uint64_t i = 0; i < count; ++i)
    if (!std::isfinite(src[i])) return i;
  return UINT64_MAX;  // X changed under the copy (the caller's array, read in place)
}

// Bytes to floats on all cores (byte input on a path that gathers floats).
void StageFloats(float* dst, const uint8_t* src, uint64_t count) {
  ParallelFor(count, 1 << 16, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) dst[i] = float(src[i]);
  });
}

template <typename Idx>
gpu::DeviceBuffer<Idx>& FusedBuffer(FlyState& st);
template <>
gpu::DeviceBuffer<uint16_t>& FusedBuffer<uint16_t>(FlyState& st) {
  return st.proj16;
}
template <>
gpu::DeviceBuffer<uint32_t>& FusedBuffer<uint32_t>(FlyState& st) {
  return st.proj32;
}

// Hashes x (rows rowBase.. of the caller's X) into out. byteValued: plan for
// byte data (true for xBytes; for floats a hope that staging checks). Returns
// the rows hashed: all of them, or, where float rows staged as bytes turn out
// not to be, the rows before that batch.
template <typename Idx>
uint64_t Run(const Params& p, const uint32_t* proj, const DenseView& x, const uint8_t* xBytes, bool byteValued,
             uint64_t rowBase, Output o, uint32_t* out, int device, const Tuning& tuning, const CancelToken& cancel,
             Timing* timing, FlyState& st) {
  PhaseLog log("flyhash cuda");
  const uint64_t rows = x.rows, stride = OutStride(p, o), words = OutStride(p, Output::Bits);
  const bool indices = o == Output::Indices;
  const Plan pl = MakePlan<Idx>(p, rows, device, o, byteValued, tuning);
  const bool quant = pl.kind == Kind::MmaQ8, mma = pl.kind == Kind::Mma || quant;
  const bool tile = pl.kind == Kind::TileLarge || mma;
  const Idx* dProj = tile ? nullptr : UploadProjection<Idx>(p, proj, FusedBuffer<Idx>(st));
  const uint16_t* dPacked = tile ? UploadPacked(p, proj, st.packed) : nullptr;  // also the fallback's
  const uint32_t* dWb = mma ? UploadBits(p, proj, pl.kp, st) : nullptr;
  const uint64_t mPad = (uint64_t(p.m) + 31) / 32 * 32;
  // Bytes of one staged row (the tensor-core path stages bytes, except for
  // float rows, which the GPU quantizes).
  const uint64_t xRowBytes = mma && !quant ? pl.kp : uint64_t(p.d) * 4;
  const uint64_t xFloats = (pl.batch * xRowBytes + 3) / 4;
  const uint32_t sPad = PackedStride(p), packs = sPad / 8, full = p.s / 8, rem = p.s % 8;
  const bool forceFail = tuning.forceFallback;
  Chunks chunks;  // TileLarge's tables: the flat one, or per column chunk
  const uint4* tables = reinterpret_cast<const uint4*>(dPacked);
  if (pl.kind == Kind::TileLarge && pl.chunks > 1) {
    chunks = UploadChunks(p, proj, pl.chunks, pl.chunkLen, st);
    tables = reinterpret_cast<const uint4*>(st.chunkTab.data());
  } else {
    chunks.len = p.d;
    chunks.packs[0] = packs;
  }
  gpu::Stream streams[2];
  for (int i = 0; i < 2; ++i) {
    st.dX[i].reserve(xFloats, "FlyHash input batch");
    st.dOut[i].reserve(pl.batch * stride, "FlyHash output batch");
    if (pl.kind == Kind::TwoPass) st.dKeys[i].reserve(pl.batch * p.m, "FlyHash activation keys");
    if (mma) {
      st.dKeys[i].reserve(pl.batch * pl.S, "FlyHash sample keys");
      st.dRowInfo[i].reserve(pl.batch * 5, "FlyHash row windows");
      if (quant) st.dQ[i].reserve(pl.batch * pl.kp, "FlyHash quantized rows");
    }
    if (pl.kind == Kind::TileLarge || mma) {
      if (indices) st.dBits[i].reserve(pl.batch * words, "FlyHash bits batch");
      st.dListK[i].reserve(pl.batch * pl.cap, "FlyHash window keys");
      st.dListJ[i].reserve(pl.batch * pl.cap, "FlyHash window indices");
      st.dFail[i].reserve(2 * pl.batch + 1, "FlyHash row flags");  // flags, count, list
      st.dScratch[i].reserve(uint64_t(kFallbackSpread + pl.grid) * p.m, "FlyHash fallback keys");
      if (pl.kind == Kind::TileLarge && pl.chunks > 1)
        st.dPart[i].reserve((pl.batch + kTile - 1) / kTile * kTile * p.m, "FlyHash partial sums");
    }
    st.hX[i].reserve(xFloats, "FlyHash pinned input");
    st.hOut[i].reserve(pl.batch * stride, "FlyHash pinned output");
  }

  struct Pending {
    bool live = false;
    uint64_t r0 = 0, n = 0;
  } pending[2];
  gpu::Event ev[8], origin;
  origin.record(streams[0]);
  log.Mark("setup");
  double transferMs = 0;
  // Each batch's kernel interval, from origin. The two streams' intervals
  // overlap (one batch's kernels wait behind or run beside the other's), so
  // the kernel time is their union, not their sum.
  std::vector<std::pair<double, double>> spans;

  auto finish = [&](int slot) {
    streams[slot].sync();
    log.Mark("wait gpu");
    Pending& pd = pending[slot];
    if (!pd.live) return;
    gpu::Event* e = &ev[slot * 4];
    transferMs += gpu::ElapsedMs(e[0], e[1]) + gpu::ElapsedMs(e[2], e[3]);
    spans.emplace_back(gpu::ElapsedMs(origin, e[1]), gpu::ElapsedMs(origin, e[2]));
    gpu::ParallelCopy(out + pd.r0 * stride, st.hOut[slot].data(), pd.n * stride * 4);
    log.Mark("copy out");
    pd.live = false;
  };

  // After TileLarge or the tensor-core path: the indices of the rows that
  // selected (their bits are complete), then the exact redo of flagged rows.
  auto finishFlagged = [&](const auto* xIn, uint32_t xStride, uint32_t* bits, uint32_t* fail, uint64_t n,
                           cudaStream_t sm, uint32_t* dOut, uint32_t* scratch) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(xIn)>>;
    if (indices) {
      BitsToIndicesKernel<<<gpu::GridFor(n * 32, 256, 65535), 256, 0, sm>>>(bits, words, fail, n, p.k, dOut);
      CUSIM_LAUNCH_CHECK();
    }
    // fail holds n flags, then the flagged rows' count and list.
    uint32_t* count = fail + n;
    CUSIM_CUDA_CHECK(cudaMemsetAsync(count, 0, 4, sm));
    FailListKernel<<<gpu::GridFor(n, 256, 1024), 256, 0, sm>>>(fail, n, count, count + 1);
    CUSIM_LAUNCH_CHECK();
    const dim3 spread(unsigned((p.m + kFallbackActKeys - 1) / kFallbackActKeys),
                      unsigned(std::min<uint64_t>(kFallbackSpread, n)));
    FallbackActKernel<T><<<spread, 256, 0, sm>>>(xIn, p.d, xStride, dPacked, sPad, p.s, p.m, count, count + 1, scratch);
    CUSIM_LAUNCH_CHECK();
    const unsigned g = unsigned(std::min<uint64_t>(pl.grid, n));
    FallbackKernel<T><<<g, 1024, 0, sm>>>(xIn, p.d, xStride, dPacked, sPad, p.s, p.m, p.k, count, count + 1, indices,
                                          dOut, stride, scratch);
    CUSIM_LAUNCH_CHECK();
  };

  uint64_t batchNo = 0, rowsDone = rows;
  for (uint64_t r0 = 0; r0 < rows; r0 += pl.batch, ++batchNo) {
    if (cancel.requested()) {
      // Let in-flight copies finish before their buffers are reused.
      streams[0].sync();
      streams[1].sync();
      cancel.check();
    }
    const int slot = int(batchNo & 1);
    finish(slot);
    const uint64_t n = std::min<uint64_t>(pl.batch, rows - r0);
    cudaStream_t sm = streams[slot];
    gpu::Event* e = &ev[slot * 4];
    float* dX = st.dX[slot].data();
    uint32_t* dOut = st.dOut[slot].data();
    // Staging on the host (all cores) overlaps the other slot's copies and
    // kernels, and is where float X is checked.
    if (mma && !quant) {
      auto* dst = reinterpret_cast<uint8_t*>(st.hX[slot].data());
      if (!(xBytes ? StageBytes(dst, xBytes + r0 * p.d, n, p.d, pl.kp)
                   : StageBytes(dst, x.data + r0 * p.d, n, p.d, pl.kp))) {
        // Not bytes after all: the rows from here go to a float plan.
        finish(slot ^ 1);
        finish(slot);
        rowsDone = r0;
        break;
      }
    } else if (xBytes) {
      StageFloats(st.hX[slot].data(), xBytes + r0 * p.d, n * p.d);  // bytes for the float kernels
    } else {
      const uint64_t bad = CopyFinite(st.hX[slot].data(), x.data + r0 * p.d, n * p.d);
      if (bad != UINT64_MAX) {
        // Copies in flight read the stage; let them land first.
        streams[0].sync();
        streams[1].sync();
        ThrowNonFinite(x.data[r0 * p.d + bad], (rowBase + r0) * p.d + bad, p.d, "X");
      }
    }
    log.Mark("stage in");
    e[0].record(sm);
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(dX, st.hX[slot].data(), n * xRowBytes, cudaMemcpyHostToDevice, sm));
    e[1].record(sm);
    const unsigned tiles = unsigned((n + kTile - 1) / kTile);
    if (pl.kind == Kind::TileLarge) {
      uint32_t* bits = indices ? st.dBits[slot].data() : dOut;
      uint32_t* fail = st.dFail[slot].data();
      Chunks ch = chunks;
      ch.part = st.dPart[slot].data();
      TileLargeKernel<<<tiles, 1024, pl.smem, sm>>>(dX, n, p.d, tables, full, rem, p.m, p.k, pl.S, pl.hiRank, pl.loRank,
                                                    pl.cap, forceFail, bits, st.dListK[slot].data(),
                                                    st.dListJ[slot].data(), fail, ch);
      CUSIM_LAUNCH_CHECK();
      finishFlagged(dX, p.d, bits, fail, n, sm, dOut, st.dScratch[slot].data());
    } else if (mma) {
      uint32_t* bits = indices ? st.dBits[slot].data() : dOut;
      uint32_t* fail = st.dFail[slot].data();
      uint32_t* lo = st.dRowInfo[slot].data();
      uint32_t *hi = lo + n, *cnt = hi + n, *over = cnt + n, *margin = quant ? over + n : nullptr;
      CUSIM_CUDA_CHECK(cudaMemsetAsync(cnt, 0, n * 8, sm));  // count and over
      const unsigned warpBlocks = unsigned((n + kRowWarps - 1) / kRowWarps);
      const uint8_t* xb = reinterpret_cast<const uint8_t*>(dX);
      if (quant) {
        QuantizeKernel<<<warpBlocks, 256, 0, sm>>>(dX, n, p.d, pl.kp, p.s, st.dQ[slot].data(), margin);
        CUSIM_LAUNCH_CHECK();
        xb = st.dQ[slot].data();
      }
      const unsigned tilesM = unsigned((n + kMmaRows - 1) / kMmaRows);
      auto slicesFor = [&](uint32_t cols) { return MmaSlices(tilesM, cols, pl.slots, pl.threads / 32); };
      const bool wide = pl.threads == 512;
      auto sampleFn = MmaFor<true>(wide ? 16 : 8, pl.stageB);
      auto mainFn = MmaFor<false>(wide ? 16 : 8, pl.stageB);
      sampleFn<<<dim3(tilesM, slicesFor(pl.S)), pl.threads, pl.smem, sm>>>(
          xb, n, pl.kp, dWb, uint32_t(mPad), pl.S, st.dKeys[slot].data(), nullptr, nullptr, 0, nullptr, 0, nullptr,
          nullptr, nullptr, nullptr);
      CUSIM_LAUNCH_CHECK();
      LaunchWindow<8>(st.dKeys[slot].data(), n, pl.S, pl.hiRank, pl.loRank, margin, lo, hi, sm);
      mainFn<<<dim3(tilesM, slicesFor(p.m)), pl.threads, pl.smem, sm>>>(
          xb, n, pl.kp, dWb, uint32_t(mPad), p.m, nullptr, lo, hi, pl.cap, bits, words, st.dListK[slot].data(),
          st.dListJ[slot].data(), cnt, over);
      CUSIM_LAUNCH_CHECK();
      const uint32_t listSmem = pl.listStage * kRowWarps * 4;
      if (quant) {
        const bool inl = pl.exactRows == 0;
        Inline in;
        if (inl) in = Inline{dX, p.d, sPad, p.s, dPacked, fail};
        RefineKernel<<<warpBlocks, 256, pl.refineStage * kRowWarps * 4, sm>>>(
            n, p.k, pl.cap, forceFail, pl.refineStage, cnt, over, st.dListK[slot].data(), st.dListJ[slot].data(), bits,
            words, margin, lo, hi, in);
        CUSIM_LAUNCH_CHECK();
        if (!inl) {
          const unsigned exactBlocks = unsigned((n + pl.exactRows - 1) / pl.exactRows);
          ExactKernel<<<exactBlocks, 256, pl.ExactSmem(p.d), sm>>>(n, pl.exactRows, pl.cap, cnt, dX, p.d, dPacked, sPad,
                                                                   p.s, st.dListJ[slot].data(), st.dListK[slot].data());
          CUSIM_LAUNCH_CHECK();
        }
      }
      if (!quant || pl.exactRows != 0) {
        ListKernel<<<warpBlocks, 256, listSmem, sm>>>(n, p.k, pl.cap, forceFail, pl.listStage, cnt, over,
                                                      st.dListK[slot].data(), st.dListJ[slot].data(), bits, words,
                                                      fail);
        CUSIM_LAUNCH_CHECK();
      }
      if (quant)
        finishFlagged(static_cast<const float*>(dX), p.d, bits, fail, n, sm, dOut, st.dScratch[slot].data());
      else
        finishFlagged(xb, pl.kp, bits, fail, n, sm, dOut, st.dScratch[slot].data());
    } else if (pl.kind == Kind::Fused) {
      const unsigned grid = unsigned(std::min<uint64_t>(pl.grid, (n + pl.R - 1) / pl.R));
      auto f = pl.R == 4 ? FusedKernel<4, Idx> : pl.R == 2 ? FusedKernel<2, Idx> : FusedKernel<1, Idx>;
      f<<<grid, pl.threads, pl.smem, sm>>>(dX, n, p.d, dProj, p.m, p.s, p.k, indices, dOut, stride);
      CUSIM_LAUNCH_CHECK();
    } else {
      dim3 grid1(unsigned((p.m + 255) / 256), unsigned((n + pl.R - 1) / pl.R));
      auto f = pl.smem == 0 ? ActivateKernel<1, Idx, true>
               : pl.R == 4  ? ActivateKernel<4, Idx, false>
               : pl.R == 2  ? ActivateKernel<2, Idx, false>
                            : ActivateKernel<1, Idx, false>;
      f<<<grid1, 256, pl.smem, sm>>>(dX, n, p.d, dProj, p.m, p.s, st.dKeys[slot].data());
      CUSIM_LAUNCH_CHECK();
      const unsigned grid2 = unsigned(std::min<uint64_t>(pl.grid, n));
      SelectKernel<<<grid2, 1024, 0, sm>>>(st.dKeys[slot].data(), n, p.m, p.k, indices, dOut, stride);
      CUSIM_LAUNCH_CHECK();
    }
    e[2].record(sm);
    CUSIM_CUDA_CHECK(cudaMemcpyAsync(st.hOut[slot].data(), dOut, n * stride * 4, cudaMemcpyDeviceToHost, sm));
    e[3].record(sm);
    pending[slot] = {true, r0, n};
    log.Mark("launch");
  }
  finish(0);
  finish(1);
  if (timing) {
    std::sort(spans.begin(), spans.end());
    double kernelMs = 0, end = -1e300;
    for (const auto& [a, b] : spans) {
      kernelMs += std::max(0.0, b - std::max(a, end));
      end = std::max(end, b);
    }
    timing->kernelMs += kernelMs;
    timing->transferMs += transferMs;
    if (rowsDone > 0) timing->kernel += (timing->kernel.empty() ? "" : "+") + std::string(KindName(pl.kind));
  }
  return rowsDone;
}

// What one FlyHash object keeps on its GPU, and the batch loop over it.
class CudaHasher final : public Hasher {
 public:
  CudaHasher(const Params& p, int device) : p_(p) { st_.device = device; }

  void Hash(const uint32_t* proj, const DenseView& x, const uint8_t* xBytes, Output o, uint32_t* out,
            const Tuning& tuning, const CancelToken& cancel, Timing* timing) override {
    if (x.rows == 0) return;
    const Params& p = p_;
    const int device = st_.device;
    gpu::DeviceGuard guard(device);
    auto run = p.d <= 65536 ? Run<uint16_t> : Run<uint32_t>;
    // Float X that starts with bytes (pixels, SIFT) is planned as bytes, which
    // halves the tensor-core work and quarters the copy; the staging confirms
    // it batch by batch, and from the first batch that is not, the remaining
    // rows run on the float plan.
    const bool hope = xBytes || LooksByteValued(x);
    uint64_t done = run(p, proj, x, xBytes, hope, 0, o, out, device, tuning, cancel, timing, st_);
    if (done < x.rows) {
      const DenseView rest{x.data + done * x.cols, x.rows - done, x.cols};
      // The float plan never stops early (only a byte plan does).
      if (run(p, proj, rest, nullptr, false, done, o, out + done * OutStride(p, o), device, tuning, cancel, timing,
              st_) != rest.rows)
        throw std::logic_error("FlyHash: the float plan stopped before the last row");
    }
  }

 private:
  const Params p_;
  FlyState st_;
};

}  // namespace

std::unique_ptr<Hasher> MakeCudaHasher(const Params& p, int device) { return std::make_unique<CudaHasher>(p, device); }

std::vector<std::string> GpuKernelFamilies(bool tensorCores) {
  std::vector<std::string> f;
  if (tensorCores) f = {KindName(Kind::Mma), KindName(Kind::MmaQ8)};
  for (Kind k : {Kind::TileLarge, Kind::Fused, Kind::TwoPass}) f.push_back(KindName(k));
  return f;
}

}  // namespace flyhash
}  // namespace cusim
