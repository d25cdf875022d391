// The main job as a user runs it: `cusim dedup corpus.jsonl --field text`
// over a corpus from bench/corpus.js, timed end to end under /usr/bin/time
// (wall time, peak RSS), with the CLI's own per-stage times, and every
// planted pair checked against the report.
//
//   node bench/corpus.js --docs 10000000 --out /data/corpus10m.jsonl
//   node bench/dedup-corpus.js /data/corpus10m.jsonl [--backend cuda|cpu] [--threads 16] [--save name]
//
// Verdict: every planted pair at or above the threshold is reported in one
// group, except that a pair at similarity s is missed with probability
// (1 - s^r)^b by design; the bench prints, per similarity band, the pairs
// planted, found and expected (the sum of 1 - (1 - s^r)^b), and fails when a
// band misses more than its expectation allows (4 sigma, binomial) or when any
// pair with P(miss) < 1e-9 (exact and formatting-only copies) is missed.
// Plants below the threshold must not be reported as pairs (exact
// verification).
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..');
const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    backend: { type: 'string', default: 'auto' },
    threshold: { type: 'string', default: '0.9' },
    threads: { type: 'string' },
    save: { type: 'string' },
  },
});
const corpus = positionals[0];
if (!corpus || !existsSync(corpus)) {
  console.error('usage: node bench/dedup-corpus.js corpus.jsonl [--backend cuda|cpu] [--threads N] [--save name]');
  process.exit(2);
}
const planted = readFileSync(`${corpus}.planted.jsonl`, 'utf8')
  .split('\n')
  .filter(Boolean)
  .map((l) => JSON.parse(l));

const cliArgs = [
  path.join(root, 'bin', 'cusim'),
  'dedup',
  corpus,
  '--field',
  'text',
  '--json',
  '--backend',
  args.backend,
  '-t',
  args.threshold,
];
const timeBin = existsSync('/usr/bin/time') ? '/usr/bin/time' : undefined;
const cmd = timeBin ? timeBin : process.execPath;
const argv = timeBin ? ['-v', process.execPath, ...cliArgs] : cliArgs;
const env = { ...process.env };
// The CPU backend's thread count (the CUSIM_THREADS the addon documents).
if (args.threads) env.CUSIM_THREADS = args.threads;
console.error(`[bench] ${[cmd, ...argv].join(' ')}`);
const t0 = performance.now();
const child = spawn(cmd, argv, { env, stdio: ['ignore', 'pipe', 'pipe'] });
const out = [];
let err = '';
child.stdout.on('data', (c) => out.push(c));
child.stderr.on('data', (c) => {
  err += c;
  if (!/^\s/.test(String(c))) process.stderr.write(c);
});
const status = await new Promise((resolve) => child.on('close', resolve));
const wallS = (performance.now() - t0) / 1000;
if (status !== 0) {
  console.error(`[bench] cusim exited ${status}`);
  process.exit(1);
}
const report = JSON.parse(Buffer.concat(out).toString('utf8'));
const rssKb = Number(/Maximum resident set size \(kbytes\): (\d+)/.exec(err)?.[1] ?? NaN);

// Planted pairs against the groups.
const groupOf = new Map();
for (const g of report.groups) for (const m of g.members) groupOf.set(m.id, g.id);
const pairSim = new Map();
for (const g of report.groups) for (const p of g.pairs) pairSim.set(`${p.left}\n${p.right}`, p.similarity);
const { bands, rows } = report.lsh;
// Classic MinHash estimates the Jaccard of token sets, weighted MinHash that of token counts.
const method = report.options.method ?? 'weighted';
const simOf = (p) => (method === 'classic' ? (p.setSimilarity ?? p.similarity) : p.similarity);
const t = report.options.threshold;
const pFound = (s) => 1 - Math.pow(1 - Math.pow(s, rows), bands);
const bins = [
  { name: 's = 1 (formatting edits, exact copies)', lo: 1, hi: Infinity },
  { name: `${(t + 0.05).toFixed(2)} <= s < 1`, lo: t + 0.05, hi: 1 },
  { name: `${t.toFixed(2)} <= s < ${(t + 0.05).toFixed(2)}`, lo: t, hi: t + 0.05 },
  { name: `s < ${t.toFixed(2)} (must not pair)`, lo: -Infinity, hi: t },
].map((b) => ({ ...b, planted: 0, found: 0, expected: 0, sure: 0, sureMissed: 0, variance: 0 }));
let falsePairs = 0;
for (const p of planted) {
  const sim = simOf(p);
  const b = bins.find((x) => sim >= x.lo && sim < x.hi);
  b.planted++;
  const same = groupOf.has(p.left) && groupOf.get(p.left) === groupOf.get(p.right);
  if (b.lo === -Infinity) {
    // A direct pair below the threshold would be a verification failure; a
    // shared group through other members is not (the bench's documents are random).
    if (pairSim.has(`${p.left}\n${p.right}`) || pairSim.has(`${p.right}\n${p.left}`)) falsePairs++;
    continue;
  }
  const q = pFound(sim);
  b.expected += q;
  b.variance += q * (1 - q);
  if (same) b.found++;
  if (1 - q < 1e-9) {
    b.sure++;
    if (!same) b.sureMissed++;
  }
}
let ok = falsePairs === 0;
const lines = [];
lines.push(
  `## cusim dedup ${path.basename(corpus)} --field text (${report.backend}${report.gpus.length ? `: ${report.gpus.join(', ')}` : ''})`,
);
lines.push('');
lines.push(
  `${report.input.documents.toLocaleString('en-US')} documents, ${report.groups.length.toLocaleString('en-US')} groups; ` +
    `LSH ${bands} × ${rows} over ${report.lsh.samples} samples; wall ${wallS.toFixed(1)} s; peak RSS ${(rssKb / 1048576).toFixed(2)} GiB`,
);
lines.push('');
lines.push(
  `host: ${os.cpus().length} × ${os.cpus()[0]?.model.trim() ?? 'CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB; node ${process.version}; ` +
    `${args.threads ? `CUSIM_THREADS=${args.threads}; ` : ''}${new Date().toISOString().slice(0, 10)}`,
);
lines.push('');
lines.push('| stage | s | share |');
lines.push('| --- | ---: | ---: |');
const cliMs = report.stages.reduce((a, s) => a + s.ms, 0);
for (const s of report.stages) lines.push(`| ${s.stage} | ${(s.ms / 1000).toFixed(2)} | ${((100 * s.ms) / cliMs).toFixed(1)}% |`);
lines.push(`| process start, load, JSON out | ${(wallS - cliMs / 1000).toFixed(2)} | |`);
lines.push(`| **end to end** | **${wallS.toFixed(2)}** | |`);
lines.push('');
lines.push('| planted pairs | planted | found | expected found | verdict |');
lines.push('| --- | ---: | ---: | ---: | --- |');
for (const b of bins) {
  if (b.lo === -Infinity) {
    lines.push(`| ${b.name} | ${b.planted} | ${falsePairs} reported as pairs | 0 | ${falsePairs === 0 ? 'ok' : 'FAIL'} |`);
    continue;
  }
  const slack = 4 * Math.sqrt(b.variance) + 1;
  const good = b.sureMissed === 0 && b.found >= b.expected - slack;
  ok &&= good;
  lines.push(
    `| ${b.name} | ${b.planted} | ${b.found} | ${b.expected.toFixed(1)} | ${good ? 'ok' : 'FAIL'}${b.sureMissed ? ` (${b.sureMissed} certain pairs missed)` : ''} |`,
  );
}
lines.push('');
lines.push(`verdict: ${ok ? 'PASS' : 'FAIL'}`);
const text = lines.join('\n') + '\n';
console.log(text);
if (args.save) {
  const dir = path.join(here, 'results');
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, `${args.save}.md`), text);
  console.error(`[bench] wrote bench/results/${args.save}.md`);
}
process.exit(ok ? 0 : 1);
