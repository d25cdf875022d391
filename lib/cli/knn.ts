// `cusim knn`: the k nearest binary codes (Hamming distance) of each query,
// from raw files of packed codes (bits/8 bytes per row, little-endian words).
import { Command, Option } from 'commander';
import { readFileSync, statSync } from 'node:fs';
import { resolveBackend } from '../backend.js';
import { HammingIndex, MISSING_ID } from '../hamming.js';
import { CliError, fsError } from './errors.js';
import { escapeText } from './escape.js';
import { backendLine, integer, wantsProgress } from './options.js';
import { progress } from './progress.js';
import type { Io } from './options.js';

interface KnnOptions {
  index: string;
  queries: string;
  k: number;
  bits: number;
  method: 'exact' | 'ewh';
  backend: 'auto' | 'cpu' | 'cuda';
  json?: boolean;
  csv?: boolean;
  quiet?: boolean;
  progress: boolean;
}

function readCodes(file: string, flag: string, bits: number): { data: Uint32Array; rows: number } {
  let buf: Buffer;
  try {
    if (!statSync(file).isFile()) throw new CliError(`${flag} ${escapeText(file)} is not a file`, 'pass a file of packed codes', 1);
    buf = readFileSync(file);
  } catch (e) {
    if (e instanceof CliError) throw e;
    throw fsError(e, file);
  }
  const row = bits / 8;
  if (buf.length === 0)
    throw new CliError(`no codes found in ${flag} ${escapeText(file)} (the file is empty)`, 'pass a file of packed codes', 1);
  if (buf.length % row !== 0) {
    throw new CliError(
      `${flag} ${escapeText(file)} has ${buf.length} bytes, not a multiple of ${row} (${bits}-bit codes)`,
      'check --bits',
      1,
    );
  }
  // A fresh copy starts at offset 0, so it can be viewed as little-endian words.
  return { data: new Uint32Array(new Uint8Array(buf).buffer, 0, buf.length / 4), rows: buf.length / row };
}

async function knnCommand(o: KnnOptions, io: Io): Promise<number> {
  if (o.json && o.csv) throw new CliError('--json and --csv cannot be combined', 'pick one output format', 2);
  if (o.bits % 32 !== 0) throw new CliError(`--bits must be a multiple of 32, got ${o.bits}`, 'pad codes to 32-bit words', 2);
  const backend = resolveBackend(o.backend, '--backend');
  if (!o.quiet) io.stderr.write(backendLine(backend) + '\n');
  const base = readCodes(o.index, '--index', o.bits);
  const queries = readCodes(o.queries, '--queries', o.bits);
  const index = new HammingIndex({ bits: o.bits, method: o.method, backend });
  try {
    index.add({ data: base.data, rows: base.rows, bits: o.bits });
    const bar = progress(wantsProgress(o), io.stderr);
    const r = await index.search(
      { data: queries.data, rows: queries.rows, bits: o.bits },
      { k: o.k, signal: io.signal, onProgress: bar.listener({ search: 'searching' }, { search: 'queries' }) },
    );
    bar.stop();
    const results = [];
    for (let q = 0; q < queries.rows; q++) {
      const ids: number[] = [];
      const distances: number[] = [];
      for (let j = 0; j < o.k; j++) {
        const id = r.ids[q * o.k + j];
        if (id === MISSING_ID) continue;
        ids.push(id);
        distances.push(r.distances[q * o.k + j]);
      }
      results.push({ query: q, ids, distances });
    }
    // Written a few thousand lines at a time; a closed stdout stops it.
    let out = '';
    const put = (s: string): boolean => {
      out += s;
      if (out.length < 1 << 16) return true;
      if (io.stdoutClosed?.()) return false;
      io.stdout.write(out);
      out = '';
      return true;
    };
    if (o.json) {
      const head = JSON.stringify({
        schema: 'cusim.knn/1',
        backend: r.backend,
        bits: o.bits,
        k: o.k,
        method: o.method,
        indexed: base.rows,
      });
      put(head.slice(0, -1) + ',"results":[');
      for (let i = 0; i < results.length; i++) if (!put((i ? ',' : '') + JSON.stringify(results[i]))) return 0;
      put(']}\n');
    } else if (o.csv) {
      put('query,rank,id,distance\n');
      for (const x of results) if (!put(x.ids.map((id, j) => `${x.query},${j + 1},${id},${x.distances[j]}\n`).join(''))) return 0;
    } else {
      for (const x of results) if (!put(`${x.query}: ${x.ids.map((id, j) => `${id}(${x.distances[j]})`).join(' ')}\n`)) return 0;
    }
    if (!io.stdoutClosed?.()) io.stdout.write(out);
    return 0;
  } finally {
    index.dispose();
  }
}

export function registerKnn(program: Command, io: Io, done: (code: number) => void): void {
  program
    .command('knn')
    .description('k nearest binary codes by Hamming distance; files hold packed codes, bits/8 bytes per row')
    .requiredOption('--index <file>', 'codes to search')
    .requiredOption('--queries <file>', 'query codes')
    .option('-k, --k <n>', 'neighbours per query', integer('k', 1, 65536), 10)
    .option('--bits <n>', 'bits per code (a multiple of 32)', integer('bits', 32, 65536), 256)
    .addOption(new Option('--method <m>', 'exact scan or EWH buckets (approximate)').choices(['exact', 'ewh']).default('exact'))
    .addOption(new Option('-b, --backend <b>', 'compute backend').choices(['auto', 'cpu', 'cuda']).default('auto'))
    .option('--json', 'print JSON (schema cusim.knn/1)')
    .option('--csv', 'print CSV: query,rank,id,distance')
    .option('--no-progress', 'never show progress')
    .option('--quiet', 'print only the result')
    .option('-v, --verbose', 'print stack traces on errors')
    .action(async (opts: KnnOptions) => done(await knnCommand(opts, io)));
}
