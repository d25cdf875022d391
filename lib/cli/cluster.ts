// `cusim cluster`: reads documents from stdin as they arrive and writes one
// JSON line per document, {id, cluster, similarity, created}, as soon as its
// micro-batch is assigned. Features: words (or code names, q-grams) with
// TF-IDF over the document frequencies seen so far.
import { Command, Option } from 'commander';
import type { Readable } from 'node:stream';
import { resolveBackend } from '../backend.js';
import { NO_CLUSTER, StreamClusterer } from '../cluster.js';
import { TextFeaturizer } from '../text/index.js';
import type { TextMode } from '../text/index.js';
import { CliError } from './errors.js';
import { safeJson } from './escape.js';
import { backendLine, integer, recordOptions, wantsProgress } from './options.js';
import { progress } from './progress.js';
import { readRecords } from './records.js';
import type { Doc } from './records.js';
import { MAX_DOC_BYTES } from './sources.js';
import type { Io } from './options.js';

interface ClusterCliOptions {
  threshold: number;
  maxTerms: number;
  decay?: number;
  batch: number;
  mode: TextMode;
  format: 'auto' | 'lines' | 'jsonl' | 'csv' | 'tsv';
  field: string;
  idField: string;
  header: boolean;
  columns?: string[];
  backend: 'auto' | 'cpu' | 'cuda';
  quiet?: boolean;
  progress: boolean;
}

function unitInterval(v: string): number {
  const x = Number(v);
  if (v.trim() === '' || !Number.isFinite(x) || x < 0 || x > 1) {
    throw new CliError(`--threshold must be a number in [0, 1], got ${v}`, 'e.g. --threshold 0.5', 2);
  }
  return x;
}

async function clusterCommand(o: ClusterCliOptions, io: Io): Promise<number> {
  if (io.stdinIsTTY && !o.quiet) io.stderr.write('cusim: reading documents from stdin, one per line (Ctrl-D ends)\n');
  const backend = resolveBackend(o.backend, '--backend');
  if (!o.quiet) io.stderr.write(backendLine(backend) + '\n');
  const clusterer = new StreamClusterer({
    threshold: o.threshold,
    maxTerms: o.maxTerms,
    backend,
    decay: o.decay === undefined ? undefined : { maxAge: o.decay },
  });
  const feat = new TextFeaturizer({ mode: o.mode, weighting: 'tfidf' });
  let pending: Doc[] = [];
  let chain: Promise<void> = Promise.resolve();
  let failure: unknown;
  let timer: NodeJS.Timeout | undefined;
  let documents = 0;
  // A bar only where it cannot interleave with the result lines on one terminal.
  const bar = progress(wantsProgress(o) && !(io.stdout as { isTTY?: boolean }).isTTY, io.stderr);
  bar.stage('clustering', undefined, 'docs');

  const flush = (): void => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (pending.length === 0) return;
    const batch = pending;
    pending = [];
    chain = chain.then(async () => {
      if (failure || io.signal?.aborted) return;
      try {
        feat.addBatch(batch.map((d) => d.text));
        const r = await clusterer.add(feat.build());
        let out = '';
        batch.forEach((d, i) => {
          const c = r.cluster[i];
          out +=
            safeJson({
              id: d.id,
              cluster: c === NO_CLUSTER ? null : c,
              similarity: Math.round(r.similarity[i] * 1e6) / 1e6,
              created: r.created[i] === 1,
            }) + '\n';
        });
        if (!io.stdoutClosed?.()) io.stdout.write(out);
        bar.update((documents += batch.length));
      } catch (e) {
        failure = e;
      }
    });
  };

  try {
    const records = readRecords(io.stdin as Readable, {
      format: o.format,
      field: o.field,
      idField: o.idField,
      header: o.header,
      columns: o.columns,
      source: 'stdin',
      maxRecordBytes: MAX_DOC_BYTES,
    });
    for await (const d of records) {
      if (failure || io.signal?.aborted) break;
      pending.push(d);
      if (pending.length >= o.batch) flush();
      // Interactive streams: a short pause assigns what has arrived so far.
      else if (!timer) timer = setTimeout(flush, 20);
    }
    flush();
    await chain;
    bar.stop();
    if (failure) throw failure;
    if (io.signal?.aborted) return 0;
    if (clusterer.documents === 0) throw new CliError('no documents found in stdin', 'pipe documents in, one per line or JSONL', 1);
    if (!o.quiet) io.stderr.write(`cusim: ${clusterer.documents} documents, ${clusterer.size} clusters\n`);
    return 0;
  } finally {
    if (timer) clearTimeout(timer);
    await chain;
    bar.stop();
    clusterer.dispose();
  }
}

export function registerCluster(program: Command, io: Io, done: (code: number) => void): void {
  const cmd = program
    .command('cluster')
    .description('cluster a stream of documents from stdin; writes {id, cluster, similarity, created} JSON lines as they are assigned')
    .option('-t, --threshold <x>', 'cosine similarity to join a cluster (strictly above)', unitInterval, 0.5)
    .option('--max-terms <n>', 'top terms kept per document and cluster', integer('max-terms', 1, 1024), 35)
    .option('--decay <n>', 'a cluster expires after this many documents without a new member', integer('decay', 0, 2 ** 31))
    .option('--batch <n>', 'documents per micro-batch (at most)', integer('batch', 1, 1 << 20), 256)
    .addOption(new Option('-m, --mode <mode>', 'features').choices(['words', 'code', 'qgrams']).default('words'));
  recordOptions(cmd, 'input records: text lines, JSON objects, CSV or TSV', 'document', { delimiter: false });
  cmd
    .addOption(new Option('-b, --backend <b>', 'compute backend').choices(['auto', 'cpu', 'cuda']).default('auto'))
    .option('--no-progress', 'never show progress')
    .option('--quiet', 'print only the result lines')
    .option('-v, --verbose', 'print stack traces on errors')
    .action(async (opts: ClusterCliOptions) => done(await clusterCommand(opts, io)));
}
