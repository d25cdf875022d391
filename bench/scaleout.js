// Scale-out as a user runs it: `cusim dedup FILE` in one process, then the
// same job through Redis with `cusim dedup FILE --redis URL --queue` and 1, 2
// and 4 `cusim worker` processes on this host (each on its own GPU where there
// are several: --devices i). Starts its own redis-server on a free loopback
// port (no persistence, removed after), so the host needs only that binary
// and its shared libraries, not a Redis install.
//
//   node bench/scaleout.js corpus.jsonl [--redis-server PATH] [--workers 1,2,4]
//        [--backend auto|cuda|cpu] [--field text] [--threshold 0.9] [--range-bytes N] [--save name]
//
// Prints a markdown table: wall time (the queue run: enqueue, every worker, the
// report), docs/s per worker (the workers' own rate, busy time only), groups,
// and whether the groups equal the single process's. Exits 1 when any differ.
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
// The fuzz run's throwaway server: loopback, no persistence, removed after.
import { startRedisServer } from '../test/fuzz/redis-server.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..');
const cusim = path.join(root, 'bin', 'cusim');
const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    'redis-server': { type: 'string', default: 'redis-server' },
    workers: { type: 'string', default: '1,2,4' },
    backend: { type: 'string', default: 'auto' },
    field: { type: 'string', default: 'text' },
    threshold: { type: 'string', default: '0.9' },
    'range-bytes': { type: 'string' },
    save: { type: 'string' },
  },
});
if (positionals.length !== 1) {
  console.error(
    'usage: node bench/scaleout.js corpus.jsonl [--redis-server PATH] [--workers 1,2,4] [--backend auto|cuda|cpu] [--save name]',
  );
  process.exit(2);
}
const corpus = path.resolve(positionals[0]);
const counts = args.workers.split(',').map(Number);
const rangeBytes = args['range-bytes'] ? ['--range-bytes', args['range-bytes']] : [];
const common = [corpus, '--field', args.field, '--threshold', args.threshold, '--backend', args.backend];

/** Runs a command; resolves with its output, rejects on a non-zero exit. */
function run(cmd, argv, { echo = false } = {}) {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => {
      err += d;
      if (echo) process.stderr.write(d);
    });
    p.on('error', reject);
    p.on('exit', (code, signal) =>
      code === 0
        ? resolve({ out, err })
        : reject(new Error(`${path.basename(cmd)} ${argv.join(' ')}: exit ${code ?? signal}\n${err.slice(-2000)}`)),
    );
  });
}

async function gpuCount() {
  if (args.backend === 'cpu') return 0;
  const { devices } = await import(path.join(root, 'dist', 'index.js'));
  return devices().gpus.length;
}

const gpus = await gpuCount();
const redis = await startRedisServer(args['redis-server']);
if (!redis) {
  console.error(`[scaleout] cannot run ${args['redis-server']} (give --redis-server PATH)`);
  process.exit(2);
}
const rows = [];
let bad = false;
const probe = new Redis(redis.url);
// What the server did: its CPU seconds (from /proc: the server runs on this host) and its commands.
async function serverCost() {
  const f = readFileSync(`/proc/${redis.pid}/stat`, 'utf8').split(') ')[1].split(' ');
  const cpu = (Number(f[11]) + Number(f[12])) / 100;
  const calls = {};
  const usec = {};
  for (const m of (await probe.info('commandstats')).matchAll(/^cmdstat_(\w+):calls=(\d+),usec=(\d+)/gm)) {
    calls[m[1]] = Number(m[2]);
    usec[m[1]] = Number(m[3]);
  }
  return { cpu, calls, usec };
}
function costPer100k(a, b, docs) {
  const k = 1e5 / docs;
  const calls = Object.entries(b.calls)
    .map(([c, n]) => [c, (n - (a.calls[c] ?? 0)) * k, (b.usec[c] - (a.usec[c] ?? 0)) * k * 1e-6])
    .filter(([, n]) => n >= 1)
    .sort((x, y) => y[1] - x[1]);
  const total = calls.reduce((t, [, n]) => t + n, 0);
  return `${((b.cpu - a.cpu) * k).toFixed(2)} CPU-s, ${Math.round(total)} commands (${calls
    .slice(0, 6)
    .map(([c, n, t]) => `${c} ${Math.round(n)}: ${t.toFixed(2)} s`)
    .join(', ')})`;
}
try {
  console.error(`[scaleout] single process on ${path.basename(corpus)}`);
  let t0 = performance.now();
  const one = JSON.parse((await run(cusim, ['dedup', ...common, '--json', '--quiet'])).out);
  rows.push({ setup: '1 process, no Redis', wall: performance.now() - t0, rate: '', groups: one.groups.length, same: 'reference' });
  const want = JSON.stringify(one.groups);
  for (const n of counts) {
    const prefix = `scaleout${n}`;
    console.error(`[scaleout] ${n} worker(s)`);
    t0 = performance.now();
    const s0 = await serverCost();
    const queue = run(cusim, ['dedup', ...common, '--redis', redis.url, '--prefix', prefix, '--queue', ...rangeBytes, '--json', '--quiet']);
    const workers = Array.from({ length: n }, (_, i) =>
      run(cusim, [
        'worker',
        '--redis',
        redis.url,
        '--prefix',
        prefix,
        '--backend',
        args.backend,
        ...(gpus > 1 ? ['--devices', String(i % gpus)] : []),
        '--quiet',
      ]),
    );
    let s1;
    const [q] = await Promise.all([queue, Promise.all(workers).then(async () => (s1 = await serverCost()))]);
    const wall = performance.now() - t0;
    const s2 = await serverCost();
    const rep = JSON.parse(q.out);
    const docs = rep.workers?.documents ?? one.documents;
    const same = JSON.stringify(rep.groups) === want;
    bad ||= !same;
    const stages = (rep.stages ?? []).map((s) => `${s.stage} ${(s.ms / 1000).toFixed(1)} s`).join('; ');
    rows.push({
      setup: `${n} worker(s)${gpus > 1 ? `, --devices 0..${Math.min(n, gpus) - 1}` : ''}`,
      wall,
      rate: rep.workers?.docsPerSecond ?? '',
      groups: rep.groups.length,
      same: same ? 'yes' : 'NO',
      stages,
      server: `insert ${costPer100k(s0, s1, docs)}; report ${costPer100k(s1, s2, docs)}`,
    });
    // Frees the server's memory for the next run.
    await run(cusim, ['dedup', '--redis', redis.url, '--prefix', prefix, '--drop', '--quiet']);
  }
} finally {
  probe.disconnect();
  await redis.stop();
}

const text = [
  `Scale-out on ${os.hostname()} (${os.cpus().length} CPUs, ${gpus} GPU(s), --backend ${args.backend}): ${path.basename(corpus)}, threshold ${args.threshold}`,
  '',
  '| setup | wall | docs/s per worker | groups | equal to 1 process | worker stages (summed) | redis-server per 100K documents |',
  '| --- | ---: | ---: | ---: | --- | --- | --- |',
  ...rows.map(
    (r) => `| ${r.setup} | ${(r.wall / 1000).toFixed(1)} s | ${r.rate} | ${r.groups} | ${r.same} | ${r.stages ?? ''} | ${r.server ?? ''} |`,
  ),
  '',
].join('\n');
process.stdout.write(text);
if (args.save) {
  const dir = path.join(here, 'results', path.dirname(args.save));
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(here, 'results', `${args.save}.md`), text);
  console.error(`[scaleout] wrote bench/results/${args.save}.md`);
}
if (bad) {
  console.error('[scaleout] FAILED: groups differ from the single process');
  process.exit(1);
}
