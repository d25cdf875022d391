// Synthetic dedup corpus: JSONL documents {id, text} built from npm package
// summaries, with planted edited copies at known similarities, for
// `cusim dedup corpus.jsonl --field text` (bench/dedup-corpus.js checks the
// plants). Streams to disk; 10M documents (~3 GB) need no more memory than 1M.
//
//   node bench/corpus.js --docs 1000000 --out /tmp/corpus.jsonl
//   node bench/corpus.js --docs 10000000 --out /data/corpus10m.jsonl
//
// Each base document joins five random summaries (~310 bytes, ~50 words).
// A fraction (--planted, default 2%) gets a copy emitted a little later in the
// stream, edited in one of these ways:
//   - format: case, punctuation and spacing changed; identical words, so the
//     weighted Jaccard (words, counts) is exactly 1;
//   - words:  1 to 8 word edits (deletions, insertions of words from other
//     summaries, substitutions), similarity spread over about 0.75 to 0.98.
// The exact weighted Jaccard of every plant under the words featurization
// (count weights), and the Jaccard of its token sets (what classic MinHash
// estimates), are written beside the corpus as <out>.planted.jsonl:
// {left, right, similarity, setSimilarity, edit}.
import { closeSync, existsSync, openSync, readFileSync, writeSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// The data folders bench/run.js looks in.
const dataDir = [process.env.CUSIM_BENCH_DATA, path.resolve(root, '..', 'shared', 'data'), path.join(root, '.bench-data')].find(
  (d) => d && existsSync(path.join(d, 'npm-summaries.tsv')),
);
const { values: args } = parseCommandLine({
  options: {
    docs: { type: 'string', default: '1000000' },
    out: { type: 'string', default: 'corpus.jsonl' },
    source: { type: 'string', default: dataDir ? path.join(dataDir, 'npm-summaries.tsv') : '../shared/data/npm-summaries.tsv' },
    planted: { type: 'string', default: '0.02' },
    seed: { type: 'string', default: '1' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
function parseCommandLine(config) {
  try {
    return parseArgs(config);
  } catch (e) {
    console.error(`bench/corpus.js: ${e.message} (see node bench/corpus.js --help)`);
    process.exit(2);
  }
}
if (args.help) {
  console.log(
    'Usage: node bench/corpus.js [--docs N] [--out FILE] [--source TSV] [--planted FRACTION] [--seed N]\n\n' +
      'Writes a synthetic dedup corpus as JSONL {id, text} (five npm summaries joined per document), with\n' +
      'planted edited copies listed with their exact similarities in <out>.planted.jsonl.\n\n' +
      '  --docs N            documents to write (default 1000000)\n' +
      '  --out FILE          the corpus (default corpus.jsonl)\n' +
      `  --source TSV        npm summaries, name TAB summary (default ${args.source})\n` +
      '  --planted FRACTION  share of documents that get an edited copy, in [0, 0.5] (default 0.02)\n' +
      '  --seed N            random seed (default 1)',
  );
  process.exit(0);
}
const docs = Number(args.docs);
const plantedFraction = Number(args.planted);
if (!Number.isInteger(docs) || docs < 1) throw new Error(`--docs must be a positive integer, got ${args.docs}`);
if (!(plantedFraction >= 0 && plantedFraction <= 0.5)) throw new Error(`--planted must be in [0, 0.5], got ${args.planted}`);

const { TextFeaturizer } = await import(path.join(root, 'dist', 'index.js'));

// mulberry32: small, seeded, good enough to pick summaries and edits.
let state = Number(args.seed) >>> 0 || 1;
function random() {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (a) => a[Math.floor(random() * a.length)];

let sourceText;
try {
  sourceText = readFileSync(args.source, 'utf8');
} catch (e) {
  throw new Error(`cannot read the summaries at ${args.source} (pass --source): ${e.message}`);
}
const summaries = sourceText
  .split('\n')
  .map((l) => l.slice(l.indexOf('\t') + 1).trim())
  .filter((s) => s.split(/\s+/).length >= 3);
const vocabulary = [...new Set(summaries.flatMap((s) => s.toLowerCase().split(/[^a-z0-9]+/)).filter((w) => w.length > 2))];

const featurizer = new TextFeaturizer({ mode: 'words' });
function weightedJaccard(a, b) {
  const count = (tokens) => {
    const m = new Map();
    for (const t of tokens) m.set(t, (m.get(t) ?? 0) + 1);
    return m;
  };
  const ca = count(featurizer.tokenize(a));
  const cb = count(featurizer.tokenize(b));
  let mn = 0;
  let mx = 0;
  for (const [t, x] of ca) {
    const y = cb.get(t) ?? 0;
    mn += Math.min(x, y);
    mx += Math.max(x, y);
  }
  for (const [t, y] of cb) if (!ca.has(t)) mx += y;
  return mx > 0 ? mn / mx : 0;
}

// Jaccard of the token sets: what classic MinHash estimates.
function setJaccard(a, b) {
  const sa = new Set(featurizer.tokenize(a));
  const sb = new Set(featurizer.tokenize(b));
  let both = 0;
  for (const t of sa) if (sb.has(t)) both++;
  const union = sa.size + sb.size - both;
  return union > 0 ? both / union : 0;
}

function formatEdit(text) {
  return text
    .split(' ')
    .map((w) => {
      const r = random();
      if (r < 0.15) return w.toUpperCase();
      if (r < 0.3) return w + ',';
      if (r < 0.4) return ' ' + w;
      return w;
    })
    .join(' ')
    .replace(/\. /g, '! ');
}

function wordEdit(text) {
  const words = text.split(' ');
  const edits = 1 + Math.floor(random() * 8);
  for (let e = 0; e < edits && words.length > 2; e++) {
    const i = Math.floor(random() * words.length);
    const r = random();
    if (r < 0.34) words.splice(i, 1);
    else if (r < 0.67) words.splice(i, 0, pick(vocabulary));
    else words[i] = pick(vocabulary);
  }
  return words.join(' ');
}

const out = openSync(args.out, 'w');
const plantsOut = openSync(`${args.out}.planted.jsonl`, 'w');
let buf = '';
let plantBuf = '';
const flush = (force) => {
  if (buf.length > 1 << 22 || force) {
    writeSync(out, buf);
    buf = '';
  }
  if (plantBuf.length > 1 << 20 || force) {
    writeSync(plantsOut, plantBuf);
    plantBuf = '';
  }
};
// Copies wait a random number of documents before they appear.
const waiting = [];
let written = 0;
let base = 0;
let plants = 0;
const t0 = performance.now();
while (written < docs) {
  let id;
  let text;
  if (waiting.length && (waiting[0].at <= written || docs - written <= waiting.length)) {
    ({ id, text } = waiting.shift());
  } else {
    id = `d${base++}`;
    text = [pick(summaries), pick(summaries), pick(summaries), pick(summaries), pick(summaries)].join(' ');
    if (random() < plantedFraction && docs - written > waiting.length + 2) {
      const edit = random() < 0.4 ? 'format' : 'words';
      const copy = edit === 'format' ? formatEdit(text) : wordEdit(text);
      const copyId = `${id}-copy`;
      const similarity = weightedJaccard(text, copy);
      const setSimilarity = Math.round(setJaccard(text, copy) * 1e6) / 1e6;
      plantBuf += JSON.stringify({ left: id, right: copyId, similarity: Math.round(similarity * 1e6) / 1e6, setSimilarity, edit }) + '\n';
      plants++;
      waiting.push({ id: copyId, text: copy, at: written + 1 + Math.floor(random() * 5000) });
      waiting.sort((a, b) => a.at - b.at);
    }
  }
  buf += JSON.stringify({ id, text }) + '\n';
  written++;
  flush(false);
}
flush(true);
closeSync(out);
closeSync(plantsOut);
console.error(
  `corpus: ${written.toLocaleString('en-US')} documents, ${plants.toLocaleString('en-US')} planted copies -> ${args.out} ` +
    `(+ .planted.jsonl) in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
);
