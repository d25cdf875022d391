// `cusim dedup`: near-duplicate groups over files, trees, node_modules or
// stdin records (weighted MinHash + LSH + exact verification).
import { Command, Option } from 'commander';
import { packageRoot } from '../addon.js';
import { devices, resolveBackend } from '../backend.js';
import { dedup } from '../lsh.js';
import { TextFeaturizer } from '../text/index.js';
import type { TextFeaturizerOptions, TextMode, Weighting } from '../text/index.js';
import { availableParallelism } from 'node:os';
import { featurizeFilesParallel } from './parallel.js';
import { DEFAULT_HASH_BITS, reportCommand, shardCommand } from './dedup-shard.js';
import { CliError } from './errors.js';
import { backendLine, between, deviceList, integer } from './options.js';
import type { Io } from './options.js';
import { progress } from './progress.js';
import { buildGroups, buildPackagePairs, renderCsv, renderTable } from './report.js';
import type { DedupReport, DedupResultLike } from './report.js';
import { SOURCE_EXTENSIONS, defaultScanRoot, displayPath, expandPaths, parseRecords, readDoc } from './sources.js';
import type { Doc, RecordFormat, Skip } from './sources.js';

export interface DedupOptions {
  threshold: number;
  samples: number;
  seed: number;
  mode?: TextMode;
  weighting: Weighting;
  q: number;
  backend: 'auto' | 'cpu' | 'cuda';
  devices?: 'all' | number[];
  json?: boolean;
  csv?: boolean;
  format: RecordFormat;
  field: string;
  idField: string;
  ext?: string;
  maxSize: number;
  minTokens?: number;
  limit: number;
  threads: number;
  native: boolean;
  quiet?: boolean;
  progress: boolean;
  verbose?: boolean;
  hashBits?: number;
  redis?: string;
  shard?: string;
  report?: boolean;
  prefix: string;
  batchDocs: number;
}

async function dedupCommand(paths: string[], o: DedupOptions, io: Io): Promise<number> {
  const t0 = performance.now();
  if (o.json && o.csv) throw new CliError('--json and --csv cannot be combined', 'pick one output format', 2);
  const say = (s: string): void => {
    if (!o.quiet) io.stderr.write(s + '\n');
  };
  const backend = resolveBackend(o.backend, '--backend');
  say(backendLine(backend));
  if (o.redis !== undefined || o.shard !== undefined || o.report) {
    if (o.redis === undefined) throw new CliError('--shard and --report need --redis URL', 'e.g. --redis redis://127.0.0.1:6379', 2);
    if (!!o.shard === !!o.report) throw new CliError('--redis needs either --shard i/N (a worker) or --report', 'see "Scaling out" in the README', 2);
    const so = { ...o, redis: o.redis, backend };
    return o.report ? reportCommand(so, io) : shardCommand(paths, so, io);
  }

  const scan = paths.length === 0;
  const stdin = paths.includes('-');
  const named = paths.filter((p) => p !== '-');
  let source: string;
  let extensions: string[] | undefined = o.ext
    ? o.ext.split(',').map((e) => (e.startsWith('.') ? e : '.' + e.trim()))
    : undefined;
  let roots = named;
  if (scan) {
    const root = defaultScanRoot(packageRoot);
    roots = [root];
    extensions ??= SOURCE_EXTENSIONS;
    source = displayPath(root);
    say(`cusim: no path given; scanning ${source} for near-duplicate source files and packages`);
  } else {
    source = paths.join(' ');
  }
  const mode: TextMode = o.mode ?? (stdin && named.length === 0 ? 'words' : 'code');
  const minTokens = o.minTokens ?? (scan ? 10 : 1);
  const featOptions: TextFeaturizerOptions = {
    mode,
    weighting: o.weighting,
    q: o.q,
    ...(o.hashBits === undefined ? {} : { hashBits: o.hashBits }),
    ...(o.native ? {} : { native: false }),
  };
  const feat = new TextFeaturizer(featOptions);

  const ids: string[] = [];
  const skipped: Skip[] = [];
  let tooSmall = 0;
  let documents = 0;
  // Documents are featurized in batches (tokenized natively over all cores
  // where the addon loads); rows keep the order documents arrive in.
  let pending: Doc[] = [];
  let pendingChars = 0;
  const flush = (): void => {
    const tokens = feat.addBatch(pending.map((d) => d.text), minTokens);
    pending.forEach((d, i) => {
      if (tokens[i] < minTokens) tooSmall++;
      else ids.push(d.id);
    });
    documents += pending.length;
    pending = [];
    pendingChars = 0;
  };
  const addDoc = (d: Doc): void => {
    pending.push(d);
    pendingChars += d.text.length;
    if (pendingChars >= BATCH_CHARS) flush();
  };

  if (stdin) {
    if (io.stdinIsTTY) throw new CliError("'-' reads records from stdin, but stdin is a terminal", 'pipe data in, e.g. cat docs.jsonl | cusim dedup -', 2);
    for (const d of parseRecords(await io.readStdin(), o.format, o.field, o.idField)) addDoc(d);
    flush();
  }
  const { files, unreadable } = expandPaths(roots, extensions);
  for (const u of unreadable) skipped.push({ id: displayPath(u), reason: 'unreadable' });
  const bar = progress(o.progress && !o.quiet);
  bar.start(files.length, mode === 'code' ? 'featurizing (bag of names)' : `featurizing (${mode})`);
  if (o.threads > 1 && files.length > 4 * o.threads) {
    const r = await featurizeFilesParallel(feat, {
      files,
      ids: files.map(displayPath),
      options: featOptions,
      maxBytes: o.maxSize,
      minTokens,
      threads: o.threads,
      onFiles: (n) => bar.tick(n),
    });
    ids.push(...r.rows);
    skipped.push(...r.skipped);
    tooSmall += r.tooSmall;
    documents += r.documents;
  } else {
    for (const f of files) {
      const d = readDoc(f, displayPath(f), o.maxSize);
      if ('text' in d) addDoc(d);
      else skipped.push(d);
      bar.tick();
    }
    flush();
  }
  bar.stop();
  const matrix = feat.build();
  if (skipped.length) {
    const by = new Map<string, number>();
    for (const s of skipped) by.set(s.reason, (by.get(s.reason) ?? 0) + 1);
    say(`cusim: skipped ${skipped.length} file(s): ${[...by].map(([r, n]) => `${n} ${r}`).join(', ')}${o.verbose ? '' : ' (--verbose lists them)'}`);
    if (o.verbose) for (const s of skipped) say(`  skipped (${s.reason}): ${s.id}`);
  }
  if (!scan && !stdin && documents === 0) {
    throw new CliError(`no files found under ${source}${extensions ? ` with extensions ${extensions.join(',')}` : ''}`, 'check the path or --ext', 1);
  }
  say(`cusim: ${matrix.rows} documents, ${matrix.indices.length} nonzeros over ${matrix.cols} features; hashing ${o.samples} samples…`);

  // Ctrl-C cancels the native work between chunks instead of killing the
  // process mid-copy.
  const ac = new AbortController();
  const onInt = (): void => ac.abort();
  process.once('SIGINT', onInt);
  let result: DedupResultLike;
  try {
    result = await dedup(matrix, {
      threshold: o.threshold,
      samples: o.samples,
      seed: o.seed,
      backend,
      devices: o.devices,
      signal: ac.signal,
    });
  } finally {
    process.off('SIGINT', onInt);
  }
  const groups = buildGroups(ids, result);
  const report: DedupReport = {
    schema: 'cusim.dedup/1',
    backend,
    gpus: backend === 'cuda' ? devices().gpus.map((g) => g.name) : [],
    options: { threshold: o.threshold, samples: o.samples, seed: o.seed, mode, weighting: o.weighting },
    input: { source, documents, featurized: matrix.rows, tooSmall, skipped },
    groups,
    packages: scan ? buildPackagePairs(groups, ids, roots[0]) : [],
    elapsedMs: Math.round(performance.now() - t0),
  };
  if (o.json) io.stdout.write(JSON.stringify(report, null, 2) + '\n');
  else if (o.csv) io.stdout.write(renderCsv(report));
  else io.stdout.write(renderTable(report, o.limit === 0 ? Infinity : o.limit));
  return 0;
}

const BATCH_CHARS = 4 << 20;

// Workers pay off once a core is left for the main thread's merge; on two
// cores or fewer the single-threaded path is faster.
function defaultThreads(): number {
  const n = availableParallelism();
  return n >= 4 ? Math.min(n - 1, 16) : 1;
}

export function registerDedup(program: Command, io: Io, done: (code: number) => void): void {
  program
    .command('dedup')
    .description(
      'find near-duplicate files or records (weighted MinHash + LSH + exact verification); ' +
        'with no path, scans ./node_modules for copied source files and packages',
    )
    .argument('[paths...]', "files, directories (recursive) or '-' for records on stdin")
    .option('-t, --threshold <x>', 'weighted Jaccard similarity threshold', between('threshold', 0, 1), 0.9)
    .option('-s, --samples <n>', 'MinHash samples per document', integer('samples', 1, 4096), 128)
    .option('--seed <n>', 'random seed (signatures are reproducible for a seed)', integer('seed', 0, 2 ** 32 - 1), 1)
    .addOption(new Option('-m, --mode <mode>', 'features: code (identifier names), words, qgrams (default: code for files, words for stdin)').choices(['code', 'words', 'qgrams']))
    .addOption(new Option('-w, --weighting <w>', 'feature weights').choices(['count', 'binary', 'tfidf']).default('count'))
    .option('-q, --q <n>', 'q for --mode qgrams', integer('q', 1, 16), 3)
    .addOption(new Option('-b, --backend <b>', 'compute backend').choices(['auto', 'cpu', 'cuda']).default('auto'))
    .option('-d, --devices <list>', "GPUs to use: 'all' or indices like 0,1", deviceList)
    .option('--json', 'print the report as JSON (schema cusim.dedup/1)')
    .option('--csv', 'print one CSV row per group member: group,size,id,similarity')
    .addOption(new Option('-f, --format <f>', 'stdin record format').choices(['auto', 'lines', 'jsonl', 'csv']).default('auto'))
    .option('--field <name>', 'JSONL/CSV field holding the text', 'text')
    .option('--id-field <name>', 'JSONL/CSV field holding the record id', 'id')
    .option('--ext <list>', 'only files with these extensions, e.g. js,ts (default: all files; .js/.ts family for node_modules scans)')
    .option('--max-size <bytes>', 'skip files larger than this', integer('max-size', 1, 2 ** 31), 4 * 1024 * 1024)
    .option('--min-tokens <n>', 'ignore documents with fewer tokens (default: 10 for node_modules scans, else 1)', integer('min-tokens', 0, 1e9))
    .option('--limit <n>', 'groups shown in the table (0: all)', integer('limit', 0, 1e9), 50)
    .option('--threads <n>', 'worker threads reading and featurizing files (1: main thread only)', integer('threads', 1, 256), defaultThreads())
    .option('--no-native', 'tokenize in JavaScript instead of the native tokenizer (same output; for comparison)')
    .option('--hash-bits <n>', `hash features into 2^n columns instead of a vocabulary (default with --redis: ${DEFAULT_HASH_BITS})`, integer('hash-bits', 1, 31))
    .option('--redis <url>', 'scale out: share one index in Redis (redis://host:port; any node of a cluster)')
    .option('--shard <i/N>', 'with --redis: featurize, hash and insert documents j with j mod N = i of the input')
    .option('--report', 'with --redis: compute and print the groups of every shard')
    .option('--prefix <name>', 'with --redis: the job\'s key prefix (one per corpus and settings)', 'cusim-dedup')
    .option('--batch-docs <n>', 'with --shard: documents per insert batch (a restarted worker resumes after the last finished batch)', integer('batch-docs', 1, 1e7), 4096)
    .option('--no-progress', 'never show a progress bar')
    .option('--quiet', 'print only the result')
    .option('-v, --verbose', 'list skipped files; print stack traces on errors')
    .action(async (paths: string[], opts: DedupOptions) => {
      done(await dedupCommand(paths, opts, io));
    });

}
