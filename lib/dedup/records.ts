// The dedup pipeline, owned by the library: blocks of featurized rows in
// (from any reader: an array, a generator, a queue the CLI's readers fill),
// each block hashed as it arrives by its method's signer, groups out. With
// exact verification (the default) only what grouping reads is kept: band
// keys and the rows' vectors (band-index.ts), never the signature matrix;
// signatures are made 64K rows at a time into two buffers used in turn. dedup(),
// `cusim dedup` and its --shard workers (indexRecords) all run through here.
import { tmpdir } from 'node:os';
import { abortError, rangeError, typeError } from '../errors.js';
import { MinHashLSH } from '../lsh.js';
import { ProgressReporter } from '../progress.js';
import { resolveDevices } from '../backend.js';
import { checkInt, describe, isObject, toCsr, type CsrMatrix } from '../validate.js';
import { BandIndex } from './band-index.js';
import type { Staged } from '../native-types.js';
import { IdListChain, toIdList, type IdList } from './ids.js';
import {
  checkDedupOptions,
  type BlockBandKeys,
  type CheckedDedupOptions,
  type DedupBlock,
  type DedupOptions,
  type DedupResult,
} from './options.js';
import { makeSigner, type Signer } from './signer.js';
import { pinnedArray } from '../pinned.js';

// Rows per hash call: the one signature buffer holds this many rows
// (64K × 108 samples × 8 bytes = 57 MB weighted, half that classic).
const HASH_ROWS = 1 << 16;

export interface DedupRecordsOptions extends DedupOptions {
  /** Rows the source will yield, when known: the total of the 'hash' progress events. */
  totalRows?: number;
  /**
   * Exact verification keeps each row's vector (its token set) until the
   * groups are made. Past `afterBytes` of them in memory (default 2 GiB),
   * the rest go to an unlinked temporary file in `dir` (default the OS's
   * temporary directory) as soon as they are hashed, and verification
   * reads back only the rows of candidate pairs: what bounds memory at
   * 100M documents. The groups are the same either way.
   */
  spill?: { afterBytes?: number; dir?: string };
}

/** Default DedupRecordsOptions.spill.afterBytes: 2 GiB of vectors in memory. */
export const SPILL_AFTER_BYTES = 2 ** 31;

function checkSpill(spill: DedupRecordsOptions['spill']): { afterBytes: number; dir: string } {
  if (spill !== undefined && !isObject(spill)) throw typeError(`spill must be an object { afterBytes?, dir? }, got ${describe(spill)}`);
  const afterBytes = checkInt(spill?.afterBytes ?? SPILL_AFTER_BYTES, 'spill.afterBytes', 0, Number.MAX_SAFE_INTEGER);
  const dir = spill?.dir ?? tmpdir();
  if (typeof dir !== 'string' || dir === '') throw typeError(`spill.dir must be a directory path, got ${describe(dir)}`);
  return { afterBytes, dir };
}

export interface DedupRecordsResult extends DedupResult {
  /** Row i's name: the blocks' ids end to end (rows of a block without ids are named by their row number). */
  ids: IdList;
  /** Wall time (ms) from the call to the last signature, and of banding plus verification. */
  ms: { hash: number; groups: number };
  /** Bytes of vectors written to the spill file (0: all kept in memory; see options.spill). */
  spilledBytes: number;
}

type Source<T> = AsyncIterable<T> | Iterable<T>;

function iterate<T>(source: Source<T>, name: string): AsyncIterator<T> | Iterator<T> {
  if (isObject(source) && Symbol.asyncIterator in source) return (source as AsyncIterable<T>)[Symbol.asyncIterator]();
  if (isObject(source) && Symbol.iterator in source) return (source as Iterable<T>)[Symbol.iterator]();
  throw typeError(`${name} must be an iterable or async iterable of blocks, got ${describe(source)}`);
}

// The source's next block, or an AbortError as soon as the signal fires (a
// reader waiting on a pipe must not hold up cancellation).
async function next<T>(it: AsyncIterator<T> | Iterator<T>, signal: AbortSignal | undefined): Promise<IteratorResult<T>> {
  if (!signal) return it.next();
  if (signal.aborted) throw abortError(signal.reason);
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(abortError(signal.reason));
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([it.next(), aborted]);
  } finally {
    signal.removeEventListener('abort', onAbort!);
  }
}

function checkRows(rows: unknown, k: number, method: CheckedDedupOptions['method']): CsrMatrix {
  return toCsr(rows, `blocks[${k}].rows`, { maxCols: method === 'classic' ? 2 ** 32 : 0xffffffff });
}

interface SliceSink<B> {
  /** Told each block first; a staged copy of `input` it returns is what the block's rows are hashed from. */
  block?: (b: B, k: number, input: CsrMatrix, raw: CsrMatrix) => void | Promise<Staged | undefined>;
  slice: (signatures: Uint32Array, raw: CsrMatrix, start: number, end: number, b: B) => Promise<void> | void;
  /** Told once every row of a block `block` staged has been hashed from its staged copy. */
  hashed?: (staged: Staged) => void;
  /** Takes a block's band keys in place of its signatures (see BlockSigner's #keysOf); absent: every block is hashed. */
  keyed?: (keys: BlockBandKeys) => Promise<void> | void;
}

/**
 * Hashes blocks in order: the method's signer is made at the first block
 * (weighted: dim = its columns), each block's rows are hashed in slices into
 * a reused buffer and handed to `each.slice` (copy what is kept), slices
 * strictly in order. A block whose rows `each.block` staged (copied) is
 * released as soon as the copy is made, and then overlaps the blocks around
 * it: its copy runs while the block before it is hashed, and its hashing
 * (into the other of two buffers) while the slices before it are handed on.
 * Each of those steps is a native call whose latency, not its work, bounded
 * a large dedup with the three run one after another per block.
 */
class BlockSigner<B extends { rows: unknown }> {
  #signer: Signer | undefined;
  #cols = -1;
  // Two buffers, block by block in turn: a block's slices are hashed into
  // one while the other's are still being handed on.
  #bufs: { array?: Uint32Array; free: Promise<void> }[] = [{ free: Promise.resolve() }, { free: Promise.resolve() }];
  #blocks = 0;
  // The hash calls of every block started so far have returned.
  #hashed: Promise<void> = Promise.resolve();
  // The slices of every block started so far have been handed on.
  #handed: Promise<void> = Promise.resolve();
  // Rows whose hash calls returned (hash calls run one after another, so
  // progress counted from this only grows).
  #hashedRows = 0;
  /** Rows hashed and handed on so far. */
  rows = 0;

  constructor(
    private readonly o: CheckedDedupOptions,
    private readonly reporter: ProgressReporter,
    private readonly total: number | undefined,
    private readonly each: SliceSink<B>,
  ) {}

  /** Hashes the block and hands its slices on; resolves once that is done. */
  add(b: B): Promise<void> {
    return this.start(b).done;
  }

  /**
   * Starts the block: `released` resolves once the block's arrays may change
   * (copied by `each.block`, or else hashed), `done` once its slices are
   * handed on. Blocks are hashed and handed on in the order they start.
   */
  start(b: B): { released: Promise<void>; done: Promise<void> } {
    let first: { raw: CsrMatrix; input: CsrMatrix; k: number };
    let keys: BlockBandKeys | undefined;
    try {
      first = this.#check(b);
      keys = this.#keysOf(b, first.input, first.k);
    } catch (e) {
      const failed = Promise.reject(e);
      failed.catch(() => {});
      return { released: failed, done: failed };
    }
    const { raw, input, k } = first;
    if (keys) return this.#startKeyed(b, k, input, raw, keys);
    // What hashing the staged copy needs of the input (its arrays are not read once it is copied).
    const shape = { rows: input.rows, cols: input.cols };
    const { o, reporter, total } = this;
    const signer = this.#signer!;
    const buf = this.#bufs[k & 1];
    // Called now, in block order (its synchronous part: a throw rejects).
    const stagedCall = (async (): Promise<Staged | undefined> => (await this.each.block?.(b, k, input, raw)) ?? undefined)();
    const before = { hashed: this.#hashed, handed: this.#handed, free: buf.free };
    let hashedAll!: () => void;
    let hashFailed!: (e: unknown) => void;
    const hashed = new Promise<void>((resolve, reject) => {
      hashedAll = resolve;
      hashFailed = reject;
    });
    hashed.catch(() => {});
    const done = (async () => {
      try {
        const staged = await stagedCall;
        await before.hashed;
        await before.free;
        // The buffer, as large as a slice of this block needs (a small job
        // does not pin 57 MB): page-locked for the CUDA backend once it is
        // 1 MB or more, so the kernels' results land in it directly; else an
        // ordinary array (written in place: outHanded).
        const need = Math.min(HASH_ROWS, input.rows) * o.params.samples * signer.width;
        if (!buf.array || buf.array.length < need)
          buf.array = o.backend === 'cuda' && need >= 1 << 18 ? pinnedArray(Uint32Array, need) : new Uint32Array(need);
        if (input.rows === 0) hashedAll();
        for (let s = 0; s < input.rows; s += HASH_ROWS) {
          const e = Math.min(input.rows, s + HASH_ROWS);
          const options = {
            rowStart: s,
            rowEnd: e,
            // The buffer is this signer's own, read by `each.slice` only after the call settles.
            out: buf.array,
            outHanded: true,
            signal: o.signal,
            onProgress: reporter.enabled ? (p: { done: number }) => reporter.update('hash', this.#hashedRows + p.done, total) : undefined,
          };
          // The band index's copy of the rows, when it made one, is hashed in
          // place: the block is copied once, on a worker, not on this thread.
          const sigs = staged ? await signer.hashStaged(staged, shape, options) : await signer.hash(input, options);
          this.#hashedRows += e - s;
          reporter.update('hash', this.#hashedRows, total);
          if (e === input.rows) hashedAll();
          await before.handed;
          await this.each.slice(sigs, raw, s, e, b);
          this.rows += e - s;
        }
        // Done after the blocks before it, rows or not.
        await before.handed;
        if (staged) this.each.hashed?.(staged);
      } catch (e) {
        hashFailed(e);
        throw e;
      }
    })();
    this.#hashed = hashed;
    this.#handed = done;
    buf.free = done.then(
      () => {},
      () => {},
    );
    // Copied: the source may reuse the arrays. Not staged: they are read until hashed.
    const released = stagedCall.then(async (staged) => (staged ? undefined : done));
    released.catch(() => {});
    return { released, done };
  }

  /**
   * The block's band keys, where they can stand for its signatures: made for
   * a classic dedup of 32-bit token hashes (classicTokens reads those as they
   * are) with this dedup's samples, seed and banding, one set per row, and a
   * sink that takes them. Keys that cannot are disposed (the block owned
   * them), and the rows are hashed as any others.
   */
  #keysOf(b: B, input: CsrMatrix, k: number): BlockBandKeys | undefined {
    const keys = (b as { bandKeys?: BlockBandKeys }).bandKeys;
    if (keys === undefined) return undefined;
    // Only the library's readers make them (staged in native memory); anything else is an error, not ignored.
    if (!isObject(keys) || !isStaged(keys.keys) || !isStaged(keys.empty))
      throw typeError(`blocks[${k}].bandKeys must be band keys a reader made ({ keys, empty } staged arrays), got ${describe(keys)}`);
    const { o } = this;
    const p = o.params;
    const fits =
      this.each.keyed !== undefined &&
      o.method === 'classic' &&
      input.cols === 2 ** 32 &&
      keys.samples === p.samples &&
      keys.seed === o.seed &&
      keys.bands === p.bands &&
      keys.rows === p.rows &&
      keys.keys.length === input.rows * p.bands &&
      keys.empty.length === input.rows;
    if (fits) return keys;
    keys.keys.dispose();
    keys.empty.dispose();
    return undefined;
  }

  /** start() for a block whose band keys came with it: its rows copied (each.block), its keys handed on in order. */
  #startKeyed(b: B, k: number, input: CsrMatrix, raw: CsrMatrix, keys: BlockBandKeys): { released: Promise<void>; done: Promise<void> } {
    const { reporter, total } = this;
    const stagedCall = (async (): Promise<Staged | undefined> => (await this.each.block?.(b, k, input, raw)) ?? undefined)();
    const before = { hashed: this.#hashed, handed: this.#handed };
    const done = (async () => {
      let owned = true;
      try {
        const staged = await stagedCall;
        await before.hashed;
        this.#hashedRows += input.rows;
        reporter.update('hash', this.#hashedRows, total);
        await before.handed;
        owned = false;
        await this.each.keyed!(keys);
        this.rows += input.rows;
        if (staged) this.each.hashed?.(staged);
      } finally {
        if (owned) for (const s of [keys.keys, keys.empty]) s.dispose();
      }
    })();
    const hashed = done.then(
      () => {},
      () => {},
    );
    this.#hashed = hashed;
    this.#handed = done;
    const released = stagedCall.then(async (staged) => (staged ? undefined : done));
    released.catch(() => {});
    done.catch(() => {});
    return { released, done };
  }

  /** The block checked, the signer made at the first one, and its rows as the signer reads them. */
  #check(b: B): { raw: CsrMatrix; input: CsrMatrix; k: number } {
    const { o } = this;
    const k = this.#blocks++;
    if (!isObject(b)) throw typeError(`blocks[${k}] must be an object { rows, ids? }, got ${describe(b)}`);
    const raw = checkRows(b.rows, k, o.method);
    if (this.#cols < 0) {
      this.#cols = raw.cols;
      this.#signer = makeSigner(o.method, {
        samples: o.params.samples,
        seed: o.seed,
        backend: o.backend,
        devices: o.devices,
        dim: raw.cols,
      });
    } else if (raw.cols !== this.#cols) {
      throw rangeError(`blocks[${k}].rows.cols is ${raw.cols} but blocks[0].rows.cols is ${this.#cols}: every block has the same columns`);
    }
    return { raw, input: this.#signer!.input(raw), k };
  }

  dispose(): void {
    this.#signer?.dispose();
    this.#signer = undefined;
  }
}

/**
 * Feeds `source` to `signer` in order (abortable while the source waits),
 * with up to `window` blocks started and not yet done: the next block is
 * asked for once the one before it is released (see BlockSigner.start). The
 * signer is disposed on return, once no block is running.
 */
async function signAll<B>(
  source: Source<B>,
  signer: { start(b: B): { released: Promise<void>; done: Promise<void> }; dispose(): void },
  signal: AbortSignal | undefined,
  window = 1,
): Promise<void> {
  const it = iterate(source, 'source');
  let finished = false;
  const running: Promise<void>[] = [];
  try {
    for (;;) {
      const r = await next(it, signal);
      if (r.done) break;
      const { released, done } = signer.start(r.value);
      running.push(done);
      await released;
      while (running.length >= window) await running.shift();
    }
    while (running.length) await running.shift();
    finished = true;
  } finally {
    // No native call of a block may outlive the signer.
    await Promise.allSettled(running);
    signer.dispose();
    // A source left early (an error, an abort) is told so, without waiting:
    // one stuck in an await (a reader on a silent pipe) would never answer.
    if (!finished) Promise.resolve(it.return?.()).catch(() => {});
  }
}

/**
 * Near-duplicate groups of a stream of featurized blocks: each block's rows
 * are hashed as the block arrives (MinHash weighted or classic, `method`),
 * banded as dedupParams chooses, and candidate pairs verified at the
 * threshold, as dedup() over all the rows at once would give them (row i is
 * the i-th row of the stream). With exact verification no signature matrix
 * is held: only each row's band keys and its vector. A block's arrays must
 * stay unchanged until the next block is asked for; they are copied (or
 * hashed) by then. Progress: 'hash' (rows; total when `totalRows` is given),
 * 'candidates', 'verify' (pairs). An abort stops the reading too.
 */
export async function dedupRecords(source: Source<DedupBlock>, options: DedupRecordsOptions = {}): Promise<DedupRecordsResult> {
  const o = checkDedupOptions(options);
  const total = options.totalRows === undefined ? undefined : checkInt(options.totalRows, 'totalRows', 0);
  const t0 = performance.now();
  const reporter = new ProgressReporter(o.onProgress);
  const ids = new IdListChain();
  let rowsSoFar = 0;
  const nameBlock = (b: DedupBlock, k: number, rows: number): void => {
    if (b.ids === undefined) {
      const first = rowsSoFar;
      ids.push({ length: rows, get: (i) => String(first + i) });
    } else {
      const list = toIdList(b.ids, `blocks[${k}].ids`);
      if (list.length !== rows) throw rangeError(`blocks[${k}].ids has ${list.length} names for ${rows} rows`);
      ids.push(list);
    }
    rowsSoFar += rows;
  };
  const params = o.params;
  // Exact verification needs band keys and vectors only; 'estimate' and
  // 'none' compare signatures, and returnSignatures returns them.
  const compact = o.verify === 'exact' && !o.returnSignatures;
  const devices = o.backend === 'cuda' ? resolveDevices(o.devices ?? 'all') : undefined;
  const spill = checkSpill(options.spill);
  const band = compact
    ? new BandIndex({ ...params, width: o.method === 'classic' ? 1 : 2, backend: o.backend, devices, spill })
    : undefined;
  const lsh = compact
    ? undefined
    : new MinHashLSH({
        bands: params.bands,
        rows: params.rows,
        samples: params.samples,
        threshold: o.threshold,
        backend: o.backend,
        devices: o.devices,
        kind: o.method,
      });
  const vectors: CsrMatrix[] = [];
  const signatures: Uint32Array[] = [];
  const signer = new BlockSigner<DedupBlock>(o, reporter, total, {
    block: (b, k, input) => {
      nameBlock(b, k, input.rows);
      if (band) return band.addVectors(input);
      if (o.verify === 'exact') vectors.push(copyCsr(input));
      return undefined;
    },
    slice: async (sigs, _raw, s, e) => {
      // sigs is the signer's own buffer, written again only after this settles.
      if (band) return band.addSignatures(sigs, true);
      const first = lsh!.size;
      const rowIds = new Uint32Array(e - s);
      for (let i = 0; i < rowIds.length; i++) rowIds[i] = first + i;
      lsh!.insert(rowIds, sigs);
      if (o.returnSignatures) signatures.push(sigs.slice());
    },
    hashed: (staged) => band?.settle(staged),
    ...(band ? { keyed: (keys: BlockBandKeys) => band.addKeys(keys.keys, keys.empty) } : {}),
  });
  try {
    // Three blocks at a time: one copied, one hashed, one handed on.
    await signAll(source, signer, o.signal, 3);
    reporter.finish('hash', signer.rows, total ?? signer.rows);
    const signed = { rows: signer.rows };
    const tHash = performance.now();
    const result: DedupRecordsResult = {
      group: new Uint32Array(signed.rows).fill(0xffffffff),
      count: 0,
      pairs: { left: new Uint32Array(0), right: new Uint32Array(0), similarity: new Float32Array(0) },
      lsh: params,
      ids,
      ms: { hash: tHash - t0, groups: 0 },
      spilledBytes: 0,
    };
    if (signed.rows > 0) {
      const g = band
        ? await band.groups(o.threshold, reporter, o.signal)
        : await lsh!.groups({
            verify: o.verify,
            threshold: o.threshold,
            matrix: o.verify === 'exact' ? joinCsr(vectors) : undefined,
            signal: o.signal,
            onProgress: o.onProgress,
          });
      result.group = g.group;
      result.count = g.count;
      result.pairs = g.pairs;
    }
    if (o.returnSignatures) result.signatures = joinU32(signatures);
    result.spilledBytes = band?.spilledBytes ?? 0;
    result.ms.groups = performance.now() - tHash;
    return result;
  } finally {
    band?.dispose();
    lsh?.dispose();
  }
}

/** One block of an indexRecords() source: rows and the ids they get in the index. */
export interface IndexBlock {
  rows: CsrMatrix;
  /** One unique uint32 per row. */
  indexIds: Uint32Array;
}

/** Hashes blocks into an index of one's own, block by block (see indexRecords). */
export interface RecordIndexer extends Disposable {
  /** Hashes the block's rows and inserts them (awaited with Redis storage); resolves once they are in. */
  add(block: IndexBlock): Promise<void>;
  /** Rows inserted so far. */
  readonly rows: number;
  dispose(): void;
}

export type IndexRecordsOptions = Omit<DedupOptions, 'verify' | 'returnSignatures'> & {
  /** Insert the rows too (Redis storage keeps them for groups({ verify: 'exact' })). */
  vectors?: boolean;
};

/**
 * The pipeline's hashing into an index of one's own (a MinHashLSH with Redis
 * storage that --shard workers share), for a caller that records each block
 * as done: each block's signatures go in with its indexIds, and with
 * `vectors` its rows too. The index's banding must be dedupParams(options)'s
 * and its kind the method. Dispose it to free the signer.
 */
export function recordIndexer(index: MinHashLSH, options: IndexRecordsOptions = {}): RecordIndexer {
  const o = checkDedupOptions(options);
  if (!(index instanceof MinHashLSH)) throw typeError(`index must be a MinHashLSH, got ${describe(index)}`);
  const p = o.params;
  if (index.bands !== p.bands || index.rows !== p.rows || index.samples !== p.samples || index.kind !== o.method)
    throw rangeError(
      `index has ${index.bands} bands × ${index.rows} rows of ${index.samples} ${index.kind} samples, ` +
        `but these options give ${p.bands} × ${p.rows} of ${p.samples} ${o.method}`,
    );
  const signer = new BlockSigner<IndexBlock>(o, new ProgressReporter(o.onProgress), undefined, {
    block: (b, k, input) => {
      if (!(b.indexIds instanceof Uint32Array) || b.indexIds.length !== input.rows)
        throw typeError(`blocks[${k}].indexIds must be a Uint32Array of ${input.rows} ids`);
    },
    slice: async (sigs, raw, s, e, b) => {
      await index.insert(b.indexIds.subarray(s, e), sigs, options.vectors ? { vectors: rowSlice(raw, s, e) } : undefined);
    },
  });
  return {
    add: (block) => signer.add(block),
    get rows() {
      return signer.rows;
    },
    dispose: () => signer.dispose(),
    [Symbol.dispose]: () => signer.dispose(),
  };
}

/** recordIndexer() over a whole source: every block inserted in order; returns the rows inserted. */
export async function indexRecords(source: Source<IndexBlock>, index: MinHashLSH, options: IndexRecordsOptions = {}): Promise<number> {
  const ix = recordIndexer(index, options);
  await signAll(
    source,
    {
      start: (b) => {
        const done = ix.add(b);
        return { released: done, done };
      },
      dispose: () => ix.dispose(),
    },
    options.signal,
  );
  return ix.rows;
}

/** A Staged array (native memory the library made: stageArray, a reader's band keys). */
function isStaged(v: unknown): v is Staged {
  if (!isObject(v)) return false;
  const o = v as Partial<Staged>;
  return typeof o.dispose === 'function' && typeof o.toArray === 'function' && typeof o.length === 'number';
}

/** The rows [b, e) of a CSR matrix: indptr rebased, indices and values as views. */
function rowSlice(m: CsrMatrix, b: number, e: number): CsrMatrix {
  if (b === 0 && e === m.rows) return m;
  const base = m.indptr[b];
  const indptr = new Uint32Array(e - b + 1);
  for (let i = 0; i < indptr.length; i++) indptr[i] = m.indptr[b + i] - base;
  const at = m.indptr[e];
  return {
    rows: e - b,
    cols: m.cols,
    indptr,
    indices: m.indices.subarray(base, at),
    ...(m.values ? { values: m.values.subarray(base, at) } : {}),
  };
}

/** A copy of m that the caller's later writes cannot reach. */
export function copyCsr(m: CsrMatrix): CsrMatrix {
  return {
    rows: m.rows,
    cols: m.cols,
    indptr: m.indptr.slice(),
    indices: m.indices.slice(),
    ...(m.values ? { values: m.values.slice() } : {}),
  };
}

function joinCsr(parts: CsrMatrix[]): CsrMatrix {
  if (parts.length === 1) return parts[0];
  const rows = parts.reduce((a, p) => a + p.rows, 0);
  const nnz = parts.reduce((a, p) => a + p.indices.length, 0);
  const withValues = parts.some((p) => p.values);
  const indptr = new Uint32Array(rows + 1);
  const indices = new Uint32Array(nnz);
  const values = withValues ? new Float32Array(nnz).fill(1) : undefined;
  let row = 0;
  let nz = 0;
  for (const p of parts) {
    for (let i = 1; i <= p.rows; i++) indptr[row + i] = nz + p.indptr[i] - p.indptr[0];
    indices.set(p.indices.subarray(p.indptr[0], p.indptr[p.rows]), nz);
    if (values && p.values) values.set(p.values.subarray(p.indptr[0], p.indptr[p.rows]), nz);
    row += p.rows;
    nz += p.indptr[p.rows] - p.indptr[0];
  }
  return { rows, cols: parts[0]?.cols ?? 0, indptr, indices, ...(values ? { values } : {}) };
}

function joinU32(parts: Uint32Array[]): Uint32Array {
  if (parts.length === 1) return parts[0];
  const out = new Uint32Array(parts.reduce((a, p) => a + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}
