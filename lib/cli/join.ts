// `cusim join`: every pair of records whose token sets are at least
// `threshold` similar (exact set similarity join), e.g. q-gram sets of names.
import { Command, Option } from 'commander';
import { createReadStream, statSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { resolveBackend } from '../backend.js';
import { similarityJoin, similarityJoinStream } from '../join.js';
import type { JoinChunk, JoinMeasure, JoinOptions } from '../join.js';
import type { Backend } from '../backend.js';
import type { CsrMatrix } from '../validate.js';
import { TextFeaturizer } from '../text/index.js';
import { csvField, escapeText, safeJson } from './escape.js';
import { CliError, fsError } from './errors.js';
import { backendLine, integer, recordOptions, wantsProgress } from './options.js';
import type { Io } from './options.js';
import { StreamFeaturizer } from './pipeline.js';
import { progress } from './progress.js';
import { formatOfFile, readRecords } from './records.js';
import type { RecordFormat } from './records.js';
import { MAX_DOC_BYTES } from './sources.js';

interface JoinCliOptions {
  threshold: string;
  measure: JoinMeasure;
  qgram?: number;
  words?: boolean;
  backend: 'auto' | 'cpu' | 'cuda';
  format: RecordFormat;
  field: string;
  idField: string;
  header: boolean;
  columns?: string[];
  delimiter?: string;
  json?: boolean;
  csv?: boolean;
  limit: number;
  quiet?: boolean;
  progress: boolean;
  sort?: boolean;
  chunkPairs?: number;
}

/** The whole join as one chunk, sorted by (left, right). */
async function* sortedOnce(sets: CsrMatrix, options: JoinOptions): AsyncGenerator<JoinChunk & { backend: Backend }> {
  yield await similarityJoin(sets, options);
}

/** The records of a file, or of stdin for '-', as a stream with its size where known. */
function openRecords(file: string, io: Io, format: RecordFormat): { input: Readable; size?: number; format: RecordFormat; name: string } {
  if (file === '-') {
    if (io.stdinIsTTY) throw new CliError("'-' reads records from stdin, but stdin is a terminal", 'pipe records in', 2);
    return { input: io.stdin as Readable, format, name: 'stdin' };
  }
  let size: number;
  try {
    const st = statSync(file);
    if (!st.isFile()) throw new CliError(`not a file: ${escapeText(file)}`, 'pass a file of records (one per line, JSONL, CSV or TSV)', 1);
    size = st.size;
  } catch (e) {
    if (e instanceof CliError) throw e;
    throw fsError(e, file);
  }
  return { input: createReadStream(file), size, format: format === 'auto' ? (formatOfFile(file) ?? 'auto') : format, name: file };
}

function checkThreshold(v: string, measure: JoinMeasure): number {
  const x = Number(v);
  if (measure === 'overlap') {
    if (!/^\d+$/.test(v.trim()) || x < 1)
      throw new CliError(`--threshold for --measure overlap must be an integer ≥ 1, got ${v}`, 'e.g. --threshold 3', 2);
  } else if (v.trim() === '' || !Number.isFinite(x) || x <= 0 || x > 1) {
    throw new CliError(`--threshold for --measure ${measure} must be a number in (0, 1], got ${v}`, 'e.g. --threshold 0.8', 2);
  }
  return x;
}

const CLIP = 60;

async function joinCommand(file: string, o: JoinCliOptions, io: Io): Promise<number> {
  const t0 = performance.now();
  if (o.json && o.csv) throw new CliError('--json and --csv cannot be combined', 'pick one output format', 2);
  if (o.words && o.qgram !== undefined) throw new CliError('--words and --qgram cannot be combined', 'pick one tokenization', 2);
  const threshold = checkThreshold(o.threshold, o.measure);
  const backend = resolveBackend(o.backend, '--backend');
  if (!o.quiet) io.stderr.write(backendLine(backend) + '\n');
  const bar = progress(wantsProgress(o), io.stderr);
  const src = openRecords(file, io, o.format);
  const q = o.qgram ?? 3;
  const feat = new TextFeaturizer(o.words ? { mode: 'words', weighting: 'binary' } : { mode: 'qgrams', q, weighting: 'binary' });
  // Every record is a row (empty ones never match); only ids and a clip of
  // each text are kept for the report.
  const ids: string[] = [];
  const clips: string[] = [];
  const stream = new StreamFeaturizer(feat, 0, 4 << 20, (d) => {
    ids.push(d.id);
    if (!o.json && !o.csv) clips.push(d.text.length > CLIP ? d.text.slice(0, CLIP - 1) + '…' : d.text);
  });
  bar.stage(`reading ${escapeText(src.name)}`, src.size, 'bytes');
  let bytes = 0;
  try {
    for await (const d of readRecords(src.input, {
      format: src.format,
      field: o.field,
      idField: o.idField,
      header: o.header,
      columns: o.columns,
      delimiter: o.delimiter,
      source: src.name,
      maxRecordBytes: MAX_DOC_BYTES,
      onBytes: (n) => bar.update((bytes += n)),
    })) {
      if (io.signal?.aborted) break;
      await stream.add(d);
    }
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code && !(e instanceof CliError) && file !== '-') throw fsError(e, file);
    throw e;
  }
  await stream.finish();
  bar.stop();
  if (io.signal?.aborted) return 0;
  if (ids.length === 0)
    throw new CliError(`no records found in ${file === '-' ? 'stdin' : escapeText(file)}`, 'check the file, --format and --field', 1);
  const sets = feat.build();
  const joinOptions = {
    threshold,
    measure: o.measure,
    backend: o.backend,
    signal: io.signal,
    onProgress: bar.listener({ join: 'joining' }, { join: 'records' }),
    ...(o.chunkPairs === undefined ? {} : { tuning: { maxChunkPairs: o.chunkPairs } }),
  };
  // Pairs go out as the join hands them over, chunk by chunk (each sorted by
  // (left, right)); --sort gathers them all first for one global order.
  const chunks = o.sort ? sortedOnce(sets, joinOptions) : similarityJoinStream(sets, joinOptions);
  const round = (x: number): number => Math.round(x * 1e6) / 1e6;
  const tokens = o.words ? 'words' : `${q}-grams`;
  let out = '';
  // Buffers output and writes it in blocks of 64 KiB; false once stdout is closed.
  const emit = (s: string, flush = false): boolean => {
    out += s;
    if (out.length < 1 << 16 && !flush) return true;
    if (io.stdoutClosed?.()) return false;
    io.stdout.write(out);
    out = '';
    return true;
  };
  const limit = o.json || o.csv ? Infinity : o.limit === 0 ? Infinity : o.limit;
  let pairs = 0;
  let backendUsed: string = backend;
  // The head names the backend the join runs on (auto keeps small joins on the CPU): written with the first chunk.
  let started = false;
  const start = (): void => {
    started = true;
    if (o.json) {
      const head = {
        schema: 'cusim.join/1',
        backend: backendUsed,
        options: { threshold, measure: o.measure, tokens },
        records: ids.length,
      };
      emit(safeJson(head, 2).replace(/\n}$/, ',\n  "pairs": ['));
    } else if (o.csv) emit('left,right,overlap,similarity\n');
  };
  try {
    for await (const r of chunks) {
      backendUsed = r.backend;
      if (!started) start();
      for (let i = 0; i < r.left.length; i++, pairs++) {
        let line: string;
        if (o.json) {
          line =
            (pairs ? ',' : '') +
            '\n    ' +
            safeJson({ left: ids[r.left[i]], right: ids[r.right[i]], overlap: r.overlap[i], similarity: round(r.similarity[i]) });
        } else if (o.csv) {
          line = `${csvField(ids[r.left[i]])},${csvField(ids[r.right[i]])},${r.overlap[i]},${round(r.similarity[i])}\n`;
        } else if (pairs < limit) {
          const a = r.left[i];
          const b = r.right[i];
          line = `${round(r.similarity[i]).toFixed(3)}  ${escapeText(ids[a])}: ${escapeText(clips[a])}  ~  ${escapeText(ids[b])}: ${escapeText(clips[b])}\n`;
        } else continue;
        if (!emit(line)) return 0;
      }
      // What is gathered goes out with each chunk, so a consumer sees pairs as they are found.
      if (!emit('', true)) return 0;
    }
  } finally {
    bar.stop();
  }
  if (!started) start();
  if (o.json) {
    emit(`${pairs ? '\n  ' : ''}],\n  "elapsedMs": ${Math.round(performance.now() - t0)}\n}\n`, true);
  } else if (o.csv) {
    emit('', true);
  } else {
    if (pairs > limit) emit(`… ${pairs - limit} more pairs (use --limit 0 for all, or --json)\n`);
    emit(`\n${ids.length} records, ${pairs} pairs with ${o.measure} ≥ ${threshold} over ${tokens} (${backendUsed})\n`, true);
  }
  return 0;
}

export function registerJoin(program: Command, io: Io, done: (code: number) => void): void {
  const cmd = program
    .command('join')
    .description('similar record pairs: exact set similarity join over q-grams (or words) of each record')
    .argument('<file>', "records: one per line, JSONL, CSV or TSV (see --format); '-' reads stdin")
    .requiredOption('-t, --threshold <x>', 'similarity threshold (required); an integer token count for --measure overlap')
    .addOption(new Option('--measure <m>', 'set similarity').choices(['jaccard', 'cosine', 'dice', 'overlap']).default('jaccard'))
    .option('--qgram <q>', 'character q-grams (default 3)', integer('qgram', 1, 16))
    .option('--words', 'use words instead of q-grams')
    .addOption(new Option('-b, --backend <b>', 'compute backend').choices(['auto', 'cpu', 'cuda']).default('auto'));
  recordOptions(cmd, 'record format (auto: by extension, else JSONL or lines)', 'record');
  cmd
    .option('--json', 'print JSON (schema cusim.join/1)')
    .option('--csv', 'print CSV: left,right,overlap,similarity')
    .option('--limit <n>', 'pairs shown in the table (0: all)', integer('limit', 0, 1e9), 50)
    .option('--sort', 'print all pairs sorted by (left, right) (default: printed as found, sorted within each chunk)')
    .option(
      '--chunk-pairs <n>',
      'most pairs the CPU join hands over at once (default 2^26; bounds memory)',
      integer('chunk-pairs', 1, 2 ** 32 - 1),
    )
    .option('--no-progress', 'never show progress')
    .option('--quiet', 'print only the result')
    .option('-v, --verbose', 'print stack traces on errors')
    .action(async (file: string, opts: JoinCliOptions) => done(await joinCommand(file, opts, io)));
}
