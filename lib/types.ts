// The data, option and result types the engines and the native boundary
// (native-types.ts) share. A leaf: it imports nothing, so lib/native-types.ts
// can name these types without importing the engine modules that import the
// addon. Each engine module re-exports the ones it documents.

// ---- inputs -----------------------------------------------------------------

/** Compressed sparse rows. `values` absent means every stored entry weighs 1. */
export interface CsrMatrix {
  rows: number;
  cols: number;
  indptr: Uint32Array | Int32Array;
  indices: Uint32Array;
  values?: Float32Array;
}

/** Row-major dense float matrix. */
export interface DenseMatrix {
  data: Float32Array;
  rows: number;
  cols: number;
}

/** What the native layer receives for bit codes: always 32-bit words. */
export interface BitWords {
  data: Uint32Array;
  rows: number;
  bits: number;
}

/**
 * Kernel choices an engine takes on the GPU. Every choice computes the same
 * result; these exist to compare kernels and to work around a GPU's quirks.
 */
export interface Tuning {
  /**
   * false: never the tensor-core kernel families (sm_80+), only the
   * CUDA-core ones that also run on older GPUs. Default true: tensor cores
   * wherever the GPU has them (`devices().gpus[i].tensorCores`).
   */
  tensorCores?: boolean;
}

// ---- backends and devices ---------------------------------------------------

export type Backend = 'cpu' | 'cuda';

export interface GpuInfo {
  index: number;
  name: string;
  memoryBytes: number;
  computeCapability: string;
  multiprocessors: number;
  /**
   * Whether the tensor-core kernel families run here (compute capability 8.0
   * or newer: mma.sync on int8 and 1-bit fragments, cp.async). Older GPUs
   * (Turing) run the CUDA-core families, which give the same results.
   */
  tensorCores: boolean;
  /**
   * The kernel families this GPU runs where an engine has a choice, in the
   * order `auto` prefers them (shapes decide among them): FlyHash ('mma-u8',
   * 'mma-q8' with tensor cores, then 'tile-large', 'fused', 'two-pass') and
   * the Hamming exact scan ('mma2' with tensor cores, 'popc').
   */
  kernels: { flyhash: string[]; hamming: string[] };
}

export interface DeviceInfo {
  /** True when the addon has CUDA kernels and at least one usable GPU. */
  cuda: boolean;
  /**
   * Why `cuda` is false: 'not compiled: …', 'no driver: …', 'driver too old:
   * …' (naming the driver's and the runtime's CUDA versions and the fix),
   * 'no device: …' or 'no supported GPU: …'.
   */
  reason?: string;
  /** Usable GPUs (one whose architecture this binary has no kernels for is left out). */
  gpus: GpuInfo[];
  /** Whether this addon binary contains CUDA kernels at all. */
  compiledWithCuda: boolean;
  /** CUDA builds: the GPU architectures compiled in (CMake's list, e.g. '75-real,…,90-real,100-real,120'). */
  cudaArchitectures?: string;
  /** CUDA builds: the CUDA runtime version linked in ('13.0'). */
  runtimeVersion?: string;
  /** CUDA builds with a driver: the CUDA version the driver supports ('13.0'). */
  driverVersion?: string;
  /** The NVIDIA driver's own version ('580.159.04'), where the host reports it. */
  driverRelease?: string;
  /**
   * The parser of the native JSONL/line record reader compiled in
   * ('simdjson 3.0.1'); absent where the addon was built without simdjson,
   * and the CLI reads records in JavaScript.
   */
  recordReader?: string;
  /**
   * The parser of the native CSV/TSV reader compiled in ('libcsv 3.0.3');
   * absent where the addon was built without libcsv (CSV and TSV are then
   * read by csv-parse).
   */
  tableReader?: string;
}

// ---- MinHash ----------------------------------------------------------------

/**
 * GPU choices of the MinHash engines. None changes a signature: they exist to
 * time kernels against each other and to test one against another.
 */
export interface MinHashTuning {
  /**
   * WeightedMinHash's hash kernel: 'prune', which 'auto' (the default) runs;
   * the engine has no other. MinHash (classic) takes no `kernel`.
   */
  kernel?: 'auto' | 'prune';
  /**
   * false: one batch in flight per GPU, so each kernel has the GPU to itself
   * and `kernelMs` is the kernels' own time (slower overall). Default true:
   * batches overlap their copies and kernels.
   */
  overlap?: boolean;
}

/**
 * Parameter tables in [samples][n] layout (datasketch's [samples][dim] when
 * the columns are 0..dim-1): entry s * n + i belongs to column columns[i].
 */
export interface MinHashParameters {
  /** [samples][n], Gamma(2, 1) */
  rs: Float32Array;
  /** [samples][n], ln of Gamma(2, 1) */
  lnCs: Float32Array;
  /** [samples][n], uniform in (0, 1] */
  betas: Float32Array;
  /** The n columns the tables hold, in table order; absent means 0..dim-1. */
  columns?: Uint32Array;
}

/** datasketch's MinHash.permutations: a in [1, 2^61 - 1), b in [0, 2^61 - 1). */
export interface MinHashPermutations {
  a: BigUint64Array;
  b: BigUint64Array;
}

// ---- FlyHash ----------------------------------------------------------------

/**
 * FlyHash's GPU kernel choices; docs/engines/flyhash.md describes the
 * families. Every choice computes the same codes: `tensorCores` works around
 * a GPU's quirks, the rest exist to compare the families (bench) and to reach
 * every path on small inputs (tests).
 */
export interface FlyHashTuning extends Tuning {
  /**
   * The kernel family: 'auto' (default) picks from the shape and the GPU;
   * 'mma' the tensor-core path where its tile fits; 'fused' the CUDA-core
   * fused / two-pass kernels; 'tile-large' the row-tile kernels (auto takes
   * them for large m). A family that does not apply to the shape falls back
   * to auto's other choices.
   */
  kernel?: 'auto' | 'mma' | 'fused' | 'tile-large';
  /** Fused kernel: at most this many rows per block (default 4). */
  maxRowsPerBlock?: 1 | 2 | 4;
  /** Tensor-core path: only launch shapes that stage the projection in shared memory (true) or none (false); default picks. */
  stageProjection?: boolean;
  /** Quantized tensor-core path: rows per block of the exact pass (0 = none); default picks from the shape. */
  exactRows?: 0 | 1 | 2 | 4 | 8;
  /** Tensor-core path: at most this many rows per batch (rounded down to whole row tiles); default no cap. */
  batchRows?: number;
  /** Tile kernels: send every row through the per-row fallback (tests). Default false. */
  forceFallback?: boolean;
}

// ---- Hamming ----------------------------------------------------------------

/** The exact scan's kernel on CUDA: scalar popcount ('popc') or the register-tiled 1-bit tensor-core MMA ('mma2'). */
export type ExactKernel = 'auto' | 'popc' | 'mma2';

/** HammingIndex's `tuning`: GPU choices; every choice gives the same neighbours. */
export interface HammingTuning extends Tuning {
  /** The exact scan's kernel on CUDA ('auto': 'mma2' from 128 bits where tensor cores are allowed, else 'popc'). */
  exactKernel?: ExactKernel;
}

// ---- StreamClusterer --------------------------------------------------------

/** StreamClusterer's `tuning`: GPU choices; the clusters are the same under every setting. */
export interface ClusterTuning {
  /**
   * Documents per GPU micro-batch: 256, 512 or 1024 (default 512; a GPU with
   * less shared memory per block than the size needs gets the largest that fits).
   */
  batchSize?: 256 | 512 | 1024;
}

// ---- similarity join --------------------------------------------------------

/**
 * Pairs found. Self-join: each pair once with left < right (input row ids).
 * R–S join: left indexes `sets`, right indexes `against`. `similarity` is the
 * measure's value (the overlap itself for 'overlap').
 *
 * On the GPU backend the four arrays of a chunk are views of one ArrayBuffer
 * (left, right, overlap, similarity end to end), filled by a single download:
 * keeping any one of them keeps the whole block alive, and transferring its
 * buffer detaches all four. Copy with `slice()` to keep one alone.
 */
export interface JoinChunk {
  left: Uint32Array;
  right: Uint32Array;
  overlap: Uint32Array;
  similarity: Float32Array;
  /** Pairs that survived the filters and were verified. */
  candidates: number;
  /** Device time of the GPU kernels (CUDA events); 0 on CPU. */
  kernelMs: number;
}

// ---- text -------------------------------------------------------------------

/**
 * Distinct tokens of the kept documents (those with at least `minTokens`
 * tokens) in first-occurrence order, and per document its (term, count)
 * pairs in first-occurrence order: exactly what a sequential pass would feed
 * the vocabulary and the row counter.
 */
export interface TokenBatch {
  minTokens: number;
  terms: string[];
  /** Per document: its number of tokens (tokenize(text).length). */
  tokens: Uint32Array;
  /** documents + 1 entries: document d's pairs are [indptr[d], indptr[d + 1]). */
  indptr: Uint32Array;
  ids: Uint32Array;
  counts: Uint32Array;
}
