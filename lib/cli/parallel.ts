// Parallel featurization of files over worker threads. Tasks are small and
// handed out dynamically (file sizes vary wildly in node_modules); results
// are merged strictly in task order, remapping each task's local term ids
// through the shared vocabulary, so vocabulary order, rows and document
// frequencies equal a sequential pass exactly.
import { Worker } from 'node:worker_threads';
import type { TextFeaturizer, TextFeaturizerOptions } from '../text/index.js';
import type { FeaturizeTask, FeaturizeTaskResult } from './featurize-worker.js';
import type { Skip } from './sources.js';

export interface ParallelInput {
  files: string[];
  ids: string[];
  options: TextFeaturizerOptions;
  maxBytes: number;
  minTokens: number;
  threads: number;
  onFiles?: (n: number) => void;
}

export interface ParallelOutput {
  /** Ids of the rows added, in order. */
  rows: string[];
  skipped: Skip[];
  tooSmall: number;
  documents: number;
}

export async function featurizeFilesParallel(f: TextFeaturizer, p: ParallelInput): Promise<ParallelOutput> {
  const per = Math.max(1, Math.min(64, Math.ceil(p.files.length / (p.threads * 8))));
  const tasks: FeaturizeTask[] = [];
  for (let s = 0, t = 0; s < p.files.length; s += per, t++) {
    tasks.push({
      task: t,
      files: p.files.slice(s, s + per),
      ids: p.ids.slice(s, s + per),
      options: p.options,
      maxBytes: p.maxBytes,
      minTokens: p.minTokens,
    });
  }
  const out: ParallelOutput = { rows: [], skipped: [], tooSmall: 0, documents: 0 };
  const done = new Map<number, FeaturizeTaskResult>();
  let nextMerge = 0;
  const merge = (): void => {
    for (let r = done.get(nextMerge); r; r = done.get(nextMerge)) {
      done.delete(nextMerge);
      const task = tasks[nextMerge];
      f.addTokenBatch(r.batch);
      for (let i = 0; i < task.files.length; i++) {
        if (r.kinds[i] === 2) {
          out.skipped.push({ id: task.ids[i], ...r.reasons[i]! });
          continue;
        }
        out.documents++;
        if (r.kinds[i] === 1) out.tooSmall++;
        else out.rows.push(task.ids[i]);
      }
      nextMerge++;
    }
  };

  const workers: Worker[] = [];
  try {
    await new Promise<void>((resolve, reject) => {
      let next = 0;
      let finished = 0;
      if (tasks.length === 0) return resolve();
      const feed = (w: Worker): void => {
        if (next < tasks.length) w.postMessage(tasks[next++]);
      };
      for (let i = 0; i < Math.min(p.threads, tasks.length); i++) {
        const w = new Worker(new URL('./featurize-worker.js', import.meta.url));
        workers.push(w);
        w.on('error', reject);
        w.on('message', (r: FeaturizeTaskResult & { error?: string }) => {
          if (r.error) return reject(new Error(`featurizing worker failed: ${r.error}`));
          done.set(r.task, r);
          p.onFiles?.(tasks[r.task].files.length);
          feed(w);
          try {
            merge();
          } catch (e) {
            return reject(e);
          }
          if (++finished === tasks.length) resolve();
        });
        feed(w);
      }
    });
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
  return out;
}
