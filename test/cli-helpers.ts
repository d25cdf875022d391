// Runs bin/cusim as a child process, and the brute-force oracle for its
// groups: exact weighted Jaccard over the same featurization, then connected
// components of the pairs at or above the threshold.
import { spawn, spawnSync, type SpawnOptions } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { TextFeaturizer, type TextMode } from '../lib/index.js';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** A module of the compiled library (dist/), as workers and the CLI load it (after ensureDist()). */
export function fromDist<T>(p: string): Promise<T> {
  return import(path.join(root, 'dist', p)) as Promise<T>;
}
export const bin = path.join(root, 'bin', 'cusim');
export const fixture = path.join(root, 'test', 'fixtures', 'dedup');

function newestUnder(dir: string): number {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newestUnder(p) : statSync(p).mtimeMs);
  }
  return t;
}

/** The CLI runs from dist/: compile lib/ when dist is missing or stale. */
export function ensureDist(): void {
  const main = path.join(root, 'dist', 'cli', 'main.js');
  if (existsSync(main) && statSync(main).mtimeMs >= newestUnder(path.join(root, 'lib'))) return;
  const r = spawnSync('npm', ['run', 'build:ts'], { cwd: root, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`npm run build:ts failed: ${r.stderr}`);
}

export interface CliRun {
  status: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs bin/cusim to its end (at most `timeout` ms, default 120 s, then
 * SIGTERM), with `input` on its stdin (else none). A child process, not
 * spawnSync: the test worker's event loop keeps answering vitest's runner
 * meanwhile, whose calls time out after a fixed 60 s ("Timeout calling
 * onTaskUpdate"), and CLI runs of 38-50 s were seen on a busy GPU host.
 */
export function cusim(
  args: string[],
  opts: Omit<SpawnOptions, 'stdio'> & { input?: string | Buffer; timeout?: number; maxBuffer?: number } = {},
): Promise<CliRun> {
  // (maxBuffer: spawnSync's; the output is kept whole here.)
  const { input, timeout = 120_000, maxBuffer: _, ...options } = opts;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], { ...options, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => err.push(c));
    const timer = setTimeout(() => child.kill('SIGTERM'), timeout);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') });
    });
    // A CLI that exits before reading all of its input closes the pipe under us.
    child.stdin.on('error', () => {});
    child.stdin.end(input ?? '');
  });
}

/** Exact weighted Jaccard of two CSR rows with sorted columns. */
export function weightedJaccard(ai: Uint32Array, av: Float32Array, bi: Uint32Array, bv: Float32Array): number {
  let i = 0;
  let j = 0;
  let mn = 0;
  let mx = 0;
  while (i < ai.length || j < bi.length) {
    if (j >= bi.length || (i < ai.length && ai[i] < bi[j])) mx += av[i++];
    else if (i >= ai.length || bi[j] < ai[i]) mx += bv[j++];
    else {
      mn += Math.min(av[i], bv[j]);
      mx += Math.max(av[i], bv[j]);
      i++;
      j++;
    }
  }
  return mx > 0 ? mn / mx : 0;
}

/** Groups (sorted member lists, sorted by first member) and every pair's similarity. */
export function oracleGroups(
  docs: { id: string; text: string }[],
  threshold: number,
  mode: TextMode,
  // The CLI's default is classic MinHash over token sets (binary weights);
  // --weighted (or --weighting count|tfidf) uses token counts.
  method: 'classic' | 'weighted' = 'classic',
): { groups: string[][]; sim: Map<string, number> } {
  const f = new TextFeaturizer({ mode, weighting: method === 'classic' ? 'binary' : 'count' });
  const kept = docs.filter((d) => f.tokenize(d.text).length > 0);
  const m = f.transform(kept.map((d) => d.text));
  const row = (r: number): [Uint32Array, Float32Array] => [
    m.indices.subarray(m.indptr[r], m.indptr[r + 1]),
    m.values.subarray(m.indptr[r], m.indptr[r + 1]),
  ];
  const parent = kept.map((_, i) => i);
  const find = (x: number): number => (parent[x] === x ? x : (parent[x] = find(parent[x])));
  const sim = new Map<string, number>();
  const linked = new Set<number>();
  for (let a = 0; a < kept.length; a++) {
    for (let b = a + 1; b < kept.length; b++) {
      const s = weightedJaccard(...row(a), ...row(b));
      sim.set(`${kept[a].id}|${kept[b].id}`, s);
      sim.set(`${kept[b].id}|${kept[a].id}`, s);
      if (s >= threshold) {
        parent[find(a)] = find(b);
        linked.add(a).add(b);
      }
    }
  }
  const comps = new Map<number, string[]>();
  for (const i of [...linked].sort((x, y) => x - y)) {
    const r = find(i);
    if (!comps.has(r)) comps.set(r, []);
    comps.get(r)!.push(kept[i].id);
  }
  const groups = [...comps.values()].sort((x, y) => (x[0] < y[0] ? -1 : 1));
  return { groups, sim };
}

/** The fixture's text files (not binary), with ids relative to the fixture root. */
export function fixtureDocs(dir = fixture): { id: string; text: string }[] {
  const out: { id: string; text: string }[] = [];
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else {
        const buf = readFileSync(p);
        if (!buf.includes(0)) out.push({ id: path.relative(dir, p).split(path.sep).join('/'), text: buf.toString('utf8') });
      }
    }
  };
  walk(dir);
  return out;
}

/** Every key path of a JSON value, with the value's type: the schema, minus the data. */
export function shape(v: unknown): unknown {
  if (Array.isArray(v)) return v.length ? [shape(v[0])] : [];
  if (v !== null && typeof v === 'object') {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, shape(x)]));
  }
  return v === null ? 'null' : typeof v;
}
