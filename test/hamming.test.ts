import { describe, expect, it } from 'vitest';
import { HammingIndex, MISSING_ID } from '../lib/index.js';
import { native } from '../lib/addon.js';
import { describeGpu, expectInvalid, randInt, randomBits, rng } from './helpers.js';

function popc32(x: number): number {
  x = x - ((x >>> 1) & 0x55555555);
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return (Math.imul((x + (x >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24) & 0xff;
}

function hamming(a: Uint32Array, i: number, b: Uint32Array, j: number, w: number): number {
  let d = 0;
  for (let x = 0; x < w; x++) d += popc32((a[i * w + x] ^ b[j * w + x]) >>> 0);
  return d;
}

/** Brute force: every distance, sorted by (distance, id), padded with (MISSING_ID, bits). */
function oracle(db: Uint32Array, n: number, qs: Uint32Array, nq: number, bits: number, k: number) {
  const w = bits / 32;
  const ids = new Uint32Array(nq * k).fill(MISSING_ID);
  const dist = new Uint16Array(nq * k).fill(bits);
  for (let q = 0; q < nq; q++) {
    const all = Array.from({ length: n }, (_, id) => [hamming(qs, q, db, id, w), id]);
    all.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    for (let i = 0; i < Math.min(k, n); i++) {
      ids[q * k + i] = all[i][1];
      dist[q * k + i] = all[i][0];
    }
  }
  return { ids, dist };
}

/** Philox4x32-10 as cuRAND lays out curand_init(seed, subsequence, 0) + curand(), written from the paper's round function. */
function philox(seed: number, subsequence: number): () => number {
  const mul = (a: number, b: number) => {
    const p = BigInt(a) * BigInt(b);
    return [Number(p >> 32n) >>> 0, Number(p & 0xffffffffn) >>> 0];
  };
  const ctr = [0, 0, subsequence >>> 0, Math.floor(subsequence / 2 ** 32) >>> 0];
  const key = [seed >>> 0, Math.floor(seed / 2 ** 32) >>> 0];
  let out: number[] = [];
  const block = () => {
    let [x0, x1, x2, x3] = ctr;
    let [k0, k1] = key;
    for (let r = 0; r < 10; r++) {
      const [hi0, lo0] = mul(0xd2511f53, x0);
      const [hi1, lo1] = mul(0xcd9e8d57, x2);
      [x0, x1, x2, x3] = [(hi1 ^ x1 ^ k0) >>> 0, lo1, (hi0 ^ x3 ^ k1) >>> 0, lo0];
      k0 = (k0 + 0x9e3779b9) >>> 0;
      k1 = (k1 + 0xbb67ae85) >>> 0;
    }
    out = [x0, x1, x2, x3];
  };
  block();
  let idx = 0;
  return () => {
    const v = out[idx++];
    if (idx === 4) {
      // 128-bit counter + 1
      for (let i = 0; i < 4; i++) {
        ctr[i] = (ctr[i] + 1) >>> 0;
        if (ctr[i] !== 0) break;
      }
      block();
      idx = 0;
    }
    return v;
  };
}

/** Flips `flips` distinct random bits of code `src` into a new code. */
function perturb(r: () => number, src: Uint32Array, w: number, flips: number): Uint32Array {
  const out = src.slice();
  const seen = new Set<number>();
  while (seen.size < flips) seen.add(randInt(r, w * 32));
  for (const b of seen) out[b >>> 5] ^= 1 << (b & 31);
  return out;
}

/** Database with `dupes` copies of a few codes spread among random ones. */
function withDuplicates(r: () => number, n: number, bits: number): Uint32Array {
  const w = bits / 32;
  const db = randomBits(r, n, bits);
  for (let i = 0; i < n; i++) {
    if (r() < 0.3) {
      const src = randInt(r, 3);
      db.copyWithin(i * w, src * w, src * w + w);
    }
  }
  return db;
}

/** Recall of `got` against `want` over q×k id lists. */
function recall(got: Uint32Array, want: Uint32Array, nq: number, k: number): number {
  let hit = 0;
  for (let q = 0; q < nq; q++) {
    const truth = new Set(want.subarray(q * k, q * k + k));
    for (let i = 0; i < k; i++) if (truth.has(got[q * k + i])) hit++;
  }
  return hit / (nq * k);
}

/** Paper's Algorithm 3 directly: for each table, each bucket within e bits of the query key adds alpha_d to its ids. */
function ewhScores(
  db: Uint32Array,
  n: number,
  qs: Uint32Array,
  nq: number,
  bits: number,
  pos: Uint32Array,
  tables: number,
  h: number,
  e: number,
  alpha: number[],
) {
  const w = bits / 32;
  const key = (codes: Uint32Array, row: number, t: number) => {
    let k = 0;
    for (let j = 0; j < h; j++) {
      const p = pos[t * h + j];
      k |= ((codes[row * w + (p >>> 5)] >>> (p & 31)) & 1) << j;
    }
    return k;
  };
  const out = new Uint32Array(nq * n);
  for (let q = 0; q < nq; q++) {
    for (let t = 0; t < tables; t++) {
      const qk = key(qs, q, t);
      for (let b = 0; b < 1 << h; b++) {
        const d = popc32(b ^ qk);
        if (d > e) continue;
        for (let id = 0; id < n; id++) if (key(db, id, t) === b) out[q * n + id] += alpha[d];
      }
    }
  }
  return out;
}

async function exactCase(
  bits: number,
  n: number,
  nq: number,
  k: number,
  seed: number,
  backend: 'cpu' | 'cuda' = 'cpu',
  exactKernel: 'auto' | 'popc' | 'mma2' = 'auto',
  dupes = false,
) {
  const r = rng(seed);
  const db = dupes ? withDuplicates(r, n, bits) : randomBits(r, n, bits);
  const qs = randomBits(r, nq, bits);
  // A query equal to a database code exercises distance 0.
  if (n > 0 && nq > 1) qs.set(db.subarray(0, bits / 32), bits / 32);
  using index = new HammingIndex({ bits, backend, tuning: { exactKernel } });
  index.add(db);
  const res = await index.search(qs, { k });
  return { res, db, qs };
}

describe('HammingIndex exact (cpu)', () => {
  for (const bits of [32, 64, 256, 512, 1024]) {
    it(`${bits} bits: equals brute force in (distance, id) order for k in {1, 10, 100, 1024}`, async () => {
      const n = bits >= 512 ? 1031 : 1237;
      for (const [k, dupes] of [
        [1, false],
        [10, true],
        [100, false],
        [1024, true],
      ] as const) {
        const { res, db, qs } = await exactCase(bits, n, 7, k, bits * 31 + k, 'cpu', 'auto', dupes);
        const want = oracle(db, n, qs, 7, bits, k);
        expect(res.ids).toEqual(want.ids);
        expect(res.distances).toEqual(want.dist);
      }
    });
  }

  it('k > n pads with MISSING_ID and distance = bits; n = 1 works', async () => {
    for (const [n, k] of [
      [1, 1],
      [1, 10],
      [5, 1024],
    ] as const) {
      const { res, db, qs } = await exactCase(256, n, 3, k, 99 + n + k);
      const want = oracle(db, n, qs, 3, 256, k);
      expect(res.ids).toEqual(want.ids);
      expect(res.distances).toEqual(want.dist);
      expect(res.ids[n]).toBe(k > n ? MISSING_ID : res.ids[n]);
      if (k > n) expect(res.distances[k - 1]).toBe(256);
    }
  });

  it('every exactKernel name is accepted on the CPU backend and gives the brute-force result', async () => {
    for (const exactKernel of ['popc', 'mma2', 'auto'] as const) {
      const { res, db, qs } = await exactCase(256, 301, 4, 10, 1234, 'cpu', exactKernel);
      const want = oracle(db, 301, qs, 4, 256, 10);
      expect(res.ids, exactKernel).toEqual(want.ids);
      expect(res.distances, exactKernel).toEqual(want.dist);
    }
  });

  it('all-equal codes: ties resolve to the lowest ids', async () => {
    const code = randomBits(rng(5), 1, 128);
    const db = new Uint32Array(4 * 600);
    for (let i = 0; i < 600; i++) db.set(code, i * 4);
    using index = new HammingIndex({ bits: 128, backend: 'cpu' });
    index.add(db);
    const res = await index.search(code, { k: 10 });
    expect([...res.ids]).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect([...res.distances]).toEqual(new Array(10).fill(0));
  });

  it('repeated adds continue ids in insertion order; Uint8Array codes equal Uint32Array codes', async () => {
    const r = rng(17);
    const db = randomBits(r, 300, 64);
    const qs = randomBits(r, 4, 64);
    using a = new HammingIndex({ bits: 64, backend: 'cpu' });
    a.add(db.subarray(0, 100 * 2));
    a.add(new Uint8Array(db.buffer, 100 * 8, 200 * 8));
    expect(a.size).toBe(300);
    const res = await a.search(new Uint8Array(qs.buffer), { k: 20 });
    const want = oracle(db, 300, qs, 4, 64, 20);
    expect(res.ids).toEqual(want.ids);
    expect(res.distances).toEqual(want.dist);
  });
});

describe('HammingIndex EWH (cpu)', () => {
  it('key positions are distinct per table, in range, and fixed by the seed', () => {
    using a = new HammingIndex({ bits: 64, method: 'ewh', backend: 'cpu', tables: 6, keyBits: 8, seed: 3 });
    using b = new HammingIndex({ bits: 64, method: 'ewh', backend: 'cpu', tables: 6, keyBits: 8, seed: 3 });
    using c = new HammingIndex({ bits: 64, method: 'ewh', backend: 'cpu', tables: 6, keyBits: 8, seed: 4 });
    const p = a.positions();
    expect(p.length).toBe(48);
    for (let t = 0; t < 6; t++) expect(new Set(p.subarray(t * 8, t * 8 + 8)).size).toBe(8);
    expect(Math.max(...p)).toBeLessThan(64);
    expect(b.positions()).toEqual(p);
    expect(c.positions()).not.toEqual(p);
    // Table t draws from Philox(seed, t, 0): position = next() % bits, repeats rejected.
    for (let t = 0; t < 6; t++) {
      const next = philox(3, t);
      const want: number[] = [];
      while (want.length < 8) {
        const x = next() % 64;
        if (!want.includes(x)) want.push(x);
      }
      expect([...p.subarray(t * 8, t * 8 + 8)]).toEqual(want);
    }
  });

  for (const [bits, tables, h, e, alpha] of [
    [64, 4, 5, 2, [10, 5, 2]],
    [256, 3, 6, 1, [7, 3]],
    [32, 2, 4, 3, [9, 4, 2, 1]],
  ] as const) {
    it(`scores equal Algorithm 3 (bits=${bits}, n=${tables}, h=${h}, e=${e})`, async () => {
      const r = rng(bits + h);
      const n = 333;
      const db = withDuplicates(r, n, bits);
      const qs = randomBits(r, 5, bits);
      qs.set(db.subarray(0, bits / 32));
      using index = new HammingIndex({ bits, method: 'ewh', backend: 'cpu', tables, keyBits: h, maxErrors: e, weights: [...alpha] });
      index.add(db);
      const got = await index.scores(qs);
      expect(got).toEqual(ewhScores(db, n, qs, 5, bits, index.positions(), tables, h, e, [...alpha]));
    });
  }

  it('shortlist = ids with score >= minScore re-ranked exactly (checked against the scores)', async () => {
    const r = rng(23);
    const bits = 128;
    const n = 700;
    const db = randomBits(r, n, bits);
    const qs = randomBits(r, 6, bits);
    using index = new HammingIndex({ bits, method: 'ewh', backend: 'cpu', minScore: 15 });
    index.add(db);
    const scores = await index.scores(qs);
    const res = await index.search(qs, { k: 10 });
    const w = bits / 32;
    let listed = 0;
    for (let q = 0; q < 6; q++) {
      const cand = [];
      for (let id = 0; id < n; id++) if (scores[q * n + id] >= 15) cand.push([hamming(qs, q, db, id, w), id]);
      listed += cand.length;
      cand.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
      for (let i = 0; i < 10; i++) {
        expect(res.ids[q * 10 + i]).toBe(i < cand.length ? cand[i][1] : MISSING_ID);
        expect(res.distances[q * 10 + i]).toBe(i < cand.length ? cand[i][0] : bits);
      }
    }
    expect(res.shortlisted).toBe(listed);
  });

  it('recall@10 >= 0.95 against exact on planted neighbours at small radius', async () => {
    const r = rng(41);
    const bits = 256;
    const w = bits / 32;
    const nq = 40;
    const qs = randomBits(r, nq, bits);
    const parts: Uint32Array[] = [randomBits(r, 3000, bits)];
    for (let q = 0; q < nq; q++) {
      for (let j = 0; j < 10; j++) parts.push(perturb(r, qs.subarray(q * w, q * w + w), w, 1 + randInt(r, 8)));
    }
    const db = new Uint32Array(parts.reduce((s, p) => s + p.length, 0));
    let off = 0;
    for (const p of parts) {
      db.set(p, off);
      off += p.length;
    }
    const n = db.length / w;
    using exact = new HammingIndex({ bits, backend: 'cpu' });
    using ewh = new HammingIndex({ bits, method: 'ewh', backend: 'cpu' });
    exact.add(db);
    ewh.add(db);
    const want = await exact.search(qs, { k: 10 });
    const got = await ewh.search(qs, { k: 10 });
    expect(recall(got.ids, want.ids, nq, 10)).toBeGreaterThanOrEqual(0.95);
    // EWH must actually prune: far fewer ids re-ranked than a full scan.
    expect(got.shortlisted / nq).toBeLessThan(n / 2);
  });

  it('recall rises to 1.0 as the shortlist grows', async () => {
    const r = rng(43);
    const bits = 128;
    const n = 1500;
    const db = randomBits(r, n, bits);
    const qs = randomBits(r, 8, bits);
    using exact = new HammingIndex({ bits, backend: 'cpu' });
    exact.add(db);
    const want = await exact.search(qs, { k: 10 });
    let prev = -1;
    for (const L of [10, 50, 200, 800, n]) {
      using ewh = new HammingIndex({ bits, method: 'ewh', backend: 'cpu', shortlist: L });
      ewh.add(db);
      const got = await ewh.search(qs, { k: 10 });
      expect(got.shortlisted).toBe(8 * Math.min(L, n));
      const rec = recall(got.ids, want.ids, 8, 10);
      expect(rec).toBeGreaterThanOrEqual(prev);
      prev = rec;
    }
    expect(prev).toBe(1);
  });
});

describe('HammingIndex bad input', () => {
  it('native boundary: bad seed, method and exactKernel throw instead of being coerced', async () => {
    const Ctor = native().HammingIndex;
    const weights = Int32Array.of(4, 2, 1);
    expectInvalid(
      () => new Ctor({ bits: 64, method: 'ewh', seed: NaN, weights } as never),
      RangeError,
      /seed must be a non-negative safe integer/,
    );
    expectInvalid(() => new Ctor({ bits: 64, method: 'ewhh', weights } as never), TypeError, /method must be 'exact' or 'ewh'/);
    expectInvalid(
      () => new Ctor({ bits: 64, weights, backend: 'cpu', exactKernel: 'fast' } as never),
      TypeError,
      /tuning\.exactKernel must be/,
    );
  });

  it('rejects bad options, code lengths, k and empty indexes with coded errors', async () => {
    const bad: [() => unknown, RegExp][] = [
      [() => new HammingIndex({ bits: 48 }), /bits must be a multiple of 32/],
      [() => new HammingIndex({ bits: 0 }), /bits must be an integer in/],
      [() => new HammingIndex({ bits: 64, method: 'lsh' as never }), /method must be one of/],
      [() => new HammingIndex({ bits: 64, method: 'ewh', weights: [1, 2] }), /weights must have maxErrors \+ 1 = 3/],
      [() => new HammingIndex({ bits: 64, method: 'ewh', tables: 64, weights: [200, 1, 1] }), /exceeds 8191/],
      [() => new HammingIndex({ bits: 64, backend: 'cpu' }).add(new Uint32Array(3)), /codes has 3 words, not a multiple/],
      [() => new HammingIndex({ bits: 64, backend: 'cpu' }).add(new Uint8Array(12)), /codes has 12 bytes/],
      [() => new HammingIndex({ bits: 64, backend: 'cpu' }).add(new Float32Array(2) as never), /codes must be a packed/],
      [() => new HammingIndex({ bits: 64, tuning: { exactKernel: 'tensor' as never } }), /tuning\.exactKernel must be one of/],
      // The first tensor-core scan left the shipped options ('mma2' replaced it).
      [
        () => new HammingIndex({ bits: 64, tuning: { exactKernel: 'mma' as never } }),
        /tuning\.exactKernel must be one of 'auto', 'popc', 'mma2'/,
      ],
    ];
    for (const [fn, msg] of bad) {
      let err: unknown;
      try {
        fn();
      } catch (e) {
        err = e;
      }
      expect(err, String(msg)).toBeDefined();
      expect((err as Error).message).toMatch(msg);
      expect(err).toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT' });
    }
    using index = new HammingIndex({ bits: 64, backend: 'cpu' });
    await expect(index.search(new Uint32Array(2), { k: 1 })).rejects.toThrow(/empty index/);
    index.add(new Uint32Array(4));
    for (const [q, opts, msg] of [
      [new Uint32Array(3), { k: 1 }, /queries has 3 words/],
      [{ data: new Uint32Array(4), rows: 1, bits: 128 }, { k: 1 }, /queries\.bits is 128 but this index holds 64-bit/],
      [new Uint32Array(2), { k: 0 }, /k must be an integer in \[1, 1024\]/],
      [new Uint32Array(2), { k: 1025 }, /k must be an integer in \[1, 1024\]/],
      // The exact kernel is fixed at construction; the old per-search option says where it went.
      [new Uint32Array(2), { k: 1, exactKernel: 'popc' }, /options\.exactKernel moved to the constructor/],
    ] as const) {
      const p = index.search(q as never, opts as never);
      await expect(p).rejects.toThrow(msg);
      await expect(p).rejects.toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT' });
    }
  });

  it('an aborted signal rejects with AbortError', async () => {
    using index = new HammingIndex({ bits: 32, backend: 'cpu' });
    index.add(new Uint32Array([1, 2, 3]));
    const ac = new AbortController();
    ac.abort();
    await expect(index.search(new Uint32Array([1]), { k: 1, signal: ac.signal })).rejects.toMatchObject({
      name: 'AbortError',
      code: 'ABORT_ERR',
    });
  });

  it('use after dispose throws CUSIM_DISPOSED', async () => {
    const index = new HammingIndex({ bits: 32, backend: 'cpu' });
    index.add(new Uint32Array([1, 2]));
    index.dispose();
    expect(() => index.size).toThrow(expect.objectContaining({ code: 'CUSIM_DISPOSED' }));
    await expect(index.search(new Uint32Array(1), { k: 1 })).rejects.toMatchObject({ code: 'CUSIM_DISPOSED' });
  });
});

describeGpu('HammingIndex', () => {
  const cases = [
    // bits, n, queries, k, duplicates
    [32, 1, 3, 10, false],
    [32, 2049, 40, 7, true],
    [64, 1237, 17, 10, true],
    [128, 3001, 19, 100, false],
    [256, 70_001, 300, 10, false],
    [256, 1, 5, 1, false],
    [512, 5003, 33, 1024, true],
    [1024, 3001, 20, 100, false],
  ] as const;
  for (const exactKernel of ['popc', 'mma2', 'auto'] as const) {
    it(`exact '${exactKernel}' equals the CPU backend (odd sizes, duplicates, n = 1, k > n)`, async () => {
      for (const [bits, n, nq, k, dupes] of cases) {
        const seed = bits * 7 + n;
        const cpu = await exactCase(bits, n, nq, k, seed, 'cpu', 'auto', dupes);
        const gpu = await exactCase(bits, n, nq, k, seed, 'cuda', exactKernel, dupes);
        expect(gpu.res.ids, `${bits}x${n} k=${k}`).toEqual(cpu.res.ids);
        expect(gpu.res.distances, `${bits}x${n} k=${k}`).toEqual(cpu.res.distances);
        expect(gpu.res.kernelMs).toBeGreaterThan(0);
      }
    });

    it(`exact '${exactKernel}': more ties than the tie buffer resolve to the lowest ids`, async () => {
      const r = rng(77);
      const bits = 256;
      const n = 5000;
      const code = randomBits(r, 1, bits);
      const db = randomBits(r, n, bits);
      // Rows 100.. are copies of the query: 4900 ties at distance 0, scattered over tiles.
      for (let i = 100; i < n; i++) db.set(code, i * 8);
      for (const k of [10, 1024]) {
        using index = new HammingIndex({ bits, backend: 'cuda', tuning: { exactKernel } });
        index.add(db);
        const res = await index.search(code, { k });
        const want = oracle(db, n, code, 1, bits, k);
        expect(res.ids).toEqual(want.ids);
        expect(res.distances).toEqual(want.dist);
      }
    });
  }

  it('EWH scores equal the CPU backend', async () => {
    for (const [bits, n, tables, h, e, alpha] of [
      [64, 1, 4, 5, 2, [10, 5, 2]],
      [256, 4097, 4, 5, 2, [10, 5, 2]],
      [512, 3001, 8, 10, 3, [9, 4, 2, 1]],
      [32, 777, 2, 3, 0, [5]],
    ] as const) {
      const r = rng(n + h);
      const db = withDuplicates(r, n, bits);
      const qs = randomBits(r, 9, bits);
      const opts = { bits, method: 'ewh' as const, tables, keyBits: h, maxErrors: e, weights: [...alpha] };
      using cpu = new HammingIndex({ ...opts, backend: 'cpu' });
      using gpu = new HammingIndex({ ...opts, backend: 'cuda' });
      cpu.add(db);
      gpu.add(db);
      expect(await gpu.scores(qs)).toEqual(await cpu.scores(qs));
    }
  });

  it('EWH search equals the CPU backend (minScore and shortlist, k up to 1024)', async () => {
    for (const [bits, n, k, extra] of [
      [256, 20_011, 10, {}],
      [256, 20_011, 50, { shortlist: 300 }],
      [128, 1, 10, {}],
      [128, 1, 10, { minScore: 0 }],
      [512, 4099, 1024, { shortlist: 2000 }],
      [64, 3001, 100, { minScore: 10 }],
    ] as const) {
      const r = rng(n + k);
      const db = withDuplicates(r, n, bits);
      const qs = randomBits(r, 37, bits);
      qs.set(db.subarray(0, bits / 32));
      using cpu = new HammingIndex({ bits, method: 'ewh', backend: 'cpu', ...extra });
      using gpu = new HammingIndex({ bits, method: 'ewh', backend: 'cuda', ...extra });
      cpu.add(db);
      gpu.add(db);
      const a = await cpu.search(qs, { k });
      const b = await gpu.search(qs, { k });
      expect(b.ids, `${bits}x${n} k=${k}`).toEqual(a.ids);
      expect(b.distances).toEqual(a.distances);
      expect(b.shortlisted).toBe(a.shortlisted);
      expect(b.scored).toBe(a.scored);
    }
  });

  it('adding after a search refreshes the device copy', async () => {
    const r = rng(3);
    const db = randomBits(r, 2000, 256);
    const qs = randomBits(r, 5, 256);
    for (const method of ['exact', 'ewh'] as const) {
      using gpu = new HammingIndex({ bits: 256, method, backend: 'cuda', minScore: 0 });
      using cpu = new HammingIndex({ bits: 256, method, backend: 'cpu', minScore: 0 });
      gpu.add(db.subarray(0, 1000 * 8));
      cpu.add(db.subarray(0, 1000 * 8));
      await gpu.search(qs, { k: 5 });
      gpu.add(db.subarray(1000 * 8));
      cpu.add(db.subarray(1000 * 8));
      expect((await gpu.search(qs, { k: 5 })).ids).toEqual((await cpu.search(qs, { k: 5 })).ids);
    }
  });
});

/** Rows are copies of centre r % m (periodic, as the bench lays clusters out) with 0..maxFlips bits flipped. */
function periodicClusters(r: () => number, n: number, bits: number, m: number, maxFlips: number) {
  const w = bits / 32;
  const centres = randomBits(r, m, bits);
  const db = new Uint32Array(n * w);
  for (let i = 0; i < n; i++) {
    db.set(centres.subarray((i % m) * w, (i % m) * w + w), i * w);
    for (let f = randInt(r, maxFlips + 1); f > 0; f--) {
      const b = randInt(r, bits);
      db[i * w + (b >>> 5)] ^= 1 << (b & 31);
    }
  }
  return { db, centres };
}

describeGpu('HammingIndex exact: clustered codes and massive ties', () => {
  // n > 8192 with k < 512 makes the search bound the k-th distance on a strided, hashed sample
  // (and its levels) before the full scan; n <= 1024 lets k reach n.
  type Case = { name: string; bits: number; db: Uint32Array; qs: Uint32Array; ks: number[] };
  const cases = (): Case[] => {
    const r = rng(2029);
    const out: Case[] = [];
    for (const bits of [256, 512]) {
      const w = bits / 32;
      const n = 100_003;
      const one = randomBits(r, 1, bits);
      const same = new Uint32Array(n * w);
      for (let i = 0; i < n; i++) same.set(one, i * w);
      const other = randomBits(r, 2, bits);
      other.set(one, 0); // query 0 equals every code, query 1 is far from all
      out.push({ name: `${bits} bits, all ${n} codes identical`, bits, db: same, qs: other, ks: [1, 50, 1024] });

      // Two clusters of exact copies, interleaved: A (800 rows: 3, 10, .., 5596; smaller than k = 1024)
      // and B (every other row), so each distance ties with hundreds to ~1e5 rows.
      const ab = randomBits(r, 2, bits);
      const two = new Uint32Array(n * w);
      for (let i = 0; i < n; i++) two.set(i % 7 === 3 && i < 5600 ? ab.subarray(0, w) : ab.subarray(w, 2 * w), i * w);
      const q2 = new Uint32Array(3 * w);
      q2.set(ab.subarray(0, w), 0);
      q2.set(ab.subarray(w, 2 * w), w);
      q2.set(ab.subarray(0, w), 2 * w);
      q2[2 * w] ^= 0x11; // two bits from A
      out.push({ name: `${bits} bits, two interleaved clusters of exact copies`, bits, db: two, qs: q2, ks: [1, 50, 1024] });

      // The bench's layout: 1009 periodic clusters with 0..16 flipped bits, queries near centres.
      const { db, centres } = periodicClusters(r, n, bits, 1009, 16);
      const qs = new Uint32Array(8 * w);
      for (let q = 0; q < 8; q++) {
        qs.set(centres.subarray(((q * 131) % 1009) * w, ((q * 131) % 1009) * w + w), q * w);
        for (let f = 0; f < 8; f++) {
          const b = randInt(r, bits);
          qs[q * w + (b >>> 5)] ^= 1 << (b & 31);
        }
      }
      out.push({ name: `${bits} bits, periodic clusters`, bits, db, qs, ks: [1, 50, 1024] });

      // k = n: a small index, two clusters of copies.
      const small = 1000;
      const s = new Uint32Array(small * w);
      for (let i = 0; i < small; i++) s.set(ab.subarray(i % 3 === 0 ? 0 : w, i % 3 === 0 ? w : 2 * w), i * w);
      out.push({ name: `${bits} bits, ${small} codes, k = n`, bits, db: s, qs: q2, ks: [1, small, 1024] });
    }
    return out;
  };

  let memo: { c: Case; want: ReturnType<typeof oracle>; k: number }[] | undefined;
  /** Each case with its brute-force answer at the largest k (smaller k are its prefixes). */
  const solved = () =>
    (memo ??= cases().map((c) => {
      const k = Math.max(...c.ks);
      return { c, k, want: oracle(c.db, c.db.length / (c.bits / 32), c.qs, c.qs.length / (c.bits / 32), c.bits, k) };
    }));
  /** The first k of each query's K results (k <= K). */
  const prefix = <T extends Uint32Array | Uint16Array>(all: T, nq: number, K: number, k: number): T => {
    const out = all.slice(0, nq * k) as T;
    for (let q = 0; q < nq; q++) for (let i = 0; i < k; i++) out[q * k + i] = all[q * K + i];
    return out;
  };

  for (const exactKernel of ['popc', 'mma2'] as const) {
    it(`exact '${exactKernel}' equals the CPU backend and brute force, ties in id order`, async () => {
      for (const { c, want, k: K } of solved()) {
        const nq = c.qs.length / (c.bits / 32);
        using cpu = new HammingIndex({ bits: c.bits, backend: 'cpu' });
        using gpu = new HammingIndex({ bits: c.bits, backend: 'cuda', tuning: { exactKernel } });
        cpu.add(c.db);
        gpu.add(c.db);
        for (const k of c.ks) {
          const label = `${c.name}, k = ${k}`;
          const ids = prefix(want.ids, nq, K, k);
          const dist = prefix(want.dist, nq, K, k);
          const a = await cpu.search(c.qs, { k });
          const b = await gpu.search(c.qs, { k });
          expect(a.ids, `cpu ${label}`).toEqual(ids);
          expect(a.distances, `cpu ${label}`).toEqual(dist);
          expect(b.ids, `gpu ${label}`).toEqual(ids);
          expect(b.distances, `gpu ${label}`).toEqual(dist);
        }
      }
    });
  }
});
