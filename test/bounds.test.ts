// Regression tests for issue 21's untyped errors and unbounded work: every
// error has a code; SharedArrayBuffer-backed arrays work like ordinary ones;
// options whose cost grows with their value are refused before allocating.
import { describe, expect, it } from 'vitest';
import {
  FlyHash,
  HammingIndex,
  MinHashLSH,
  StreamClusterer,
  WeightedMinHash,
  codeTokens,
  isPinned,
  popcountRows,
  similarityJoin,
  splitIdentifier,
  threads,
  wordTokens,
  type CsrMatrix,
} from '../lib/index.js';
import { expectInvalid, randomBits, randomCsr, rng } from './helpers.js';

function shared<T extends Uint32Array | Float32Array | Uint8Array>(a: T): T {
  const C = a.constructor as new (b: SharedArrayBuffer, o: number, n: number) => T;
  const v = new C(new SharedArrayBuffer(Math.max(4, a.byteLength)), 0, a.length);
  v.set(a as never);
  return v;
}

function sharedCsr(m: CsrMatrix): CsrMatrix {
  return { ...m, indptr: shared(m.indptr as Uint32Array), indices: shared(m.indices), values: m.values && shared(m.values) };
}

describe('SharedArrayBuffer-backed arrays are accepted (copied) by every entry point that took them', () => {
  const R = rng(4);
  const m = randomCsr(R, 300, 500, (i) => 1 + (i % 20));
  it('WeightedMinHash.hash, with a shared out too', async () => {
    using w = new WeightedMinHash({ dim: 500, samples: 16, backend: 'cpu' });
    const want = await w.hash(m);
    expect(await w.hash(sharedCsr(m))).toEqual(want);
    const out = shared(new Uint32Array(want.length));
    await w.hash(m, { out });
    expect(Array.from(out)).toEqual(Array.from(want));
  });
  it('FlyHash.hash (float and bytes)', async () => {
    using f = new FlyHash({ inputDim: 40, hashLength: 200, winners: 8, backend: 'cpu' });
    const X = { data: Float32Array.from({ length: 50 * 40 }, () => R() * 3), rows: 50, cols: 40 };
    expect((await f.hash({ ...X, data: shared(X.data) })).data).toEqual((await f.hash(X)).data);
    const B = { data: Uint8Array.from({ length: 50 * 40 }, () => (R() * 256) | 0), rows: 50, cols: 40 };
    expect((await f.hash({ ...B, data: shared(B.data) })).data).toEqual((await f.hash(B)).data);
  });
  it('similarityJoin, HammingIndex.add/search, StreamClusterer.add, MinHashLSH, popcountRows', async () => {
    const sets = randomCsr(R, 400, 100, (i) => 2 + (i % 9), { weights: false });
    expect((await similarityJoin(sharedCsr(sets), { threshold: 0.4, backend: 'cpu' })).left).toEqual(
      (await similarityJoin(sets, { threshold: 0.4, backend: 'cpu' })).left,
    );
    const codes = randomBits(R, 500, 64);
    using a = new HammingIndex({ bits: 64, backend: 'cpu' });
    using b = new HammingIndex({ bits: 64, backend: 'cpu' });
    a.add(shared(codes));
    b.add(codes);
    expect((await a.search(shared(codes.subarray(0, 40)), { k: 5 })).ids).toEqual((await b.search(codes.subarray(0, 40), { k: 5 })).ids);
    using c1 = new StreamClusterer({ threshold: 0.3, backend: 'cpu' });
    using c2 = new StreamClusterer({ threshold: 0.3, backend: 'cpu' });
    expect((await c1.add(sharedCsr(m))).cluster).toEqual((await c2.add(m)).cluster);
    using w = new WeightedMinHash({ dim: 500, samples: 16, backend: 'cpu' });
    const sigs = await w.hash(m);
    const ids = Uint32Array.from({ length: m.rows }, (_, i) => i);
    const l1 = new MinHashLSH({ threshold: 0.5, samples: 16, backend: 'cpu' });
    const l2 = new MinHashLSH({ threshold: 0.5, samples: 16, backend: 'cpu' });
    l1.insert(shared(ids), shared(sigs));
    l2.insert(ids, sigs);
    expect((await l1.groups({ verify: 'exact', matrix: sharedCsr(m) })).group).toEqual(
      (await l2.groups({ verify: 'exact', matrix: m })).group,
    );
    expect((await popcountRows({ data: shared(codes), rows: 500, bits: 64 }, { backend: 'cpu' })).counts).toEqual(
      (await popcountRows({ data: codes, rows: 500, bits: 64 }, { backend: 'cpu' })).counts,
    );
  });
});

describe('every error has a code', () => {
  const coded = (f: () => unknown) => expectInvalid(f, TypeError, /./);
  it('a signal that is not an AbortSignal', async () => {
    using w = new WeightedMinHash({ dim: 5, samples: 2, backend: 'cpu' });
    const m: CsrMatrix = { rows: 0, cols: 5, indptr: new Uint32Array(1), indices: new Uint32Array(0) };
    for (const signal of [{}, { aborted: true }, 'x', 1]) {
      await expect(w.hash(m, { signal: signal as never })).rejects.toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT', name: 'TypeError' });
    }
    await expect(similarityJoin(m, { threshold: 0.5, signal: {} as never })).rejects.toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT' });
  });
  it('tokenizers given non-strings, null options, BigInt and Symbol arguments', () => {
    coded(() => codeTokens(null as never));
    coded(() => codeTokens('x', null as never));
    coded(() => wordTokens(undefined as never));
    coded(() => splitIdentifier(5 as never, []));
    coded(() => isPinned(null as never));
    coded(() => threads(Symbol('x') as never));
    coded(() => new WeightedMinHash({ dim: 10n as never }));
    coded(() => new WeightedMinHash({ dim: 5, backend: 10n as never }));
  });
  it('null options objects', async () => {
    using c = new StreamClusterer({ threshold: 0.2, backend: 'cpu' });
    const m: CsrMatrix = { rows: 0, cols: 5, indptr: new Uint32Array(1), indices: new Uint32Array(0) };
    await expect(c.add(m, null as never)).rejects.toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT' });
    await expect(popcountRows({ data: new Uint32Array(2), rows: 1, bits: 64 }, null as never)).rejects.toMatchObject({
      code: 'CUSIM_INVALID_ARGUMENT',
    });
    const l = new MinHashLSH({ bands: 2, rows: 2, samples: 4 });
    await expect(l.candidatePairs(null as never)).rejects.toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT' });
  });
});

describe('options whose cost grows with their value are bounded before anything is allocated', () => {
  it('FlyHash: hashLength x connections beyond 2^30 is refused; at the bound the constructor costs nothing', () => {
    const t0 = performance.now();
    expect(() => new FlyHash({ inputDim: 2 ** 16, hashLength: 2 ** 16, connections: 2 ** 16, winners: 1 })).toThrow(
      expect.objectContaining({ code: 'CUSIM_INVALID_ARGUMENT', name: 'RangeError' }),
    );
    // 2^30 entries (4 GiB of table) is allowed, built only when first used.
    const f = new FlyHash({ inputDim: 2 ** 30, hashLength: 2 ** 30, connections: 1, winners: 1, backend: 'cpu' });
    f.dispose();
    expect(performance.now() - t0).toBeLessThan(1000);
  });
  it('HammingIndex: scores() of 4096 x 2^20 entries is refused before allocating 16 GB', async () => {
    using h = new HammingIndex({ bits: 32, method: 'ewh', backend: 'cpu', tables: 1, keyBits: 4, maxErrors: 0, weights: [1] });
    h.add(new Uint32Array(2 ** 20));
    await expect(h.scores(new Uint32Array(4096))).rejects.toMatchObject({
      code: 'CUSIM_INVALID_ARGUMENT',
      name: 'RangeError',
      message: expect.stringMatching(/2\^30 entries/),
    });
    expect(() => new HammingIndex({ bits: 64, method: 'ewh', tables: 64, keyBits: 24, maxErrors: 0, weights: [1] })).toThrow(
      expect.objectContaining({ code: 'CUSIM_INVALID_ARGUMENT', message: expect.stringMatching(/2\^keyBits/) }),
    );
  });
  it('StreamClusterer: the largest capacity constructs at once, without reserving it', () => {
    const t0 = performance.now();
    const c = new StreamClusterer({ threshold: 0.5, maxTerms: 1024, capacity: 2 ** 32 - 2, backend: 'cpu' });
    c.dispose();
    expect(performance.now() - t0).toBeLessThan(1000);
  });
});
