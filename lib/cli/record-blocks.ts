// Line-based records (JSONL, lines) read in blocks of whole lines. Where the
// addon has the native record reader (record-native.ts), each block is
// parsed, tokenized and hashed in C++ on the thread pool, a few blocks in
// flight; otherwise each block is parsed and featurized to hashed rows on a
// worker thread (record-worker.ts). Blocks are merged strictly in order, so
// rows, ids and the first error reported are those of a sequential pass;
// memory holds at most two blocks per worker. Input that fits in one block
// is done on this thread, with no workers started.
import { createReadStream } from 'node:fs';
import { open } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { Worker } from 'node:worker_threads';
import { TextFeaturizer } from '../text/index.js';
import type { HashedRows, TextFeaturizerOptions } from '../text/index.js';
import { CliError } from './errors.js';
import { escapeText } from './escape.js';
import { idList } from '../dedup/ids.js';
import { nativeBlockResult, nativeRecordReader, readNativeBlock } from './record-native.js';
import type { HashTexts, RecordReader } from './record-native.js';
import type { SketchParams, TokenHasherNative } from '../native-types.js';
import { RECORD_WORKER, featurizeBlock, featurizeDocs } from './record-worker.js';
import type { BlockFailure, BlockMessage, BlockResult, BlockTask, TextsResult, TextsTask } from './record-worker.js';
import { headerColumns, lineFormat, readRecords, tableColumns, tableSlice, tooLongError } from './records.js';
import type { Doc, RecordOptions } from './records.js';

export interface RecordBlockOptions {
  records: RecordOptions;
  features: TextFeaturizerOptions;
  minTokens: number;
  bits: number;
  /** Whether the rows need their values (token counts); default true. Classic MinHash reads column ids only. */
  values?: boolean;
  threads: number;
  /** Bytes per block (default 8 MiB). */
  blockBytes?: number;
  /**
   * 'native' (default): the native record reader where the addon has it,
   * else the JavaScript one; 'js': always the JavaScript reader (the
   * definition, which tests compare against).
   */
  reader?: RecordReader;
  /**
   * GPUs that split and hash the native reader's texts (blocks dealt round
   * robin, one hash call per block): the rows are the same as the CPU
   * tokenizer's. Unset or empty: the tokenizer, on the thread pool.
   */
  tokenDevices?: readonly number[];
  /**
   * With tokenDevices: each block's rows come with their classic MinHash band
   * keys under these parameters (BlockResult.bandKeys), made by the GPU that
   * hashed the tokens, where the hashes are. Blocks read another way (the
   * JavaScript reader, entries left to JavaScript) come without.
   */
  sketch?: SketchParams;
  /** Told which reader runs: 'native (simdjson 3.0.1)' or 'JavaScript (why)'. */
  onReader?: (description: string) => void;
  signal?: AbortSignal;
  /** Each block's rows, in input order; reading waits for a returned promise (backpressure). */
  onBlock: (r: BlockResult) => void | Promise<void>;
}

const NEWLINE = 0x0a;
const QUOTE = 0x22;
/** Bytes simdjson may read past a block (native records::Padding()): each block's buffer has them. */
const PADDING = 64;

function countLines(block: Uint8Array): number {
  let n = 0;
  for (let i = block.indexOf(NEWLINE); i >= 0; i = block.indexOf(NEWLINE, i + 1)) n++;
  return n;
}

/** The format of 'auto' input from its first non-blank line in `block`, if there is one. */
function detect(block: Uint8Array, format: RecordOptions['format']): 'lines' | 'jsonl' | undefined {
  if (format === 'lines' || format === 'jsonl') return format;
  const decoder = new TextDecoder('utf-8');
  for (let start = 0; start < block.length;) {
    let nl = block.indexOf(NEWLINE, start);
    if (nl < 0) nl = block.length;
    // A blank line is short; a long first line is decoded only as far as its start.
    const l = decoder.decode(block.subarray(start, Math.min(nl, start + 4096)));
    if (l.trim() !== '') return lineFormat(format, l);
    start = nl + 1;
  }
  return undefined;
}

/**
 * CSV/TSV block ends in view (which starts at a record start): after the
 * last line feed outside quotes at or before `limit` (0: none), and after
 * the first one past it (-1: none). Quote parity is exact for any input
 * csv-parse accepts (a doubled quote toggles twice); for any other, the
 * records cut here are its to reject. A lone \r (also a record end) is not
 * cut at: input with only those is gathered whole.
 */
export function tableEnds(view: Uint8Array, limit: number, quoted: boolean): { last: number; next: number } {
  const n = view.length;
  let last = 0;
  let inQuotes = false;
  // The first line feed at or after limit, found once.
  let after = -2;
  for (let pos = 0; pos < n;) {
    const q = quoted ? view.indexOf(QUOTE, pos) : -1;
    const stop = q < 0 ? n : q;
    if (!inQuotes) {
      // (A negative offset would count from the end.)
      if (Math.min(stop, limit) > pos) {
        const l = view.lastIndexOf(NEWLINE, Math.min(stop, limit) - 1);
        if (l >= pos) last = l + 1;
      }
      if (stop > limit) {
        if (after === -2 || (after >= 0 && after < pos)) after = view.indexOf(NEWLINE, Math.max(pos, limit));
        if (after < 0) return { last, next: -1 };
        if (after < stop) return { last, next: after + 1 };
      }
    }
    if (q < 0) break;
    inQuotes = !inQuotes;
    pos = q + 1;
  }
  return { last, next: -1 };
}

function rethrow(f: BlockFailure): never {
  const e = f.error;
  if (e.cli) throw new CliError(e.message, e.fix, e.exitCode);
  throw new Error(`a record worker failed: ${e.message}`);
}

const fromMessage = (r: BlockMessage): BlockResult => ({ ...r, ids: idList(r.ids) });

const workerUrl = (): URL => new URL('./record-worker.js', import.meta.url);

/**
 * Worker threads that featurize the texts the native reader leaves to
 * JavaScript (non-ASCII words or q-grams), started on first use, so that
 * this thread is not what bounds a corpus with many such documents.
 */
function textWorkers(threads: number, features: TextFeaturizerOptions): { hash: HashTexts; close: () => Promise<void> } {
  const slots: { w: Worker; pending: number }[] = [];
  const waiting = new Map<number, { resolve: (r: HashedRows) => void; reject: (e: unknown) => void }>();
  let next = 0;
  let closing = false;
  const fail = (e: unknown): void => {
    for (const p of waiting.values()) p.reject(e);
    waiting.clear();
  };
  const start = (): void => {
    for (let i = 0; i < threads; i++) {
      const slot = { w: new Worker(workerUrl(), { workerData: RECORD_WORKER }), pending: 0 };
      slot.w.on('message', (r: TextsResult | BlockFailure) => {
        slot.pending--;
        const p = waiting.get(r.task);
        waiting.delete(r.task);
        if ('error' in r) p?.reject(new Error(`a record worker failed: ${r.error.message}`));
        else p?.resolve(r.rows);
      });
      slot.w.on('error', fail);
      slot.w.on('exit', (code) => {
        if (!closing) fail(new Error(`a record worker stopped (exit code ${code})`));
      });
      slots.push(slot);
    }
  };
  return {
    hash: (texts, minTokens, bits) => {
      if (slots.length === 0) start();
      const slot = slots.reduce((a, b) => (b.pending < a.pending ? b : a));
      slot.pending++;
      const task: TextsTask = { task: next++, texts, features, minTokens, bits };
      return new Promise<HashedRows>((resolve, reject) => {
        waiting.set(task.task, { resolve, reject });
        slot.w.postMessage(task);
      });
    },
    close: async () => {
      closing = true;
      await Promise.all(slots.map((s) => s.w.terminate()));
    },
  };
}

/** Fewer texts than this are featurized on this thread (posting them would cost more). */
const WORKER_TEXTS = 64;

/** Where records come from: a stream (stdin), or a file, read straight into the blocks. */
export type RecordInput = Readable | { file: string };

/** A file stream's chunk (createReadStream's highWaterMark), which csv-parse parses at once. */
const TABLE_CHUNK = 64 << 10;

/** Bytes read at a time past a block's end, while a line longer than a block is gathered. */
const LONG_LINE_READ = 1 << 20;

/** CSV/TSV read by csv-parse (readRecords), featurized about blockBytes of text at a time on this thread. */
async function jsTableBlocks(input: RecordInput, o: RecordBlockOptions, feat: TextFeaturizer): Promise<void> {
  const blockBytes = o.blockBytes ?? 8 << 20;
  let docs: Doc[] = [];
  let chars = 0;
  let task = 0;
  const flush = async (): Promise<void> => {
    if (docs.length) await o.onBlock(fromMessage(await featurizeDocs({ task: task++, minTokens: o.minTokens, bits: o.bits }, docs, feat)));
    docs = [];
    chars = 0;
  };
  const stream = 'file' in input ? createReadStream(input.file) : input;
  for await (const d of readRecords(stream, o.records)) {
    if (o.signal?.aborted) return;
    docs.push(d);
    if ((chars += d.text.length) >= blockBytes) await flush();
  }
  await flush();
}

/** Reads `input` to its end, passing each block's featurized rows to `o.onBlock` in order. */
export async function readRecordBlocks(input: RecordInput, o: RecordBlockOptions): Promise<void> {
  const blockBytes = o.blockBytes ?? 8 << 20;
  const { onBytes, ...records } = o.records;
  const feat = new TextFeaturizer(o.features);
  const { reader, why } = o.reader === 'js' ? { reader: undefined, why: 'reader: js' } : nativeRecordReader(feat, records);
  // Three token hashers per GPU (a hasher runs one block at a time, on its
  // own stream): one block's upload and host copies overlap others' kernels
  // and downloads. Each block's texts go up once and are split, hashed and
  // sorted there.
  const gpus = reader ? (o.tokenDevices ?? []) : [];
  const slots = gpus.flatMap((d) => [d, d, d]);
  const first = slots.length ? feat.nativeTokenHasher(slots[0]) : undefined;
  // The others are made when first dealt a block: each is a stream and
  // buffers on its GPU (tens of ms on this thread), made while the blocks
  // before it are read rather than all before the first.
  const hashers: (TokenHasherNative | undefined)[] = first ? [first, ...slots.slice(1).map(() => undefined)] : [];
  const hasherFor = (k: number): TokenHasherNative => (hashers[k % hashers.length] ??= feat.nativeTokenHasher(slots[k % hashers.length])!);
  const where = hashers.length ? `, tokens hashed on ${gpus.length === 1 ? 'the GPU' : `${gpus.length} GPUs`}` : '';
  o.onReader?.(reader ? `native (${why}${where})` : `JavaScript (${why})`);
  let dealt = 0;
  // Native blocks in flight: each runs on every core, so a few keep the pool
  // busy while the next block is read; with token hashers, one more per
  // hasher, so each has a block of its own while others are parsed.
  const inFlight: Promise<BlockResult>[] = [];
  const inFlightMax = 2 + hashers.length;
  const textPool = reader && o.threads > 1 ? textWorkers(o.threads, o.features) : undefined;
  const hashTexts: HashTexts = (texts, minTokens, bits) =>
    textPool && texts.length >= WORKER_TEXTS ? textPool.hash(texts, minTokens, bits) : feat.hashedRows(texts, { minTokens, bits });
  const nativeDrain = async (limit: number): Promise<void> => {
    while (inFlight.length > limit) await o.onBlock(await inFlight.shift()!);
  };
  const table = records.format === 'csv' || records.format === 'tsv';
  const quoted = records.format === 'csv';
  // CSV/TSV without the native reader: csv-parse's records (readRecords), featurized in blocks here.
  if (table && !reader) return jsTableBlocks(input, o, feat);
  // CSV/TSV: the text and id columns, known before the first block unless a header row names them.
  let columns: { text: number; id: number } | undefined;
  if (table) {
    const c = tableColumns(o.records);
    if (c.names) columns = { text: c.ti, id: c.ii };
  }
  let tableStarted = false;
  // CSV/TSV gathered past maxRecordBytes with no record end: bytes last given to csv-parse to judge.
  let judged = 0;
  let format: 'lines' | 'jsonl' | 'csv' | 'tsv' | undefined = table ? (records.format as 'csv' | 'tsv') : undefined;
  // Line numbers go on from lineOffset (a range of a longer input), as readRecords numbers them.
  let lines = records.lineOffset ?? 0;
  // With the native reader, the lines before the next block: each block's
  // count comes back from its native read, so no block is scanned for line
  // breaks on this thread (each block's lines are numbered once the counts
  // before it are in).
  let lineBase: Promise<number> | undefined = reader ? Promise.resolve(lines) : undefined;
  const linesSoFar = async (): Promise<number> => (lineBase ? await lineBase : lines);
  const tasks: BlockTask[] = [];
  const done = new Map<number, BlockMessage | BlockFailure>();
  let merged = 0;
  const workers: Worker[] = [];
  const idle: Worker[] = [];
  const queue: BlockTask[] = [];
  let broken: unknown;
  let closing = false;
  let wake: (() => void) | undefined;
  const notify = (): void => {
    const w = wake;
    wake = undefined;
    w?.();
  };

  const merge = async (): Promise<void> => {
    for (let r = done.get(merged); r; r = done.get(merged)) {
      done.delete(merged);
      tasks[merged] = undefined as unknown as BlockTask;
      merged++;
      if ('error' in r) rethrow(r);
      await o.onBlock(fromMessage(r));
    }
  };
  const dispatch = (): void => {
    while (idle.length && queue.length) {
      const t = queue.shift()!;
      idle.pop()!.postMessage(t, [t.block.buffer as ArrayBuffer]);
    }
  };
  const startWorkers = (): void => {
    for (let i = 0; i < o.threads; i++) {
      const w = new Worker(workerUrl(), { workerData: RECORD_WORKER });
      w.on('message', (r: BlockMessage | BlockFailure) => {
        done.set(r.task, r);
        idle.push(w);
        dispatch();
        notify();
      });
      w.on('error', (e) => {
        broken ??= e;
        notify();
      });
      // A worker gone before the end (killed, out of memory) would leave its block unanswered.
      w.on('exit', (code) => {
        if (closing) return;
        broken ??= new Error(`a record worker stopped (exit code ${code})`);
        notify();
      });
      workers.push(w);
      idle.push(w);
    }
  };
  // Waits until the blocks in flight are at most `limit`, merging what is done.
  const drain = async (limit: number): Promise<void> => {
    for (;;) {
      if (broken) throw broken;
      await merge();
      if (tasks.length - merged <= limit) return;
      await new Promise<void>((resolve) => (wake = resolve));
    }
  };

  // CSV/TSV: a byte-order mark at the start is dropped, and a header row read
  // with csv-parse (its errors are tableRecords'); the rest of the block goes on.
  const tableStart = (whole: Uint8Array): Uint8Array => {
    let block = whole;
    if (!tableStarted) {
      tableStarted = true;
      if (block[0] === 0xff && block[1] === 0xfe) {
        throw new CliError(
          `${escapeText(records.source)}: UTF-16 ${records.format === 'tsv' ? 'TSV' : 'CSV'} is not read by the native reader`,
          'pass --reader js, or convert the input to UTF-8',
          1,
        );
      }
      if (block[0] === 0xef && block[1] === 0xbb && block[2] === 0xbf) block = block.subarray(3);
    }
    if (columns) return block;
    const [head] = tableSlice(block, 0, block.length, 0, { ...records, lineOffset: 0 }, { to: 1 });
    if (!head) return block.subarray(block.length);
    let ti: number, ii: number;
    try {
      ({ ti, ii } = headerColumns(head.record, o.records));
    } catch (e) {
      // csv-parse reads a whole stream chunk (64 KiB) before the header row
      // reaches tableRecords, so an error of its in that chunk is the one
      // reported there.
      const chunk = Math.min(block.length, TABLE_CHUNK - (block.byteOffset - whole.byteOffset));
      tableSlice(block, 0, chunk, 0, { ...records, lineOffset: 0 }, { open: true });
      throw e;
    }
    columns = { text: ti, id: ii };
    lines += head.line;
    lineBase = Promise.resolve(lines);
    return block.subarray(head.bytes);
  };

  const submit = (whole: Uint8Array): void => {
    const block = table ? tableStart(whole) : whole;
    if (table && block.length === 0) return;
    // Only a record of empty fields (which csv-parse holds as no bytes) grows a table block this far.
    if (table && block.length >= 2 ** 32) {
      throw new CliError(
        `${escapeText(records.source)}: a record of 4 GiB or more`,
        `check the ${format === 'tsv' ? 'TSV' : 'CSV'} or pass --format lines`,
        1,
      );
    }
    format ??= detect(block, records.format);
    const t: BlockTask = {
      task: tasks.length,
      block,
      firstLine: lines,
      format: format ?? 'lines',
      ...(columns ? { table: columns } : {}),
      records,
      features: o.features,
      minTokens: o.minTokens,
      bits: o.bits,
      values: o.values,
    };
    const before = lineBase;
    if (!before) lines += countLines(block);
    // A block of 4 GiB or more (one huge line) is beyond the native reader's offsets.
    if (reader && before && block.length < 2 ** 32) {
      // The block's buffer is its own (cut below), padded, and not touched
      // until this settles. Read with lines numbered from 0, then from `base`.
      const hasher = hashers.length ? hasherFor(dealt++) : undefined;
      const sketch = hasher ? o.sketch : undefined;
      const read = readNativeBlock({ ...t, firstLine: 0 }, reader, true, hasher, sketch);
      const counted = Promise.all([before, read]);
      lineBase = counted.then(([base, r]) => base + r.lines);
      lineBase.catch(() => {});
      const p = counted.then(([base, r]) => nativeBlockResult({ ...t, firstLine: base }, r, hashTexts, base, sketch));
      p.then(
        () => recycle(block),
        () => {},
      );
      // Settled in order by nativeDrain; a later block failing first must not go unhandled.
      p.catch(() => {});
      inFlight.push(p);
      return;
    }
    if (reader && before) {
      const p = before.then((base) => featurizeBlock({ ...t, firstLine: base }, feat)).then(fromMessage);
      lineBase = before.then((base) => base + countLines(block));
      lineBase.catch(() => {});
      p.catch(() => {});
      inFlight.push(p);
      return;
    }
    tasks.push(t);
    // The first block waits: if it is the only one, no worker is started.
    if (t.task === 0) return;
    if (workers.length === 0) {
      startWorkers();
      queue.push(tasks[0]);
    }
    queue.push(t);
    dispatch();
  };

  // Each block is cut from a buffer of its own, padded for simdjson, that
  // the chunks are copied into once: the native reader reads it in place,
  // and a worker's block moves to the worker with it. Only the partial last
  // line is copied again (to the next buffer). Buffers the native reader is
  // done with are used again, so their pages are not faulted in anew.
  const spare: Buffer[] = [];
  const capacity = blockBytes + PADDING;
  const fresh = (bytes: number): Buffer =>
    bytes <= capacity && spare.length ? spare.pop()! : Buffer.allocUnsafeSlow(Math.max(bytes, capacity));
  let buf = fresh(capacity);
  let filled = 0;
  // Room for `bytes` more at `filled`.
  const reserve = (bytes: number): void => {
    if (filled + bytes + PADDING > buf.length) {
      // A line longer than a block (up to maxRecordBytes), or a chunk larger than one.
      const grown = Buffer.allocUnsafeSlow(Math.max(2 * buf.length, filled + bytes + PADDING));
      buf.copy(grown, 0, 0, filled);
      buf = grown;
    }
  };
  const append = (chunk: Uint8Array): void => {
    reserve(chunk.length);
    buf.set(chunk, filled);
    filled += chunk.length;
  };
  // Hands over the whole lines gathered (all that is left, at the end).
  // `at`: where the block ends (after a line break), when the caller knows.
  // False: no line break yet in a line already past maxRecordBytes.
  const cut = (final: boolean, at?: number): boolean => {
    if (filled === 0) return true;
    const end =
      at ?? (final ? filled : table ? tableEnds(buf.subarray(0, filled), filled, quoted).last : buf.lastIndexOf(NEWLINE, filled - 1) + 1);
    if (end === 0) return filled <= records.maxRecordBytes;
    const full = buf;
    const rest = filled - end;
    buf = fresh(rest + PADDING);
    buf.set(full.subarray(end, filled));
    // The padding reads as zeros, as in the addon's own padded copy.
    full.fill(0, end, end + PADDING);
    filled = rest;
    submit(full.subarray(0, end));
    return true;
  };
  // cut(false, at), refusing a line past maxRecordBytes (numbered once the lines before it are counted).
  const cutWhole = async (at?: number): Promise<void> => {
    if (cut(false, at)) return;
    if (!table) throw tooLongError(o.records, (await linesSoFar()) + 1);
    // A record past maxRecordBytes, or quoting csv-parse rejects: its error
    // (judged as the bytes double, so the checks cost O(bytes) in all). An
    // unclosed quote is no verdict yet: more may close it.
    if (filled < 2 * judged) return;
    judged = filled;
    const before = (await linesSoFar()) - (records.lineOffset ?? 0);
    tableSlice(buf, 0, filled, before, records, { open: true, bom: !tableStarted });
  };
  // The native reader is done with a block's buffer once its promise settles.
  const recycle = (block: Uint8Array): void => {
    if (spare.length < 2 && block.buffer.byteLength === capacity) spare.push(Buffer.from(block.buffer, 0, capacity));
  };

  // A full block is cut and handed on; reading waits while enough are in flight.
  const flush = async (at?: number): Promise<void> => {
    if (filled < blockBytes) return;
    await cutWhole(at);
    if (workers.length) await drain(2 * o.threads);
    await nativeDrain(inFlightMax);
  };
  // Cuts what was read into blocks of whole lines, each of at most blockBytes
  // or one longer line, as from a stream; a line not yet ended gathers on.
  const flushBlocks = async (): Promise<void> => {
    while (filled >= blockBytes) {
      if (table) {
        const { last, next } = tableEnds(buf.subarray(0, filled), blockBytes, quoted);
        if (last === 0 && next < 0) return cutWhole();
        await flush(last || next);
        continue;
      }
      let end = buf.lastIndexOf(NEWLINE, blockBytes - 1) + 1;
      if (end === 0) {
        const nl = buf.subarray(0, filled).indexOf(NEWLINE, blockBytes);
        // No line break yet: cut refuses a line past maxRecordBytes, else reading goes on.
        if (nl < 0) return cutWhole();
        end = nl + 1;
      }
      await flush(end);
    }
  };
  // A file is read straight into the block buffer, a block at a time: no
  // stream chunk to allocate and copy again on this thread. False: aborted.
  const readFile = async (file: string): Promise<boolean> => {
    const fh = await open(file, 'r');
    try {
      for (;;) {
        if (o.signal?.aborted) return false;
        // Past blockBytes (a line longer than a block): a stream chunk's worth more at a time.
        const want = filled < blockBytes ? blockBytes - filled : LONG_LINE_READ;
        reserve(want);
        const { bytesRead } = await fh.read(buf, filled, want, null);
        if (bytesRead === 0) return true;
        onBytes?.(bytesRead);
        filled += bytesRead;
        await flushBlocks();
      }
    } finally {
      await fh.close();
    }
  };
  const readStream = async (stream: Readable): Promise<boolean> => {
    for await (const chunk of stream as AsyncIterable<Buffer | string>) {
      if (o.signal?.aborted) return false;
      let bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      onBytes?.(bytes.length);
      // Filled up to blockBytes, cut, and the chunk's rest goes on into the next block.
      while (bytes.length) {
        // Past blockBytes (a line longer than a block): up to the chunk's first line break.
        const take = filled < blockBytes ? Math.min(bytes.length, blockBytes - filled) : bytes.indexOf(NEWLINE) + 1 || bytes.length;
        append(take === bytes.length ? bytes : bytes.subarray(0, take));
        bytes = bytes.subarray(take);
        await flush();
      }
    }
    return true;
  };

  try {
    if (!(await ('file' in input ? readFile(input.file) : readStream(input)))) return;
    cut(true);
    if (o.signal?.aborted) return;
    await nativeDrain(0);
    if (workers.length === 0) {
      if (tasks.length === 1) await o.onBlock(fromMessage(await featurizeBlock(tasks[0], feat)));
      return;
    }
    await drain(0);
  } finally {
    closing = true;
    await Promise.all([...workers.map((w) => w.terminate()), textPool?.close()]);
    // A block still in flight keeps its hasher alive until its native call ends.
    for (const h of hashers) h?.dispose();
  }
}
