// `cusim join`: every pair of records whose token sets are at least
// `threshold` similar (exact set similarity join), e.g. q-gram sets of names.
import { Command, Option } from 'commander';
import { readFileSync, statSync } from 'node:fs';
import { resolveBackend } from '../backend.js';
import { similarityJoin } from '../join.js';
import type { JoinMeasure } from '../join.js';
import { TextFeaturizer } from '../text/index.js';
import { CliError, fsError } from './errors.js';
import { backendLine, integer } from './options.js';
import type { Io } from './options.js';
import { parseRecords } from './sources.js';
import type { Doc, RecordFormat } from './sources.js';

interface JoinCliOptions {
  threshold: string;
  measure: JoinMeasure;
  qgram?: number;
  words?: boolean;
  backend: 'auto' | 'cpu' | 'cuda';
  format: RecordFormat;
  field: string;
  idField: string;
  json?: boolean;
  csv?: boolean;
  limit: number;
  quiet?: boolean;
}

/** Records of a file, or of stdin for '-'. */
export async function readRecords(file: string, io: Io, format: RecordFormat, field: string, idField: string): Promise<Doc[]> {
  let text: string;
  if (file === '-') {
    if (io.stdinIsTTY) throw new CliError("'-' reads records from stdin, but stdin is a terminal", 'pipe records in', 2);
    text = await io.readStdin();
  } else {
    try {
      if (!statSync(file).isFile()) throw new CliError(`not a file: ${file}`, 'pass a file of records (one per line, JSONL or CSV)', 1);
      text = readFileSync(file, 'utf8');
    } catch (e) {
      if (e instanceof CliError) throw e;
      throw fsError(e, file);
    }
  }
  return parseRecords(text, format, field, idField);
}

function checkThreshold(v: string, measure: JoinMeasure): number {
  const x = Number(v);
  if (measure === 'overlap') {
    if (!/^\d+$/.test(v.trim()) || x < 1) throw new CliError(`--threshold for --measure overlap must be an integer ≥ 1, got ${v}`, 'e.g. --threshold 3', 2);
  } else if (v.trim() === '' || !Number.isFinite(x) || x <= 0 || x > 1) {
    throw new CliError(`--threshold for --measure ${measure} must be a number in (0, 1], got ${v}`, 'e.g. --threshold 0.8', 2);
  }
  return x;
}

async function joinCommand(file: string, o: JoinCliOptions, io: Io): Promise<number> {
  const t0 = performance.now();
  if (o.json && o.csv) throw new CliError('--json and --csv cannot be combined', 'pick one output format', 2);
  if (o.words && o.qgram !== undefined) throw new CliError('--words and --qgram cannot be combined', 'pick one tokenization', 2);
  const threshold = checkThreshold(o.threshold, o.measure);
  const backend = resolveBackend(o.backend, '--backend');
  if (!o.quiet) io.stderr.write(backendLine(backend) + '\n');
  const records = await readRecords(file, io, o.format, o.field, o.idField);
  const q = o.qgram ?? 3;
  const feat = new TextFeaturizer(o.words ? { mode: 'words', weighting: 'binary' } : { mode: 'qgrams', q, weighting: 'binary' });
  const sets = feat.transform(records.map((r) => r.text));
  const r = await similarityJoin(sets, { threshold, measure: o.measure, backend: o.backend });
  const order = Array.from(r.left.keys()).sort((a, b) => r.left[a] - r.left[b] || r.right[a] - r.right[b]);
  const pairs = order.map((i) => ({
    left: records[r.left[i]].id,
    right: records[r.right[i]].id,
    overlap: r.overlap[i],
    similarity: Math.round(r.similarity[i] * 1e6) / 1e6,
  }));
  const tokens = o.words ? 'words' : `${q}-grams`;
  if (o.json) {
    const report = {
      schema: 'cusim.join/1',
      backend: r.backend,
      options: { threshold, measure: o.measure, tokens },
      records: records.length,
      pairs,
      elapsedMs: Math.round(performance.now() - t0),
    };
    io.stdout.write(JSON.stringify(report, null, 2) + '\n');
  } else if (o.csv) {
    io.stdout.write('left,right,overlap,similarity\n');
    const f = (s: string): string => (/[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s);
    for (const p of pairs) io.stdout.write(`${f(p.left)},${f(p.right)},${p.overlap},${p.similarity}\n`);
  } else {
    const text = new Map(records.map((d) => [d.id, d.text]));
    const clip = (s: string): string => (s.length > 60 ? s.slice(0, 59) + '…' : s);
    const limit = o.limit === 0 ? Infinity : o.limit;
    for (const p of pairs.slice(0, limit)) {
      io.stdout.write(`${p.similarity.toFixed(3)}  ${p.left}: ${clip(text.get(p.left) ?? '')}  ~  ${p.right}: ${clip(text.get(p.right) ?? '')}\n`);
    }
    if (pairs.length > limit) io.stdout.write(`… ${pairs.length - limit} more pairs (use --limit 0 for all, or --json)\n`);
    io.stdout.write(`\n${records.length} records, ${pairs.length} pairs with ${o.measure} ≥ ${threshold} over ${tokens} (${r.backend})\n`);
  }
  return 0;
}

export function registerJoin(program: Command, io: Io, done: (code: number) => void): void {
  program
    .command('join')
    .description('similar record pairs: exact set similarity join over q-grams (or words) of each record')
    .argument('<file>', "records: one per line, JSONL or CSV (see --format); '-' reads stdin")
    .requiredOption('-t, --threshold <x>', 'similarity threshold; an integer token count for --measure overlap')
    .addOption(new Option('--measure <m>', 'set similarity').choices(['jaccard', 'cosine', 'dice', 'overlap']).default('jaccard'))
    .option('--qgram <q>', 'character q-grams (default 3)', integer('qgram', 1, 16))
    .option('--words', 'use words instead of q-grams')
    .addOption(new Option('-b, --backend <b>', 'compute backend').choices(['auto', 'cpu', 'cuda']).default('auto'))
    .addOption(new Option('-f, --format <f>', 'record format').choices(['auto', 'lines', 'jsonl', 'csv']).default('auto'))
    .option('--field <name>', 'JSONL/CSV field holding the text', 'text')
    .option('--id-field <name>', 'JSONL/CSV field holding the record id (default: line number)', 'id')
    .option('--json', 'print JSON (schema cusim.join/1)')
    .option('--csv', 'print CSV: left,right,overlap,similarity')
    .option('--limit <n>', 'pairs shown in the table (0: all)', integer('limit', 0, 1e9), 50)
    .option('--quiet', 'print only the result')
    .option('-v, --verbose', 'print stack traces on errors')
    .action(async (file: string, opts: JoinCliOptions) => done(await joinCommand(file, opts, io)));
}
