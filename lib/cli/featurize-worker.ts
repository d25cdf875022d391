// Worker thread of the parallel featurizer: reads and tokenizes a task's
// files and counts them against a task-local vocabulary. The main thread
// remaps local ids in task order, so the result equals a sequential pass.
import { parentPort } from 'node:worker_threads';
import { TextFeaturizer } from '../text/index.js';
import type { TextFeaturizerOptions } from '../text/index.js';
import { readDoc } from './sources.js';

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
  reasons: (string | null)[];
  terms: string[];
  indptr: Uint32Array;
  cols: Uint32Array;
  counts: Uint32Array;
}

let featurizer: TextFeaturizer | undefined;
let optionsKey = '';

function run(t: FeaturizeTask): FeaturizeTaskResult {
  const key = JSON.stringify(t.options);
  if (!featurizer || key !== optionsKey) {
    featurizer = new TextFeaturizer(t.options);
    optionsKey = key;
  }
  const local = new Map<string, number>();
  const terms: string[] = [];
  const kinds = new Uint8Array(t.files.length);
  const reasons: (string | null)[] = [];
  const indptr: number[] = [0];
  const cols: number[] = [];
  const counts: number[] = [];
  const rowCount = new Map<number, number>();
  t.files.forEach((file, i) => {
    const d = readDoc(file, t.ids[i], t.maxBytes);
    if (!('text' in d)) {
      kinds[i] = 2;
      reasons.push(d.reason);
      return;
    }
    reasons.push(null);
    const tokens = featurizer!.tokenize(d.text);
    if (tokens.length < t.minTokens) {
      kinds[i] = 1;
      return;
    }
    rowCount.clear();
    for (const tok of tokens) {
      let id = local.get(tok);
      if (id === undefined) {
        id = terms.length;
        local.set(tok, id);
        terms.push(tok);
      }
      rowCount.set(id, (rowCount.get(id) ?? 0) + 1);
    }
    for (const [id, c] of rowCount) {
      cols.push(id);
      counts.push(c);
    }
    indptr.push(cols.length);
  });
  return {
    task: t.task,
    kinds,
    reasons,
    terms,
    indptr: Uint32Array.from(indptr),
    cols: Uint32Array.from(cols),
    counts: Uint32Array.from(counts),
  };
}

parentPort?.on('message', (t: FeaturizeTask) => {
  try {
    const r = run(t);
    parentPort!.postMessage(r, [r.kinds.buffer, r.indptr.buffer, r.cols.buffer, r.counts.buffer] as ArrayBuffer[]);
  } catch (e) {
    parentPort!.postMessage({ task: t.task, error: String((e as Error).message ?? e) });
  }
});
