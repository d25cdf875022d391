// The native addon's surface, as each glue file's Init registers it
// (native/*.cc, CUSIM_REGISTER): one declaration per class and function, so
// every call into the addon is checked here instead of cast at its call site.
// The engine modules validate arguments before calling; these types say what
// the glue reads (option keys, typed-array kinds) and what it resolves to.
// It imports only the leaf lib/types.ts, so the engine modules that import
// the addon can import these types without a cycle (house-rules checks).
import type {
  Backend,
  BitWords,
  ClusterTuning,
  CsrMatrix,
  DenseMatrix,
  DeviceInfo,
  ExactKernel,
  FlyHashTuning,
  JoinChunk,
  MinHashParameters,
  MinHashPermutations,
  MinHashTuning,
  TokenBatch,
  Tuning,
} from './types.js';

// ---- shared pieces (owned_napi.cc, napi_util.cc) ----------------------------

/** An AbortSignal's flag (lib/cancel.ts): JavaScript sets it, workers poll it. */
export interface CancelFlag {
  abort(): void;
  readonly aborted: boolean;
}

/** The counter a call reports into (lib/progress.ts). */
export interface ProgressCounter {
  /** [done, total, stage] as the workers left them. */
  read(): [number, number, number];
}

/**
 * Inputs copied into native memory ahead of the calls that read them
 * (stageCsr, stageArray): accepted wherever a CSR matrix or a typed array of
 * the same element type is.
 */
export interface Staged {
  /** Rows of a staged matrix, elements of a staged array; 0 once disposed. */
  readonly length: number;
  /** What the copy that made it cost (undefined once disposed). */
  readonly stats: StageStats | undefined;
  dispose(): void;
  /** A staged array's elements, copied into a typed array of its type (a staged matrix throws). */
  toArray(): Uint8Array | Uint32Array | Float32Array | BigUint64Array;
}

/**
 * One staging copy: bytes copied into owned blocks of >= 1 MB (indices and
 * values), the part of them in blocks made for this copy and the time that
 * took (page-locking on the GPU path), the stageCsrAsync worker's whole time
 * (0 for other copies), and whether every such block is page-locked.
 */
export interface StageStats {
  bulkBytes: number;
  freshBytes: number;
  allocMs: number;
  stageMs: number;
  pinned: boolean;
}

/**
 * A stream's staging blocks (owned_napi.cc): copies given it take their
 * indices and values blocks from it, and those come back to it when the last
 * call reading them ends, so each chunk reuses the blocks (page-locked ones
 * on the GPU path) of a chunk before it. dispose() hands them to the process's
 * pools.
 */
export interface StagingSet {
  dispose(): void;
}

/** options.cancel and options.progress of a long call. */
export interface CallControl {
  cancel?: CancelFlag;
  progress?: ProgressCounter;
}

/** Where a call runs: the GPUs of options.devices (absent: all) on 'cuda'. */
export interface Placement {
  backend: Backend;
  devices?: number[];
}

/** CUDA-event timings of a call; 0 on the CPU. */
export interface GpuTiming {
  kernelMs: number;
  transferMs: number;
}

/** A native class: `new` with its options, giving an instance that dispose() frees. */
export type NativeClass<Options, Instance> = new (options: Options) => Instance;

// ---- MinHash (minhash_napi.cc, classic_minhash_napi.cc, minhash_napi_common.cc) ---

export interface MinHashHashOptions extends CallControl {
  rowStart: number;
  rowEnd: number;
  /** Written when the call ends; the result's signatures are then undefined. */
  out?: Uint32Array;
  /** The matrix's buffers were transferred to the call (HashOptions.transfer): read in place, not copied. */
  handed?: boolean;
  /** `out` is given over until the call settles (HashOptions.outHanded): written in place. */
  outHanded?: boolean;
}

export interface MinHashHashResult extends GpuTiming {
  /** undefined when options.out was given (the caller holds the array). */
  signatures: Uint32Array | undefined;
  host: { nativeMs: number; stageInMs: number; waitMs: number; stageOutMs: number; copyInMs: number };
}

/** Tables in [samples][n] layout, n = columns.length. */
export type MinHashTables = MinHashParameters & { columns: Uint32Array };

/** What the weighted and the classic engine share. */
export interface MinHashEngine {
  hash(matrix: CsrMatrix | Staged, options: MinHashHashOptions): Promise<MinHashHashResult>;
  /** The GPUs in use (empty on the CPU). */
  devices(): number[];
  dispose(): void;
}

export interface WeightedMinHashNativeOptions extends Placement {
  dim: number;
  samples: number;
  seed: number;
  tuning: Required<MinHashTuning>;
  /** Injected tables, [samples][n] with n = columns.length or dim. */
  rs?: Float32Array;
  lnCs?: Float32Array;
  betas?: Float32Array;
  columns?: Uint32Array;
}

export interface WeightedMinHashNative extends MinHashEngine {
  parameters(columns?: Uint32Array): MinHashTables;
  deviceParameters(slot: number, columns?: Uint32Array): MinHashTables;
}

/** Seeded (seed) or given (a, b) permutations. */
export interface MinHashNativeOptions extends Placement {
  samples: number;
  seed?: number;
  tuning: Required<MinHashTuning>;
  a?: BigUint64Array;
  b?: BigUint64Array;
}

export interface MinHashNative extends MinHashEngine {
  permutations(): MinHashPermutations;
}

// ---- StreamClusterer (cluster_napi.cc) --------------------------------------------

export interface StreamClustererNativeOptions {
  threshold: number;
  maxTerms: number;
  capacity: number;
  /** -1: no decay. */
  maxAge: number;
  backend: Backend;
  tuning: ClusterTuning;
  devices?: number[];
}

export interface ClusterAddNativeResult extends GpuTiming {
  cluster: Uint32Array;
  similarity: Float32Array;
  created: Uint8Array;
  batched: boolean;
  rescored: number;
}

export interface StreamClustererNative {
  add(docs: CsrMatrix | Staged, options: { mode: 'auto' | 'sequential' | 'batch' } & CallControl): Promise<ClusterAddNativeResult>;
  size(): number;
  info(): { threshold: number; maxTerms: number; maxAge: number; time: number };
  centroid(id: number): { terms: Uint32Array; weights: Float32Array };
  members(id: number): number;
  active(id: number): boolean;
  save(path: string): Promise<void>;
  load(path: string): Promise<void>;
  dispose(): void;
}

// ---- FlyHash (flyhash_napi.cc) -------------------------------------------------------

export interface FlyHashNativeOptions extends Placement {
  /** The kernel choices, fixed with the backend at construction. */
  tuning: FlyHashTuning & Required<Tuning>;
  inputDim: number;
  hashLength: number;
  connections: number;
  winners: number;
  seed: number;
}

export interface FlyHashNative {
  projection(): Uint32Array;
  hash(
    x: DenseMatrix | { data: Uint8Array; rows: number; cols: number },
    options: { output: 'bits' | 'indices'; cancel?: CancelFlag },
  ): Promise<GpuTiming & { data: Uint32Array; kernel: string }>;
  dispose(): void;
}

// ---- HammingIndex (hamming_napi.cc) ---------------------------------------------------

export interface HammingIndexNativeOptions extends Placement {
  /** The exact scan's kernel, fixed with the backend at construction. */
  exactKernel: ExactKernel;
  bits: number;
  method: 'exact' | 'ewh';
  tables: number;
  keyBits: number;
  maxErrors: number;
  weights: Int32Array;
  minScore: number;
  shortlist: number;
  seed: number;
}

export interface HammingSearchNativeResult extends GpuTiming {
  ids: Uint32Array;
  distances: Uint16Array;
  buildMs: number;
  scored: number;
  shortlisted: number;
  exactSampleMs: number;
  exactScanMs: number;
  exactSortMs: number;
  exactRedoMs: number;
  exactRedoQueries: number;
}

export interface HammingIndexNative {
  /** Returns the new size. */
  add(codes: Uint32Array): number;
  search(queries: BitWords, options: CallControl & { k: number }): Promise<HammingSearchNativeResult>;
  scores(queries: BitWords): Promise<Uint32Array>;
  build(): Promise<{ buildMs: number; transferMs: number }>;
  positions(): Uint32Array;
  /** Returns how many were removed. */
  remove(ids: Uint32Array): number;
  ids(): Uint32Array;
  save(path: string): Promise<void>;
  /** The file's parameters (weights as a plain array). */
  load(path: string): Promise<Omit<HammingIndexNativeOptions, 'weights'> & { weights: number[] }>;
  size(): number;
  dispose(): void;
}

// ---- similarity join (join_napi.cc) -----------------------------------------------------

export interface JoinOpenOptions extends Placement {
  /** Index into ['jaccard', 'cosine', 'dice', 'overlap'] (join.ts MEASURES). */
  measure: number;
  threshold: number;
  algorithm: 'ppjoin' | 'allpairs';
  blockSize: number;
  maxChunkPairs: number;
  wideSlots: boolean;
}

export interface JoinHandleNative {
  open(sets: CsrMatrix, against: CsrMatrix | undefined, options: JoinOpenOptions & { cancel?: CancelFlag }): Promise<void>;
  /** The next chunk, or null when the join is done. */
  next(options: CallControl): Promise<JoinChunk | null>;
  /** Milliseconds per stage so far (JoinStageMs); not while open() or next() runs. */
  stages(): Record<JoinStage, number>;
  dispose(): void;
}

/** The join's stages (native/join.h's Stage). */
export type JoinStage = 'normalize' | 'prepare' | 'build' | 'plan' | 'transfer' | 'kernel' | 'verify' | 'output';

/** The GPU join's probe batches (native/join_plan.h), planned on the host; for tests. */
export interface JoinBatchPlan {
  probes: Uint32Array;
  start: Float64Array;
  tableOff: Float64Array;
  maxCands: Float64Array;
}

// ---- LSH (lsh_napi.cc, lsh_store_napi.cc) --------------------------------------------------

/** Signature layout and banding: width 2 for weighted (k, t) pairs, 1 for classic. */
export interface LshShape {
  samples: number;
  bands: number;
  rows: number;
  width: 1 | 2;
}

export type LshCallOptions = LshShape & Placement & CallControl;

export interface PairList {
  left: Uint32Array;
  right: Uint32Array;
}

export interface LshGroupsNativeResult extends PairList, GpuTiming {
  similarity: Float32Array;
  group: Uint32Array;
  count: number;
}

/** Redis storage's band and record entries, grouped by key (offsets into band and rec). */
export interface LshStoreEntries {
  band: Uint8Array;
  bandOffsets: Float64Array;
  rec: Uint8Array;
  recOffsets: Float64Array;
}

export interface LshFunctions {
  lshCandidatePairs(signatures: Uint32Array | Staged, ids: Uint32Array, options: LshCallOptions): Promise<PairList & GpuTiming>;
  lshGroups(
    signatures: Uint32Array | Staged,
    ids: Uint32Array,
    options: LshCallOptions & { verify: 'none' | 'estimate' | 'exact'; threshold: number; matrix?: CsrMatrix | Staged },
  ): Promise<LshGroupsNativeResult>;
  lshQuery(
    stored: Uint32Array | Staged,
    ids: Uint32Array,
    queries: Uint32Array,
    options: LshShape,
  ): Promise<{ indptr: Uint32Array; ids: Uint32Array }>;
  /** Each row's band keys (rows × bands, row-major) and whether its signature is empty. */
  /** handed: `signatures` are lib/'s own and left alone until the call settles (read in place). */
  lshBandKeys(
    signatures: Uint32Array,
    options: LshShape & { handed?: boolean; staged?: false },
  ): Promise<{ keys: BigUint64Array; empty: Uint8Array }>;
  /** The same, kept in native memory (Staged arrays: BigUint64 keys, Uint8 empty). */
  lshBandKeys(signatures: Uint32Array, options: LshShape & { handed?: boolean; staged: true }): Promise<{ keys: Staged; empty: Staged }>;
  /** lshGroups with verify 'exact' and ids 0..n-1, from band keys and the rows as consecutive blocks. */
  lshGroupsFromKeys(
    /** One array, or consecutive row blocks of keys read where they are (never joined). */
    keys: BigUint64Array | Staged | (BigUint64Array | Staged)[],
    empty: Uint8Array | Staged,
    /** Row blocks in order: CSR blocks (staged or not), and a RowSpill's rows after those kept in memory. */
    matrix: (CsrMatrix | Staged | RowSpillNative)[],
    options: { bands: number; threshold: number; sets: boolean } & Placement & CallControl,
  ): Promise<LshGroupsNativeResult>;
  /** row_spill_napi.cc: rows written to an unlinked file in `dir` (weights too when `values`). */
  RowSpill: new (dir: string, values: boolean) => RowSpillNative;
  lshStoreEntries(signatures: Uint32Array, ids: Uint32Array, options: LshShape & { partitions: number }): Promise<LshStoreEntries>;
  lshStoreQuery(
    stored: Uint8Array[],
    queries: Uint8Array[],
    queryCount: number,
    removed: Uint32Array,
  ): Promise<{ indptr: Uint32Array; ids: Uint32Array }>;
  lshStoreRecords(records: Uint8Array[], removed: Uint32Array): Promise<{ ids: Uint32Array; fp: BigUint64Array; empty: Uint8Array }>;
  lshStoreClasses(fp: BigUint64Array, empty: Uint8Array): { ptr: Uint32Array; members: Uint32Array };
  lshStorePairs(entries: Uint8Array, live: Uint32Array, rep: Uint32Array): Promise<BigUint64Array>;
  lshStoreMerge(chunks: BigUint64Array[]): Promise<BigUint64Array>;
  lshStoreEstimate(signatures: Uint32Array, samples: number, a: Uint32Array, b: Uint32Array, width?: 1 | 2): Float32Array;
  lshStoreRowPairs(matrix: CsrMatrix, a: Uint32Array, b: Uint32Array, sets?: boolean): Promise<{ jaccard: Float64Array; same: Uint8Array }>;
  lshStoreFinish(
    live: Uint32Array,
    rep: Uint32Array,
    edges: BigUint64Array,
    similarity: Float32Array,
  ): PairList & { similarity: Float32Array; group: Uint32Array; count: number };
}

// ---- text (text_napi.cc) --------------------------------------------------------------------

export interface TextTokenizerOptions {
  mode: 'code' | 'words' | 'qgrams';
  minLength: number;
  dropKeywords: boolean;
  keywords: string[];
  stopWords: string[];
  q: number;
  lowercase: boolean;
  pad: boolean;
}

/** A TokenBatch as the tokenizer gives it (the caller knows minTokens). */
export type NativeTokenBatch = Omit<TokenBatch, 'minTokens'>;

/** Kept documents as rows: rowPtr has kept rows + 1 entries; kept counts token occurrences with a column. */
export interface TextRows {
  rowPtr: Uint32Array;
  cols: Uint32Array;
  values: Float32Array;
  kept: number;
}

/** UTF-8 texts back to back in `bytes`, text i at [offsets[i], offsets[i + 1]). */
export interface TextTokenizerNative {
  tokenize(bytes: Uint8Array, offsets: Uint32Array, minTokens: number): NativeTokenBatch;
  tokenizeAsync(bytes: Uint8Array, offsets: Uint32Array, minTokens: number): Promise<NativeTokenBatch>;
  hashedRowsAsync(bytes: Uint8Array, offsets: Uint32Array, minTokens: number, bits: number): Promise<TextRows & { tokens: Uint32Array }>;
  /** Present where the addon was built with simdjson (native/records.h). */
  recordsAsync?(block: Uint8Array, options: NativeRecordOptions): Promise<NativeRecordBlock>;
  dispose(): void;
}

export interface NativeRecordOptions {
  jsonl: boolean;
  /**
   * CSV or TSV (where the addon has tableReader): the block holds whole
   * records; each entry's text and id are columns textColumn and idColumn
   * (-1: none). Entries' lines count as csv-parse's info.lines does: a read
   * record's is the line it ends on, a JavaScript one's the lines before it.
   */
  table?: { delimiter: string; quoted: boolean; textColumn: number; idColumn: number };
  field: string;
  idField: string;
  maxRecordBytes: number;
  minTokens: number;
  bits: number;
  /** Lines before the block: keptLine counts from it. */
  firstLine?: number;
  /**
   * The block's buffer was allocated for this block alone, with at least
   * simdjson's padding (64 bytes) past the block, and is neither written nor
   * detached until the call settles: it is read in place, not copied.
   */
  handed?: boolean;
  /** Return the rows' values (token counts; default true): classic MinHash reads column ids only. */
  values?: boolean;
  /**
   * Split and hash the block's texts with this TokenHasher (made with the
   * tokenizer's options; a GPU's), one call per block, instead of the
   * tokenizer: the same rows.
   */
  hasher?: TokenHasherNative;
  /** With `hasher`: the kept rows' classic MinHash band keys too, made by the hasher (NativeRecordBlock keys, empty). */
  sketch?: SketchParams;
}

/**
 * Classic MinHash band keys of each document's token-hash set (native/text.h
 * Sketch): `samples` permutations of the seed, `bands` bands of `rows`.
 */
export interface SketchParams {
  samples: number;
  seed: number;
  bands: number;
  rows: number;
}

/** row_spill_napi.cc RowSpill: staged CSR blocks appended to a file, read back row by row. */
export interface RowSpillNative {
  /** Appends the block's rows on a worker; the block may be disposed once this settles. */
  spillAsync(staged: Staged): Promise<void>;
  readonly rows: number;
  readonly bytes: number;
  dispose(): void;
}

/** text_napi.cc TokenHasher. */
export interface TokenHasherNative {
  /** Per document, hashToken() of every token (repeats kept); `sorted`: ascending per document, else in the backend's order. */
  hashAsync(
    bytes: Uint8Array,
    offsets: Uint32Array,
    options?: { sorted?: boolean; sketch?: SketchParams },
  ): Promise<{ indptr: BigUint64Array; hashes: Uint32Array; keys?: BigUint64Array; empty?: Uint8Array }>;
  dispose(): void;
}

/**
 * A block of lines read natively (native/records.h Block): per entry (a line
 * that is not blank) its 0-based line, kind (0 native, 1 text tokenized in
 * JavaScript, 2 line read in JavaScript), token count and compact id; rows
 * of the kept native entries.
 */
export interface NativeRecordBlock {
  lines: number;
  /** Entries (lines that are not blank). */
  entries: number;
  // Per entry: absent when no entry is left to JavaScript (the kept arrays are then the block's).
  line?: Uint32Array;
  kind?: Uint8Array;
  /** 0 line number, 1 idBytes[idA, idB), 2 nums[idA], 3 true, 4 false, 5 an object. */
  idKind?: Uint8Array;
  idA?: Uint32Array;
  idB?: Uint32Array;
  tokens: Uint32Array;
  /** The rows' ids (kind 0: keptIdA is the 0-based line in the block) and line numbers (firstLine + line + 1), in row order. */
  keptIdKind: Uint8Array;
  keptIdA: Uint32Array;
  keptIdB: Uint32Array;
  keptLine: Float64Array;
  nums: Float64Array;
  idBytes: Uint8Array;
  rowPtr: Uint32Array;
  cols: Uint32Array;
  /** Absent when options.values is false. */
  values?: Float32Array;
  jsText: Uint8Array;
  jsTextEnds: Uint32Array;
  jsLineStart: Uint32Array;
  jsLineEnd: Uint32Array;
  /** With options.sketch: the kept rows' band keys (rows × bands) and empty flags, staged in native memory. */
  keys?: Staged;
  empty?: Staged;
}

// ---- persistence (persist_napi.cc) --------------------------------------------------------

/** A file opened by persistOpen: header and section table checked. */
export interface OpenedFile {
  version: number;
  /** Section sizes in bytes, by tag. */
  sections: Record<string, number>;
  /** Reads a whole section of exactly `bytes` (checked before allocating), verified. */
  read(tag: string, bytes: number): Promise<Uint8Array>;
  close(): void;
}

// ---- the module ------------------------------------------------------------------------------

export interface Addon extends LshFunctions {
  // runtime_napi.cc
  devices(): DeviceInfo;
  /** Sets the CPU thread count when n is given (0: the default); returns the count in effect. */
  threads(n?: number): number;
  readonly hardwareConcurrency: number;
  /** Absent from builds older than the typed-array limit it sets. */
  setMaxTypedLength?(maxLength: number): void;
  allocPinned(bytes: number): { buffer: ArrayBuffer; pinned: boolean };
  deviceMemory(device: number): { free: number; total: number };
  /**
   * What page-locking `bytes` costs on device 0 (bench only; gpu.h):
   * cudaHostAlloc, or huge-page memory faulted in on all cores then
   * cudaHostRegister'ed, with one host-to-device copy's rate from each; -1
   * where a step failed. Rejects where CUDA is unavailable.
   */
  probePageLocking(bytes: number): Promise<{
    hostAllocMs: number;
    hostFreeMs: number;
    hostAllocH2dGBs: number;
    touchMs: number;
    registerMs: number;
    unregisterMs: number;
    registeredH2dGBs: number;
  }>;
  holdDeviceMemory(device: number, bytes: number): { release(): void };
  cudaSupport(
    driverVersion: number,
    runtimeVersion: number,
    release: string,
    ccMajor: number,
    ccMinor: number,
    archs: string,
  ): { reason?: string; archSupported: boolean; tensorCores: boolean };

  // owned_napi.cc
  CancelFlag: new () => CancelFlag;
  ProgressCounter: new () => ProgressCounter;
  stageCsr(matrix: CsrMatrix, wantValues?: boolean): Staged;
  /**
   * stageCsr with the copy on a worker over the CPU pool (page-locked staging
   * when `gpu`; from `staging`'s blocks when given); the caller leaves the
   * arrays be until it settles.
   */
  stageCsrAsync(matrix: CsrMatrix, wantValues?: boolean, gpu?: boolean, staging?: StagingSet): Promise<Staged>;
  StagingSet: new () => StagingSet;
  /** The parts end to end, all of one element type; consume disposes each staged part once copied. */
  stageArray(parts: (ArrayBufferView | Staged)[], consume?: boolean): Staged;
  /** stageArray of staged parts, copied on a worker (consume: the parts are disposed at once). */
  stageArrayAsync(parts: Staged[], consume?: boolean): Promise<Staged>;
  /** The rows of rowLength elements whose keep[i] is nonzero. */
  stageSelect(staged: Staged, rowLength: number, keep: Uint8Array): Staged;

  // minhash_napi.cc, classic_minhash_napi.cc; philox_napi.cc
  WeightedMinHashNative: NativeClass<WeightedMinHashNativeOptions, WeightedMinHashNative>;
  MinHashNative: NativeClass<MinHashNativeOptions, MinHashNative>;
  minhashJaccardPairs(signatures: Uint32Array, samples: number, left: Uint32Array, right: Uint32Array): Float32Array;
  /** The multi-GPU row split's boundaries. */
  minhashSplitRows(matrix: CsrMatrix, rowStart: number, rowEnd: number, parts: number): Float64Array;
  /** curand() words, or curand_uniform() float bits when uniform. */
  philoxStream(seed: bigint, subsequence: bigint, offset: bigint, count: number, uniform?: boolean): Uint32Array;

  // cluster_napi.cc, flyhash_napi.cc, hamming_napi.cc, ops_napi.cc
  StreamClusterer: NativeClass<StreamClustererNativeOptions, StreamClustererNative>;
  FlyHash: NativeClass<FlyHashNativeOptions, FlyHashNative>;
  HammingIndex: NativeClass<HammingIndexNativeOptions, HammingIndexNative>;
  popcountRows(codes: BitWords, options: Placement & { cancel?: CancelFlag }): Promise<GpuTiming & { counts: Uint32Array }>;

  // join_napi.cc
  JoinHandle: new () => JoinHandleNative;
  /** Sorts the four parallel arrays by (left, right), in place. */
  joinSortPairs(left: Uint32Array, right: Uint32Array, overlap: Uint32Array, similarity: Float32Array): Promise<void>;
  joinPlanBatches(lg: Uint8Array, cands: Float64Array, p0: number, budget: number, maxProbes: number): JoinBatchPlan;
  joinOrderByKey(keys: Uint32Array): Uint32Array;

  // text_napi.cc: TextTokenizer is absent from builds older than the native tokenizer.
  TextTokenizer?: NativeClass<TextTokenizerOptions, TextTokenizerNative>;
  /**
   * text_napi.cc TokenHasher: per document, hashToken() of every token (repeats kept,
   * order unspecified), on the CPU (device -1) or one GPU; absent from older builds.
   */
  TokenHasher?: new (options: TextTokenizerOptions, backend?: { device?: number; chunkBytes?: number }) => TokenHasherNative;
  /** Installs lib/text/unicode-tables.ts's tables (the first call wins); absent from older builds. */
  setUnicodeTables?(stage1: Uint16Array, blocks: Uint32Array, extra: Uint32Array): void;
  /** The native record reader's parser ('simdjson 3.0.1'); absent from builds without it. */
  recordReader?: string;
  /** The native CSV/TSV reader's parser ('libcsv 3.0.3'); absent from builds without it. */
  tableReader?: string;
  /** remap[id]: the column of batch-local term id (-1: dropped by a frozen vocabulary). */
  assembleTextRows(
    indptr: Uint32Array,
    tokens: Uint32Array,
    minTokens: number,
    ids: Uint32Array,
    counts: Uint32Array,
    remap: Int32Array,
  ): TextRows;

  // persist_napi.cc
  persistSave(path: string, kind: string, version: number, sections: [tag: string, data: ArrayBufferView][]): Promise<void>;
  persistOpen(path: string, kind: string, maxVersion: number): Promise<OpenedFile>;
  /** The container's checksum, as 16 hex digits. */
  persistXxh64(bytes: Uint8Array, seed: number): string;
}
