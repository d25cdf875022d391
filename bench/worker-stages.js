// The stages of one `cusim worker` alone, in CPU seconds per 100K documents
// (all of the process's threads, so the numbers hold on a loaded machine too;
// Redis's CPU from /proc, so the server runs here): a job planned by
// `cusim dedup corpus.jsonl --redis URL --queue` over a redis-server this
// bench starts on a free loopback port, then its ranges read the way the
// worker reads them, each stage run to its end before the next:
//   - read + featurize: the native block reader (simdjson + the native
//     tokenizer on the thread pool), or the JavaScript reader (JSON.parse
//     record by record, then the featurizer: the worker's path for CSV, TSV
//     and weighted jobs) with --reader js;
//   - hash: classic MinHash signatures of the rows (--backend);
//   - insert: each batch's rows blob (vectors and names, lib/queue/batch-rows.ts)
//     and the index's band entries and records (lib/lsh-redis.ts), in batches
//     of the reader's blocks, one batch written while the next is sent, as the
//     worker does; then a resend of 3 batches (which must add no band entry).
//
//   node bench/corpus.js --docs 300000 --out /tmp/c300k.jsonl
//   npm run build:ts && node bench/worker-stages.js /tmp/c300k.jsonl [--reader native|js] [--backend cpu|cuda]
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { startRedisServer } from '../test/fuzz/redis-server.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    reader: { type: 'string', default: 'native' },
    backend: { type: 'string', default: 'cpu' },
    threshold: { type: 'string', default: '0.9' },
    'batch-docs': { type: 'string', default: '16384' },
    'redis-server': { type: 'string', default: 'redis-server' },
  },
});
if (positionals.length !== 1) {
  console.error('usage: node bench/worker-stages.js corpus.jsonl [--reader native|js] [--backend cpu|cuda] [--threshold 0.9]');
  process.exit(2);
}
const dist = (m) => import(path.join(root, 'dist', m));
const { readSettings, readRange, jobKeys } = await dist('queue/job.js');
const { makeSigner, jobIndex } = await dist('queue/process.js');
const { readRecords } = await dist('cli/records.js');
const { readRecordBlocks } = await dist('cli/record-blocks.js');
const { packRows } = await dist('queue/batch-rows.js');

const redis = await startRedisServer(args['redis-server']);
if (!redis) {
  console.error(`[worker-stages] cannot run ${args['redis-server']}`);
  process.exit(2);
}
const prefix = 'stages';
const corpus = path.resolve(positionals[0]);
// The producer plans the job (settings and ranges); it would then wait for workers, so it is stopped.
const producer = spawn(
  process.execPath,
  [
    path.join(root, 'bin', 'cusim'),
    'dedup',
    corpus,
    '--field',
    'text',
    '--threshold',
    args.threshold,
    '--backend',
    args.backend,
    '--redis',
    redis.url,
    '--prefix',
    prefix,
    '--queue',
    '--quiet',
  ],
  { stdio: 'ignore' },
);
const c = new Redis(redis.url);
const pid = Number(/process_id:(\d+)/.exec(await c.info('server'))[1]);
const cpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};
const redisCpu = () => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
};
try {
  let s;
  while (!(s = await readSettings(c, prefix))) await new Promise((r) => setTimeout(r, 100));
  producer.kill();
  const signer = makeSigner(s, args.backend, undefined, true);
  const batchDocs = Number(args['batch-docs']);
  const batches = [];
  let docs = 0;
  let c0 = cpu();
  let w0 = performance.now();
  for (let r = 0; r < s.ranges; r++) {
    const range = await readRange(c, prefix, r);
    const buf = readFileSync(range.file).subarray(range.start, range.end);
    const records = {
      format: range.format,
      field: s.field,
      idField: s.idField,
      source: range.name,
      idPrefix: range.idPrefix,
      maxRecordBytes: s.maxSize,
      lineOffset: range.linesBefore,
    };
    if (args.reader === 'native') {
      // Blocks of about --batch-docs records, as the worker cuts them.
      let lines = 0;
      for (let i = buf.indexOf(10); i >= 0; i = buf.indexOf(10, i + 1)) lines++;
      const blockBytes = Math.round(Math.min(8 << 20, Math.max(4096, (batchDocs * buf.length) / Math.max(1, lines))));
      const pieces = [];
      for (let at = 0; at < buf.length; at += blockBytes) pieces.push(buf.subarray(at, at + blockBytes));
      await readRecordBlocks(Readable.from(pieces), {
        records,
        ...signer.blocks,
        minTokens: s.minTokens,
        threads: 1,
        blockBytes,
        onBlock: (b) => {
          docs += b.documents;
          const m = { rows: b.ids.length, cols: 2 ** s.hashBits, indptr: b.rows.indptr, indices: b.rows.indices };
          batches.push({ ids: Uint32Array.from(b.lines, (l) => range.idBase + l), names: b.ids, m });
        },
      });
      continue;
    }
    let ids = [];
    let names = [];
    let texts = [];
    const flush = async () => {
      const { tokens, matrix } = await signer.featurize(texts);
      const keep = [];
      tokens.forEach((n, x) => n >= s.minTokens && keep.push(x));
      docs += ids.length;
      const kept = keep.map((x) => names[x]);
      batches.push({ ids: Uint32Array.from(keep, (x) => ids[x]), names: { length: kept.length, get: (i) => kept[i] }, m: matrix });
      [ids, names, texts] = [[], [], []];
    };
    for await (const d of readRecords(Readable.from([buf]), records)) {
      ids.push(range.idBase + d.line);
      names.push(d.id);
      texts.push(d.text);
      if (ids.length >= batchDocs) await flush();
    }
    if (ids.length) await flush();
  }
  const per = (x) => ((x * 1e5) / docs).toFixed(2);
  const line = (stage, node, red) =>
    console.log(`| ${stage} | ${per(node)} | ${red === undefined ? '' : per(red)} | ${per((performance.now() - w0) / 1000)} |`);
  console.log(`${docs} documents, ${batches.length} batches, reader ${args.reader}, backend ${args.backend}\n`);
  console.log('| stage | CPU-s / 100K docs (worker) | CPU-s / 100K docs (Redis) | wall s / 100K docs |');
  console.log('| --- | --- | --- | --- |');
  line('read + featurize', cpu() - c0);
  c0 = cpu();
  w0 = performance.now();
  for (const b of batches) b.sigs = await signer.hash(b.m);
  line('hash', cpu() - c0);
  const lsh = jobIndex(redis.url, prefix, s, args.backend, undefined);
  const k = jobKeys(prefix);
  await lsh.count(); // opens the index (claims its parameters) outside the timing
  c0 = cpu();
  w0 = performance.now();
  let r0 = redisCpu();
  // As a worker writes a batch: its rows as one blob (a resend overwrites it), its signatures into the index.
  const insert = (b) =>
    Promise.all([c.set(k.rows(0, b.ids[0], b.ids[b.ids.length - 1]), packRows(b.ids, b.m, b.names)), lsh.insert(b.ids, b.sigs)]);
  let pending;
  for (const b of batches) {
    const next = insert(b);
    await pending;
    pending = next;
  }
  await pending;
  line('insert (rows blobs, band entries, records)', cpu() - c0, redisCpu() - r0);
  const bytes = async () => {
    let n = 0;
    for (const key of await c.keys(`${prefix}:lsh:b{*`)) n += await c.strlen(key);
    return n;
  };
  const before = await bytes();
  r0 = redisCpu();
  for (const b of batches.slice(0, 3)) await insert(b);
  console.log(`\nresend of 3 batches: Redis ${(redisCpu() - r0).toFixed(2)} CPU-s; band bytes ${before} before, ${await bytes()} after`);
  await lsh.close();
  signer.dispose();
} finally {
  producer.kill();
  c.disconnect();
  await redis.stop();
}
