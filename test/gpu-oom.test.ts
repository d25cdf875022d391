// GPU out of memory on every engine: a call that needs more device memory than
// is free rejects with CUSIM_OUT_OF_MEMORY naming the bytes asked and free
// (err.bytesRequested, err.bytesFree), and the next call on the same object,
// once memory is back, works and matches the CPU backend. Memory is taken by
// a ballast of plain device allocations (native holdDeviceMemory) that leaves a few
// MB free. Skips without a GPU. It runs alone, after every other test file
// (vitest.config.ts), since a full device would fail their GPU calls.
import { expect, it } from 'vitest';
import { native } from '../lib/addon.js';
import {
  FlyHash,
  HammingIndex,
  MinHashLSH,
  StreamClusterer,
  WeightedMinHash,
  popcountRows,
  similarityJoin,
  type CsrMatrix,
} from '../lib/index.js';
import { describeGpu, randomBits, randomCsr, rng } from './helpers.js';

const LEAVE = 4 << 20;

/** Runs fn with all but LEAVE bytes of GPU 0 held by a ballast (native holdDeviceMemory). */
async function whileFull(fn: () => Promise<void>): Promise<void> {
  const held: { release(): void }[] = [];
  try {
    // cudaMemGetInfo's free memory is not one allocatable block: take it in
    // shrinking chunks until at most LEAVE-ish bytes remain.
    for (const chunk of [1 << 30, 256 << 20, 64 << 20, 16 << 20, 4 << 20]) {
      while ((native().deviceMemory(0).free as number) - chunk >= LEAVE) {
        try {
          held.push(native().holdDeviceMemory(0, chunk));
        } catch {
          break;
        }
      }
    }
    expect((native().deviceMemory(0).free as number) < 64 << 20, 'ballast took the device').toBe(true);
    await fn();
  } finally {
    for (const h of held) h.release();
  }
}

async function expectOom(p: Promise<unknown>): Promise<void> {
  const err = (await p.then(
    () => undefined,
    (e: unknown) => e,
  )) as { code?: string; bytesRequested?: number; bytesFree?: number; message?: string } | undefined;
  expect(err, 'the call should have run out of GPU memory').toBeDefined();
  expect(err!.code, err!.message).toBe('CUSIM_OUT_OF_MEMORY');
  expect(err!.message).toMatch(/needs .* \(\d+ bytes\) but only .* is free/);
  // Free memory is not one block: an allocation can fail below the free total.
  expect(err!.bytesRequested).toBeGreaterThan(0);
  expect(err!.bytesFree).toBeGreaterThanOrEqual(0);
}

describeGpu('GPU out of memory: coded error, then the same object works', () => {
  const R = rng(77);
  const m = randomCsr(R, 20000, 50000, (i) => 20 + (i % 200));

  it('WeightedMinHash', async () => {
    using g = new WeightedMinHash({ dim: 50000, samples: 128, backend: 'cuda', devices: [0] });
    using c = new WeightedMinHash({ dim: 50000, samples: 128, backend: 'cpu' });
    // Batches shrink to the memory there is, so a full device may still
    // hash: a coded out-of-memory error or the right signatures, nothing else.
    const want = await c.hash(m);
    await whileFull(async () => {
      const r = await g.hash(m).then(
        (v) => ({ v }),
        (e: unknown) => ({ e }),
      );
      if ('e' in r) await expectOom(Promise.reject(r.e));
      else expect(r.v).toEqual(want);
    });
    expect(await g.hash(m)).toEqual(want);
  });

  it('WeightedMinHash whose tables exceed the whole device: coded every time, smaller objects unaffected', async () => {
    // Device tables for 2^17 distinct columns at 65536 samples: 2^17 x 65536 x 18 B = 154 GB.
    using g = new WeightedMinHash({ dim: 0xffffffff, samples: 65536, backend: 'cuda', devices: [0] });
    const cols = 1 << 17;
    const one: CsrMatrix = {
      rows: 1,
      cols: 0xffffffff,
      indptr: new Uint32Array([0, cols]),
      indices: Uint32Array.from({ length: cols }, (_, i) => i * 7919),
    };
    await expectOom(g.hash(one));
    await expectOom(g.hash(one));
    using small = new WeightedMinHash({ dim: 50000, samples: 16, backend: 'cuda', devices: [0] });
    using cpu = new WeightedMinHash({ dim: 50000, samples: 16, backend: 'cpu' });
    expect(await small.hash(m)).toEqual(await cpu.hash(m));
  });

  it('FlyHash', async () => {
    const X = { data: Float32Array.from({ length: 20000 * 512 }, () => Math.floor(R() * 256)), rows: 20000, cols: 512 };
    using f = new FlyHash({ inputDim: 512, hashLength: 4096, connections: 50, winners: 32, backend: 'cuda' });
    using c = new FlyHash({ inputDim: 512, hashLength: 4096, connections: 50, winners: 32, backend: 'cpu' });
    await whileFull(() => expectOom(f.hash(X)));
    expect((await f.hash(X)).data).toEqual((await c.hash(X)).data);
  });

  for (const method of ['exact', 'ewh'] as const) {
    it(`HammingIndex (${method})`, async () => {
      const codes = randomBits(R, 400000, 256);
      const q = randomBits(R, 2000, 256);
      using h = new HammingIndex({ bits: 256, method, backend: 'cuda' });
      using c = new HammingIndex({ bits: 256, method, backend: 'cpu' });
      h.add(codes);
      c.add(codes);
      await whileFull(() => expectOom(h.search(q, { k: 10 })));
      const [a, b] = [await h.search(q, { k: 10 }), await c.search(q, { k: 10 })];
      expect(a.ids).toEqual(b.ids);
      expect(a.distances).toEqual(b.distances);
    });
  }

  it('similarityJoin', async () => {
    const sets = randomCsr(R, 200000, 20000, (i) => 5 + (i % 30), { weights: false });
    await whileFull(() => expectOom(similarityJoin(sets, { threshold: 0.5, backend: 'cuda' })));
    const [a, b] = [
      await similarityJoin(sets, { threshold: 0.5, backend: 'cuda' }),
      await similarityJoin(sets, { threshold: 0.5, backend: 'cpu' }),
    ];
    expect(a.left).toEqual(b.left);
    expect(a.right).toEqual(b.right);
  });

  it('StreamClusterer (the failed add leaves nothing behind)', async () => {
    const docs = randomCsr(R, 30000, 50000, (i) => 3 + (i % 30));
    const more = randomCsr(R, 5000, 50000, (i) => 3 + (i % 30));
    using g = new StreamClusterer({ threshold: 0.3, backend: 'cuda', capacity: 1 });
    using c = new StreamClusterer({ threshold: 0.3, backend: 'cpu', capacity: 1 });
    await g.add(more);
    await c.add(more);
    await whileFull(() => expectOom(g.add(docs)));
    expect(g.size).toBe(c.size);
    const [a, b] = [await g.add(docs), await c.add(docs)];
    expect(a.cluster).toEqual(b.cluster);
    expect(g.size).toBe(c.size);
  });

  it('MinHashLSH', async () => {
    using w = new WeightedMinHash({ dim: 50000, samples: 64, backend: 'cpu' });
    const sigs = await w.hash(m);
    const ids = Uint32Array.from({ length: m.rows }, (_, i) => i);
    const g = new MinHashLSH({ threshold: 0.5, samples: 64, backend: 'cuda' });
    const c = new MinHashLSH({ threshold: 0.5, samples: 64, backend: 'cpu' });
    g.insert(ids, sigs);
    c.insert(ids, sigs);
    await whileFull(() => expectOom(g.candidatePairs()));
    const [a, b] = [await g.candidatePairs(), await c.candidatePairs()];
    expect(a.left).toEqual(b.left);
    expect(a.right).toEqual(b.right);
  });

  it('popcountRows', async () => {
    const data = randomBits(R, 1 << 20, 256);
    await whileFull(() => expectOom(popcountRows({ data, rows: 1 << 20, bits: 256 }, { backend: 'cuda' })));
    const [a, b] = [
      await popcountRows({ data, rows: 1 << 20, bits: 256 }, { backend: 'cuda' }),
      await popcountRows({ data, rows: 1 << 20, bits: 256 }, { backend: 'cpu' }),
    ];
    expect(a.counts).toEqual(b.counts);
  });
});

it('out-of-memory errors carry bytesRequested and bytesFree (host tables too large)', async () => {
  // Tables for 2^20 distinct columns at 65536 samples: 3 x 2^20 x 65536
  // floats (824 GB), refused before allocating.
  using w = new WeightedMinHash({ dim: 0xffffffff, samples: 65536, backend: 'cpu' });
  const cols = 1 << 20;
  const one: CsrMatrix = {
    rows: 1,
    cols: 0xffffffff,
    indptr: new Uint32Array([0, cols]),
    indices: Uint32Array.from({ length: cols }, (_, i) => i * 4093),
  };
  const err = (await w.hash(one).catch((e: unknown) => e)) as { code: string; bytesRequested: number; bytesFree: number };
  expect(err.code).toBe('CUSIM_OUT_OF_MEMORY');
  expect(err.bytesRequested).toBe(3 * cols * 65536 * 4);
  expect(err.bytesFree).toBeGreaterThan(0);
});
