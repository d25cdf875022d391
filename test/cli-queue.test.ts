// Scale-out over byte ranges against one `cusim dedup FILE` process with the
// same settings, on a real redis-server and a real 3-node Redis Cluster:
// `--queue` with `cusim worker`s, `--shard i/N` over files, a worker killed
// mid-range (recovered by the queue, no rerun), input that differs refused
// before parsing, lost keys detected by the report, and --drop.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bin, cusim, ensureDist, root } from './cli-helpers.js';
import { describeRedis, startRedis, useRedis } from './redis-helpers.js';
import type { RedisHandle } from './redis-helpers.js';

const dir = mkdtempSync(path.join(tmpdir(), 'cusim-queue-'));
const jsonl = path.join(dir, 'corpus.jsonl');
const csv = path.join(dir, 'corpus.csv');
const common = ['--threshold', '0.6', '--backend', 'cpu'];
// Small ranges and batches: several ranges per file, several batches per range.
const small = ['--range-bytes', '24000'];

interface Report {
  groups: unknown[];
  input: unknown;
  stages: { stage: string; ms: number }[];
  redis?: { keys: number; bytes: number };
  workers?: { count: number; documents: number };
}
const want = new Map<string, Report>();

beforeAll(async () => {
  ensureDist();
  // The npm summaries as JSONL, and as CSV whose every 7th text holds a quoted newline and quotes.
  const rows = readFileSync(path.join(root, 'test', 'fixtures', 'npm-summaries-2k.tsv'), 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => l.split('\t'));
  writeFileSync(jsonl, rows.map(([name, text]) => JSON.stringify({ name, text })).join('\n') + '\n');
  const q = (s: string) => `"${s.replace(/"/g, '""')}"`;
  writeFileSync(
    csv,
    'name,text\n' + rows.map(([name, text], i) => `${q(name)},${q(i % 7 ? text : `${text}\n"quoted" line`)}`).join('\n') + '\n',
  );
  for (const f of [jsonl, csv]) {
    const r = await cusim(['dedup', f, ...common, '--json', '--quiet']);
    expect(r.status, r.stderr).toBe(0);
    const rep = JSON.parse(r.stdout) as Report;
    expect(rep.groups.length).toBeGreaterThan(10);
    want.set(f, rep);
  }
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Proc {
  p: ReturnType<typeof spawn>;
  done: Promise<{ code: number | null; signal: string | null; out: string; err: string }>;
  /** Resolves at the first stderr line matching `re`. */
  line(re: RegExp): Promise<RegExpExecArray>;
}

function start(args: string[], env: NodeJS.ProcessEnv = process.env): Proc {
  const p = spawn(process.execPath, [bin, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
  let out = '';
  let err = '';
  const waiters: { re: RegExp; resolve: (m: RegExpExecArray) => void }[] = [];
  p.stdout!.on('data', (d) => (out += d));
  p.stderr!.on('data', (d) => {
    err += d;
    for (const w of waiters.splice(0)) {
      const m = w.re.exec(err);
      if (m) w.resolve(m);
      else waiters.push(w);
    }
  });
  const done = new Promise<{ code: number | null; signal: string | null; out: string; err: string }>((resolve) =>
    p.on('close', (code, signal) => resolve({ code, signal, out, err })),
  );
  return {
    p,
    done,
    line: (re) =>
      new Promise((resolve, reject) => {
        const m = re.exec(err);
        if (m) return resolve(m);
        waiters.push({ re, resolve });
        void done.then(() => reject(new Error(`exited before printing ${re}: ${err}`)));
      }),
  };
}

const producer = (h: RedisHandle, prefix: string, file: string, extra: string[] = []) =>
  start(['dedup', file, ...common, ...small, '--redis', h.url, '--prefix', prefix, '--queue', '--json', ...extra]);
const worker = (h: RedisHandle, prefix: string, extra: string[] = []) =>
  start(['worker', '--redis', h.url, '--prefix', prefix, '--backend', 'cpu', '--stalled-ms', '1500', ...extra]);

function redisCli(h: RedisHandle, cluster: boolean, ...args: string[]): string {
  return spawnSync('redis-cli', ['-h', '127.0.0.1', '-p', String(h.ports[0]), ...(cluster ? ['-c'] : []), ...args], { encoding: 'utf8' })
    .stdout;
}

function scanNode(port: number, pattern: string): string[] {
  return spawnSync('redis-cli', ['-h', '127.0.0.1', '-p', String(port), '--scan', '--pattern', pattern], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter(Boolean);
}

/** Keys named `prefix:*` on every node. */
function keysOf(h: RedisHandle, prefix: string): string[] {
  return h.ports.flatMap((port) => scanNode(port, `${prefix}:*`));
}

/** The bytes of the string values of keys matching `pattern`, over every node (STRLEN: exact). */
function stringBytes(h: RedisHandle, pattern: string): number {
  let n = 0;
  for (const port of h.ports) {
    const keys = scanNode(port, pattern);
    const out = spawnSync('redis-cli', ['-h', '127.0.0.1', '-p', String(port)], {
      encoding: 'utf8',
      input: keys.map((k) => `STRLEN ${k}`).join('\n') + '\n',
    }).stdout;
    for (const l of out.split('\n')) if (/^\d+$/.test(l.trim())) n += Number(l.trim());
  }
  return n;
}

function suite(cluster: boolean) {
  const handle = useRedis({ cluster });

  it('--queue with 2 workers on a JSONL file gives exactly the single-process groups; --drop removes every key of the job', async () => {
    const h = handle();
    const prod = producer(h, 'q1', jsonl);
    const ws = [worker(h, 'q1'), worker(h, 'q1')];
    for (const w of ws) {
      const r = await w.done;
      expect(r.code, r.err).toBe(0);
    }
    const r = await prod.done;
    expect(r.code, r.err).toBe(0);
    const got = JSON.parse(r.out) as Report;
    const one = want.get(jsonl)!;
    expect(got.groups).toEqual(one.groups);
    expect(got.input).toEqual(one.input);
    expect(got.workers!.documents).toBe(2000);
    expect(got.stages.map((s) => s.stage)).toContain('workers: insert');
    // Bytes held: at least the index's band and record strings and the batches' row blobs, whose lengths Redis gives exactly.
    const blobs = stringBytes(h, 'q1:rows:*');
    expect(blobs).toBeGreaterThan(2000 * 8);
    const strings = stringBytes(h, 'q1:lsh:[br]{*') + blobs;
    expect(strings).toBeGreaterThan(2000 * 4);
    expect(got.redis!.bytes).toBeGreaterThanOrEqual(strings);
    expect(got.redis!.keys).toBeGreaterThan(64);
    // Another job's keys stay.
    redisCli(h, cluster, 'set', 'other:key', 'x');
    const d = await cusim(['dedup', '--redis', h.url, '--prefix', 'q1', '--drop']);
    expect(d.status, d.stderr).toBe(0);
    expect(keysOf(h, 'q1')).toEqual([]);
    expect(redisCli(h, cluster, 'get', 'other:key').trim()).toBe('x');
  });

  it('--shard i/N over a CSV file with quoted newlines (i from JOB_COMPLETION_INDEX for one) gives exactly the single-process groups', async () => {
    const h = handle();
    const args = (shard: string) => [
      'dedup',
      csv,
      ...common,
      ...small,
      '--redis',
      h.url,
      '--prefix',
      's1',
      '--shard',
      shard,
      '--batch-docs',
      '100',
    ];
    const runs = await Promise.all([
      start(args('0/3')).done,
      start(args('JOB_COMPLETION_INDEX/3'), { ...process.env, JOB_COMPLETION_INDEX: '1' }).done,
      start(args('2/3')).done,
    ]);
    for (const r of runs) expect(r.code, r.err).toBe(0);
    const rep = await cusim(['dedup', '--redis', h.url, '--prefix', 's1', '--report', '--json', '--backend', 'cpu', '--quiet']);
    expect(rep.status, rep.stderr).toBe(0);
    const got = JSON.parse(rep.stdout) as Report;
    expect(got.groups).toEqual(want.get(csv)!.groups);
    expect(got.input).toEqual(want.get(csv)!.input);
  });
}

describeRedis('cusim dedup --redis --queue and cusim worker on one Redis server', () => {
  suite(false);
  const handle = useRedis();

  it('a worker killed mid-range: its range goes back through the queue and another worker finishes it', async () => {
    const h = handle();
    const prod = producer(h, 'k1', jsonl);
    // Killed (by itself: a kill from here could land after it finished every range) once 2 batches of its first range are inserted.
    const a = worker(h, 'k1', ['--verbose', '--batch-docs', '50', '--crash-at', 'insert:2']);
    const ra = await a.done;
    expect(ra.signal).toBe('SIGKILL');
    expect(ra.err.match(/range \d+: \d+ records inserted\n/g)).toHaveLength(2);
    // B cuts other batches: the range's blobs it writes are other keys than A's, and the report reads B's.
    const b = worker(h, 'k1', ['--verbose', '--batch-docs', '400']);
    const rb = await b.done;
    expect(rb.code, rb.err).toBe(0);
    // The range it held went back through BullMQ's stalled check (its stalled counter, 'stc', is 1) and B did it.
    const ranges = Number(JSON.parse(redisCli(h, false, 'hget', 'k1:job', 'ranges')));
    const stalled = Array.from({ length: ranges }, (_, r) => r).filter(
      (r) => redisCli(h, false, 'hget', `k1:q{k1}:ranges:r${r}`, 'stc').trim() === '1',
    );
    expect(stalled).toHaveLength(1);
    expect(rb.err).toMatch(new RegExp(`range ${stalled[0]}: \\d+ records in`));
    // JSONL ranges of a classic job go through the block reader `cusim dedup FILE` uses.
    expect(rb.err).toMatch(/records read by the native \(simdjson [\d.]+\) reader/);
    const r = await prod.done;
    expect(r.code, r.err).toBe(0);
    const got = JSON.parse(r.out) as Report;
    expect(got.groups).toEqual(want.get(jsonl)!.groups);
    expect(got.input).toEqual(want.get(jsonl)!.input);
  });

  it('a worker whose input differs is refused before it parses; the range is done by a worker with the right input', async () => {
    const h = handle();
    const file = path.join(dir, 'changed.jsonl');
    const bytes = readFileSync(jsonl);
    writeFileSync(file, bytes);
    const prod = producer(h, 'm1', file);
    await prod.line(/ranges, \d+ queued/);
    // Same size, one byte changed in the first range (the first a worker takes).
    const changed = Buffer.from(bytes);
    const at = changed.indexOf('"text":"') + 8;
    changed[at] = changed[at] === 0x41 ? 0x42 : 0x41;
    writeFileSync(file, changed);
    const bad = await worker(h, 'm1').done;
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/the input differs from the job's: .*changed\.jsonl bytes 0-\d+ hash to/);
    // Nothing of that range reached the index: no records, no rows (vectors, names), no range finished.
    expect(redisCli(h, false, '--scan', '--pattern', 'm1:lsh:r*').trim()).toBe('');
    expect(redisCli(h, false, '--scan', '--pattern', 'm1:rows:*').trim()).toBe('');
    expect(redisCli(h, false, 'hlen', 'm1:done').trim()).toBe('0');
    // A planner over the changed file is refused too, before parsing anything.
    const other = await cusim(['dedup', file, ...common, ...small, '--redis', h.url, '--prefix', 'm1', '--shard', '0/2']);
    expect(other.status).toBe(2);
    expect(other.stderr).toMatch(/job 'm1' in Redis was planned over different input/);
    writeFileSync(file, bytes);
    const good = await worker(h, 'm1').done;
    expect(good.code, good.err).toBe(0);
    const r = await prod.done;
    expect(r.code, r.err).toBe(0);
    expect((JSON.parse(r.out) as Report).groups).toEqual(want.get(jsonl)!.groups);
  });

  it('the report fails, naming what is missing, when records were lost from the index', async () => {
    const h = handle();
    const args = (shard: string) => ['dedup', jsonl, ...common, ...small, '--redis', h.url, '--prefix', 'lost', '--shard', shard];
    for (const r of await Promise.all([start(args('0/2')).done, start(args('1/2')).done])) expect(r.code, r.err).toBe(0);
    const report = async () =>
      await cusim(['dedup', '--redis', h.url, '--prefix', 'lost', '--report', '--json', '--backend', 'cpu', '--quiet']);
    expect((await report()).status).toBe(0);
    const key = redisCli(h, false, '--scan', '--pattern', 'lost:lsh:r{*').split('\n').filter(Boolean)[0];
    expect(Number(redisCli(h, false, 'strlen', key).trim())).toBeGreaterThan(0);
    redisCli(h, false, 'del', key);
    const r = await report();
    expect(r.status).toBe(1);
    // The index's own totals catch a deleted record key first (the job's per-range totals are checked after).
    expect(r.stderr).toMatch(/is inconsistent: record partition \d+ holds 0 rows, its total says [1-9]\d*/);
  });

  it('a weighted job (--hash-bits given to both) over --shard ranges gives exactly the single-process groups: its batch blobs carry the weights', async () => {
    const h = handle();
    const weighted = ['--weighted', '--hash-bits', '18'];
    const one = await cusim(['dedup', jsonl, ...common, ...weighted, '--json', '--quiet']);
    expect(one.status, one.stderr).toBe(0);
    const args = (shard: string) => [
      'dedup',
      jsonl,
      ...common,
      ...weighted,
      ...small,
      '--redis',
      h.url,
      '--prefix',
      'wt',
      '--shard',
      shard,
    ];
    for (const r of await Promise.all([start(args('0/2')).done, start(args('1/2')).done])) expect(r.code, r.err).toBe(0);
    const rep = await cusim(['dedup', '--redis', h.url, '--prefix', 'wt', '--report', '--json', '--backend', 'cpu', '--quiet']);
    expect(rep.status, rep.stderr).toBe(0);
    const want = JSON.parse(one.stdout) as Report & { options: { method: string } };
    const got = JSON.parse(rep.stdout) as Report & { options: { method: string } };
    expect(got.options.method).toBe('weighted');
    expect(want.groups.length).toBeGreaterThan(10);
    expect(got.groups).toEqual(want.groups);
    expect(got.input).toEqual(want.input);
  });

  it('the report fails, naming the key, when a batch blob of rows (vectors and names) was lost', async () => {
    const h = handle();
    const args = (shard: string) => ['dedup', jsonl, ...common, ...small, '--redis', h.url, '--prefix', 'blob', '--shard', shard];
    for (const r of await Promise.all([start(args('0/2')).done, start(args('1/2')).done])) expect(r.code, r.err).toBe(0);
    const report = async () =>
      await cusim(['dedup', '--redis', h.url, '--prefix', 'blob', '--report', '--json', '--backend', 'cpu', '--quiet']);
    const ok = await report();
    expect(ok.status, ok.stderr).toBe(0);
    expect((JSON.parse(ok.stdout) as Report).groups).toEqual(want.get(jsonl)!.groups);
    const keys = redisCli(h, false, '--scan', '--pattern', 'blob:rows:*').split('\n').filter(Boolean);
    expect(keys.length).toBeGreaterThan(1);
    redisCli(h, false, 'del', keys[0]);
    const r = await report();
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(
      new RegExp(`job 'blob' is inconsistent: the rows of 1 of its ${keys.length} insert batches are gone \\(${keys[0]}\\)`),
    );
  });

  it('refuses --queue on stdin and workers without their options', async () => {
    const r = await cusim(['dedup', '-', '--redis', 'redis://127.0.0.1:1', '--queue', '--quiet'], { input: 'a b c\n' });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--queue splits files into ranges; stdin cannot be split/);
    const both = await cusim(['dedup', jsonl, '--redis', 'redis://127.0.0.1:1', '--queue', '--shard', '0/2', '--quiet']);
    expect(both.status).toBe(2);
    expect(both.stderr).toMatch(/--redis needs one of --queue, --shard i\/N \(a worker\), --report or --drop/);
    const k8s = await cusim(['dedup', jsonl, '--redis', 'redis://127.0.0.1:1', '--shard', 'JOB_COMPLETION_INDEX/2', '--quiet'], {
      env: { ...process.env, JOB_COMPLETION_INDEX: undefined },
    });
    expect(k8s.status).toBe(2);
    expect(k8s.stderr).toMatch(/JOB_COMPLETION_INDEX is not set/);
    expect((await cusim(['worker'])).stderr).toMatch(/--redis/);
  });
});

describeRedis('cusim dedup --redis --queue and cusim worker on a 3-node Redis Cluster', () => suite(true));

describeRedis('cusim dedup --redis --queue and cusim worker across a redis-server restart', () => {
  let h: RedisHandle | undefined;
  // Every write on disk before it is acknowledged: the restarted server holds all that any client was told is done.
  beforeAll(async () => {
    h = await startRedis({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
  });
  afterAll(async () => {
    await h?.stop();
  });

  it('a restart mid-job (AOF): the waiting --queue process and the worker reconnect by themselves, and the job ends with the single-process groups', async () => {
    const prod = producer(h!, 'rs', jsonl);
    // Small batches: each range takes a few batches, so the worker is stopped well inside the job.
    const w = worker(h!, 'rs', ['--verbose', '--batch-docs', '100']);
    await w.line(/range \d+: \d+ records in [\d.]+ s/);
    // Paused while the server restarts: its connections die under it, mid-range or between ranges.
    w.p.kill('SIGSTOP');
    // Ranges left when the server goes down: the stopped worker, the job's only one, must do them after the restart.
    const ranges = Number(redisCli(h!, false, 'hget', 'rs:job', 'ranges').trim());
    const doneBefore = Number(redisCli(h!, false, 'hlen', 'rs:done').trim());
    expect(doneBefore).toBeGreaterThan(0);
    expect(doneBefore).toBeLessThan(ranges);
    try {
      await h!.restart();
    } finally {
      w.p.kill('SIGCONT');
    }
    const r = await w.done;
    expect(r.code, r.err).toBe(0);
    expect(Number(redisCli(h!, false, 'hlen', 'rs:done').trim())).toBe(ranges);
    const p = await prod.done;
    expect(p.code, p.err).toBe(0);
    const got = JSON.parse(p.out) as Report;
    expect(got.groups).toEqual(want.get(jsonl)!.groups);
    expect(got.input).toEqual(want.get(jsonl)!.input);
    expect(got.workers!.documents).toBeGreaterThanOrEqual(2000);
  });
});
