// Featurization throughput: documents/s and MB/s per mode, on real source
// files (this package's node_modules, read into memory first so disk time is
// excluded) and on synthetic English-like text, with the JavaScript and the
// native tokenizers. The point is that text → CSR must not dominate the GPU's
// hashing time.
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
  const words =
    'the of and to in is for on that with as by this from are be or at it an which data model gpu kernel memory similarity search vector index cluster token'.split(
      ' ',
    );
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

const sameBytes = (a, b) =>
  a.byteLength === b.byteLength &&
  Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));

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
  const cores = cusim.threads();
  const rows = [];
  for (const [corpus, { docs, bytes }, opts] of cases) {
    if (docs.length === 0) continue;
    const runs = {};
    const out = {};
    // JS (single thread), native on one pool thread, native on every core.
    for (const [key, native, threads] of [
      ['js', false, 0],
      ['n1', true, 1],
      ['nN', true, 0],
    ]) {
      cusim.threads(threads);
      const t = await time(
        () => {
          out[key] = new cusim.TextFeaturizer({ ...opts, native }).transform(docs);
        },
        { warmup: 1, repeats: quick ? 3 : 5 },
      );
      runs[key] = t.wallMs.median;
    }
    cusim.threads(0);
    const same = ['n1', 'nN'].every((k) => ['indptr', 'indices', 'values'].every((f) => sameBytes(out[k][f], out.js[f])));
    const mbs = (ms) => bytes / 1e6 / (ms / 1e3);
    rows.push({
      corpus,
      options: JSON.stringify(opts),
      docs: docs.length,
      MB: bytes / 1e6,
      nnz: out.js.indices.length,
      'JS ms': runs.js,
      'JS MB/s': mbs(runs.js),
      'native 1T MB/s': mbs(runs.n1),
      [`native ${cores}T MB/s`]: mbs(runs.nN),
      [`native ${cores}T docs/s`]: docs.length / (runs.nN / 1e3),
      'speedup (all cores)': runs.js / runs.nN,
      'same CSR': same ? 'yes' : 'NO',
    });
  }
  // eslint-disable-next-line no-control-regex -- non-ASCII test: the range starts at NUL on purpose
  const nonAscii = code.docs.filter((t) => /[^\x00-\x7f]/.test(t));
  // The CLI's pipeline on the same files: featurize (bag of names) then
  // dedup (weighted MinHash + LSH + exact verification), per backend.
  const pipeline = [];
  if (code.docs.length) {
    const feat = {};
    let m;
    for (const native of [false, true]) {
      const t = await time(
        () => {
          m = new cusim.TextFeaturizer({ mode: 'code', native }).transform(code.docs);
        },
        { warmup: 1, repeats: quick ? 3 : 5 },
      );
      feat[native ? 'native' : 'js'] = t.wallMs.median;
    }
    for (const backend of backends) {
      let groups = 0;
      const t = await time(
        async () => {
          groups = (await cusim.dedup(m, { threshold: 0.9, samples: 128, backend })).count;
        },
        { warmup: 1, repeats: quick ? 2 : 5 },
      );
      const d = t.wallMs.median;
      pipeline.push({
        backend,
        docs: m.rows,
        nnz: m.indices.length,
        'featurize ms (JS)': feat.js,
        [`featurize ms (native, ${cores}T)`]: feat.native,
        'dedup ms (median)': d,
        groups,
        'featurize share (JS)': feat.js / (feat.js + d),
        'featurize share (native)': feat.native / (feat.native + d),
      });
    }
  }
  // The command itself, end to end (file reads, featurization, dedup), with
  // one thread and with worker threads, native and JS tokenizers.
  const cli = [];
  for (const backend of backends) {
    for (const threads of [...new Set([1, Math.max(1, Math.min(availableParallelism() - 1, 16))])]) {
      for (const native of [true, false]) {
        const t0 = performance.now();
        const r = spawnSync(
          process.execPath,
          [
            path.join(root, 'bin', 'cusim'),
            'dedup',
            path.join(root, 'node_modules'),
            '--json',
            '--quiet',
            '--ext',
            'js,mjs,cjs,ts,mts,cts,jsx,tsx',
            '--min-tokens',
            '10',
            '--threads',
            String(threads),
            '--backend',
            backend,
            ...(native ? [] : ['--no-native']),
          ],
          { encoding: 'utf8', maxBuffer: 1 << 28 },
        );
        const wall = performance.now() - t0;
        const tokenizer = native ? 'native' : 'JS';
        if (r.status !== 0) {
          cli.push({ backend, threads, tokenizer, error: r.stderr.trim().split('\n')[0] });
          continue;
        }
        const rep = JSON.parse(r.stdout);
        cli.push({
          backend,
          threads,
          tokenizer,
          files: rep.input.documents,
          groups: rep.groups.length,
          'in-process ms': rep.elapsedMs,
          'wall ms (incl. node start)': wall,
          'files/s': rep.input.documents / (rep.elapsedMs / 1e3),
        });
      }
    }
  }
  return {
    sections: [
      {
        title: 'text featurization (JS single thread vs native tokenizer)',
        columns: [
          'corpus',
          'options',
          'docs',
          'MB',
          'nnz',
          'JS ms',
          'JS MB/s',
          'native 1T MB/s',
          `native ${cores}T MB/s`,
          `native ${cores}T docs/s`,
          'speedup (all cores)',
          'same CSR',
        ],
        rows,
        notes: [
          'time covers tokenization, vocabulary lookup, per-row counting and CSR assembly (TextFeaturizer.transform)',
          'JS: options.native = false; native 1T: the native pool limited to one thread (cusim.threads(1)); the JS merge runs on the main thread in both',
          `same CSR: the native matrices are byte-identical to the JS ones (indptr, indices, values)`,
          `words/qgrams documents with any non-ASCII character are tokenized in JS (per document); code mode is native for every document. ${nonAscii.length} of ${code.docs.length} node_modules files are non-ASCII`,
          'source files are read into memory before timing; disk I/O is excluded',
        ],
      },
      {
        title: 'cusim dedup pipeline on node_modules sources (featurize + dedup at 0.9, 128 samples)',
        columns: [
          'backend',
          'docs',
          'nnz',
          'featurize ms (JS)',
          `featurize ms (native, ${cores}T)`,
          'dedup ms (median)',
          'groups',
          'featurize share (JS)',
          'featurize share (native)',
        ],
        rows: pipeline,
        notes: ['featurize share = featurize / (featurize + dedup): the part of the pipeline spent turning text into the CSR'],
      },
      {
        title: '`cusim dedup node_modules` end to end (one run each)',
        columns: ['backend', 'threads', 'tokenizer', 'files', 'groups', 'in-process ms', 'wall ms (incl. node start)', 'files/s', 'error'],
        rows: cli,
        notes: [
          'threads = worker threads reading and featurizing files; tokenizer JS = --no-native; the report is identical for any combination',
        ],
      },
    ],
  };
}
