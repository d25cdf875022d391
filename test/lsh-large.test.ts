// LSH at table sizes that take the parallel paths (65,536 rows and more: the
// bucketed sort of (key, row) pairs, band pairs cut at runs of equal keys,
// duplicate classes and verification spread over the pool), against oracles
// that share none of that code, at several pool sizes.
import { afterAll, describe, expect, it } from 'vitest';
import { dedupRecords, MinHashLSH, threads } from '../lib/index.js';
import { components, randInt, rng } from './helpers.js';

const NONE = 0xffffffff;
afterAll(() => threads(0));

describe('LSH on tables of 65,536 rows and more (cpu)', () => {
  it(
    'candidatePairs equals bucketing by band sample values, with heavy buckets and copies, at 1, 3 and 8 threads',
    { timeout: 600_000 },
    async () => {
      // Width-2 signatures whose samples come from a small alphabet, so that
      // bands collide often (runs of every length, one bucket of 500 rows).
      const S = 6;
      const bands = 3;
      const rows = 2;
      for (const n of [65_536, 70_001]) {
        const r = rng(n);
        const sig = new Uint32Array(n * S * 2);
        for (let i = 0; i < n; i++) {
          const copyOf = i > 0 && r() < 0.05 ? randInt(r, i) : -1;
          for (let s = 0; s < S; s++) {
            const k = copyOf >= 0 ? sig[copyOf * 2 * S + 2 * s] : randInt(r, 600);
            sig[i * 2 * S + 2 * s] = k;
            sig[i * 2 * S + 2 * s + 1] = copyOf >= 0 ? sig[copyOf * 2 * S + 2 * s + 1] : 7;
          }
          if (i % 131 === 0) sig.fill(5, i * 2 * S, i * 2 * S + 2 * rows); // band 0 shared by n / 131 rows
          if (i % 997 === 1) sig.fill(NONE, i * 2 * S, (i + 1) * 2 * S); // empty rows match nothing
        }
        // Shuffled ids, so that id order is not row order.
        const ids = Uint32Array.from({ length: n }, (_, i) => i);
        for (let i = n - 1; i > 0; i--) {
          const j = randInt(r, i + 1);
          [ids[i], ids[j]] = [ids[j], ids[i]];
        }
        const want = new Set<number>();
        for (let b = 0; b < bands; b++) {
          const buckets = new Map<string, number[]>();
          for (let i = 0; i < n; i++) {
            const band = sig.subarray(i * 2 * S + b * rows * 2, i * 2 * S + (b + 1) * rows * 2);
            if (sig.subarray(i * 2 * S, (i + 1) * 2 * S).every((x) => x === NONE)) continue;
            const key = band.join(',');
            let l = buckets.get(key);
            if (!l) buckets.set(key, (l = []));
            l.push(ids[i]);
          }
          for (const l of buckets.values())
            for (let x = 0; x < l.length; x++)
              for (let y = x + 1; y < l.length; y++) want.add(Math.min(l[x], l[y]) * n + Math.max(l[x], l[y]));
        }
        const expected = Float64Array.from(want).sort();
        expect(expected.length).toBeGreaterThan((n / 131) ** 2 / 2);
        for (const t of [1, 3, 8]) {
          threads(t);
          const lsh = new MinHashLSH({ bands, rows, samples: S, backend: 'cpu' });
          lsh.insert(ids, sig);
          const got = await lsh.candidatePairs();
          const flat = Float64Array.from(got.left, (l, k) => l * n + got.right[k]);
          expect(flat.length).toBe(expected.length);
          expect(flat).toEqual(expected); // ascending, as candidatePairs returns them
        }
      }
    },
  );

  it(
    'dedupRecords groups equal components of every pair at Jaccard >= t (inverted-index oracle), at 1, 3 and 8 threads',
    { timeout: 600_000 },
    async () => {
      // 70,000 token sets: unrelated rows, near-copies of some (two tokens of
      // 40 swapped: Jaccard 0.9 to the original, 0.82 or more between copies,
      // where banding for t = 0.5 misses no pair), 2,000 exact copies of one row
      // (one class), and rows sharing half their tokens with another (Jaccard
      // 1/3, below t).
      const n = 70_000;
      const r = rng(77);
      const sets: number[][] = [];
      const originals: number[] = [];
      let fresh = 1;
      const novel = (k: number): number[] => Array.from({ length: k }, () => fresh++);
      const heavy = novel(40);
      for (let i = 0; i < n; i++) {
        const u = r();
        const prev = originals.length ? sets[originals[randInt(r, originals.length)]] : undefined;
        if (i % 35 === 0) sets.push(heavy.slice());
        else if (prev && u < 0.15) {
          const s = prev.slice();
          s[randInt(r, 20)] = fresh++;
          s[20 + randInt(r, 20)] = fresh++;
          sets.push(s);
        } else if (prev && u < 0.2) sets.push([...prev.slice(0, 20), ...novel(20)]);
        else {
          originals.push(i);
          sets.push(novel(40));
        }
      }
      const indptr = new Uint32Array(n + 1);
      for (let i = 0; i < n; i++) indptr[i + 1] = indptr[i] + sets[i].length;
      const indices = Uint32Array.from(sets.flat());
      const t = 0.5;
      // Oracle: exact copies linked to their first row; among distinct rows,
      // pairs sharing a token (by an inverted index), kept at J >= t.
      const edges: Array<[number, number]> = [];
      const firstOf = new Map<string, number>();
      const distinct: number[] = [];
      sets.forEach((s, i) => {
        const key = s.join(',');
        const f = firstOf.get(key);
        if (f === undefined) {
          firstOf.set(key, i);
          distinct.push(i);
        } else edges.push([f, i]);
      });
      const byToken = new Map<number, number[]>();
      for (const i of distinct)
        for (const x of sets[i]) {
          let l = byToken.get(x);
          if (!l) byToken.set(x, (l = []));
          l.push(i);
        }
      const seen = new Set<number>();
      for (const i of distinct) {
        const mine = new Set(sets[i]);
        for (const x of sets[i]) {
          for (const j of byToken.get(x)!) {
            if (j <= i || seen.has(j)) continue;
            seen.add(j);
            const both = sets[j].filter((y) => mine.has(y)).length;
            if (both / (mine.size + sets[j].length - both) >= t) edges.push([i, j]);
          }
        }
        seen.clear();
      }
      const { group: want, count: groups } = components(n, edges);
      expect(groups).toBeGreaterThan(1000);
      const blocks = (): Array<{ rows: { rows: number; cols: number; indptr: Uint32Array; indices: Uint32Array } }> => {
        const out = [];
        for (let b = 0; b < n; b += 30_000) {
          const e = Math.min(n, b + 30_000);
          out.push({
            rows: {
              rows: e - b,
              cols: 2 ** 32,
              indptr: Uint32Array.from(indptr.subarray(b, e + 1), (x) => x - indptr[b]),
              indices: indices.slice(indptr[b], indptr[e]),
            },
          });
        }
        return out;
      };
      for (const th of [1, 3, 8]) {
        threads(th);
        const got = await dedupRecords(blocks(), { method: 'classic', threshold: t, backend: 'cpu' });
        expect(got.count).toBe(groups);
        expect(got.group).toEqual(want);
      }
    },
  );
});
