// Size boundaries: results past 4 GiB and past one typed array's 2^32
// elements, on the CPU, in bounded memory. The one real crossing of 4 GiB
// (test/scale-4gib.test.ts) runs apart, in `npm run test:large-memory`; here the rest lower the
// addon's typed-array limit for this process (native setMaxTypedLength), so
// every engine's result path crosses "more bytes than Node wraps" and "more
// elements than a typed array holds" at megabytes instead of gigabytes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { constants } from 'node:buffer';
import { native } from '../lib/addon.js';
import {
  WeightedMinHash,
  MinHash,
  MinHashLSH,
  HammingIndex,
  FlyHash,
  popcountRows,
  similarityJoin,
  similarityJoinStream,
  rowChunks,
  type CsrMatrix,
} from '../lib/index.js';
import { rng, randInt, randomCsr } from './helpers.js';

async function expectTooLarge(p: Promise<unknown> | (() => unknown), msg: RegExp) {
  const promise = typeof p === 'function' ? Promise.resolve().then(p) : p;
  await expect(promise).rejects.toThrow(RangeError);
  await expect(promise).rejects.toThrow(msg);
  await expect(promise).rejects.toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT' });
}

describe('more than 4 GiB of signatures (CPU)', () => {
  it('more than 2^32 signature words is a coded RangeError before anything is allocated, pointing to rowChunks', async () => {
    const rows = 32769; // x 65,536 x 2 > 2^32
    const m: CsrMatrix = { rows, cols: 10, indptr: new Uint32Array(rows + 1), indices: new Uint32Array(0) };
    using wmh = new WeightedMinHash({ dim: 10, samples: 65536, backend: 'cpu' });
    await expectTooLarge(wmh.hash(m), /more than one typed array holds .*rowChunks/);
    using mh = new MinHash({ samples: 65536, backend: 'cpu' });
    await expectTooLarge(mh.hash({ ...m, rows: 65537, indptr: new Uint32Array(65538) }), /more than one typed array holds/);
    // rowChunks views the same matrix in pieces (no copy) that hashStream takes one call each.
    using small = new WeightedMinHash({ dim: 10, samples: 8, backend: 'cpu' });
    let rowsSeen = 0;
    for await (const s of small.hashStream(rowChunks(m, 8192))) {
      expect(s.length).toBeLessThanOrEqual(8192 * 16);
      rowsSeen += s.length / 16;
    }
    expect(rowsSeen).toBe(rows);
  });
});

describe('every engine past a lowered typed-array limit (2^20 elements or bytes)', () => {
  const LIMIT = 1 << 20;
  beforeAll(() => native().setMaxTypedLength!(LIMIT));
  afterAll(() => native().setMaxTypedLength!(constants.MAX_LENGTH));

  it('results of more bytes than the limit are copied into JavaScript memory, equal to the result below it', async () => {
    // WeightedMinHash through the native layer (the TypeScript layer sizes by the real limit):
    // 4,000 rows x 64 samples x 2 words = 512,000 words = 2 MB > 1 MB.
    const m = randomCsr(rng(1), 4000, 500, (i) => 1 + (i % 7));
    const h = new (native().WeightedMinHashNative)({ dim: 500, samples: 64, seed: 1, backend: 'cpu' } as never);
    const big = (await h.hash(m, {} as never)).signatures as Uint32Array;
    const parts = [];
    for (let a = 0; a < 4000; a += 1000) parts.push((await h.hash(m, { rowStart: a, rowEnd: a + 1000 })).signatures as Uint32Array);
    expect(big.byteLength).toBeGreaterThan(LIMIT);
    expect(
      Buffer.from(big.buffer, big.byteOffset, big.byteLength).equals(
        Buffer.concat(parts.map((p) => Buffer.from(p.buffer, p.byteOffset, p.byteLength))),
      ),
    ).toBe(true);
    h.dispose();
  });

  it('results of more elements than the limit are coded RangeErrors: signatures, LSH pairs and queries, k-NN, scores, FlyHash', async () => {
    // Signatures: 10,000 rows x 64 x 2 words > 2^20 words.
    const h = new (native().WeightedMinHashNative)({ dim: 50, samples: 64, seed: 1, backend: 'cpu' } as never);
    await expectTooLarge(
      Promise.resolve().then(() =>
        h.hash({ rows: 10000, cols: 50, indptr: new Uint32Array(10001), indices: new Uint32Array(0) }, {} as never),
      ),
      /signatures would hold 1280000 elements/,
    );
    h.dispose();
    // LSH: 1,500 identical rows are one class; listing every pair (1,124,250) passes the limit.
    const sig = new Uint32Array(1500 * 8).fill(5);
    const lsh = new MinHashLSH({ bands: 4, rows: 1, samples: 4, backend: 'cpu' });
    lsh.insert(
      Uint32Array.from({ length: 1500 }, (_, i) => i),
      sig,
    );
    await expectTooLarge(lsh.candidatePairs(), /candidatePairs would return 1124250 pairs.*groups\(\)/);
    const g = await lsh.groups({ verify: 'none' });
    expect(g.count).toBe(1);
    await expectTooLarge(lsh.query(new Uint32Array(800 * 8).fill(5)), /query would return 1200000 candidate ids/);
    // k-NN: queries x k > limit.
    using index = new HammingIndex({ bits: 32, backend: 'cpu' });
    index.add({ data: new Uint32Array(100).map((_, i) => i), rows: 100, bits: 32 });
    const queries = { data: new Uint32Array(20000), rows: 20000, bits: 32 };
    await expectTooLarge(index.search(queries, { k: 64 }), /k-NN results .* would hold 1280000 elements.*fewer queries/);
    expect((await index.search({ data: new Uint32Array(10), rows: 10, bits: 32 }, { k: 3 })).ids.length).toBe(30);
    // FlyHash: rows x words > limit.
    using fly = new FlyHash({ inputDim: 4, hashLength: 64, connections: 2, winners: 4, seed: 1, backend: 'cpu' });
    await expectTooLarge(
      fly.hash({ data: new Float32Array(4 * 600_000), rows: 600_000, cols: 4 }, { output: 'indices' }),
      /FlyHash codes .* would hold 2400000 elements/,
    );
    // A popcount of 2^20 + 1 rows (one element each).
    await expectTooLarge(
      popcountRows({ data: new Uint32Array(LIMIT + 1), rows: LIMIT + 1, bits: 32 }, { backend: 'cpu' }),
      /would hold 1048577 elements/,
    );
  });

  it('LSH over signatures inserted in several batches (joined natively, past any typed-array limit) = one insert', async () => {
    const r = rng(4);
    const n = 3000;
    const sig = new Uint32Array(n * 16 * 2);
    for (let i = 0; i < n; i++) {
      const base = i % 700; // planted near-copies: rows 700 apart share most samples
      for (let s = 0; s < 32; s++) sig[i * 32 + s] = s < 24 ? base * 97 + s : randInt(r, 1e9);
    }
    const ids = Uint32Array.from({ length: n }, (_, i) => n - i);
    const opts = { samples: 16, bands: 8, rows: 2, width: 2, backend: 'cpu', verify: 'estimate', threshold: 0.5 } as const;
    const one = await native().lshGroups(sig, ids, opts);
    // What MinHashLSH keeps after three inserts: their native copies, joined once.
    const parts = [sig.subarray(0, 1000 * 32), sig.subarray(1000 * 32, 1001 * 32), sig.subarray(1001 * 32)];
    const staged = parts.map((p) => native().stageArray([p]));
    // Consumed as joined (what MinHashLSH does): each part's memory goes once copied.
    const joined = native().stageArray(staged, true);
    expect(staged.map((s) => s.length)).toEqual([0, 0, 0]);
    expect(joined.length).toBe(sig.length);
    const plain = native().stageArray(parts.map((p) => native().stageArray([p])));
    // Joined on a worker: the same array; consumed parts are disposed at once.
    const asyncParts = parts.map((p) => native().stageArray([p]));
    const joinedAsync = await native().stageArrayAsync(asyncParts, true);
    expect(asyncParts.map((s) => s.length)).toEqual([0, 0, 0]);
    expect(joinedAsync.length).toBe(sig.length);
    expect((await native().lshGroups(joinedAsync, ids, opts)).group).toEqual(one.group);
    joinedAsync.dispose();
    expect(() => native().stageArrayAsync([sig as never])).toThrow(/parts\[0\] must be a staged array/);
    const many = await native().lshGroups(joined, ids, opts);
    expect((await native().lshGroups(plain, ids, opts)).group).toEqual(one.group);
    plain.dispose();
    expect(many.group).toEqual(one.group);
    expect(many.left).toEqual(one.left);
    expect(many.right).toEqual(one.right);
    expect(Array.from(one.group).some((x) => x !== 0xffffffff)).toBe(true);
    const q = await native().lshQuery(joined, ids, sig.subarray(0, 64), opts);
    expect(q.ids).toEqual((await native().lshQuery(sig, ids, sig.subarray(0, 64), opts)).ids);
    await expect(Promise.resolve().then(() => native().lshGroups(native().stageArray([sig.subarray(0, 33)]), ids, opts))).rejects.toThrow(
      /but rows \* samples \* 2/,
    );
    for (const s of [...staged, joined]) s.dispose();
  });
});

describe('join chunks', () => {
  it('a probe step with more verified pairs than tuning.maxChunkPairs leaves in several chunks; together they are the join', async () => {
    // 700 identical sets: 244,650 pairs, many per probe step.
    const rows = 700;
    const indptr = Uint32Array.from({ length: rows + 1 }, (_, i) => 3 * i);
    const indices = new Uint32Array(3 * rows).map((_, i) => i % 3);
    const m = { rows, cols: 3, indptr, indices };
    const want = await similarityJoin(m, { threshold: 0.9, backend: 'cpu' });
    expect(want.left.length).toBe((rows * (rows - 1)) / 2);
    const seen = new Set<number>();
    let chunks = 0;
    for await (const c of similarityJoinStream(m, { threshold: 0.9, backend: 'cpu', tuning: { maxChunkPairs: 10_000 } })) {
      chunks++;
      expect(c.left.length).toBeLessThanOrEqual(10_000);
      for (let i = 0; i < c.left.length; i++) seen.add(c.left[i] * rows + c.right[i]);
    }
    expect(chunks).toBeGreaterThan(20);
    expect(seen.size).toBe(want.left.length);
    const got = await similarityJoin(m, { threshold: 0.9, backend: 'cpu', tuning: { maxChunkPairs: 10_000 } });
    expect(got.left).toEqual(want.left);
    expect(got.right).toEqual(want.right);
  });
});
