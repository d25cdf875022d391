// MinHash LSH over MinHash signatures (weighted or classic): banding,
// candidate pairs and verified duplicate groups (the dedup pipeline over it
// is lib/dedup/).
import { native } from './addon.js';
import { resolveBackend, resolveDevices, type Backend, type BackendOption } from './backend.js';
import { withCancel } from './cancel.js';
import { checkOnProgress, ProgressReporter, withNativeProgress, type OnProgress } from './progress.js';
import { disposedError, rangeError, typeError } from './errors.js';
import { checkRedisOptions, RedisLsh, type RedisStorageOptions } from './lsh-redis.js';
import { badFile, checkPath, openSections, saveSections, u32View } from './persist.js';
import {
  checkEnum,
  checkFraction,
  checkInt,
  checkNumber,
  checkOpenFraction,
  checkOptions,
  copyCsr,
  describe,
  isObject,
  toCsr,
  toU32,
  type CsrMatrix,
  checkTyped,
  asTyped,
} from './validate.js';
import type { CallControl, LshCallOptions, Staged } from './native-types.js';
import { sortedHas } from './sorted.js';

export interface LshParams {
  bands: number;
  rows: number;
}

// Composite Simpson's rule; 256 panels put the error far below the gaps
// between neighbouring (bands, rows) choices. Every weight is positive, so a
// pointwise monotone integrand gives a monotone integral (optimalParams'
// bounds rely on it).
const PANELS = 256;

function simpson(f: (x: number) => number, a: number, b: number, panels = PANELS): number {
  if (b <= a) return 0;
  const h = (b - a) / panels;
  let s = f(a) + f(b);
  for (let i = 1; i < panels; i++) s += f(a + i * h) * (i % 2 === 1 ? 4 : 2);
  return (s * h) / 3;
}

/** P(a pair of Jaccard similarity s shares a band) with b bands of r rows: 1 - (1 - s^r)^b. */
export function candidateProbability(s: number, bands: number, rows: number): number {
  return 1 - Math.pow(1 - Math.pow(s, rows), bands);
}

// datasketch's objective terms: P(candidate) integrated below the threshold
// (false positives) and P(not candidate) above it (false negatives).
function falsePositive(t: number, b: number, r: number): number {
  return simpson((s) => 1 - Math.pow(1 - Math.pow(s, r), b), 0, t);
}
function falseNegative(t: number, b: number, r: number): number {
  return simpson((s) => Math.pow(1 - Math.pow(s, r), b), t, 1);
}

/**
 * (bands, rows) minimizing fpWeight * P(false positive) + fnWeight *
 * P(false negative) for a Jaccard threshold, with bands * rows <= samples,
 * as datasketch's MinHashLSH chooses them: the probabilities are the
 * integrals of the S-curve 1 - (1 - s^r)^b below and above the threshold.
 *
 * The answer equals an exhaustive scan of every (b, r) (ties to the smaller
 * b, then r, as the scan finds them) but costs milliseconds for any samples.
 * For a fixed r the error is unimodal in b: its derivative is
 * sum_low a_i q_i^b - sum_high c_i q_i^b with a, c >= 0 and q_i = 1 - s_i^r,
 * whose low-side q_i all exceed the high-side ones, so divided by
 * (1 - t^r)^b it is nondecreasing and changes sign once; a binary search on
 * E(b + 1) - E(b) finds the first minimum. Over a range of r, P(false
 * positive) grows with b and shrinks with r and P(false negative) the
 * reverse, so the error is at least fpWeight * FP(1, r_hi) + fnWeight *
 * FN(b_max(r_lo), r_lo); ranges are split best-first and dropped once that
 * bound exceeds the best error found.
 */
export function optimalParams(threshold: number, samples: number, weights: readonly [number, number] = [0.5, 0.5]): LshParams {
  checkOpenFraction(threshold, 'threshold');
  checkInt(samples, 'samples', 1, MAX_LSH_SAMPLES);
  const [fpW, fnW] = checkWeights(weights);
  const key = `${threshold},${samples},${fpW},${fnW}`;
  const hit = paramCache.get(key);
  if (hit) return { ...hit };
  const fpMemo = new Map<number, number>();
  const fnMemo = new Map<number, number>();
  // b and r are at most 2^20, so b * 2^21 + r is an exact key.
  const fp = (b: number, r: number): number => {
    const k = b * 2097152 + r;
    let v = fpMemo.get(k);
    if (v === undefined) fpMemo.set(k, (v = falsePositive(threshold, b, r)));
    return v;
  };
  const fn = (b: number, r: number): number => {
    const k = b * 2097152 + r;
    let v = fnMemo.get(k);
    if (v === undefined) fnMemo.set(k, (v = falseNegative(threshold, b, r)));
    return v;
  };
  // The objective exactly as the exhaustive scan computes it.
  const err = (b: number, r: number): number => fp(b, r) * fpW + fn(b, r) * fnW;
  let best = err(1, 1);
  let opt: LshParams = { bands: 1, rows: 1 };
  const consider = (b: number, r: number): void => {
    const e = err(b, r);
    if (e < best || (e === best && (b < opt.bands || (b === opt.bands && r < opt.rows)))) {
      best = e;
      opt = { bands: b, rows: r };
    }
  };
  // The first minimum over b in [1, bMax] for this r; neighbours are checked
  // too, in case float rounding blurs a flat stretch by an ulp.
  const solveRow = (r: number): void => {
    const bMax = Math.floor(samples / r);
    let lo = 1;
    let hi = bMax;
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2);
      if (err(mid + 1, r) - err(mid, r) >= 0) hi = mid;
      else lo = mid + 1;
    }
    for (let b = Math.max(1, lo - 2); b <= Math.min(bMax, lo + 2); b++) consider(b, r);
  };
  const slack = 1e-12;
  const heap: { r1: number; r2: number; lb: number }[] = [];
  const push = (r1: number, r2: number): void => {
    if (r1 > r2) return;
    if (r1 === r2) return solveRow(r1);
    const lb = fp(1, r2) * fpW + fn(Math.floor(samples / r1), r1) * fnW;
    if (lb > best + slack) return;
    heapPush(heap, { r1, r2, lb });
  };
  push(1, samples);
  while (heap.length > 0) {
    const box = heapPop(heap);
    if (box.lb > best + slack) break;
    const m = Math.floor((box.r1 + box.r2) / 2);
    push(box.r1, m);
    push(m + 1, box.r2);
  }
  if (paramCache.size > 256) paramCache.clear();
  paramCache.set(key, opt);
  return { ...opt };
}

type Keyed = { lb: number };
function heapPush<T extends Keyed>(h: T[], x: T): void {
  h.push(x);
  for (let i = h.length - 1; i > 0;) {
    const p = (i - 1) >> 1;
    if (h[p].lb <= h[i].lb) break;
    [h[p], h[i]] = [h[i], h[p]];
    i = p;
  }
}
function heapPop<T extends Keyed>(h: T[]): T {
  const top = h[0];
  const last = h.pop()!;
  if (h.length > 0) {
    h[0] = last;
    for (let i = 0; ;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < h.length && h[l].lb < h[m].lb) m = l;
      if (r < h.length && h[r].lb < h[m].lb) m = r;
      if (m === i) break;
      [h[m], h[i]] = [h[i], h[m]];
      i = m;
    }
  }
  return top;
}

const paramCache = new Map<string, LshParams>();

/** The largest samples MinHashLSH accepts. */
export const MAX_LSH_SAMPLES = 1 << 20;

export interface RecallTarget {
  /** Least probability that a pair at similarity `threshold + margin` becomes a candidate. Default 0.95. */
  recall?: number;
  /** Default 0.05; the target similarity is min(threshold + margin, (1 + threshold) / 2). */
  margin?: number;
}

export interface RecallParams extends LshParams {
  /** Samples the choice needs: bands * rows rounded up to what was asked, or more where that cannot reach the recall. */
  samples: number;
  /** The similarity the recall is promised at. */
  at: number;
  /** The exact candidate probability 1 - (1 - at^rows)^bands there. */
  probability: number;
}

/**
 * (bands, rows) under which a pair at similarity threshold + margin becomes a
 * candidate with probability at least `recall`, choosing among those the one
 * with the fewest false candidates (the least integral of the S-curve below
 * the threshold). When `samples` cannot reach the recall, the result names
 * the fewest samples that can (its `samples` exceeds the one asked).
 */
export function recallParams(threshold: number, samples: number, target: RecallTarget = {}): RecallParams {
  checkOpenFraction(threshold, 'threshold');
  checkInt(samples, 'samples', 1, MAX_LSH_SAMPLES);
  if (!isObject(target as unknown)) throw typeError(`target must be an object, got ${describe(target)}`);
  const recall = checkOpenFraction(target.recall ?? 0.95, 'recall');
  const margin = checkNumber(target.margin ?? 0.05, 'margin', { min: 0, max: 1 });
  const at = Math.min(threshold + margin, (1 + threshold) / 2);
  // Fewest bands of r rows reaching the recall; grows with r, so b(r) * r does too.
  const bandsFor = (r: number): number => {
    const q = 1 - Math.pow(at, r);
    if (q >= 1) return Infinity;
    let b = Math.max(1, Math.ceil(Math.log(1 - recall) / Math.log(q)));
    while (candidateProbability(at, b, r) < recall) b++;
    while (b > 1 && candidateProbability(at, b - 1, r) >= recall) b--;
    return b;
  };
  let best: { bands: number; rows: number; fp: number } | undefined;
  for (let r = 1; r <= samples; r++) {
    const b = bandsFor(r);
    if (b * r > samples) break;
    const fp = falsePositive(threshold, b, r);
    if (!best || fp < best.fp) best = { bands: b, rows: r, fp };
  }
  if (!best) {
    // Single-row bands need the fewest samples; that many is the least that works.
    const fewest = bandsFor(1);
    if (fewest > MAX_LSH_SAMPLES) throw rangeError(`recall ${recall} at similarity ${at} needs more than ${MAX_LSH_SAMPLES} samples`);
    return recallParams(threshold, fewest, target);
  }
  return { bands: best.bands, rows: best.rows, samples, at, probability: candidateProbability(at, best.bands, best.rows) };
}

/** The S-curve at similarities from threshold - 0.25 to 1 in steps of 0.05, plus the threshold and `at`. */
export function recallCurve(bands: number, rows: number, threshold: number, at?: number): { similarity: number; probability: number }[] {
  const round = (x: number) => Math.round(x * 1e6) / 1e6;
  // Keyed by the printed similarity: t + margin (0.8 + 0.05 = 0.8500000000000001) is the grid's 0.85.
  const xs = new Map<number, number>();
  const add = (s: number) => {
    if (!xs.has(round(s))) xs.set(round(s), s);
  };
  for (let i = 1; i <= 20; i++) {
    const s = i / 20;
    if (s >= threshold - 0.25 - 1e-9) add(s);
  }
  add(threshold);
  if (at !== undefined) add(at);
  return [...xs]
    .sort(([a], [b]) => a - b)
    .map(([similarity, s]) => ({ similarity, probability: round(candidateProbability(s, bands, rows)) }));
}

function checkWeights(w: unknown): [number, number] {
  if (!Array.isArray(w) || w.length !== 2) throw typeError(`weights must be an array [fpWeight, fnWeight], got ${describe(w)}`);
  const fp = checkNumber(w[0], 'weights[0]', { min: 0, max: 1 });
  const fn = checkNumber(w[1], 'weights[1]', { min: 0, max: 1 });
  if (Math.abs(fp + fn - 1) > 1e-9) throw rangeError(`weights must sum to 1, got ${fp} + ${fn}`);
  return [fp, fn];
}

/**
 * Which signatures an index holds: 'weighted' (WeightedMinHash: two words,
 * (k*, t*), per sample) or 'classic' (MinHash: one word per sample).
 */
export type SignatureKind = 'weighted' | 'classic';

export type { RedisStorageOptions } from './lsh-redis.js';

/**
 * With `threshold` alone, (bands, rows) are datasketch's (optimalParams, with
 * `weights`); with `recall` they are recallParams' (a pair at threshold +
 * margin is a candidate with at least that probability); or give them.
 */
export type MinHashLSHOptions = (
  | { threshold: number; samples?: number; weights?: readonly [number, number]; recall?: undefined; bands?: undefined; rows?: undefined }
  | { threshold: number; samples?: number; recall: number; margin?: number; weights?: undefined; bands?: undefined; rows?: undefined }
  | { bands: number; rows: number; samples?: number; threshold?: number; weights?: undefined; recall?: undefined }
) & {
  backend?: BackendOption;
  devices?: 'all' | number[];
  /**
   * The signature layout. When absent, the first insert decides it from its
   * length (ids.length × samples words: 'classic'; × samples × 2: 'weighted');
   * until then query() reads weighted signatures. With Redis storage it is
   * fixed when the index is created (default 'weighted'; every process must
   * open it with the same kind).
   */
  kind?: SignatureKind;
  /**
   * Where rows live: in this process (default), or in Redis, shared by every
   * process that opens the same url and prefix with the same parameters
   * (docs/redis-lsh.md). With Redis, insert, remove and count are async.
   */
  storage?: { type: 'memory' } | RedisStorageOptions;
};

export type Verify = 'none' | 'estimate' | 'exact';

export interface PairSet {
  left: Uint32Array;
  right: Uint32Array;
}

export interface GroupsResult {
  /** The id of each entry of `group`: insertion order in memory, ascending with Redis storage. */
  ids: Uint32Array;
  /** One group id per row (of `ids`); 0xFFFFFFFF = no verified partner. */
  group: Uint32Array;
  /** Groups are numbered 0..count-1 in order of their first-inserted member. */
  count: number;
  /**
   * Verified edges (ids, left < right, sorted) spanning the groups: every
   * verified pair of distinct rows, except that rows identical to an earlier
   * row (same signature; for 'exact' also the same vector) are linked only to
   * that first copy, with similarity 1. Components are the same as with all edges.
   */
  pairs: PairSet & { similarity: Float32Array };
  /** Device time of the bucketing kernels (CUDA events); 0 on CPU. */
  kernelMs: number;
  /** Signature upload + pair download (CUDA events); 0 on CPU. */
  transferMs: number;
}

export interface GroupsOptions {
  /** 'none': every candidate pair is an edge; 'estimate': signature agreement >= threshold; 'exact': true weighted Jaccard >= threshold. */
  verify?: Verify;
  /** Rows indexed by id; required for 'exact' (with Redis storage: unless the rows are stored, or `rows` gives them). */
  matrix?: CsrMatrix;
  /**
   * Redis storage, 'exact': the vectors of the ids asked for (row i = ids[i]), for rows whose vectors
   * the caller keeps elsewhere than the index (the scale-out jobs keep one blob per insert batch).
   * Asked for the ends of candidate pairs and the rows sharing a signature only. Not with `matrix`.
   */
  rows?: (ids: Uint32Array) => Promise<CsrMatrix>;
  /** Defaults to the LSH's threshold, or (1/bands)^(1/rows) when built from bands and rows. */
  threshold?: number;
  signal?: AbortSignal;
  /**
   * Stages 'candidates' (banding; no total) and 'verify' (candidate pairs
   * checked, of total) as ProgressEvents.
   */
  onProgress?: OnProgress;
}

const SENTINEL = 0xffffffff;
const WIDTH: Record<SignatureKind, 1 | 2> = { weighted: 2, classic: 1 };

/**
 * Banded LSH index over MinHash signatures: weighted (samples (k, t) pairs
 * per row) or classic (samples words per row), see `kind`. Band keys are
 * 64-bit hashes of each band's r samples, one table per band. Rows whose
 * words are all the empty-row sentinel (0xFFFFFFFF) never match. With 'exact'
 * verification, weighted rows are compared by weighted Jaccard and classic
 * rows by the Jaccard of their sets of columns (weights ignored).
 * Candidate pairs, groups and queries are computed in batch over everything
 * inserted so far; the bucketing (band hashing, radix sort, pair emission,
 * sort + unique, signature agreement) runs on the GPU with backend 'cuda';
 * query() runs on the CPU. Both backends return identical results.
 *
 * Large buckets: rows that are interchangeable (identical signatures; for
 * 'exact' verification also identical vectors) are collapsed to their first
 * row before banding, so m identical rows cost O(m), not m(m-1)/2 pairs per
 * band. groups() links each copy to its first row (similarity 1), which gives
 * the same components as all pairwise edges; candidatePairs() expands the
 * copies back (its output for a bucket of m rows is m(m-1)/2 pairs by
 * definition). Distinct rows sharing one band still emit all their pairs.
 */
export class MinHashLSH implements Disposable {
  readonly bands: number;
  readonly rows: number;
  readonly samples: number;
  readonly threshold: number;
  readonly backend: Backend;
  readonly #devices: number[] | undefined;
  #kind: SignatureKind | undefined;
  readonly #redis: RedisLsh | undefined;
  #idChunks: Uint32Array<ArrayBufferLike>[] = [];
  // Native copies (native().stageArray): calls read them in place, and no
  // caller's array is read after insert() returns.
  #sigChunks: Staged[] = [];
  #sortedIds: Uint32Array<ArrayBufferLike> = new Uint32Array(0);
  #size = 0;
  #disposed = false;

  constructor(options: MinHashLSHOptions) {
    if (!isObject(options as unknown)) throw typeError(`options must be an object, got ${describe(options)}`);
    const o = options as Record<string, unknown>;
    if (o.bands !== undefined || o.rows !== undefined) {
      const bands = checkInt(o.bands, 'bands', 1, MAX_LSH_SAMPLES);
      const rows = checkInt(o.rows, 'rows', 1, MAX_LSH_SAMPLES);
      const samples = o.samples === undefined ? bands * rows : checkInt(o.samples, 'samples', 1, MAX_LSH_SAMPLES);
      if (bands * rows > samples) throw rangeError(`bands * rows = ${bands * rows} exceeds samples = ${samples}`);
      if (o.weights !== undefined) throw typeError('weights apply only with threshold, not with explicit bands and rows');
      this.bands = bands;
      this.rows = rows;
      this.samples = samples;
      this.threshold = o.threshold === undefined ? Math.pow(1 / bands, 1 / rows) : checkFraction(o.threshold, 'threshold');
    } else {
      const threshold = checkOpenFraction(o.threshold, 'threshold');
      const samples = o.samples === undefined ? 128 : checkInt(o.samples, 'samples', 1, MAX_LSH_SAMPLES);
      let p: LshParams;
      if (o.recall !== undefined) {
        if (o.weights !== undefined) throw typeError('give recall or weights, not both');
        const r = recallParams(threshold, samples, { recall: o.recall as number, margin: o.margin as number | undefined });
        if (r.samples > samples) {
          throw rangeError(`recall ${o.recall} at similarity ${r.at} needs at least ${r.samples} samples, got samples = ${samples}`);
        }
        p = r;
      } else {
        p = optimalParams(threshold, samples, (o.weights as [number, number] | undefined) ?? [0.5, 0.5]);
      }
      this.bands = p.bands;
      this.rows = p.rows;
      this.samples = samples;
      this.threshold = threshold;
    }
    this.backend = resolveBackend(o.backend);
    this.#devices = resolveDevices(o.devices);
    this.#kind = o.kind === undefined ? undefined : checkEnum(o.kind, 'kind', ['weighted', 'classic'] as const);
    if (o.storage !== undefined && !(isObject(o.storage) && o.storage.type === 'memory' && Object.keys(o.storage).length === 1)) {
      this.#kind ??= 'weighted';
      this.#redis = new RedisLsh(
        { samples: this.samples, bands: this.bands, rows: this.rows, width: WIDTH[this.#kind] },
        checkRedisOptions(o.storage),
      );
    }
  }

  /** The signature layout: set by options.kind or by the first insert; undefined until then. */
  get kind(): SignatureKind | undefined {
    return this.#kind;
  }

  /** Number of inserted rows (in memory; with Redis storage use count()). */
  get size(): number {
    if (this.#redis) throw typeError('size is not known synchronously with Redis storage: use await lsh.count()');
    return this.#size;
  }

  /** Number of rows in the index. */
  async count(): Promise<number> {
    this.#check();
    return this.#redis ? this.#redis.count() : this.#size;
  }

  /** The Redis storage's key prefix, or undefined in memory. */
  get storagePrefix(): string | undefined {
    return this.#redis?.prefix;
  }

  get disposed(): boolean {
    return this.#disposed;
  }

  #check(): void {
    if (this.#disposed) throw disposedError('MinHashLSH');
  }

  #sigs(given: unknown, rows: number | undefined, name: string, kind: SignatureKind = this.#kind ?? 'weighted'): Uint32Array {
    const signatures = checkTyped(given, Uint32Array, name);
    const width = WIDTH[kind];
    const per = this.samples * width;
    if (rows === undefined ? signatures.length % per !== 0 : signatures.length !== rows * per) {
      throw rangeError(
        `${name} has length ${signatures.length} but ${rows === undefined ? 'a multiple of' : `${rows} rows ×`} samples * ${width} = ${per} was expected`,
      );
    }
    return signatures;
  }

  /**
   * Adds rows: ids (unique uint32; also each row's index into groups'
   * `matrix`) and their signatures. Both are copied: the arrays may be
   * reused or transferred as soon as this returns. With Redis storage it
   * returns a Promise, resolved once every row is stored (visible to every
   * process); `options.vectors` (row i is ids[i]'s weighted vector) stores the
   * rows for groups({ verify: 'exact' }) without a matrix.
   */
  insert(ids: Uint32Array | readonly number[], signatures: Uint32Array, options?: { vectors?: CsrMatrix }): void | Promise<void> {
    this.#check();
    const idU32 = asTyped(ids, Uint32Array, 'ids');
    if (!idU32 && !Array.isArray(ids)) throw typeError(`ids must be a Uint32Array or an array of integers, got ${describe(ids)}`);
    const n = idU32 ? idU32.length : ids.length;
    const sigU32 = asTyped(signatures, Uint32Array, 'signatures');
    const kind = this.#kind ?? (n > 0 && sigU32 && sigU32.length === n * this.samples ? 'classic' : 'weighted');
    const sig = this.#sigs(signatures, n, 'signatures', kind);
    if (options !== undefined && !isObject(options as unknown)) throw typeError(`options must be an object, got ${describe(options)}`);
    if (this.#redis) {
      const idArr = toU32(ids, 'ids');
      const sorted = idArr.slice().sort();
      for (let i = 1; i < sorted.length; i++) if (sorted[i] === sorted[i - 1]) throw rangeError(`ids repeat ${sorted[i]}`);
      return this.#redis.insert(idArr, sig, options?.vectors);
    }
    if (options?.vectors !== undefined) throw typeError('vectors are stored only with Redis storage; in memory pass groups({ matrix })');
    const idCopy = idU32 ? idU32.slice() : toU32(ids, 'ids');
    if (n === 0) return;
    this.#sortedIds = mergeUnique(this.#sortedIds, idCopy);
    this.#kind = kind;
    this.#idChunks.push(idCopy);
    this.#sigChunks.push(native().stageArray([sig]));
    this.#size += n;
  }

  // Chunks are joined once, at the first batch call after inserts.
  #state(): { ids: Uint32Array; sigs: Staged } {
    if (this.#sigChunks.length > 1) {
      const joined = native().stageArray(this.#sigChunks, true);
      for (const c of this.#sigChunks) c.dispose();
      this.#sigChunks = [joined];
    }
    const sigs = this.#sigChunks[0] ?? native().stageArray([new Uint32Array(0)]);
    const join = (chunks: Uint32Array<ArrayBufferLike>[]): Uint32Array => {
      if (chunks.length === 1) return chunks[0];
      const out = new Uint32Array(chunks.reduce((a, c) => a + c.length, 0));
      let o = 0;
      for (const c of chunks) {
        out.set(c, o);
        o += c.length;
      }
      chunks.length = 0;
      chunks.push(out);
      return out;
    };
    return { ids: join(this.#idChunks), sigs };
  }

  #nativeOptions(control: CallControl = {}): LshCallOptions {
    const width = WIDTH[this.#kind ?? 'weighted'];
    return { samples: this.samples, bands: this.bands, rows: this.rows, width, backend: this.backend, devices: this.#devices, ...control };
  }

  /** Candidate ids per query row (sharing at least one band), deduplicated and ascending. */
  async query(signatures: Uint32Array): Promise<{ indptr: Uint32Array; ids: Uint32Array }> {
    this.#check();
    const q = this.#sigs(signatures, undefined, 'signatures');
    if (this.#redis) return this.#redis.query(q);
    const { ids, sigs } = this.#state();
    const r = await native().lshQuery(sigs, ids, q, this.#nativeOptions());
    return { indptr: r.indptr, ids: r.ids };
  }

  /** Every unique pair of inserted ids sharing a band bucket (left < right, sorted). */
  async candidatePairs(
    options: { signal?: AbortSignal; onProgress?: OnProgress } = {},
  ): Promise<PairSet & { kernelMs: number; transferMs: number }> {
    this.#check();
    checkOptions(options);
    if (this.#redis) return { ...(await this.#redis.candidatePairs()), kernelMs: 0, transferMs: 0 };
    const { ids, sigs } = this.#state();
    const reporter = new ProgressReporter(checkOnProgress(options.onProgress));
    return withCancel(options.signal, async (cancel) => {
      const r = await withNativeProgress(reporter, ['candidates'], (progress) =>
        native().lshCandidatePairs(sigs, ids, this.#nativeOptions({ cancel, progress })),
      );
      return { left: r.left, right: r.right, kernelMs: r.kernelMs, transferMs: r.transferMs };
    });
  }

  /** Connected components of verified candidate pairs. */
  async groups(options: GroupsOptions = {}): Promise<GroupsResult> {
    this.#check();
    if (!isObject(options as unknown)) throw typeError(`options must be an object, got ${describe(options)}`);
    const verify = checkEnum(options.verify ?? 'estimate', 'verify', ['none', 'estimate', 'exact'] as const);
    const threshold = options.threshold === undefined ? this.threshold : checkFraction(options.threshold, 'threshold');
    let matrix: CsrMatrix | undefined;
    if (options.matrix !== undefined)
      matrix = toCsr(options.matrix, 'matrix', { maxCols: this.#kind === 'classic' ? 2 ** 32 : 0xffffffff });
    if (options.rows !== undefined) {
      if (typeof options.rows !== 'function') throw typeError(`rows must be a function, got ${describe(options.rows)}`);
      if (!this.#redis) throw typeError('rows applies to Redis storage; in memory pass matrix');
      if (matrix) throw typeError('pass matrix or rows, not both');
    }
    if (this.#redis) {
      // A copy: Redis storage reads the matrix after its first round trip.
      const r = await this.#redis.groups(verify, threshold, options.rows ?? (matrix && copyCsr(matrix)));
      return { ...r, kernelMs: 0, transferMs: 0 };
    }
    if (verify === 'exact') {
      if (matrix === undefined) throw typeError("matrix is required for verify 'exact'");
      const { ids } = this.#state();
      for (let i = 0; i < ids.length; i++) {
        if (ids[i] >= matrix.rows) throw rangeError(`id ${ids[i]} (row ${i}) has no row in matrix (matrix.rows = ${matrix.rows})`);
      }
    }
    return this.#groups(verify, threshold, matrix, options);
  }

  // The native groups call; `matrix` (read before this returns) is the caller's or staged.
  #groups(verify: Verify, threshold: number, matrix: CsrMatrix | Staged | undefined, options: GroupsOptions): Promise<GroupsResult> {
    const { ids, sigs } = this.#state();
    const reporter = new ProgressReporter(checkOnProgress(options.onProgress));
    return withCancel(options.signal, async (cancel) => {
      const r = await withNativeProgress(reporter, ['candidates', 'verify'], (progress) =>
        native().lshGroups(sigs, ids, { ...this.#nativeOptions({ cancel, progress }), verify, threshold, matrix }),
      );
      return {
        ids: ids.slice(),
        group: r.group,
        count: r.count,
        pairs: { left: r.left, right: r.right, similarity: r.similarity },
        kernelMs: r.kernelMs,
        transferMs: r.transferMs,
      };
    });
  }

  /**
   * Removes rows by id; ids not in the index are skipped. Returns how many
   * were removed. Queries, pairs and groups never see a removed id, and an
   * id can be inserted again after its removal.
   */
  remove(ids: Uint32Array | readonly number[]): number | Promise<number> {
    this.#check();
    if (this.#redis) return this.#redis.remove(toU32(ids, 'ids'));
    const drop = toU32(ids, 'ids').slice().sort();
    if (drop.length === 0 || this.#size === 0) return 0;
    const { ids: have, sigs } = this.#state();
    const per = this.samples * WIDTH[this.#kind ?? 'weighted'];
    const keep = new Uint8Array(have.length);
    let kept = 0;
    for (let i = 0; i < have.length; i++) {
      keep[i] = sortedHas(drop, have[i]) ? 0 : 1;
      kept += keep[i];
    }
    const removed = have.length - kept;
    if (removed === 0) return 0;
    const nextIds = new Uint32Array(kept);
    for (let i = 0, o = 0; i < have.length; i++) if (keep[i]) nextIds[o++] = have[i];
    const nextSigs = native().stageSelect(sigs, per, keep);
    for (const c of this.#sigChunks) c.dispose();
    this.#idChunks = kept ? [nextIds] : [];
    this.#sigChunks = kept ? [nextSigs] : [];
    this.#sortedIds = nextIds.slice().sort();
    this.#size = kept;
    return removed;
  }

  /**
   * Writes the index (parameters, ids in insertion order, signatures) as a
   * checksummed file, atomically (docs/persistence.md, kind 'minhash-lsh').
   */
  async save(path: string): Promise<void> {
    this.#check();
    checkPath(path);
    if (this.#redis) throw typeError('an index with Redis storage lives in Redis: save() applies to in-memory indexes');
    const { ids, sigs } = this.#state();
    const parm = new DataView(new ArrayBuffer(32));
    parm.setUint32(0, this.samples, true);
    parm.setUint32(4, this.bands, true);
    parm.setUint32(8, this.rows, true);
    parm.setUint32(12, this.#kind === 'classic' ? 1 : 0, true); // the signature layout
    parm.setFloat64(16, this.threshold, true);
    parm.setBigUint64(24, BigInt(ids.length), true);
    await saveSections(path, LSH_KIND, LSH_VERSION, [
      ['PARM', new Uint8Array(parm.buffer)],
      ['IDS_', ids],
      ['SIGS', sigs as unknown as ArrayBufferView],
    ]);
  }

  /** Reads an index written by save(); the result equals the index saved (same rows in the same order). */
  static async load(path: string, options: { backend?: BackendOption; devices?: 'all' | number[] } = {}): Promise<MinHashLSH> {
    checkPath(path);
    if (!isObject(options as unknown)) throw typeError(`options must be an object, got ${describe(options)}`);
    const f = await openSections(path, LSH_KIND, LSH_VERSION);
    try {
      const bad = (why: string) => badFile(path, LSH_KIND, why);
      if (f.sections.PARM !== 32) throw bad(`parameter section has ${f.sections.PARM ?? 0} bytes, not 32`);
      const p = new DataView((await f.read('PARM', 32)).slice().buffer);
      const samples = p.getUint32(0, true);
      const bands = p.getUint32(4, true);
      const rows = p.getUint32(8, true);
      const threshold = p.getFloat64(16, true);
      const count = Number(p.getBigUint64(24, true));
      const layout = p.getUint32(12, true);
      const kind: SignatureKind = layout === 1 ? 'classic' : 'weighted';
      const width = WIDTH[kind];
      if (samples < 1 || samples > 1 << 20 || bands < 1 || rows < 1 || bands * rows > samples || layout > 1) {
        throw bad(`bad parameters (samples ${samples}, bands ${bands}, rows ${rows})`);
      }
      if (!(threshold > 0 && threshold <= 1)) throw bad(`threshold ${threshold} is not in (0, 1]`);
      if (count > 0xffffffff || count * samples * 4 * width > Number.MAX_SAFE_INTEGER) throw bad(`row count ${count} is out of range`);
      if (f.sections.IDS_ !== count * 4 || f.sections.SIGS !== count * samples * 4 * width) {
        throw bad(`sections do not hold ${count} rows of ${samples} samples`);
      }
      const ids = u32View(await f.read('IDS_', count * 4));
      const sigs = u32View(await f.read('SIGS', count * samples * 4 * width));
      const lsh = new MinHashLSH({ bands, rows, samples, threshold, backend: options.backend, devices: options.devices, kind });
      try {
        if (count > 0) lsh.insert(ids, sigs);
      } catch (e) {
        throw bad(`${(e as Error).message}`);
      }
      return lsh;
    } finally {
      f.close();
    }
  }

  /** Closes the Redis connection (in memory: nothing to wait for). */
  async close(): Promise<void> {
    this.dispose();
    await this.#redis?.close();
  }

  /** Deletes this index's keys from Redis (its prefix), then closes. */
  async clear(): Promise<void> {
    this.#check();
    if (!this.#redis) throw typeError('clear() applies to Redis storage');
    this.#disposed = true;
    await this.#redis.clear();
  }

  dispose(): void {
    void this.#redis?.close();
    this.#disposed = true;
    this.#idChunks = [];
    for (const c of this.#sigChunks) c.dispose();
    this.#sigChunks = [];
    this.#sortedIds = new Uint32Array(0);
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

const LSH_KIND = 'minhash-lsh';
const LSH_VERSION = 1;

// Sorted union of `sorted` and `ids`; throws naming the first id of `ids`
// that repeats, within the call or against earlier inserts.
function mergeUnique(sorted: Uint32Array<ArrayBufferLike>, ids: Uint32Array<ArrayBufferLike>): Uint32Array<ArrayBufferLike> {
  const add = ids.slice().sort();
  const out = new Uint32Array(sorted.length + add.length);
  let i = 0;
  let j = 0;
  let o = 0;
  while (j < add.length) {
    if (j > 0 && add[j] === add[j - 1]) {
      const first = ids.indexOf(add[j]);
      throw rangeError(`ids[${ids.indexOf(add[j], first + 1)}]=${add[j]} repeats ids[${first}]`);
    }
    while (i < sorted.length && sorted[i] < add[j]) out[o++] = sorted[i++];
    if (i < sorted.length && sorted[i] === add[j]) throw rangeError(`ids[${ids.indexOf(add[j])}]=${add[j]} is already in the index`);
    out[o++] = add[j++];
  }
  while (i < sorted.length) out[o++] = sorted[i++];
  return out;
}

/** True when every word of signature row `i` is the empty-row sentinel (0xFFFFFFFF). */
export function isEmptySignature(signatures: Uint32Array, samples: number, i: number, kind: SignatureKind = 'weighted'): boolean {
  signatures = checkTyped(signatures, Uint32Array, 'signatures');
  checkInt(samples, 'samples', 1, MAX_LSH_SAMPLES);
  const per = WIDTH[checkEnum(kind, 'kind', ['weighted', 'classic'] as const)] * samples;
  const rows = Math.floor(signatures.length / per);
  // An out-of-range row reads undefined, which is not the sentinel: a silent false.
  if (rows === 0) throw rangeError(`signatures has length ${signatures.length}, less than one row of ${per} words`);
  checkInt(i, 'i', 0, rows - 1);
  for (let s = 0; s < per; s++) if (signatures[i * per + s] !== SENTINEL) return false;
  return true;
}

/**
 * The members of each group of a groups() or dedup() result, as row
 * positions ascending, groups ordered by their first member; rows with no
 * group (0xFFFFFFFF) and groups of one are left out.
 */
export function groupMembers(group: Uint32Array): Uint32Array[] {
  group = checkTyped(group, Uint32Array, 'group');
  const NONE = 0xffffffff;
  const n = group.length;
  let max = -1;
  for (let i = 0; i < n; i++) {
    const g = group[i];
    if (g !== NONE && g > max) max = g;
  }
  // Labels as groups() numbers them (0 .. count - 1): counted in typed
  // arrays, three passes over the rows with no map (10M rows at the main job).
  if (max > 2 * n) return groupMembersSparse(group);
  const count = new Uint32Array(max + 1);
  for (let i = 0; i < n; i++) {
    const g = group[i];
    if (g !== NONE) count[g]++;
  }
  const at = new Int32Array(max + 1).fill(-1);
  const fill = new Uint32Array(max + 1);
  const out: Uint32Array[] = [];
  for (let row = 0; row < n; row++) {
    const g = group[row];
    if (g === NONE || count[g] < 2) continue;
    let k = at[g];
    // Groups in order of first member.
    if (k < 0) {
      k = at[g] = out.length;
      out.push(new Uint32Array(count[g]));
    }
    out[k][fill[g]++] = row;
  }
  return out;
}

/** groupMembers() over labels too large to index arrays by. */
function groupMembersSparse(group: Uint32Array): Uint32Array[] {
  const NONE = 0xffffffff;
  const count = new Map<number, number>();
  for (const g of group) if (g !== NONE) count.set(g, (count.get(g) ?? 0) + 1);
  const out = new Map<number, { rows: Uint32Array; n: number }>();
  for (let row = 0; row < group.length; row++) {
    const g = group[row];
    if (g === NONE || count.get(g)! < 2) continue;
    let m = out.get(g);
    if (!m) out.set(g, (m = { rows: new Uint32Array(count.get(g)!), n: 0 }));
    m.rows[m.n++] = row;
  }
  // Map order is first insertion, i.e. by first member.
  return [...out.values()].map((m) => m.rows);
}
