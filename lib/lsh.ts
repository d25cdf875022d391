// MinHash LSH over weighted-MinHash signatures: banding, candidate pairs,
// verified duplicate groups, and the one-call dedup pipeline.
import { native } from './addon.js';
import { resolveBackend, resolveDevices, type Backend, type BackendOption } from './backend.js';
import { withCancel } from './cancel.js';
import { disposedError, rangeError, typeError } from './errors.js';
import { WeightedMinHash } from './minhash.js';
import { checkRedisOptions, RedisLsh, type RedisStorageOptions } from './lsh-redis.js';
import { badFile, checkPath, openSections, saveSections, u32View } from './persist.js';
import { checkEnum, checkInt, checkNumber, describe, isObject, toCsr, toU32, type CsrMatrix } from './validate.js';

export interface LshParams {
  bands: number;
  rows: number;
}

// Composite Simpson's rule; 256 panels put the error far below the gaps
// between neighbouring (bands, rows) choices.
function simpson(f: (x: number) => number, a: number, b: number, panels = 256): number {
  if (b <= a) return 0;
  const h = (b - a) / panels;
  let s = f(a) + f(b);
  for (let i = 1; i < panels; i++) s += f(a + i * h) * (i % 2 === 1 ? 4 : 2);
  return (s * h) / 3;
}

/**
 * (bands, rows) minimizing fpWeight * P(false positive) + fnWeight *
 * P(false negative) for a Jaccard threshold, with bands * rows <= samples,
 * as datasketch's MinHashLSH chooses them: the probabilities are the
 * integrals of the S-curve 1 - (1 - s^r)^b below and above the threshold.
 */
export function optimalParams(threshold: number, samples: number, weights: readonly [number, number] = [0.5, 0.5]): LshParams {
  checkNumber(threshold, 'threshold', { min: 0, max: 1, minExclusive: true });
  if (threshold >= 1) throw rangeError(`threshold must be in (0, 1), got ${threshold}`);
  checkInt(samples, 'samples', 1, 1 << 20);
  const [fpW, fnW] = checkWeights(weights);
  // The search costs O(samples log samples) integrals; answers are memoized.
  const key = `${threshold},${samples},${fpW},${fnW}`;
  const hit = paramCache.get(key);
  if (hit) return { ...hit };
  let best = Infinity;
  let opt: LshParams = { bands: 1, rows: 1 };
  for (let b = 1; b <= samples; b++) {
    for (let r = 1; r <= Math.floor(samples / b); r++) {
      const fp = simpson((s) => 1 - Math.pow(1 - Math.pow(s, r), b), 0, threshold);
      const fn = simpson((s) => Math.pow(1 - Math.pow(s, r), b), threshold, 1);
      const err = fp * fpW + fn * fnW;
      if (err < best) {
        best = err;
        opt = { bands: b, rows: r };
      }
    }
  }
  if (paramCache.size > 256) paramCache.clear();
  paramCache.set(key, opt);
  return { ...opt };
}

const paramCache = new Map<string, LshParams>();

function checkWeights(w: unknown): [number, number] {
  if (!Array.isArray(w) || w.length !== 2) throw typeError(`weights must be an array [fpWeight, fnWeight], got ${describe(w)}`);
  const fp = checkNumber(w[0], 'weights[0]', { min: 0, max: 1 });
  const fn = checkNumber(w[1], 'weights[1]', { min: 0, max: 1 });
  if (Math.abs(fp + fn - 1) > 1e-9) throw rangeError(`weights must sum to 1, got ${fp} + ${fn}`);
  return [fp, fn];
}

export type { RedisStorageOptions } from './lsh-redis.js';

export type MinHashLSHOptions = (
  | { threshold: number; samples?: number; weights?: readonly [number, number]; bands?: undefined; rows?: undefined }
  | { bands: number; rows: number; samples?: number; threshold?: number; weights?: undefined }
) & {
  backend?: BackendOption;
  devices?: 'all' | number[];
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
  /** Rows indexed by id; required for 'exact'. */
  matrix?: CsrMatrix;
  /** Defaults to the LSH's threshold, or (1/bands)^(1/rows) when built from bands and rows. */
  threshold?: number;
  signal?: AbortSignal;
}

const SENTINEL = 0xffffffff;

/**
 * Banded LSH index over weighted-MinHash signatures (samples (k, t) pairs per
 * row). Band keys are 64-bit hashes of each band's r pairs, one table per
 * band. Rows whose samples are all the empty-row sentinel never match.
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
  readonly #redis: RedisLsh | undefined;
  #idChunks: Uint32Array<ArrayBufferLike>[] = [];
  #sigChunks: Uint32Array<ArrayBufferLike>[] = [];
  #sortedIds: Uint32Array<ArrayBufferLike> = new Uint32Array(0);
  #size = 0;
  #disposed = false;

  constructor(options: MinHashLSHOptions) {
    if (!isObject(options as unknown)) throw typeError(`options must be an object, got ${describe(options)}`);
    const o = options as Record<string, unknown>;
    if (o.bands !== undefined || o.rows !== undefined) {
      const bands = checkInt(o.bands, 'bands', 1, 1 << 20);
      const rows = checkInt(o.rows, 'rows', 1, 1 << 20);
      const samples = o.samples === undefined ? bands * rows : checkInt(o.samples, 'samples', 1, 1 << 20);
      if (bands * rows > samples) throw rangeError(`bands * rows = ${bands * rows} exceeds samples = ${samples}`);
      if (o.weights !== undefined) throw typeError('weights apply only with threshold, not with explicit bands and rows');
      this.bands = bands;
      this.rows = rows;
      this.samples = samples;
      this.threshold =
        o.threshold === undefined ? Math.pow(1 / bands, 1 / rows) : checkNumber(o.threshold, 'threshold', { min: 0, max: 1, minExclusive: true });
    } else {
      const threshold = checkNumber(o.threshold, 'threshold', { min: 0, max: 1, minExclusive: true });
      if (threshold >= 1) throw rangeError(`threshold must be in (0, 1), got ${threshold}`);
      const samples = o.samples === undefined ? 128 : checkInt(o.samples, 'samples', 1, 1 << 20);
      const p = optimalParams(threshold, samples, (o.weights as [number, number] | undefined) ?? [0.5, 0.5]);
      this.bands = p.bands;
      this.rows = p.rows;
      this.samples = samples;
      this.threshold = threshold;
    }
    this.backend = resolveBackend(o.backend);
    this.#devices = resolveDevices(o.devices);
    if (o.storage !== undefined && !(isObject(o.storage) && o.storage.type === 'memory' && Object.keys(o.storage).length === 1)) {
      this.#redis = new RedisLsh({ samples: this.samples, bands: this.bands, rows: this.rows }, checkRedisOptions(o.storage));
    }
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

  #sigs(signatures: unknown, rows: number | undefined, name: string): Uint32Array {
    if (!(signatures instanceof Uint32Array)) throw typeError(`${name} must be a Uint32Array, got ${describe(signatures)}`);
    const per = this.samples * 2;
    if (rows === undefined ? signatures.length % per !== 0 : signatures.length !== rows * per) {
      throw rangeError(
        `${name} has length ${signatures.length} but ${rows === undefined ? 'a multiple of' : `${rows} rows ×`} samples * 2 = ${per} was expected`,
      );
    }
    return signatures;
  }

  /**
   * Adds rows: ids (unique uint32; also each row's index into groups'
   * `matrix`) and their signatures. In memory the index keeps a reference to
   * `signatures` without copying: do not modify it afterwards. With Redis
   * storage it returns a Promise, resolved once every row is stored (visible
   * to every process); `options.vectors` (row i is ids[i]'s weighted vector)
   * stores the rows for groups({ verify: 'exact' }) without a matrix.
   */
  insert(ids: Uint32Array | readonly number[], signatures: Uint32Array, options?: { vectors?: CsrMatrix }): void | Promise<void> {
    this.#check();
    if (!(ids instanceof Uint32Array) && !Array.isArray(ids)) throw typeError(`ids must be a Uint32Array or an array of integers, got ${describe(ids)}`);
    const n = ids.length;
    const sig = this.#sigs(signatures, n, 'signatures');
    if (options !== undefined && !isObject(options as unknown)) throw typeError(`options must be an object, got ${describe(options)}`);
    if (this.#redis) {
      const idArr = toU32(ids, 'ids');
      const sorted = idArr.slice().sort();
      for (let i = 1; i < sorted.length; i++) if (sorted[i] === sorted[i - 1]) throw rangeError(`ids repeat ${sorted[i]}`);
      return this.#redis.insert(idArr, sig, options?.vectors);
    }
    if (options?.vectors !== undefined) throw typeError('vectors are stored only with Redis storage; in memory pass groups({ matrix })');
    const idCopy = ids instanceof Uint32Array ? ids.slice() : toU32(ids, 'ids');
    if (n === 0) return;
    this.#sortedIds = mergeUnique(this.#sortedIds, idCopy);
    this.#idChunks.push(idCopy);
    this.#sigChunks.push(sig);
    this.#size += n;
  }

  // Chunks are joined once, at the first batch call after inserts.
  #state(): { ids: Uint32Array; sigs: Uint32Array } {
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
    return { ids: join(this.#idChunks), sigs: join(this.#sigChunks) };
  }

  #nativeOptions(extra: Record<string, unknown> = {}): Record<string, unknown> {
    return { samples: this.samples, bands: this.bands, rows: this.rows, backend: this.backend, devices: this.#devices, ...extra };
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
  async candidatePairs(options: { signal?: AbortSignal } = {}): Promise<PairSet & { kernelMs: number; transferMs: number }> {
    this.#check();
    if (this.#redis) return { ...(await this.#redis.candidatePairs()), kernelMs: 0, transferMs: 0 };
    const { ids, sigs } = this.#state();
    return withCancel(options.signal, async (cancel) => {
      const r = await native().lshCandidatePairs(sigs, ids, this.#nativeOptions({ cancel }));
      return { left: r.left, right: r.right, kernelMs: r.kernelMs, transferMs: r.transferMs };
    });
  }

  /** Connected components of verified candidate pairs. */
  async groups(options: GroupsOptions = {}): Promise<GroupsResult> {
    this.#check();
    if (!isObject(options as unknown)) throw typeError(`options must be an object, got ${describe(options)}`);
    const verify = checkEnum(options.verify ?? 'estimate', 'verify', ['none', 'estimate', 'exact'] as const);
    const threshold =
      options.threshold === undefined ? this.threshold : checkNumber(options.threshold, 'threshold', { min: 0, max: 1, minExclusive: true });
    let matrix: CsrMatrix | undefined;
    if (options.matrix !== undefined) matrix = toCsr(options.matrix, 'matrix');
    if (this.#redis) {
      const r = await this.#redis.groups(verify, threshold, matrix);
      return { ...r, kernelMs: 0, transferMs: 0 };
    }
    if (verify === 'exact') {
      if (matrix === undefined) throw typeError("matrix is required for verify 'exact'");
      const { ids } = this.#state();
      for (let i = 0; i < ids.length; i++) {
        if (ids[i] >= matrix.rows) throw rangeError(`id ${ids[i]} (row ${i}) has no row in matrix (matrix.rows = ${matrix.rows})`);
      }
    }
    const { ids, sigs } = this.#state();
    return withCancel(options.signal, async (cancel) => {
      const r = await native().lshGroups(sigs, ids, this.#nativeOptions({ verify, threshold, matrix, cancel }));
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
    const per = this.samples * 2;
    const keep = new Uint8Array(have.length);
    let kept = 0;
    for (let i = 0; i < have.length; i++) {
      // binary search in the sorted removal list
      let lo = 0;
      let hi = drop.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (drop[mid] < have[i]) lo = mid + 1;
        else hi = mid;
      }
      keep[i] = lo < drop.length && drop[lo] === have[i] ? 0 : 1;
      kept += keep[i];
    }
    const removed = have.length - kept;
    if (removed === 0) return 0;
    const nextIds = new Uint32Array(kept);
    const nextSigs = new Uint32Array(kept * per);
    for (let i = 0, o = 0; i < have.length; i++) {
      if (!keep[i]) continue;
      nextIds[o] = have[i];
      nextSigs.set(sigs.subarray(i * per, (i + 1) * per), o * per);
      o++;
    }
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
    parm.setUint32(12, 0, true);
    parm.setFloat64(16, this.threshold, true);
    parm.setBigUint64(24, BigInt(ids.length), true);
    await saveSections(path, LSH_KIND, LSH_VERSION, [
      ['PARM', new Uint8Array(parm.buffer)],
      ['IDS_', ids],
      ['SIGS', sigs],
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
      if (samples < 1 || samples > 1 << 20 || bands < 1 || rows < 1 || bands * rows > samples || p.getUint32(12, true) !== 0) {
        throw bad(`bad parameters (samples ${samples}, bands ${bands}, rows ${rows})`);
      }
      if (!(threshold > 0 && threshold <= 1)) throw bad(`threshold ${threshold} is not in (0, 1]`);
      if (count > 0xffffffff || count * samples * 8 > Number.MAX_SAFE_INTEGER) throw bad(`row count ${count} is out of range`);
      if (f.sections.IDS_ !== count * 4 || f.sections.SIGS !== count * samples * 8) {
        throw bad(`sections do not hold ${count} rows of ${samples} samples`);
      }
      const ids = u32View(await f.read('IDS_', count * 4));
      const sigs = u32View(await f.read('SIGS', count * samples * 8));
      const lsh = new MinHashLSH({ bands, rows, samples, threshold, backend: options.backend, devices: options.devices });
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

/** True when every sample of signature row `i` is the empty-row sentinel. */
export function isEmptySignature(signatures: Uint32Array, samples: number, i: number): boolean {
  if (!(signatures instanceof Uint32Array)) throw typeError(`signatures must be a Uint32Array, got ${describe(signatures)}`);
  checkInt(samples, 'samples', 1, 1 << 20);
  const rows = Math.floor(signatures.length / (2 * samples));
  // An out-of-range row reads undefined, which is not the sentinel: a silent false.
  if (rows === 0) throw rangeError(`signatures has length ${signatures.length}, less than one row of samples * 2 = ${2 * samples}`);
  checkInt(i, 'i', 0, rows - 1);
  for (let s = 0; s < 2 * samples; s++) if (signatures[i * 2 * samples + s] !== SENTINEL) return false;
  return true;
}

export interface DedupOptions {
  threshold?: number;
  /** LSH [fpWeight, fnWeight]; weigh false negatives more for recall near the threshold. */
  weights?: readonly [number, number];
  samples?: number;
  seed?: number;
  verify?: Verify;
  backend?: BackendOption;
  devices?: 'all' | number[];
  signal?: AbortSignal;
  /** Return the signatures too (rows × samples × 2). */
  returnSignatures?: boolean;
}

export interface DedupResult {
  group: Uint32Array;
  count: number;
  pairs: PairSet & { similarity: Float32Array };
  signatures?: Uint32Array;
}

/**
 * Near-duplicate groups of a weighted sparse matrix in one call: weighted
 * MinHash, LSH tuned to `threshold`, and verification at that threshold.
 * Row i has id i. Empty rows (no positive weight) are never grouped.
 */
export async function dedup(matrix: CsrMatrix, options: DedupOptions = {}): Promise<DedupResult> {
  if (!isObject(options as unknown)) throw typeError(`options must be an object, got ${describe(options)}`);
  const m = toCsr(matrix, 'matrix');
  const threshold = checkNumber(options.threshold ?? 0.9, 'threshold', { min: 0, max: 1, minExclusive: true });
  if (threshold >= 1) throw rangeError(`threshold must be in (0, 1), got ${threshold}`);
  const samples = checkInt(options.samples ?? 128, 'samples', 1, 1 << 20);
  const verify = checkEnum(options.verify ?? 'exact', 'verify', ['none', 'estimate', 'exact'] as const);
  const wmh = new WeightedMinHash({ dim: m.cols, samples, seed: options.seed ?? 1, backend: options.backend, devices: options.devices });
  let lsh: MinHashLSH | undefined;
  try {
    const signatures = await wmh.hash(m, { signal: options.signal });
    lsh = new MinHashLSH({ threshold, samples, weights: options.weights, backend: options.backend, devices: options.devices });
    const ids = new Uint32Array(m.rows);
    for (let i = 0; i < ids.length; i++) ids[i] = i;
    lsh.insert(ids, signatures);
    const g = await lsh.groups({ verify, threshold, matrix: m, signal: options.signal });
    const out: DedupResult = { group: g.group, count: g.count, pairs: g.pairs };
    if (options.returnSignatures) out.signatures = signatures;
    return out;
  } finally {
    lsh?.dispose();
    wmh.dispose();
  }
}
