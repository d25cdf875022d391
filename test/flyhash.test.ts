import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { FlyHash, type DenseMatrix, type FlyHashOptions, type FlyHashTuning } from '../lib/index.js';
import { native } from '../lib/addon.js';
import { backends, describeGpu, expectInvalid, rng } from './helpers.js';

// ---- independent oracles --------------------------------------------------------

// The projection contract, re-derived from the KAT-verified Philox stream:
// Floyd's sampling with Lemire's bounded draws, sorted ascending.
function referenceProjection(d: number, m: number, s: number, seed: number): Uint32Array {
  const out = new Uint32Array(m * s);
  for (let j = 0; j < m; j++) {
    let words = native().philoxStream(BigInt(seed), BigInt(j), 0n, 4 * s + 64, false) as Uint32Array;
    let w = 0;
    const next = (): bigint => {
      if (w === words.length) {
        words = native().philoxStream(BigInt(seed), BigInt(j), 0n, words.length * 2, false) as Uint32Array;
      }
      return BigInt(words[w++]);
    };
    const bounded = (n: number): number => {
      const N = BigInt(n);
      const threshold = (2n ** 32n - N) % N;
      let p = next() * N;
      while ((p & 0xffffffffn) < threshold) p = next() * N;
      return Number(p >> 32n);
    };
    const chosen = new Set<number>();
    for (let i = d - s; i < d; i++) {
      const t = bounded(i + 1);
      chosen.add(chosen.has(t) ? i : t);
    }
    out.set(
      [...chosen].sort((a, b) => a - b),
      j * s,
    );
  }
  return out;
}

// Activations in float32, ascending input order; winners by argsort on
// (value descending, index ascending).
function referenceWinners(X: DenseMatrix, proj: Uint32Array, m: number, s: number, k: number): number[][] {
  const rows: number[][] = [];
  for (let r = 0; r < X.rows; r++) {
    const act = new Float32Array(m);
    for (let j = 0; j < m; j++) {
      let a = 0;
      for (let t = 0; t < s; t++) a = Math.fround(a + X.data[r * X.cols + proj[j * s + t]]);
      act[j] = a;
    }
    const order = Array.from({ length: m }, (_, j) => j).sort((a, b) => act[b] - act[a] || a - b);
    rows.push(order.slice(0, k).sort((a, b) => a - b));
  }
  return rows;
}

function bitsOf(data: Uint32Array, row: number, m: number): number[] {
  const w = Math.ceil(m / 32);
  const out: number[] = [];
  for (let j = 0; j < w * 32; j++) if ((data[row * w + (j >> 5)] >>> (j & 31)) & 1) out.push(j);
  return out;
}

function randomDense(r: () => number, rows: number, cols: number, ties = false): DenseMatrix {
  const data = new Float32Array(rows * cols);
  // Ties: small integers, so many activations coincide.
  for (let i = 0; i < data.length; i++) data[i] = ties ? Math.floor(r() * 3) : r() * 2 - 0.5;
  return { data, rows, cols };
}

interface Shape {
  name: string;
  d: number;
  m: number;
  s: number;
  k: number;
  rows: number;
  ties?: boolean;
  constant?: boolean;
}

const shapes: Shape[] = [
  { name: 'random inputs', d: 40, m: 256, s: 4, k: 12, rows: 57 },
  { name: 'ties (repeated values)', d: 30, m: 200, s: 3, k: 17, rows: 41, ties: true },
  { name: 'constant rows (all activations tie)', d: 16, m: 90, s: 5, k: 9, rows: 5, constant: true },
  { name: 'k = 1', d: 25, m: 64, s: 6, k: 1, rows: 33, ties: true },
  { name: 'k = m', d: 25, m: 70, s: 6, k: 70, rows: 9 },
  { name: 'm not a multiple of 32', d: 50, m: 77, s: 5, k: 10, rows: 31, ties: true },
  { name: 'single row, s = d', d: 12, m: 33, s: 12, k: 4, rows: 1 },
];

function inputFor(sh: Shape, seed: number): DenseMatrix {
  const X = randomDense(rng(seed), sh.rows, sh.d, sh.ties);
  if (sh.constant) X.data.fill(0.25);
  return X;
}

// ---- tests -----------------------------------------------------------------------

describe('FlyHash projection', () => {
  it('follows the contract: Philox(seed, j, 0), Floyd + Lemire, sorted, distinct, in range', () => {
    for (const [d, m, s, seed] of [
      [128, 40, 13, 1],
      [1000, 7, 100, 77],
      [5, 9, 5, 3],
      [70000, 3, 2, 2 ** 40 + 5],
    ]) {
      using fly = new FlyHash({ inputDim: d, hashLength: m, connections: s, winners: 1, seed });
      const p = fly.projection();
      expect(p).toEqual(referenceProjection(d, m, s, seed));
      for (let j = 0; j < m; j++) for (let t = 1; t < s; t++) expect(p[j * s + t]).toBeGreaterThan(p[j * s + t - 1]);
      expect(Math.max(...p)).toBeLessThan(d);
    }
  });

  it('is deterministic from the seed and differs between seeds', () => {
    const a = new FlyHash({ inputDim: 64, hashLength: 100, connections: 6, winners: 5, seed: 9 });
    const b = new FlyHash({ inputDim: 64, hashLength: 100, connections: 6, winners: 5, seed: 9 });
    const c = new FlyHash({ inputDim: 64, hashLength: 100, connections: 6, winners: 5, seed: 10 });
    expect(a.projection()).toEqual(b.projection());
    expect(a.projection()).not.toEqual(c.projection());
  });

  it('draws inputs close to uniformly (chi-square over many outputs)', () => {
    const d = 20;
    using fly = new FlyHash({ inputDim: d, hashLength: 20000, connections: 3, winners: 1, seed: 4 });
    const counts = new Array(d).fill(0);
    for (const i of fly.projection()) counts[i]++;
    const expected = (20000 * 3) / d;
    const chi2 = counts.reduce((acc, c) => acc + (c - expected) ** 2 / expected, 0);
    // 19 degrees of freedom: P(chi2 > 43.8) = 0.001.
    expect(chi2).toBeLessThan(43.8);
  });
});

describe('FlyHash.hash', () => {
  for (const backend of backends) {
    for (const sh of shapes) {
      it(`${backend}: ${sh.name}: exactly k winners equal to the argsort reference (bits and indices)`, async () => {
        using fly = new FlyHash({ inputDim: sh.d, hashLength: sh.m, connections: sh.s, winners: sh.k, seed: 3, backend });
        const X = inputFor(sh, 11);
        const want = referenceWinners(X, fly.projection(), sh.m, sh.s, sh.k);
        const bits = await fly.hash(X);
        expect(bits.backend).toBe(backend);
        expect(bits.data.length).toBe(sh.rows * Math.ceil(sh.m / 32));
        const idx = await fly.hash(X, { output: 'indices' });
        expect(idx.data.length).toBe(sh.rows * sh.k);
        for (let r = 0; r < sh.rows; r++) {
          const got = bitsOf(bits.data, r, sh.m);
          expect(got.length).toBe(sh.k);
          expect(got, `row ${r}`).toEqual(want[r]);
          expect([...idx.data.subarray(r * sh.k, (r + 1) * sh.k)]).toEqual(want[r]);
        }
      });
    }

    it(`${backend}: zero rows give an empty result`, async () => {
      using fly = new FlyHash({ inputDim: 8, hashLength: 40, connections: 2, winners: 3, backend });
      const r = await fly.hash({ data: new Float32Array(0), rows: 0, cols: 8 });
      expect(r.data.length).toBe(0);
    });
  }

  for (const backend of backends) {
    it(`${backend}: Uint8Array and Uint8ClampedArray X hash like their Float32 values; bad lengths are rejected`, async () => {
      using fly = new FlyHash({ inputDim: 50, hashLength: 333, connections: 7, winners: 21, seed: 8, backend });
      const r = rng(90);
      const bytes = new Uint8Array(1 + 97 * 50);
      for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(r() * 256);
      const view = bytes.subarray(1); // byteOffset 1: not aligned to 4
      const asFloat = { data: Float32Array.from(view), rows: 97, cols: 50 };
      const oracle = referenceWinners(asFloat, fly.projection(), 333, 7, 21);
      const fromBytes = await fly.hash({ data: view, rows: 97, cols: 50 });
      for (let row = 0; row < 97; row++) expect(bitsOf(fromBytes.data, row, 333), `row ${row}`).toEqual(oracle[row]);
      for (const output of ['bits', 'indices'] as const) {
        const want = await fly.hash(asFloat, { output });
        const got = await fly.hash({ data: view, rows: 97, cols: 50 }, { output });
        expect(got.data).toEqual(want.data);
        const clamped = new Uint8ClampedArray(view.buffer, view.byteOffset, view.length);
        expect((await fly.hash({ data: clamped, rows: 97, cols: 50 }, { output })).data).toEqual(want.data);
      }
      await expect(fly.hash({ data: view.subarray(1), rows: 97, cols: 50 })).rejects.toThrow(RangeError);
      await expect(fly.hash({ data: view.subarray(0, 96 * 48), rows: 96, cols: 48 })).rejects.toThrow(/inputDim/);
      using norm = new FlyHash({ inputDim: 50, hashLength: 333, connections: 7, winners: 21, seed: 8, backend, normalize: 'mean100' });
      expect((await norm.hash({ data: view, rows: 97, cols: 50 })).data).toEqual((await norm.hash(asFloat)).data);
    });
  }

  it("normalize: 'mean100' equals hashing the reference-preprocessed data", async () => {
    const r = rng(5);
    const X = randomDense(r, 20, 24);
    using fly = new FlyHash({ inputDim: 24, hashLength: 120, connections: 4, winners: 6, normalize: 'mean100', backend: 'cpu' });
    using plain = new FlyHash({ inputDim: 24, hashLength: 120, connections: 4, winners: 6, backend: 'cpu' });
    let min = Infinity;
    for (const v of X.data) min = Math.min(min, v);
    const pre = new Float32Array(X.data.length);
    for (let row = 0; row < 20; row++) {
      let sum = 0;
      for (let c = 0; c < 24; c++) sum += X.data[row * 24 + c] - min;
      for (let c = 0; c < 24; c++) pre[row * 24 + c] = (X.data[row * 24 + c] - min) * (100 / (sum / 24));
    }
    const a = await fly.hash(X);
    const b = await plain.hash({ data: pre, rows: 20, cols: 24 });
    expect(a.data).toEqual(b.data);
  });

  it('defaults follow the reference: winners 16, hashLength 20k, connections 10% of d', () => {
    using fly = new FlyHash({ inputDim: 128 });
    expect([fly.winners, fly.hashLength, fly.connections]).toEqual([16, 320, 13]);
    expect(fly.projection().length).toBe(320 * 13);
  });
});

describe('FlyHash.similarity', () => {
  it('overlap and Hamming agree with set arithmetic on the codes, in both formats', async () => {
    using fly = new FlyHash({ inputDim: 20, hashLength: 100, connections: 3, winners: 7, backend: 'cpu' });
    const X = randomDense(rng(8), 6, 20);
    const bits = await fly.hash(X);
    const idx = await fly.hash(X, { output: 'indices' });
    const w = fly.wordsPerCode;
    for (let a = 0; a < 6; a++) {
      for (let b = 0; b < 6; b++) {
        const A = new Set(bitsOf(bits.data, a, 100));
        const B = bitsOf(bits.data, b, 100);
        const overlap = B.filter((j) => A.has(j)).length;
        const sb = fly.similarity(bits.data.subarray(a * w, a * w + w), bits.data.subarray(b * w, b * w + w));
        const si = fly.similarity(idx.data.subarray(a * 7, a * 7 + 7), idx.data.subarray(b * 7, b * 7 + 7));
        expect(sb.overlap).toBe(overlap);
        expect(sb.hamming).toBe(2 * (7 - overlap));
        expect(si).toEqual(sb);
      }
    }
  });

  it('rejects codes of the wrong length and asks for the format when ambiguous', () => {
    using fly = new FlyHash({ inputDim: 20, hashLength: 100, connections: 3, winners: 7 });
    expect(() => fly.similarity(new Uint32Array(5), new Uint32Array(5))).toThrow(/codes must have 4 words \(bits\) or 7 indices/);
    expect(() => fly.similarity(new Uint32Array(4), new Uint32Array(7))).toThrow(/a has length 4 but b has length 7/);
    using amb = new FlyHash({ inputDim: 20, hashLength: 320, connections: 3, winners: 10 });
    expect(() => amb.similarity(new Uint32Array(10), new Uint32Array(10))).toThrow(/format is required/);
    expect(amb.similarity(new Uint32Array(10), new Uint32Array(10), 'bits').overlap).toBe(0);
  });
});

// ---- quality on SIFT10K ----------------------------------------------------------
// test/fixtures/sift10k.u8: all 10,000 x 128 SIFT10K vectors of
// ../shared/data/sift10k.csv as bytes (every feature is an integer in [0, 180]).

function loadSift(): DenseMatrix {
  const bytes = readFileSync(new URL('./fixtures/sift10k.u8', import.meta.url));
  return { data: Float32Array.from(bytes), rows: bytes.length / 128, cols: 128 };
}

// Ground truth: each query's top R = 2% of the database by L2 (query
// excluded, ties to the lower index).
function groundTruth(X: DenseMatrix, queries: number): Set<number>[] {
  const { rows: n, cols: d } = X;
  const top = Math.round(0.02 * n);
  const out: Set<number>[] = [];
  for (let q = 0; q < queries; q++) {
    const l2 = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      let s = 0;
      for (let c = 0; c < d; c++) {
        const t = X.data[q * d + c] - X.data[i * d + c];
        s += t * t;
      }
      l2[i] = i === q ? Infinity : s;
    }
    const v = Float64Array.from(l2).sort()[top - 1];
    const set = new Set<number>();
    for (let i = 0; i < n; i++) if (l2[i] < v) set.add(i);
    for (let i = 0; i < n && set.size < top; i++) if (l2[i] === v) set.add(i);
    out.push(set);
  }
  return out;
}

// Mean average precision as in the FlyHash replications: the database (query
// excluded) is ranked by integer code distance (ties by index), the first R
// are retrieved, and AP is the mean of precision@i over the relevant items
// among those R.
function meanAveragePrecision(n: number, truth: Set<number>[], dist: (q: number, i: number) => number): number {
  let total = 0;
  for (let q = 0; q < truth.length; q++) {
    const top = truth[q].size;
    const buckets: number[][] = [];
    for (let i = 0; i < n; i++) {
      if (i === q) continue;
      (buckets[dist(q, i)] ??= []).push(i);
    }
    let hits = 0;
    let ap = 0;
    let p = 0;
    for (const bucket of buckets) {
      if (bucket === undefined) continue;
      for (const i of bucket) {
        if (p === top) break;
        p++;
        if (truth[q].has(i)) {
          hits++;
          ap += hits / p;
        }
      }
      if (p === top) break;
    }
    total += hits === 0 ? 0 : ap / hits;
  }
  return total / truth.length;
}

function popcount(x: number): number {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return (Math.imul((x + (x >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24) & 0xff;
}

function hammingOf(codes: Uint32Array, w: number) {
  return (a: number, b: number) => {
    let h = 0;
    for (let t = 0; t < w; t++) h += popcount(codes[a * w + t] ^ codes[b * w + t]);
    return h;
  };
}

// SimHash baseline: signs of 16 Gaussian projections of the centred data.
function simHash(X: DenseMatrix, bits: number, seed: number): Uint32Array {
  const r = rng(seed);
  const gauss = () => Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
  const W = Float64Array.from({ length: bits * X.cols }, gauss);
  const mean = new Float64Array(X.cols);
  for (let i = 0; i < X.rows; i++) for (let c = 0; c < X.cols; c++) mean[c] += X.data[i * X.cols + c] / X.rows;
  const out = new Uint32Array(X.rows * Math.ceil(bits / 32));
  const w = Math.ceil(bits / 32);
  for (let i = 0; i < X.rows; i++) {
    for (let b = 0; b < bits; b++) {
      let s = 0;
      for (let c = 0; c < X.cols; c++) s += W[b * X.cols + c] * (X.data[i * X.cols + c] - mean[c]);
      if (s > 0) out[i * w + (b >> 5)] |= 1 << (b & 31);
    }
  }
  return out;
}

describe('FlyHash quality on SIFT10K', () => {
  it('k = 16, m = 20k, density 0.1: mAP >= 0.55 and >= 2x SimHash with 16 bits', async () => {
    const X = loadSift();
    const queries = 1000;
    using fly = new FlyHash({ inputDim: 128, winners: 16, hashLength: 320, connections: 13, normalize: 'mean100', backend: 'cpu' });
    const codes = await fly.hash(X);
    const truth = groundTruth(X, queries);
    const flyMap = meanAveragePrecision(X.rows, truth, hammingOf(codes.data, fly.wordsPerCode));
    const simMap = meanAveragePrecision(X.rows, truth, hammingOf(simHash(X, 16, 21), 1));
    console.log(`SIFT10K mAP: FlyHash ${flyMap.toFixed(3)}, SimHash ${simMap.toFixed(3)}`);
    expect(flyMap).toBeGreaterThanOrEqual(0.55);
    expect(flyMap).toBeGreaterThanOrEqual(2 * simMap);
  }, 120_000);
});

// ---- bad input ------------------------------------------------------------------

describe('FlyHash rejects bad input', () => {
  const code = { code: 'CUSIM_INVALID_ARGUMENT' };
  it('constructor: k > m, s > d, bad types', () => {
    expect(() => new FlyHash({ inputDim: 10, hashLength: 5, winners: 6 })).toThrow(/winners \(6\) must be <= hashLength \(5\)/);
    expect(() => new FlyHash({ inputDim: 10, hashLength: 5, winners: 6 })).toThrow(expect.objectContaining(code));
    expect(() => new FlyHash({ inputDim: 10, connections: 11 })).toThrow(/connections \(11\) must be <= inputDim \(10\)/);
    expect(() => new FlyHash({ inputDim: 0 })).toThrow(RangeError);
    expect(() => new FlyHash({ inputDim: 'x' as never })).toThrow(TypeError);
    expect(() => new FlyHash({ inputDim: 10, normalize: 'l2' as never })).toThrow(/normalize must be one of/);
  });

  it('native boundary: rows * cols wrapping 64 bits is rejected, never read as an empty matrix', () => {
    // 2^34 * 2^30 = 2^64 wraps to 0, which an empty data array would match.
    const cpu = { backend: 'cpu', tuning: { tensorCores: true } } as const;
    const h = new (native().FlyHash)({ inputDim: 2 ** 30, hashLength: 1, connections: 1, winners: 1, seed: 1, ...cpu });
    expectInvalid(
      () => h.hash({ data: new Float32Array(0), rows: 2 ** 34, cols: 2 ** 30 }, {} as never),
      RangeError,
      /X\.rows \* X\.cols overflows 64 bits/,
    );
    expectInvalid(
      () => new (native().FlyHash)({ inputDim: 4, hashLength: 8, connections: 2, winners: 2, seed: -1, ...cpu }),
      RangeError,
      /seed must be a non-negative safe integer/,
    );
    expectInvalid(
      () => new (native().FlyHash)({ inputDim: 'x', hashLength: 8, connections: 2, winners: 2 } as never),
      TypeError,
      /options\.inputDim must be a number/,
    );
  });

  for (const backend of backends) {
    it(`${backend}: d mismatch, NaN and Infinity in X, bad output`, async () => {
      using fly = new FlyHash({ inputDim: 4, hashLength: 40, connections: 2, winners: 3, backend });
      const bad = (X: unknown, opts?: object) => fly.hash(X as DenseMatrix, opts as never);
      await expect(bad({ data: new Float32Array(10), rows: 2, cols: 5 })).rejects.toThrow(
        /X.cols is 5 but this FlyHash was built for inputDim 4/,
      );
      const nan = new Float32Array(12);
      nan[9] = NaN;
      nan[11] = NaN;
      const p = bad({ data: nan, rows: 3, cols: 4 });
      await expect(p).rejects.toThrow(RangeError);
      await expect(p).rejects.toThrow(/X\.data\[9\] \(row 2, column 1\) is NaN/);
      await expect(p).rejects.toMatchObject(code);
      const inf = new Float32Array(8);
      inf[2] = -Infinity;
      await expect(bad({ data: inf, rows: 2, cols: 4 })).rejects.toThrow(/X\.data\[2\] \(row 0, column 2\) is -Infinity/);
      await expect(bad({ data: new Float32Array(8), rows: 2, cols: 4 }, { output: 'dense' })).rejects.toThrow(/output must be one of/);
      await expect(bad({ data: new Float32Array(7), rows: 2, cols: 4 })).rejects.toThrow(/X.data has length 7/);
    });
  }

  it("NaN is reported with normalize: 'mean100' too", async () => {
    using fly = new FlyHash({ inputDim: 4, hashLength: 40, connections: 2, winners: 3, normalize: 'mean100' });
    const nan = new Float32Array(8);
    nan[5] = NaN;
    await expect(fly.hash({ data: nan, rows: 2, cols: 4 })).rejects.toThrow(/X\.data\[5\] \(row 1, column 1\) is NaN/);
  });

  it('use after dispose throws CUSIM_DISPOSED; an aborted signal rejects', async () => {
    const fly = new FlyHash({ inputDim: 4, hashLength: 40, connections: 2, winners: 3 });
    const ac = new AbortController();
    ac.abort();
    await expect(fly.hash({ data: new Float32Array(8), rows: 2, cols: 4 }, { signal: ac.signal })).rejects.toMatchObject({
      name: 'AbortError',
    });
    fly.dispose();
    expect(() => fly.projection()).toThrow(expect.objectContaining({ code: 'CUSIM_DISPOSED' }));
    await expect(fly.hash({ data: new Float32Array(8), rows: 2, cols: 4 })).rejects.toMatchObject({ code: 'CUSIM_DISPOSED' });
  });
});

// ---- GPU = CPU bit for bit --------------------------------------------------------

// The kernel family is chosen from shared memory and the row count; tuning
// forces each one so every variant meets the same inputs. FlyHash objects
// made by gpuFly() take the tuning of the withTuning() call they run in. The
// backend is fixed at construction, so a comparison holds one object per
// backend, built alike.
let current: FlyHashTuning = {};
async function withTuning(t: FlyHashTuning, fn: () => Promise<void>) {
  const old = current;
  current = { ...old, ...t };
  try {
    await fn();
  } finally {
    current = old;
  }
}
function gpuFly(o: FlyHashOptions): { cpu: FlyHash; cuda: FlyHash } & Disposable {
  const cpu = new FlyHash({ ...o, backend: 'cpu', tuning: current });
  const cuda = new FlyHash({ ...o, backend: 'cuda', tuning: current });
  return {
    cpu,
    cuda,
    [Symbol.dispose]() {
      cpu.dispose();
      cuda.dispose();
    },
  };
}

async function expectSame(opts: { d: number; m: number; s: number; k: number }, X: DenseMatrix, kernel?: string) {
  using fly = gpuFly({ inputDim: opts.d, hashLength: opts.m, connections: opts.s, winners: opts.k, seed: 17 });
  for (const output of ['bits', 'indices'] as const) {
    const cpu = await fly.cpu.hash(X, { output });
    const gpu = await fly.cuda.hash(X, { output });
    expect(gpu.backend).toBe('cuda');
    if (kernel !== undefined && X.rows > 0) expect(gpu.kernel).toBe(kernel);
    expect(gpu.data.length).toBe(cpu.data.length);
    expect(
      Buffer.from(gpu.data.buffer, gpu.data.byteOffset, gpu.data.byteLength).equals(
        Buffer.from(cpu.data.buffer, cpu.data.byteOffset, cpu.data.byteLength),
      ),
    ).toBe(true);
  }
}

describeGpu('FlyHash CUDA fused-family kernels equal the CPU backend bit for bit', () => {
  // auto would send these float rows to the tensor-core path (tested below).
  let old: FlyHashTuning;
  beforeAll(() => {
    old = current;
    current = { kernel: 'fused' };
  });
  afterAll(() => {
    current = old;
  });
  for (const sh of shapes) {
    it(`fused path: ${sh.name}`, async () => {
      await expectSame(sh, inputFor(sh, 23));
    });
  }

  it('fused path: rows that are not a multiple of the row tile, FashionMNIST-like m', async () => {
    await expectSame({ d: 784, m: 25088, s: 39, k: 1254 }, randomDense(rng(1), 7, 784, true));
    await expectSame({ d: 784, m: 25088, s: 39, k: 1254 }, randomDense(rng(2), 13, 784));
  }, 60_000);

  it('fused path with one row per block (R = 1: m = 40,000 keys fill shared memory)', async () => {
    await expectSame({ d: 100, m: 40000, s: 7, k: 2001 }, randomDense(rng(12), 5, 100, true));
    await expectSame({ d: 100, m: 40000, s: 7, k: 3 }, randomDense(rng(13), 6, 100));
  }, 60_000);

  it('fused path: many batches through both streams', async () => {
    // 8 KB per input row: the 64 MB staging batch holds ~8k rows, so 20k rows take 3 batches.
    await expectSame({ d: 2048, m: 40, s: 8, k: 5 }, randomDense(rng(3), 20000, 2048));
  }, 120_000);

  it('two-pass path (m keys exceed shared memory): random, ties, k = 1, k = m, several batches', async () => {
    await expectSame({ d: 64, m: 60000, s: 4, k: 300 }, randomDense(rng(4), 2300, 64));
    await expectSame({ d: 64, m: 60001, s: 3, k: 1 }, randomDense(rng(5), 9, 64, true));
    await expectSame({ d: 10, m: 60000, s: 2, k: 60000 }, randomDense(rng(6), 3, 10, true));
    const constant = randomDense(rng(7), 5, 32);
    constant.data.fill(1);
    await expectSame({ d: 32, m: 58000, s: 3, k: 777 }, constant);
  }, 300_000);

  it('inputs wider than shared memory and than 16-bit indices (d = 70000)', async () => {
    await expectSame({ d: 70000, m: 96, s: 50, k: 9 }, randomDense(rng(8), 11, 70000));
  }, 60_000);

  it('single row and zero rows', async () => {
    await expectSame({ d: 30, m: 300, s: 3, k: 30 }, randomDense(rng(9), 1, 30));
    await expectSame({ d: 30, m: 300, s: 3, k: 30 }, { data: new Float32Array(0), rows: 0, cols: 30 });
  });
});

describeGpu('FlyHash CUDA tile kernels equal the CPU backend bit for bit', () => {
  const variants = [
    { knob: 'tile-large', kernel: 'tile-large' },
    { knob: 'fused', kernel: 'fused' },
  ] as const;
  for (const v of variants) {
    it(`${v.knob}: random, ties, constant rows, k = 1, k = m, m not a multiple of 32, single row`, async () => {
      await withTuning({ kernel: v.knob }, async () => {
        for (const sh of shapes) await expectSame(sh, inputFor(sh, 31), v.kernel);
        // Several 32-row tiles, the last one partial.
        await expectSame({ d: 40, m: 300, s: 9, k: 20 }, randomDense(rng(32), 100, 40), v.kernel);
        await expectSame({ d: 40, m: 300, s: 9, k: 20 }, randomDense(rng(33), 65, 40, true), v.kernel);
      });
    }, 120_000);
  }

  it('the 1M x 128 configuration (m = 1280, s = 13, k = 32): legacy and forced tile-large equal the CPU', async () => {
    // 5000 rows = 157 tiles: at least one per multiprocessor on an H100 (132).
    await withTuning({ kernel: 'fused' }, () => expectSame({ d: 128, m: 1280, s: 13, k: 32 }, randomDense(rng(34), 5000, 128), 'fused'));
    await withTuning({ kernel: 'tile-large' }, () =>
      expectSame({ d: 128, m: 1280, s: 13, k: 32 }, randomDense(rng(34), 5000, 128), 'tile-large'),
    );
    await withTuning({ kernel: 'tile-large' }, async () => {
      await expectSame({ d: 128, m: 1280, s: 13, k: 32 }, randomDense(rng(35), 37, 128, true), 'tile-large');
      await expectSame({ d: 128, m: 1281, s: 16, k: 1281 }, randomDense(rng(36), 33, 128), 'tile-large');
    });
  }, 120_000);

  it('tile-large: FashionMNIST configuration with a wave of rows', async () => {
    await withTuning({ kernel: 'tile-large' }, () =>
      expectSame({ d: 784, m: 25088, s: 39, k: 1254 }, randomDense(rng(37), 4300, 784), 'tile-large'),
    );
  }, 300_000);

  it('tile-large: large m with few rows, ties (fallback rows), k = 1, k = m, m not a multiple of 32', async () => {
    await withTuning({ kernel: 'tile-large' }, async () => {
      await expectSame({ d: 784, m: 25088, s: 39, k: 1254 }, randomDense(rng(38), 45, 784), 'tile-large');
      // Small-integer inputs: thousands of activations tie at the k-th value,
      // more than a warp ranks, so rows go to the fallback.
      await expectSame({ d: 784, m: 25088, s: 39, k: 1254 }, randomDense(rng(39), 40, 784, true), 'tile-large');
      await expectSame({ d: 64, m: 60001, s: 4, k: 1 }, randomDense(rng(40), 33, 64), 'tile-large');
      await expectSame({ d: 64, m: 60001, s: 3, k: 1 }, randomDense(rng(41), 9, 64, true), 'tile-large');
      await expectSame({ d: 10, m: 20000, s: 2, k: 20000 }, randomDense(rng(42), 3, 10, true), 'tile-large');
      await expectSame({ d: 100, m: 40000, s: 7, k: 2001 }, randomDense(rng(43), 70, 100), 'tile-large');
      const constant = randomDense(rng(44), 5, 32);
      constant.data.fill(1);
      await expectSame({ d: 32, m: 5800, s: 3, k: 777 }, constant, 'tile-large');
      await expectSame({ d: 30, m: 300, s: 3, k: 30 }, randomDense(rng(45), 1, 30), 'tile-large');
    });
  }, 300_000);

  it('tile-large on rows wider than shared memory (column chunks with partial sums): CIFAR-like, d = 1500, ties, k = 1', async () => {
    await withTuning({ kernel: 'tile-large' }, async () => {
      // d = 3072: three chunks of 1024 columns, a wave of rows.
      await expectSame({ d: 3072, m: 4096, s: 154, k: 205 }, randomDense(rng(51), 4300, 3072), 'tile-large');
      await expectSame({ d: 3072, m: 2000, s: 154, k: 100 }, randomDense(rng(52), 40, 3072), 'tile-large');
      await expectSame({ d: 1500, m: 3001, s: 60, k: 1 }, randomDense(rng(53), 33, 1500, true), 'tile-large');
      await expectSame({ d: 1500, m: 3001, s: 1500, k: 3001 }, randomDense(rng(54), 2, 1500), 'tile-large');
      await expectSame({ d: 2900, m: 777, s: 5, k: 40 }, randomDense(rng(55), 70, 2900), 'tile-large');
    });
    await withTuning({ kernel: 'tile-large', forceFallback: true }, async () => {
      await expectSame({ d: 3072, m: 500, s: 154, k: 25 }, randomDense(rng(56), 35, 3072), 'tile-large');
    });
  }, 300_000);

  it('tile-large fallback (every row forced through the exact per-row path)', async () => {
    await withTuning({ kernel: 'tile-large', forceFallback: true }, async () => {
      await expectSame({ d: 784, m: 25088, s: 39, k: 1254 }, randomDense(rng(46), 35, 784), 'tile-large');
      await expectSame({ d: 40, m: 77, s: 5, k: 10 }, randomDense(rng(47), 300, 40, true), 'tile-large');
      await expectSame({ d: 25, m: 70, s: 6, k: 70 }, randomDense(rng(48), 9, 25), 'tile-large');
      await expectSame({ d: 25, m: 64, s: 6, k: 1 }, randomDense(rng(49), 1, 25, true), 'tile-large');
    });
  }, 120_000);

  it('tile kernels across several batches through both streams', async () => {
    // 4 KB per row: the 64 MB staging batch holds ~16k rows, so 40k rows take 3 batches.
    await withTuning({ kernel: 'tile-large' }, async () => {
      await expectSame({ d: 1024, m: 40, s: 8, k: 5 }, randomDense(rng(50), 40000, 1024), 'tile-large');
    });
  }, 120_000);

  it('repeated calls reuse the staging buffers and still agree (growing, then shrinking batches)', async () => {
    using fly = gpuFly({ inputDim: 128, hashLength: 1280, connections: 13, winners: 32, seed: 5 });
    for (const rows of [40, 9000, 3]) {
      const X = randomDense(rng(60 + rows), rows, 128);
      const cpu = await fly.cpu.hash(X);
      const gpu = await fly.cuda.hash(X);
      expect(
        Buffer.from(gpu.data.buffer, gpu.data.byteOffset, gpu.data.byteLength).equals(
          Buffer.from(cpu.data.buffer, cpu.data.byteOffset, cpu.data.byteLength),
        ),
      ).toBe(true);
    }
  }, 120_000);
});

// ---- int8 tensor cores (byte-valued inputs) ---------------------------------------
// Every value an integer in [0, max]: the GPU computes the activations with
// int8 mma.sync (exact integers) instead of float gathers.

function byteDense(r: () => number, rows: number, cols: number, max = 255): DenseMatrix {
  const data = new Float32Array(rows * cols);
  for (let i = 0; i < data.length; i++) data[i] = Math.floor(r() * (max + 1));
  return { data, rows, cols };
}

describeGpu('FlyHash CUDA int8 tensor-core path equals the CPU backend bit for bit', () => {
  it('picked for byte-valued input: random, ties, constant rows, k = 1, k = m, m not a multiple of 32, single row', async () => {
    for (const sh of shapes) {
      const X = byteDense(rng(70), sh.rows, sh.d, sh.ties ? 2 : 255);
      if (sh.constant) X.data.fill(7);
      await expectSame(sh, X, 'mma-u8');
    }
    // Tiles of 64 rows: several, the last one partial; d not a multiple of 32.
    await expectSame({ d: 40, m: 300, s: 9, k: 20 }, byteDense(rng(71), 200, 40), 'mma-u8');
    await expectSame({ d: 50, m: 333, s: 9, k: 20 }, byteDense(rng(72), 65, 50, 3), 'mma-u8');
    await expectSame({ d: 17, m: 31, s: 17, k: 30 }, byteDense(rng(73), 64, 17), 'mma-u8');
  }, 120_000);

  it('paper configurations: FashionMNIST (few rows and a full wave), CIFAR-like width, 1M x 128 shape', async () => {
    await expectSame({ d: 784, m: 25088, s: 39, k: 1254 }, byteDense(rng(74), 70, 784), 'mma-u8');
    await expectSame({ d: 784, m: 25088, s: 39, k: 1254 }, byteDense(rng(75), 4300, 784), 'mma-u8');
    await expectSame({ d: 3072, m: 4096, s: 154, k: 205 }, byteDense(rng(76), 300, 3072), 'mma-u8');
    await expectSame({ d: 128, m: 1280, s: 13, k: 32 }, byteDense(rng(77), 5000, 128), 'mma-u8');
    // Largest sums: s = d = 1500 inputs of 255.
    const full = byteDense(rng(78), 66, 1500);
    for (let i = 0; i < full.cols; i++) full.data[i] = 255;
    await expectSame({ d: 1500, m: 3001, s: 1500, k: 3001 }, full, 'mma-u8');
    await expectSame({ d: 1500, m: 3001, s: 1499, k: 1 }, full, 'mma-u8');
  }, 300_000);

  it('ties at the k-th value beyond what a warp ranks, and every row forced through the exact fallback', async () => {
    // Inputs in {0, 1}: thousands of activations tie at the k-th value.
    await expectSame({ d: 784, m: 25088, s: 39, k: 1254 }, byteDense(rng(79), 90, 784, 1), 'mma-u8');
    await withTuning({ forceFallback: true }, async () => {
      await expectSame({ d: 784, m: 5000, s: 39, k: 250 }, byteDense(rng(80), 70, 784), 'mma-u8');
      await expectSame({ d: 40, m: 77, s: 5, k: 10 }, byteDense(rng(81), 130, 40, 2), 'mma-u8');
    });
  }, 120_000);

  it('projection words staged in shared memory or read from L2 (tuning.stageProjection true / false): the same bits', async () => {
    for (const stage of ['1', '0']) {
      await withTuning({ stageProjection: stage === '1' }, async () => {
        // Few rows (many blocks split each tile's groups), a full wave, the
        // last group partial, d not a multiple of 32, bytes and floats.
        await expectSame({ d: 100, m: 4013, s: 7, k: 200 }, byteDense(rng(140), 70, 100, 4), 'mma-u8');
        await expectSame({ d: 50, m: 333, s: 9, k: 20 }, byteDense(rng(141), 9000, 50), 'mma-u8');
        await expectSame({ d: 784, m: 25088, s: 39, k: 1254 }, randomDense(rng(142), 300, 784), 'mma-q8');
        await expectSame({ d: 128, m: 1280, s: 13, k: 32 }, randomDense(rng(143), 3000, 128), 'mma-q8');
      });
    }
  }, 120_000);

  it('many batches through both streams (64-row batches)', async () => {
    await withTuning({ batchRows: 64 }, async () => {
      await expectSame({ d: 128, m: 1280, s: 13, k: 32 }, byteDense(rng(82), 1000, 128), 'mma-u8');
      await expectSame({ d: 100, m: 4000, s: 7, k: 200 }, byteDense(rng(83), 333, 100, 4), 'mma-u8');
    });
  }, 120_000);

  it('float X that starts with bytes: from the first batch holding another value the rows switch to the float path; NaN and Infinity are named as on the CPU', async () => {
    await withTuning({ batchRows: 64 }, async () => {
      const sh = { d: 128, m: 1280, s: 13, k: 32 };
      // Row 200 lies in the fourth 64-row batch: three batches run as bytes.
      const X = byteDense(rng(86), 300, 128);
      X.data[200 * 128 + 5] = 3.5;
      await expectSame(sh, X, 'mma-u8+mma-q8');
      // Only the very last value is not a byte (256).
      const Y = byteDense(rng(87), 130, 40);
      Y.data[Y.data.length - 1] = 256;
      await expectSame({ d: 40, m: 300, s: 9, k: 20 }, Y, 'mma-u8+mma-q8');
      // Bytes through the first 4096 values, then -1 still in the first batch:
      // every row goes to the float path.
      const Z = byteDense(rng(88), 100, 128);
      Z.data[40 * 128] = -1;
      await expectSame(sh, Z, 'mma-q8');
      using fly = gpuFly({ inputDim: 128, hashLength: 1280, connections: 13, winners: 32, seed: 3 });
      const cases: [DenseMatrix, RegExp][] = [];
      const nan = byteDense(rng(89), 300, 128);
      nan.data[250 * 128 + 7] = NaN; // among byte rows, in the fourth batch
      cases.push([nan, /X\.data\[32007\] \(row 250, column 7\) is NaN/]);
      const inf = floatDense(rng(90), 300, 128, floatKinds.uniform);
      inf.data[130 * 128 + 1] = Infinity; // float rows, third batch
      inf.data[260 * 128] = NaN;
      cases.push([inf, /X\.data\[16641\] \(row 130, column 1\) is Infinity/]);
      for (const [bad, message] of cases) {
        for (const backend of ['cpu', 'cuda'] as const) {
          await expect(fly[backend].hash(bad)).rejects.toThrow(RangeError);
          await expect(fly[backend].hash(bad)).rejects.toThrow(message);
        }
      }
    });
  }, 120_000);

  it('Uint8Array input: the tensor-core path by default, and the float kernels (staged as floats) when forced', async () => {
    const X = byteDense(rng(85), 300, 784);
    const U = { data: Uint8Array.from(X.data), rows: X.rows, cols: X.cols };
    using fly = gpuFly({ inputDim: 784, hashLength: 25088, connections: 39, winners: 1254, seed: 6 });
    for (const output of ['bits', 'indices'] as const) {
      const cpu = await fly.cpu.hash(X, { output });
      const gpu = await fly.cuda.hash(U, { output });
      expect(gpu.kernel).toBe('mma-u8');
      expect(gpu.data).toEqual(cpu.data);
      for (const knob of ['tile-large', 'fused'] as const) {
        await withTuning({ kernel: knob }, async () => {
          using forcedFly = gpuFly({ inputDim: 784, hashLength: 25088, connections: 39, winners: 1254, seed: 6 });
          const forced = await forcedFly.cuda.hash(U, { output });
          expect(forced.kernel).not.toBe('mma-u8');
          expect(forced.data).toEqual(cpu.data);
        });
      }
    }
  }, 120_000);

  it('not taken where a value is not a byte (256, -1, 0.5) or when a float variant is forced', async () => {
    const kernelFor = async (X: DenseMatrix) => {
      using fly = gpuFly({ inputDim: X.cols, hashLength: 500, connections: 6, winners: 25, seed: 4 });
      const cpu = await fly.cpu.hash(X);
      const gpu = await fly.cuda.hash(X);
      expect(Buffer.from(gpu.data.buffer).equals(Buffer.from(cpu.data.buffer))).toBe(true);
      return gpu.kernel;
    };
    const X = byteDense(rng(84), 200, 60);
    expect(await kernelFor(X)).toBe('mma-u8');
    for (const odd of [256, -1, 0.5]) {
      const Y = { ...X, data: X.data.slice() };
      Y.data[Y.data.length - 1] = odd;
      expect(await kernelFor(Y)).not.toBe('mma-u8');
    }
    await withTuning({ kernel: 'fused' }, async () => {
      expect(await kernelFor(X)).toBe('fused');
    });
  }, 120_000);
});

// ---- float rows on the tensor-core path ----------------------------------------
// Float rows are quantized to bytes per row; the byte sums decide every output
// farther than the row's error bound from the k-th largest, exact float sums
// decide the rest. These inputs aim at the bound: large offsets (the float
// sums' own rounding), mixed scales, fractional ties, ranges too small or
// values too large to bound (those rows take the exact path).

function floatDense(r: () => number, rows: number, cols: number, value: (r: () => number) => number): DenseMatrix {
  const data = new Float32Array(rows * cols);
  for (let i = 0; i < data.length; i++) data[i] = value(r);
  return { data, rows, cols };
}

const floatKinds: Record<string, (r: () => number) => number> = {
  uniform: (r) => r(),
  'signed, wide': (r) => (r() * 2 - 1) * 1000,
  'large offset (10000 + [0, 1))': (r) => 10000 + r(),
  'fractional ties on a huge offset': (r) => Math.fround(1e7 + Math.floor(r() * 4) * 0.25),
  'mixed scales': (r) => (r() < 0.5 ? 1e-3 * r() : -1e3 * r()),
  'three fractional values': (r) => [0.1, 0.35, 0.6][Math.floor(r() * 3)],
  'tiny range (1 + 2^-23 steps)': (r) => 1 + Math.floor(r() * 4) * 2 ** -23,
  'subnormal range': (r) => r() * 1e-41,
  'values above 2^100': (r) => 2e30 * (1 + r()),
};

describeGpu('FlyHash CUDA tensor-core path on float rows (quantized, exact refine) equals the CPU backend bit for bit', () => {
  it('picked for float input: random, ties, constant rows, k = 1, k = m, m not a multiple of 32, single row', async () => {
    for (const sh of shapes) {
      const X = sh.ties ? floatDense(rng(90), sh.rows, sh.d, floatKinds['three fractional values']) : inputFor(sh, 90);
      await expectSame(sh, X, 'mma-q8');
    }
    await expectSame({ d: 40, m: 300, s: 9, k: 20 }, randomDense(rng(91), 200, 40), 'mma-q8');
    await expectSame({ d: 17, m: 31, s: 17, k: 30 }, randomDense(rng(92), 64, 17), 'mma-q8');
  }, 120_000);

  for (const [name, value] of Object.entries(floatKinds)) {
    it(`values: ${name}`, async () => {
      await expectSame({ d: 200, m: 3000, s: 20, k: 150 }, floatDense(rng(93), 130, 200, value), 'mma-q8');
      await expectSame({ d: 100, m: 777, s: 60, k: 1 }, floatDense(rng(94), 67, 100, value), 'mma-q8');
    }, 120_000);
  }

  it('undecided outputs keyed in the selecting warp and by ExactKernel, on every kind of values', async () => {
    const kinds = Object.values(floatKinds);
    for (const rows of ['0', '1', '8']) {
      await withTuning({ exactRows: Number(rows) as 0 | 1 | 8 }, async () => {
        for (const [i, value] of kinds.entries()) {
          await expectSame({ d: 300, m: 5000, s: 30, k: 250 }, floatDense(rng(110 + i), 20, 300, value), 'mma-q8');
        }
        await expectSame({ d: 784, m: 25088, s: 39, k: 1254 }, floatDense(rng(120), 20, 784, floatKinds.uniform), 'mma-q8');
      });
    }
  }, 300_000);

  it('rows of different kinds in one batch', async () => {
    const kinds = Object.values(floatKinds);
    const r = rng(95);
    const X = floatDense(r, 300, 150, () => 0);
    for (let row = 0; row < X.rows; row++) {
      const value = kinds[row % kinds.length];
      for (let i = 0; i < X.cols; i++) X.data[row * X.cols + i] = value(r);
    }
    await expectSame({ d: 150, m: 5000, s: 15, k: 250 }, X, 'mma-q8');
  }, 120_000);

  it('paper configurations: FashionMNIST (few rows and a wave), CIFAR-like width, 1M x 128 shape', async () => {
    const u = floatKinds.uniform;
    await expectSame({ d: 784, m: 25088, s: 39, k: 1254 }, floatDense(rng(96), 70, 784, u), 'mma-q8');
    await expectSame({ d: 784, m: 25088, s: 39, k: 1254 }, floatDense(rng(97), 4300, 784, u), 'mma-q8');
    await expectSame({ d: 3072, m: 4096, s: 154, k: 205 }, floatDense(rng(98), 300, 3072, u), 'mma-q8');
    await expectSame({ d: 128, m: 1280, s: 13, k: 32 }, floatDense(rng(99), 5000, 128, u), 'mma-q8');
  }, 300_000);

  it('every row forced through the exact fallback; many 64-row batches through both streams', async () => {
    await withTuning({ forceFallback: true }, async () => {
      await expectSame({ d: 784, m: 5000, s: 39, k: 250 }, randomDense(rng(100), 70, 784), 'mma-q8');
    });
    await withTuning({ batchRows: 64 }, async () => {
      await expectSame({ d: 128, m: 1280, s: 13, k: 32 }, randomDense(rng(101), 1000, 128), 'mma-q8');
    });
  }, 120_000);

  it('knobs: mma takes the tensor-core path for floats too, a forced float variant runs its own kernel', async () => {
    const X = randomDense(rng(102), 100, 64);
    await withTuning({ kernel: 'tile-large' }, () => expectSame({ d: 64, m: 2000, s: 6, k: 100 }, X, 'tile-large'));
    await withTuning({ kernel: 'mma' }, () => expectSame({ d: 64, m: 2000, s: 6, k: 100 }, X, 'mma-q8'));
  }, 120_000);
});
