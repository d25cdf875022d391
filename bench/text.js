// Featurization throughput: documents/s and MB/s per mode, on real source
// files (this package's node_modules, read into memory first so disk time is
// excluded) and on synthetic English-like text. The point is that text → CSR
// must not dominate the GPU's hashing time.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnSync } from 'node:child_process';
import { availableParallelism } from 'node:os';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function sourceFiles(dir, limitBytes) {
  const out = [];
  let bytes = 0;
  const walk = (d) => {
    let entries;
    try {
      entries = readdirSync(d, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1));
    } catch {
      return;
    }
    for (const e of entries) {
      if (bytes >= limitBytes) return;
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile() && /\.(c|m)?(j|t)sx?$/.test(e.name) && statSync(p).size < 1 << 20) {
        const t = readFileSync(p, 'utf8');
        out.push(t);
        bytes += Buffer.byteLength(t);
      }
    }
  };
  walk(dir);
  return { docs: out, bytes };
}

function syntheticText(n, seed = 7) {
  const words = 'the of and to in is for on that with as by this from are be or at it an which data model gpu kernel memory similarity search vector index cluster token'.split(' ');
  let s = seed;
  const next = () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296;
  const docs = [];
  let bytes = 0;
  for (let i = 0; i < n; i++) {
    const len = 20 + Math.floor(next() * 200);
    const parts = [];
    for (let k = 0; k < len; k++) parts.push(words[Math.floor(Math.pow(next(), 2) * words.length)] + (next() < 0.05 ? String(k) : ''));
    const t = parts.join(' ');
    docs.push(t);
    bytes += t.length;
  }
  return { docs, bytes };
}

export async function run({ cusim, quick, time, backends }) {
  const code = sourceFiles(path.join(root, 'node_modules'), quick ? 8e6 : 64e6);
  const text = syntheticText(quick ? 20_000 : 200_000);
  const cases = [
    ['node_modules sources', code, { mode: 'code' }],
    ['node_modules sources', code, { mode: 'code', hashBits: 20 }],
    ['node_modules sources', code, { mode: 'code', weighting: 'tfidf' }],
    ['synthetic text', text, { mode: 'words' }],
    ['synthetic text', text, { mode: 'words', stopWords: true, weighting: 'tfidf' }],
    ['synthetic text', text, { mode: 'qgrams', q: 3 }],
    ['synthetic text', text, { mode: 'qgrams', q: 2, hashBits: 18 }],
  ];
  const rows = [];
  for (const [corpus, { docs, bytes }, opts] of cases) {
    if (docs.length === 0) continue;
    let nnz = 0;
    const t = await time(
      () => {
        const m = new cusim.TextFeaturizer(opts).transform(docs);
        nnz = m.indices.length;
      },
      { warmup: 1, repeats: quick ? 3 : 5 },
    );
    const s = t.wallMs.median / 1e3;
    rows.push({
      corpus,
      options: JSON.stringify(opts),
      docs: docs.length,
      MB: bytes / 1e6,
      nnz,
      'wall ms (median)': t.wallMs.median,
      'docs/s': docs.length / s,
      'MB/s': bytes / 1e6 / s,
    });
  }
  // The CLI's pipeline on the same files: featurize (bag of names) then
  // dedup (weighted MinHash + LSH + exact verification), per backend.
  const pipeline = [];
  if (code.docs.length) {
    const f = new cusim.TextFeaturizer({ mode: 'code' });
    const t0 = performance.now();
    const m = f.transform(code.docs);
    const featMs = performance.now() - t0;
    for (const backend of backends) {
      let groups = 0;
      const t = await time(
        async () => {
          groups = (await cusim.dedup(m, { threshold: 0.9, samples: 128, backend })).count;
        },
        { warmup: 1, repeats: quick ? 2 : 5 },
      );
      pipeline.push({
        backend,
        docs: m.rows,
        nnz: m.indices.length,
        'featurize ms': featMs,
        'dedup ms (median)': t.wallMs.median,
        groups,
        'featurize share': featMs / (featMs + t.wallMs.median),
      });
    }
  }
  // The command itself, end to end (file reads, featurization, dedup), with
  // one thread and with worker threads.
  const cli = [];
  for (const backend of backends) {
    for (const threads of [...new Set([1, Math.max(1, Math.min(availableParallelism() - 1, 16))])]) {
      const t0 = performance.now();
      const r = spawnSync(process.execPath, [path.join(root, 'bin', 'cusim'), 'dedup', path.join(root, 'node_modules'), '--json', '--quiet', '--ext', 'js,mjs,cjs,ts,mts,cts,jsx,tsx', '--min-tokens', '10', '--threads', String(threads), '--backend', backend], { encoding: 'utf8', maxBuffer: 1 << 28 });
      const wall = performance.now() - t0;
      if (r.status !== 0) {
        cli.push({ backend, threads, error: r.stderr.trim().split('\n')[0] });
        continue;
      }
      const rep = JSON.parse(r.stdout);
      cli.push({ backend, threads, files: rep.input.documents, groups: rep.groups.length, 'in-process ms': rep.elapsedMs, 'wall ms (incl. node start)': wall, 'files/s': rep.input.documents / (rep.elapsedMs / 1e3) });
    }
  }
  return {
    sections: [
      {
        title: 'text featurization (single thread, JS)',
        columns: ['corpus', 'options', 'docs', 'MB', 'nnz', 'wall ms (median)', 'docs/s', 'MB/s'],
        rows,
        notes: [
          'time covers tokenization, vocabulary lookup, per-row counting and CSR assembly (TextFeaturizer.transform)',
          'source files are read into memory before timing; disk I/O is excluded',
        ],
      },
      {
        title: 'cusim dedup pipeline on node_modules sources (featurize + dedup at 0.9, 128 samples)',
        columns: ['backend', 'docs', 'nnz', 'featurize ms', 'dedup ms (median)', 'groups', 'featurize share'],
        rows: pipeline,
        notes: ['featurize share = featurize / (featurize + dedup): the part of the CLI run spent in JS tokenization'],
      },
      {
        title: '`cusim dedup node_modules` end to end (one run each)',
        columns: ['backend', 'threads', 'files', 'groups', 'in-process ms', 'wall ms (incl. node start)', 'files/s', 'error'],
        rows: cli,
        notes: ['threads = worker threads reading and featurizing files; the report is identical for any count'],
      },
    ],
  };
}
