// `cusim cluster`: reads documents from stdin as they arrive and writes one
// JSON line per document, {id, cluster, similarity, created}, as soon as its
// micro-batch is assigned. Features: words (or code names, q-grams) with
// TF-IDF over the document frequencies seen so far.
import { Command, Option } from 'commander';
import { createInterface } from 'node:readline';
import { resolveBackend } from '../backend.js';
import { NO_CLUSTER, StreamClusterer } from '../cluster.js';
import { TextFeaturizer } from '../text/index.js';
import type { TextMode } from '../text/index.js';
import { CliError } from './errors.js';
import { backendLine, integer } from './options.js';
import type { Io } from './options.js';

interface ClusterCliOptions {
  threshold: number;
  maxTerms: number;
  decay?: number;
  batch: number;
  mode: TextMode;
  format: 'auto' | 'lines' | 'jsonl';
  field: string;
  idField: string;
  backend: 'auto' | 'cpu' | 'cuda';
  quiet?: boolean;
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
  let format = o.format;
  let lineNo = 0;
  let pending: { id: string; text: string }[] = [];
  let chain: Promise<void> = Promise.resolve();
  let failure: unknown;
  let timer: NodeJS.Timeout | undefined;

  const flush = (): void => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (pending.length === 0) return;
    const batch = pending;
    pending = [];
    chain = chain.then(async () => {
      if (failure) return;
      try {
        feat.addBatch(batch.map((d) => d.text));
        const r = await clusterer.add(feat.build());
        let out = '';
        batch.forEach((d, i) => {
          const c = r.cluster[i];
          out +=
            JSON.stringify({
              id: d.id,
              cluster: c === NO_CLUSTER ? null : c,
              similarity: Math.round(r.similarity[i] * 1e6) / 1e6,
              created: r.created[i] === 1,
            }) + '\n';
        });
        io.stdout.write(out);
      } catch (e) {
        failure = e;
      }
    });
  };

  const parse = (line: string): { id: string; text: string } | undefined => {
    lineNo++;
    if (line.trim() === '') return undefined;
    if (format === 'auto') format = line.trim().startsWith('{') ? 'jsonl' : 'lines';
    if (format === 'lines') return { id: String(lineNo), text: line };
    let rec: unknown;
    try {
      rec = JSON.parse(line);
    } catch {
      throw new CliError(`stdin line ${lineNo} is not valid JSON`, 'fix the line or use --format lines', 1);
    }
    const obj = (rec ?? {}) as Record<string, unknown>;
    if (typeof obj[o.field] !== 'string') throw new CliError(`stdin line ${lineNo} has no string field '${o.field}'`, 'name it with --field', 1);
    const id = obj[o.idField];
    return { id: id === undefined || id === null ? String(lineNo) : String(id), text: obj[o.field] as string };
  };

  try {
    const rl = createInterface({ input: io.stdin, crlfDelay: Infinity });
    for await (const line of rl) {
      if (failure) break;
      const d = parse(line);
      if (!d) continue;
      pending.push(d);
      if (pending.length >= o.batch) flush();
      // Interactive streams: a short pause assigns what has arrived so far.
      else if (!timer) timer = setTimeout(flush, 20);
    }
    flush();
    await chain;
    if (failure) throw failure;
    if (!o.quiet) io.stderr.write(`cusim: ${clusterer.documents} documents, ${clusterer.size} clusters\n`);
    return 0;
  } finally {
    if (timer) clearTimeout(timer);
    await chain;
    clusterer.dispose();
  }
}

export function registerCluster(program: Command, io: Io, done: (code: number) => void): void {
  program
    .command('cluster')
    .description('cluster a stream of documents from stdin; writes {id, cluster, similarity, created} JSON lines as they are assigned')
    .option('-t, --threshold <x>', 'cosine similarity to join a cluster (strictly above)', unitInterval, 0.5)
    .option('--max-terms <n>', 'top terms kept per document and cluster', integer('max-terms', 1, 1024), 35)
    .option('--decay <n>', 'a cluster expires after this many documents without a new member', integer('decay', 0, 2 ** 31))
    .option('--batch <n>', 'documents per micro-batch (at most)', integer('batch', 1, 1 << 20), 256)
    .addOption(new Option('-m, --mode <mode>', 'features').choices(['words', 'code', 'qgrams']).default('words'))
    .addOption(new Option('-f, --format <f>', 'input lines: text or JSON objects').choices(['auto', 'lines', 'jsonl']).default('auto'))
    .option('--field <name>', 'JSONL field holding the text', 'text')
    .option('--id-field <name>', 'JSONL field holding the document id (default: line number)', 'id')
    .addOption(new Option('-b, --backend <b>', 'compute backend').choices(['auto', 'cpu', 'cuda']).default('auto'))
    .option('--quiet', 'print only the result lines')
    .option('-v, --verbose', 'print stack traces on errors')
    .action(async (opts: ClusterCliOptions) => done(await clusterCommand(opts, io)));
}
