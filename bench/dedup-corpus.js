// The main job as a user runs it: `cusim dedup corpus.jsonl --field text`
// over a corpus from bench/corpus.js, timed end to end under /usr/bin/time
// (wall time, peak RSS), with the CLI's own per-stage times, and every
// planted pair checked against the report.
//
//   node bench/corpus.js --docs 10000000 --out /data/corpus10m.jsonl
//   node bench/dedup-corpus.js /data/corpus10m.jsonl [--backend cuda|cpu] [--threads 16] [--workers 15] [--devices all] [--save name]
//
// Verdict, per planted pair at similarity s (the Jaccard of its token sets for
// classic MinHash, of its token counts for weighted):
//   - s >= threshold and the pair's signatures agree on a whole band: it must
//     be in one group. The bench hashes the planted documents itself (same
//     featurization, seed and banding as the report names) and checks this
//     for every such pair: nothing may be lost between hashing and the groups.
//   - exact and formatting-only copies (s = 1) must all be found;
//   - s < threshold must not be reported as a pair (exact verification).
// Pairs whose signatures share no band are missed by design; the table shows,
// per band of s, how many were found against the banding curve's expectation
// (the sum of 1 - (1 - s^r)^b). That comparison is not a test: all pairs are
// hashed with the same 108 permutations, and words common to many documents
// make their misses correlated, so one seed's count strays from the curve by
// more than a binomial spread (a few percent near the threshold).
import { spawn } from 'node:child_process';
import { createReadStream, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
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
    workers: { type: 'string' },
    devices: { type: 'string' },
    save: { type: 'string' },
  },
});
const corpus = positionals[0];
if (!corpus || !existsSync(corpus)) {
  console.error('usage: node bench/dedup-corpus.js corpus.jsonl [--backend cuda|cpu] [--threads N] [--devices all|0,1] [--save name]');
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
  // The CLI's reader threads (its --threads; default: cores - 1 up to 16 on 4+ cores).
  ...(args.workers ? ['--threads', args.workers] : []),
  // GPUs for the cuda backend ('all' or indices), as `cusim dedup --devices`.
  ...(args.devices ? ['--devices', args.devices] : []),
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
// CPU time of the whole process (every thread): how busy the host was.
const cpuS = ['User', 'System'].reduce((a, k) => a + Number(new RegExp(`${k} time \\(seconds\\): ([\\d.]+)`).exec(err)?.[1] ?? NaN), 0);

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
const mid = Number((t + 0.05).toFixed(6));
const bins = [
  { name: 's = 1 (formatting edits, exact copies)', lo: 1, hi: Infinity },
  { name: `${mid.toFixed(2)} <= s < 1`, lo: mid, hi: 1 },
  { name: `${t.toFixed(2)} <= s < ${mid.toFixed(2)}`, lo: t, hi: mid },
  { name: `s < ${t.toFixed(2)} (must not pair)`, lo: -Infinity, hi: t },
].map((b) => ({ ...b, planted: 0, found: 0, expected: 0, sure: 0, sureMissed: 0, banded: 0, lost: 0 }));

/** The texts of the documents named in `want`, read from the corpus (lines {"id":…,"text":…}). */
async function textsOf(want) {
  const texts = new Map();
  // Each line is decoded on its own: strings parsed out of a larger string may
  // keep all of it alive.
  const take = (buf, s, e) => {
    const l = buf.toString('utf8', s, e);
    const at = l.indexOf('"id":"');
    if (at < 0) return;
    const id = l.slice(at + 6, l.indexOf('"', at + 6));
    if (want.has(id)) texts.set(id, JSON.parse(l).text);
  };
  let carry = Buffer.alloc(0);
  for await (const chunk of createReadStream(corpus, { highWaterMark: 1 << 24 })) {
    const buf = carry.length ? Buffer.concat([carry, chunk]) : chunk;
    let s = 0;
    for (let nl = buf.indexOf(10); nl >= 0; nl = buf.indexOf(10, s)) {
      take(buf, s, nl);
      s = nl + 1;
    }
    carry = Buffer.from(buf.subarray(s));
  }
  if (carry.length) take(carry, 0, carry.length);
  return texts;
}

/**
 * Per planted pair: whether its classic signatures agree on a whole band,
 * from the bench's own hashing of the two documents with the report's mode,
 * seed, samples and banding. Undefined for weighted runs.
 */
async function bandedPairs() {
  if (method !== 'classic' || report.options.hashBits !== undefined) return undefined;
  const { TextFeaturizer, MinHash } = await import(path.join(root, 'dist', 'index.js'));
  const texts = await textsOf(new Set(planted.flatMap((p) => [p.left, p.right])));
  const docs = planted.flatMap((p) => [texts.get(p.left) ?? '', texts.get(p.right) ?? '']);
  const feat = new TextFeaturizer({ mode: report.options.mode, ...(report.options.q ? { q: report.options.q } : {}) });
  const m = await feat.hashedRows(docs, { bits: 32 });
  if (m.indptr.length - 1 !== docs.length) throw new Error('a planted document has no tokens');
  const S = report.lsh.samples;
  const mh = new MinHash({ samples: S, seed: report.options.seed, backend: 'cpu' });
  const sig = await mh.hash({ rows: docs.length, cols: 2 ** 32, indptr: m.indptr, indices: m.indices });
  mh.dispose();
  return planted.map((_, i) => {
    const a = 2 * i * S;
    const b = (2 * i + 1) * S;
    for (let band = 0; band < bands; band++) {
      let same = true;
      for (let k = band * rows; same && k < (band + 1) * rows; k++) same = sig[a + k] === sig[b + k];
      if (same) return true;
    }
    return false;
  });
}
const banded = await bandedPairs();

let falsePairs = 0;
planted.forEach((p, i) => {
  const sim = simOf(p);
  const b = bins.find((x) => sim >= x.lo && sim < x.hi);
  b.planted++;
  const same = groupOf.has(p.left) && groupOf.get(p.left) === groupOf.get(p.right);
  if (b.lo === -Infinity) {
    // A direct pair below the threshold would be a verification failure; a
    // shared group through other members is not (the bench's documents are random).
    if (pairSim.has(`${p.left}\n${p.right}`) || pairSim.has(`${p.right}\n${p.left}`)) falsePairs++;
    return;
  }
  const q = pFound(sim);
  b.expected += q;
  if (same) b.found++;
  if (banded?.[i]) {
    b.banded++;
    if (!same) b.lost++;
  }
  if (1 - q < 1e-9) {
    b.sure++;
    if (!same) b.sureMissed++;
  }
});
let ok = falsePairs === 0;
const lines = [];
lines.push(
  `## cusim dedup ${path.basename(corpus)} --field text (${report.backend}${report.gpus.length ? `: ${report.gpus.join(', ')}` : ''})`,
);
lines.push('');
lines.push(
  `${report.input.documents.toLocaleString('en-US')} documents, ${report.groups.length.toLocaleString('en-US')} groups; ` +
    `LSH ${bands} × ${rows} over ${report.lsh.samples} samples; wall ${wallS.toFixed(1)} s; peak RSS ${(rssKb / 1048576).toFixed(2)} GiB; CPU ${cpuS.toFixed(1)} s (${(cpuS / wallS).toFixed(1)} cores busy on average)`,
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
lines.push('| planted pairs | planted | signatures share a band | found | banding curve expects | verdict |');
lines.push('| --- | ---: | ---: | ---: | ---: | --- |');
for (const b of bins) {
  if (b.lo === -Infinity) {
    lines.push(`| ${b.name} | ${b.planted} | | ${falsePairs} reported as pairs | 0 | ${falsePairs === 0 ? 'ok' : 'FAIL'} |`);
    continue;
  }
  const good = b.sureMissed === 0 && b.lost === 0;
  ok &&= good;
  const why = [b.sureMissed ? `${b.sureMissed} certain pairs missed` : '', b.lost ? `${b.lost} banded pairs not grouped` : '']
    .filter(Boolean)
    .join(', ');
  lines.push(
    `| ${b.name} | ${b.planted} | ${banded ? b.banded : 'n/a'} | ${b.found} | ${b.expected.toFixed(1)} (${((100 * b.found) / Math.max(b.expected, 1e-9) - 100).toFixed(1)}%) | ${good ? 'ok' : `FAIL (${why})`} |`,
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
