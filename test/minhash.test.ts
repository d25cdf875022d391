import { totalmem } from 'node:os';
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { native } from '../lib/addon.js';
import {
  WeightedMinHash,
  estimateJaccard,
  estimateJaccardPairs,
  EMPTY_ROW_SENTINEL,
  devices,
  type CsrMatrix,
  type MinHashTuning,
} from '../lib/index.js';
import { backends, describeGpu, expectInvalid, rng, randomCsr, randInt, zipf } from './helpers.js';
import { oracleHash } from './oracles.mjs';

const f = Math.fround;

// ---- independent oracles --------------------------------------------------

/** Weighted Jaccard sum(min) / sum(max) of two sparse rows. */
function trueJaccard(m: CsrMatrix, a: number, b: number): number {
  const wa = new Map<number, number>();
  const wb = new Map<number, number>();
  for (let j = m.indptr[a]; j < m.indptr[a + 1]; j++) wa.set(m.indices[j], m.values![j]);
  for (let j = m.indptr[b]; j < m.indptr[b + 1]; j++) wb.set(m.indices[j], m.values![j]);
  let mn = 0;
  let mx = 0;
  for (const k of new Set([...wa.keys(), ...wb.keys()])) {
    const x = wa.get(k) ?? 0;
    const y = wb.get(k) ?? 0;
    mn += Math.min(x, y);
    mx += Math.max(x, y);
  }
  return mn / mx;
}

function bitsOf(x: number): number {
  const b = new Float32Array([x]);
  return new Int32Array(b.buffer)[0];
}

function ulpDiff(a: number, b: number): number {
  return Math.abs(bitsOf(a) - bitsOf(b));
}

/** Builds CSR from explicit rows of [column, weight] pairs. */
function csr(cols: number, rows: Array<Array<[number, number]>>): CsrMatrix {
  const indptr = new Uint32Array(rows.length + 1);
  const idx: number[] = [];
  const val: number[] = [];
  rows.forEach((row, i) => {
    for (const [c, w] of row) {
      idx.push(c);
      val.push(w);
    }
    indptr[i + 1] = idx.length;
  });
  return { rows: rows.length, cols, indptr, indices: Uint32Array.from(idx), values: Float32Array.from(val) };
}

function sliceRows(m: CsrMatrix, a: number, b: number): CsrMatrix {
  const base = m.indptr[a];
  const indptr = new Uint32Array(b - a + 1);
  for (let i = 0; i <= b - a; i++) indptr[i] = m.indptr[a + i] - base;
  return {
    rows: b - a,
    cols: m.cols,
    indptr,
    indices: m.indices.slice(base, m.indptr[b]),
    values: m.values?.slice(base, m.indptr[b]),
  };
}

/** Random CSR with empty rows, one-nnz rows, long rows (> 1024 nnz, split on GPU) and duplicate columns. */
function mixedCsr(seed: number, rows: number, cols: number, { long = true } = {}): CsrMatrix {
  const r = rng(seed);
  const m = randomCsr(r, rows, cols, (i) => {
    if (i % 17 === 0) return 0;
    if (i % 13 === 1) return 1;
    if (long && i % 97 === 5) return Math.min(cols, 1025 + randInt(r, 2000));
    return 1 + randInt(r, 60);
  });
  // Duplicate a column inside a few rows (different weight): CSR order decides ties.
  for (let i = 2; i < rows; i += 31) {
    const b = m.indptr[i];
    if (m.indptr[i + 1] - b >= 2) m.indices[b + 1] = m.indices[b];
  }
  return m;
}

function loadFixture(name: string) {
  const dir = new URL(`./fixtures/datasketch-wmh/${name}/`, import.meta.url);
  const read = (n: string) => {
    const b = readFileSync(new URL(n, dir));
    return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
  };
  const man = JSON.parse(readFileSync(new URL('manifest.json', dir), 'utf8')) as { rows: number; cols: number; samples: number };
  return {
    ...man,
    params: { rs: new Float32Array(read('rs.f32')), lnCs: new Float32Array(read('ln_cs.f32')), betas: new Float32Array(read('betas.f32')) },
    matrix: {
      rows: man.rows,
      cols: man.cols,
      indptr: new Uint32Array(read('indptr.u32')),
      indices: new Uint32Array(read('indices.u32')),
      values: new Float32Array(read('values.f32')),
    } as CsrMatrix,
    expected: new Uint32Array(read('expected.u32')),
  };
}

async function expectCoded(p: Promise<unknown> | (() => unknown), cls: ErrorConstructor, msg: RegExp, code = 'CUSIM_INVALID_ARGUMENT') {
  const promise = typeof p === 'function' ? Promise.resolve().then(p) : p;
  await expect(promise).rejects.toThrow(cls);
  await expect(promise).rejects.toThrow(msg);
  await expect(promise).rejects.toMatchObject({ code });
}

// ---- tests --------------------------------------------------------------------

describe('WeightedMinHash: datasketch parity', () => {
  for (const backend of backends) {
    for (const name of ['float-500x517-s64', 'int-2000x130-s128']) {
      it(`${backend}: ${name} equals datasketch's (k*, t*) exactly via fromParameters`, async () => {
        const fx = loadFixture(name);
        using wmh = WeightedMinHash.fromParameters({ ...fx.params, dim: fx.cols, samples: fx.samples, backend });
        const sig = await wmh.hash(fx.matrix);
        expect(sig.length).toBe(fx.expected.length);
        let bad = 0;
        for (let i = 0; i < sig.length; i++) if (sig[i] !== fx.expected[i]) bad++;
        expect(bad).toBe(0);
        // parameters() hands the injected tables back in the same layout.
        const p = wmh.parameters();
        expect(p.rs).toEqual(fx.params.rs);
        expect(p.betas).toEqual(fx.params.betas);
      });
    }
  }
});

describe('WeightedMinHash: random parameters', () => {
  it('parameters() follow the seed contract (Philox(seed, d, 0), five uniforms per sample)', () => {
    for (const [seed, dim, samples] of [
      [1, 37, 5],
      [123456789, 11, 9],
      [2 ** 40 + 3, 3, 130],
    ] as const) {
      using wmh = new WeightedMinHash({ dim, samples, seed, backend: 'cpu' });
      const p = wmh.parameters();
      expect(p.rs.length).toBe(dim * samples);
      for (let d = 0; d < dim; d++) {
        const bits = native().philoxStream(BigInt(seed), BigInt(d), 0n, 5 * samples, true) as Uint32Array;
        const u = new Float32Array(bits.buffer);
        for (let s = 0; s < samples; s++) {
          const [u1, u2, u3, u4, u5] = u.subarray(5 * s, 5 * s + 5);
          const i = s * dim + d;
          expect(p.betas[i]).toBe(u5);
          expect(ulpDiff(p.rs[i], f(-Math.log(u1 * u2)))).toBeLessThanOrEqual(1);
          expect(ulpDiff(p.lnCs[i], f(Math.log(-Math.log(u3 * u4))))).toBeLessThanOrEqual(1);
        }
      }
    }
  });

  it('rs and exp(lnCs) fit Gamma(2, 1) (shape and scale within 3%), betas span (0, 1]', () => {
    using wmh = new WeightedMinHash({ dim: 2003, samples: 128, seed: 99, backend: 'cpu' });
    const p = wmh.parameters();
    const moments = (xs: ArrayLike<number>, map = (x: number) => x) => {
      let s = 0;
      let s2 = 0;
      for (let i = 0; i < xs.length; i++) {
        const x = map(xs[i]);
        s += x;
        s2 += x * x;
      }
      const mean = s / xs.length;
      return { mean, variance: s2 / xs.length - mean * mean };
    };
    for (const { mean, variance } of [moments(p.rs), moments(p.lnCs, Math.exp)]) {
      // Gamma(k, θ): mean kθ, variance kθ²; method of moments.
      const shape = (mean * mean) / variance;
      const scale = variance / mean;
      expect(Math.abs(shape - 2) / 2).toBeLessThan(0.03);
      expect(Math.abs(scale - 1)).toBeLessThan(0.03);
      expect(Math.abs(mean - 2) / 2).toBeLessThan(0.03);
      expect(Math.abs(variance - 2) / 2).toBeLessThan(0.03);
    }
    let lo = Infinity;
    let hi = -Infinity;
    const b = moments(p.betas);
    for (const x of p.betas) {
      lo = Math.min(lo, x);
      hi = Math.max(hi, x);
    }
    expect(lo).toBeGreaterThan(0);
    expect(hi).toBeLessThanOrEqual(1);
    expect(lo).toBeLessThan(1e-4);
    expect(hi).toBeGreaterThan(1 - 1e-4);
    expect(Math.abs(b.mean - 0.5)).toBeLessThan(0.005);
  });

  it('same seed gives the same signatures; another seed differs', async () => {
    const m = mixedCsr(3, 50, 300);
    using a = new WeightedMinHash({ dim: 300, samples: 16, seed: 5, backend: 'cpu' });
    using b = new WeightedMinHash({ dim: 300, samples: 16, seed: 5, backend: 'cpu' });
    using c = new WeightedMinHash({ dim: 300, samples: 16, seed: 6, backend: 'cpu' });
    const [sa, sb, sc] = await Promise.all([a.hash(m), b.hash(m), c.hash(m)]);
    expect(sb).toEqual(sa);
    expect(sc).not.toEqual(sa);
  });
});

describe('WeightedMinHash: semantics (CPU against a float32 oracle)', () => {
  it('equals the op-by-op float32 oracle on random CSR with empty, one-nnz, long rows and duplicates', async () => {
    for (const samples of [1, 7, 64, 257]) {
      const m = mixedCsr(samples, 211, 3001);
      using wmh = new WeightedMinHash({ dim: 3001, samples, seed: 17, backend: 'cpu' });
      expect(await wmh.hash(m)).toEqual(oracleHash(m, wmh.parameters(), samples));
    }
  });

  it('empty rows give the sentinel; a one-nnz row picks its column with t* = floor(ln w / r + beta)', async () => {
    const dim = 50;
    const samples = 32;
    const m = csr(dim, [[], [[7, 2.5]], [], [[49, 0.25]]]);
    using wmh = new WeightedMinHash({ dim, samples, seed: 3, backend: 'cpu' });
    const sig = await wmh.hash(m);
    const p = wmh.parameters();
    for (let s = 0; s < samples; s++) {
      for (const r of [0, 2]) {
        expect(sig[(r * samples + s) * 2]).toBe(EMPTY_ROW_SENTINEL);
        expect(sig[(r * samples + s) * 2 + 1]).toBe(EMPTY_ROW_SENTINEL);
      }
      for (const [r, d, w] of [
        [1, 7, 2.5],
        [3, 49, 0.25],
      ]) {
        const t = Math.floor(f(f(f(Math.log(w)) / p.rs[s * dim + d]) + p.betas[s * dim + d]));
        expect(sig[(r * samples + s) * 2]).toBe(d);
        expect(sig[(r * samples + s) * 2 + 1]).toBe(t >>> 0);
      }
    }
  });

  it('skips negative and zero weights; a row of only those is the sentinel', async () => {
    const dim = 40;
    const dirty = csr(dim, [
      [
        [1, 0.5],
        [5, -2],
        [8, 0],
        [9, 3],
      ],
      [
        [4, -1],
        [6, 0],
      ],
    ]);
    const clean = csr(dim, [
      [
        [1, 0.5],
        [9, 3],
      ],
      [],
    ]);
    using wmh = new WeightedMinHash({ dim, samples: 64, seed: 8, backend: 'cpu' });
    const [a, b] = await Promise.all([wmh.hash(dirty), wmh.hash(clean)]);
    expect(a).toEqual(b);
    expect(a.subarray(128).every((x) => x === EMPTY_ROW_SENTINEL)).toBe(true);
  });

  it('values absent means every weight is 1', async () => {
    const m = mixedCsr(4, 40, 500);
    const ones = { ...m, values: new Float32Array(m.indices.length).fill(1) };
    const bare = { rows: m.rows, cols: m.cols, indptr: m.indptr, indices: m.indices };
    using wmh = new WeightedMinHash({ dim: 500, samples: 20, backend: 'cpu' });
    expect(await wmh.hash(bare)).toEqual(await wmh.hash(ones));
  });
});

describe('WeightedMinHash: estimates', () => {
  it('mean estimated Jaccard is unbiased within a binomial bound for true J from 0.1 to 0.95', async () => {
    const r = rng(2024);
    const pairsPerLevel = 120;
    const m0 = 24; // columns per pair, disjoint across pairs so estimates are independent
    const deltas = [0.105, 0.35, 0.8, 1.6, 3, 6, 17];
    const samples = 128;
    const rows: Array<Array<[number, number]>> = [];
    const level: number[] = [];
    let col = 0;
    deltas.forEach((delta, li) => {
      for (let p = 0; p < pairsPerLevel; p++) {
        const a: Array<[number, number]> = [];
        const b: Array<[number, number]> = [];
        for (let i = 0; i < m0; i++) {
          const w = f(0.1 + 3 * r());
          a.push([col + i, w]);
          // Some columns only in b, the rest scaled up by a random factor.
          if (i % 6 === 5) b.push([col + m0 + i, f(w * delta * 0.5)]);
          b.push([col + i, f(w * (1 + delta * r()))]);
        }
        b.sort((x, y) => x[0] - y[0]);
        col += 2 * m0;
        rows.push(a, b);
        level.push(li);
      }
    });
    const m = csr(col, rows);
    using wmh = new WeightedMinHash({ dim: col, samples, seed: 77, backend: 'cpu' });
    const sig = await wmh.hash(m);
    const n = rows.length / 2;
    const left = Uint32Array.from({ length: n }, (_, i) => 2 * i);
    const right = Uint32Array.from({ length: n }, (_, i) => 2 * i + 1);
    const est = estimateJaccardPairs(sig, samples, left, right);
    // The batched estimate equals the one-pair estimate.
    for (let i = 0; i < n; i += 37) {
      const e1 = estimateJaccard(
        sig.subarray(2 * i * samples * 2, (2 * i + 1) * samples * 2),
        sig.subarray((2 * i + 1) * samples * 2, (2 * i + 2) * samples * 2),
      );
      expect(est[i]).toBe(f(e1));
    }
    const seen: number[] = [];
    deltas.forEach((_, li) => {
      let sumJ = 0;
      let sumE = 0;
      let varSum = 0;
      let count = 0;
      for (let i = 0; i < n; i++) {
        if (level[i] !== li) continue;
        const j = trueJaccard(m, 2 * i, 2 * i + 1);
        sumJ += j;
        sumE += est[i];
        varSum += (j * (1 - j)) / samples;
        count++;
      }
      const meanJ = sumJ / count;
      const sd = Math.sqrt(varSum) / count;
      seen.push(meanJ);
      expect(Math.abs(sumE / count - meanJ), `level J=${meanJ.toFixed(3)}`).toBeLessThan(4 * sd + 1e-6);
    });
    expect(Math.min(...seen)).toBeLessThan(0.15);
    expect(Math.max(...seen)).toBeGreaterThan(0.93);
  });

  it('identical rows estimate 1, disjoint rows 0, an empty row 0 (even against itself)', async () => {
    const m = csr(20, [
      [
        [1, 1],
        [2, 3],
      ],
      [
        [1, 1],
        [2, 3],
      ],
      [[5, 1]],
      [],
    ]);
    using wmh = new WeightedMinHash({ dim: 20, samples: 64, backend: 'cpu' });
    const sig = await wmh.hash(m);
    const row = (i: number) => sig.subarray(i * 128, (i + 1) * 128);
    expect(estimateJaccard(row(0), row(1))).toBe(1);
    expect(estimateJaccard(row(0), row(2))).toBe(0);
    expect(estimateJaccard(row(3), row(3))).toBe(0);
    expect([...estimateJaccardPairs(sig, 64, Uint32Array.of(0, 0, 3), Uint32Array.of(1, 2, 3))]).toEqual([1, 0, 0]);
  });
});

describe('WeightedMinHash: slicing and streaming', () => {
  it('rowStart/rowEnd slices and hashStream chunks are byte-identical to one call', async () => {
    const m = mixedCsr(21, 1001, 2000);
    using wmh = new WeightedMinHash({ dim: 2000, samples: 33, backend: 'cpu' });
    const full = await wmh.hash(m);
    const w = 33 * 2;
    for (const [a, b] of [
      [0, 1],
      [17, 500],
      [500, 1001],
      [1001, 1001],
    ]) {
      const part = await wmh.hash(m, { rowStart: a, rowEnd: b });
      expect(part).toEqual(full.subarray(a * w, b * w));
    }
    const cuts = [0, 1, 250, 251, 700, 1001];
    const chunks = cuts.slice(1).map((e, i) => sliceRows(m, cuts[i], e));
    async function* gen() {
      for (const c of chunks) yield c;
    }
    for (const source of [chunks, gen()]) {
      const got: Uint32Array[] = [];
      for await (const s of wmh.hashStream(source)) got.push(s);
      expect(got.map((g) => g.length)).toEqual(chunks.map((c) => c.rows * w));
      const joined = new Uint32Array(full.length);
      let o = 0;
      for (const g of got) {
        joined.set(g, o);
        o += g.length;
      }
      expect(joined).toEqual(full);
    }
  });

  it('an aborted signal rejects with AbortError', async () => {
    using wmh = new WeightedMinHash({ dim: 10, samples: 4, backend: 'cpu' });
    const ac = new AbortController();
    ac.abort();
    await expect(wmh.hash(csr(10, [[[1, 1]]]), { signal: ac.signal })).rejects.toMatchObject({ name: 'AbortError', code: 'ABORT_ERR' });
  });
});

describe('WeightedMinHash: multi-GPU row split (host logic, any device count)', () => {
  it('cuts rows into 1..8 contiguous parts balanced by nnz, with skewed rows and sub-ranges', () => {
    const r = rng(66);
    // Skewed lengths: mostly short rows, a few huge ones, some empty.
    const m = randomCsr(r, 997, 5000, (i) => (i % 101 === 3 ? 3000 : i % 7 === 0 ? 0 : 1 + randInt(r, 20)), { weights: false });
    let maxRow = 0;
    for (let i = 0; i < m.rows; i++) maxRow = Math.max(maxRow, m.indptr[i + 1] - m.indptr[i]);
    for (const [a, b] of [
      [0, m.rows],
      [5, 600],
      [10, 10],
      [996, 997],
    ]) {
      for (let parts = 1; parts <= 8; parts++) {
        const cut = native().minhashSplitRows(m, a, b, parts) as Float64Array;
        expect(cut.length).toBe(parts + 1);
        expect(cut[0]).toBe(a);
        expect(cut[parts]).toBe(b);
        const total = m.indptr[b] - m.indptr[a];
        for (let k = 0; k < parts; k++) {
          expect(cut[k + 1]).toBeGreaterThanOrEqual(cut[k]);
          // Each part is within one row of its equal share.
          const nnz = m.indptr[cut[k + 1]] - m.indptr[cut[k]];
          expect(nnz).toBeLessThanOrEqual(total / parts + maxRow);
        }
      }
    }
  });
});

describe('WeightedMinHash: bad input', () => {
  it('rejects bad options and matrices with coded errors naming the argument', async () => {
    await expectCoded(() => new WeightedMinHash({ dim: 10, samples: 0 }), RangeError, /samples must be an integer in \[1, 65536\], got 0/);
    await expectCoded(() => new WeightedMinHash({ dim: 0 }), RangeError, /dim must be an integer/);
    await expectCoded(() => new WeightedMinHash({ dim: 10, samples: 2.5 }), RangeError, /samples/);
    await expectCoded(() => new WeightedMinHash({ dim: 10, backend: 'tpu' as never }), TypeError, /backend must be/);
    await expectCoded(() => new WeightedMinHash(null as never), TypeError, /options must be an object/);
    using wmh = new WeightedMinHash({ dim: 10, samples: 4, backend: 'cpu' });
    await expectCoded(wmh.hash(csr(11, [[[1, 1]]])), RangeError, /matrix\.cols is 11 but this WeightedMinHash was built for dim=10/);
    await expectCoded(wmh.hash(csr(10, [[[1, 1]], [[10, 2]]])), RangeError, /matrix\.indices\[1\]=10 is out of range for cols=10/);
    await expectCoded(wmh.hash(csr(10, [[[1, 1]]]), { rowStart: 1, rowEnd: 0 }), RangeError, /rowEnd/);
    await expectCoded(wmh.hash(csr(10, [[[1, 1]]]), { rowEnd: 2 }), RangeError, /rowEnd/);
    await expectCoded(
      wmh.hash({ rows: 1, cols: 10, indptr: Uint32Array.of(0), indices: new Uint32Array() }),
      RangeError,
      /matrix\.indptr has length 1/,
    );
    await expectCoded(() => wmh.hashStream(5 as never).next(), TypeError, /source must be an iterable/);
  });

  it('rejects bad parameters and bad estimate inputs', async () => {
    const t = new Float32Array(6);
    await expectCoded(
      () => WeightedMinHash.fromParameters({ rs: t, lnCs: t, betas: new Float32Array(5), dim: 3, samples: 2 }),
      RangeError,
      /betas has length 5 but samples \* dim = 6/,
    );
    await expectCoded(
      () => WeightedMinHash.fromParameters({ rs: [] as never, lnCs: t, betas: t, dim: 3, samples: 2 }),
      TypeError,
      /rs must be a Float32Array/,
    );
    const sig = new Uint32Array(8);
    await expectCoded(
      () => estimateJaccardPairs(sig, 2, Uint32Array.of(0), Uint32Array.of(2)),
      RangeError,
      /right\[0\]=2 is out of range for 2 signature rows/,
    );
    await expectCoded(
      () => estimateJaccardPairs(sig, 3, Uint32Array.of(0), Uint32Array.of(0)),
      RangeError,
      /not a multiple of samples \* 2/,
    );
    await expectCoded(
      () => estimateJaccardPairs(sig, 2, Uint32Array.of(0), Uint32Array.of(0, 1)),
      RangeError,
      /left has length 1 but right has 2/,
    );
    await expectCoded(() => estimateJaccard(new Uint32Array(4), new Uint32Array(6)), RangeError, /sigA has length 4 but sigB has 6/);
  });

  it('rejects non-finite weights naming the entry and its row, in the rows hashed only', async () => {
    for (const backend of backends) {
      using wmh = new WeightedMinHash({ dim: 10, samples: 4, backend });
      await expectCoded(
        () =>
          wmh.hash(
            csr(10, [
              [[1, 1]],
              [
                [2, 1],
                [3, Infinity],
              ],
            ]),
          ),
        RangeError,
        /matrix\.values\[2\]=Infinity in row 1: weights must be finite/,
      );
      // Outside [rowStart, rowEnd) the entry is never read, so it does not count.
      expect(await wmh.hash(csr(10, [[[1, 1]], [[3, Infinity]]]), { rowEnd: 1 })).toEqual(await wmh.hash(csr(10, [[[1, 1]]])));
      // Checked natively over the hashed rows; the row is the matrix's, not the range's.
      const late = csr(10, [[[1, NaN]], [[2, 1]], [[3, 1]], [[4, -Infinity]]]);
      await expectCoded(
        () => wmh.hash(late, { rowStart: 1 }),
        RangeError,
        /^matrix\.values\[3\]=-Infinity in row 3: weights must be finite$/,
      );
      expect(await wmh.hash(late, { rowStart: 1, rowEnd: 3 })).toEqual(await wmh.hash(csr(10, [[[2, 1]], [[3, 1]]])));
      for (const w of [-Infinity, NaN]) {
        await expectCoded(
          () =>
            wmh.hash(
              csr(10, [
                [[1, 1]],
                [[2, 1]],
                [
                  [3, 1],
                  [4, w],
                ],
              ]),
            ),
          RangeError,
          new RegExp(`matrix\\.values\\[3\\]=${w} in row 2: weights must be finite`),
        );
      }
      // A Float64Array weight beyond float32 overflows to Infinity on the way in: refused too.
      const big = { ...csr(10, [[[1, 1]], [[2, 1]]]), values: Float64Array.of(1, 1e39) as unknown as Float32Array };
      await expectCoded(() => wmh.hash(big), RangeError, /matrix\.values\[1\]=Infinity in row 1: weights must be finite/);
    }
  });

  it('fromParameters rejects non-finite tables and r <= 0, naming the entry', async () => {
    const ok = () => new Float32Array(6).fill(0.5);
    const nanR = ok();
    nanR[4] = NaN;
    await expectCoded(
      () => WeightedMinHash.fromParameters({ rs: nanR, lnCs: ok(), betas: ok(), dim: 3, samples: 2 }),
      RangeError,
      /rs\[4\]=NaN must be finite and > 0/,
    );
    const zeroR = ok();
    zeroR[0] = 0;
    await expectCoded(
      () => WeightedMinHash.fromParameters({ rs: zeroR, lnCs: ok(), betas: ok(), dim: 3, samples: 2 }),
      RangeError,
      /rs\[0\]=0 must be finite and > 0/,
    );
    const infC = ok();
    infC[5] = Infinity;
    await expectCoded(
      () => WeightedMinHash.fromParameters({ rs: ok(), lnCs: infC, betas: ok(), dim: 3, samples: 2 }),
      RangeError,
      /lnCs\[5\]=Infinity must be finite/,
    );
  });

  it('tuning: kernel and overlap are checked, unknown keys named; signatures do not depend on it (cpu)', async () => {
    expectInvalid(
      () => new WeightedMinHash({ dim: 4, tuning: { kernel: 'fast' as 'auto' } }),
      TypeError,
      /tuning\.kernel must be one of 'auto', 'prune'/,
    );
    // 'segment', prune's old test oracle, left the shipped options (the GPU tests hold prune to the CPU).
    expectInvalid(
      () => new WeightedMinHash({ dim: 4, tuning: { kernel: 'segment' as 'auto' } }),
      TypeError,
      /tuning\.kernel must be one of 'auto', 'prune', got 'segment'/,
    );
    expectInvalid(
      () => new WeightedMinHash({ dim: 4, tuning: { overlap: 1 as unknown as boolean } }),
      TypeError,
      /tuning\.overlap must be a boolean/,
    );
    expectInvalid(
      () => new WeightedMinHash({ dim: 4, tuning: { streams: 1 } as MinHashTuning }),
      TypeError,
      /tuning\.streams is not a tuning option \(known: kernel, overlap\)/,
    );
    expectInvalid(() => new WeightedMinHash({ dim: 4, tuning: 3 as MinHashTuning }), TypeError, /tuning must be an object/);
    const m = randomCsr(rng(3), 20, 30, () => 5);
    using a = new WeightedMinHash({ dim: 30, samples: 8, backend: 'cpu' });
    using b = new WeightedMinHash({ dim: 30, samples: 8, backend: 'cpu', tuning: { kernel: 'prune', overlap: false } });
    expect(b.tuning).toEqual({ kernel: 'prune', overlap: false });
    expect(a.tuning).toEqual({ kernel: 'auto', overlap: true });
    expect(await b.hash(m)).toEqual(await a.hash(m));
  });

  it('native boundary: a missing or fractional seed is rejected naming options.seed', () => {
    const Ctor = native().WeightedMinHashNative;
    expectInvalid(() => new Ctor({ dim: 4, samples: 4 } as never), TypeError, /options\.seed must be a number/);
    expectInvalid(() => new Ctor({ dim: 4, samples: 4, seed: 1.5 } as never), RangeError, /seed must be a non-negative safe integer/);
    expectInvalid(() => new Ctor({ dim: NaN, samples: 4, seed: 1 } as never), RangeError, /options\.dim must be finite/);
  });

  it('parameters of too many distinct columns for host memory reject with CUSIM_OUT_OF_MEMORY naming the bytes', async () => {
    // Distinct columns x 65,536 samples x 12 bytes: more than this host's memory.
    const n = Math.ceil(totalmem() / (65536 * 12)) + 1000;
    using wmh = new WeightedMinHash({ dim: 0xffffffff, samples: 65536, backend: 'cpu' });
    const indices = new Uint32Array(n).map((_, i) => 0xffffffff - 1 - 3 * i);
    const p = wmh.hash({ rows: 1, cols: 0xffffffff, indptr: Uint32Array.of(0, n), indices });
    await expect(p).rejects.toMatchObject({ code: 'CUSIM_OUT_OF_MEMORY' });
    await expect(p).rejects.toThrow(new RegExp(`${n} distinct columns.*\\(${3 * n * 65536 * 4} bytes\\)`));
  });

  it('use after dispose throws CUSIM_DISPOSED', async () => {
    const wmh = new WeightedMinHash({ dim: 10, samples: 4, backend: 'cpu' });
    wmh.dispose();
    expect(wmh.disposed).toBe(true);
    expect(() => wmh.parameters()).toThrow(expect.objectContaining({ code: 'CUSIM_DISPOSED' }));
    await expect(wmh.hash(csr(10, [[[1, 1]]]))).rejects.toMatchObject({ code: 'CUSIM_DISPOSED' });
  });
});

describe('WeightedMinHash: parameter cost follows the columns used', () => {
  /** Rows over a few columns spread across [0, 2^32 - 1), including the largest legal one. */
  function hugeDimCsr(seed: number, rows: number, distinct: number): { m: CsrMatrix; cols: Uint32Array } {
    const r = rng(seed);
    const pool = new Set<number>([0xfffffffe, 0, 0x80000000]);
    while (pool.size < distinct) pool.add(Math.floor(r() * 0xffffffff));
    const cols = Uint32Array.from(pool);
    const m = randomCsr(r, rows, distinct, (i) => (i % 9 === 0 ? 0 : 1 + randInt(r, 40)));
    // Columns of the random matrix index the pool: same structure, huge ids.
    m.indices = m.indices.map((k) => cols[k]);
    m.cols = 0xffffffff;
    return { m, cols };
  }

  it('dim 2^32 - 1 with ids near 2^32: equals the float32 oracle over parameters({ columns }), which follow the seed contract', async () => {
    const { m, cols } = hugeDimCsr(5, 300, 500);
    using wmh = new WeightedMinHash({ dim: 0xffffffff, samples: 16, seed: 3, backend: 'cpu' });
    const sig = await wmh.hash(m);
    const p = wmh.parameters({ columns: cols });
    expect(p.columns).toEqual(cols);
    // Oracle in a compact column space: remap ids to their index in `cols`, then back for k*.
    const index = new Map<number, number>();
    cols.forEach((c, i) => index.set(c, i));
    const local = { ...m, cols: cols.length, indices: m.indices.map((c) => index.get(c)!) };
    const want = oracleHash(local, p, 16);
    for (let i = 0; i < want.length; i += 2) if (want[i] !== EMPTY_ROW_SENTINEL) want[i] = cols[want[i]];
    expect(firstDiff(sig, want)).toBe(-1);
    // The largest column's parameters are Philox(seed, 2^32 - 2, 0)'s first uniforms.
    const last = wmh.parameters({ columns: [0xfffffffe] });
    const bits = native().philoxStream(3n, 0xfffffffen, 0n, 5 * 16, true) as Uint32Array;
    const u = new Float32Array(bits.buffer);
    for (let s = 0; s < 16; s++) expect(last.betas[s]).toBe(u[5 * s + 4]);
  });

  it('columns are kept across calls: calls over different columns equal one fresh object each (bit for bit)', async () => {
    const { m } = hugeDimCsr(8, 400, 3000);
    using seen = new WeightedMinHash({ dim: 0xffffffff, samples: 32, seed: 9, backend: 'cpu' });
    const parts = [sliceRows(m, 0, 100), sliceRows(m, 100, 250), sliceRows(m, 250, 400)];
    const got: Uint32Array[] = [];
    for (const part of parts) got.push(await seen.hash(part));
    // Concurrent calls that add columns at the same time.
    const again = await Promise.all(parts.map((part) => seen.hash(part)));
    for (let i = 0; i < parts.length; i++) {
      using fresh = new WeightedMinHash({ dim: 0xffffffff, samples: 32, seed: 9, backend: 'cpu' });
      const want = await fresh.hash(parts[i]);
      expect(firstDiff(got[i], want)).toBe(-1);
      expect(firstDiff(again[i], want)).toBe(-1);
    }
  });

  it('parameters() without columns needs dim x samples to fit a typed array, and says to pass columns', () => {
    using wmh = new WeightedMinHash({ dim: 0xffffffff, samples: 4, backend: 'cpu' });
    expect(() => wmh.parameters()).toThrow(expect.objectContaining({ code: 'CUSIM_INVALID_ARGUMENT' }));
    expect(() => wmh.parameters()).toThrow(/pass the columns wanted/);
    expectInvalid(() => wmh.parameters({ columns: [0xffffffff] }), RangeError, /columns\[0\]=4294967295 is out of range/);
  });

  it('fromParameters({ columns }): tables for chosen columns of a huge dim; any other column is a RangeError naming it', async () => {
    const { m, cols } = hugeDimCsr(12, 200, 300);
    using seeded = new WeightedMinHash({ dim: 0xffffffff, samples: 8, seed: 4, backend: 'cpu' });
    const p = seeded.parameters({ columns: cols });
    using inj = WeightedMinHash.fromParameters({ ...p, dim: 0xffffffff, samples: 8, backend: 'cpu' });
    expect(firstDiff(await inj.hash(m), await seeded.hash(m))).toBe(-1);
    expect(inj.parameters({ columns: cols.subarray(0, 5) }).rs).toEqual(seeded.parameters({ columns: cols.subarray(0, 5) }).rs);
    const bad = { ...m, indices: m.indices.slice() };
    const at = bad.indptr[7];
    bad.indices[at] = 12345;
    await expectCoded(inj.hash(bad), RangeError, new RegExp(`matrix\\.indices\\[${at}\\]=12345 has no parameters`));
    expectInvalid(() => inj.parameters({ columns: [12345] }), RangeError, /columns\[0\]=12345 has no parameters/);
    expectInvalid(
      () =>
        WeightedMinHash.fromParameters({
          ...p,
          columns: Uint32Array.of(...cols.subarray(0, cols.length - 1), cols[0]),
          dim: 0xffffffff,
          samples: 8,
        }),
      RangeError,
      /columns repeats column/,
    );
  });

  it('memory grows with the columns used: 2,000 columns of a 2^32 - 1 dim cost megabytes, not 2^32 x samples x 12 bytes', async () => {
    const before = process.memoryUsage().rss;
    const { m } = hugeDimCsr(13, 20_000, 2000);
    using wmh = new WeightedMinHash({ dim: 0xffffffff, samples: 128, seed: 1, backend: 'cpu' });
    await wmh.hash(m);
    // 2,000 x 128 x 12 B = 3 MB of tables (in 4 MB blocks) plus the 20,000-row output (20 MB).
    expect(process.memoryUsage().rss - before).toBeLessThan(300 << 20);
  });
});

// ---- GPU ----------------------------------------------------------------------

/**
 * dim columns; `small` rows of 1..8 nnz, plus (at `at`) one row holding `big` distinct columns. With `hot`,
 * the small rows draw Zipf columns among the first 300 (duplicates kept), so a batch has hot columns, and
 * the big row (columns floor(k * dim / big)) runs through them too.
 */
function bigRowCsr(seed: number, dim: number, small: number, big: number, at: number, hot = false): CsrMatrix {
  const r = rng(seed);
  const lens = new Uint32Array(small + 1);
  for (let i = 0; i <= small; i++) lens[i] = i === at ? big : i % 11 === 0 ? 0 : 1 + randInt(r, 8);
  const indptr = new Uint32Array(small + 2);
  for (let i = 0; i <= small; i++) indptr[i + 1] = indptr[i] + lens[i];
  const nnz = indptr[small + 1];
  const indices = new Uint32Array(nnz);
  const values = new Float32Array(nnz);
  for (let i = 0; i <= small; i++) {
    const b = indptr[i];
    if (i === at) {
      // Every column except a random stride pattern, sorted by construction.
      const stride = dim / big;
      for (let k = 0; k < big; k++) indices[b + k] = Math.floor(k * stride);
    } else {
      for (let k = 0; k < lens[i]; k++) indices[b + k] = hot ? zipf(r, 300) : randInt(r, dim);
      indices.subarray(b, b + lens[i]).sort();
    }
  }
  for (let j = 0; j < nnz; j++) values[j] = 1e-3 + 10 * r();
  return { rows: small + 1, cols: dim, indptr, indices, values };
}

/**
 * Rows mixing very frequent columns (Zipf over the first 300) with uniform cold ones: sorted, with adjacent duplicates of a column (hot and cold, different
 * weights), zero weights (skipped), weights of exactly 1 (ln w = 0), empty rows, one-nnz rows, and rows of
 * 1025..3524 nnz that span several segments (the atomic merge).
 */
function hotMixCsr(seed: number, rows: number, cols: number): CsrMatrix {
  const r = rng(seed);
  const indptr = new Uint32Array(rows + 1);
  const idx: number[] = [];
  const val: number[] = [];
  for (let i = 0; i < rows; i++) {
    const len = i % 17 === 0 ? 0 : i % 13 === 1 ? 1 : i % 97 === 5 ? 1025 + randInt(r, 2500) : 1 + randInt(r, 80);
    const row: number[] = [];
    for (let k = 0; k < len; k++) row.push(r() < 0.6 ? zipf(r, Math.min(300, cols)) : randInt(r, cols));
    row.sort((x, y) => x - y);
    for (let k = 1; k < row.length; k += 7) row[k] = row[k - 1]; // stays sorted
    for (const c of row) {
      idx.push(c);
      const u = r();
      val.push(u < 0.03 ? 0 : u < 0.13 ? 1 : 1e-3 + 10 * r());
    }
    indptr[i + 1] = idx.length;
  }
  return { rows, cols, indptr, indices: Uint32Array.from(idx), values: Float32Array.from(val) };
}

/** Index of the first differing word, or -1 (a readable failure where toEqual would print megabytes). */
function firstDiff(a: Uint32Array, b: Uint32Array): number {
  if (a.length !== b.length) return Math.min(a.length, b.length);
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return i;
  return -1;
}

/**
 * Hashes m on CUDA and on the CPU: they agree on all but a rare last-ulp
 * difference of the seeded tables, and sentinels agree exactly. (The weighted
 * engine has one CUDA kernel, prune; its old reference kernel left the
 * shipped options, and the CPU backend is the oracle.)
 */
async function expectCpuAgrees(g: WeightedMinHash, c: WeightedMinHash, m: CsrMatrix, label: string) {
  const gpu = await g.hash(m);
  const cpu = await c.hash(m);
  expect(agreement(gpu, cpu), `${label}: cuda vs cpu`).toBeGreaterThanOrEqual(0.9999);
  // Sentinels are structural, not numeric: they must agree exactly.
  for (let i = 0; i < cpu.length; i += 2) {
    if (cpu[i] === EMPTY_ROW_SENTINEL) expect(gpu[i], `${label}: sentinel at word ${i}`).toBe(EMPTY_ROW_SENTINEL);
  }
  return { gpu, cpu };
}

function agreement(a: Uint32Array, b: Uint32Array): number {
  expect(a.length).toBe(b.length);
  let same = 0;
  for (let i = 0; i < a.length; i += 2) if (a[i] === b[i] && a[i + 1] === b[i + 1]) same++;
  return same / (a.length / 2);
}

describeGpu('WeightedMinHash (CUDA)', () => {
  it('device parameter tables equal the CPU tables (betas exact, rs and lnCs within 1 ulp)', () => {
    for (const [seed, dim, samples] of [
      [1, 1, 1],
      [42, 1001, 7],
      [2 ** 33 + 1, 4099, 128],
      [7, 333, 257],
    ] as const) {
      using g = new WeightedMinHash({ dim, samples, seed, backend: 'cuda', devices: [0] });
      using c = new WeightedMinHash({ dim, samples, seed, backend: 'cpu' });
      const gp = g.deviceParameters(0);
      const cp = c.parameters();
      expect(gp.betas).toEqual(cp.betas);
      let worst = 0;
      for (let i = 0; i < cp.rs.length; i++) worst = Math.max(worst, ulpDiff(gp.rs[i], cp.rs[i]), ulpDiff(gp.lnCs[i], cp.lnCs[i]));
      expect(worst).toBeLessThanOrEqual(1);
    }
  });

  it('cuda = cpu signatures on >= 99.99% of entries, samples in {1, 7, 64, 128, 257}, odd sizes, split rows', async () => {
    for (const samples of [1, 7, 64, 128, 257]) {
      const m = mixedCsr(100 + samples, 2003, 5003);
      using g = new WeightedMinHash({ dim: 5003, samples, seed: 11, backend: 'cuda', devices: [0] });
      using c = new WeightedMinHash({ dim: 5003, samples, seed: 11, backend: 'cpu' });
      const [timed, sc] = await Promise.all([g.hashTimed(m), c.hash(m)]);
      const sg = timed.signatures;
      expect(agreement(sg, sc), `samples=${samples}`).toBeGreaterThanOrEqual(0.9999);
      // Sentinels are structural, not numeric: they must agree exactly.
      for (let i = 0; i < sc.length; i += 2) if (sc[i] === EMPTY_ROW_SENTINEL) expect(sg[i]).toBe(EMPTY_ROW_SENTINEL);
      expect(timed.kernelMs).toBeGreaterThan(0);
    }
  });

  it('parameters of more distinct columns than fit the GPU reject with CUSIM_OUT_OF_MEMORY naming the bytes; the object still works', async () => {
    // 200,000 distinct columns x 65,536 samples x 18 bytes = 236 GB.
    const n = 200_000;
    using wmh = new WeightedMinHash({ dim: 0xffffffff, samples: 65536, backend: 'cuda', devices: [0] });
    const indices = new Uint32Array(n).map((_, i) => 0xfffffffe - 7 * i);
    const p = wmh.hash({ rows: 1, cols: 0xffffffff, indptr: Uint32Array.of(0, n), indices });
    await expect(p).rejects.toMatchObject({ code: 'CUSIM_OUT_OF_MEMORY' });
    await expect(p).rejects.toThrow(new RegExp(`${n} distinct columns, 65536 samples\\)`));
    // The failed call left no half-added columns behind: a small call hashes as the CPU does.
    const small = { rows: 2, cols: 0xffffffff, indptr: Uint32Array.of(0, 2, 3), indices: Uint32Array.of(5, 0xfffffffe, 5) };
    using c = new WeightedMinHash({ dim: 0xffffffff, samples: 65536, backend: 'cpu' });
    expect(agreement(await wmh.hash(small), await c.hash(small))).toBeGreaterThanOrEqual(0.999);
  });

  it('column ids near 2^32 (dim 2^32 - 1): cuda = cpu, and deviceParameters({ columns }) = parameters({ columns })', async () => {
    const r = rng(21);
    const pool = Uint32Array.from(
      new Set([0xfffffffe, 0, 1, 0x80000000, ...Array.from({ length: 3000 }, () => Math.floor(r() * 0xffffffff))]),
    );
    const base = mixedCsr(22, 1500, pool.length);
    const m = { ...base, cols: 0xffffffff, indices: base.indices.map((k) => pool[k]) };
    using g = new WeightedMinHash({ dim: 0xffffffff, samples: 64, seed: 6, backend: 'cuda', devices: [0] });
    using c = new WeightedMinHash({ dim: 0xffffffff, samples: 64, seed: 6, backend: 'cpu' });
    const [sg, sc] = await Promise.all([g.hash(m), c.hash(m)]);
    expect(agreement(sg, sc)).toBeGreaterThanOrEqual(0.9999);
    for (let i = 0; i < sc.length; i += 2) if (sc[i] === EMPTY_ROW_SENTINEL) expect(sg[i]).toBe(EMPTY_ROW_SENTINEL);
    // Columns used by the call and columns never seen (added by the request itself).
    const cols = Uint32Array.of(0xfffffffe, pool[7], 123456789, 0, 4000000000);
    const gp = g.deviceParameters(0, { columns: cols });
    const cp = c.parameters({ columns: cols });
    expect(gp.columns).toEqual(cols);
    expect(gp.betas).toEqual(cp.betas);
    for (let i = 0; i < cp.rs.length; i++) {
      expect(ulpDiff(gp.rs[i], cp.rs[i])).toBeLessThanOrEqual(1);
      expect(ulpDiff(gp.lnCs[i], cp.lnCs[i])).toBeLessThanOrEqual(1);
    }
  });

  it('columns added over calls, batches and concurrent calls (map growth past 4096 entries, retried batches) = cpu', async () => {
    const dim = 50_000_000;
    const r = rng(23);
    // Each part brings ~30,000 new columns (the map starts at 4,096 entries) plus columns seen before.
    const parts: CsrMatrix[] = [];
    for (let k = 0; k < 4; k++) {
      const rows = 20_000;
      const indptr = new Uint32Array(rows + 1);
      const idx: number[] = [];
      for (let i = 0; i < rows; i++) {
        const len = i % 23 === 0 ? 0 : 1 + randInt(r, 12);
        const row = new Set<number>();
        while (row.size < len) row.add(r() < 0.5 ? randInt(r, 2000) : 2000 + k * 1_000_000 + randInt(r, 40_000));
        idx.push(...[...row].sort((a, b) => a - b));
        indptr[i + 1] = idx.length;
      }
      parts.push({ rows, cols: dim, indptr, indices: Uint32Array.from(idx) });
    }
    using g = new WeightedMinHash({ dim, samples: 32, seed: 8, backend: 'cuda', devices: 'all' });
    using c = new WeightedMinHash({ dim, samples: 32, seed: 8, backend: 'cpu' });
    const first = await g.hash(parts[0]);
    const rest = await Promise.all(parts.slice(1).map((m) => g.hash(m)));
    const gpu = [first, ...rest];
    for (let k = 0; k < parts.length; k++) {
      const cpu = await c.hash(parts[k]);
      expect(agreement(gpu[k], cpu), `part ${k}`).toBeGreaterThanOrEqual(0.9999);
      // Same object, columns all known now: byte-identical to the first pass.
      expect(firstDiff(await g.hash(parts[k]), gpu[k]), `part ${k} again`).toBe(-1);
    }
  });

  it('injected tables for chosen columns of a huge dim: cuda = cpu; a column outside the set is named', async () => {
    const r = rng(29);
    const pool = Uint32Array.from(new Set([0xfffffffe, ...Array.from({ length: 800 }, () => Math.floor(r() * 0xffffffff))]));
    const base = mixedCsr(30, 900, pool.length);
    const m = { ...base, cols: 0xffffffff, indices: base.indices.map((k) => pool[k]) };
    using seeded = new WeightedMinHash({ dim: 0xffffffff, samples: 16, seed: 2, backend: 'cpu' });
    const p = seeded.parameters({ columns: pool });
    using g = WeightedMinHash.fromParameters({ ...p, dim: 0xffffffff, samples: 16, backend: 'cuda', devices: [0] });
    using c = WeightedMinHash.fromParameters({ ...p, dim: 0xffffffff, samples: 16, backend: 'cpu' });
    expect(agreement(await g.hash(m), await c.hash(m))).toBeGreaterThanOrEqual(0.9999);
    expect(g.deviceParameters(0, { columns: pool.subarray(0, 9) }).betas).toEqual(c.parameters({ columns: pool.subarray(0, 9) }).betas);
    const bad = { ...m, indices: m.indices.slice() };
    const at = bad.indptr[bad.rows] - 3;
    bad.indices[at] = 77;
    await expectCoded(g.hash(bad), RangeError, new RegExp(`matrix\\.indices\\[${at}\\]=77 has no parameters`));
  });

  it('a 1M-nnz row among small rows: cuda = cpu on >= 99.99% of entries', async () => {
    const dim = 1_000_003;
    const m = bigRowCsr(5, dim, 3001, 1_000_000, 1234);
    using g = new WeightedMinHash({ dim, samples: 64, seed: 3, backend: 'cuda', devices: [0] });
    using c = new WeightedMinHash({ dim, samples: 64, seed: 3, backend: 'cpu' });
    const [sg, sc] = await Promise.all([g.hash(m), c.hash(m)]);
    expect(agreement(sg, sc)).toBeGreaterThanOrEqual(0.9999);
    // The big row itself, all of whose samples went through the split-row merge.
    expect(agreement(sg.subarray(1234 * 128, 1235 * 128), sc.subarray(1234 * 128, 1235 * 128))).toBeGreaterThanOrEqual(0.98);
  });

  it('pruned kernel = cpu: Zipf hot/cold mix, duplicates, samples 1..257', async () => {
    for (const samples of [1, 7, 64, 128, 257]) {
      const cols = 20011;
      const m = hotMixCsr(300 + samples, 1201 + samples, cols);
      using g = new WeightedMinHash({ dim: cols, samples, seed: 5, backend: 'cuda', devices: [0] });
      using c = new WeightedMinHash({ dim: cols, samples, seed: 5, backend: 'cpu' });
      const { gpu } = await expectCpuAgrees(g, c, m, `samples=${samples}`);
      // Every 17th row is empty: all sentinels.
      for (let s = 0; s < samples; s++) expect(gpu[(17 * samples + s) * 2]).toBe(EMPTY_ROW_SENTINEL);
    }
  });

  it('pruned kernel: a single row of one duplicated column, all-empty rows, one nnz', async () => {
    for (const samples of [1, 7, 128]) {
      using g = new WeightedMinHash({ dim: 50, samples, seed: 9, backend: 'cuda', devices: [0] });
      using c = new WeightedMinHash({ dim: 50, samples, seed: 9, backend: 'cpu' });
      const one = csr(50, [
        [
          [3, 2],
          [3, 5],
          [3, 0.5],
          [7, 1],
          [11, 4],
          [3, 3],
        ],
      ]);
      await expectCpuAgrees(g, c, one, `one row, samples=${samples}`);
      const empty = csr(50, [[], [], []]);
      const e = await expectCpuAgrees(g, c, empty, `empty rows, samples=${samples}`);
      expect(e.gpu.every((x) => x === EMPTY_ROW_SENTINEL)).toBe(true);
      await expectCpuAgrees(g, c, csr(50, [[[49, 7]]]), `one nnz, samples=${samples}`);
    }
  });

  it('pruned kernel: a 1M-nnz row through hot columns among small hot rows = cpu', async () => {
    const dim = 1_000_003;
    const m = bigRowCsr(6, dim, 3001, 1_000_000, 1234, true);
    using g = new WeightedMinHash({ dim, samples: 64, seed: 3, backend: 'cuda', devices: [0] });
    using c = new WeightedMinHash({ dim, samples: 64, seed: 3, backend: 'cpu' });
    const { gpu, cpu } = await expectCpuAgrees(g, c, m, '1M-nnz row');
    expect(agreement(gpu.subarray(1234 * 128, 1235 * 128), cpu.subarray(1234 * 128, 1235 * 128))).toBeGreaterThanOrEqual(0.98);
  });

  it('checks columns and weights while staging: the first bad element is named, a later valid call still works', async () => {
    const m = mixedCsr(41, 3000, 5003);
    const nnz = m.indptr[m.rows];
    using g = new WeightedMinHash({ dim: 5003, samples: 16, seed: 2, backend: 'cuda', devices: [0] });
    const ref = await g.hash(m);
    const at = nnz - 7;
    const badCol = { ...m, indices: m.indices.slice() };
    badCol.indices[at] = 5003;
    badCol.indices[nnz - 1] = 9999;
    await expectCoded(g.hash(badCol), RangeError, new RegExp(`matrix\\.indices\\[${at}\\]=5003 is out of range for cols=5003`));
    const badW = { ...m, values: m.values!.slice() };
    badW.values[at] = Infinity;
    await expectCoded(g.hash(badW), RangeError, new RegExp(`matrix\\.values\\[${at}\\]=Infinity in row \\d+: weights must be finite`));
    expect(firstDiff(await g.hash(m), ref)).toBe(-1);
  });

  it('prune kernel = cpu on extreme weights and extreme injected tables', async () => {
    // Weights at the ends of float range (ln w from -103 to +88), w = 1 (ln w = 0) and skipped ones;
    // rows of 1..3000 nonzeros so survivor rounds, chunk ends and split rows all occur.
    const weights = [1e-45, 1e-38, 0.9999999, 1, 1.0000001, 7, 3.4e38, -1, 0];
    const r = rng(77);
    const dim = 997;
    const rows: Array<Array<[number, number]>> = [];
    for (let i = 0; i < 40; i++) {
      const len = i % 13 === 0 ? 0 : 1 + Math.floor(r() ** 3 * 3000);
      const row: Array<[number, number]> = [];
      for (let j = 0; j < len; j++)
        row.push([Math.floor(r() * dim), r() < 0.3 ? weights[Math.floor(r() * weights.length)] : 0.01 + 20 * r()]);
      rows.push(row);
    }
    const m = csr(dim, rows);
    for (const samples of [5, 128, 131]) {
      // The CUDA engine takes the CPU engine's tables, so the two differ at most where a
      // log rounds differently in its last place.
      using c = new WeightedMinHash({ dim, samples, seed: 13, backend: 'cpu' });
      const p = c.parameters();
      using g = WeightedMinHash.fromParameters({ ...p, dim, samples, backend: 'cuda', devices: [0] });
      await expectCpuAgrees(g, c, m, `seeded, samples=${samples}`);
      // Injected tables the bound analysis does not cover (denormal and huge r, huge |ln c|, beta outside [0, 1])
      // mixed with ordinary ones: those entries take the exact path.
      for (let i = 0; i < p.rs.length; i += 7) {
        p.rs[i] = [1e-45, 1e-35, 3e38, 2][i % 4];
        p.lnCs[i + 1 < p.rs.length ? i + 1 : i] = [-3e38, 3e38, 0, -5][(i >> 3) % 4];
        p.betas[i + 2 < p.rs.length ? i + 2 : i] = [1e30, -5, 0, 1][(i >> 4) % 4];
      }
      using gi = WeightedMinHash.fromParameters({ ...p, dim, samples, backend: 'cuda', devices: [0] });
      using ci = WeightedMinHash.fromParameters({ ...p, dim, samples, backend: 'cpu' });
      await expectCpuAgrees(gi, ci, m, `injected, samples=${samples}`);
    }
  });

  it('injected tables (fromParameters): cuda = cpu on >= 99.99% of entries', async () => {
    const fx = loadFixture('float-500x517-s64');
    const m = mixedCsr(9, 777, fx.cols);
    using g = WeightedMinHash.fromParameters({ ...fx.params, dim: fx.cols, samples: fx.samples, backend: 'cuda' });
    using c = WeightedMinHash.fromParameters({ ...fx.params, dim: fx.cols, samples: fx.samples, backend: 'cpu' });
    expect(agreement(await g.hash(m), await c.hash(m))).toBeGreaterThanOrEqual(0.9999);
  });

  it("devices [0] and 'all' give byte-identical signatures; slices and streams too", async () => {
    const m = mixedCsr(31, 4001, 3000);
    using one = new WeightedMinHash({ dim: 3000, samples: 64, seed: 2, backend: 'cuda', devices: [0] });
    using all = new WeightedMinHash({ dim: 3000, samples: 64, seed: 2, backend: 'cuda', devices: 'all' });
    expect(all.devices.length).toBe(devices().gpus.length);
    const a = await one.hash(m);
    expect(await all.hash(m)).toEqual(a);
    expect(await all.hash(m, { rowStart: 3, rowEnd: 2990 })).toEqual(a.subarray(3 * 128, 2990 * 128));
    const cuts = [0, 999, 1000, 3500, 4001];
    const chunks = cuts.slice(1).map((e, i) => sliceRows(m, cuts[i], e));
    let o = 0;
    for await (const s of all.hashStream(chunks)) {
      expect(s).toEqual(a.subarray(o, o + s.length));
      o += s.length;
    }
    expect(o).toBe(a.length);
  });
});
