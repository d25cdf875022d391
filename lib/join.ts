// Exact set similarity join: every pair of sets whose similarity reaches a
// threshold, with no misses (PPJoin / AllPairs on the CPU, fgssjoin-style
// index-filter-verify on the GPU).
import { MAX_TYPED_LENGTH, native } from './addon.js';
import { resolveBackend, resolveOneDevice, type Backend, type BackendOption } from './backend.js';
import { withCancel } from './cancel.js';
import { checkOnProgress, ProgressReporter, withNativeProgress, type OnProgress } from './progress.js';
import {
  checkBool,
  checkEnum,
  checkInt,
  checkFraction,
  checkTuningKeys,
  isObject,
  toCsr,
  describe as describeValue,
  type CsrMatrix,
} from './validate.js';
import { rangeError, typeError } from './errors.js';
import type { JoinOpenOptions, JoinStage } from './native-types.js';
import type { JoinChunk } from './types.js';
export type { JoinChunk } from './types.js';

export type JoinMeasure = 'jaccard' | 'cosine' | 'dice' | 'overlap';
const MEASURES: readonly JoinMeasure[] = ['jaccard', 'cosine', 'dice', 'overlap'];

/** similarityJoin's `tuning`: chunk sizes and GPU choices; the pairs are the same under every setting. */
export interface JoinTuning {
  /**
   * The most pairs one streamed chunk holds (default 2^26, so a chunk's arrays
   * stay far from a typed array's limit; the GPU holds at most 2^26 whatever
   * is asked). A probe step that verifies more hands them out over several chunks.
   */
  maxChunkPairs?: number;
  /**
   * GPU: candidates in 16-byte slots even where the 8-byte ones fit (small
   * sets); slower, for tests of the wide slots. Default false.
   */
  wideSlots?: boolean;
}

export interface JoinOptions {
  /**
   * Jaccard, cosine and Dice: a ratio in (0, 1]. Overlap: an integer >= 1, the
   * least number of shared tokens (the plain overlap join).
   */
  threshold: number;
  /** Default 'jaccard'. */
  measure?: JoinMeasure;
  /** Joins `sets` (left) with these sets (right) instead of `sets` with itself. */
  against?: CsrMatrix;
  /**
   * 'auto' (default) uses the GPU only when the input is large enough for it to
   * win: at least 200,000 tokens over both collections; small joins finish
   * sooner on the CPU than the GPU's fixed costs (upload, index per block).
   */
  backend?: BackendOption;
  /** GPU index block: sets per block of the size-sorted collection (bounds GPU memory). */
  blockSize?: number;
  /** CPU algorithm; both are exact. Default 'ppjoin'. */
  algorithm?: 'ppjoin' | 'allpairs';
  /** Chunk sizes and GPU kernel choices (the pairs are the same under every choice); see docs/engines/join.md. */
  tuning?: JoinTuning;
  /** The GPU for the CUDA backend: 'all' (default: GPU 0) or one index in a list, as `devices` of the multi-GPU engines. */
  devices?: 'all' | number[];
  signal?: AbortSignal;
  /**
   * Rows probed so far: `{ stage: 'join', done, total }` (see ProgressEvent);
   * on the GPU, rows of the indexed collection whose block has been reached.
   */
  onProgress?: OnProgress;
}

/**
 * Wall-clock milliseconds per stage of one similarityJoin call, where its time
 * went: normalize (input checks and staging), prepare (token document
 * frequencies and ranks), build (sets ordered by size, mapped to ranks,
 * sorted and deduplicated; the CPU's prefix index), plan (the GPU's probe
 * windows and batches), transfer (host <-> GPU copies), kernel (waiting on GPU
 * kernels, whose own time is kernelMs), verify (the CPU's probes), output
 * (pairs gathered and sorted on the host). Diagnostics: the pairs never depend on it.
 */
export type JoinStageMs = Record<JoinStage, number>;

export interface JoinResult extends JoinChunk {
  backend: Backend;
  stageMs: JoinStageMs;
}

/** Below this many tokens (both collections), 'auto' stays on the CPU. */
export const AUTO_GPU_MIN_TOKENS = 200_000;

interface Normalized {
  sets: CsrMatrix;
  against?: CsrMatrix;
  measure: JoinMeasure;
  threshold: number;
  backend: Backend;
  native: JoinOpenOptions;
}

function normalize(sets: unknown, options: unknown): Normalized {
  const s = toCsr(sets, 'sets', { values: 'ignore' });
  if (!isObject(options)) throw typeError(`options must be an object with a threshold, got ${describeValue(options)}`);
  const o = options as Partial<JoinOptions>;
  const measure = o.measure === undefined ? 'jaccard' : checkEnum(o.measure, 'options.measure', MEASURES);
  const threshold =
    measure === 'overlap' ? checkInt(o.threshold, 'options.threshold', 1, 0xffffffff) : checkFraction(o.threshold, 'options.threshold');
  const against = o.against === undefined ? undefined : toCsr(o.against, 'options.against', { values: 'ignore' });
  const algorithm = o.algorithm === undefined ? 'ppjoin' : checkEnum(o.algorithm, 'options.algorithm', ['ppjoin', 'allpairs'] as const);
  const blockSize = o.blockSize === undefined ? 0 : checkInt(o.blockSize, 'options.blockSize', 1, 0x7fffffff);
  const tuning = checkTuningKeys(o.tuning, 'options.tuning', ['maxChunkPairs', 'wideSlots']);
  const maxChunkPairs = checkInt(tuning.maxChunkPairs ?? 2 ** 26, 'options.tuning.maxChunkPairs', 1, 0xffffffff);
  const wideSlots = checkBool(tuning.wideSlots ?? false, 'options.tuning.wideSlots');
  const requested = o.backend ?? 'auto';
  let backend = resolveBackend(requested, 'options.backend');
  const forced = process.env.CUSIM_BACKEND;
  if (backend === 'cuda' && requested === 'auto' && (forced === undefined || forced === '' || forced === 'auto')) {
    const tokens =
      (s.rows ? s.indptr[s.rows] - s.indptr[0] : 0) + (against && against.rows ? against.indptr[against.rows] - against.indptr[0] : 0);
    if (tokens < AUTO_GPU_MIN_TOKENS) backend = 'cpu';
  }
  const devices = resolveOneDevice(o, 'similarityJoin');
  return {
    sets: s,
    against,
    measure,
    threshold,
    backend,
    native: { measure: MEASURES.indexOf(measure), threshold, backend, algorithm, blockSize, maxChunkPairs, wideSlots, devices },
  };
}

/**
 * Streams the join's pairs in chunks, so outputs larger than memory can be
 * consumed as they come. Each chunk is sorted by (left, right); chunks are not
 * ordered among themselves. Token ids are deduplicated per row; empty sets
 * never match anything (not even other empty sets).
 */
export async function* similarityJoinStream(sets: CsrMatrix, options: JoinOptions): AsyncGenerator<JoinChunk & { backend: Backend }> {
  const n = normalize(sets, options);
  yield* chunksOf(n, options.signal, new ProgressReporter(checkOnProgress(options.onProgress, 'options.onProgress')));
}

const now = (): number => performance.now();

// The join's chunks. The inputs are staged (copied) by open(), which runs
// before the first await: the caller's arrays are not read afterwards.
async function* chunksOf(
  n: Normalized,
  signal: AbortSignal | undefined,
  reporter: ProgressReporter,
  onStages?: (ms: JoinStageMs) => void,
): AsyncGenerator<JoinChunk & { backend: Backend }> {
  const handle = new (native().JoinHandle)();
  try {
    await withCancel(signal, (cancel) => handle.open(n.sets, n.against, { ...n.native, cancel }));
    for (;;) {
      const c = await withCancel(signal, (cancel) =>
        withNativeProgress(reporter, ['join'], (progress) => handle.next({ cancel, progress })),
      );
      if (c === null) {
        const rows = (n.against ?? n.sets).rows;
        reporter.finish('join', rows, rows);
        onStages?.(handle.stages());
        return;
      }
      yield { ...c, backend: n.backend };
    }
  } finally {
    handle.dispose();
  }
}

/** All pairs at or above the threshold, sorted by (left, right). See similarityJoinStream. */
export async function similarityJoin(sets: CsrMatrix, options: JoinOptions): Promise<JoinResult> {
  let t0 = now();
  const n = normalize(sets, options);
  const normalizeMs = now() - t0;
  const backend = n.backend;
  const chunks: JoinChunk[] = [];
  let total = 0;
  let candidates = 0;
  let kernelMs = 0;
  let stageMs: JoinStageMs | undefined;
  const reporter = new ProgressReporter(checkOnProgress(options.onProgress, 'options.onProgress'));
  let outputMs = 0;
  for await (const c of chunksOf(n, options.signal, reporter, (ms) => (stageMs = ms))) {
    t0 = now();
    chunks.push(c);
    total += c.left.length;
    if (total > MAX_TYPED_LENGTH) {
      throw rangeError(
        `the join has more than ${MAX_TYPED_LENGTH} pairs, more than one typed array holds; consume them with similarityJoinStream`,
      );
    }
    candidates += c.candidates;
    kernelMs += c.kernelMs;
    outputMs += now() - t0;
  }
  t0 = now();
  const stages = (): JoinStageMs => {
    const ms = { ...stageMs! };
    ms.normalize += normalizeMs;
    ms.output += outputMs + (now() - t0);
    return ms;
  };
  // One chunk (the usual case on the GPU, which gathers up to 2^26 pairs per
  // chunk) is already sorted: hand its arrays over without a copy.
  const withPairs = chunks.filter((c) => c.left.length > 0);
  if (withPairs.length === 1) {
    const [c] = withPairs;
    return { left: c.left, right: c.right, overlap: c.overlap, similarity: c.similarity, candidates, kernelMs, backend, stageMs: stages() };
  }
  const out: JoinResult = {
    left: new Uint32Array(total),
    right: new Uint32Array(total),
    overlap: new Uint32Array(total),
    similarity: new Float32Array(total),
    candidates,
    kernelMs,
    backend,
    stageMs: stageMs!,
  };
  let at = 0;
  for (const c of chunks) {
    out.left.set(c.left, at);
    out.right.set(c.right, at);
    out.overlap.set(c.overlap, at);
    out.similarity.set(c.similarity, at);
    at += c.left.length;
  }
  if (chunks.length > 1 && total > 1) await native().joinSortPairs(out.left, out.right, out.overlap, out.similarity);
  out.stageMs = stages();
  return out;
}
