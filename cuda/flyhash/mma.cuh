// The int8 tensor-core family (byte-valued inputs): the MMA kernel that
// computes activations as X times the 0/1 projection, and its helpers.
// Internal to cuda/flyhash.cu, which includes every family header: one
// translation unit, so the kernels keep internal linkage.
#pragma once
#include "common.cuh"

namespace cusim {
namespace flyhash {
namespace {

// ---- int8 tensor cores (byte-valued inputs) ------------------------------------
//
// When every input is an integer in [0, 255] and s * 255 < 2^24, each
// activation is an exact integer, equal bit for bit to the float contract's
// sequential sum. The activations are then X (bytes) times the 0/1 projection
// matrix, which int8 mma.sync computes exactly with int32 accumulators: many
// more multiply-adds than the gathers (the matrix is dense), but at
// tensor-core rates, and no float order to respect. docs/perf/flyhash.md has
// the arithmetic.
//
// A block keeps a 64-row tile of X in shared memory for its whole life; each
// warp computes 64 rows x 32 outputs at a time (4 x 4 m16n8k32 fragments).
// The projection is read as bits, [k-step][mPad] words (one per 32 inputs
// and output, in WordSlot order within each group of 32 outputs), and each
// lane turns its byte of a word into the 0/1 bytes of its B fragment
// (ExpandB): 8x less L2 traffic than int8 bytes.
// Selection is TileLarge's: a sample of outputs (the first S) brackets each
// row's k-th largest (WindowKernel), one pass writes the bits above the
// window and lists the keys inside it (MmaKernel, Sample = false),
// ListKernel selects among the listed keys, FallbackKernel redoes flagged
// rows.

constexpr uint32_t kMmaRows = 64;

// mma.sync on u8 fragments of m16n8k32, cp.async and the warp reductions below
// need sm_80: for older targets (Turing) their bodies trap, and MakePlan never
// picks this path on a GPU without tensor-core kernels (TensorCoreKernels).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define CUSIM_FLY_SM80 0
#else
#define CUSIM_FLY_SM80 1
#endif
// 16 warps per multiprocessor either way: two blocks of 8 warps, or one of
// 16 where the tile leaves room for one block only (wide rows). Both fit
// the 128 registers a thread needs.
constexpr uint32_t kMmaWarpsPerSm = 16;

// Byte tile row stride: a multiple of 16 with an odd quotient, so the eight
// 16-byte rows one ldmatrix phase reads fall in distinct bank groups.
__host__ __device__ inline uint32_t MmaStride(uint32_t kp) { return kp + 16; }
// The byte tile, the rows' windows (lo, hi), 8 words a lane and, where the
// words are staged, two groups' words per warp (MmaKernel).
inline size_t MmaSmem(uint32_t kp, uint32_t warps, bool stageB) {
  return size_t(kMmaRows) * MmaStride(kp) + 2 * kMmaRows * 4 + size_t(warps) * 32 * 8 * 4 +
         (stageB ? size_t(warps) * (kp / 32) * 256 : 0);
}

// 4 bits -> 4 bytes of 0/1 (the shifted copies do not overlap, so no carries).
__device__ __forceinline__ uint32_t ExpandNibble(uint32_t v) { return (v * 0x00204081u) & 0x01010101u; }

// Bit b of a k-step's 32 inputs, as stored: byte t of a word holds the bits
// lane t4 = t needs for its B fragment (inputs 4t..4t+3 in the low nibble,
// 16+4t..16+4t+3 in the high one), so a lane extracts its byte with one PRMT
// and expands each nibble with a multiply and a mask. (A 2 KB shared table
// is no faster: its random lookups conflict in the banks.)
inline uint32_t StoredBit(uint32_t b) { return b < 16 ? (b / 4) * 8 + b % 4 : ((b - 16) / 4) * 8 + 4 + (b - 16) % 4; }

__device__ __forceinline__ void LdMatrixX4(uint32_t (&a)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(addr));
}

// volatile, like the fragment loads: the compiler otherwise sinks each
// ldmatrix to just before its four MMAs and reuses one register set, so
// every four MMAs wait out an ldmatrix latency (seen in the SASS).
__device__ __forceinline__ void MmaU8(int (&c)[4], const uint32_t (&a)[4], uint2 b) {
#if CUSIM_FLY_SM80
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b.x), "r"(b.y));
#else
  __trap();
#endif
}

// The keys of this path are the sums themselves (non-negative integers order
// as their floats do, and exact): the selects below then see the few bits in
// which a row's sums differ, not a float's spread-out mantissa, and finish in
// fewer radix passes.

// A warp's fragments for one k-step of its 64 x 32 block: A from the tile
// (LoadA), B from the words, one per n8 fragment (ExpandB).
__device__ __forceinline__ void LoadA(uint32_t (&a)[4][4], uint32_t aAddr, uint32_t aStep16) {
#pragma unroll
  for (int mt = 0; mt < 4; ++mt) LdMatrixX4(a[mt], aAddr + mt * aStep16);
}

__device__ __forceinline__ void ExpandB(uint2 (&b)[4], uint4 w, uint32_t sel) {
  const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) {
    const uint32_t v = __byte_perm(ws[nt], 0, sel);
    b[nt].x = ExpandNibble(v & 15u);
    b[nt].y = ExpandNibble(v >> 4);
  }
}

__device__ __forceinline__ void MmaTile(int (&acc)[4][4][4], const uint32_t (&a)[4][4], const uint2 (&b)[4]) {
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int mt = 0; mt < 4; ++mt) MmaU8(acc[mt][nt], a[mt], b[nt]);
}

// The words of a k-step are stored so that a lane's four (outputs gid,
// gid + 8, gid + 16, gid + 24 of its group) are adjacent: one 16-byte load.
inline uint64_t WordSlot(uint64_t j) { return j / 32 * 32 + (j % 8) * 4 + (j % 32) / 8; }

#if CUSIM_FLY_SM80
__device__ __forceinline__ void CpAsync16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void CpAsyncWaitOne() { asm volatile("cp.async.wait_group 1;\n" ::); }
#else
__device__ __forceinline__ void CpAsync16(uint32_t, const void*) { __trap(); }
__device__ __forceinline__ void CpAsyncCommit() { __trap(); }
__device__ __forceinline__ void CpAsyncWaitOne() { __trap(); }
#endif

// Sample = true: keys of outputs [0, m) to sample[row * m + j] (m = S).
// Sample = false: all m outputs; keys above hi[row] set their bit and count
// in over[row], keys in [lo[row], hi[row]] are appended to the row's list
// (count[row] entries, cap kept). blockIdx.y splits the 32-output groups
// (few rows). x: rows of kp bytes (kp a multiple of 32, zero-padded).
template <bool Sample, uint32_t Warps, bool StageB>
__global__ void __launch_bounds__(Warps * 32, kMmaWarpsPerSm / Warps)
    MmaKernel(const uint8_t* __restrict__ x, uint64_t rows, uint32_t kp, const uint32_t* __restrict__ wb, uint32_t mPad,
              uint32_t m, uint32_t* __restrict__ sample, const uint32_t* __restrict__ lo,
              const uint32_t* __restrict__ hi, uint32_t cap, uint32_t* __restrict__ bits, uint64_t words,
              uint32_t* __restrict__ listKey, uint32_t* __restrict__ listJ, uint32_t* __restrict__ count,
              uint32_t* __restrict__ over) {
  extern __shared__ __align__(16) unsigned char smem[];
  const uint32_t stride = MmaStride(kp);
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, t4 = lane & 3;
  const uint64_t r0 = uint64_t(blockIdx.x) * kMmaRows;
  const uint32_t vecs = kp / 16;
  for (uint32_t e = threadIdx.x; e < kMmaRows * vecs; e += blockDim.x) {
    const uint32_t r = e / vecs, v = e - r * vecs;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (r0 + r < rows) val = *reinterpret_cast<const uint4*>(x + (r0 + r) * kp + v * 16);
    *reinterpret_cast<uint4*>(smem + r * stride + v * 16) = val;
  }
  // The rows' windows wait in shared memory: the accumulators and the
  // k-loop's fragments need the registers (128 a thread). Behind them, 8
  // words a lane for the append loop below (MmaSmem).
  uint32_t* win = reinterpret_cast<uint32_t*>(smem + kMmaRows * stride);
  uint32_t* pick = win + 2 * kMmaRows + (warp * 32 + lane) * 8;
  const uint32_t ksteps = kp / 32, groups = (m + 31) / 32;
  // StageB: this warp's two buffers of a group's words (ksteps x 32), the
  // next group's copied in (cp.async) while this one computes.
  const uint32_t sB = uint32_t(__cvta_generic_to_shared(win + 2 * kMmaRows + Warps * 256)) + warp * ksteps * 256;
  if constexpr (!Sample)
    for (uint32_t r = threadIdx.x; r < kMmaRows; r += blockDim.x) {
      const uint64_t row = r0 + r;
      win[r] = row < rows ? lo[row] : 0u;
      win[kMmaRows + r] = row < rows ? hi[row] : kFull;
    }
  // This thread's 8 accumulator rows: 16 mt + 8 h + gid, q = 2 mt + h.
  uint32_t ov[8];
#pragma unroll
  for (int q = 0; q < 8; ++q) ov[q] = 0;
  __syncthreads();
  // ldmatrix.x4: lanes 0-7 address rows 0-7 of bytes 0-15 (a0), 8-15 rows 8-15
  // (a1), 16-23 rows 0-7 of bytes 16-31 (a2), 24-31 rows 8-15 (a3).
  const uint32_t aBase =
      uint32_t(__cvta_generic_to_shared(smem)) + ((lane & 7) + ((lane >> 3) & 1) * 8) * stride + (lane >> 4) * 16;
  const uint32_t aStep16 = 16 * stride;
  const uint32_t sel = 0x4440u | t4;  // PRMT: byte t4 of the word, zeros above
  const uint32_t gStep = gridDim.y * Warps;
  auto stage = [&](uint32_t g, uint32_t buf) {
    if (g < groups)
      for (uint32_t c = lane; c < ksteps * 8; c += 32)
        CpAsync16(sB + buf * ksteps * 128 + c * 16, wb + uint64_t(c >> 3) * mPad + g * 32 + (c & 7) * 4);
    CpAsyncCommit();  // empty past the last group, so the waits below stay uniform
  };
  if constexpr (StageB) stage(blockIdx.y * Warps + warp, 0);
  uint32_t buf = 0;
  for (uint32_t g = blockIdx.y * Warps + warp; g < groups; g += gStep, buf ^= 1) {
    if constexpr (StageB) {
      __syncwarp();  // the warp is done with the other buffer (previous group)
      stage(g + gStep, buf ^ 1);
      CpAsyncWaitOne();
      __syncwarp();  // every lane's copies of this group have landed
    }
    int acc[4][4][4];
#pragma unroll
    for (int mt = 0; mt < 4; ++mt)
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[mt][nt][c] = 0;
    // Column gid of each n8 fragment. Each k-step's words load two steps
    // ahead: from this warp's stage (StageB), else from L2, hundreds of
    // cycles away. (Loading the next step's A fragments during this step's
    // MMAs, with the windows moved to shared memory to free the registers,
    // was slower.)
    const uint4* wp = reinterpret_cast<const uint4*>(wb + g * 32) + gid;
    const uint32_t sw = sB + buf * ksteps * 128 + gid * 16;
    auto loadWords = [&](uint32_t k) {
      if constexpr (StageB) {
        uint4 v;
        asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "r"(sw + k * 128));
        return v;
      } else {
        return __ldg(wp + uint64_t(k) * (mPad / 4));
      }
    };
    uint4 w[2];
    uint32_t a[4][4];
    uint2 b[4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
      if (uint32_t(i) < ksteps) w[i] = loadWords(i);
    for (uint32_t ks = 0; ks < ksteps; ks += 2) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const uint32_t k = ks + i;
        if (k >= ksteps) break;
        LoadA(a, aBase + k * 32, aStep16);
        ExpandB(b, w[i], sel);
        if (k + 2 < ksteps) w[i] = loadWords(k + 2);
        MmaTile(acc, a, b);
      }
    }
    // Fragment c of (mt, nt): row 16 mt + 8 (c >> 1) + gid, output 32 g + 8 nt + 2 t4 + (c & 1).
    const int mRem = int(m - g * 32);  // outputs of this group that exist (>= 32: all)
    if constexpr (Sample) {
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const int mt = q >> 1, h = q & 1;
        const uint64_t row = r0 + 16 * mt + 8 * h + gid;
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const int bit = nt * 8 + 2 * t4 + i;
            if (row < rows && bit < mRem) sample[row * m + g * 32 + bit] = uint32_t(acc[mt][nt][2 * h + i]);
          }
      }
    } else {
      // Which of this lane's outputs exist: as bits of the row's word, and as
      // bits u = 2 nt + i of its 8 values (all, but in the last group).
      const uint32_t validWord = mRem >= 32 ? kFull : (1u << mRem) - 1u;
      uint32_t validIn = 0xffu;
      if (mRem < 32) {
        validIn = 0;
#pragma unroll
        for (int u = 0; u < 8; ++u) validIn |= uint32_t(int((u >> 1) * 8 + 2 * t4 + (u & 1)) < mRem) << u;
      }
      // Three passes over the 8 rows, so that the 8 list reservations
      // (atomics, an L2 round trip each) are in flight together: waiting on
      // each in turn was a visible share of this kernel's stalls.
      // inM[q]: the lane's listed values of row q as bits (8), then from bit 8
      // how many the quad's lower lanes list before it (at most 24).
      uint32_t inM[8], base[8];
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const int mt = q >> 1, h = q & 1;
        const uint32_t r = 16 * mt + 8 * h + gid;
        const uint64_t row = r0 + r;
        const uint32_t rl = win[r], rh = win[kMmaRows + r];
        // Bits at 8 nt + i first (constant shifts), moved to 2 t4 once.
        uint32_t word = 0, inMask = 0;
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const uint32_t v = uint32_t(acc[mt][nt][2 * h + i]);
            word |= uint32_t(v > rh) << (nt * 8 + i);
            inMask |= uint32_t(v >= rl && v <= rh) << (nt * 2 + i);
          }
        word = (word << (2 * t4)) & validWord;
        ov[q] += __popc(word);
        word |= __shfl_xor_sync(kFull, word, 1);
        word |= __shfl_xor_sync(kFull, word, 2);
        const bool live = row < rows;
        if (t4 == 0 && live) bits[row * words + g] = word;
        inM[q] = live ? inMask & validIn : 0u;
      }
      // The four lanes of a row reserve list space with one atomic.
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const uint32_t c = __popc(inM[q]);
        uint32_t incl = c;
        uint32_t t = __shfl_up_sync(kFull, incl, 1, 4);
        if (t4 >= 1) incl += t;
        t = __shfl_up_sync(kFull, incl, 2, 4);
        if (t4 >= 2) incl += t;
        inM[q] |= (incl - c) << 8;
        base[q] = 0;
        const uint64_t row = r0 + 16 * (q >> 1) + 8 * (q & 1) + gid;
        if (t4 == 3 && incl != 0) base[q] = atomicAdd(&count[row], incl);
      }
      // Each lane appends its listed values. The values go through this
      // lane's 8 words of shared memory, so the loop reads value u with one
      // load instead of selecting among 8 registers. (Unrolling over the 8
      // with predicated stores instead costs more instructions.)
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const int mt = q >> 1, h = q & 1;
        uint32_t pos = __shfl_sync(kFull, base[q], 3, 4) + (inM[q] >> 8);
        uint32_t mask = inM[q] & 0xffu;
        if (mask == 0) continue;
        reinterpret_cast<uint4*>(pick)[0] =
            make_uint4(acc[mt][0][2 * h], acc[mt][0][2 * h + 1], acc[mt][1][2 * h], acc[mt][1][2 * h + 1]);
        reinterpret_cast<uint4*>(pick)[1] =
            make_uint4(acc[mt][2][2 * h], acc[mt][2][2 * h + 1], acc[mt][3][2 * h], acc[mt][3][2 * h + 1]);
        const uint64_t row = r0 + 16 * mt + 8 * h + gid;
        uint32_t* lk = listKey + row * cap;
        uint32_t* lj = listJ + row * cap;
        const uint32_t jb = g * 32 + 2 * t4;
        do {
          const uint32_t u = __ffs(mask) - 1;
          mask &= mask - 1;
          if (pos < cap) {
            lk[pos] = pick[u];
            lj[pos] = jb + (u >> 1) * 8 + (u & 1);
          }
          ++pos;
        } while (mask);
      }
    }
  }
  if constexpr (!Sample) {
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      uint32_t v = ov[q];
      v += __shfl_xor_sync(kFull, v, 1);
      v += __shfl_xor_sync(kFull, v, 2);
      const uint64_t row = r0 + 16 * (q >> 1) + 8 * (q & 1) + gid;
      if (t4 == 0 && v != 0 && row < rows) atomicAdd(&over[row], v);
    }
  }
}

template <bool Sample>
auto MmaFor(uint32_t warps, bool stageB) {
  return warps == 16 ? (stageB ? MmaKernel<Sample, 16, true> : MmaKernel<Sample, 16, false>)
                     : (stageB ? MmaKernel<Sample, 8, true> : MmaKernel<Sample, 8, false>);
}

}  // namespace
}  // namespace flyhash
}  // namespace cusim
