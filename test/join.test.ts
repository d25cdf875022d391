import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { similarityJoin, similarityJoinStream, threads, type CsrMatrix, type JoinMeasure, type JoinResult } from '../lib/index.js';
import { native } from '../lib/addon.js';
import { describeGpu, expectInvalid, randInt, rng, zipf } from './helpers.js';

const RATIOS = [0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0];
const OVERLAPS = [1, 2, 3, 5, 8];
const MEASURES: JoinMeasure[] = ['jaccard', 'cosine', 'dice', 'overlap'];
const thresholdsFor = (m: JoinMeasure) => (m === 'overlap' ? OVERLAPS : RATIOS);

// ---- inputs --------------------------------------------------------------------

function csrFromRows(rows: number[][], cols: number): CsrMatrix {
  const indptr = new Uint32Array(rows.length + 1);
  const idx: number[] = [];
  rows.forEach((r, i) => {
    idx.push(...r);
    indptr[i + 1] = idx.length;
  });
  return { rows: rows.length, cols, indptr, indices: Uint32Array.from(idx) };
}

/** Unsorted rows with repeated tokens, so the engine's dedup is exercised. */
function randomRows(seed: number, n: number, cols: number, maxLen: number, skew: boolean): number[][] {
  const r = rng(seed);
  const rows: number[][] = [];
  for (let i = 0; i < n; i++) {
    const len = randInt(r, maxLen + 1);
    const row: number[] = [];
    for (let k = 0; k < len; k++) row.push(skew ? zipf(r, cols) : randInt(r, cols));
    if (row.length > 2 && r() < 0.3) row.push(row[0]);
    // Some near copies of earlier rows, so high thresholds have pairs too.
    if (i > 0 && r() < 0.15) {
      const src = rows[randInt(r, i)];
      rows.push([...src.slice(0, Math.max(0, src.length - randInt(r, 2))), ...(r() < 0.5 ? [randInt(r, cols)] : [])]);
    } else rows.push(row);
  }
  return rows;
}

const summaries = readFileSync(new URL('./fixtures/npm-summaries-2k.tsv', import.meta.url), 'utf8')
  .split('\n')
  .filter((l) => l.length > 0)
  .map((l) => (l.split('\t')[1] ?? '').toLowerCase());

/** Character q-gram sets with ids in order of first appearance. */
function qgramRows(texts: string[], q: number): { rows: number[][]; cols: number } {
  const ids = new Map<string, number>();
  const rows = texts.map((s) => {
    const row: number[] = [];
    for (let i = 0; i + q <= s.length; i++) {
      const g = s.slice(i, i + q);
      let id = ids.get(g);
      if (id === undefined) ids.set(g, (id = ids.size));
      row.push(id);
    }
    return row;
  });
  return { rows, cols: ids.size };
}

// ---- oracle ---------------------------------------------------------------------

function sets(rows: number[][]): Int32Array[] {
  return rows.map((r) => Int32Array.from(new Set(r)).sort());
}

function overlapOf(x: Int32Array, y: Int32Array): number {
  let i = 0;
  let j = 0;
  let o = 0;
  while (i < x.length && j < y.length) {
    if (x[i] === y[j]) {
      o++;
      i++;
      j++;
    } else if (x[i] < y[j]) i++;
    else j++;
  }
  return o;
}

function simOf(m: JoinMeasure, a: number, b: number, o: number): number {
  if (m === 'jaccard') return o / (a + b - o);
  if (m === 'dice') return (2 * o) / (a + b);
  if (m === 'cosine') return o / Math.sqrt(a * b);
  return o;
}

/** Every pair with a nonzero overlap, computed once per data set. */
interface Pairs {
  l: number[];
  r: number[];
  a: number[];
  b: number[];
  o: number[];
}
function allOverlaps(left: number[][], right?: number[][]): Pairs {
  const X = sets(left);
  const Y = right ? sets(right) : X;
  const p: Pairs = { l: [], r: [], a: [], b: [], o: [] };
  for (let i = 0; i < X.length; i++) {
    for (let j = right ? 0 : i + 1; j < Y.length; j++) {
      const o = overlapOf(X[i], Y[j]);
      if (o === 0) continue;
      p.l.push(i);
      p.r.push(j);
      p.a.push(X[i].length);
      p.b.push(Y[j].length);
      p.o.push(o);
    }
  }
  return p;
}

function bruteForce(p: Pairs, m: JoinMeasure, t: number) {
  const out = { left: [] as number[], right: [] as number[], overlap: [] as number[], similarity: [] as number[] };
  for (let k = 0; k < p.l.length; k++) {
    const s = simOf(m, p.a[k], p.b[k], p.o[k]);
    if (s >= t) {
      out.left.push(p.l[k]);
      out.right.push(p.r[k]);
      out.overlap.push(p.o[k]);
      out.similarity.push(Math.fround(s));
    }
  }
  return out;
}

function expectEqual(got: JoinResult, want: ReturnType<typeof bruteForce>, what: string) {
  expect(got.left.length, `${what}: pair count`).toBe(want.left.length);
  expect(Array.from(got.left), what).toEqual(want.left);
  expect(Array.from(got.right), what).toEqual(want.right);
  expect(Array.from(got.overlap), what).toEqual(want.overlap);
  expect(Array.from(got.similarity), what).toEqual(want.similarity);
}

function expectSame(a: JoinResult, b: JoinResult, what: string) {
  expect(b.left, what).toEqual(a.left);
  expect(b.right, what).toEqual(a.right);
  expect(b.overlap, what).toEqual(a.overlap);
  expect(b.similarity, what).toEqual(a.similarity);
}

const text2 = qgramRows(summaries.slice(0, 700), 2);
const text3 = qgramRows(summaries.slice(0, 700), 3);
const DATA: { name: string; rows: number[][]; cols: number }[] = [
  { name: 'random sets', rows: randomRows(1, 400, 40, 12, false), cols: 40 },
  { name: 'zipf tokens', rows: randomRows(2, 500, 3000, 30, true), cols: 3000 },
  { name: 'summaries 2-grams', rows: text2.rows, cols: text2.cols },
  { name: 'summaries 3-grams', rows: text3.rows, cols: text3.cols },
];
const oracle = new Map(DATA.map((d) => [d.name, allOverlaps(d.rows)]));

/**
 * n rows of token ids spread over the whole 2^32 space (up to maxLen each);
 * a `copyRate` share are near copies of an earlier row (a few tokens dropped,
 * maybe one added), and 30% of those repeat every token up to maxRepeat times.
 */
function sparseNearCopies(seed: number, n: number, copyRate: number, maxLen: number, maxRepeat: number): number[][] {
  const r = rng(seed);
  const rows: number[][] = [];
  for (let i = 0; i < n; i++) {
    if (i > 0 && r() < copyRate) {
      const src = rows[randInt(r, i)];
      const copy = src.slice(0, src.length - randInt(r, 3));
      if (r() < 0.5) copy.push(randInt(r, 0xffffffff));
      rows.push(r() < 0.3 ? copy.flatMap((t) => Array(1 + randInt(r, maxRepeat)).fill(t)).reverse() : copy);
    } else {
      rows.push(Array.from({ length: randInt(r, maxLen) }, () => randInt(r, 0xffffffff)));
    }
  }
  return rows;
}

// ---- CPU ------------------------------------------------------------------------------

describe('similarityJoin (cpu) equals brute force', () => {
  for (const d of DATA) {
    for (const algorithm of ['ppjoin', 'allpairs'] as const) {
      it(`${d.name}, ${algorithm}: every measure at every threshold`, async () => {
        const m = csrFromRows(d.rows, d.cols);
        for (const measure of MEASURES) {
          for (const threshold of thresholdsFor(measure)) {
            const got = await similarityJoin(m, { threshold, measure, backend: 'cpu', algorithm });
            expectEqual(got, bruteForce(oracle.get(d.name)!, measure, threshold), `${measure} t=${threshold}`);
            expect(got.candidates).toBeGreaterThanOrEqual(got.left.length);
          }
        }
      });
    }
  }

  it('R–S join: left indexes sets, right indexes against', async () => {
    const L = randomRows(5, 300, 50, 10, true);
    const R = randomRows(6, 250, 50, 10, true);
    const p = allOverlaps(L, R);
    for (const measure of MEASURES) {
      for (const threshold of thresholdsFor(measure)) {
        const got = await similarityJoin(csrFromRows(L, 50), { threshold, measure, against: csrFromRows(R, 50), backend: 'cpu' });
        expectEqual(got, bruteForce(p, measure, threshold), `R–S ${measure} t=${threshold}`);
      }
    }
  });

  it('R–S join with disjoint vocabularies finds nothing; with itself finds every non-empty row', async () => {
    const L = randomRows(7, 100, 30, 8, false);
    const R = randomRows(8, 100, 30, 8, false).map((r) => r.map((t) => t + 30));
    const res = await similarityJoin(csrFromRows(L, 60), { threshold: 0.5, against: csrFromRows(R, 60), backend: 'cpu' });
    expect(res.left.length).toBe(0);
    const self = await similarityJoin(csrFromRows(L, 60), { threshold: 1, against: csrFromRows(L, 60), backend: 'cpu' });
    const diag = self.left.filter((l, i) => l === self.right[i]).length;
    expect(diag).toBe(sets(L).filter((s) => s.length > 0).length);
  });

  it('300,000 ragged rows (empty, repeats, over 32 tokens): Jaccard 1 equals grouping identical sets', async () => {
    // Enough rows that the rows' size order is counted and scattered in
    // several parallel blocks, with rows on both sides of the short-row sort.
    const rows = randomRows(7, 300_000, 100_000, 40, true);
    const groups = new Map<string, number[]>();
    sets(rows).forEach((s, i) => {
      if (s.length === 0) return;
      const key = s.join(',');
      const g = groups.get(key);
      if (g) g.push(i);
      else groups.set(key, [i]);
    });
    const p: Pairs = { l: [], r: [], a: [], b: [], o: [] };
    for (const [key, g] of groups) {
      const size = key.split(',').length;
      for (let x = 0; x < g.length; x++)
        for (let y = x + 1; y < g.length; y++) {
          p.l.push(g[x]);
          p.r.push(g[y]);
          p.a.push(size);
          p.b.push(size);
          p.o.push(size);
        }
    }
    const order = p.l.map((_, k) => k).sort((x, y) => p.l[x] - p.l[y] || p.r[x] - p.r[y]);
    const sorted: Pairs = { l: [], r: [], a: [], b: [], o: [] };
    for (const k of order) for (const f of ['l', 'r', 'a', 'b', 'o'] as const) sorted[f].push(p[f][k]);
    const got = await similarityJoin(csrFromRows(rows, 100_000), { threshold: 1, backend: 'cpu' });
    expect(got.left.length).toBeGreaterThan(1000);
    expectEqual(got, bruteForce(sorted, 'jaccard', 1), 'identical sets');
  });

  it('ids spread over a 2^32 id space, more than 2^20 distinct tokens and heavy repeats: equal to an inverted-index oracle', async () => {
    // Few tokens over a huge `cols` take the sorted-vocabulary path; over 2^20
    // distinct tokens, rows are sorted by comparison instead of by bitmap.
    // Near copies (some with every token repeated) give the join pairs to find.
    const n = 30_000;
    const rows = sparseNearCopies(31, n, 0.2, 110, 4);
    // Oracle: overlaps of the pairs that share a token, through an inverted index.
    const S = sets(rows);
    const postings = new Map<number, number[]>();
    S.forEach((s, i) => s.forEach((t) => postings.set(t, [...(postings.get(t) ?? []), i])));
    expect(postings.size).toBeGreaterThan(1 << 20);
    const shared = new Map<number, number>();
    for (const list of postings.values())
      for (let a = 0; a < list.length; a++)
        for (let b = a + 1; b < list.length; b++) shared.set(list[a] * n + list[b], (shared.get(list[a] * n + list[b]) ?? 0) + 1);
    const keys = [...shared.keys()].sort((x, y) => x - y);
    const p: Pairs = { l: [], r: [], a: [], b: [], o: [] };
    for (const k of keys) {
      const [i, j] = [Math.floor(k / n), k % n];
      p.l.push(i);
      p.r.push(j);
      p.a.push(S[i].length);
      p.b.push(S[j].length);
      p.o.push(shared.get(k)!);
    }
    const m = csrFromRows(rows, 0xffffffff);
    for (const threshold of [0.5, 0.9, 1]) {
      const got = await similarityJoin(m, { threshold, backend: 'cpu' });
      expectEqual(got, bruteForce(p, 'jaccard', threshold), `sparse jaccard t=${threshold}`);
      if (threshold === 0.5) expect(got.left.length).toBeGreaterThan(1000);
    }
    // R–S over the same sparse ids: the first half against the second.
    const half = n / 2;
    const rs = await similarityJoin(csrFromRows(rows.slice(0, half), 0xffffffff), {
      threshold: 0.7,
      measure: 'cosine',
      against: csrFromRows(rows.slice(half), 0xffffffff),
      backend: 'cpu',
    });
    const cross: Pairs = { l: [], r: [], a: [], b: [], o: [] };
    p.l.forEach((i, k) => {
      if (i < half && p.r[k] >= half) {
        cross.l.push(i);
        cross.r.push(p.r[k] - half);
        cross.a.push(p.a[k]);
        cross.b.push(p.b[k]);
        cross.o.push(p.o[k]);
      }
    });
    const order = cross.l.map((_, k) => k).sort((x, y) => cross.l[x] - cross.l[y] || cross.r[x] - cross.r[y]);
    const sorted: Pairs = { l: [], r: [], a: [], b: [], o: [] };
    for (const k of order) for (const f of ['l', 'r', 'a', 'b', 'o'] as const) sorted[f].push(cross[f][k]);
    expectEqual(rs, bruteForce(sorted, 'cosine', 0.7), 'sparse R–S cosine t=0.7');
  });

  it('empty sets never match, even each other or at overlap threshold 1', async () => {
    const rows = [[], [3], [], [3, 3], [], [1, 2], [2, 1]];
    const m = csrFromRows(rows, 4);
    for (const measure of MEASURES) {
      const res = await similarityJoin(m, { threshold: 1, measure, backend: 'cpu' });
      expect(Array.from(res.left)).toEqual([1, 5]);
      expect(Array.from(res.right)).toEqual([3, 6]);
      expect(Array.from(res.overlap)).toEqual([1, 2]);
    }
    const none = await similarityJoin(csrFromRows([[], [], []], 1), { threshold: 0.5, backend: 'cpu' });
    expect(none.left.length).toBe(0);
  });

  it('one-token sets: pairs exactly where the token is shared', async () => {
    const r = rng(9);
    const rows = Array.from({ length: 300 }, () => [randInt(r, 20)]);
    const res = await similarityJoin(csrFromRows(rows, 20), { threshold: 1, backend: 'cpu' });
    expectEqual(res, bruteForce(allOverlaps(rows), 'jaccard', 1), 'one-token');
    expect(res.left.length).toBeGreaterThan(1000);
  });

  it('a join spanning several chunks comes back as one (left, right)-sorted result', async () => {
    // 12,000 one- and two-token rows: more probes than one CPU chunk holds. The
    // oracle groups rows by their exact token set (Jaccard 1 = equal sets).
    const r = rng(21);
    const rows = Array.from({ length: 12_000 }, () => (r() < 0.5 ? [randInt(r, 3000)] : [randInt(r, 40), 40 + randInt(r, 40)]));
    const groups = new Map<string, number[]>();
    rows.forEach((row, i) => {
      const k = [...new Set(row)].sort((a, b) => a - b).join(',');
      groups.set(k, [...(groups.get(k) ?? []), i]);
    });
    const want: number[] = [];
    for (const g of groups.values()) for (let i = 0; i < g.length; i++) for (let j = i + 1; j < g.length; j++) want.push(g[i] * 1e5 + g[j]);
    want.sort((a, b) => a - b);
    let chunks = 0;
    for await (const _ of similarityJoinStream(csrFromRows(rows, 3000), { threshold: 1, backend: 'cpu' })) chunks++;
    expect(chunks).toBeGreaterThan(1);
    const got = await similarityJoin(csrFromRows(rows, 3000), { threshold: 1, backend: 'cpu' });
    expect(Array.from(got.left, (l, i) => l * 1e5 + got.right[i])).toEqual(want);
    expect(got.overlap.every((o, i) => o === (rows[got.left[i]][0] < 40 && rows[got.left[i]].length === 2 ? 2 : 1))).toBe(true);
  });

  it('all sets identical: the quadratic output arrives through the stream, each pair once', async () => {
    const n = 1500;
    const rows = Array.from({ length: n }, () => [4, 9, 1, 7, 2]);
    const seen = new Uint8Array(n * n);
    let total = 0;
    let chunks = 0;
    for await (const c of similarityJoinStream(csrFromRows(rows, 10), { threshold: 0.9, backend: 'cpu' })) {
      chunks++;
      for (let k = 0; k < c.left.length; k++) {
        // Plain checks: a million expect() calls would dominate the run time.
        const key = c.left[k] * n + c.right[k];
        const sorted = k === 0 || c.left[k - 1] < c.left[k] || (c.left[k - 1] === c.left[k] && c.right[k - 1] < c.right[k]);
        if (c.left[k] >= c.right[k] || !sorted || seen[key]) throw new Error(`bad pair ${c.left[k]},${c.right[k]} at ${k}`);
        seen[key] = 1;
        if (c.overlap[k] !== 5 || c.similarity[k] !== 1) throw new Error('identical sets must overlap fully');
      }
      total += c.left.length;
    }
    expect(total).toBe((n * (n - 1)) / 2);
    expect(chunks).toBeGreaterThan(0);
  });

  it('blockSize (GPU blocking) does not change CPU results; stream chunks union to the batch result', async () => {
    const d = DATA[1];
    const m = csrFromRows(d.rows, d.cols);
    const a = await similarityJoin(m, { threshold: 0.5, backend: 'cpu' });
    const b = await similarityJoin(m, { threshold: 0.5, backend: 'cpu', blockSize: 3 });
    expectSame(a, b, 'blockSize 3');
    const keys: number[] = [];
    for await (const c of similarityJoinStream(m, { threshold: 0.5, backend: 'cpu' })) {
      for (let k = 0; k < c.left.length; k++) keys.push(c.left[k] * 1e6 + c.right[k]);
    }
    keys.sort((x, y) => x - y);
    expect(keys).toEqual(Array.from(a.left, (l, i) => l * 1e6 + a.right[i]));
  });

  it('every thread count gives the same pairs and similarity bits: empty sets, one huge set, all-identical sets, zipf rows', async () => {
    const r = rng(29);
    const rows: number[][] = [];
    // Enough rows that each parallel host stage splits them over several slices.
    for (let i = 0; i < 3000; i++) rows.push(i % 11 === 0 ? [] : Array.from({ length: 1 + randInt(r, 25) }, () => zipf(r, 5000)));
    for (let i = 0; i < 200; i++) rows.push([17, 3, 99, 3, 4000]); // all identical (one repeat inside)
    rows.push(Array.from({ length: 70000 }, (_, k) => (k * 7919) % 5000)); // one huge set: every token, repeated
    for (let i = 0; i < 300; i++) rows.push(rows[randInt(r, rows.length)].slice(0, 30)); // near copies, some of the huge one
    const m = csrFromRows(rows, 5000);
    const p = allOverlaps(rows);
    const before = threads();
    try {
      for (const [measure, threshold] of [
        ['jaccard', 0.5],
        ['cosine', 0.8],
        ['overlap', 3],
      ] as const) {
        const want = bruteForce(p, measure, threshold);
        for (let t = 1; t <= 4; t++) {
          threads(t);
          const got = await similarityJoin(m, { threshold, measure, backend: 'cpu' });
          expectEqual(got, want, `${measure} t=${threshold}, ${t} threads`);
        }
      }
    } finally {
      threads(before);
    }
  });

  it('past 2^17 rows (the prefix index built in blocks) every thread count equals one thread', async () => {
    const before = threads();
    try {
      const big = csrFromRows(randomRows(30, 140_000, 50_000, 16, false), 50_000);
      threads(1);
      const one = await similarityJoin(big, { threshold: 0.8, backend: 'cpu' });
      expect(one.left.length).toBeGreaterThan(1000);
      for (let t = 2; t <= 4; t++) {
        threads(t);
        expectSame(one, await similarityJoin(big, { threshold: 0.8, backend: 'cpu' }), `140,000 rows, ${t} threads`);
      }
    } finally {
      threads(before);
    }
  });

  it('only empty sets, and no sets at all, give no pairs on every thread count', async () => {
    const before = threads();
    try {
      for (let t = 1; t <= 3; t++) {
        threads(t);
        for (const m of [
          csrFromRows(
            Array.from({ length: 70000 }, () => []),
            10,
          ),
          csrFromRows([], 10),
        ]) {
          const got = await similarityJoin(m, { threshold: 1, measure: 'overlap', backend: 'cpu' });
          expect(got.left.length).toBe(0);
          expect(got.candidates).toBe(0);
        }
      }
    } finally {
      threads(before);
    }
  });

  it('stageMs names every host stage with a non-negative time', async () => {
    const d = DATA[1];
    const got = await similarityJoin(csrFromRows(d.rows, d.cols), { threshold: 0.5, backend: 'cpu' });
    const stages = ['normalize', 'prepare', 'build', 'plan', 'transfer', 'kernel', 'verify', 'output'];
    expect(Object.keys(got.stageMs).sort()).toEqual([...stages].sort());
    for (const s of stages) expect(got.stageMs[s as keyof typeof got.stageMs]).toBeGreaterThanOrEqual(0);
  });

  it('native boundary: a fractional measure is rejected, not truncated to another measure', () => {
    const j = new (native().JoinHandle)();
    const sets = csrFromRows(
      [
        [0, 1],
        [1, 2],
      ],
      3,
    );
    expectInvalid(
      () => j.open(sets, undefined, { measure: 2.5, threshold: 0.5 } as never),
      RangeError,
      /options\.measure must be an integer 0\.\.3/,
    );
    expectInvalid(() => j.open(sets, undefined, { measure: NaN, threshold: 0.5 } as never), RangeError, /options\.measure must be finite/);
    j.dispose();
  });

  it('rejects bad input with coded errors naming the argument', async () => {
    const m = csrFromRows(
      [
        [0, 1],
        [1, 2],
      ],
      3,
    );
    const bad: [unknown, unknown, RegExp, typeof TypeError | typeof RangeError][] = [
      [m, { threshold: 0 }, /options\.threshold/, RangeError],
      [m, { threshold: 1.5 }, /options\.threshold/, RangeError],
      [m, { threshold: -0.2, measure: 'cosine' }, /options\.threshold/, RangeError],
      [m, { threshold: NaN, measure: 'dice' }, /options\.threshold/, RangeError],
      [m, { threshold: 0, measure: 'overlap' }, /options\.threshold/, RangeError],
      [m, { threshold: 1.5, measure: 'overlap' }, /options\.threshold/, RangeError],
      [m, { threshold: '0.5' }, /options\.threshold/, TypeError],
      [m, { threshold: 0.5, measure: 'hamming' }, /options\.measure/, TypeError],
      [m, { threshold: 0.5, algorithm: 'naive' }, /options\.algorithm/, TypeError],
      [m, { threshold: 0.5, blockSize: 0 }, /options\.blockSize/, RangeError],
      [m, { threshold: 0.5, tuning: { wideSlots: 1 } }, /options\.tuning\.wideSlots must be a boolean/, TypeError],
      [
        m,
        { threshold: 0.5, tuning: { chunkPairs: 4 } },
        /options\.tuning\.chunkPairs is not a tuning option \(known: maxChunkPairs, wideSlots\)/,
        TypeError,
      ],
      [m, { threshold: 0.5, against: { rows: 1 } }, /options\.against/, TypeError],
      [csrFromRows([[0, 5]], 3), { threshold: 0.5, backend: 'cpu' }, /sets\.indices\[1\]=5 is out of range/, RangeError],
      [m, { threshold: 0.5, backend: 'cpu', against: csrFromRows([[9]], 4) }, /against\.indices\[0\]=9 is out of range/, RangeError],
      [null, { threshold: 0.5 }, /sets must be a CsrMatrix/, TypeError],
      [m, undefined, /options must be an object/, TypeError],
    ];
    for (const [s, o, msg, cls] of bad) {
      const p = similarityJoin(s as CsrMatrix, o as never);
      await expect(p).rejects.toThrow(msg);
      await expect(p).rejects.toBeInstanceOf(cls);
      await expect(p).rejects.toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT' });
    }
  });

  it('an aborted signal rejects with AbortError', async () => {
    const ac = new AbortController();
    ac.abort();
    await expect(similarityJoin(csrFromRows([[1]], 2), { threshold: 0.5, signal: ac.signal })).rejects.toMatchObject({ code: 'ABORT_ERR' });
  });
});

// ---- GPU ------------------------------------------------------------------------------

describeGpu('similarityJoin', () => {
  it('cuda equals cpu exactly on every data set, measure and threshold, with blocks of several sizes', async () => {
    for (const d of DATA) {
      const m = csrFromRows(d.rows, d.cols);
      for (const measure of MEASURES) {
        for (const threshold of thresholdsFor(measure)) {
          const cpu = await similarityJoin(m, { threshold, measure, backend: 'cpu' });
          for (const blockSize of [undefined, 7, 100]) {
            const gpu = await similarityJoin(m, { threshold, measure, backend: 'cuda', blockSize });
            expect(gpu.backend).toBe('cuda');
            expectSame(cpu, gpu, `${d.name} ${measure} t=${threshold} block=${blockSize}`);
          }
        }
      }
    }
    // ~100 s on a 32-core GPU host while the other test files run beside it.
  }, 300_000);

  it('cuda equals brute force on the 2,000-summary 2-gram set (sizes not multiples of any block)', async () => {
    const t2 = qgramRows(summaries, 2);
    const m = csrFromRows(t2.rows, t2.cols);
    const p = allOverlaps(t2.rows);
    for (const threshold of [0.5, 0.8]) {
      const gpu = await similarityJoin(m, { threshold, backend: 'cuda', blockSize: 333 });
      expectEqual(gpu, bruteForce(p, 'jaccard', threshold), `2k t=${threshold}`);
    }
  });

  it('cuda equals cpu on rows without repeated tokens and on the same rows with their repeats', async () => {
    const t3 = qgramRows(summaries, 3);
    const distinct = t3.rows.map((row) => [...new Set(row)]);
    expect(distinct.some((row, i) => row.length < t3.rows[i].length)).toBe(true);
    for (const rows of [distinct, t3.rows]) {
      const m = csrFromRows(rows, t3.cols);
      for (const measure of MEASURES) {
        const threshold = measure === 'overlap' ? 12 : 0.6;
        const cpu = await similarityJoin(m, { threshold, measure, backend: 'cpu' });
        expect(cpu.left.length).toBeGreaterThan(100);
        for (const blockSize of [undefined, 250]) {
          expectSame(cpu, await similarityJoin(m, { threshold, measure, backend: 'cuda', blockSize }), `${measure} block=${blockSize}`);
        }
      }
    }
  });

  it('cuda R–S joins, empty rows, a single row and disjoint vocabularies equal cpu', async () => {
    const L = randomRows(5, 300, 50, 10, true);
    const R = randomRows(6, 257, 50, 10, true);
    for (const measure of MEASURES) {
      for (const threshold of thresholdsFor(measure)) {
        const o = { threshold, measure, against: csrFromRows(R, 50) };
        const cpu = await similarityJoin(csrFromRows(L, 50), { ...o, backend: 'cpu' });
        for (const blockSize of [undefined, 5]) {
          expectSame(cpu, await similarityJoin(csrFromRows(L, 50), { ...o, backend: 'cuda', blockSize }), `R–S ${measure} ${threshold}`);
        }
      }
    }
    const disjoint = await similarityJoin(csrFromRows(L, 100), {
      threshold: 0.5,
      against: csrFromRows(
        R.map((r) => r.map((t) => t + 50)),
        100,
      ),
      backend: 'cuda',
    });
    expect(disjoint.left.length).toBe(0);
    const single = await similarityJoin(csrFromRows([[1, 2, 3]], 4), { threshold: 0.5, backend: 'cuda' });
    expect(single.left.length).toBe(0);
    const empties = csrFromRows([[], [3], [], [3, 3], [], [1, 2], [2, 1]], 4);
    expectSame(
      await similarityJoin(empties, { threshold: 1, backend: 'cpu' }),
      await similarityJoin(empties, { threshold: 1, backend: 'cuda', blockSize: 2 }),
      'empties',
    );
  });

  it('cuda equals cpu on one-token sets and on a 12,000-row join that spans many batches', async () => {
    const r = rng(31);
    const one = Array.from({ length: 700 }, () => [randInt(r, 25)]);
    const many = Array.from({ length: 12_000 }, () =>
      r() < 0.5 ? [randInt(r, 3000)] : [randInt(r, 40), 40 + randInt(r, 40), randInt(r, 3000)],
    );
    for (const [rows, cols] of [
      [one, 25],
      [many, 3000],
    ] as const) {
      for (const measure of MEASURES) {
        for (const threshold of measure === 'overlap' ? [1, 2] : [0.5, 1]) {
          const m = csrFromRows(rows as number[][], cols);
          const cpu = await similarityJoin(m, { threshold, measure, backend: 'cpu' });
          for (const blockSize of [undefined, 1000]) {
            expectSame(
              cpu,
              await similarityJoin(m, { threshold, measure, backend: 'cuda', blockSize }),
              `${rows.length} ${measure} ${threshold}`,
            );
          }
        }
      }
    }
  });

  it('cuda with 16-byte candidate slots (forced, and where sets exceed the 8-byte slots fields) equals cpu', async () => {
    const t3 = qgramRows(summaries, 3);
    // A 1,500-token set: too large for the 8-byte slots, small enough for
    // sizes in the postings.
    const cols = Math.max(t3.cols, 1500);
    const wide = [...t3.rows, Array.from({ length: 1500 }, (_, i) => i), Array.from({ length: 1400 }, (_, i) => i)];
    for (const [rows, force] of [
      [t3.rows, true],
      [wide, false],
    ] as const) {
      const m = csrFromRows(rows as number[][], cols);
      for (const measure of MEASURES) {
        const threshold = measure === 'overlap' ? 12 : 0.6;
        const cpu = await similarityJoin(m, { threshold, measure, backend: 'cpu' });
        for (const blockSize of [undefined, 300]) {
          const gpu = await similarityJoin(m, { threshold, measure, backend: 'cuda', blockSize, tuning: { wideSlots: force } });
          expectSame(cpu, gpu, `${measure} force=${force} block=${blockSize}`);
        }
      }
    }
  });

  it('cuda equals cpu where an indexed set has 2^16 tokens or more (postings then carry no set sizes)', async () => {
    const r = rng(47);
    const cols = 200_000;
    const big = Array.from({ length: 70_000 }, (_, i) => i * 2);
    // Near copies of the big set (Jaccard 0.8 to 0.95 with it) and small rows.
    const near = [0.05, 0.1, 0.2].map((drop) => big.filter(() => r() >= drop).concat([cols - 1]));
    const small = randomRows(48, 400, 300, 12, true);
    const rows = [...small.slice(0, 200), big, ...near, ...small.slice(200)];
    for (const measure of MEASURES) {
      const threshold = measure === 'overlap' ? 3 : 0.8;
      const cpu = await similarityJoin(csrFromRows(rows, cols), { threshold, measure, backend: 'cpu' });
      expect(cpu.left.length).toBeGreaterThan(3);
      expectSame(cpu, await similarityJoin(csrFromRows(rows, cols), { threshold, measure, backend: 'cuda' }), `self ${measure}`);
      // R–S: only the indexed side decides; big sets on either side.
      for (const [L, R] of [
        [small, rows],
        [rows, small],
      ] as const) {
        const o = { threshold, measure, against: csrFromRows(R as number[][], cols) };
        const want = await similarityJoin(csrFromRows(L as number[][], cols), { ...o, backend: 'cpu' });
        expectSame(
          want,
          await similarityJoin(csrFromRows(L as number[][], cols), { ...o, backend: 'cuda', blockSize: 64 }),
          `R–S ${measure}`,
        );
      }
    }
  });

  it('cuda equals cpu on ids spread over a 2^32 id space (sparse vocabulary, 64-bit sort keys, mostly empty posting lists)', async () => {
    const rows = sparseNearCopies(47, 20_000, 0.25, 60, 3);
    const m = csrFromRows(rows, 0xffffffff);
    for (const threshold of [0.5, 0.9]) {
      const cpu = await similarityJoin(m, { threshold, backend: 'cpu' });
      expect(cpu.left.length).toBeGreaterThan(500);
      expectSame(cpu, await similarityJoin(m, { threshold, backend: 'cuda' }), `sparse t=${threshold}`);
    }
    const L = csrFromRows(rows.slice(0, 10_000), 0xffffffff);
    const R = csrFromRows(rows.slice(10_000), 0xffffffff);
    const o = { threshold: 0.7, measure: 'cosine' as const, against: R };
    expectSame(await similarityJoin(L, { ...o, backend: 'cpu' }), await similarityJoin(L, { ...o, backend: 'cuda' }), 'sparse R–S');
  });

  it('cuda streams the quadratic all-identical output, each pair once', async () => {
    const n = 1200;
    const rows = Array.from({ length: n }, () => [4, 9, 1, 7, 2]);
    const seen = new Uint8Array(n * n);
    let total = 0;
    for await (const c of similarityJoinStream(csrFromRows(rows, 10), { threshold: 1, backend: 'cuda', blockSize: 500 })) {
      for (let k = 0; k < c.left.length; k++) {
        const key = c.left[k] * n + c.right[k];
        if (c.left[k] >= c.right[k] || seen[key] || c.overlap[k] !== 5) throw new Error(`bad pair ${c.left[k]},${c.right[k]}`);
        seen[key] = 1;
      }
      total += c.left.length;
    }
    expect(total).toBe((n * (n - 1)) / 2);
  });

  it('cuda chunks: a small result budget gives several sorted chunks, and the joined result still equals cpu', async () => {
    const r = rng(77);
    const rows = Array.from({ length: 3000 }, () => Array.from({ length: 2 + randInt(r, 6) }, () => randInt(r, 16)));
    const m = csrFromRows(rows, 16);
    const cpu = await similarityJoin(m, { threshold: 0.5, backend: 'cpu' });
    expect(cpu.left.length).toBeGreaterThan(20_000);
    const tuning = { maxChunkPairs: 4000 };
    {
      let chunks = 0;
      let total = 0;
      for await (const c of similarityJoinStream(m, { threshold: 0.5, backend: 'cuda', blockSize: 900, tuning })) {
        if (c.left.length === 0) continue;
        chunks++;
        total += c.left.length;
        for (let k = 1; k < c.left.length; k++) {
          const before = c.left[k - 1] < c.left[k] || (c.left[k - 1] === c.left[k] && c.right[k - 1] < c.right[k]);
          if (!before) throw new Error(`chunk not sorted at ${k}`);
        }
      }
      expect(chunks).toBeGreaterThan(2);
      expect(total).toBe(cpu.left.length);
      const small = await similarityJoin(m, { threshold: 0.5, backend: 'cuda', blockSize: 900, tuning });
      expectSame(cpu, small, 'small chunks');
      // Slicing a batch's verify across chunks neither loses nor double counts candidates.
      const whole = await similarityJoin(m, { threshold: 0.5, backend: 'cuda', blockSize: 900 });
      expect(small.candidates).toBe(whole.candidates);
      expect(whole.candidates).toBeGreaterThanOrEqual(cpu.left.length);
    }
  });
});
