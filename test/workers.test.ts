// Terminating a worker thread during a native call never takes the process
// down. A call's completion runs while the worker's environment is torn down;
// it used to throw a C++ exception there ("terminate called after throwing an
// instance of 'Napi::Error'", SIGABRT). Each engine's call runs in a real
// worker_threads Worker, terminated at several points of the call.
import { describe, expect, it } from 'vitest';
import { Worker } from 'node:worker_threads';
import { fileURLToPath, pathToFileURL } from 'node:url';
import path from 'node:path';
import { WeightedMinHash } from '../lib/index.js';
import { backends, randomCsr, rng } from './helpers.js';

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
