// Hamming k-NN over packed binary codes: an exact scan, or Error Weighted
// Hashing (EWH) with atomic scoring then an exact re-rank of a shortlist.
import { native } from './addon.js';
import type { HammingIndexNative } from './native-types.js';
import { resolveBackend, resolveOneDevice, type Backend, type BackendOption } from './backend.js';
import { withCancel } from './cancel.js';
import { checkOnProgress, ProgressReporter, withNativeProgress, type OnProgress } from './progress.js';
import { rangeError, typeError } from './errors.js';
import { checkPath } from './persist.js';
import { NativeResource } from './resource.js';
import {
  checkEnum,
  checkInt,
  checkTuning,
  checkTuningKeys,
  describe,
  isObject,
  toBits,
  toU32,
  type BitWords,
  asTyped,
} from './validate.js';
import type { HammingTuning } from './types.js';
export type { ExactKernel, HammingTuning } from './types.js';

export type HammingMethod = 'exact' | 'ewh';

export interface HammingIndexOptions {
  /** Code length in bits: a multiple of 32, at most 32768. */
  bits: number;
  method?: HammingMethod;
  backend?: BackendOption;
  /** The GPU for the CUDA backend: 'all' (default: GPU 0) or one index in a list, as `devices` of the multi-GPU engines. */
  devices?: 'all' | number[];
  /** EWH: hash tables (n). */
  tables?: number;
  /** EWH: key bits per table (h). */
  keyBits?: number;
  /** EWH: probe every bucket within this many key bits of the query's key (e). */
  maxErrors?: number;
  /** EWH: score added for a probe r bits away, r = 0..maxErrors (alpha_r). */
  weights?: number[];
  /** EWH: ids scoring at least this are re-ranked (unless `shortlist` is set). */
  minScore?: number;
  /** EWH: re-rank the top-L ids by score (ties by lower id) instead of using minScore. */
  shortlist?: number;
  /** EWH: seed of the random key bit positions (Philox subsequence = table). */
  seed?: number;
  /**
   * GPU kernel choices, fixed with the backend for the index's life: `exactKernel` picks the exact
   * scan's kernel; `{ tensorCores: false }` scans with popcount instead of the 1-bit MMA (same results).
   */
  tuning?: HammingTuning;
}

export interface HammingSearchOptions {
  k: number;
  signal?: AbortSignal;
  /** Queries answered so far: `{ stage: 'search', done, total }` (see ProgressEvent). */
  onProgress?: OnProgress;
}

export interface HammingSearchResult {
  /** q×k neighbour ids ordered by (distance, id); 0xFFFFFFFF where fewer than k exist. */
  ids: Uint32Array;
  /** q×k Hamming distances; `bits` where the id is missing. */
  distances: Uint16Array;
  backend: Backend;
  /** Device time of the kernels (CUDA events); 0 on CPU. */
  kernelMs: number;
  transferMs: number;
  /** EWH bucket build time included in this call (CUDA, device time). */
  buildMs: number;
  /** EWH: ids with a nonzero score, summed over the queries. */
  scored: number;
  /** EWH: ids re-ranked by exact distance, summed over the queries. */
  shortlisted: number;
  /**
   * Exact search on CUDA, the stages of `kernelMs` (device time; 0 elsewhere): bounding the
   * k-th distance on a sample, the full scan (every distance; the pairs within the bound kept),
   * sorting the kept pairs into the top k, and the histogram passes for queries whose kept set
   * overflowed (`exactRedoQueries` of them).
   */
  exactSampleMs: number;
  exactScanMs: number;
  exactSortMs: number;
  exactRedoMs: number;
  exactRedoQueries: number;
}

export const MISSING_ID = 0xffffffff;
const MAX_K = 1024;
const MAX_BITS = 32768;
const MAX_SCORE = 8191;

/**
 * The index's tuning: the exact kernel is fixed here with the backend; a
 * tensor-core kernel contradicts tensorCores: false, under which 'auto' means 'popc'.
 */
function checkHammingTuning(v: unknown): Required<HammingTuning> {
  const t = checkTuningKeys(v, 'tuning', ['tensorCores', 'exactKernel']);
  const { tensorCores } = checkTuning({ tensorCores: t.tensorCores });
  let exactKernel = checkEnum(t.exactKernel ?? 'auto', 'tuning.exactKernel', ['auto', 'popc', 'mma2'] as const);
  if (!tensorCores) {
    if (exactKernel === 'mma2')
      throw rangeError(`tuning.exactKernel 'mma2' runs on tensor cores, which tuning.tensorCores = false rules out`);
    exactKernel = 'popc';
  }
  return { tensorCores, exactKernel };
}

/** Codes as a packed typed array (rows inferred) or { data, rows, bits }. */
function toCodes(v: unknown, name: string, bits: number): BitWords {
  const words = asTyped(v, Uint32Array, name);
  const packed = words ?? asTyped(v, Uint8Array, name);
  if (packed) {
    const unit = words ? bits / 32 : bits / 8;
    if (packed.length % unit !== 0) {
      const what = words ? 'words' : 'bytes';
      throw rangeError(`${name} has ${packed.length} ${what}, not a multiple of one ${bits}-bit code (${unit} ${what})`);
    }
    return toBits({ data: packed, rows: packed.length / unit, bits }, name, { bits });
  }
  if (isObject(v) && 'data' in v) return toBits(v, name, { bits });
  throw typeError(`${name} must be a packed Uint32Array or Uint8Array of ${bits}-bit codes, got ${describe(v)}`);
}

/**
 * Ids: the i-th code ever added has id i. remove() retires ids for good
 * (later adds continue after the largest id given out); searches never
 * return a removed id, on either backend.
 */
export class HammingIndex extends NativeResource<HammingIndexNative> {
  readonly bits!: number;
  readonly method!: HammingMethod;
  readonly backend: Backend;
  readonly tuning: Required<HammingTuning>;

  constructor(options: HammingIndexOptions) {
    if (!isObject(options)) throw typeError(`options must be an object, got ${describe(options)}`);
    const bits = checkInt(options.bits, 'bits', 32, MAX_BITS);
    if (bits % 32 !== 0) throw rangeError(`bits must be a multiple of 32, got ${bits}`);
    const method = checkEnum(options.method ?? 'exact', 'method', ['exact', 'ewh'] as const);
    const tables = checkInt(options.tables ?? 4, 'tables', 1, 64);
    const keyBits = checkInt(options.keyBits ?? 5, 'keyBits', 1, Math.min(24, bits));
    const maxErrors = checkInt(options.maxErrors ?? 2, 'maxErrors', 0, Math.min(3, keyBits));
    const w = options.weights ?? [10, 5, 2].slice(0, maxErrors + 1);
    if (!Array.isArray(w)) throw typeError(`weights must be an array of integers, got ${describe(w)}`);
    if (w.length !== maxErrors + 1) {
      throw rangeError(`weights must have maxErrors + 1 = ${maxErrors + 1} entries, got ${w.length}`);
    }
    const weights = Int32Array.from(w.map((x, i) => checkInt(x, `weights[${i}]`, 0, MAX_SCORE)));
    const maxW = Math.max(...weights);
    if (maxW * tables > MAX_SCORE) {
      throw rangeError(`tables * max(weights) = ${maxW * tables} exceeds ${MAX_SCORE}, the score histogram's range`);
    }
    const minScore = checkInt(options.minScore ?? 20, 'minScore', -1e9, 1e9);
    const shortlist = options.shortlist === undefined ? 0 : checkInt(options.shortlist, 'shortlist', 1, 0xfffffffe);
    const seed = checkInt(options.seed ?? 1, 'seed', 0);
    const devices = resolveOneDevice(options, 'HammingIndex');
    const tuning = checkHammingTuning(options.tuning);
    const backend = resolveBackend(options.backend);
    const { exactKernel } = tuning;
    super(
      new (native().HammingIndex)({
        backend,
        devices,
        exactKernel,
        bits,
        method,
        tables,
        keyBits,
        maxErrors,
        weights,
        minScore,
        shortlist,
        seed,
      }),
      'HammingIndex',
    );
    Object.assign(this as { bits: number; method: HammingMethod }, { bits, method });
    this.backend = backend;
    this.tuning = tuning;
  }

  /** Number of codes in the index (added and not removed). */
  get size(): number {
    return this.handle.size();
  }

  /** Appends codes; their ids continue the insertion order. Returns the new size (codes not removed). */
  add(codes: Uint32Array | Uint8Array | BitWords): number {
    const c = toCodes(codes, 'codes', this.bits);
    return this.handle.add(c.data);
  }

  /** The k nearest codes of each query, ordered by (distance, id). */
  async search(queries: Uint32Array | Uint8Array | BitWords, options: HammingSearchOptions): Promise<HammingSearchResult> {
    const q = toCodes(queries, 'queries', this.bits);
    if (!isObject(options)) throw typeError(`options must be an object with k, got ${describe(options)}`);
    const k = checkInt(options.k, 'k', 1, MAX_K);
    if ('exactKernel' in options) {
      throw typeError('search options.exactKernel moved to the constructor: new HammingIndex({ ..., tuning: { exactKernel } })');
    }
    const h = this.handle;
    if (this.size === 0) throw rangeError('search on an empty index: add codes first');
    const reporter = new ProgressReporter(checkOnProgress(options.onProgress));
    return withCancel(options.signal, async (cancel) => {
      const r = await withNativeProgress(reporter, ['search'], (progress) => h.search(q, { k, cancel, progress }), q.rows);
      return { ...r, backend: this.backend };
    });
  }

  /** EWH scores of every id for each query (q × size, row-major): Algorithm 3's scoring pass alone. */
  async scores(queries: Uint32Array | Uint8Array | BitWords): Promise<Uint32Array> {
    if (this.method !== 'ewh') throw typeError(`scores needs method 'ewh', this index is '${this.method}'`);
    const q = toCodes(queries, 'queries', this.bits);
    return this.handle.scores(q);
  }

  /** Builds the EWH buckets now (search builds lazily); returns the CUDA build's device time. */
  async build(): Promise<{ buildMs: number; transferMs: number }> {
    return this.handle.build();
  }

  /**
   * Removes codes by id; ids not in the index (never added or already
   * removed) are skipped. Returns how many were removed. The rows are
   * compacted away before the next search, build, scores or save.
   */
  remove(ids: Uint32Array | readonly number[]): number {
    return this.handle.remove(toU32(ids, 'ids'));
  }

  /** The ids in the index, ascending: the column order of scores(). */
  ids(): Uint32Array {
    return this.handle.ids();
  }

  /**
   * Writes the index (codes, ids and parameters; EWH buckets are rebuilt on
   * load) as a checksummed file, atomically (docs/persistence.md).
   */
  async save(path: string): Promise<void> {
    checkPath(path);
    await this.handle.save(path);
  }

  /** Reads an index written by save(): codes go straight into their final buffer. */
  static async load(
    path: string,
    options: { backend?: BackendOption; devices?: 'all' | number[]; tuning?: HammingTuning } = {},
  ): Promise<HammingIndex> {
    checkPath(path);
    if (!isObject(options)) throw typeError(`options must be an object, got ${describe(options)}`);
    const ix = new HammingIndex({
      bits: 32,
      backend: options.backend,
      devices: options.devices,
      tuning: options.tuning,
    });
    try {
      const o = await ix.handle.load(path);
      Object.assign(ix as { bits: number; method: HammingMethod }, { bits: o.bits, method: o.method });
    } catch (e) {
      ix.dispose();
      throw e;
    }
    return ix;
  }

  /** EWH key bit positions, tables × keyBits (empty for 'exact'). */
  positions(): Uint32Array {
    return this.handle.positions();
  }
}
