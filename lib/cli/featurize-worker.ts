// Worker thread of the parallel featurizer: reads and tokenizes a task's
// files and counts them against a task-local vocabulary. The main thread
// remaps local ids in task order, so the result equals a sequential pass.
import { parentPort } from 'node:worker_threads';
import { TextFeaturizer } from '../text/index.js';
import type { TextFeaturizerOptions, TokenBatch } from '../text/index.js';
import { readDoc } from './sources.js';
import type { Skip } from './sources.js';

export interface FeaturizeTask {
  task: number;
  files: string[];
  ids: string[];
  options: TextFeaturizerOptions;
  maxBytes: number;
  minTokens: number;
}

/** Per file: 0 a row, 1 too few tokens, 2 skipped (reason in `reasons`). */
export interface FeaturizeTaskResult {
  task: number;
  kinds: Uint8Array;
  reasons: (Omit<Skip, 'id'> | null)[];
  /** The readable files, counted against a task-local dictionary. */
  batch: TokenBatch;
}

let featurizer: TextFeaturizer | undefined;
let optionsKey = '';

function run(t: FeaturizeTask): FeaturizeTaskResult {
  const key = JSON.stringify(t.options);
  if (!featurizer || key !== optionsKey) {
    featurizer = new TextFeaturizer(t.options);
    optionsKey = key;
  }
  const kinds = new Uint8Array(t.files.length);
  const reasons: (Omit<Skip, 'id'> | null)[] = [];
  const texts: string[] = [];
  const read: number[] = [];
  t.files.forEach((file, i) => {
    const d = readDoc(file, t.ids[i], t.maxBytes);
    if (!('text' in d)) {
      kinds[i] = 2;
      reasons.push(d.detail === undefined ? { reason: d.reason } : { reason: d.reason, detail: d.detail });
      return;
    }
    reasons.push(null);
    texts.push(d.text);
    read.push(i);
  });
  const batch = featurizer.tokenizeBatch(texts, t.minTokens);
  read.forEach((i, k) => {
    if (batch.tokens[k] < t.minTokens) kinds[i] = 1;
  });
  return { task: t.task, kinds, reasons, batch };
}

parentPort?.on('message', (t: FeaturizeTask) => {
  try {
    const r = run(t);
    const b = r.batch;
    parentPort!.postMessage(r, [r.kinds.buffer, b.tokens.buffer, b.indptr.buffer, b.ids.buffer, b.counts.buffer] as ArrayBuffer[]);
  } catch (e) {
    parentPort!.postMessage({ task: t.task, error: String((e as Error).message ?? e) });
  }
});
