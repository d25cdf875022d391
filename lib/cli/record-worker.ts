// One block of line-based records (JSONL or lines) to hashed feature rows:
// run by the worker threads of record-blocks.ts, and on the main thread for
// an input that fits in one block. JSON parsing, decoding and the JavaScript
// tokenizer (documents with non-ASCII words) are the serial cost of the main
// job; blocks spread them over cores.
import { parentPort, workerData } from 'node:worker_threads';
import { TextFeaturizer } from '../text/index.js';
import type { HashedRows, TextFeaturizerOptions } from '../text/index.js';
import type { IdList } from '../dedup/ids.js';
import type { BlockBandKeys } from '../dedup/options.js';
import { CliError } from './errors.js';
import { blockRecords } from './records.js';
import type { Doc, RecordOptions } from './records.js';

export const RECORD_WORKER = 'cusim-record-worker';

export interface BlockTask {
  task: number;
  /** Whole lines (the last block may lack its final line break). */
  block: Uint8Array;
  /** Lines before the block. */
  firstLine: number;
  /** 'csv' and 'tsv' blocks (whole records) are read by the native reader only (record-native.ts). */
  format: 'lines' | 'jsonl' | 'csv' | 'tsv';
  /** CSV/TSV: the text and id columns (0-based; id -1: none). */
  table?: { text: number; id: number };
  records: Omit<RecordOptions, 'onBytes'>;
  features: TextFeaturizerOptions;
  minTokens: number;
  bits: number;
  /** Whether the rows need their values (token counts); default true. */
  values?: boolean;
}

/** Rows of a block: HashedRows, values absent where BlockTask.values is false. */
export type BlockRows = Omit<HashedRows, 'values'> & { values?: Float32Array };

export interface BlockResult {
  task: number;
  /** Rows of the block's documents with at least minTokens tokens. */
  rows: BlockRows;
  /** Their ids, in order. */
  ids: IdList;
  /** Their line numbers (1-based, RecordOptions.lineOffset added), which numeric ids are built from. */
  lines: Float64Array;
  documents: number;
  tooSmall: number;
  /** The rows' band keys, where the reader was asked for them (RecordBlockOptions.sketch) and made them. */
  bandKeys?: BlockBandKeys;
}

/** A block's result as a worker posts it: ids as strings (functions do not cross threads). */
export interface BlockMessage extends Omit<BlockResult, 'ids' | 'bandKeys'> {
  ids: string[];
}

export interface BlockFailure {
  task: number;
  error: { message: string; fix?: string; exitCode?: number; cli: boolean };
}

export async function featurizeBlock(t: BlockTask, feat: TextFeaturizer): Promise<BlockMessage> {
  return featurizeDocs(t, blockRecords(t.block, t.firstLine, t.format as 'lines' | 'jsonl', t.records), feat);
}

/** Documents (with their lines) featurized to a block's rows, ids and counts. */
export async function featurizeDocs(
  t: Pick<BlockTask, 'task' | 'minTokens' | 'bits'>,
  docs: Doc[],
  feat: TextFeaturizer,
): Promise<BlockMessage> {
  const rows = await feat.hashedRows(
    docs.map((d) => d.text),
    { minTokens: t.minTokens, bits: t.bits },
  );
  const ids: string[] = [];
  const lines = new Float64Array(docs.length);
  let tooSmall = 0;
  docs.forEach((d, i) => {
    if (rows.tokens[i] < t.minTokens) tooSmall++;
    else lines[ids.push(d.id) - 1] = d.line!;
  });
  return { task: t.task, rows, ids, lines: lines.slice(0, ids.length), documents: docs.length, tooSmall };
}

export function failure(task: number, e: unknown): BlockFailure {
  const cli = e instanceof CliError;
  return {
    task,
    error: { message: String((e as Error)?.message ?? e), cli, ...(cli ? { fix: e.fix, exitCode: e.exitCode } : {}) },
  };
}

/** Texts to featurize as hashedRows() does (the native reader's documents left to JavaScript). */
export interface TextsTask {
  task: number;
  texts: string[];
  features: TextFeaturizerOptions;
  minTokens: number;
  bits: number;
}

export interface TextsResult {
  task: number;
  rows: HashedRows;
}

if (parentPort && workerData === RECORD_WORKER) {
  const port = parentPort;
  let feat: TextFeaturizer | undefined;
  let key = '';
  port.on('message', (t: BlockTask | TextsTask) => {
    const k = JSON.stringify(t.features);
    if (!feat || k !== key) {
      feat = new TextFeaturizer(t.features);
      key = k;
    }
    // The rows are copied, not transferred: the addon's result arrays are
    // external memory that this thread's collector frees.
    const work: Promise<BlockMessage | TextsResult> =
      'texts' in t
        ? feat.hashedRows(t.texts, { minTokens: t.minTokens, bits: t.bits }).then((rows) => ({ task: t.task, rows }))
        : featurizeBlock(t, feat);
    work.then(
      (r) => port.postMessage(r),
      (e: unknown) => port.postMessage(failure(t.task, e)),
    );
  });
}
