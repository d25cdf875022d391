import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import {
  MinHash,
  MinHashLSH,
  sha1Hash32,
  estimateSetJaccard,
  rowChunks,
  pinnedArray,
  dedup,
  isEmptySignature,
  MAX_HASH,
  type CsrMatrix,
} from '../lib/index.js';
import { backends, describeGpu, expectInvalid, rng, randInt } from './helpers.js';

// ---- independent oracles -----------------------------------------------------

const P = (1n << 61n) - 1n;
const M64 = (1n << 64n) - 1n;

/** datasketch's update() for one token in exact integers: numpy's uint64 product wraps mod 2^64. */
function hashOf(a: bigint, b: bigint, h: number): number {
  return Number((((a * BigInt(h) + b) & M64) % P) & 0xffffffffn);
}

function oracle(m: CsrMatrix, a: BigUint64Array, b: BigUint64Array): Uint32Array {
  const S = a.length;
  const out = new Uint32Array(m.rows * S).fill(MAX_HASH);
  for (let r = 0; r < m.rows; r++) {
    for (let j = m.indptr[r]; j < m.indptr[r + 1]; j++) {
      for (let s = 0; s < S; s++) out[r * S + s] = Math.min(out[r * S + s], hashOf(a[s], b[s], m.indices[j]));
    }
  }
  return out;
}

/** numpy's RandomState(seed) MT19937 and masked 64-bit randint, in BigInt, as datasketch draws its permutations. */
function numpyPermutations(seed: number, samples: number): { a: BigUint64Array; b: BigUint64Array } {
  const mt = new Uint32Array(624);
  mt[0] = seed >>> 0;
  for (let k = 1; k < 624; k++) mt[k] = (Math.imul(1812433253, mt[k - 1] ^ (mt[k - 1] >>> 30)) + k) >>> 0;
  let i = 624;
  const next = (): number => {
    if (i >= 624) {
      for (let k = 0; k < 624; k++) {
        const y = (mt[k] & 0x80000000) | (mt[(k + 1) % 624] & 0x7fffffff);
        mt[k] = (mt[(k + 397) % 624] ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0)) >>> 0;
      }
      i = 0;
    }
    let y = mt[i++];
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    return (y ^ (y >>> 18)) >>> 0;
  };
  const bounded = (low: bigint, range: bigint): bigint => {
    let mask = range;
    for (const s of [1n, 2n, 4n, 8n, 16n, 32n]) mask |= mask >> s;
    for (;;) {
      const hi = BigInt(next());
      const v = ((hi << 32n) | BigInt(next())) & mask;
      if (v <= range) return low + v;
    }
  };
  const a = new BigUint64Array(samples);
  const b = new BigUint64Array(samples);
  for (let s = 0; s < samples; s++) {
    a[s] = bounded(1n, P - 2n);
    b[s] = bounded(0n, P - 1n);
  }
  return { a, b };
}

function randomPermutations(r: () => number, samples: number): { a: BigUint64Array; b: BigUint64Array } {
  const big = () => (BigInt(Math.floor(r() * 2 ** 31)) << 30n) | BigInt(Math.floor(r() * 2 ** 30));
  const a = new BigUint64Array(samples).map(() => (big() % (P - 1n)) + 1n);
  const b = new BigUint64Array(samples).map(() => big() % P);
  return { a, b };
}

/** Rows of token hashes: empty rows, one-token rows, repeats, long rows (> 1024: split on the GPU), ids near 2^32. */
function tokenRows(seed: number, rows: number, { long = true } = {}): CsrMatrix {
  const r = rng(seed);
  const indptr = new Uint32Array(rows + 1);
  const idx: number[] = [];
  for (let i = 0; i < rows; i++) {
    const len = i % 17 === 0 ? 0 : i % 13 === 1 ? 1 : long && i % 97 === 5 ? 1025 + randInt(r, 3000) : 1 + randInt(r, 60);
    for (let k = 0; k < len; k++) {
      const u = r();
      idx.push(
        u < 0.05
          ? 0xffffffff - randInt(r, 3)
          : u < 0.1
            ? randInt(r, 3)
            : u < 0.2 && k > 0
              ? idx[idx.length - 1]
              : Math.floor(r() * 2 ** 32),
      );
    }
    indptr[i + 1] = idx.length;
  }
  return { rows, cols: 2 ** 32, indptr, indices: Uint32Array.from(idx) };
}

function sliceRows(m: CsrMatrix, a: number, b: number): CsrMatrix {
  return { rows: b - a, cols: m.cols, indptr: m.indptr.subarray(a, b + 1), indices: m.indices };
}

function firstDiff(a: Uint32Array, b: Uint32Array): number {
  if (a.length !== b.length) return Math.min(a.length, b.length);
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return i;
  return -1;
}

/**
 * Permutations and tokens whose x = a*h + b (mod 2^64) sits where the Mersenne reduction needs its
 * final subtraction ((x & p) + (x >> 61) >= p) or just misses it, for every x >> 61 in 0..7.
 */
function edgeCases(r: () => number): { a: BigUint64Array; b: BigUint64Array; tokens: Uint32Array } {
  const as: bigint[] = [];
  const bs: bigint[] = [];
  const hs: number[] = [];
  for (let q = 0n; q < 8n; q++) {
    for (const back of [0n, q, q + 1n, 5n]) {
      const x = (q << 61n) + (P - back);
      for (;;) {
        const a = ((BigInt(Math.floor(r() * 2 ** 31)) << 30n) % (P - 1n)) + 1n;
        const h = Math.floor(r() * 2 ** 32);
        const b = (x - a * BigInt(h)) & M64;
        if (b < P) {
          as.push(a);
          bs.push(b);
          hs.push(h);
          break;
        }
      }
    }
  }
  return { a: BigUint64Array.from(as), b: BigUint64Array.from(bs), tokens: Uint32Array.from(hs) };
}

function loadFixture() {
  const dir = new URL('./fixtures/datasketch-minhash/', import.meta.url);
  const read = (n: string) => {
    const buf = readFileSync(new URL(n, dir));
    return buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);
  };
  const man = JSON.parse(readFileSync(new URL('manifest.json', dir), 'utf8')) as {
    rows: number;
    cases: { name: string; seed: number; samples: number }[];
  };
  const matrix: CsrMatrix = {
    rows: man.rows,
    cols: 2 ** 32,
    indptr: new Uint32Array(read('indptr.u32')),
    indices: new Uint32Array(read('indices.u32')),
  };
  const docs = JSON.parse(readFileSync(new URL('docs.json', dir), 'utf8')) as string[][];
  const cases = man.cases.map((c) => ({
    ...c,
    a: new BigUint64Array(read(`${c.name}.a.u64`)),
    b: new BigUint64Array(read(`${c.name}.b.u64`)),
    expected: new Uint32Array(read(`${c.name}.expected.u32`)),
  }));
  return { matrix, docs, cases };
}

// ---- tests ----------------------------------------------------------------------

describe('MinHash (classic): datasketch parity', () => {
  const fx = loadFixture();

  it('sha1Hash32 is datasketch sha1_hash32 (the fixture token hashes)', () => {
    const flat = fx.docs.flat();
    expect(flat.length).toBe(fx.matrix.indices.length);
    flat.forEach((t, i) => expect(sha1Hash32(t)).toBe(fx.matrix.indices[i]));
    expect(sha1Hash32(new TextEncoder().encode(flat[5]))).toBe(fx.matrix.indices[5]);
  });

  for (const backend of backends) {
    for (const c of fx.cases) {
      it(`${backend}: ${c.name}: new MinHash({ seed }) has datasketch's permutations and hashvalues`, async () => {
        using mh = new MinHash({ samples: c.samples, seed: c.seed, backend });
        const p = mh.permutations();
        expect(p.a).toEqual(c.a);
        expect(p.b).toEqual(c.b);
        expect(firstDiff(await mh.hash(fx.matrix), c.expected)).toBe(-1);
      });
      it(`${backend}: ${c.name}: fromPermutations reproduces MinHash.hashvalues exactly`, async () => {
        using mh = MinHash.fromPermutations({ a: c.a, b: c.b, backend });
        expect(mh.seed).toBeUndefined();
        expect(firstDiff(await mh.hash(fx.matrix), c.expected)).toBe(-1);
      });
    }
  }

  it('the seed contract is numpy RandomState: an independent MT19937 oracle agrees over the seed range', () => {
    for (const seed of [0, 1, 7, 2 ** 31, 0xffffffff]) {
      using mh = new MinHash({ samples: 300, seed, backend: 'cpu' });
      const want = numpyPermutations(seed, 300);
      expect(mh.permutations().a).toEqual(want.a);
      expect(mh.permutations().b).toEqual(want.b);
    }
    const fx2 = fx.cases.find((c) => c.seed === 42)!;
    expect(numpyPermutations(42, fx2.samples).a).toEqual(fx2.a);
  });
});

describe('MinHash (classic): semantics (CPU against a BigInt oracle)', () => {
  it('equals the exact-integer oracle on random permutations and rows (empty, one token, repeats, ids near 2^32)', async () => {
    for (const samples of [1, 7, 64, 129]) {
      const r = rng(samples);
      const { a, b } = randomPermutations(r, samples);
      const m = tokenRows(samples + 100, 150);
      using mh = MinHash.fromPermutations({ a, b, backend: 'cpu' });
      expect(firstDiff(await mh.hash(m), oracle(m, a, b))).toBe(-1);
    }
  });

  it('the Mersenne reduction at its edges ((x & p) + (x >> 61) at p - 1, p, p + 7) equals the oracle', async () => {
    const { a, b, tokens } = edgeCases(rng(5));
    // Each token alone, and all of them in one row, against every sample.
    const rows = tokens.length + 1;
    const indptr = new Uint32Array(rows + 1);
    for (let i = 0; i < tokens.length; i++) indptr[i + 1] = i + 1;
    indptr[rows] = 2 * tokens.length;
    const m = { rows, cols: 2 ** 32, indptr, indices: Uint32Array.from([...tokens, ...tokens]) };
    using mh = MinHash.fromPermutations({ a, b, backend: 'cpu' });
    const sig = await mh.hash(m);
    expect(firstDiff(sig, oracle(m, a, b))).toBe(-1);
    // The crafted cases do land on the reduction's edge: sample s of token s is ((x >> 61) + ...) mod p.
    for (let s = 0; s < tokens.length; s++) {
      const x = (a[s] * BigInt(tokens[s]) + b[s]) & M64;
      expect(sig[s * a.length + s]).toBe(Number((x % P) & 0xffffffffn));
    }
  });

  it('empty rows are 2^32 - 1 in every sample; values are ignored; repeats change nothing', async () => {
    using mh = new MinHash({ samples: 16, seed: 3, backend: 'cpu' });
    const m = {
      rows: 3,
      cols: 100,
      indptr: Uint32Array.of(0, 0, 3, 5),
      indices: Uint32Array.of(5, 9, 5, 9, 5),
      values: Float32Array.of(1, -2, NaN, 0, 7),
    };
    const sig = await mh.hash(m);
    expect(sig.subarray(0, 16).every((x) => x === MAX_HASH)).toBe(true);
    expect(isEmptySignature(sig, 16, 0, 'classic')).toBe(true);
    expect(isEmptySignature(sig, 16, 1, 'classic')).toBe(false);
    expect(sig.subarray(16, 32)).toEqual(sig.subarray(32, 48));
    expect(estimateSetJaccard(sig.subarray(16, 32), sig.subarray(32, 48))).toBe(1);
    expect(estimateSetJaccard(sig.subarray(0, 16), sig.subarray(0, 16))).toBe(0);
  });

  it('estimates are unbiased within a binomial bound for J from 0.1 to 0.95', async () => {
    const samples = 256;
    using mh = new MinHash({ samples, seed: 11, backend: 'cpu' });
    for (const J of [0.1, 0.5, 0.8, 0.95]) {
      // |A ∩ B| = k, |A ∪ B| = 400: J = k / 400.
      const k = Math.round(J * 400);
      const trials = 20;
      const indptr = new Uint32Array(2 * trials + 1);
      const idx: number[] = [];
      // Random token hashes, as sha1Hash32 gives (distinct with overwhelming probability).
      const r = rng(Math.round(J * 100));
      const tok = () => Math.floor(r() * 2 ** 32);
      for (let t = 0; t < trials; t++) {
        const shared = Array.from({ length: k }, tok);
        const restA = Array.from({ length: Math.floor((400 - k) / 2) }, tok);
        const restB = Array.from({ length: 400 - k - restA.length }, tok);
        idx.push(...shared, ...restA);
        indptr[2 * t + 1] = idx.length;
        idx.push(...shared, ...restB);
        indptr[2 * t + 2] = idx.length;
      }
      const sig = await mh.hash({ rows: 2 * trials, cols: 2 ** 32, indptr, indices: Uint32Array.from(idx) });
      let sum = 0;
      for (let t = 0; t < trials; t++)
        sum += estimateSetJaccard(
          sig.subarray(2 * t * samples, (2 * t + 1) * samples),
          sig.subarray((2 * t + 1) * samples, (2 * t + 2) * samples),
        );
      const mean = sum / trials;
      const sd = Math.sqrt((J * (1 - J)) / (samples * trials));
      expect(Math.abs(mean - k / 400), `J=${J}`).toBeLessThan(4 * sd + 1e-9);
    }
  });

  it('rowStart/rowEnd slices, hashStream over rowChunks and pinned out are byte-identical to one call', async () => {
    const m = tokenRows(9, 500);
    using mh = new MinHash({ samples: 32, seed: 2, backend: 'cpu' });
    const all = await mh.hash(m);
    expect(await mh.hash(m, { rowStart: 17, rowEnd: 333 })).toEqual(all.subarray(17 * 32, 333 * 32));
    let o = 0;
    for await (const s of mh.hashStream(rowChunks(m, 77))) {
      expect(s).toEqual(all.subarray(o, o + s.length));
      o += s.length;
    }
    expect(o).toBe(all.length);
    const out = pinnedArray(Uint32Array, all.length + 5);
    expect(await mh.hash(m, { out })).toEqual(all);
  });

  it('rejects bad options, permutations and matrices with coded errors naming the argument', async () => {
    expectInvalid(() => new MinHash({ seed: 2 ** 32 }), RangeError, /seed must be an integer in \[0, 4294967295\]/);
    expectInvalid(() => new MinHash({ samples: 0 }), RangeError, /samples/);
    expectInvalid(() => MinHash.fromPermutations({ a: [0n], b: [1n] }), RangeError, /a\[0\]=0 must be in \[1, 2\^61 - 1\)/);
    expectInvalid(() => MinHash.fromPermutations({ a: [1n], b: [P] }), RangeError, /b\[0\]=2305843009213693951/);
    expectInvalid(() => MinHash.fromPermutations({ a: [1n, 2n], b: [1n] }), RangeError, /a has length 2 but b has 1/);
    expectInvalid(() => MinHash.fromPermutations({ a: 'x' as never, b: [1n] }), TypeError, /a must be a BigUint64Array/);
    using mh = new MinHash({ samples: 4, backend: 'cpu' });
    await expect(mh.hash({ rows: 1, cols: 2 ** 32 + 1, indptr: Uint32Array.of(0, 0), indices: new Uint32Array(0) })).rejects.toMatchObject({
      code: 'CUSIM_INVALID_ARGUMENT',
    });
    await expect(mh.hash({ rows: 1, cols: 10, indptr: Uint32Array.of(0, 1), indices: Uint32Array.of(10) })).rejects.toThrow(
      /matrix\.indices\[0\]=10 is out of range for cols=10/,
    );
    mh.dispose();
    await expect(mh.hash({ rows: 0, cols: 1, indptr: Uint32Array.of(0), indices: new Uint32Array(0) })).rejects.toMatchObject({
      code: 'CUSIM_DISPOSED',
    });
  });
});

describe('MinHashLSH and dedup over classic signatures', () => {
  /** Planted near-duplicate sets: pairs (2i, 2i+1) share `J` of their union; row 0 empty. */
  function planted(seed: number, pairs: number, J: number): CsrMatrix {
    const r = rng(seed);
    const indptr = new Uint32Array(2 * pairs + 2);
    const idx: number[] = [];
    indptr[1] = 0;
    for (let p = 0; p < pairs; p++) {
      const k = Math.round(J * 60);
      const shared = Array.from({ length: k }, () => Math.floor(r() * 2 ** 32));
      const a = [...shared, ...Array.from({ length: Math.floor((60 - k) / 2) }, () => Math.floor(r() * 2 ** 32))];
      const b = [...shared, ...Array.from({ length: 60 - k - (a.length - k) }, () => Math.floor(r() * 2 ** 32))];
      idx.push(...a);
      indptr[2 * p + 2] = idx.length;
      idx.push(...b);
      indptr[2 * p + 3] = idx.length;
    }
    return { rows: 2 * pairs + 1, cols: 2 ** 32, indptr, indices: Uint32Array.from(idx) };
  }

  it('insert learns the layout from the first insert; candidatePairs equals a brute-force band comparison', async () => {
    const m = planted(3, 150, 0.8);
    using mh = new MinHash({ samples: 64, seed: 1, backend: 'cpu' });
    const sig = await mh.hash(m);
    const lsh = new MinHashLSH({ bands: 16, rows: 4, samples: 64 });
    expect(lsh.kind).toBeUndefined();
    const ids = Uint32Array.from({ length: m.rows }, (_, i) => i);
    lsh.insert(ids, sig);
    expect(lsh.kind).toBe('classic');
    const got = await lsh.candidatePairs();
    const want: string[] = [];
    const band = (i: number, k: number) => sig.subarray(i * 64 + k * 4, i * 64 + k * 4 + 4).join(',');
    for (let i = 0; i < m.rows; i++) {
      if (isEmptySignature(sig, 64, i, 'classic')) continue;
      for (let j = i + 1; j < m.rows; j++) {
        if (isEmptySignature(sig, 64, j, 'classic')) continue;
        for (let k = 0; k < 16; k++)
          if (band(i, k) === band(j, k)) {
            want.push(`${i},${j}`);
            break;
          }
      }
    }
    expect(Array.from(got.left, (l, i) => `${l},${got.right[i]}`)).toEqual(want);
    // A weighted-length insert into a classic index is refused.
    expect(() => lsh.insert([9999], new Uint32Array(128))).toThrow(/samples \* 1 = 64/);
    // Queries read classic signatures too.
    const q = await lsh.query(sig.subarray(64, 3 * 64));
    expect(Array.from(q.ids.subarray(q.indptr[0], q.indptr[1]))).toContain(1);
  });

  it("groups({ verify: 'exact' }) verifies set Jaccard (weights ignored); dedup({ method: 'classic' }) finds planted pairs", async () => {
    const m = planted(4, 200, 0.9);
    // Weights that would change a weighted Jaccard must not matter.
    const weighted = { ...m, values: new Float32Array(m.indices.length).map((_, i) => 1 + (i % 5)) };
    for (const backend of backends) {
      const r = await dedup(weighted, { method: 'classic', threshold: 0.7, backend });
      let found = 0;
      for (let p = 0; p < 200; p++) if (r.group[2 * p + 1] !== 0xffffffff && r.group[2 * p + 1] === r.group[2 * p + 2]) found++;
      expect(found, backend).toBeGreaterThanOrEqual(196);
      expect(r.group[0]).toBe(0xffffffff);
      // Every reported pair is a true set-Jaccard pair >= 0.7.
      for (let k = 0; k < r.pairs.left.length; k++) {
        const A = new Set(m.indices.subarray(m.indptr[r.pairs.left[k]], m.indptr[r.pairs.left[k] + 1]));
        const B = new Set(m.indices.subarray(m.indptr[r.pairs.right[k]], m.indptr[r.pairs.right[k] + 1]));
        const inter = [...A].filter((x) => B.has(x)).length;
        const J = inter / (A.size + B.size - inter);
        expect(J).toBeGreaterThanOrEqual(0.7);
        expect(r.pairs.similarity[k]).toBeCloseTo(J, 6);
      }
    }
  });
});

// ---- GPU ------------------------------------------------------------------------

describeGpu('MinHash (classic, CUDA)', () => {
  it('cuda = cpu bit for bit: samples 1..257, empty rows, one row, repeats, split rows, ids near 2^32', async () => {
    for (const samples of [1, 7, 64, 128, 129, 200, 257]) {
      const m = tokenRows(300 + samples, 3001);
      using g = new MinHash({ samples, seed: samples, backend: 'cuda', devices: [0] });
      using c = new MinHash({ samples, seed: samples, backend: 'cpu' });
      const timed = await g.hashTimed(m);
      expect(firstDiff(timed.signatures, await c.hash(m)), `samples=${samples}`).toBe(-1);
      expect(timed.kernelMs).toBeGreaterThan(0);
      const one = sliceRows(m, 5, 6);
      expect(firstDiff(await g.hash(one), await c.hash(one)), `one row, samples=${samples}`).toBe(-1);
    }
  });

  it('cuda = cpu on the Mersenne reduction edges (the fast path falls back to the exact hash)', async () => {
    const { a, b, tokens } = edgeCases(rng(7));
    const rows = tokens.length + 2;
    const indptr = new Uint32Array(rows + 1);
    for (let i = 0; i < tokens.length; i++) indptr[i + 1] = i + 1;
    // A long row (split over segments) holding every edge token among random ones.
    const r = rng(8);
    const long = Array.from({ length: 5000 }, () => Math.floor(r() * 2 ** 32));
    tokens.forEach((t, i) => (long[i * 150] = t));
    indptr[tokens.length + 1] = tokens.length + long.length;
    indptr[rows] = indptr[tokens.length + 1] + tokens.length;
    const m = { rows, cols: 2 ** 32, indptr, indices: Uint32Array.from([...tokens, ...long, ...tokens]) };
    using g = MinHash.fromPermutations({ a, b, backend: 'cuda', devices: [0] });
    const want = oracle(m, a, b);
    expect(firstDiff(await g.hash(m), want)).toBe(-1);
  });

  it('a 1M-token row among small rows, all-empty batches, and a column out of range named', async () => {
    const r = rng(12);
    const big = 1_000_000;
    const lens = [3, big, 0, 0, 5, 1];
    const indptr = new Uint32Array(lens.length + 1);
    lens.forEach((l, i) => (indptr[i + 1] = indptr[i] + l));
    const m = {
      rows: lens.length,
      cols: 2 ** 32,
      indptr,
      indices: new Uint32Array(indptr[lens.length]).map(() => Math.floor(r() * 2 ** 32)),
    };
    using g = new MinHash({ samples: 128, seed: 4, backend: 'cuda', devices: [0] });
    using c = new MinHash({ samples: 128, seed: 4, backend: 'cpu' });
    expect(firstDiff(await g.hash(m), await c.hash(m))).toBe(-1);
    const empty = { rows: 4, cols: 10, indptr: new Uint32Array(5), indices: new Uint32Array(0) };
    expect((await g.hash(empty)).every((x) => x === MAX_HASH)).toBe(true);
    const bad = { rows: 2, cols: 1000, indptr: Uint32Array.of(0, 2, 4), indices: Uint32Array.of(1, 2, 3, 1000) };
    await expect(g.hash(bad)).rejects.toThrow(/matrix\.indices\[3\]=1000 is out of range for cols=1000/);
    expect(firstDiff(await g.hash(m), await c.hash(m))).toBe(-1);
  });

  it("devices 'all' = [0] byte for byte; slices, streams and pinnedArray in/out too", async () => {
    const m = tokenRows(31, 4001);
    using one = new MinHash({ samples: 128, seed: 2, backend: 'cuda', devices: [0] });
    using all = new MinHash({ samples: 128, seed: 2, backend: 'cuda', devices: 'all' });
    const a = await one.hash(m);
    expect(firstDiff(await all.hash(m), a)).toBe(-1);
    expect(firstDiff(await all.hash(m, { rowStart: 3, rowEnd: 2990 }), a.subarray(3 * 128, 2990 * 128))).toBe(-1);
    let o = 0;
    for await (const s of all.hashStream(rowChunks(m, 999))) {
      expect(firstDiff(s, a.subarray(o, o + s.length))).toBe(-1);
      o += s.length;
    }
    const indices = pinnedArray(Uint32Array, m.indices.length);
    indices.set(m.indices);
    const out = pinnedArray(Uint32Array, a.length);
    await all.hash({ ...m, indices }, { out });
    expect(firstDiff(out, a)).toBe(-1);
  });

  it('LSH groups on the GPU over classic signatures equal the CPU', async () => {
    const m = tokenRows(44, 3000, { long: false });
    // Plant copies so there are groups.
    const rows = m.rows;
    using mh = new MinHash({ samples: 128, seed: 1, backend: 'cpu' });
    const sig = await mh.hash(m);
    const dup = new Uint32Array(sig.length * 2);
    dup.set(sig);
    dup.set(sig, sig.length);
    const ids = Uint32Array.from({ length: 2 * rows }, (_, i) => i);
    const res = [];
    for (const backend of ['cpu', 'cuda'] as const) {
      const lsh = new MinHashLSH({ threshold: 0.8, samples: 128, kind: 'classic', backend });
      lsh.insert(ids, dup);
      res.push(await lsh.groups({ verify: 'estimate' }));
    }
    expect(res[1].group).toEqual(res[0].group);
    expect(res[1].pairs.left).toEqual(res[0].pairs.left);
  });
});
