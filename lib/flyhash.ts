// FlyHash (Dasgupta, Stevens & Navlakha, Science 2017): a sparse binary random
// projection from d to m dimensions followed by winner-take-all, keeping the k
// largest activations as a sparse binary code.
//
// Projection contract: output j draws its `connections` distinct inputs from
// Philox4x32-10 (cuRAND's stream) at (seed, subsequence j, offset 0) by
// Floyd's sampling with Lemire's unbiased bounded draws, sorted ascending
// (native/flyhash.h spells it out). The table is built once on the host, so the
// same seed gives the same code on CPU, GPU and every machine.
//
// Semantics: a_j = sum of x[i] over output j's inputs, in float, in ascending
// input order. Exactly k winners: all a_j above the k-th largest value v, then
// the lowest-index a_j equal to v. CPU and GPU are bit-identical.
//
// Speed: when every value of X is an integer in [0, 255] (raw pixels, SIFT
// features) and connections * 255 < 2^24, every activation is an exact
// integer, so the GPU computes them on int8 tensor cores (kernel 'mma-u8').
// Other values take the same kernels after the GPU quantizes each row to
// bytes (kernel 'mma-q8'): a proven error bound leaves only the outputs near
// the k-th largest undecided, and their exact float sums decide them, so the
// result is still bit for bit the CPU's; 8-bit data is faster
// (docs/perf/flyhash.md has the numbers). 'mean100' makes values fractional. 8-bit
// data may also come as a Uint8Array (ByteMatrix): it reaches the addon as
// is, a quarter of the bytes of Float32, and hashes the same as its values.
// Float32 X is checked (finite, bytes or not) while it is staged for the GPU,
// batch by batch: X that starts with bytes and later holds other values runs
// its first batches as bytes and the rest as floats (kernel 'mma-u8+mma-q8').
//
// Similarity: codes have exactly k ones, so Hamming distance = 2(k - overlap)
// and ranking by Hamming distance (e.g. with HammingIndex) is the same as
// ranking by overlap.
import { native } from './addon.js';
import type { FlyHashNative } from './native-types.js';
import { resolveBackend, resolveOneDevice, type Backend, type BackendOption } from './backend.js';
import { withCancel } from './cancel.js';
import { rangeError, typeError } from './errors.js';
import { NativeResource } from './resource.js';
import {
  checkBool,
  checkChoice,
  checkEnum,
  checkInt,
  checkTuning,
  checkTuningKeys,
  isObject,
  toDense,
  describe,
  type DenseMatrix,
  type Tuning,
  checkTyped,
  asTyped,
} from './validate.js';
import type { FlyHashTuning } from './types.js';
export type { FlyHashTuning } from './types.js';

export type FlyHashNormalize = 'none' | 'mean100';

/** Row-major 8-bit matrix (pixels, SIFT features): hashed as its values. */
export interface ByteMatrix {
  data: Uint8Array | Uint8ClampedArray;
  rows: number;
  cols: number;
}

export interface FlyHashOptions {
  /** Input dimension d. */
  inputDim: number;
  /** Code length m; default 20 * winners. */
  hashLength?: number;
  /** Inputs per output (s); default 10% of inputDim (at least 1). */
  connections?: number;
  /** Winners per row (k); default 16 (clamped to hashLength). */
  winners?: number;
  /** Seed of the projection; default 1. */
  seed?: number;
  /** The backend, fixed for the object's life with `devices` and `tuning`: the hasher is made once, here. */
  backend?: BackendOption;
  /** The GPU for the CUDA backend: 'all' (default: GPU 0) or one index in a list, as `devices` of the multi-GPU engines. */
  devices?: 'all' | number[];
  /**
   * 'mean100' reproduces the reference preprocessing: shift the data so its
   * minimum is 0 (when negative), then scale each row to mean 100.
   */
  normalize?: FlyHashNormalize;
  /** GPU kernel choices (the codes are the same under every choice); see FlyHashTuning. */
  tuning?: FlyHashTuning;
}

const FLYHASH_KERNELS = ['auto', 'mma', 'fused', 'tile-large'] as const;

function checkFlyHashTuning(v: unknown): FlyHashTuning & Required<Tuning> {
  const t = checkTuningKeys(v, 'tuning', [
    'tensorCores',
    'kernel',
    'maxRowsPerBlock',
    'stageProjection',
    'exactRows',
    'batchRows',
    'forceFallback',
  ]);
  const out: FlyHashTuning & Required<Tuning> = checkTuning({ tensorCores: t.tensorCores });
  if (t.kernel !== undefined) out.kernel = checkEnum(t.kernel, 'tuning.kernel', FLYHASH_KERNELS);
  if (t.maxRowsPerBlock !== undefined) out.maxRowsPerBlock = checkChoice(t.maxRowsPerBlock, 'tuning.maxRowsPerBlock', [1, 2, 4] as const);
  if (t.stageProjection !== undefined) out.stageProjection = checkBool(t.stageProjection, 'tuning.stageProjection');
  if (t.exactRows !== undefined) out.exactRows = checkChoice(t.exactRows, 'tuning.exactRows', [0, 1, 2, 4, 8] as const);
  if (t.batchRows !== undefined) out.batchRows = checkInt(t.batchRows, 'tuning.batchRows', 1);
  if (t.forceFallback !== undefined) out.forceFallback = checkBool(t.forceFallback, 'tuning.forceFallback');
  return out;
}

export interface FlyHashResult {
  /** bits: n * ceil(m/32) packed words; indices: n * k ascending winners. */
  data: Uint32Array;
  rows: number;
  output: 'bits' | 'indices';
  /** Bits per code (m) for 'bits', winners per row (k) for 'indices'. */
  width: number;
  backend: Backend;
  /** GPU time (ms) during which some batch's kernels ran (batches on two streams overlap; counted once); 0 on the CPU. */
  kernelMs: number;
  transferMs: number;
  /** GPU kernel family that ran ('mma-u8', 'mma-q8', 'tile-large', 'fused', 'two-pass'; 'a+b' when a call switched from a to b part way); '' on the CPU. */
  kernel: string;
}

export class FlyHash extends NativeResource<FlyHashNative> {
  readonly inputDim: number;
  readonly hashLength: number;
  readonly connections: number;
  readonly winners: number;
  readonly seed: number;
  readonly normalize: FlyHashNormalize;
  readonly backend: Backend;
  readonly tuning: FlyHashTuning & Required<Tuning>;

  constructor(options: FlyHashOptions) {
    if (!isObject(options)) throw typeError(`options must be an object, got ${describe(options)}`);
    const inputDim = checkInt(options.inputDim, 'inputDim', 1, 1 << 30);
    const winners0 = options.winners === undefined ? 16 : checkInt(options.winners, 'winners', 1, 1 << 30);
    const hashLength = options.hashLength === undefined ? 20 * winners0 : checkInt(options.hashLength, 'hashLength', 1, 1 << 30);
    const winners = options.winners === undefined ? Math.min(winners0, hashLength) : winners0;
    if (winners > hashLength) throw rangeError(`winners (${winners}) must be <= hashLength (${hashLength})`);
    const connections =
      options.connections === undefined ? Math.max(1, Math.round(inputDim / 10)) : checkInt(options.connections, 'connections', 1, 1 << 30);
    if (connections > inputDim) throw rangeError(`connections (${connections}) must be <= inputDim (${inputDim})`);
    // The projection table (built at first use) holds hashLength * connections entries.
    if (hashLength * connections > 2 ** 30)
      throw rangeError(`hashLength * connections = ${hashLength * connections} exceeds 2^30, the projection table's bound`);
    const seed = options.seed === undefined ? 1 : checkInt(options.seed, 'seed');
    const normalize = options.normalize === undefined ? 'none' : checkEnum(options.normalize, 'normalize', ['none', 'mean100'] as const);
    const devices = resolveOneDevice(options, 'FlyHash');
    const tuning = checkFlyHashTuning(options.tuning);
    const backend = resolveBackend(options.backend);
    super(new (native().FlyHash)({ inputDim, hashLength, connections, winners, seed, backend, devices, tuning }), 'FlyHash');
    this.inputDim = inputDim;
    this.hashLength = hashLength;
    this.connections = connections;
    this.winners = winners;
    this.seed = seed;
    this.normalize = normalize;
    this.backend = backend;
    this.tuning = tuning;
  }

  /** Words per packed code: ceil(hashLength / 32). */
  get wordsPerCode(): number {
    return Math.ceil(this.hashLength / 32);
  }

  /** hashLength x connections input indices, ascending per output. */
  projection(): Uint32Array {
    return this.handle.projection();
  }

  async hash(
    X: DenseMatrix | ByteMatrix,
    options: {
      output?: 'bits' | 'indices';
      signal?: AbortSignal;
    } = {},
  ): Promise<FlyHashResult> {
    const h = this.handle;
    if (!isObject(options)) throw typeError(`options must be an object, got ${describe(options)}`);
    // The backend is made once, at construction; the old per-call options say where they went.
    for (const moved of ['backend', 'devices'] as const) {
      if (moved in options) throw typeError(`hash options.${moved} moved to the constructor: new FlyHash({ ..., ${moved} })`);
    }
    const output = options.output === undefined ? 'bits' : checkEnum(options.output, 'output', ['bits', 'indices'] as const);
    let x: DenseMatrix | { data: Uint8Array; rows: number; cols: number };
    const given = isObject(X) ? X.data : undefined;
    const raw = asTyped(given, Uint8Array, 'X.data') ?? asTyped(given, Uint8ClampedArray, 'X.data');
    if (raw && this.normalize === 'none') {
      // Bytes go to the addon in place (a Uint8ClampedArray as a view of its buffer).
      const rows = checkInt((X as ByteMatrix).rows, 'X.rows');
      const cols = checkInt((X as ByteMatrix).cols, 'X.cols');
      if (raw.length !== rows * cols) throw rangeError(`X.data has length ${raw.length} but rows * cols = ${rows * cols}`);
      x = { data: new Uint8Array(raw.buffer, raw.byteOffset, raw.length), rows, cols };
    } else {
      x = toDense(raw ? { ...(X as ByteMatrix), data: Float32Array.from(raw) } : X, 'X');
    }
    if (x.cols !== this.inputDim) throw rangeError(`X.cols is ${x.cols} but this FlyHash was built for inputDim ${this.inputDim}`);
    if (this.normalize === 'mean100') x = mean100(x as DenseMatrix);
    const backend = this.backend;
    return withCancel(options.signal, async (cancel) => {
      const r = await h.hash(x, { output, cancel });
      return {
        data: r.data,
        rows: x.rows,
        output,
        width: output === 'bits' ? this.hashLength : this.winners,
        backend,
        kernelMs: r.kernelMs,
        transferMs: r.transferMs,
        kernel: r.kernel,
      };
    });
  }

  /**
   * Overlap (shared winners) and Hamming distance of two codes from hash():
   * packed bits (ceil(m/32) words) or index lists (k ascending indices). The
   * format follows from the length; pass it when both lengths coincide.
   */
  similarity(a: Uint32Array, b: Uint32Array, format?: 'bits' | 'indices'): { overlap: number; hamming: number; jaccard: number } {
    a = checkTyped(a, Uint32Array, 'a');
    b = checkTyped(b, Uint32Array, 'b');
    if (a.length !== b.length) throw rangeError(`a has length ${a.length} but b has length ${b.length}`);
    let overlap = 0;
    let ones = 0;
    if (format !== undefined) checkEnum(format, 'format', ['bits', 'indices'] as const);
    if (format === undefined && this.wordsPerCode === this.winners && a.length === this.winners) {
      throw typeError(`format is required: ${a.length} is both the word count and the winner count`);
    }
    const f = format ?? (a.length === this.wordsPerCode ? 'bits' : 'indices');
    if (f === 'bits' && a.length === this.wordsPerCode) {
      for (let i = 0; i < a.length; i++) {
        overlap += popcount(a[i] & b[i]);
        ones += popcount(a[i]) + popcount(b[i]);
      }
    } else if (f === 'indices' && a.length === this.winners) {
      let i = 0;
      let j = 0;
      while (i < a.length && j < b.length) {
        if (a[i] === b[j]) {
          overlap++;
          i++;
          j++;
        } else if (a[i] < b[j]) i++;
        else j++;
      }
      ones = a.length + b.length;
    } else {
      throw rangeError(`codes must have ${this.wordsPerCode} words (bits) or ${this.winners} indices, got length ${a.length}`);
    }
    const hamming = ones - 2 * overlap;
    const union = ones - overlap;
    return { overlap, hamming, jaccard: union === 0 ? 1 : overlap / union };
  }
}

function popcount(x: number): number {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return (Math.imul((x + (x >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24) & 0xff;
}

// The reference preprocessing. Non-finite values are reported here (the
// native check would only see what this produced).
function mean100(x: DenseMatrix): DenseMatrix {
  const { data, rows, cols } = x;
  let min = Infinity;
  for (let i = 0; i < data.length; i++) {
    const v = data[i];
    if (!Number.isFinite(v)) {
      throw rangeError(`X.data[${i}] (row ${Math.floor(i / cols)}, column ${i % cols}) is ${v}; the input must be finite`);
    }
    if (v < min) min = v;
  }
  const shift = min < 0 ? -min : 0;
  const out = new Float32Array(data.length);
  for (let r = 0; r < rows; r++) {
    let sum = 0;
    for (let c = 0; c < cols; c++) sum += data[r * cols + c] + shift;
    const mean = sum / cols;
    const scale = mean > 0 ? 100 / mean : 0;
    for (let c = 0; c < cols; c++) out[r * cols + c] = (data[r * cols + c] + shift) * scale;
  }
  return { data: out, rows, cols };
}
