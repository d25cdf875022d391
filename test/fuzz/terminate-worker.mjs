// The hostile family's worker: runs one engine's call over and over on small
// inputs, posting 'in-flight' each time a call has started, until the case
// ends it (terminate() from outside, or process.exit() when told to).
import { parentPort, workerData } from 'node:worker_threads';

const c = await import(workerData.dist);
const { call, backend } = workerData;
const rows = 1500;
const cols = 300;
const indptr = new Uint32Array(rows + 1);
const indices = new Uint32Array(rows * 12);
for (let i = 0; i < rows; i++) {
  for (let j = 0; j < 12; j++) indices[i * 12 + j] = (i * 7 + j * 23) % cols;
  indices.subarray(i * 12, i * 12 + 12).sort();
  indptr[i + 1] = (i + 1) * 12;
}
const m = { rows, cols, indptr, indices, values: new Float32Array(indices.length).fill(1) };
const codes = Uint32Array.from({ length: 8 * 4000 }, (_, i) => Math.imul(i, 2654435761) >>> 0);

const calls = {
  minhash: () => new c.WeightedMinHash({ dim: cols, samples: 32, backend }).hash(m),
  join: () => c.similarityJoin(m, { threshold: 0.3, backend }),
  joinStream: async () => {
    for await (const chunk of c.similarityJoinStream(m, { threshold: 0.3, backend, tuning: { maxChunkPairs: 64 } })) void chunk;
  },
  dedup: () => c.dedup(m, { threshold: 0.8, backend }),
  hamming: () => {
    const h = new c.HammingIndex({ bits: 256, backend });
    h.add(codes);
    return h.search(codes.subarray(0, 8 * 500), { k: 8 });
  },
  cluster: () => new c.StreamClusterer({ threshold: 0.2, backend }).add(m),
  flyhash: () =>
    new c.FlyHash({ inputDim: 64, hashLength: 512, backend }).hash({ rows: 2000, cols: 64, data: new Float32Array(2000 * 64).fill(2) }),
  popcount: () => c.popcountRows({ data: codes, rows: 4000, bits: 256 }, { backend }),
  text: () => new c.TextFeaturizer({ mode: 'words' }).tokenizeBatchAsync(Array.from({ length: 3000 }, (_, i) => `doc ${i} word${i % 97}`)),
};

parentPort.on('message', () => process.exit(0));
for (;;) {
  const p = calls[call]();
  parentPort.postMessage('in-flight');
  await p;
}
