// `cusim dedup --redis URL --shard i/N` workers and `--report` against one
// `cusim dedup` process with the same settings, on a real redis-server and a
// real 3-node Redis Cluster; a worker killed mid-shard and restarted.
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, expect, it } from 'vitest';
import { bin, cusim, ensureDist, fixture, root } from './cli-helpers.js';
import { describeRedis, startRedis, useRedis, type RedisHandle } from './redis-helpers.js';

const input = readFileSync(path.join(root, 'test', 'fixtures', 'npm-summaries-2k.tsv'), 'utf8');
// 2^14 hashed columns keep the MinHash tables small (their cost grows with the column count).
const common = ['--mode', 'words', '--threshold', '0.6', '--format', 'lines', '--backend', 'cpu', '--hash-bits', '14'];
let single: { groups: unknown[]; input: unknown };

beforeAll(async () => {
  ensureDist();
  const r = await cusim(['dedup', '-', ...common, '--json', '--quiet'], { input });
  expect(r.status, r.stderr).toBe(0);
  single = JSON.parse(r.stdout);
  expect(single.groups.length).toBeGreaterThan(10);
});

/** Runs a worker; resolves with its exit code and stderr. */
function worker(url: string, prefix: string, shard: string, extra: string[] = []) {
  const p = spawn(process.execPath, [bin, 'dedup', '-', ...common, '--redis', url, '--prefix', prefix, '--shard', shard, ...extra], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  p.stdin.end(input);
  let err = '';
  p.stderr.on('data', (d) => (err += d));
  const done = new Promise<{ code: number | null; signal: string | null; err: string }>((resolve) =>
    p.on('close', (code, signal) => resolve({ code, signal, err })),
  );
  return { p, done };
}

async function report(url: string, prefix: string) {
  const r = await cusim(['dedup', '--redis', url, '--prefix', prefix, '--report', '--json', '--backend', 'cpu', '--quiet']);
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as typeof single;
}

function suite(cluster: boolean): () => RedisHandle {
  const handle = useRedis({ cluster });

  it('classic MinHash (--mode qgrams: binary features): 3 workers give exactly the single-process groups', async () => {
    const qgrams = ['--mode', 'qgrams', '--threshold', '0.7'];
    const one = await cusim(['dedup', '-', ...common, ...qgrams, '--json', '--quiet'], { input });
    expect(one.status, one.stderr).toBe(0);
    const want = JSON.parse(one.stdout) as typeof single & { options: { method: string } };
    expect(want.options.method).toBe('classic');
    expect(want.groups.length).toBeGreaterThan(10);
    const runs = await Promise.all(
      [0, 1, 2].map((i) => worker(handle().url, 'classic', `${i}/3`, [...qgrams, '--batch-docs', '300']).done),
    );
    for (const r of runs) expect(r.code, r.err).toBe(0);
    const got = (await report(handle().url, 'classic')) as typeof want;
    expect(got.options.method).toBe('classic');
    expect(got.groups).toEqual(want.groups);
    expect(got.input).toEqual({ ...(want.input as object), source: '-' });
    // A worker asking for weighted signatures cannot join the classic job.
    const w = await worker(handle().url, 'classic', '0/3', [...qgrams, '--weighted', '--weighting', 'binary']).done;
    expect(w.code).toBe(2);
    expect(w.err).toMatch(/was started with method="classic", this worker has method="weighted"/);
  });

  it('4 workers with --shard i/4 give exactly the single-process groups', async () => {
    const runs = await Promise.all([0, 1, 2, 3].map((i) => worker(handle().url, 'four', `${i}/4`, ['--batch-docs', '200']).done));
    for (const r of runs) expect(r.code, r.err).toBe(0);
    const got = await report(handle().url, 'four');
    expect(got.groups).toEqual(single.groups);
    expect(got.input).toEqual({ ...(single.input as object), source: '-' });
  });

  it('a worker killed mid-shard and restarted loses and duplicates nothing', async () => {
    const first = worker(handle().url, 'killed', '1/4', ['--batch-docs', '20']);
    // Kill it once a few batches are recorded, whatever it is doing then.
    const key = 'killed:progress{1/4}';
    const cliArgs = ['-h', '127.0.0.1', '-p', String(handle().ports[0]), ...(cluster ? ['-c'] : []), 'hlen', key];
    for (let t = 0; ; t++) {
      const n = Number(spawnSync('redis-cli', cliArgs, { encoding: 'utf8' }).stdout.trim());
      if (n >= 3) break;
      expect(t, 'the worker never recorded a batch').toBeLessThan(600);
      await new Promise((r) => setTimeout(r, 25));
    }
    first.p.kill('SIGKILL');
    expect((await first.done).signal).toBe('SIGKILL');
    const again = await worker(handle().url, 'killed', '1/4', ['--batch-docs', '20']).done;
    expect(again.code, again.err).toBe(0);
    expect(again.err).toMatch(/batches were already done/);
    // The report refuses to run before every shard has finished.
    const early = await cusim([
      'dedup',
      '--redis',
      handle().url,
      '--prefix',
      'killed',
      '--report',
      '--json',
      '--backend',
      'cpu',
      '--quiet',
    ]);
    expect(early.status).toBe(1);
    expect(early.stderr).toMatch(/shard 0\/4 of job 'killed' has not finished/);
    const rest = await Promise.all([0, 2, 3].map((i) => worker(handle().url, 'killed', `${i}/4`, ['--batch-docs', '20']).done));
    for (const r of rest) expect(r.code, r.err).toBe(0);
    // A worker run again after finishing changes nothing either.
    expect((await worker(handle().url, 'killed', '2/4', ['--batch-docs', '20']).done).code).toBe(0);
    const got = await report(handle().url, 'killed');
    expect(got.groups).toEqual(single.groups);
    expect(got.input).toEqual({ ...(single.input as object), source: '-' });
  });
  return handle;
}

describeRedis('cusim dedup --redis on one Redis server', () => {
  const handle = suite(false);

  it('refuses inconsistent workers and impossible settings', async () => {
    // (the server of this suite is reused through a fresh one: a small cost for isolation)
    const redis = await startRedis();
    try {
      const a = await worker(redis.url, 'mixed', '0/2').done;
      expect(a.code, a.err).toBe(0);
      const b = await worker(redis.url, 'mixed', '1/2', ['--seed', '2']).done;
      expect(b.code).toBe(2);
      expect(b.err).toMatch(/was started with seed=1, this worker has seed=2/);
      const c = await worker(redis.url, 'mixed', '1/3').done;
      expect(c.code).toBe(2);
      expect(c.err).toMatch(/runs with 2 shards, not 3/);
    } finally {
      await redis.stop();
    }
    const tfidf = await cusim(['dedup', fixture, '--redis', 'redis://127.0.0.1:1', '--shard', '0/2', '--weighting', 'tfidf', '--quiet']);
    expect(tfidf.status).toBe(2);
    expect(tfidf.stderr).toMatch(/tfidf needs document frequencies over the whole corpus/);
    expect((await cusim(['dedup', fixture, '--shard', '0/2', '--quiet'])).stderr).toMatch(
      /--shard, --queue, --report and --drop need --redis URL/,
    );
    expect((await cusim(['dedup', fixture, '--redis', 'redis://x', '--shard', '4/4', '--quiet'])).stderr).toMatch(/--shard must be i\/N/);
    const down = await cusim(['dedup', fixture, '--redis', 'redis://127.0.0.1:1', '--shard', '0/2', '--quiet', '--redis-retry', '0']);
    expect(down.status).toBe(1);
    expect(down.stderr).toMatch(/Redis at redis:\/\/127.0.0.1:1: unreachable/);
  });

  it('a worker killed (SIGKILL) at the job claim, before or after a batch insert, then rerun: the report equals the single process', async () => {
    const points = ['claim', 'batch:0', 'insert:0', 'batch:3', 'insert:5'];
    for (const point of points) {
      const prefix = `crash-${point.replace(':', '')}`;
      const args = ['--batch-docs', '40'];
      const runs = [0, 1, 2, 3].map((i) => worker(handle().url, prefix, `${i}/4`, i === 1 ? [...args, '--crash-at', point] : args).done);
      const res = await Promise.all(runs);
      expect(res[1].signal, `${point}: ${res[1].err}`).toBe('SIGKILL');
      for (const i of [0, 2, 3]) expect(res[i].code, res[i].err).toBe(0);
      // The report refuses to run on the killed shard's partial work.
      const early = await cusim([
        'dedup',
        '--redis',
        handle().url,
        '--prefix',
        prefix,
        '--report',
        '--json',
        '--backend',
        'cpu',
        '--quiet',
      ]);
      expect(early.status).toBe(1);
      expect(early.stderr).toMatch(/shard 1\/4 of job '.*' has not finished/);
      const again = await worker(handle().url, prefix, '1/4', args).done;
      expect(again.code, again.err).toBe(0);
      const got = await report(handle().url, prefix);
      expect(got.groups, point).toEqual(single.groups);
      expect(got.input).toEqual({ ...(single.input as object), source: '-' });
    }
    // A rerun cutting other batches would skip other documents: refused.
    const other = await worker(handle().url, 'crash-claim', '1/4', ['--batch-docs', '41']).done;
    expect(other.code).toBe(2);
    expect(other.err).toMatch(/was started with --batch-docs 40, not 41/);
  }, 300_000);

  it('a worker whose Redis dies retries for --redis-retry seconds, then exits 1 with one line', async () => {
    const redis = await startRedis();
    try {
      const w = worker(redis.url, 'dies', '0/1', ['--batch-docs', '1', '--redis-retry', '2', '--quiet']);
      // Stop the worker once it has recorded a few batches, kill the server, and let the worker go on.
      const cliArgs = ['-h', '127.0.0.1', '-p', String(redis.ports[0]), 'hlen', 'dies:progress{0/1}'];
      for (let t = 0; Number(spawnSync('redis-cli', cliArgs, { encoding: 'utf8' }).stdout.trim()) < 3; t++) {
        expect(t, 'the worker never recorded a batch').toBeLessThan(2400);
        await new Promise((r) => setTimeout(r, 25));
      }
      w.p.kill('SIGSTOP');
      await redis.stop();
      w.p.kill('SIGCONT');
      const t0 = Date.now();
      const r = await w.done;
      expect(r.code, r.err).toBe(1);
      // Having given up, the worker exits: it does not wait out the 60 s
      // command timeout on a QUIT queued for a server that is gone.
      expect(Date.now() - t0, 'the worker stayed alive after giving up').toBeLessThan(40_000);
      const lines = r.err.trim().split('\n');
      expect(lines, r.err).toHaveLength(1);
      expect(lines[0]).toMatch(/^cusim: Redis at redis:\/\/127\.0\.0\.1:\d+: unreachable .*gave up after retrying for 2 s/);
    } finally {
      await redis.stop();
    }
  });

  it('workers refuse a server that may evict keys unless --allow-eviction; the report fails on a lost band key', async () => {
    const redis = await startRedis();
    try {
      spawnSync('redis-cli', ['-h', '127.0.0.1', '-p', String(redis.ports[0]), 'config', 'set', 'maxmemory-policy', 'allkeys-lru']);
      const refused = await worker(redis.url, 'evict', '0/1', ['--quiet']).done;
      expect(refused.code).toBe(1);
      expect(refused.err).toMatch(/has maxmemory-policy allkeys-lru: it may evict keys .*--allow-eviction/);
      const allowed = await worker(redis.url, 'evict', '0/1', ['--quiet', '--allow-eviction']).done;
      expect(allowed.code, allowed.err).toBe(0);
      expect(allowed.err).toMatch(/warning: Redis at .* has maxmemory-policy allkeys-lru/);
      expect((await report(redis.url, 'evict')).groups).toEqual(single.groups);
      spawnSync('redis-cli', ['-h', '127.0.0.1', '-p', String(redis.ports[0]), 'del', 'evict:lsh:b{2.7}']);
      const lost = await cusim(['dedup', '--redis', redis.url, '--prefix', 'evict', '--report', '--json', '--backend', 'cpu', '--quiet']);
      expect(lost.status).toBe(1);
      expect(lost.stderr).toMatch(/index at prefix 'evict:lsh' is inconsistent: (band 2|id \d+ has entries in)/);
    } finally {
      await redis.stop();
    }
  });
});

describeRedis('cusim dedup --redis on a 3-node Redis Cluster', () => suite(true));
