// Progress of long calls. One shape everywhere: `onProgress({ stage, done,
// total })`, always called on the JS thread, at most every `PROGRESS_INTERVAL_MS`
// per call plus once when a stage completes. Native engines count into a
// native ProgressCounter ([done, total, stage], held by the call like a
// CancelFlag) that a timer here reads; nothing calls into JavaScript from
// worker threads.
import { native } from './addon.js';
import { typeError } from './errors.js';
import { describe } from './validate.js';
import type { ProgressCounter } from './native-types.js';

export interface ProgressEvent {
  /** What is being done: 'hash', 'candidates', 'verify', 'join', 'search', 'cluster', 'featurize', … */
  stage: string;
  /** Units done so far in this stage (rows, pairs, queries, documents). */
  done: number;
  /** Units in this stage, when known. */
  total?: number;
}

export type OnProgress = (p: ProgressEvent) => void;

export const PROGRESS_INTERVAL_MS = 100;

export function checkOnProgress(v: unknown, name = 'onProgress'): OnProgress | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'function') throw typeError(`${name} must be a function, got ${describe(v)}`);
  return v as OnProgress;
}

/**
 * Throttled reporting for one call: `update` may be called as often as
 * convenient; the callback sees at most one event per interval and stage, and
 * always the last one of a stage (`finish`). An exception thrown by the
 * callback is rethrown from the call that triggered it.
 */
export class ProgressReporter {
  #last = -Infinity;
  #stage = '';
  #done = 0;
  #total: number | undefined;
  #emitted = true;

  constructor(private readonly cb: OnProgress | undefined) {}

  get enabled(): boolean {
    return this.cb !== undefined;
  }

  /** The stage last reported ('' before any). */
  get stage(): string {
    return this.#stage;
  }

  update(stage: string, done: number, total?: number): void {
    if (!this.cb) return;
    if (stage !== this.#stage && !this.#emitted) this.#emit();
    this.#stage = stage;
    this.#done = done;
    this.#total = total;
    this.#emitted = false;
    const now = performance.now();
    if (now - this.#last >= PROGRESS_INTERVAL_MS) this.#emit(now);
  }

  /** Reports the stage as complete (done = total when known). */
  finish(stage: string, done: number, total?: number): void {
    if (!this.cb) return;
    // The last event of a stage before it is always seen.
    if (stage !== this.#stage && !this.#emitted) this.#emit();
    if (this.#emitted && stage === this.#stage && done === this.#done && total === this.#total) return;
    this.#stage = stage;
    this.#done = done;
    this.#total = total;
    this.#emit();
  }

  #emit(now = performance.now()): void {
    this.#last = now;
    this.#emitted = true;
    this.cb!(
      this.#total === undefined ? { stage: this.#stage, done: this.#done } : { stage: this.#stage, done: this.#done, total: this.#total },
    );
  }
}

/**
 * Runs a native call that counts into `progress` ([done, total, stage]),
 * polling it on a timer while the call runs. `stages[i]` names native stage i;
 * `total`, when given, is the total of a single-stage call that the JS side
 * knows (native totals of 0 mean unknown). When the call returns, a stage
 * known to be complete is reported as such; otherwise (a chunk of a longer
 * job) the last count is reported as progress. Without a reporter the native
 * call gets no counter.
 */
export async function withNativeProgress<T>(
  reporter: ProgressReporter | undefined,
  stages: readonly string[],
  run: (progress: ProgressCounter | undefined) => Promise<T>,
  total?: number,
): Promise<T> {
  if (!reporter?.enabled) return run(undefined);
  const progress = new (native().ProgressCounter)();
  const name = (i: number): string => stages[Math.min(i, stages.length - 1)];
  let last: { stage: number; done: number; total: number | undefined } | undefined;
  const read = (): { stage: number; done: number; total: number | undefined } => {
    const [raw, nativeTotal, stage] = progress.read();
    const t = nativeTotal > 0 ? nativeTotal : stages.length === 1 ? total : undefined;
    const now = { stage, done: t === undefined ? raw : Math.min(raw, t), total: t };
    // A stage that ended between two reads is reported complete.
    if (last && now.stage !== last.stage) reporter.finish(name(last.stage), last.total ?? last.done, last.total ?? last.done);
    last = now;
    return now;
  };
  // A later chunk of the same job continues from where the last one stopped.
  if (reporter.stage !== stages[0]) reporter.update(stages[0], 0, stages.length === 1 ? total : undefined);
  const timer = setInterval(() => {
    const now = read();
    reporter.update(name(now.stage), now.done, now.total);
  }, PROGRESS_INTERVAL_MS);
  try {
    const r = await run(progress);
    const now = read();
    if (stages.length === 1 && total !== undefined) reporter.finish(stages[0], total, total);
    else if (now.total !== undefined && now.done >= now.total) reporter.finish(name(now.stage), now.done, now.total);
    else reporter.update(name(now.stage), now.done, now.total);
    return r;
  } finally {
    clearInterval(timer);
  }
}
