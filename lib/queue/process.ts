// One range of a job, end to end: read only its bytes (or its files), check
// them against the job's fingerprint before parsing, parse with the record
// readers `cusim dedup` uses (line numbers continuing from the range's first
// line, so ids and names are the single process's), featurize, hash and
// insert into the shared index. Re-running a range (a retry after a crash)
// writes the same entries again, which the index counts once.
import type { Cluster, Redis } from 'ioredis';
import { hostname } from 'node:os';
import { Readable } from 'node:stream';
import { gpuIndices, type Backend } from '../backend.js';
import { MinHashLSH } from '../lsh.js';
import { packRows } from './batch-rows.js';
import { dedupParams } from '../dedup/defaults.js';
import { makeSigner as makeDedupSigner } from '../dedup/signer.js';
import { TextFeaturizer } from '../text/index.js';
import type { TextFeaturizerOptions } from '../text/index.js';
import { idList } from '../dedup/ids.js';
import type { IdList } from '../dedup/ids.js';
import { readRecordBlocks } from '../cli/record-blocks.js';
import type { RecordReader } from '../cli/record-native.js';
import type { CsrMatrix } from '../validate.js';
import { readRecords } from '../cli/records.js';
import { MAX_DOC_BYTES, readDoc } from '../cli/sources.js';
import { readChecked } from './fingerprint.js';
import { jobKeys } from './job.js';
import type { RangeSettings, RangeStats } from './job.js';
import type { Range } from './ranges.js';

export interface RangeContext {
  c: Redis | Cluster;
  prefix: string;
  settings: RangeSettings;
  lsh: MinHashLSH;
  batchDocs: number;
  /** Called after each inserted batch but the range's last: records of the range done so far. */
  onBatch?: (records: number) => void;
  /** Told which reader parses a range of line records: 'native (simdjson 3.0.1)' or 'JavaScript (why)'. */
  onReader?: (description: string) => void;
  signer: Signer;
}

export interface Signer {
  featurize(texts: string[]): Promise<{ tokens: Uint32Array; matrix: CsrMatrix }>;
  hash(m: CsrMatrix): Promise<Uint32Array>;
  dispose(): void;
  /**
   * Classic only: what the block reader (lib/cli/record-blocks.ts) needs to
   * featurize line records as featurize() does, natively on the thread pool.
   */
  blocks?: { features: TextFeaturizerOptions; bits: number; reader: RecordReader; tokenDevices: number[] };
}

/**
 * Features as the single process computes them (classic: hashed token
 * columns, 2^32 unless --hash-bits; weighted: hashed counts, --hash-bits,
 * 18 by default with --redis), signed by lib/dedup's signer for the method,
 * the one every dedup entry point hashes through.
 */
export function makeSigner(s: RangeSettings, backend: Backend, devices: 'all' | number[] | undefined, native: boolean): Signer {
  const features: TextFeaturizerOptions = {
    mode: s.mode,
    weighting: s.weighting,
    q: s.q,
    hashBits: s.method === 'classic' ? undefined : s.hashBits,
    ...(native ? {} : { native: false }),
  };
  const feat = new TextFeaturizer(features);
  const signer = makeDedupSigner(s.method, { samples: s.samples, seed: s.seed, backend, devices, dim: 2 ** s.hashBits });
  const hash = (m: CsrMatrix) => signer.hash(signer.input(m));
  const dispose = () => signer.dispose();
  if (s.method === 'classic') {
    return {
      async featurize(texts) {
        const r = await feat.hashedRows(texts, { minTokens: s.minTokens, bits: s.hashBits });
        return { tokens: r.tokens, matrix: { rows: r.indptr.length - 1, cols: 2 ** s.hashBits, indptr: r.indptr, indices: r.indices } };
      },
      hash,
      dispose,
      // On the CUDA backend the GPUs that hash also split and hash the tokens.
      blocks: { features, bits: s.hashBits, reader: native ? 'native' : 'js', tokenDevices: backend === 'cuda' ? gpuIndices(devices) : [] },
    };
  }
  feat.freeze();
  return {
    async featurize(texts) {
      const tokens = feat.addBatch(texts, s.minTokens);
      return { tokens, matrix: feat.build() };
    },
    hash,
    dispose,
  };
}

/** The shared index of a job, with the job's banding. */
export function jobIndex(
  url: string,
  prefix: string,
  s: RangeSettings,
  backend: Backend,
  devices: 'all' | number[] | undefined,
): MinHashLSH {
  const p = dedupParams({ threshold: s.threshold, recall: s.recall, samples: s.samples });
  return new MinHashLSH({
    bands: p.bands,
    rows: p.rows,
    threshold: s.threshold,
    samples: p.samples,
    backend,
    devices,
    kind: s.method,
    storage: { type: 'redis', url, prefix: jobKeys(prefix).lsh },
  });
}

interface Pending {
  ids: number[];
  names: string[];
  texts: string[];
}

/**
 * Hashes the kept rows of a batch (`ids[i]`, named `names.get(i)`), then
 * starts their writes and returns them unawaited: the caller reads the next
 * batch while Redis takes this one (insert time overlaps the rest). The
 * batch's vectors and names go as one blob (batch-rows.ts), its signatures
 * into the index; the blob is named by range `r` and its ids' span, so a rerun
 * of the range overwrites it with the same rows.
 */
async function insertRows(
  ctx: RangeContext,
  r: number,
  ids: Uint32Array,
  names: IdList,
  matrix: CsrMatrix,
  stats: RangeStats,
): Promise<{ written: Promise<void> } | undefined> {
  if (ids.length === 0) return undefined;
  const t1 = performance.now();
  const sigs = await ctx.signer.hash(matrix);
  const t2 = performance.now();
  stats.ms.hash += t2 - t1;
  (stats.batches ??= []).push([ids[0], ids[ids.length - 1], ids.length]);
  const key = jobKeys(ctx.prefix).rows(r, ids[0], ids[ids.length - 1]);
  // Rows and index entries go together: the range counts as done only once all of them are written.
  const written = Promise.all([ctx.c.set(key, packRows(ids, matrix, names)), ctx.lsh.insert(ids, sigs)]).then(() => {
    stats.ms.insert += performance.now() - t2;
  });
  // Awaited by the caller later; a failure while the next batch is hashed must not count as unhandled.
  written.catch(() => {});
  // Wrapped: an async function returning the promise itself would wait for it.
  return { written };
}

/**
 * Featurizes and hashes batch `b`, then starts its writes and returns them
 * unawaited: the caller reads and hashes the next batch while Redis takes
 * this one (insert time overlaps the rest; one write in flight at a time).
 */
async function insertBatch(ctx: RangeContext, r: number, b: Pending, stats: RangeStats): Promise<{ written: Promise<void> } | undefined> {
  const t0 = performance.now();
  const { tokens, matrix } = await ctx.signer.featurize(b.texts);
  const keep: number[] = [];
  tokens.forEach((n, x) => {
    if (n >= ctx.settings.minTokens) keep.push(x);
  });
  stats.documents += b.ids.length;
  stats.tooSmall += b.ids.length - keep.length;
  stats.rows += keep.length;
  const t1 = performance.now();
  stats.ms.featurize += t1 - t0;
  return insertRows(
    ctx,
    r,
    Uint32Array.from(keep, (x) => b.ids[x]),
    idList(keep.map((x) => b.names[x])),
    matrix,
    stats,
  );
}

/**
 * Records (JSONL, lines, CSV, TSV) of classic jobs: read in blocks by the
 * reader `cusim dedup FILE` uses (simdjson or libcsv and the native tokenizer
 * on the thread pool where the addon has them), numbered from the range's
 * first line, so the ids, names and rows are those of the record-by-record path.
 */
async function blockRange(
  ctx: RangeContext,
  r: number,
  range: Extract<Range, { kind: 'records' }>,
  /** The range's bytes, after a CSV/TSV header row's when it has one. */
  bufs: Buffer[],
  lines: number,
  blocks: NonNullable<Signer['blocks']>,
  stats: RangeStats,
): Promise<void> {
  const s = ctx.settings;
  const buf = bufs[bufs.length - 1];
  // Blocks of about --batch-docs records (by the range's mean line), handed
  // over in pieces of that size: a block's writes overlap the next's reading.
  const blockBytes = Math.round(Math.min(8 << 20, Math.max(4096, (ctx.batchDocs * buf.length) / Math.max(1, lines))));
  const input = Readable.from(
    (function* () {
      if (bufs.length > 1) yield bufs[0];
      for (let at = 0; at < buf.length; at += blockBytes) yield buf.subarray(at, at + blockBytes);
    })(),
    { objectMode: false },
  );
  let writing: Promise<void> | undefined;
  let records = 0;
  let t = performance.now();
  await readRecordBlocks(input, {
    records: {
      format: range.format,
      field: s.field,
      idField: s.idField,
      source: range.name,
      idPrefix: range.idPrefix,
      maxRecordBytes: Math.min(s.maxSize, MAX_DOC_BYTES),
      // CSV/TSV as readRecords reads them below: the header row's lines are the range's.
      delimiter: s.delimiter ?? undefined,
      header: s.header ?? true,
      columns: s.columns ?? undefined,
      lineOffset: range.linesBefore - (range.header?.lines ?? 0),
    },
    features: blocks.features,
    minTokens: s.minTokens,
    // The rows go in as column ids (classic MinHash): no values.
    values: false,
    bits: blocks.bits,
    // Texts the native tokenizer leaves to JavaScript are featurized on this thread (no worker threads).
    threads: 1,
    reader: blocks.reader,
    tokenDevices: blocks.tokenDevices,
    onReader: ctx.onReader,
    blockBytes,
    onBlock: async (block) => {
      stats.ms.featurize += performance.now() - t;
      stats.documents += block.documents;
      stats.tooSmall += block.tooSmall;
      const ids = Uint32Array.from(block.lines, (l) => range.idBase + l);
      stats.rows += ids.length;
      const matrix = { rows: ids.length, cols: 2 ** blocks.bits, indptr: block.rows.indptr, indices: block.rows.indices };
      const next = (await insertRows(ctx, r, ids, block.ids, matrix, stats))?.written;
      if (writing) {
        await writing;
        ctx.onBatch?.(records);
      }
      writing = next;
      records += block.documents;
      t = performance.now();
    },
  });
  stats.ms.featurize += performance.now() - t;
  await writing;
}

/** Processes range `r`; returns its totals (not yet recorded as done). */
export async function processRange(ctx: RangeContext, r: number, range: Range): Promise<RangeStats> {
  const s = ctx.settings;
  const stats: RangeStats = {
    documents: 0,
    tooSmall: 0,
    rows: 0,
    idLo: 0,
    idHi: 0,
    skipped: [],
    ms: { read: 0, featurize: 0, hash: 0, insert: 0 },
    worker: `${hostname()}:${process.pid}`,
  };
  let b: Pending = { ids: [], names: [], texts: [] };
  let records = 0;
  // The previous batch's writes, still in flight, and the records done once they land.
  let writing: Promise<void> | undefined;
  let written = 0;
  const flush = async (last: boolean): Promise<void> => {
    const next = b.ids.length ? (await insertBatch(ctx, r, b, stats))?.written : undefined;
    if (writing) {
      await writing;
      ctx.onBatch?.(written);
    }
    records += b.ids.length;
    b = { ids: [], names: [], texts: [] };
    writing = next;
    written = records;
    if (last) await writing;
  };
  let t = performance.now();
  if (range.kind === 'records') {
    // Fingerprints first: nothing is parsed from input that differs from the job's.
    const header = range.header && readChecked(range.file, range.fileSize, 0, range.header.end, range.header.fp, range.name);
    const buf = readChecked(range.file, range.fileSize, range.start, range.end, range.fp, range.name);
    let newlines = 0;
    for (let i = buf.indexOf(0x0a); i >= 0; i = buf.indexOf(0x0a, i + 1)) newlines++;
    stats.idLo = range.idBase + range.linesBefore + 1;
    stats.idHi = range.idBase + range.linesBefore + newlines + 2;
    stats.ms.read += performance.now() - t;
    if (ctx.signer.blocks) {
      await blockRange(ctx, r, range, header ? [header, buf] : [buf], newlines, ctx.signer.blocks, stats);
      return roundMs(stats);
    }
    const input = Readable.from(header ? [header, buf] : [buf], { objectMode: false });
    const read = readRecords(input, {
      format: range.format,
      field: s.field,
      idField: s.idField,
      delimiter: s.delimiter ?? undefined,
      // Jobs recorded before header rows were optional had them.
      header: s.header ?? true,
      columns: s.columns ?? undefined,
      source: range.name,
      idPrefix: range.idPrefix,
      maxRecordBytes: Math.min(s.maxSize, MAX_DOC_BYTES),
      lineOffset: range.linesBefore - (range.header?.lines ?? 0),
    });
    t = performance.now();
    for await (const d of read) {
      b.ids.push(range.idBase + d.line!);
      b.names.push(d.id);
      b.texts.push(d.text);
      if (b.ids.length >= ctx.batchDocs) {
        stats.ms.read += performance.now() - t;
        await flush(false);
        t = performance.now();
      }
    }
    stats.ms.read += performance.now() - t;
  } else {
    stats.idLo = range.idBase;
    stats.idHi = range.idBase + range.files.length;
    for (const f of range.files) if (f.fp.sha256) readChecked(f.file, f.fp.size, 0, f.fp.size, f.fp, f.name);
    stats.ms.read += performance.now() - t;
    for (let i = 0; i < range.files.length; i++) {
      const f = range.files[i];
      const id = range.idBase + i;
      t = performance.now();
      const d = readDoc(f.file, f.name, s.maxSize);
      stats.ms.read += performance.now() - t;
      if (!('text' in d)) {
        stats.skipped.push({ ...d, at: id });
        continue;
      }
      b.ids.push(id);
      b.names.push(d.id);
      b.texts.push(d.text);
      if (b.ids.length >= ctx.batchDocs) await flush(false);
    }
  }
  await flush(true);
  return roundMs(stats);
}

function roundMs(stats: RangeStats): RangeStats {
  for (const m of Object.keys(stats.ms) as (keyof RangeStats['ms'])[]) stats.ms[m] = Math.round(stats.ms[m]);
  return stats;
}
