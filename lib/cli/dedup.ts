// `cusim dedup`: near-duplicate groups over files, trees, node_modules or
// records (JSONL, CSV, TSV, lines; files or stdin): featurize as records
// arrive, MinHash signatures, LSH banding tuned to a recall target, exact
// verification.
import { Command, Option } from 'commander';
import { createReadStream, statSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import type { Readable } from 'node:stream';
import { native, packageRoot } from '../addon.js';
import { devices, gpuIndices, resolveBackend } from '../backend.js';
import { recallCurve, recallParams } from '../lsh.js';
import type { LshParams, SignatureKind } from '../lsh.js';
import { DEDUP_DEFAULTS, dedupParams } from '../dedup/defaults.js';
import { idList, toIdList } from '../dedup/ids.js';
import type { IdList } from '../dedup/ids.js';
import type { DedupBlock } from '../dedup/options.js';
import type { SketchParams } from '../native-types.js';
import { SPILL_AFTER_BYTES, dedupRecords } from '../dedup/records.js';
import { prefetchUnicodeTables } from '../text/unicode-tables.js';
import { TextFeaturizer } from '../text/index.js';
import type { TextFeaturizerOptions, TextMode } from '../text/index.js';
import { BlockQueue } from './block-queue.js';
import { dedupMethod, defaultWeighting } from './dedup-method.js';
import type { DedupCommandOptions } from './dedup-options.js';
import { escapeText } from './escape.js';
import { DEFAULT_HASH_BITS, reportCommand, shardCommand } from './dedup-shard.js';
import { CliError, fsError } from './errors.js';
import { DEFAULT_RANGE_BYTES, dropCommand, queueCommand, rangeShardCommand } from './worker.js';
import { backendLine, between, deviceList, integer, recordOptions, wantsProgress } from './options.js';
import type { Io } from './options.js';
import { featurizeFilesParallel } from './parallel.js';
import { StreamFeaturizer } from './pipeline.js';
import { progress } from './progress.js';
import type { Progress } from './progress.js';
import { formatOfFile, readRecords } from './records.js';
import type { RecordFormat, RecordOptions } from './records.js';
import { readRecordBlocks } from './record-blocks.js';
import { nativeRecordReader } from './record-native.js';
import { acrossPackages, buildGroups, buildPackagePairs, featureLine, renderCsv, renderJson, renderTable } from './report.js';
import { attachTexts, fileIds, recordOptionsOf, refuseStdin } from './member-text.js';
import type { DedupReport } from './report.js';
import { MAX_DOC_BYTES, SOURCE_EXTENSIONS, defaultScanRoot, displayPath, expandPaths, readDoc } from './sources.js';
import type { Skip } from './sources.js';

export type { DedupCommandOptions } from './dedup-options.js';

interface RecordInput {
  /** As shown to the user. */
  name: string;
  format: RecordFormat;
  open: () => Readable;
  /** The file's path (a file, not stdin): line records are read from it in blocks, not as a stream. */
  path?: string;
  /** Bytes, when known (files). */
  size?: number;
}

/** Records inputs and document files named on the command line. */
function planInputs(paths: string[], o: DedupCommandOptions, io: Io): { records: RecordInput[]; docRoots: string[] } {
  const records: RecordInput[] = [];
  const docRoots: string[] = [];
  for (const p of paths) {
    if (p === '-') {
      if (io.stdinIsTTY)
        throw new CliError("'-' reads records from stdin, but stdin is a terminal", 'pipe data in, e.g. cat docs.jsonl | cusim dedup -', 2);
      records.push({ name: 'stdin', format: o.format, open: () => io.stdin as Readable });
      continue;
    }
    let st;
    try {
      st = statSync(p);
    } catch (e) {
      throw fsError(e, p);
    }
    const format = o.format !== 'auto' ? o.format : formatOfFile(p);
    if (st.isFile() && format) {
      records.push({ name: displayPath(p), format, size: st.size, open: () => readFile(p), path: p });
    } else {
      docRoots.push(p);
    }
  }
  return { records, docRoots };
}

function lshParamsFor(o: DedupCommandOptions, say: (s: string) => void): LshParams & { samples: number } {
  try {
    const p = dedupParams({ threshold: o.threshold, recall: o.recall, samples: o.samples });
    if (o.samples === undefined && p.samples > DEDUP_DEFAULTS.samples) {
      say(`cusim: ${DEDUP_DEFAULTS.samples} samples cannot reach --recall ${o.recall} at threshold ${o.threshold}; hashing ${p.samples}`);
    }
    return p;
  } catch (e) {
    if ((e as { code?: string }).code === 'CUSIM_INVALID_ARGUMENT' && /needs/.test((e as Error).message)) {
      throw new CliError(
        (e as Error).message.replace(/^recall/, '--recall').replace('samples = ', '--samples '),
        'raise --samples, lower --recall, or leave --samples out',
        2,
      );
    }
    throw e;
  }
}

/** What reading produced besides the blocks of rows. */
interface ReadStats {
  skipped: Skip[];
  documents: number;
  tooSmall: number;
  /** Rows (documents with enough tokens), their nonzeros, and the columns of every block. */
  rows: number;
  nnz: number;
  cols: number;
}

/**
 * Reads every input and featurizes it, handing rows to `push` as blocks in
 * input order: as they are read where the features are hashed (classic), or
 * as one block at the end over the finished vocabulary (weighted). The
 * featurizer (and its buffers) is dropped on return.
 */
async function featurize(
  records: RecordInput[],
  docFiles: string[],
  unreadable: string[],
  o: DedupCommandOptions,
  io: Io,
  bar: Progress,
  mode: TextMode,
  minTokens: number,
  featOptions: TextFeaturizerOptions,
  method: SignatureKind,
  push: (b: DedupBlock) => Promise<void>,
  stop: AbortSignal,
  /** GPUs that split and hash the records' tokens (readRecordBlocks' tokenDevices). */
  tokenDevices: readonly number[],
  /** The classic banding: blocks whose tokens a GPU hashed come with their band keys, made there. */
  sketch: SketchParams | undefined,
): Promise<ReadStats> {
  const feat = new TextFeaturizer(featOptions);
  // Classic MinHash reads sets of 32-bit token hashes: no vocabulary, no weights.
  const bits = o.hashBits ?? 32;
  const stats: ReadStats = { skipped: [], documents: 0, tooSmall: 0, rows: 0, nnz: 0, cols: method === 'classic' ? 2 ** bits : 0 };
  const send = (rows: DedupBlock['rows'], ids: IdList, bandKeys?: DedupBlock['bandKeys']): Promise<void> => {
    stats.rows += rows.rows;
    stats.nnz += rows.indices.length;
    return push(bandKeys ? { rows, ids, bandKeys } : { rows, ids });
  };
  const hashed =
    method === 'classic'
      ? { bits, values: false, onRows: (rows: DedupBlock['rows'], ids: string[]) => send(rows, idList(ids)) }
      : undefined;
  const stopped = (): boolean => !!io.signal?.aborted || stop.aborted;
  stats.skipped.push(
    ...unreadable.map((u) => ({
      id: displayPath(u),
      reason: 'unreadable' as const,
      detail: 'cannot list the directory',
    })),
  );

  // Records: streamed, featurized in batches as they arrive.
  const stream = new StreamFeaturizer(feat, minTokens, BATCH_CHARS, undefined, undefined, hashed);
  let toldReader = false;
  for (const input of records) {
    if (stopped()) break;
    bar.stage(`reading ${escapeText(input.name)}`, input.size, 'bytes');
    let bytes = 0;
    const recordOptions: RecordOptions = {
      format: input.format,
      field: o.field,
      idField: o.idField,
      header: o.header,
      columns: o.columns,
      delimiter: o.delimiter,
      source: input.name,
      idPrefix: records.length > 1 ? input.name : undefined,
      maxRecordBytes: Math.min(o.maxSize, MAX_DOC_BYTES),
      onBytes: (n) => bar.update((bytes += n)),
    };
    try {
      // The native reader runs on the thread pool, so it is worth blocks even with --threads 1.
      const nativeReader = o.reader !== 'js' && o.native && native().recordReader !== undefined;
      // CSV and TSV: in blocks only where the native reader reads them (libcsv compiled in, a one-byte delimiter).
      const tableBlocks =
        o.reader !== 'js' &&
        o.native &&
        TABLE_FORMATS.has(input.format) &&
        nativeRecordReader(feat, recordOptions).reader &&
        !(input.path !== undefined && (await utf16(input.path)));
      if (hashed && (((o.threads > 1 || nativeReader) && LINE_FORMATS.has(input.format)) || tableBlocks)) {
        // Line-based records: parsed and featurized block by block (natively, or on worker threads).
        await stream.finish();
        await readRecordBlocks(input.path === undefined ? input.open() : { file: input.path }, {
          records: recordOptions,
          features: featOptions,
          minTokens,
          bits: hashed.bits,
          values: false,
          threads: o.threads,
          signal: io.signal ? AbortSignal.any([io.signal, stop]) : stop,
          reader: o.reader,
          tokenDevices,
          // Token hashes of 32 bits are what classic MinHash reads as they are (classicTokens).
          ...(sketch && hashed.bits === 32 ? { sketch } : {}),
          onReader: (d) => {
            if (o.verbose && !o.quiet && !toldReader) io.stderr.write(`cusim: records read by the ${d} reader\n`);
            toldReader = true;
          },
          onBlock: (r) => {
            const ids = toIdList(r.ids, 'ids');
            stats.documents += r.documents;
            stats.tooSmall += r.tooSmall;
            return send({ rows: ids.length, cols: 2 ** hashed.bits, indptr: r.rows.indptr, indices: r.rows.indices }, ids, r.bandKeys);
          },
        });
        continue;
      }
      for await (const d of readRecords(input.open(), recordOptions)) {
        if (stopped()) break;
        await stream.add(d);
      }
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code && !(e instanceof CliError) && input.name !== 'stdin') throw fsError(e, input.name);
      throw e;
    }
  }
  await stream.finish();
  bar.stop();
  const ids = stream.ids;

  // Whole files as documents: worker threads where there are cores to spare.
  if (docFiles.length > 0) {
    bar.stage(mode === 'code' ? 'featurizing (bag of names)' : `featurizing (${mode})`, docFiles.length, 'files');
    if (!hashed && o.threads > 1 && docFiles.length > 4 * o.threads) {
      const r = await featurizeFilesParallel(feat, {
        files: docFiles,
        ids: docFiles.map(displayPath),
        options: featOptions,
        maxBytes: o.maxSize,
        minTokens,
        threads: o.threads,
        onFiles: (n) => bar.tick(n),
      });
      ids.push(...r.rows);
      stats.skipped.push(...r.skipped);
      stats.tooSmall += r.tooSmall;
      stats.documents += r.documents;
    } else {
      // Hashed rows go on after the records' (one stream).
      const files = hashed ? stream : new StreamFeaturizer(feat, minTokens, BATCH_CHARS, undefined, (n) => bar.tick(n));
      for (const f of docFiles) {
        if (stopped()) break;
        const d = readDoc(f, displayPath(f), o.maxSize);
        if ('text' in d) {
          await files.add(d);
          if (files === stream) bar.tick();
        } else {
          stats.skipped.push(d);
          bar.tick();
        }
      }
      await files.finish();
      if (files !== stream) {
        ids.push(...files.ids);
        stats.tooSmall += files.tooSmall;
        stats.documents += files.documents;
      }
    }
    bar.stop();
  }
  stats.documents += stream.documents;
  stats.tooSmall += stream.tooSmall;
  if (!hashed) {
    // Weighted rows over the vocabulary, known only now: one block.
    const matrix = feat.build();
    stats.cols = matrix.cols;
    if (matrix.rows > 0 && matrix.cols > 0) send(matrix, idList(ids));
  }
  return stats;
}

async function dedupCommand(paths: string[], o: DedupCommandOptions, io: Io): Promise<number> {
  const t0 = performance.now();
  if (o.json && o.csv) throw new CliError('--json and --csv cannot be combined', 'pick one output format', 2);
  const say = (s: string): void => {
    if (!o.quiet) io.stderr.write(s + '\n');
  };
  const stages: { stage: string; ms: number }[] = [];
  let tStage = performance.now();
  const endStage = (stage: string): void => {
    const now = performance.now();
    stages.push({ stage, ms: Math.round(now - tStage) });
    tStage = now;
  };
  // Records in 'words' or 'qgrams' are tokenized natively with Unicode tables
  // taken from this engine (a few hundred ms of one core): built on a worker
  // while the backend (a GPU's context) starts.
  const tables = paths.length > 0 && o.mode !== 'code' && o.native ? prefetchUnicodeTables() : undefined;
  const backend = resolveBackend(o.backend, '--backend');
  const params = lshParamsFor(o, say);
  say(backendLine(backend));
  if (o.redis !== undefined || o.shard !== undefined || o.report || o.queue || o.drop) {
    if (o.redis === undefined)
      throw new CliError('--shard, --queue, --report and --drop need --redis URL', 'e.g. --redis redis://127.0.0.1:6379', 2);
    if ([o.shard, o.report, o.queue, o.drop].filter(Boolean).length !== 1)
      throw new CliError('--redis needs one of --queue, --shard i/N (a worker), --report or --drop', 'see "Scaling out" in the README', 2);
    const so = { ...o, redis: o.redis, backend };
    if (o.drop) return dropCommand(so, io);
    if (o.queue) {
      await queueCommand(paths, so, io);
      return reportCommand(so, io);
    }
    // Files are split into ranges; stdin, which cannot be, is dealt round-robin.
    if (o.shard && !paths.includes('-')) return rangeShardCommand(paths, so, io);
    return o.report ? reportCommand(so, io) : shardCommand(paths, so, io);
  }

  const scan = paths.length === 0;
  if (o.showText !== undefined) refuseStdin(paths);
  let extensions: string[] | undefined = o.ext ? o.ext.split(',').map((e) => (e.startsWith('.') ? e : '.' + e.trim())) : undefined;
  const { records, docRoots } = planInputs(paths, o, io);
  let source: string;
  if (scan) {
    const root = defaultScanRoot(packageRoot);
    docRoots.push(root);
    extensions ??= SOURCE_EXTENSIONS;
    source = displayPath(root);
    say(`cusim: no path given; scanning ${escapeText(source)} for near-duplicate source files and packages`);
  } else {
    source = paths.map((p) => (p === '-' ? 'stdin' : p)).join(' ');
  }
  const walkOptions = { extensions, gitignore: o.gitignore, exclude: o.exclude };
  const { files, unreadable } = expandPaths(docRoots, walkOptions);
  // With an explicit --format, files found in directories are records too.
  const docFiles: string[] = [];
  for (const f of files) {
    if (o.format !== 'auto') {
      const name = displayPath(f);
      records.push({ name, format: o.format, open: () => readFile(f), size: statSync(f).size, path: f });
    } else docFiles.push(f);
  }
  const mode: TextMode = o.mode ?? (docFiles.length === 0 && records.length > 0 ? 'words' : 'code');
  const weighting = o.weighting ?? defaultWeighting(o.weighted);
  const method = dedupMethod(weighting, o.weighted);
  const minTokens = o.minTokens ?? (scan ? 10 : 1);
  const featOptions: TextFeaturizerOptions = {
    mode,
    weighting,
    q: o.q,
    ...(o.hashBits === undefined ? {} : { hashBits: o.hashBits }),
    ...(o.native ? {} : { native: false }),
  };
  const bar = progress(wantsProgress(o), io.stderr);
  // Reading feeds the library's pipeline, which hashes blocks as they come.
  const queue = new BlockQueue<DedupBlock>();
  let reading = true;
  const tPipeline = performance.now();
  const listen = bar.listener(
    { hash: 'hashing', candidates: 'finding candidate pairs', verify: 'verifying pairs' },
    { hash: 'docs', verify: 'pairs' },
  );
  const pending = dedupRecords(queue, {
    method,
    threshold: o.threshold,
    recall: o.recall,
    samples: params.samples,
    seed: o.seed,
    backend,
    devices: o.devices,
    signal: io.signal,
    spill: { afterBytes: o.spillAfter, ...(o.spillDir === undefined ? {} : { dir: o.spillDir }) },
    // While reading, the reading bar is the job's progress.
    onProgress: listen && ((e) => !reading && listen(e)),
  });
  // Its failure surfaces below, once reading has stopped (queue.stopped tells
  // the readers, and frees one waiting for room in the queue).
  pending.catch(() => queue.abandon());
  let stats: ReadStats;
  try {
    await tables;
    stats = await featurize(
      records,
      docFiles,
      unreadable,
      o,
      io,
      bar,
      mode,
      minTokens,
      featOptions,
      method,
      (b) => queue.push(b),
      queue.stopped.signal,
      // On the CUDA backend the GPUs that hash also split and hash the tokens,
      // and make the rows' band keys where the hashes are.
      backend === 'cuda' ? gpuIndices(o.devices) : [],
      method === 'classic' ? { samples: params.samples, seed: o.seed, bands: params.bands, rows: params.rows } : undefined,
    );
  } catch (e) {
    queue.close();
    await pending.catch(() => {});
    throw e;
  } finally {
    reading = false;
  }
  queue.close();
  if (queue.stopped.signal.aborted) await pending; // the pipeline failed: its error, not the reader's
  if (io.signal?.aborted) {
    await pending.catch(() => {});
    return 0;
  }
  const { skipped, documents, tooSmall } = stats;
  endStage('read + featurize');
  let skipSummary = '';
  if (skipped.length) {
    const by = new Map<string, number>();
    for (const s of skipped) by.set(s.reason, (by.get(s.reason) ?? 0) + 1);
    skipSummary = [...by].map(([r, n]) => `${n} ${r}`).join(', ');
    say(`cusim: skipped ${skipped.length} file(s): ${skipSummary}${o.verbose ? '' : ' (--verbose lists them)'}`);
    if (o.verbose) for (const s of skipped) say(`  skipped (${s.reason}${s.detail ? `: ${s.detail}` : ''}): ${escapeText(s.id)}`);
  }
  if (stats.rows === 0 || stats.cols === 0) {
    await pending.catch(() => {});
    const where =
      escapeText(source) + (extensions && docFiles.length === 0 && records.length === 0 ? ` with extensions ${extensions.join(',')}` : '');
    const why =
      documents === 0
        ? skipped.length
          ? `: ${skipped.length} file(s) skipped (${skipSummary})`
          : ''
        : `: ${documents} read, none with at least ${Math.max(1, minTokens)} token(s)`;
    const fix =
      documents > 0
        ? 'lower --min-tokens or pick another --mode'
        : scan
          ? 'install packages first or name a path'
          : 'check the path, --ext, --exclude or --format';
    throw new CliError(`no documents found in ${where}${why}`, fix, 1);
  }
  const curve = recallCurve(
    params.bands,
    params.rows,
    o.threshold,
    recallParams(o.threshold, DEDUP_DEFAULTS.samples, { recall: o.recall }).at,
  );
  say(
    `cusim: ${featureLine(stats, o.hashBits)}; ${method} MinHash, ${params.samples} samples, LSH ${params.bands} bands × ${params.rows} rows`,
  );

  let result;
  try {
    result = await pending;
  } catch (e) {
    if (io.signal?.aborted) return 0;
    throw e;
  } finally {
    bar.stop();
  }
  // Hashing ran alongside reading; what is left of it after reading, then banding and verification.
  const hashEnd = tPipeline + result.ms.hash;
  stages.push({ stage: 'hash', ms: Math.max(0, Math.round(hashEnd - tStage)) });
  tStage = Math.max(tStage, hashEnd);
  endStage('lsh + verify');
  // Names only for the rows a report shows (all of them for a package scan).
  const ids = scan ? Array.from({ length: result.ids.length }, (_, i) => result.ids.get(i)) : undefined;
  let groups = buildGroups(ids ?? ((row) => result.ids.get(row)), result);
  let withinPackageGroups: number | undefined;
  if (scan) ({ groups, within: withinPackageGroups } = acrossPackages(groups, !!o.withinPackage));
  if (o.showText !== undefined) {
    const sources = records.map((input) => ({ name: input.name, open: input.open, options: recordOptionsOf(input, records.length, o) }));
    await attachTexts(groups, o.showText, sources, fileIds(docFiles, displayPath), o.maxSize);
  }
  const report: DedupReport = {
    schema: 'cusim.dedup/1',
    backend,
    gpus: backend === 'cuda' ? devices().gpus.map((g) => g.name) : [],
    options: { threshold: o.threshold, samples: params.samples, seed: o.seed, mode, weighting, method },
    input: { source, documents, featurized: stats.rows, tooSmall, skipped },
    lsh: { bands: params.bands, rows: params.rows, samples: params.samples, recall: curve },
    groups,
    packages: ids ? buildPackagePairs(groups, ids, docRoots[docRoots.length - 1]) : [],
    ...(withinPackageGroups === undefined ? {} : { withinPackageGroups }),
    stages,
    elapsedMs: 0,
  };
  endStage('groups');
  report.elapsedMs = Math.round(performance.now() - t0);
  const chunks = o.json
    ? renderJson(report)
    : o.csv
      ? renderCsv(report)
      : renderTable(report, o.limit === 0 ? Infinity : o.limit, { collapse: scan && !o.withinPackage });
  // Written 1 MiB at a time: stdout to a file is a synchronous write per call.
  let pendingOut = '';
  for (const c of chunks) {
    pendingOut += c;
    if (pendingOut.length < OUT_CHARS) continue;
    if (io.stdoutClosed?.()) break;
    io.stdout.write(pendingOut);
    pendingOut = '';
  }
  if (pendingOut && !io.stdoutClosed?.()) io.stdout.write(pendingOut);
  if (!o.json && !o.csv && o.verbose) say(`cusim: stages ${stages.map((s) => `${s.stage} ${(s.ms / 1000).toFixed(2)} s`).join(', ')}`);
  return 0;
}

const BATCH_CHARS = 4 << 20;
const OUT_CHARS = 1 << 20;
/**
 * A record file as a stream of 1 MiB chunks: the default 64 KiB made
 * ~50,000 chunks (each an allocation, an event and a gather into blocks) per
 * 3 GB on the one thread that reads.
 */
const readFile = (p: string): Readable => createReadStream(p, { highWaterMark: 1 << 20 });
// Record formats read line by line (csv and tsv records may span lines).
const LINE_FORMATS: ReadonlySet<RecordFormat> = new Set(['auto', 'lines', 'jsonl']);
const TABLE_FORMATS: ReadonlySet<RecordFormat> = new Set(['csv', 'tsv']);

/** Whether a file starts with a UTF-16LE byte-order mark (csv-parse then decodes it as UTF-16; the native reader reads UTF-8 only). */
async function utf16(file: string): Promise<boolean> {
  const fh = await open(file, 'r');
  try {
    const { buffer, bytesRead } = await fh.read(Buffer.alloc(2), 0, 2, 0);
    return bytesRead === 2 && buffer[0] === 0xff && buffer[1] === 0xfe;
  } finally {
    await fh.close();
  }
}

// Workers pay off once a core is left for the main thread's merge; on two
// cores or fewer the single-threaded path is faster.
function defaultThreads(): number {
  const n = availableParallelism();
  return n >= 4 ? Math.min(n - 1, 16) : 1;
}

function recallHelp(): string {
  const p = recallParams(DEDUP_DEFAULTS.threshold, DEDUP_DEFAULTS.samples, { recall: DEDUP_DEFAULTS.recall });
  const rows = recallCurve(p.bands, p.rows, DEDUP_DEFAULTS.threshold, p.at)
    .map((c) => `  ${c.similarity.toFixed(3).padStart(10)}  ${c.probability.toFixed(3)}`)
    .join('\n');
  return (
    `\nLSH banding: (bands, rows) are chosen so a pair at similarity threshold + 0.05 becomes a candidate\n` +
    `with probability at least --recall (default ${DEDUP_DEFAULTS.recall}), with the fewest false candidates; pairs\n` +
    `are then verified exactly. With --samples left out, ${DEDUP_DEFAULTS.samples} samples bound the choice (more are\n` +
    `hashed, and said so, where ${DEDUP_DEFAULTS.samples} cannot reach the recall). At the defaults (threshold ${DEDUP_DEFAULTS.threshold}):\n` +
    `${p.bands} bands × ${p.rows} rows, P(candidate) by similarity:\n  similarity  P(candidate)\n${rows}\n` +
    `--json reports the curve for the options given.\n` +
    `\nRecords: files named with .jsonl/.ndjson/.csv/.tsv (or any file with --format) are read as records,\n` +
    `streamed; other files are one document each. Directory walks honour .gitignore files and --exclude.\n`
  );
}

export function registerDedup(program: Command, io: Io, done: (code: number) => void): void {
  const cmd = program
    .command('dedup')
    .description(
      'find near-duplicate files or records (MinHash + LSH + exact verification); ' +
        'with no path, scans ./node_modules for copied source files and packages',
    )
    .argument('[paths...]', "files, directories (recursive) or '-' for records on stdin")
    .option(
      '-t, --threshold <x>',
      'similarity threshold (set Jaccard for binary features, else weighted Jaccard)',
      between('threshold', 0, 1),
      DEDUP_DEFAULTS.threshold,
    )
    .option(
      '-r, --recall <p>',
      'least probability of finding a pair at similarity threshold + 0.05',
      between('recall', 0, 1),
      DEDUP_DEFAULTS.recall,
    )
    .option(
      '-s, --samples <n>',
      `MinHash samples per document (default: what --recall needs, at most ${DEDUP_DEFAULTS.samples} where that suffices)`,
      integer('samples', 1, 65536),
    )
    .option('--seed <n>', 'random seed (signatures are reproducible for a seed)', integer('seed', 0, 2 ** 32 - 1), DEDUP_DEFAULTS.seed)
    .addOption(
      new Option(
        '-m, --mode <mode>',
        'features: code (identifier names), words, qgrams (default: words for records, code for files)',
      ).choices(['code', 'words', 'qgrams']),
    )
    .addOption(
      new Option(
        '-w, --weighting <w>',
        'feature weights: binary (sets; classic MinHash, the default), count or tfidf (weighted MinHash)',
      ).choices(['count', 'binary', 'tfidf']),
    )
    .option('--weighted', 'weighted MinHash over token counts (or --weighting tfidf) instead of classic MinHash over token sets')
    .option('-q, --q <n>', 'q for --mode qgrams', integer('q', 1, 16), 3)
    .addOption(new Option('-b, --backend <b>', 'compute backend').choices(['auto', 'cpu', 'cuda']).default('auto'))
    .option('-d, --devices <list>', "GPUs to use: 'all' or indices like 0,1", deviceList)
    .option('--json', 'print the report as JSON (schema cusim.dedup/1)')
    .option('--csv', 'print one CSV row per group member: group,size,id,similarity');
  recordOptions(cmd, 'record format of stdin and files (auto: by extension for files, JSONL or lines for stdin)', 'record');
  cmd
    .option('--ext <list>', 'only files with these extensions, e.g. js,ts (default: all files; .js/.ts family for node_modules scans)')
    .option('--exclude <glob>', 'leave out paths matching this glob in directory walks (repeatable), e.g. "**/test/**"', collect, [])
    .option('--no-gitignore', 'walk files that .gitignore files exclude')
    .option('--max-size <bytes>', 'skip files (and records) larger than this', integer('max-size', 1, 2 ** 31), 4 * 1024 * 1024)
    .option(
      '--spill-after <bytes>',
      'token sets kept in memory for verification; the rest go to an unlinked file in --spill-dir',
      integer('spill-after', 0, Number.MAX_SAFE_INTEGER),
      SPILL_AFTER_BYTES,
    )
    .option('--spill-dir <dir>', 'where token sets past --spill-after go (default: the temporary directory, TMPDIR)')
    .option(
      '--min-tokens <n>',
      'ignore documents with fewer tokens (default: 10 for node_modules scans, else 1)',
      integer('min-tokens', 0, 1e9),
    )
    .option('--limit <n>', 'groups shown in the table (0: all)', integer('limit', 0, 1e9), 50)
    .option('--show-text <n>', 'print the first n characters of each group member (files and records)', integer('show-text', 1, 1e6))
    .option('--within-package', 'node_modules scans: also report groups whose files all lie in one package (src and dist copies)')
    .option(
      '--threads <n>',
      'worker threads reading and featurizing files and JSONL or line records (1: main thread only)',
      integer('threads', 1, 256),
      defaultThreads(),
    )
    .option('--no-native', 'tokenize in JavaScript instead of the native tokenizer (same output; for comparison)')
    .addOption(
      new Option(
        '--reader <r>',
        'JSONL, line, CSV and TSV records: native (simdjson, libcsv, where compiled in) or js (JSON.parse, csv-parse; same output)',
      )
        .choices(['native', 'js'])
        .default('native'),
    )
    .option(
      '--hash-bits <n>',
      `hash features into 2^n columns instead of a vocabulary (default with --redis: ${DEFAULT_HASH_BITS})`,
      integer('hash-bits', 1, 31),
    )
    .option('--redis <url>', 'scale out: share one index in Redis (redis://host:port; any node of a cluster)')
    .option('--queue', 'with --redis: split the files into ranges for `cusim worker`s, wait for them, print the report')
    .option(
      '--shard <i/N>',
      'with --redis: do ranges i, i+N, … of the files (stdin: records j with j mod N = i); ' +
        'JOB_COMPLETION_INDEX/N takes i from that variable (Kubernetes Indexed Jobs)',
    )
    .option('--report', 'with --redis: compute and print the groups of every shard')
    .option('--drop', "with --redis: delete every key of the job's --prefix")
    .option(
      '--range-bytes <n>',
      `with --queue or --shard over files: bytes per range (default ${DEFAULT_RANGE_BYTES})`,
      integer('range-bytes', 1, 2 ** 40),
    )
    .option('--prefix <name>', "with --redis: the job's key prefix (one per corpus and settings)", 'cusim-dedup')
    .option('--redis-ca <file>', 'with --redis rediss://: the PEM certificate of the CA that signed the server')
    .option(
      '--redis-retry <seconds>',
      'with --redis: keep retrying an unreachable server this long, then exit 1',
      integer('redis-retry', 0, 86400),
      120,
    )
    .option('--allow-eviction', "with --shard: run on a server whose maxmemory-policy may evict the job's keys (a warning, not a refusal)")
    .option(
      '--crash-at <point>',
      'with --shard, for recovery tests: kill the worker (SIGKILL) at claim, batch:B (before batch B is inserted) or insert:B (after)',
    )
    .option(
      '--batch-docs <n>',
      'with --shard: documents per insert batch (a restarted worker resumes after the last finished batch)',
      integer('batch-docs', 1, 1e7),
      4096,
    )
    .option('--no-progress', 'never show progress')
    .option('--quiet', 'print only the result')
    .option('-v, --verbose', 'list skipped files and stage times; print stack traces on errors')
    .addHelpText('after', recallHelp)
    .action(async (paths: string[], opts: DedupCommandOptions) => {
      done(await dedupCommand(paths, opts, io));
    });
}

function collect(v: string, prev: string[]): string[] {
  return [...prev, v];
}
