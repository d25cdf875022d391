// Terminating a worker thread during a native call never takes the process
// down. A call's completion runs while the worker's environment is torn down;
// it used to throw a C++ exception there ("terminate called after throwing an
// instance of 'Napi::Error'", SIGABRT). Each engine's call runs in a real
// worker_threads Worker, terminated at several points of the call.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { Worker } from 'node:worker_threads';
import { fileURLToPath, pathToFileURL } from 'node:url';
import path from 'node:path';
import { WeightedMinHash } from '../lib/index.js';
import { backends, randomCsr, rng } from './helpers.js';
import { bruteJoin } from './fuzz/families/join.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const script = path.join(here, 'fixtures', 'native-call-worker.mjs');
// Workers load the compiled package (npm test builds dist/ first).
const dist = pathToFileURL(path.join(here, '..', 'dist', 'index.js')).href;

const calls = ['minhash', 'minhashStream', 'flyhash', 'join', 'hamming', 'hammingEwh', 'cluster', 'lsh', 'popcount', 'text', 'sync'];

async function terminateDuring(call: string, backend: string, delayMs: number): Promise<string[]> {
  const seen: string[] = [];
  const w = new Worker(script, { workerData: { call, backend, dist } });
  w.on('message', (m) => seen.push(String(m)));
  await new Promise<void>((resolve, reject) => {
    w.on('message', (m) => m === 'started' && resolve());
    w.once('error', reject);
    w.once('exit', (code) => reject(new Error(`worker exited (${code}) before starting the call`)));
  });
  await new Promise((r) => setTimeout(r, delayMs));
  await w.terminate();
  return seen;
}

for (const backend of backends) {
  describe(`terminating a worker during a native call (${backend})`, () => {
    for (const call of calls) {
      it(`${call}: terminated at 0, 5, 30 and 150 ms, the process lives on`, async () => {
        for (const delay of [0, 5, 30, 150]) {
          const seen = await terminateDuring(call, backend, delay);
          expect(seen.filter((m) => m.startsWith('error'))).toEqual([]);
        }
      });
    }

    it('this process still hashes correctly afterwards', async () => {
      const m = randomCsr(rng(3), 200, 500, (i) => 1 + (i % 20));
      using a = new WeightedMinHash({ dim: 500, samples: 16, backend });
      using b = new WeightedMinHash({ dim: 500, samples: 16, backend: 'cpu' });
      expect(await a.hash(m)).toEqual(await b.hash(m));
    });
  });
}

// The addon loaded by workers only: Node unloads it when the last of them
// ends, and a native thread left running its code (the join's background
// releases) crashed the process with SIGSEGV. The fixture runs in its own
// process, so that this file's own use of the addon keeps nothing loaded.
describe('workers ending during joins, the addon loaded by workers only', () => {
  it('the process lives on, and its own join afterwards equals brute force', () => {
    const fixture = path.join(here, 'fixtures', 'join-terminate.mjs');
    const r = spawnSync(process.execPath, [fixture, dist, '4'], { encoding: 'utf8', maxBuffer: 1 << 26 });
    expect({
      status: r.status,
      signal: r.signal,
      stderr: r.stderr
        .split('\n')
        .filter((l) => !/^round \d+ done$/.test(l))
        .join('\n')
        .trim(),
    }).toEqual({
      status: 0,
      signal: null,
      stderr: '',
    });
    const out = JSON.parse(r.stdout) as {
      matrix: { rows: number; cols: number; indptr: number[]; indices: number[] };
      left: number[];
      right: number[];
    };
    const m = { ...out.matrix, indptr: Uint32Array.from(out.matrix.indptr), indices: Uint32Array.from(out.matrix.indices) };
    const want = bruteJoin(m, undefined, 'jaccard', 0.3) as { left: number[]; right: number[] };
    expect(want.left.length).toBeGreaterThan(0);
    expect({ left: out.left, right: out.right }).toEqual(want);
  });
});
