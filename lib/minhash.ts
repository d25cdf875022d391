// Weighted MinHash (Ioffe's improved consistent weighted sampling) on CPU or
// GPU. Signatures are portable: the random parameters follow a fixed contract
// (cuRAND Philox4x32-10, curand_init(seed, d, 0), five uniforms per sample),
// which the CPU backend reproduces bit for bit.
//
// Semantics worth knowing:
// - weights <= 0 and NaN are skipped (they carry no mass); `values` absent
//   means every stored entry weighs 1;
// - a row with no positive weight gets the sentinel (0xFFFFFFFF, 0xFFFFFFFF)
//   in every sample, and estimates 0 against anything.
import { native, type Native } from './addon.js';
import { resolveBackend, resolveDevices, type Backend, type BackendOption } from './backend.js';
import { withCancel } from './cancel.js';
import { checkOnProgress, ProgressReporter, withNativeProgress, type OnProgress } from './progress.js';
import { rangeError, typeError } from './errors.js';
import { NativeResource } from './resource.js';
import { checkInt, isObject, describe, toCsr, type CsrMatrix } from './validate.js';

export interface WeightedMinHashOptions {
  dim: number;
  samples?: number;
  seed?: number;
  backend?: BackendOption;
  devices?: 'all' | number[];
}

export interface MinHashParameters {
  /** [samples][dim], Gamma(2, 1) */
  rs: Float32Array;
  /** [samples][dim], ln of Gamma(2, 1) */
  lnCs: Float32Array;
  /** [samples][dim], uniform in (0, 1] */
  betas: Float32Array;
}

export interface HashOptions {
  rowStart?: number;
  rowEnd?: number;
  signal?: AbortSignal;
  /**
   * Writes the signatures into this array (at least rows × samples × 2 long) and
   * returns its prefix instead of allocating. With one from `pinnedArray`, GPUs
   * copy into it directly (no staging copy); reuse it across calls.
   */
  out?: Uint32Array;
  /** Rows hashed so far: `{ stage: 'hash', done, total }` (see ProgressEvent). */
  onProgress?: OnProgress;
}

/** What the GPU spent on the last hash() call (0 on CPU). */
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

const MAX_SAMPLES = 65536;

function checkSamples(v: unknown, name = 'samples'): number {
  return checkInt(v, name, 1, MAX_SAMPLES);
}

export class WeightedMinHash extends NativeResource {
  readonly dim: number;
  readonly samples: number;
  readonly seed: number;
  readonly backend: Backend;
  readonly devices: number[];
  /** CUDA-event timings of the most recent hash() call. */
  lastTiming: HashTiming = { kernelMs: 0, transferMs: 0 };

  constructor(options: WeightedMinHashOptions) {
    if (!isObject(options)) throw typeError(`options must be an object, got ${describe(options)}`);
    const dim = checkInt(options.dim, 'dim', 1, 0xffffffff);
    const samples = checkSamples(options.samples ?? 128);
    const seed = checkInt(options.seed ?? 1, 'seed', 0);
    const backend = resolveBackend(options.backend);
    const devices = backend === 'cuda' ? resolveDevices(options.devices ?? 'all') : undefined;
    const extra = (options as { _tables?: MinHashParameters })._tables;
    const h: Native = new (native().WeightedMinHashNative)({ dim, samples, seed, backend, devices, ...(extra ?? {}) });
    super(h, 'WeightedMinHash');
    this.dim = dim;
    this.samples = samples;
    this.seed = seed;
    this.backend = backend;
    this.devices = backend === 'cuda' ? (h.devices() as number[]) : [];
  }

  /** Uses given tables ([samples][dim], datasketch's layout) instead of the seed. */
  static fromParameters(p: MinHashParameters & { dim: number; samples: number; backend?: BackendOption; devices?: 'all' | number[] }): WeightedMinHash {
    if (!isObject(p)) throw typeError(`parameters must be an object, got ${describe(p)}`);
    const dim = checkInt(p.dim, 'dim', 1, 0xffffffff);
    const samples = checkSamples(p.samples);
    const n = dim * samples;
    for (const k of ['rs', 'lnCs', 'betas'] as const) {
      const a = p[k];
      if (!(a instanceof Float32Array)) throw typeError(`${k} must be a Float32Array, got ${describe(a)}`);
      if (a.length !== n) throw rangeError(`${k} has length ${a.length} but samples * dim = ${n}`);
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
    const options = { dim, samples, backend: p.backend, devices: p.devices, _tables: { rs: p.rs, lnCs: p.lnCs, betas: p.betas } };
    return new WeightedMinHash(options as WeightedMinHashOptions);
  }

  /**
   * Signatures of rows [rowStart, rowEnd): rows × samples × 2 uint32, (k*, t*)
   * per sample with t* an int32 cast to uint32. Slicing copies nothing.
   */
  async hash(matrix: CsrMatrix, options: HashOptions = {}): Promise<Uint32Array> {
    const r = await this.#hash(matrix, options);
    this.lastTiming = { kernelMs: r.kernelMs, transferMs: r.transferMs };
    return r.signatures;
  }

  /** hash() plus the CUDA-event timings of this call. */
  async hashTimed(matrix: CsrMatrix, options: HashOptions = {}): Promise<{ signatures: Uint32Array } & HashTiming> {
    return this.#hash(matrix, options);
  }

  #hash(matrix: CsrMatrix, options: HashOptions): Promise<{ signatures: Uint32Array } & HashTiming> {
    const h = this.handle;
    const m = toCsr(matrix, 'matrix');
    if (m.cols !== this.dim) throw rangeError(`matrix.cols is ${m.cols} but this WeightedMinHash was built for dim=${this.dim}`);
    if (!isObject(options)) throw typeError(`options must be an object, got ${describe(options)}`);
    const signal = (options as HashOptions).signal;
    const rowStart = checkInt(options.rowStart ?? 0, 'rowStart', 0, m.rows);
    const rowEnd = checkInt(options.rowEnd ?? m.rows, 'rowEnd', rowStart, m.rows);
    const out = options.out;
    const need = (rowEnd - rowStart) * this.samples * 2;
    if (out !== undefined) {
      if (!(out instanceof Uint32Array)) throw typeError(`out must be a Uint32Array, got ${describe(out)}`);
      if (out.length < need) throw rangeError(`out has length ${out.length} but rows ${rowStart}..${rowEnd} need ${need}`);
    }
    type Raw = { signatures: Uint32Array } & HashTiming;
    const reporter = new ProgressReporter(checkOnProgress(options.onProgress));
    const rows = rowEnd - rowStart;
    const call = withCancel(signal, (cancel) =>
      withNativeProgress(reporter, ['hash'], (progress) => h.hash(m, { rowStart, rowEnd, cancel, out, progress }) as Promise<Raw>, rows),
    );
    return out === undefined ? call : call.then((r) => ({ ...r, signatures: out.subarray(0, need) }));
  }

  /**
   * Signatures of each chunk, in order. The next chunk's call is issued before
   * the previous one is awaited, so its staging and copies overlap the
   * previous chunk's kernels.
   */
  async *hashStream(
    source: AsyncIterable<CsrMatrix> | Iterable<CsrMatrix>,
    options: { signal?: AbortSignal; onProgress?: OnProgress; totalRows?: number } = {},
  ): AsyncGenerator<Uint32Array> {
    if (!isObject(source) || (!(Symbol.asyncIterator in source) && !(Symbol.iterator in source))) {
      throw typeError(`source must be an iterable of CsrMatrix, got ${describe(source)}`);
    }
    // Rows of the chunks yielded so far, out of totalRows when the caller knows it.
    const reporter = new ProgressReporter(checkOnProgress(options.onProgress));
    const total = options.totalRows === undefined ? undefined : checkInt(options.totalRows, 'totalRows', 0);
    let done = 0;
    const rowsOf = (sig: Uint32Array): number => sig.length / (2 * this.samples);
    let pending: Promise<Uint32Array> | undefined;
    try {
      for await (const chunk of source) {
        const next = this.hash(chunk, { signal: options.signal });
        // Rejections surface when awaited below; this only silences the
        // unhandled-rejection warning while the previous chunk is awaited.
        next.catch(() => {});
        if (pending) {
          const sig = await pending;
          reporter.update('hash', (done += rowsOf(sig)), total);
          yield sig;
        }
        pending = next;
      }
      if (pending) {
        const last = pending;
        pending = undefined;
        const sig = await last;
        reporter.finish('hash', (done += rowsOf(sig)), total ?? done);
        yield sig;
      }
    } finally {
      // Wait out a call still in flight so no work outlives the consumer.
      if (pending) await pending.catch(() => {});
    }
  }

  /** The random tables in [samples][dim] layout (datasketch's). */
  parameters(): MinHashParameters {
    return this.handle.parameters() as MinHashParameters;
  }

  /** Tables as generated on the i-th device in use (tests compare them with the CPU's). */
  deviceParameters(slot = 0): MinHashParameters {
    checkInt(slot, 'slot', 0, Math.max(0, this.devices.length - 1));
    return this.handle.deviceParameters(slot) as MinHashParameters;
  }
}

function checkSignature(v: unknown, name: string): Uint32Array {
  if (!(v instanceof Uint32Array)) throw typeError(`${name} must be a Uint32Array, got ${describe(v)}`);
  if (v.length === 0 || v.length % 2 !== 0) throw rangeError(`${name} must hold samples × 2 entries, got length ${v.length}`);
  return v;
}

/** Fraction of samples where both k* and t* agree; 0 if either row is empty (sentinel). */
export function estimateJaccard(sigA: Uint32Array, sigB: Uint32Array): number {
  checkSignature(sigA, 'sigA');
  checkSignature(sigB, 'sigB');
  if (sigA.length !== sigB.length) throw rangeError(`sigA has length ${sigA.length} but sigB has ${sigB.length}`);
  if (sigA[0] === EMPTY_ROW_SENTINEL || sigB[0] === EMPTY_ROW_SENTINEL) return 0;
  let same = 0;
  for (let i = 0; i < sigA.length; i += 2) if (sigA[i] === sigB[i] && sigA[i + 1] === sigB[i + 1]) same++;
  return same / (sigA.length / 2);
}

/** estimateJaccard for many (left[i], right[i]) row pairs of one signature matrix; native, multi-threaded. */
export function estimateJaccardPairs(signatures: Uint32Array, samples: number, left: Uint32Array, right: Uint32Array): Float32Array {
  if (!(signatures instanceof Uint32Array)) throw typeError(`signatures must be a Uint32Array, got ${describe(signatures)}`);
  checkSamples(samples);
  if (signatures.length % (samples * 2) !== 0) {
    throw rangeError(`signatures.length ${signatures.length} is not a multiple of samples * 2 = ${samples * 2}`);
  }
  if (!(left instanceof Uint32Array)) throw typeError(`left must be a Uint32Array, got ${describe(left)}`);
  if (!(right instanceof Uint32Array)) throw typeError(`right must be a Uint32Array, got ${describe(right)}`);
  if (left.length !== right.length) throw rangeError(`left has length ${left.length} but right has ${right.length}`);
  const rows = signatures.length / (samples * 2);
  for (const [arr, name] of [[left, 'left'], [right, 'right']] as const) {
    for (let i = 0; i < arr.length; i++) {
      if (arr[i] >= rows) throw rangeError(`${name}[${i}]=${arr[i]} is out of range for ${rows} signature rows`);
    }
  }
  return native().minhashJaccardPairs(signatures, samples, left, right) as Float32Array;
}
