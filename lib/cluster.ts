// Streaming document clustering (Szasz & Samet, "Document Stream Clustering
// using GPUs", after TwitterStand): each document joins its most similar
// cluster when the cosine similarity exceeds `threshold`, else starts a new
// cluster. Exact semantics, identical on CPU and CUDA:
// - a document keeps its top-`maxTerms` entries by weight (ties to the lower
//   term id; entries with weight 0 are dropped), L2-normalized (norm in double,
//   weights stored as float);
// - a cluster keeps the double-precision sum of its members' normalized
//   vectors; its row is that sum's top-K terms, L2-normalized (a new cluster's
//   row is its first document as is);
// - similarity = sum over shared terms of trunc(a * b * 2^61), an integer sum
//   that is independent of order, scaled back and rounded to float;
// - join the active cluster with the largest similarity (ties to the lower id)
//   iff similarity > threshold, strictly;
// - an empty document (no positive weight) is skipped: cluster 0xFFFFFFFF,
//   similarity 0, created 0; it still advances the stream clock;
// - decay: cluster c is active for the document at stream position t iff
//   t - lastSeen(c) <= maxAge, lastSeen being the position of its latest member.
import { native } from './addon.js';
import { resolveBackend, resolveOneDevice, type Backend, type BackendOption } from './backend.js';
import { checkSignal, withCancel } from './cancel.js';
import { checkOnProgress, ProgressReporter, withNativeProgress, type OnProgress } from './progress.js';
import { rangeError, typeError } from './errors.js';
import { checkPath } from './persist.js';
import { NativeResource } from './resource.js';
import type { StreamClustererNative } from './native-types.js';
import {
  checkChoice,
  checkColumns,
  checkEnum,
  checkTuningKeys,
  checkInt,
  checkNumber,
  checkOptions,
  describe,
  isObject,
  toCsr,
  type CsrMatrix,
} from './validate.js';
import type { ClusterTuning } from './types.js';
export type { ClusterTuning } from './types.js';

export const NO_CLUSTER = 0xffffffff;

export interface StreamClustererOptions {
  /** Join iff similarity > threshold, in [0, 1]. */
  threshold: number;
  /** K: terms kept per document and per cluster row (1..1024, default 35). */
  maxTerms?: number;
  /** Initial cluster capacity; grows by doubling (default 1024). */
  capacity?: number;
  backend?: BackendOption;
  /** The GPU for the CUDA backend: 'all' (default: GPU 0) or one index in a list, as `devices` of the multi-GPU engines. */
  devices?: 'all' | number[];
  /** Clusters unseen for more than maxAge documents become inactive for good. */
  decay?: { maxAge: number };
  /** GPU choices that never change the clusters; see docs/engines/cluster.md. */
  tuning?: ClusterTuning;
}

function checkClusterTuning(v: unknown): ClusterTuning {
  const t = checkTuningKeys(v, 'tuning', ['batchSize']);
  return t.batchSize === undefined ? {} : { batchSize: checkChoice(t.batchSize, 'tuning.batchSize', [256, 512, 1024] as const) };
}

export interface ClusterAddResult {
  /** Cluster of each document; NO_CLUSTER for an empty document. */
  cluster: Uint32Array;
  /** Similarity to the joined cluster; 0 when a cluster was created or the document is empty. */
  similarity: Float32Array;
  /** 1 where the document started a new cluster. */
  created: Uint8Array;
  backend: Backend;
  mode: 'sequential' | 'batch';
  /** Micro-batch documents re-scored in full because their batch best changed mid-batch. */
  rescored: number;
  kernelMs: number;
  transferMs: number;
}

export interface AddOptions {
  /**
   * Both modes give identical results. 'batch' scores micro-batches of
   * documents in one pass over the clusters and resolves their order on the
   * host; 'auto' picks it on CUDA for 2+ documents, on CPU for 8+ documents
   * when more than one thread is available.
   */
  mode?: 'auto' | 'sequential' | 'batch';
  signal?: AbortSignal;
  /** Documents assigned so far: `{ stage: 'cluster', done, total }` (see ProgressEvent). */
  onProgress?: OnProgress;
}

// Unsorted rows are checked for repeated terms through an open-addressing
// table stamped with the row number (O(length), no allocation per row). The
// comparator sort it replaces cost ~0.7 s per 50,000 unsorted documents,
// more than the whole GPU add; it now runs only to name the repeated term.
function checkDocs(docs: unknown): CsrMatrix {
  const m = toCsr(docs, 'docs');
  const { indptr, indices, values } = m;
  let keys = new Uint32Array(64);
  let stamp = new Uint32Array(64);
  for (let r = 0; r < m.rows; r++) {
    const b = indptr[r];
    const e = indptr[r + 1];
    let sorted = true;
    for (let p = b + 1; p < e; p++) {
      if (indices[p] <= indices[p - 1]) {
        sorted = false;
        break;
      }
    }
    if (!sorted) {
      let size = keys.length;
      while (size < 2 * (e - b)) size *= 2;
      if (size !== keys.length) {
        keys = new Uint32Array(size);
        stamp = new Uint32Array(size);
      }
      const mask = size - 1;
      const shift = 32 - Math.log2(size);
      const gen = (r + 1) >>> 0;
      let repeated = false;
      for (let p = b; p < e && !repeated; p++) {
        const t = indices[p];
        let i = Math.imul(t, 0x9e3779b1) >>> shift;
        while (stamp[i] === gen) {
          if (keys[i] === t) {
            repeated = true;
            break;
          }
          i = (i + 1) & mask;
        }
        stamp[i] = gen;
        keys[i] = t;
      }
      if (repeated) {
        const s = Array.from(indices.subarray(b, e)).sort((x, y) => x - y);
        for (let i = 1; i < s.length; i++) {
          if (s[i] === s[i - 1]) throw rangeError(`docs row ${r} lists term ${s[i]} twice`);
        }
      }
    }
    if (values) {
      for (let p = b; p < e; p++) {
        const v = values[p];
        if (!Number.isFinite(v) || v < 0) throw rangeError(`docs.values[${p}]=${v} must be finite and >= 0`);
      }
    }
  }
  return m;
}

export class StreamClusterer extends NativeResource<StreamClustererNative> {
  readonly backend: Backend;
  #queue: Promise<unknown> = Promise.resolve();

  constructor(options: StreamClustererOptions) {
    if (!isObject(options)) throw typeError(`options must be an object, got ${describe(options)}`);
    const threshold = checkNumber(options.threshold, 'threshold', { min: 0, max: 1 });
    const maxTerms = checkInt(options.maxTerms ?? 35, 'maxTerms', 1, 1024);
    const capacity = checkInt(options.capacity ?? 1024, 'capacity', 1, 0xfffffffe);
    let maxAge = -1;
    if (options.decay !== undefined) {
      if (!isObject(options.decay)) throw typeError(`decay must be { maxAge }, got ${describe(options.decay)}`);
      maxAge = checkInt(options.decay.maxAge, 'decay.maxAge', 0);
    }
    const devices = resolveOneDevice(options, 'StreamClusterer');
    const backend = resolveBackend(options.backend);
    const tuning = checkClusterTuning(options.tuning);
    const handle = new (native().StreamClusterer)({
      threshold,
      maxTerms,
      capacity,
      maxAge,
      backend,
      tuning,
      devices,
    });
    super(handle, 'StreamClusterer');
    this.backend = backend;
  }

  // Calls run one at a time: a stream is ordered by definition.
  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.#queue.then(fn, fn);
    this.#queue = p.catch(() => undefined);
    return p;
  }

  /** Clusters the documents in order (CSR rows = documents, values = term weights). */
  async add(docs: CsrMatrix, options: AddOptions = {}): Promise<ClusterAddResult> {
    const handle = this.handle;
    const m = checkDocs(docs);
    checkOptions(options);
    const mode = checkEnum(options.mode ?? 'auto', 'mode', ['auto', 'sequential', 'batch'] as const);
    checkSignal(options.signal);
    const reporter = new ProgressReporter(checkOnProgress(options.onProgress));
    // Copied now: the add may wait behind earlier ones, and the caller may
    // reuse or transfer its arrays as soon as this returns.
    const staged = native().stageCsr(m);
    return this.#serial(() =>
      withCancel(options.signal, async (cancel) => {
        const r = await withNativeProgress(reporter, ['cluster'], (progress) => handle.add(staged, { mode, cancel, progress }), m.rows);
        return {
          cluster: r.cluster,
          similarity: r.similarity,
          created: r.created,
          backend: this.backend,
          mode: r.batched ? 'batch' : 'sequential',
          rescored: r.rescored,
          kernelMs: r.kernelMs,
          transferMs: r.transferMs,
        };
      }),
    );
  }

  /** Number of clusters ever created (ids 0..size-1; inactive ones included). */
  get size(): number {
    return this.handle.size();
  }

  get threshold(): number {
    return this.handle.info().threshold;
  }

  get maxTerms(): number {
    return this.handle.info().maxTerms;
  }

  /** Documents seen so far, empty ones included (the decay clock). */
  get documents(): number {
    return this.handle.info().time;
  }

  #id(id: unknown): number {
    return checkInt(id, 'id', 0, Math.max(0, this.size - 1));
  }

  /** The cluster's matrix row: its top-K terms (ascending) and unit-norm weights. */
  centroid(id: number): { terms: Uint32Array; weights: Float32Array } {
    if (this.size === 0) throw rangeError(`id=${id} is out of range: there are no clusters`);
    return this.handle.centroid(this.#id(id));
  }

  /** Number of documents in the cluster. */
  members(id: number): number {
    if (this.size === 0) throw rangeError(`id=${id} is out of range: there are no clusters`);
    return this.handle.members(this.#id(id));
  }

  /** Whether the next document can still join the cluster (decay). */
  active(id: number): boolean {
    if (this.size === 0) throw rangeError(`id=${id} is out of range: there are no clusters`);
    return this.handle.active(this.#id(id));
  }

  /**
   * Writes the whole state (docs/persistence.md: checksummed, written to a
   * temporary file and renamed over `path`); load() continues the stream identically.
   */
  async save(path: string): Promise<void> {
    checkPath(path);
    const handle = this.handle;
    await this.#serial(() => handle.save(path));
  }

  static async load(
    path: string,
    options: { backend?: BackendOption; devices?: 'all' | number[]; tuning?: ClusterTuning } = {},
  ): Promise<StreamClusterer> {
    checkPath(path);
    const c = new StreamClusterer({
      threshold: 0,
      maxTerms: 1,
      capacity: 1,
      backend: options.backend,
      devices: options.devices,
      tuning: options.tuning,
    });
    try {
      await c.handle.load(path);
    } catch (e) {
      c.dispose();
      throw e;
    }
    return c;
  }
}

const DENSE_TERMS = 1 << 24;

/**
 * Streaming document frequencies for TF-IDF. update() counts each document's
 * distinct terms; transform() maps term counts to tf * idf with the smoothed
 * idf = ln((1 + N) / (1 + df)) + 1 (N documents seen so far).
 */
export class TfidfTable {
  // Counts of term ids below DENSE_TERMS in an array, of larger ids (term ids
  // reach 2^32 - 1) in a map, so memory follows the terms seen, not their ids.
  #df: Uint32Array = new Uint32Array(0);
  #sparse = new Map<number, number>();
  #docs = 0;

  get documents(): number {
    return this.#docs;
  }

  df(term: number): number {
    checkInt(term, 'term', 0, 0xffffffff);
    return term < this.#df.length ? this.#df[term] : (this.#sparse.get(term) ?? 0);
  }

  idf(term: number): number {
    return Math.log((1 + this.#docs) / (1 + this.df(term))) + 1;
  }

  update(counts: CsrMatrix): void {
    const m = toCsr(counts, 'counts');
    checkColumns(m, 'counts');
    let max = -1;
    for (let p = 0; p < m.indptr[m.rows]; p++) if (m.indices[p] > max && m.indices[p] < DENSE_TERMS) max = m.indices[p];
    if (max >= this.#df.length) {
      const grown = new Uint32Array(Math.min(DENSE_TERMS, Math.max(max + 1, this.#df.length * 2)));
      grown.set(this.#df);
      this.#df = grown;
    }
    for (let r = 0; r < m.rows; r++) {
      const seen = new Set<number>();
      for (let p = m.indptr[r]; p < m.indptr[r + 1]; p++) {
        const t = m.indices[p];
        if ((m.values ? m.values[p] : 1) > 0 && !seen.has(t)) {
          seen.add(t);
          if (t < DENSE_TERMS) this.#df[t]++;
          else this.#sparse.set(t, (this.#sparse.get(t) ?? 0) + 1);
        }
      }
    }
    this.#docs += m.rows;
  }

  transform(counts: CsrMatrix): CsrMatrix {
    const m = toCsr(counts, 'counts');
    checkColumns(m, 'counts');
    const values = new Float32Array(m.indices.length);
    for (let p = m.indptr[0]; p < m.indptr[m.rows]; p++) {
      const c = m.values ? m.values[p] : 1;
      if (!Number.isFinite(c) || c < 0) throw rangeError(`counts.values[${p}]=${c} must be finite and >= 0`);
      values[p] = c * this.idf(m.indices[p]);
    }
    return { rows: m.rows, cols: m.cols, indptr: m.indptr, indices: m.indices, values };
  }
}

/** Updates `table` with the documents, then returns their TF-IDF weights. */
export function tfidf(counts: CsrMatrix, table: TfidfTable = new TfidfTable()): CsrMatrix {
  table.update(counts);
  return table.transform(counts);
}
