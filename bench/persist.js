// Persistence and shared storage: signature inserts per second from one
// worker into a local Redis (MinHashLSH storage 'redis'; the peer is
// datasketch's layout, one SADD per band per signature, pipelined, over the
// same client), and HammingIndex load() time from a warm page cache.
//   node bench/run.js persist [--quick]
// A redis-server found on PATH is started on a free loopback port and
// stopped afterwards; CUSIM_BENCH_REDIS=redis://host:port uses a running one.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';

function xorshift(seed) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return s >>> 0;
  };
}

async function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function startRedis(log) {
  if (process.env.CUSIM_BENCH_REDIS) return { url: process.env.CUSIM_BENCH_REDIS, stop: async () => {}, version: 'external' };
  const which = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' });
  if (which.status !== 0) return undefined;
  const port = await freePort();
  const dir = mkdtempSync(path.join(tmpdir(), 'cusim-bench-redis-'));
  const p = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], {
    stdio: 'ignore',
  });
  const version = spawnSync('redis-server', ['--version'], { encoding: 'utf8' }).stdout.trim();
  for (let i = 0; i < 200; i++) {
    if (spawnSync('redis-cli', ['-p', String(port), 'ping'], { encoding: 'utf8' }).stdout.includes('PONG')) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  log(`redis: ${version} on ${port}`);
  return {
    url: `redis://127.0.0.1:${port}`,
    version,
    stop: async () => {
      p.kill('SIGTERM');
      await new Promise((r) => p.once('exit', r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function redisInserts({ cusim, quick, log }) {
  const loadAtStart = loadavg()[0].toFixed(1);
  const redis = await startRedis(log);
  if (!redis)
    return { title: 'Redis inserts', rows: [], columns: [], notes: ['skipped: redis-server not found (apt-get install redis-server)'] };
  const samples = 128;
  const n = quick ? 100_000 : 1_000_000;
  const per = samples * 2;
  const next = xorshift(7);
  const sigs = new Uint32Array(n * per);
  for (let i = 0; i < sigs.length; i++) sigs[i] = next();
  const ids = Uint32Array.from({ length: n }, (_, i) => i);
  const rows = [];
  try {
    for (const [threshold, signatures] of [
      [0.8, false],
      [0.9, false],
      [0.8, true],
    ]) {
      const prefix = `bench${rows.length}`;
      const lsh = new cusim.MinHashLSH({ threshold, samples, storage: { type: 'redis', url: redis.url, prefix, signatures } });
      await lsh.count(); // connect and create the index first
      const t0 = performance.now();
      await lsh.insert(ids, sigs);
      const s = (performance.now() - t0) / 1000;
      const counted = await lsh.count();
      if (counted !== n) throw new Error(`inserted ${n}, counted ${counted}`);
      log(`redis insert t=${threshold} (${lsh.bands} bands) signatures=${signatures}: ${(n / s).toFixed(0)}/s`);
      rows.push({
        layout: `cusim (bands ${lsh.bands} x rows ${lsh.rows}${signatures ? ', + signatures' : ''})`,
        signatures: n,
        seconds: s.toFixed(3),
        'signatures/s': Math.round(n / s),
      });
      await lsh.clear();
    }
    // datasketch's layout: one set per (band, bucket), SADD key id per band per signature.
    const { Redis } = await import('ioredis');
    const c = new Redis(redis.url, { enableAutoPipelining: false });
    const m = quick ? 20_000 : 100_000;
    const { bands, rows: r } = cusim.optimalParams(0.8, samples);
    const entries = await import('../dist/addon.js').then((a) =>
      a.native().lshStoreEntries(sigs.subarray(0, m * per), ids.subarray(0, m), { samples, bands, rows: r, partitions: 1 }),
    );
    const band = Buffer.from(entries.band.buffer, entries.band.byteOffset, entries.band.byteLength);
    const t0 = performance.now();
    let p = c.pipeline();
    let queued = 0;
    for (let b = 0; b < bands; b++) {
      for (let off = entries.bandOffsets[b]; off < entries.bandOffsets[b + 1]; off += 12) {
        p.sadd(`ds:${b}:${band.readBigUInt64LE(off).toString(16)}`, String(band.readUInt32LE(off + 8)));
        if (++queued === 10_000) {
          await p.exec();
          p = c.pipeline();
          queued = 0;
        }
      }
    }
    await p.exec();
    const s = (performance.now() - t0) / 1000;
    rows.push({
      layout: `datasketch-style SADD per band (bands ${bands}), pipelined`,
      signatures: m,
      seconds: s.toFixed(3),
      'signatures/s': Math.round(m / s),
    });
    await c.flushall();
    await c.quit();
  } finally {
    await redis.stop();
  }
  return {
    title: `MinHashLSH signature inserts into a local Redis (${samples} samples, one worker)`,
    rows,
    columns: ['layout', 'signatures', 'seconds', 'signatures/s'],
    notes: [
      `Redis: ${redis.version}, loopback, no persistence, on the same host (its one thread competes with the worker's). Signatures are random (every band key distinct: the most keys per batch).`,
      `Host load average when the section started: ${loadAtStart} (1 min).`,
      'cusim writes one APPEND of packed 12-byte (band key, id) entries per (band, partition) key and a 16-byte record per row per batch of 65,536 rows; target >= 1M/s.',
    ],
  };
}

async function hammingLoad({ cusim, quick, time, log }) {
  const n = quick ? 1_000_000 : 10_000_000;
  const bits = 256;
  const dir = mkdtempSync(path.join(tmpdir(), 'cusim-bench-load-'));
  const file = path.join(dir, 'ix.bin');
  try {
    const next = xorshift(3);
    const codes = new Uint32Array((n * bits) / 32);
    for (let i = 0; i < codes.length; i++) codes[i] = next();
    let ix = new cusim.HammingIndex({ bits, backend: 'cpu' });
    ix.add(codes);
    const t0 = performance.now();
    await ix.save(file);
    const saveS = (performance.now() - t0) / 1000;
    const q = codes.subarray(0, 8 * (bits / 32));
    const want = await ix.search(q, { k: 5 });
    ix.dispose();
    const bytes = statSync(file).size;
    log(`hamming: ${n} x ${bits} bits, file ${(bytes / 2 ** 20).toFixed(0)} MiB, save ${saveS.toFixed(2)} s`);
    const t = await time(
      async () => {
        ix?.dispose();
        ix = await cusim.HammingIndex.load(file);
      },
      { warmup: 1, repeats: 5 },
    );
    const got = await ix.search(q, { k: 5 });
    if (got.ids.join() !== want.ids.join()) throw new Error('the loaded index answers differently');
    ix.dispose();
    const ms = t.wallMs.median;
    return {
      title: `HammingIndex load() of ${n.toLocaleString('en-US')} codes x ${bits} bits, warm page cache`,
      rows: [
        {
          file: `${(bytes / 2 ** 20).toFixed(0)} MiB`,
          'save s': saveS.toFixed(2),
          'load s (median)': (ms / 1000).toFixed(3),
          'load s (min)': (t.wallMs.min / 1000).toFixed(3),
          'GB/s': (bytes / 1e9 / (ms / 1000)).toFixed(2),
        },
      ],
      columns: ['file', 'save s', 'load s (median)', 'load s (min)', 'GB/s'],
      notes: [
        'Codes are read by parallel pread straight into the index buffer and checksummed per 1 MiB block on the same threads; target <= 1 s for 10M codes (H100 host, 16 cores).',
      ],
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function run(ctx) {
  return { sections: [await redisInserts(ctx), await hammingLoad(ctx)] };
}
