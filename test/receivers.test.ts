// Exotic typed-array arguments: a Proxy around a typed array is not one (a
// coded TypeError naming the argument, where the intrinsic getters used to
// throw a raw TypeError without a code), and a subclass instance whose
// getters lie is read through its internal slots (the same result as the
// plain array). lib/validate.ts's asTyped normalizes every typed argument once.
import { describe, expect, it } from 'vitest';
import {
  FlyHash,
  HammingIndex,
  MinHash,
  MinHashLSH,
  WeightedMinHash,
  estimateJaccard,
  estimateJaccardPairs,
  similarityJoin,
  type CsrMatrix,
} from '../lib/index.js';
import { randomBits, randomCsr, rng } from './helpers.js';

// A subclass instance over the same memory whose own getters and methods lie or throw.
function liar<T extends Uint32Array | Int32Array | Float32Array | Uint8Array>(a: T): T {
  const Base = Object.getPrototypeOf(a).constructor as new (b: ArrayBufferLike, o: number, n: number) => T;
  class Liar extends (Base as unknown as { new (b: ArrayBufferLike, o: number, n: number): Uint8Array }) {
    override get length(): number {
      return 7;
    }
    override get byteOffset(): number {
      throw new Error('byteOffset read');
    }
    override get buffer(): ArrayBuffer {
      throw new Error('buffer read');
    }
    override slice(): never {
      throw new Error('slice called');
    }
    override subarray(): never {
      throw new Error('subarray called');
    }
  }
  return new Liar(a.buffer, a.byteOffset, a.length) as unknown as T;
}

const proxy = <T extends object>(a: T): T => new Proxy(a, {});

async function coded(call: () => unknown, name: RegExp): Promise<void> {
  const p = Promise.resolve().then(call);
  await expect(p).rejects.toThrow(TypeError);
  await expect(p).rejects.toThrow(name);
  await expect(p).rejects.toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT' });
}

describe('Proxy and subclass receivers (cpu)', () => {
  const R = rng(5);
  const m = randomCsr(R, 60, 80, (i) => 3 + (i % 9));
  const sets: CsrMatrix = { rows: m.rows, cols: m.cols, indptr: m.indptr, indices: m.indices };

  it('WeightedMinHash.hash and MinHashLSH.insert/query/groups', async () => {
    using wmh = new WeightedMinHash({ dim: 80, samples: 16, backend: 'cpu' });
    const want = await wmh.hash(m);
    for (const k of ['indptr', 'indices', 'values'] as const) {
      await coded(() => wmh.hash({ ...m, [k]: proxy(m[k]!) }), new RegExp(`matrix\\.${k}`));
      expect(await wmh.hash({ ...m, [k]: liar(m[k]!) })).toEqual(want);
    }
    const ids = Uint32Array.from({ length: m.rows }, (_, i) => i);
    using lsh = new MinHashLSH({ threshold: 0.5, samples: 16, backend: 'cpu' });
    await coded(() => lsh.insert(proxy(ids), want), /ids/);
    await coded(() => lsh.insert(ids, proxy(want)), /signatures/);
    using ref = new MinHashLSH({ threshold: 0.5, samples: 16, backend: 'cpu' });
    ref.insert(ids, want);
    lsh.insert(liar(ids), liar(want));
    expect(await lsh.candidatePairs()).toEqual(await ref.candidatePairs());
    await coded(() => lsh.query(proxy(want)), /signatures/);
    expect(await lsh.query(liar(want))).toEqual(await ref.query(want));
    await coded(() => lsh.groups({ verify: 'exact', matrix: { ...m, values: proxy(m.values!) } }), /matrix\.values/);
    expect(await lsh.groups({ verify: 'exact', matrix: { ...m, indices: liar(m.indices) } })).toEqual(
      await ref.groups({ verify: 'exact', matrix: m }),
    );
    await coded(() => estimateJaccard(proxy(want.subarray(0, 32)), want.subarray(32, 64)), /sigA/);
    expect(estimateJaccard(liar(want.subarray(0, 32)), want.subarray(32, 64))).toBe(
      estimateJaccard(want.subarray(0, 32), want.subarray(32, 64)),
    );
    await coded(() => estimateJaccardPairs(want, 16, proxy(Uint32Array.of(0)), Uint32Array.of(1)), /left/);
    expect(estimateJaccardPairs(liar(want), 16, liar(Uint32Array.of(0, 2)), Uint32Array.of(1, 3))).toEqual(
      estimateJaccardPairs(want, 16, Uint32Array.of(0, 2), Uint32Array.of(1, 3)),
    );
  });

  it('MinHash (classic), similarityJoin, HammingIndex and FlyHash', async () => {
    using mh = new MinHash({ samples: 16, backend: 'cpu' });
    await coded(() => mh.hash({ ...sets, indices: proxy(sets.indices) }), /matrix\.indices/);
    expect(await mh.hash({ ...sets, indices: liar(sets.indices) })).toEqual(await mh.hash(sets));

    await coded(() => similarityJoin({ ...sets, indptr: proxy(sets.indptr) }, { threshold: 0.3, backend: 'cpu' }), /sets\.indptr/);
    const j = await similarityJoin(sets, { threshold: 0.3, backend: 'cpu' });
    const jl = await similarityJoin({ ...sets, indptr: liar(sets.indptr as Uint32Array) }, { threshold: 0.3, backend: 'cpu' });
    expect([jl.left, jl.right]).toEqual([j.left, j.right]);

    const codes = randomBits(R, 50, 64);
    using h = new HammingIndex({ bits: 64, backend: 'cpu' });
    await coded(() => h.add(proxy(codes)), /codes|must be a packed/);
    h.add(liar(codes));
    using hr = new HammingIndex({ bits: 64, backend: 'cpu' });
    hr.add(codes);
    expect(await h.search(codes, { k: 3 })).toEqual(await hr.search(codes, { k: 3 }));

    using f = new FlyHash({ inputDim: 4, hashLength: 64, backend: 'cpu' });
    const X = { rows: 2, cols: 4, data: Float32Array.of(1, 2, 3, 4, 5, 6, 7, 8) };
    await coded(() => f.hash({ ...X, data: proxy(X.data) }), /X\.data/);
    expect(await f.hash({ ...X, data: liar(X.data) })).toEqual(await f.hash(X));
  });
});
