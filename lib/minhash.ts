// Weighted MinHash (Ioffe's improved consistent weighted sampling) on CPU or
// GPU. Signatures are portable: the random parameters follow a fixed contract
// (cuRAND Philox4x32-10, curand_init(seed, d, 0), five uniforms per sample),
// whose uniforms the CPU backend reproduces bit for bit; the tables' logs may
// differ in the last bit between CPU and GPU, so GPU signatures agree with
// the CPU's on at least 99.99% of entries (what the tests hold).
//
// Semantics worth knowing:
// - weights <= 0 are skipped (they carry no mass), non-finite ones (NaN,
//   ±Infinity) refused; `values` absent means every stored entry weighs 1;
// - a row with no positive weight gets the sentinel (0xFFFFFFFF, 0xFFFFFFFF)
//   in every sample, and estimates 0 against anything.
import { MAX_TYPED_LENGTH, native } from './addon.js';
import type { MinHashEngine, Staged, StagingSet, WeightedMinHashNative } from './native-types.js';
import { resolveBackend, resolveDevices, type Backend, type BackendOption } from './backend.js';
import { checkSignal, withCancel } from './cancel.js';
import { checkOnProgress, ProgressReporter, withNativeProgress, type OnProgress } from './progress.js';
import { abortError, rangeError, typeError } from './errors.js';
import { NativeResource } from './resource.js';
import { isPinned } from './pinned.js';
import {
  checkBool,
  checkEnum,
  checkInt,
  checkOptions,
  checkTuningKeys,
  isObject,
  describe,
  toCsr,
  type CsrMatrix,
  checkTyped,
  asTyped,
} from './validate.js';
import type { MinHashTuning, MinHashParameters } from './types.js';
export type { MinHashTuning, MinHashParameters } from './types.js';

export interface WeightedMinHashOptions {
  dim: number;
  samples?: number;
  seed?: number;
  backend?: BackendOption;
  devices?: 'all' | number[];
  /** GPU kernel choices (signatures are the same under every choice); see docs/engines/minhash.md. */
  tuning?: MinHashTuning;
}

/** options.tuning of a MinHash engine; `kernels` false for the classic engine, which has one. */
export function checkMinHashTuning(v: unknown, kernels: boolean): Required<MinHashTuning> {
  const t = checkTuningKeys(v, 'tuning', kernels ? ['kernel', 'overlap'] : ['overlap']);
  return {
    kernel: t.kernel === undefined ? 'auto' : checkEnum(t.kernel, 'tuning.kernel', ['auto', 'prune'] as const),
    overlap: checkBool(t.overlap ?? true, 'tuning.overlap'),
  };
}

export interface HashOptions {
  rowStart?: number;
  rowEnd?: number;
  signal?: AbortSignal;
  /**
   * Writes the signatures into this array (at least rows × samples × 2 long) and
   * returns its prefix instead of allocating. The array is written when the
   * call ends (a call whose `out` was detached meanwhile rejects, writing
   * nothing), except one from `pinnedArray`, which GPUs copy into directly (no
   * staging copy); reuse it across calls.
   */
  out?: Uint32Array;
  /**
   * `out` is a buffer of the caller's own that nothing reads, writes or
   * detaches until this call settles (dedup's reused signature buffer): the
   * call writes it in place, instead of into its own memory that is copied in
   * on this thread when it ends.
   * @internal
   */
  outHanded?: boolean;
  /** Rows hashed so far: `{ stage: 'hash', done, total }` (see ProgressEvent). */
  onProgress?: OnProgress;
  /**
   * Hands the matrix's buffers over to the call instead of copying them: the
   * ArrayBuffers under `indptr`, `indices` and `values` are detached (as by
   * structuredClone's transfer) just before the native call starts, whether
   * it then succeeds or not, and the call reads them in place. Every array
   * viewing those buffers (rowChunks views share one) becomes empty. For
   * callers that make a fresh matrix per call; pinnedArray and
   * SharedArrayBuffer memory is left attached (the first is read in place
   * anyway, the second is copied).
   */
  transfer?: boolean;
}

/** What the GPU spent on one hash() call, as fields of hashTimed()'s result (0 on CPU). */
export interface HashTiming {
  kernelMs: number;
  transferMs: number;
  /**
   * Host wall-clock phases of the call (ms): the whole native call, and on CUDA the
   * staging copies in and out and the waits on the GPU, each summed over the
   * feeding threads (three per GPU). Diagnostics for benchmarks; the fields may change.
   */
  host?: { nativeMs: number; stageInMs: number; waitMs: number; stageOutMs: number };
}

export const EMPTY_ROW_SENTINEL = 0xffffffff;

/** The most samples a MinHash signature holds (every engine and the native glue agree). */
export const MAX_SAMPLES = 65536;

export function checkSamples(v: unknown, name = 'samples'): number {
  return checkInt(v, name, 1, MAX_SAMPLES);
}

/** Columns are uint32, so dim is at most 2^32 - 1. */
function checkDim(v: unknown): number {
  return checkInt(v, 'dim', 1, 0xffffffff);
}

/** What WeightedMinHash and MinHash share: the native object, hash calls, their timings and streams. */
export abstract class MinHashBase<H extends MinHashEngine> extends NativeResource<H> {
  readonly samples: number;
  readonly backend: Backend;
  readonly devices: number[];
  readonly tuning: Required<MinHashTuning>;

  protected constructor(h: H, what: string, samples: number, backend: Backend, tuning: Required<MinHashTuning>) {
    super(h, what);
    this.samples = samples;
    this.backend = backend;
    this.tuning = tuning;
    this.devices = backend === 'cuda' ? h.devices() : [];
  }

  /** The matrix checked for this engine, and the output words per row. */
  protected abstract prepare(matrix: CsrMatrix): { m: CsrMatrix; wordsPerRow: number };
  /** A matrix of `cols` columns may be hashed (a RangeError if not); returns the words of a signature. */
  protected abstract shape(cols: number): number;

  /**
   * Signatures of rows [rowStart, rowEnd), row-major, wordsPerRow uint32 per
   * row (see the class for the layout). Slicing copies nothing.
   */
  async hash(matrix: CsrMatrix, options: HashOptions = {}): Promise<Uint32Array> {
    return (await this.hashTimed(matrix, options)).signatures;
  }

  /**
   * hash() of the rows of `staged`, a copy of a matrix of `shape` (checked
   * when it was staged) that stageCsr/stageCsrAsync made (weighted: with
   * values): no copy is made on this thread, and the matrix it was copied
   * from is not read again (its arrays may have changed since). For the
   * library's pipelines (dedup's band index holds the staged rows it
   * verifies with).
   * @internal
   */
  async hashStaged(
    staged: Staged,
    shape: { rows: number; cols: number },
    options: Omit<HashOptions, 'transfer'> = {},
  ): Promise<Uint32Array> {
    const wordsPerRow = this.shape(shape.cols);
    if (staged.length !== shape.rows) throw rangeError(`staged has ${staged.length} rows but the matrix has ${shape.rows}`);
    return (await callHash(this.handle, staged, shape.rows, { ...options, transfer: false }, wordsPerRow)).signatures;
  }

  /** hash() plus the CUDA-event timings of this call (each call its own: calls may overlap). */
  async hashTimed(matrix: CsrMatrix, options: HashOptions = {}): Promise<{ signatures: Uint32Array } & HashTiming> {
    const h = this.handle;
    const { m, wordsPerRow } = this.prepare(matrix);
    return callHash(h, m, m.rows, options, wordsPerRow);
  }

  /**
   * Signatures of each chunk, in order. The next chunk's call is issued before
   * the previous one is awaited, so its staging and copies overlap the
   * previous chunk's kernels. Each chunk is copied (on a worker, over all
   * cores, into page-locked staging on CUDA; not on the event loop) before the
   * source is asked for the next chunk or the previous chunk's signatures are
   * yielded, so a source may refill one buffer for every chunk. It must leave
   * a chunk's buffers attached until then (a chunk detached meanwhile rejects
   * with a coded TypeError). pinnedArray chunks on CUDA are read in place, as
   * by hash(). With `transfer: true` each chunk's buffers are handed over
   * instead (HashOptions.transfer): no copy, for sources that make fresh
   * arrays per chunk (not rowChunks, whose chunks share one buffer).
   */
  hashStream(
    source: AsyncIterable<CsrMatrix> | Iterable<CsrMatrix>,
    options: { signal?: AbortSignal; onProgress?: OnProgress; totalRows?: number; transfer?: boolean } = {},
  ): AsyncGenerator<Uint32Array> {
    checkOptions(options);
    checkSignal(options.signal);
    const transfer = checkBool(options.transfer ?? false, 'transfer');
    // Rows of the chunks yielded so far, out of totalRows when the caller knows it.
    const reporter = new ProgressReporter(checkOnProgress(options.onProgress));
    const total = options.totalRows === undefined ? undefined : checkInt(options.totalRows, 'totalRows', 0);
    // The stream's staging blocks: each chunk's copy reuses those of the chunk
    // two before it (whose call has ended), so only the first two chunks make
    // (page-lock) blocks, whatever the process-wide pools keep idle.
    let staging: StagingSet | undefined;
    const take = async (chunk: CsrMatrix) => {
      const { m, wordsPerRow } = this.prepare(chunk);
      const run = (matrix: CsrMatrix | Staged) =>
        callHash(this.handle, matrix, m.rows, { signal: options.signal, transfer }, wordsPerRow).then((r) => ({
          sig: r.signatures,
          rows: m.rows,
        }));
      if (transfer) return () => run(m);
      if (options.signal?.aborted) throw abortError(options.signal.reason);
      staging ??= new (native().StagingSet)();
      const staged = await native().stageCsrAsync(m, m.values !== undefined, this.backend === 'cuda', staging);
      return () => {
        try {
          return run(staged);
        } finally {
          staged.dispose(); // the call holds what it reads
        }
      };
    };
    return streamHashes(source, take, reporter, total, () => staging?.dispose());
  }
}

/**
 * Signatures are rows × samples × 2 uint32: (k*, t*) per sample, with t* an
 * int32 cast to uint32.
 */
export class WeightedMinHash extends MinHashBase<WeightedMinHashNative> {
  readonly dim: number;
  readonly seed: number;

  constructor(options: WeightedMinHashOptions) {
    if (!isObject(options)) throw typeError(`options must be an object, got ${describe(options)}`);
    const dim = checkDim(options.dim);
    const samples = checkSamples(options.samples ?? 128);
    const seed = checkInt(options.seed ?? 1, 'seed', 0);
    const backend = resolveBackend(options.backend);
    const devices = backend === 'cuda' ? resolveDevices(options.devices ?? 'all') : undefined;
    const tuning = checkMinHashTuning(options.tuning, true);
    const extra = (options as { _tables?: MinHashParameters })._tables;
    const h = new (native().WeightedMinHashNative)({ dim, samples, seed, backend, devices, tuning, ...(extra ?? {}) });
    super(h, 'WeightedMinHash', samples, backend, tuning);
    this.dim = dim;
    this.seed = seed;
  }

  /**
   * Uses given tables instead of the seed: [samples][dim] (datasketch's
   * layout), or with `columns`, [samples][columns.length] for just those
   * columns (any dim up to 2^32 - 1); hashing any other column is then a RangeError.
   */
  static fromParameters(
    p: MinHashParameters & { dim: number; samples: number; backend?: BackendOption; devices?: 'all' | number[]; tuning?: MinHashTuning },
  ): WeightedMinHash {
    if (!isObject(p)) throw typeError(`parameters must be an object, got ${describe(p)}`);
    const dim = checkDim(p.dim);
    const samples = checkSamples(p.samples);
    const columns = p.columns === undefined ? undefined : checkColumnList(p.columns, 'columns', dim, true);
    const n = (columns?.length ?? dim) * samples;
    for (const k of ['rs', 'lnCs', 'betas'] as const) {
      const a = p[k];
      checkTyped(a, Float32Array, k);
      if (a.length !== n) throw rangeError(`${k} has length ${a.length} but samples * ${columns ? 'columns.length' : 'dim'} = ${n}`);
    }
    // Non-finite entries (or r <= 0, which divides by zero) give every row
    // the empty sentinel or garbage samples, silently.
    for (const k of ['rs', 'lnCs', 'betas'] as const) {
      const a = p[k];
      for (let i = 0; i < n; i++) {
        if (!Number.isFinite(a[i]) || (k === 'rs' && a[i] <= 0)) {
          throw rangeError(`${k}[${i}]=${a[i]} must be finite${k === 'rs' ? ' and > 0' : ''}`);
        }
      }
    }
    const options = {
      dim,
      samples,
      backend: p.backend,
      devices: p.devices,
      tuning: p.tuning,
      _tables: { rs: p.rs, lnCs: p.lnCs, betas: p.betas, columns },
    };
    return new WeightedMinHash(options as WeightedMinHashOptions);
  }

  protected prepare(matrix: CsrMatrix): { m: CsrMatrix; wordsPerRow: number } {
    // Weights are checked natively over the rows a call hashes (callHash).
    const m = toCsr(matrix, 'matrix', { weights: 'unchecked' });
    return { m, wordsPerRow: this.shape(m.cols) };
  }

  protected shape(cols: number): number {
    if (cols !== this.dim) throw rangeError(`matrix.cols is ${cols} but this WeightedMinHash was built for dim=${this.dim}`);
    return this.samples * 2;
  }

  /**
   * The random tables of `columns` (default every column, 0..dim-1, which
   * must fit a typed array: pass the columns wanted when dim is large), in
   * [samples][n] layout (datasketch's). Computing them caches nothing.
   */
  parameters(options: { columns?: Uint32Array | readonly number[] } = {}): MinHashParameters & { columns: Uint32Array } {
    if (!isObject(options)) throw typeError(`options must be an object, got ${describe(options)}`);
    const h = this.handle;
    const cols = options.columns === undefined ? undefined : checkColumnList(options.columns, 'columns', this.dim, false);
    return h.parameters(cols);
  }

  /** Tables as held by the i-th device in use (tests compare them with the CPU's); as parameters(). */
  deviceParameters(slot = 0, options: { columns?: Uint32Array | readonly number[] } = {}): MinHashParameters & { columns: Uint32Array } {
    checkInt(slot, 'slot', 0, Math.max(0, this.devices.length - 1));
    if (!isObject(options)) throw typeError(`options must be an object, got ${describe(options)}`);
    const h = this.handle;
    const cols = options.columns === undefined ? undefined : checkColumnList(options.columns, 'columns', this.dim, false);
    return h.deviceParameters(slot, cols);
  }
}

/** Column ids < dim as a Uint32Array; `distinct` rejects repeats. */
function checkColumnList(v: unknown, name: string, dim: number, distinct: boolean): Uint32Array {
  const u32 = asTyped(v, Uint32Array, name);
  if (!u32 && !Array.isArray(v)) throw typeError(`${name} must be a Uint32Array or an array of integers, got ${describe(v)}`);
  const src = (u32 ?? v) as ArrayLike<number>;
  const out = u32 ?? new Uint32Array(src.length);
  for (let i = 0; i < src.length; i++) {
    const c = src[i];
    if (!Number.isInteger(c) || c < 0 || c >= dim) throw rangeError(`${name}[${i}]=${c} is out of range for dim=${dim}`);
    out[i] = c;
  }
  if (distinct) {
    const sorted = out.slice().sort();
    for (let i = 1; i < sorted.length; i++) if (sorted[i] === sorted[i - 1]) throw rangeError(`${name} repeats column ${sorted[i]}`);
  }
  return out;
}

/**
 * A result array of `length` uint32, or undefined to let the native layer
 * allocate it. Node wraps native memory only up to MAX_TYPED_LENGTH bytes, so
 * a larger result is allocated here, in JavaScript memory, and filled in
 * place (no copy); past MAX_TYPED_LENGTH elements no typed array holds it.
 */
export function largeOutput(length: number, what: string): Uint32Array | undefined {
  if (length > MAX_TYPED_LENGTH) {
    throw rangeError(
      `the ${what} would hold ${length} elements, more than one typed array holds (${MAX_TYPED_LENGTH}); ` +
        'hash fewer rows per call (rowStart/rowEnd, or hashStream over rowChunks(matrix, rows))',
    );
  }
  if (length * 4 <= MAX_TYPED_LENGTH) return undefined;
  try {
    return new Uint32Array(length);
  } catch {
    throw Object.assign(new Error(`could not allocate the ${what} (${length * 4} bytes) in JavaScript memory`), {
      code: 'CUSIM_OUT_OF_MEMORY',
    });
  }
}

/**
 * One native hash call over rows [rowStart, rowEnd) of a checked matrix of
 * `rows` rows (or one staged by stageCsrAsync, never with transfer), with
 * `wordsPerRow` output words per row (WeightedMinHash and MinHash share it).
 */
function callHash(
  h: MinHashEngine,
  m: CsrMatrix | Staged,
  rows: number,
  options: HashOptions,
  wordsPerRow: number,
): Promise<{ signatures: Uint32Array } & HashTiming> {
  if (!isObject(options)) throw typeError(`options must be an object, got ${describe(options)}`);
  const signal = (options as HashOptions).signal;
  const rowStart = checkInt(options.rowStart ?? 0, 'rowStart', 0, rows);
  const rowEnd = checkInt(options.rowEnd ?? rows, 'rowEnd', rowStart, rows);
  // Weights are checked natively, on all cores in the call's worker (a scan
  // here held the event loop for a second at 1M rows); rows named from rowStart.
  const need = (rowEnd - rowStart) * wordsPerRow;
  const given = options.out === undefined ? undefined : checkTyped(options.out, Uint32Array, 'out');
  if (given && given.length < need) throw rangeError(`out has length ${given.length} but rows ${rowStart}..${rowEnd} need ${need}`);
  const out = given ?? largeOutput(need, 'signatures');
  const handed = checkBool(options.transfer ?? false, 'transfer');
  const outHanded = given !== undefined && checkBool(options.outHanded ?? false, 'outHanded');
  const reporter = new ProgressReporter(checkOnProgress(options.onProgress));
  // Without `out` the native call allocates and returns the signatures. The
  // buffers go (handOver) only when the native call is made, synchronously,
  // so a call refused first (an aborted signal) leaves them attached.
  type Raw = { signatures: Uint32Array } & HashTiming;
  const call = withCancel(signal, (cancel) =>
    withNativeProgress(
      reporter,
      ['hash'],
      (progress) =>
        h.hash(handed ? handOver(m as CsrMatrix) : m, { rowStart, rowEnd, cancel, out, progress, handed, outHanded }) as Promise<Raw>,
      rowEnd - rowStart,
    ),
  );
  const named = call.catch((e: unknown) => {
    throw rowStart === 0 ? e : fromRowStart(e, rowStart);
  });
  return out === undefined ? named : named.then((r) => ({ ...r, signatures: out.subarray(0, need) }));
}

/** A native weight error names the row within the hashed range: this names it in the matrix. */
function fromRowStart(e: unknown, rowStart: number): unknown {
  if (!(e instanceof RangeError)) return e;
  const m = / in row (\d+): weights must be finite$/.exec(e.message);
  if (m) e.message = e.message.slice(0, m.index) + ` in row ${Number(m[1]) + rowStart}: weights must be finite`;
  return e;
}

/**
 * `m` over buffers of its own: the ArrayBuffers under its arrays are
 * transferred (the caller's are detached, no bytes copied), except pinnedArray
 * and SharedArrayBuffer memory, which stays as it is.
 */
function handOver(m: CsrMatrix): CsrMatrix {
  type View = Uint32Array | Int32Array | Float32Array;
  // Offsets and lengths read now: a detached view reads 0 for both.
  const views = [m.indptr, m.indices, m.values].map((a) => a && { a, offset: a.byteOffset, length: a.length });
  const from = [...new Set(views.flatMap((v) => (v && v.a.buffer instanceof ArrayBuffer && !isPinned(v.a) ? [v.a.buffer] : [])))];
  let to: ArrayBuffer[];
  try {
    to = structuredClone(from, { transfer: from });
  } catch (e) {
    throw typeError(`matrix's buffers could not be transferred (already detached?): ${(e as Error).message}`);
  }
  const moved = new Map<ArrayBufferLike, ArrayBuffer>(from.map((b, i) => [b, to[i]]));
  const move = <T extends View>(v: { a: T; offset: number; length: number }): T => {
    const b = moved.get(v.a.buffer);
    if (!b) return v.a;
    const C = v.a.constructor as new (buffer: ArrayBuffer, byteOffset: number, length: number) => T;
    return new C(b, v.offset, v.length);
  };
  const [indptr, indices, values] = views as [
    { a: Uint32Array | Int32Array; offset: number; length: number },
    { a: Uint32Array; offset: number; length: number },
    { a: Float32Array; offset: number; length: number } | undefined,
  ];
  return { rows: m.rows, cols: m.cols, indptr: move(indptr), indices: move(indices), values: values && move(values) };
}

/**
 * hash() of each chunk of `source`, in order, the next call issued before
 * the previous one is awaited so its staging and copies overlap the previous
 * chunk's kernels. `take` makes a chunk the stream's own (copies it, or
 * checks it for a handed-over call) and returns what starts its call; it is
 * awaited before the source is pulled again or anything is yielded, so
 * neither the source nor the consumer runs while a chunk is being copied.
 */
async function* streamHashes(
  source: AsyncIterable<CsrMatrix> | Iterable<CsrMatrix>,
  take: (m: CsrMatrix) => Promise<() => Promise<{ sig: Uint32Array; rows: number }>>,
  reporter: ProgressReporter,
  total: number | undefined,
  close: () => void,
): AsyncGenerator<Uint32Array> {
  if (!isObject(source) || (!(Symbol.asyncIterator in source) && !(Symbol.iterator in source))) {
    throw typeError(`source must be an iterable of CsrMatrix, got ${describe(source)}`);
  }
  let done = 0;
  let pending: Promise<{ sig: Uint32Array; rows: number }> | undefined;
  try {
    for await (const chunk of source) {
      const next = (await take(chunk))();
      // Rejections surface when awaited below; this only silences the
      // unhandled-rejection warning while the previous chunk is awaited.
      next.catch(() => {});
      if (pending) {
        const r = await pending;
        reporter.update('hash', (done += r.rows), total);
        yield r.sig;
      }
      pending = next;
    }
    if (pending) {
      const last = pending;
      pending = undefined;
      const r = await last;
      reporter.finish('hash', (done += r.rows), total ?? done);
      yield r.sig;
    }
  } finally {
    // Wait out a call still in flight so no work outlives the consumer.
    if (pending) await pending.catch(() => {});
    close();
  }
}

/**
 * Views of `matrix`'s rows in chunks of at most `rows` rows, sharing its
 * arrays (no copy): feed them to hashStream when one call's output would be
 * too large for one array.
 */
export function* rowChunks(matrix: CsrMatrix, rows: number): Generator<CsrMatrix> {
  const m = toCsr(matrix, 'matrix', { maxCols: 2 ** 32 });
  checkInt(rows, 'rows', 1);
  for (let a = 0; a < m.rows; a += rows) {
    const b = Math.min(m.rows, a + rows);
    yield { rows: b - a, cols: m.cols, indptr: m.indptr.subarray(a, b + 1), indices: m.indices, values: m.values };
  }
}

function checkSignature(given: unknown, name: string): Uint32Array {
  const v = checkTyped(given, Uint32Array, name);
  if (v.length === 0 || v.length % 2 !== 0) throw rangeError(`${name} must hold samples × 2 entries, got length ${v.length}`);
  return v;
}

/** Fraction of samples where both k* and t* agree; 0 if either row is empty (sentinel). */
export function estimateJaccard(sigA: Uint32Array, sigB: Uint32Array): number {
  sigA = checkSignature(sigA, 'sigA');
  sigB = checkSignature(sigB, 'sigB');
  if (sigA.length !== sigB.length) throw rangeError(`sigA has length ${sigA.length} but sigB has ${sigB.length}`);
  if (sigA[0] === EMPTY_ROW_SENTINEL || sigB[0] === EMPTY_ROW_SENTINEL) return 0;
  let same = 0;
  for (let i = 0; i < sigA.length; i += 2) if (sigA[i] === sigB[i] && sigA[i + 1] === sigB[i + 1]) same++;
  return same / (sigA.length / 2);
}

/** estimateJaccard for many (left[i], right[i]) row pairs of one signature matrix; native, multi-threaded. */
export function estimateJaccardPairs(signatures: Uint32Array, samples: number, left: Uint32Array, right: Uint32Array): Float32Array {
  signatures = checkTyped(signatures, Uint32Array, 'signatures');
  checkSamples(samples);
  if (signatures.length % (samples * 2) !== 0) {
    throw rangeError(`signatures.length ${signatures.length} is not a multiple of samples * 2 = ${samples * 2}`);
  }
  left = checkTyped(left, Uint32Array, 'left');
  right = checkTyped(right, Uint32Array, 'right');
  if (left.length !== right.length) throw rangeError(`left has length ${left.length} but right has ${right.length}`);
  const rows = signatures.length / (samples * 2);
  for (const [arr, name] of [
    [left, 'left'],
    [right, 'right'],
  ] as const) {
    for (let i = 0; i < arr.length; i++) {
      if (arr[i] >= rows) throw rangeError(`${name}[${i}]=${arr[i]} is out of range for ${rows} signature rows`);
    }
  }
  return native().minhashJaccardPairs(signatures, samples, left, right);
}
