#!/usr/bin/env node
// Mixed-call loop: every engine's objects are created, used (synchronous and
// async calls) and dropped without dispose(), for --seconds seconds; RSS (and,
// with --backend cuda, free memory summed over the GPUs) is sampled. Native
// sizes are reported to V8, so the collector keeps up with objects that hold
// little JavaScript memory but much native memory. Node-API finalizers run
// on the event loop, so the loop yields between iterations; --burst N runs N
// iterations between yields (memory then peaks per burst, not per run).
//
//   node --expose-gc test/soak/memory-loop.mjs --seconds 60 [--backend cpu|cuda] [--burst 1]
//
// Prints one JSON line: { samples: [{ t, rssMB, gpuFreeMB? }], iterations, ... }.
import { parseArgs } from 'node:util';
import { pathToFileURL, fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const lib = await import(pathToFileURL(path.join(root, 'dist', 'index.js')).href);
const { native } = await import(pathToFileURL(path.join(root, 'dist', 'addon.js')).href);

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '60' },
    backend: { type: 'string', default: 'cpu' },
    burst: { type: 'string', default: '1' },
    gc: { type: 'string', default: '8' },
    // 'native': only steps whose objects hold megabytes natively and next to
    // nothing in JavaScript, where only the reported sizes make V8 collect.
    mix: { type: 'string', default: 'all' },
  },
});
const seconds = Number(values.seconds);
const backend = values.backend;
const burst = Number(values.burst);
const gcEvery = Number(values.gc);

let seed = 12345;
const rnd = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296;
const int = (n) => Math.floor(rnd() * n);

function csr(rows, cols, len) {
  const indptr = new Uint32Array(rows + 1);
  const indices = new Uint32Array(rows * len);
  for (let r = 0; r < rows; r++) {
    const row = new Set();
    while (row.size < len) row.add(int(cols));
    indices.set(
      [...row].sort((a, b) => a - b),
      r * len,
    );
    indptr[r + 1] = (r + 1) * len;
  }
  return { rows, cols, indptr, indices, values: Float32Array.from(indices, () => 0.1 + rnd()) };
}

const m = csr(2000, 20000, 30);
const sets = csr(3000, 500, 12);
const codes = new Uint32Array(8 * 200000).map(() => (rnd() * 4294967296) >>> 0);
const texts = Array.from({ length: 3000 }, (_, i) => `document ${i} about parseHttpRequest and ${i % 17} words, fooBar_baz ${i * 7}`);
const X = Float32Array.from({ length: 3000 * 256 }, () => int(256));

const tiny = csr(4, 20000, 10);
// Objects with megabytes of native memory and a few bytes of JavaScript.
const nativeHeavy = [
  () => void new lib.HammingIndex({ bits: 256 }).add(codes),
  async () => void (await new lib.WeightedMinHash({ dim: 20000, samples: 64, seed: int(1e6), backend }).hash(tiny)),
  async () =>
    void (await new lib.FlyHash({ inputDim: 256, hashLength: 16384, connections: 200, winners: 16, backend }).hash({
      data: X.subarray(0, 256),
      rows: 1,
      cols: 256,
    })),
  () => void native().stageArray([codes]),
];

// Each step creates objects holding native memory and drops them undisposed.
const allSteps = [
  async () => {
    const w = new lib.WeightedMinHash({ dim: 20000, samples: 64, seed: int(1e6), backend });
    await w.hash(m); // 15 MB of tables on the host (and on the GPU)
  },
  () => void new lib.WeightedMinHash({ dim: 20000, samples: 64, seed: int(1e6), backend: 'cpu' }).parameters(), // synchronous
  async () => {
    const f = new lib.FlyHash({ inputDim: 256, hashLength: 4096, connections: 64, winners: 32, seed: int(1e6), backend });
    await f.hash({ data: X, rows: 3000, cols: 256 });
  },
  async () => {
    const h = new lib.HammingIndex({ bits: 256, method: rnd() < 0.5 ? 'exact' : 'ewh', backend });
    h.add(codes); // synchronous, 6.4 MB
    await h.search(codes.subarray(0, 8 * 200), { k: 10 });
  },
  async () => {
    const c = new lib.StreamClusterer({ threshold: 0.3, backend });
    await c.add(m);
  },
  async () => void (await lib.similarityJoin(sets, { threshold: 0.5, backend })),
  async () => {
    const sig = await new lib.WeightedMinHash({ dim: 20000, samples: 32, backend }).hash(m);
    const l = new lib.MinHashLSH({ threshold: 0.5, samples: 32, backend });
    l.insert(
      Uint32Array.from({ length: m.rows }, (_, i) => i),
      sig,
    );
    await l.groups({ verify: 'exact', matrix: m });
  },
  async () => {
    const f = new lib.TextFeaturizer({ mode: 'code' });
    f.addBatch(texts);
    await f.tokenizeBatchAsync(texts);
    f.build();
  },
  () => void lib.pinnedArray(Uint32Array, 1 << 20),
  () => void native().stageCsr(m),
  async () => void (await lib.popcountRows({ data: codes, rows: 200000, bits: 256 }, { backend })),
  () => void lib.estimateJaccardPairs(new Uint32Array(64 * 2 * 1000), 64, new Uint32Array(1e5), new Uint32Array(1e5)),
];
const steps = values.mix === 'native' ? nativeHeavy : allSteps.concat(nativeHeavy);

// Summed over every GPU the engines use ('all' is their default), not GPU 0 alone.
const gpus = lib.devices().gpus.map((g) => g.index);
const gpuFree = () => (backend === 'cuda' ? gpus.reduce((sum, d) => sum + native().deviceMemory(d).free, 0) / 2 ** 20 : undefined);
const samples = [];
const t0 = Date.now();
let iterations = 0;
let next = 0;
while (Date.now() - t0 < seconds * 1000) {
  for (let b = 0; b < burst; b++) {
    await steps[iterations % steps.length]();
    iterations++;
  }
  if (globalThis.gc && iterations % gcEvery === 0) globalThis.gc();
  await new Promise((r) => setImmediate(r));
  const t = (Date.now() - t0) / 1000;
  if (t >= next) {
    samples.push({ t: Number(t.toFixed(2)), rssMB: Math.round(process.memoryUsage().rss / 2 ** 20), gpuFreeMB: gpuFree() });
    next += seconds / 40;
  }
}
console.log(JSON.stringify({ seconds, backend, burst, iterations, samples }));
