// The read + featurize stage of `cusim dedup corpus.jsonl --field text` alone:
// JSONL held in memory (no disk), cut into blocks of whole lines, parsed,
// tokenized (words) and hashed to 32-bit token-hash rows, by the native
// record reader (simdjson + the native tokenizer on the thread pool) and by
// the JavaScript reader (JSON.parse + the featurizer, one block at a time on
// this thread: what each record worker does). MB/s of wall time, and MB per
// CPU second of all the process's threads (the per-core rate, which holds on
// a loaded machine too).
//
//   node bench/corpus.js --docs 1000000 --out /tmp/c1m.jsonl
//   npm run build:ts && node bench/records.js /tmp/c1m.jsonl [--mb 256] [--threads 1]
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    mb: { type: 'string', default: '128' },
    block: { type: 'string', default: '8' },
    threads: { type: 'string' },
    reader: { type: 'string', default: 'both' },
  },
});
if (!positionals[0]) {
  console.error('usage: node bench/records.js corpus.jsonl [--mb 128] [--block 8] [--threads n] [--reader both|native|js]');
  process.exit(2);
}
const { native } = await import(path.join(root, 'dist', 'addon.js'));
const { TextFeaturizer } = await import(path.join(root, 'dist', 'text', 'index.js'));
const { featurizeNativeBlock } = await import(path.join(root, 'dist', 'cli', 'record-native.js'));
const { featurizeBlock } = await import(path.join(root, 'dist', 'cli', 'record-worker.js'));

const addon = native();
if (args.threads) addon.threads(Number(args.threads));
const threads = addon.threads();
const all = readFileSync(positionals[0]);
const cutAt = Math.min(all.length, Number(args.mb) << 20);
// Whole lines only.
const data = all.subarray(0, cutAt < all.length ? all.lastIndexOf(0x0a, cutAt) + 1 : cutAt);
const blockBytes = Number(args.block) << 20;
const blocks = [];
for (let at = 0; at < data.length;) {
  let end = Math.min(data.length, at + blockBytes);
  if (end < data.length) end = data.lastIndexOf(0x0a, end) + 1;
  blocks.push(data.subarray(at, end));
  at = end;
}
const feat = new TextFeaturizer({ mode: 'words' });
const records = { format: 'jsonl', field: 'text', idField: 'id', source: positionals[0], maxRecordBytes: 1 << 30 };
const task = (block, i) => ({
  task: i,
  block,
  firstLine: 0,
  format: 'jsonl',
  records,
  features: { mode: 'words' },
  minTokens: 1,
  bits: 32,
});

async function time(name, fn) {
  await fn(blocks.slice(0, 1)); // warm-up
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  const docs = await fn(blocks);
  const s = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(c0);
  // CPU seconds of every thread of the process: per-core throughput even on a loaded machine.
  const cpu = (c.user + c.system) / 1e6;
  const mb = data.length / 1e6;
  return {
    reader: name,
    MB: +mb.toFixed(1),
    docs,
    seconds: +s.toFixed(3),
    'MB/s': +(mb / s).toFixed(1),
    'cpu s': +cpu.toFixed(2),
    'MB per cpu-s': +(mb / cpu).toFixed(1),
  };
}

const rows = [];
if (args.reader !== 'js') {
  if (!addon.recordReader) throw new Error('this addon has no native record reader (build it with simdjson)');
  rows.push(
    await time(`native (${addon.recordReader})`, async (bs) => {
      let n = 0;
      for (let i = 0; i < bs.length; i++) n += (await featurizeNativeBlock(task(bs[i], i), feat.nativeHandle, feat)).documents;
      return n;
    }),
  );
}
if (args.reader !== 'native') {
  rows.push(
    await time('JavaScript (JSON.parse + featurizer)', async (bs) => {
      let n = 0;
      for (let i = 0; i < bs.length; i++) n += (await featurizeBlock(task(bs[i], i), feat)).documents;
      return n;
    }),
  );
}
console.log(
  `read + featurize (words, 32-bit token hashes) of ${(data.length / 1e6).toFixed(0)} MB in ${blocks.length} blocks; native pool: ${threads || 'default'} threads`,
);
console.table(rows);
