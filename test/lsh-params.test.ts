// LSH parameter choice: optimalParams against an exhaustive scan of the same
// objective, bounded work at every allowed samples; recallParams' promise
// (1 - (1 - s^r)^b >= recall at t + margin, computed exactly) and its
// minimality against every feasible (b, r); dedup's defaults.
import { describe, expect, it } from 'vitest';
import { candidateProbability, dedupParams, MAX_LSH_SAMPLES, MinHashLSH, optimalParams, recallCurve, recallParams } from '../lib/index.js';

// datasketch's objective, written out independently: composite Simpson with
// 256 panels over the S-curve below and above the threshold.
function simpson(f: (x: number) => number, a: number, b: number): number {
  if (b <= a) return 0;
  const n = 256;
  const h = (b - a) / n;
  let s = f(a) + f(b);
  for (let i = 1; i < n; i++) s += f(a + i * h) * (i % 2 ? 4 : 2);
  return (s * h) / 3;
}
const fp = (t: number, b: number, r: number): number => simpson((s) => 1 - Math.pow(1 - Math.pow(s, r), b), 0, t);
const fn = (t: number, b: number, r: number): number => simpson((s) => Math.pow(1 - Math.pow(s, r), b), t, 1);

function exhaustive(t: number, samples: number, w: [number, number]): { bands: number; rows: number } {
  let best = Infinity;
  let opt = { bands: 1, rows: 1 };
  for (let b = 1; b <= samples; b++) {
    for (let r = 1; r <= Math.floor(samples / b); r++) {
      const e = fp(t, b, r) * w[0] + fn(t, b, r) * w[1];
      if (e < best) {
        best = e;
        opt = { bands: b, rows: r };
      }
    }
  }
  return opt;
}

describe('optimalParams', () => {
  it('equals the exhaustive scan of every (bands, rows) for thresholds, samples and weights across the range', () => {
    const thresholds = [0.01, 0.05, 0.15, 0.3, 0.45, 0.5, 0.62, 0.7, 0.77, 0.8, 0.85, 0.9, 0.93, 0.97, 0.995];
    const samples = [1, 2, 5, 16, 31, 64, 97, 128, 256];
    const weights: [number, number][] = [
      [0.5, 0.5],
      [0.05, 0.95],
      [0.9, 0.1],
    ];
    for (const t of thresholds)
      for (const s of samples)
        for (const w of weights) expect(optimalParams(t, s, w), `t=${t} samples=${s} w=${w}`).toEqual(exhaustive(t, s, w));
  });

  it("keeps datasketch's published choices at 128 samples", () => {
    expect(optimalParams(0.5, 128)).toEqual({ bands: 25, rows: 5 });
    expect(optimalParams(0.9, 128)).toEqual({ bands: 5, rows: 25 });
  });

  it('finishes for every allowed samples, up to 2^20 (the scan would take minutes)', () => {
    for (const t of [0.05, 0.5, 0.9, 0.99]) {
      const p = optimalParams(t, MAX_LSH_SAMPLES, [0.3, 0.7]);
      expect(p.bands * p.rows).toBeLessThanOrEqual(MAX_LSH_SAMPLES);
      // The local optimum: no neighbour in b (same r) does better.
      const e = (b: number, r: number): number => fp(t, b, r) * 0.3 + fn(t, b, r) * 0.7;
      if (p.bands > 1) expect(e(p.bands - 1, p.rows)).toBeGreaterThanOrEqual(e(p.bands, p.rows));
      if ((p.bands + 1) * p.rows <= MAX_LSH_SAMPLES) expect(e(p.bands + 1, p.rows)).toBeGreaterThanOrEqual(e(p.bands, p.rows));
    }
    // MinHashLSH at the largest samples is constructed at once, not after a minute.
    expect(new MinHashLSH({ threshold: 0.8, samples: MAX_LSH_SAMPLES }).bands).toBeGreaterThan(0);
  }, 30_000);
});

describe('recallParams', () => {
  it('at 128 samples, for every threshold 0.05..0.94: a pair at t + 0.05 is a candidate with probability >= 0.95', () => {
    for (let i = 5; i <= 94; i++) {
      const t = i / 100;
      const p = recallParams(t, 128);
      expect(p.samples).toBe(128);
      expect(p.bands * p.rows).toBeLessThanOrEqual(128);
      // Above 0.9 the promise is made nearer the threshold, at (1 + t) / 2.
      expect(p.at).toBeLessThanOrEqual(t + 0.05 + 1e-12);
      // Exact, from the S-curve itself.
      expect(1 - Math.pow(1 - Math.pow(t + 0.05, p.rows), p.bands)).toBeGreaterThanOrEqual(0.95);
    }
  });

  it("the issue's cases: 0.9 finds 0.95-similar pairs, 0.7 finds 0.75-similar ones, each with probability >= 0.95", () => {
    const a = recallParams(0.9, 128);
    expect(a).toMatchObject({ bands: 6, rows: 18 });
    expect(candidateProbability(0.95, a.bands, a.rows)).toBeGreaterThanOrEqual(0.95);
    const b = recallParams(0.7, 128);
    expect(candidateProbability(0.75, b.bands, b.rows)).toBeGreaterThanOrEqual(0.95);
    // datasketch's choices miss these targets (0.80 and 0.87 at 0.95 and 0.8).
    expect(candidateProbability(0.95, 5, 25)).toBeLessThan(0.81);
  });

  it('is the feasible (b, r) with the least false-candidate integral (exhaustive check)', () => {
    for (const [t, recall] of [
      [0.3, 0.95],
      [0.5, 0.9],
      [0.8, 0.99],
      [0.9, 0.95],
      [0.95, 0.95],
    ] as const) {
      const p = recallParams(t, 128, { recall });
      const at = Math.min(t + 0.05, (1 + t) / 2);
      let best = Infinity;
      for (let b = 1; b <= 128; b++) {
        for (let r = 1; b * r <= 128; r++) if (candidateProbability(at, b, r) >= recall) best = Math.min(best, fp(t, b, r));
      }
      expect(fp(t, p.bands, p.rows)).toBeCloseTo(best, 12);
      expect(candidateProbability(at, p.bands, p.rows)).toBeGreaterThanOrEqual(recall);
    }
  });

  it('names the samples needed where the ones given cannot reach the recall', () => {
    const p = recallParams(0.2, 4);
    // One-row bands need the fewest samples: b >= log(0.05) / log(0.75) = 10.4.
    expect(p).toMatchObject({ bands: 11, rows: 1, samples: 11 });
    expect(() => new MinHashLSH({ threshold: 0.2, samples: 4, recall: 0.95 })).toThrow(/needs at least 11 samples/);
    expect(() => recallParams(0.5, 128, { recall: 1 })).toThrow(RangeError);
  });

  it('recallCurve reports the S-curve at the threshold, at t + margin and on a 0.05 grid', () => {
    const c = recallCurve(6, 18, 0.9, 0.95);
    expect(c.map((x) => x.similarity)).toEqual([0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1]);
    for (const x of c) expect(x.probability).toBeCloseTo(candidateProbability(x.similarity, 6, 18), 6);
  });

  it('recallCurve lists each similarity once, where t + margin is a grid point in binary floating point too', () => {
    // 0.8 + 0.05 is 0.8500000000000001: printed as 0.85 beside the grid's 0.85 (cusim dedup --json's lsh.recall).
    for (const t of [0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85]) {
      const { bands, rows, at } = recallParams(t, 128, { recall: 0.95 });
      const sims = recallCurve(bands, rows, t, at).map((x) => x.similarity);
      expect(new Set(sims).size, `threshold ${t}: ${sims}`).toBe(sims.length);
      expect(sims).toContain(Math.round(at * 1e6) / 1e6);
    }
  });
});

describe('dedup defaults', () => {
  it('hash only the samples the banding reads; more than 128 where 128 cannot reach the recall', () => {
    expect(dedupParams()).toEqual({ bands: 6, rows: 18, samples: 108 });
    expect(dedupParams({ samples: 128 })).toEqual({ bands: 6, rows: 18, samples: 128 });
    // At 0.06 one-row bands need log(1e-4) / log(0.94) = 148.9 -> 149 samples.
    const high = dedupParams({ threshold: 0.05, margin: 0.01, recall: 0.9999 });
    expect(high).toEqual({ bands: 149, rows: 1, samples: 149 });
    expect(candidateProbability(0.06, high.bands, high.rows)).toBeGreaterThanOrEqual(0.9999);
    expect(() => dedupParams({ threshold: 0.05, margin: 0.01, recall: 0.9999, samples: 128 })).toThrow(/needs at least 149 samples/);
    // weights keep datasketch's choice.
    expect(dedupParams({ weights: [0.5, 0.5] })).toEqual({ bands: 5, rows: 25, samples: 128 });
  });
});
