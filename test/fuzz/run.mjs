#!/usr/bin/env node
// Fuzz harness: generated bad and edge inputs for every public entry point and
// every native method (one module per family in families/), each case in a
// child process (batches of cases per child; a crash or hang is pinned on the
// case that started and never ended, and the rest of its batch goes to a new
// child). Counts typed errors, crashes, hangs, wrong results (against the CPU
// reference or brute force) and untyped errors, per entry point.
//
//   node test/fuzz/run.mjs --cases 20000 [--seed 1] [--jobs 2] [--family minhash,join]
//   node test/fuzz/run.mjs --only 123,456 --seed 1     (rerun cases; test/fuzz/replay.mjs runs one in-process)
//   node test/fuzz/run.mjs --cases 5000 --backend cuda (valid-input scenarios on the GPU)
//   npm run fuzz -- --cases 20000
//
// Exit status 0 only when no case crashed, hung, returned a wrong result or
// threw an untyped error. --json PATH writes the summary.
import { fork } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startRedisServer } from './redis-server.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const FAIL = ['crash', 'hang', 'wrong', 'untyped', 'harness'];

/**
 * @param {{ cases?: number, seed?: number, jobs?: number, batch?: number, timeoutMs?: number, families?: string[],
 *   only?: number[], backend?: string, log?: (line: string) => void }} [options]
 */
export async function fuzz({
  cases = 2000,
  seed = 1,
  jobs = Math.min(4, availableParallelism()),
  batch = 200,
  timeoutMs = 30000,
  families,
  only,
  backend = 'cpu',
  log = () => {},
} = {}) {
  const queue = only ? [...only] : Array.from({ length: cases }, (_, i) => i);
  const byEntry = new Map();
  const failures = [];
  const count = (entry, family, status, id, detail) => {
    const key = `${family}: ${entry}`;
    if (!byEntry.has(key)) byEntry.set(key, { cases: 0, ok: 0, typed: 0, wrong: 0, untyped: 0, crash: 0, hang: 0, harness: 0 });
    const e = byEntry.get(key);
    e.cases++;
    e[status]++;
    if (FAIL.includes(status)) failures.push({ id, entry: key, status, detail });
  };
  let done = 0;
  const t0 = Date.now();
  // The Redis family's server: one per run, shared by the children, stopped at the end.
  const redis = !families || families.includes('redis') ? await startRedisServer() : undefined;

  async function worker() {
    while (queue.length) {
      const ids = queue.splice(0, batch);
      await runBatch(ids);
    }
  }

  function runBatch(ids) {
    return new Promise((resolve) => {
      const child = fork(path.join(here, 'child.mjs'), [], {
        execArgv: ['--expose-gc'],
        stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
        serialization: 'advanced',
      });
      let stderr = '';
      child.stderr.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
      const pending = new Set(ids);
      let started = null; // { id, entry, family }
      let timer = null;
      let finished = false;
      const arm = () => {
        clearTimeout(timer);
        timer = setTimeout(() => {
          if (started) {
            count(started.entry, started.family, 'hang', started.id, `no result after ${timeoutMs} ms`);
            pending.delete(started.id);
            done++;
            started = null;
          }
          child.kill('SIGKILL');
        }, timeoutMs);
      };
      child.on('message', (m) => {
        if (m.t === 'ready') {
          child.send({ t: 'run', seed, ids, families, backend, redis: redis?.url });
          arm();
        } else if (m.t === 'start') {
          started = m;
          arm();
        } else if (m.t === 'end') {
          count(m.entry, m.family, m.status, m.id, m.detail);
          pending.delete(m.id);
          started = null;
          done++;
          if (done % 500 === 0) log(`${done} cases, ${((Date.now() - t0) / 1000).toFixed(0)} s`);
        } else if (m.t === 'batch-done') {
          finished = true;
          child.kill();
        }
      });
      child.on('exit', (code, signal) => {
        clearTimeout(timer);
        if (started) {
          count(
            started.entry,
            started.family,
            'crash',
            started.id,
            `child died (${signal ?? `exit ${code}`}): ${stderr.trim().split('\n').slice(-6).join(' | ')}`,
          );
          pending.delete(started.id);
          done++;
        } else if (!finished && pending.size === ids.length) {
          // Died before running anything: the harness itself is broken.
          failures.push({
            id: ids[0],
            entry: '(child)',
            status: 'harness',
            detail: `child exited (${signal ?? code}) before its batch: ${stderr.slice(-1500)}`,
          });
          for (const id of pending) count('(child start)', '(harness)', 'harness', id, 'child failed to start');
          pending.clear();
        }
        // The rest of the batch goes to a fresh child.
        if (pending.size) queue.unshift(...pending);
        resolve();
      });
    });
  }

  try {
    await Promise.all(Array.from({ length: jobs }, worker));
  } finally {
    await redis?.stop();
  }
  const totals = { cases: 0, ok: 0, typed: 0, wrong: 0, untyped: 0, crash: 0, hang: 0, harness: 0 };
  for (const e of byEntry.values()) for (const k of Object.keys(totals)) totals[k] += e[k];
  return {
    seed,
    cases: totals.cases,
    seconds: (Date.now() - t0) / 1000,
    totals,
    byEntry: Object.fromEntries([...byEntry].sort()),
    failures,
  };
}

export function formatSummary(s) {
  const cols = ['cases', 'ok', 'typed', 'wrong', 'untyped', 'crash', 'hang'];
  const lines = [`| entry point | ${cols.join(' | ')} |`, `| --- | ${cols.map(() => '---:').join(' | ')} |`];
  for (const [k, e] of Object.entries(s.byEntry)) lines.push(`| ${k} | ${cols.map((c) => e[c]).join(' | ')} |`);
  lines.push(`| **total** | ${cols.map((c) => s.totals[c]).join(' | ')} |`);
  return lines.join('\n');
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      cases: { type: 'string', default: '2000' },
      seed: { type: 'string', default: '1' },
      jobs: { type: 'string' },
      batch: { type: 'string', default: '200' },
      'timeout-ms': { type: 'string', default: '30000' },
      family: { type: 'string' },
      only: { type: 'string' },
      json: { type: 'string' },
      // Backend of the valid-input scenarios ('cuda' on a GPU host; references stay the JS oracles).
      backend: { type: 'string', default: 'cpu' },
    },
  });
  const s = await fuzz({
    cases: Number(values.cases),
    seed: Number(values.seed),
    jobs: values.jobs ? Number(values.jobs) : undefined,
    batch: Number(values.batch),
    timeoutMs: Number(values['timeout-ms']),
    families: values.family?.split(','),
    only: values.only?.split(',').map(Number),
    backend: values.backend,
    log: (m) => console.error(m),
  });
  console.log(formatSummary(s));
  console.log(`\n${s.cases} cases, seed ${s.seed}, ${s.seconds.toFixed(1)} s`);
  for (const f of s.failures.slice(0, 50)) console.log(`FAIL case ${f.id} ${f.status} ${f.entry}: ${f.detail}`);
  if (s.failures.length > 50) console.log(`... ${s.failures.length - 50} more failures`);
  if (values.json) writeFileSync(values.json, JSON.stringify(s, null, 2));
  process.exitCode = s.failures.length ? 1 : 0;
}
