import { describe, expect, it } from 'vitest';
import { dedup, isEmptySignature, MinHashLSH, optimalParams, type CsrMatrix, type GroupsResult } from '../lib/index.js';
import { native } from '../lib/addon.js';
import { components, describeGpu, expectInvalid, randInt, rng } from './helpers.js';

const SENT = 0xffffffff;

// ---- synthetic signatures (MinHash's collision model) ------------------------
function randomSig(r: () => number, samples: number): Uint32Array {
  const s = new Uint32Array(samples * 2);
  for (let i = 0; i < s.length; i++) s[i] = Math.floor(r() * 4294967296) >>> 0;
  return s;
}

// A copy of `base` whose samples are each kept with probability j: two such
// signatures agree per sample with probability j, as MinHash signatures of
// vectors with weighted Jaccard j do.
function planted(r: () => number, base: Uint32Array, j: number): Uint32Array {
  const s = base.slice();
  for (let i = 0; i < s.length / 2; i++) {
    if (r() >= j) {
      s[2 * i] = Math.floor(r() * 4294967296) >>> 0;
      s[2 * i + 1] = Math.floor(r() * 4294967296) >>> 0;
    }
  }
  return s;
}

function concat(rows: Uint32Array[]): Uint32Array {
  const out = new Uint32Array(rows.reduce((a, x) => a + x.length, 0));
  let o = 0;
  for (const x of rows) {
    out.set(x, o);
    o += x.length;
  }
  return out;
}

// ---- brute-force oracles ------------------------------------------------------
function isEmpty(sig: Uint32Array, S: number, i: number): boolean {
  for (let s = 0; s < 2 * S; s++) if (sig[i * 2 * S + s] !== SENT) return false;
  return true;
}

function shareBand(sig: Uint32Array, S: number, i: number, j: number, bands: number, rows: number): boolean {
  for (let b = 0; b < bands; b++) {
    let eq = true;
    for (let s = b * rows * 2; s < (b + 1) * rows * 2 && eq; s++) eq = sig[i * 2 * S + s] === sig[j * 2 * S + s];
    if (eq) return true;
  }
  return false;
}

function agreement(sig: Uint32Array, S: number, i: number, j: number): number {
  let eq = 0;
  for (let s = 0; s < S; s++)
    if (sig[i * 2 * S + 2 * s] === sig[j * 2 * S + 2 * s] && sig[i * 2 * S + 2 * s + 1] === sig[j * 2 * S + 2 * s + 1]) eq++;
  return Math.fround(eq / S);
}

/** Candidate pairs by comparing every pair's bands; ids-based, left < right, sorted. */
function bruteCandidates(sig: Uint32Array, ids: Uint32Array, S: number, bands: number, rows: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (let i = 0; i < ids.length; i++) {
    if (isEmpty(sig, S, i)) continue;
    for (let j = i + 1; j < ids.length; j++) {
      if (!isEmpty(sig, S, j) && shareBand(sig, S, i, j, bands, rows)) out.push([Math.min(ids[i], ids[j]), Math.max(ids[i], ids[j])]);
    }
  }
  return out.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
}

/** Weighted Jaccard: positive weights only, duplicate columns summed. */
function weightedJaccard(m: CsrMatrix, a: number, b: number): number {
  const row = (r: number) => {
    const map = new Map<number, number>();
    for (let k = m.indptr[r]; k < m.indptr[r + 1]; k++) {
      const w = m.values ? m.values[k] : 1;
      if (w > 0) map.set(m.indices[k], (map.get(m.indices[k]) ?? 0) + w);
    }
    return map;
  };
  const x = row(a);
  const y = row(b);
  let mn = 0;
  let mx = 0;
  for (const [c, w] of x) {
    const v = y.get(c) ?? 0;
    mn += Math.min(w, v);
    mx += Math.max(w, v);
  }
  for (const [c, v] of y) if (!x.has(c)) mx += v;
  return mx > 0 ? mn / mx : 0;
}

function pairsOf(p: { left: Uint32Array; right: Uint32Array }): Array<[number, number]> {
  return Array.from(p.left, (l, k) => [l, p.right[k]] as [number, number]);
}

// ---- a corpus with real vectors and signatures that follow them loosely -------
interface Corpus {
  matrix: CsrMatrix;
  sig: Uint32Array;
  S: number;
}

// Clusters of perturbed copies of a base vector (some exact copies, some
// empty rows), with signatures planted from a per-cluster base so that
// cluster members collide in bands. Includes rows whose signatures are
// identical while their vectors differ, so verification must look at vectors.
function makeCorpus(seed: number, clusters: number, S: number, cols = 400): Corpus {
  const r = rng(seed);
  const rowsIdx: number[][] = [];
  const rowsVal: number[][] = [];
  const sigs: Uint32Array[] = [];
  for (let c = 0; c < clusters; c++) {
    const len = 5 + randInt(r, 30);
    const base = new Map<number, number>();
    while (base.size < len) base.set(randInt(r, cols), 1 - r());
    const baseSig = randomSig(r, S);
    const members = 1 + randInt(r, 6);
    for (let m = 0; m < members; m++) {
      const kind = r();
      const v = new Map(base);
      let s: Uint32Array;
      if (m > 0 && kind < 0.2) {
        s = baseSig.slice(); // exact copy: same vector, same signature
      } else if (m > 0 && kind < 0.3) {
        for (const k of [...v.keys()]) if (r() < 0.3) v.set(k, v.get(k)! * (0.5 + r()));
        s = baseSig.slice(); // same signature, different vector
      } else {
        for (const k of [...v.keys()]) {
          const u = r();
          if (u < 0.1) v.delete(k);
          else if (u < 0.4) v.set(k, v.get(k)! * (0.7 + 0.6 * r()));
        }
        if (r() < 0.2) v.set(randInt(r, cols), r());
        s = planted(r, baseSig, 0.6 + 0.4 * r());
      }
      const keys = [...v.keys()].sort((a, b) => a - b);
      rowsIdx.push(keys);
      rowsVal.push(keys.map((k) => v.get(k)!));
      sigs.push(s);
    }
    if (r() < 0.15) {
      rowsIdx.push([]);
      rowsVal.push([]);
      sigs.push(new Uint32Array(S * 2).fill(SENT));
    }
  }
  const indptr = new Uint32Array(rowsIdx.length + 1);
  rowsIdx.forEach((x, i) => (indptr[i + 1] = indptr[i] + x.length));
  const matrix: CsrMatrix = {
    rows: rowsIdx.length,
    cols,
    indptr,
    indices: Uint32Array.from(rowsIdx.flat()),
    values: Float32Array.from(rowsVal.flat()),
  };
  return { matrix, sig: concat(sigs), S };
}

// Inserts rows in a shuffled order, split over two calls; returns the ids in insertion order.
function insertShuffled(lsh: MinHashLSH, sig: Uint32Array, S: number, seed: number): { ids: Uint32Array; sig: Uint32Array } {
  const n = sig.length / (2 * S);
  const r = rng(seed);
  const order = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = randInt(r, i + 1);
    [order[i], order[j]] = [order[j], order[i]];
  }
  const ids = Uint32Array.from(order);
  const reordered = new Uint32Array(sig.length);
  order.forEach((row, i) => reordered.set(sig.subarray(row * 2 * S, (row + 1) * 2 * S), i * 2 * S));
  const half = n >> 1;
  lsh.insert(ids.subarray(0, half), reordered.subarray(0, half * 2 * S));
  lsh.insert(Array.from(ids.subarray(half)), reordered.subarray(half * 2 * S));
  return { ids, sig: reordered };
}

describe('optimalParams', () => {
  it("matches datasketch's (bands, rows) table for 128 samples", () => {
    expect(optimalParams(0.5, 128)).toEqual({ bands: 25, rows: 5 });
    expect(optimalParams(0.7, 128)).toEqual({ bands: 14, rows: 9 });
    expect(optimalParams(0.8, 128)).toEqual({ bands: 9, rows: 13 });
    expect(optimalParams(0.9, 128)).toEqual({ bands: 5, rows: 25 });
    const lsh = new MinHashLSH({ threshold: 0.8, samples: 128, backend: 'cpu' });
    expect([lsh.bands, lsh.rows]).toEqual([9, 13]);
  });

  it('always respects bands * rows <= samples, and false-negative weight lowers rows', () => {
    for (const samples of [1, 7, 64, 257]) {
      for (const t of [0.3, 0.6, 0.95]) {
        const p = optimalParams(t, samples);
        expect(p.bands * p.rows).toBeLessThanOrEqual(samples);
        const q = optimalParams(t, samples, [0.05, 0.95]);
        expect(q.bands * q.rows).toBeLessThanOrEqual(samples);
        // The S-curve at the threshold rises when misses cost more.
        const at = (x: { bands: number; rows: number }) => 1 - Math.pow(1 - Math.pow(t, x.rows), x.bands);
        expect(at(q)).toBeGreaterThanOrEqual(at(p) - 1e-12);
      }
    }
  });
});

describe('MinHashLSH (cpu)', () => {
  it('candidatePairs equals a brute-force band comparison (shuffled ids, empty rows, exact copies)', async () => {
    for (const [S, bands, rows, seed] of [
      [16, 4, 4, 1],
      [13, 3, 4, 2],
      [128, 25, 5, 3],
    ] as const) {
      const { sig: raw } = makeCorpus(seed, 60, S);
      const lsh = new MinHashLSH({ bands, rows, samples: S, backend: 'cpu' });
      const { ids, sig } = insertShuffled(lsh, raw, S, seed + 10);
      expect(lsh.size).toBe(ids.length);
      const got = await lsh.candidatePairs();
      const want = bruteCandidates(sig, ids, S, bands, rows);
      expect(want.length).toBeGreaterThan(10);
      expect(pairsOf(got)).toEqual(want);
    }
  });

  it('query returns, per query, the ids sharing a band (deduplicated, ascending; empty queries match nothing)', async () => {
    const S = 32;
    const { sig: raw } = makeCorpus(5, 50, S);
    const lsh = new MinHashLSH({ bands: 8, rows: 4, backend: 'cpu' });
    const { ids, sig } = insertShuffled(lsh, raw, S, 6);
    const n = ids.length;
    const r = rng(7);
    const queries = concat([
      ...Array.from({ length: 20 }, () => {
        const i = randInt(r, n);
        return planted(r, sig.subarray(i * 2 * S, (i + 1) * 2 * S), 0.7);
      }),
      randomSig(r, S),
      new Uint32Array(2 * S).fill(SENT),
    ]);
    const res = await lsh.query(queries);
    const q = queries.length / (2 * S);
    expect(res.indptr.length).toBe(q + 1);
    const both = concat([sig, queries]);
    let nonEmpty = 0;
    for (let k = 0; k < q; k++) {
      const want: number[] = [];
      if (!isEmpty(both, S, n + k)) {
        for (let i = 0; i < n; i++) if (!isEmpty(both, S, i) && shareBand(both, S, i, n + k, 8, 4)) want.push(ids[i]);
      }
      want.sort((a, b) => a - b);
      nonEmpty += want.length > 0 ? 1 : 0;
      expect(Array.from(res.ids.subarray(res.indptr[k], res.indptr[k + 1]))).toEqual(want);
    }
    expect(nonEmpty).toBeGreaterThan(10);
  });

  it('recall follows the S-curve 1-(1-J^r)^b on planted pairs (binomial bounds)', async () => {
    const S = 128;
    const { bands, rows } = optimalParams(0.7, S);
    const r = rng(21);
    const Js = [0.4, 0.6, 0.7, 0.8, 0.9];
    const per = 600;
    const sigs: Uint32Array[] = [];
    for (const J of Js) {
      for (let k = 0; k < per; k++) {
        const base = randomSig(r, S);
        sigs.push(base, planted(r, base, J));
      }
    }
    const lsh = new MinHashLSH({ threshold: 0.7, samples: S, backend: 'cpu' });
    const n = sigs.length;
    lsh.insert(
      Uint32Array.from({ length: n }, (_, i) => i),
      concat(sigs),
    );
    const cand = await lsh.candidatePairs();
    const found = new Set<number>();
    for (let k = 0; k < cand.left.length; k++) {
      // Unrelated random signatures never share a 9-sample band.
      expect(cand.right[k]).toBe(cand.left[k] + 1);
      expect(cand.left[k] % 2).toBe(0);
      found.add(cand.left[k]);
    }
    Js.forEach((J, g) => {
      let hits = 0;
      for (let k = 0; k < per; k++) if (found.has(2 * (g * per + k))) hits++;
      const p = 1 - Math.pow(1 - Math.pow(J, rows), bands);
      const sd = Math.sqrt((p * (1 - p)) / per);
      expect(Math.abs(hits / per - p)).toBeLessThanOrEqual(4.5 * sd + 1e-3);
    });
  });

  it('recall >= 0.99 for planted pairs with J >= t + 0.05 when false negatives weigh 0.95', async () => {
    const S = 128;
    for (const t of [0.5, 0.8, 0.9]) {
      const r = rng(Math.round(t * 100));
      const sigs: Uint32Array[] = [];
      const truth: number[] = [];
      const pairs = 1500;
      for (let k = 0; k < pairs; k++) {
        const base = randomSig(r, S);
        const J = t + 0.05 + (1 - t - 0.05) * r();
        truth.push(J);
        sigs.push(base, planted(r, base, J));
      }
      for (let k = 0; k < 2000; k++) sigs.push(randomSig(r, S)); // background
      const lsh = new MinHashLSH({ threshold: t, samples: S, weights: [0.05, 0.95], backend: 'cpu' });
      lsh.insert(
        Uint32Array.from({ length: sigs.length }, (_, i) => i),
        concat(sigs),
      );
      const cand = await lsh.candidatePairs();
      const found = new Set<number>();
      for (let k = 0; k < cand.left.length; k++)
        if (cand.right[k] === cand.left[k] + 1 && cand.left[k] < 2 * pairs) found.add(cand.left[k]);
      let hits = 0;
      for (let k = 0; k < pairs; k++) if (found.has(2 * k)) hits++;
      expect(hits / pairs).toBeGreaterThanOrEqual(0.99);
    }
  });

  it("groups({ verify: 'exact' }): no false positives, and equal to components of brute-force J >= t among candidates", async () => {
    for (const [t, seed] of [
      [0.5, 31],
      [0.8, 32],
    ] as const) {
      const S = 64;
      const { matrix, sig: raw } = makeCorpus(seed, 120, S);
      const lsh = new MinHashLSH({ threshold: t, samples: S, weights: [0.05, 0.95], backend: 'cpu' });
      const { ids } = insertShuffled(lsh, raw, S, seed + 1);
      const pos = new Map<number, number>();
      ids.forEach((id, i) => pos.set(id, i));
      const g = await lsh.groups({ verify: 'exact', matrix });
      // Every reported pair is a true near-duplicate, with its true similarity.
      for (let k = 0; k < g.pairs.left.length; k++) {
        const J = weightedJaccard(matrix, g.pairs.left[k], g.pairs.right[k]);
        expect(J).toBeGreaterThanOrEqual(t);
        expect(Math.abs(g.pairs.similarity[k] - J)).toBeLessThan(1e-6);
        expect(g.pairs.left[k]).toBeLessThan(g.pairs.right[k]);
        expect(g.group[pos.get(g.pairs.left[k])!]).toBe(g.group[pos.get(g.pairs.right[k])!]);
      }
      const cand = pairsOf(await lsh.candidatePairs());
      const edges = cand
        .filter(([a, b]) => weightedJaccard(matrix, a, b) >= t)
        .map(([a, b]) => [pos.get(a)!, pos.get(b)!] as [number, number]);
      const want = components(ids.length, edges);
      expect(want.count).toBeGreaterThan(20);
      expect(edges.length).toBeLessThan(cand.length); // verification rejected something
      expect(g.count).toBe(want.count);
      expect(g.group).toEqual(want.group);
      // Empty rows never group.
      ids.forEach((id, i) => {
        if (matrix.indptr[id] === matrix.indptr[id + 1]) expect(g.group[i]).toBe(SENT);
      });
    }
  });

  it("groups({ verify: 'estimate' | 'none' }) equal components of brute-force candidates (with agreement >= t)", async () => {
    const S = 64;
    const t = 0.7;
    const { sig: raw } = makeCorpus(41, 150, S);
    const lsh = new MinHashLSH({ threshold: t, samples: S, backend: 'cpu' });
    const { ids, sig } = insertShuffled(lsh, raw, S, 42);
    const pos = new Map<number, number>();
    ids.forEach((id, i) => pos.set(id, i));
    const cand = bruteCandidates(sig, ids, S, lsh.bands, lsh.rows).map(([a, b]) => [pos.get(a)!, pos.get(b)!] as [number, number]);
    const est = await lsh.groups({ verify: 'estimate' });
    const keep = cand.filter(([a, b]) => agreement(sig, S, a, b) >= t);
    const want = components(ids.length, keep);
    expect(keep.length).toBeLessThan(cand.length);
    expect(est.count).toBe(want.count);
    expect(est.group).toEqual(want.group);
    for (let k = 0; k < est.pairs.left.length; k++) {
      const a = pos.get(est.pairs.left[k])!;
      const b = pos.get(est.pairs.right[k])!;
      expect(est.pairs.similarity[k]).toBe(agreement(sig, S, a, b));
      expect(est.pairs.similarity[k]).toBeGreaterThanOrEqual(t);
    }
    const none = await lsh.groups({ verify: 'none' });
    const wantNone = components(ids.length, cand);
    expect(none.count).toBe(wantNone.count);
    expect(none.group).toEqual(wantNone.group);
  });

  it('a bucket of thousands of identical signatures groups without quadratic edges', async () => {
    const S = 32;
    const r = rng(51);
    const same = randomSig(r, S);
    const n = 20_000;
    const sigs: Uint32Array[] = [];
    for (let i = 0; i < n; i++) sigs.push(i % 2 === 0 ? same : randomSig(r, S));
    const lsh = new MinHashLSH({ bands: 8, rows: 4, backend: 'cpu' });
    lsh.insert(
      Uint32Array.from({ length: n }, (_, i) => i),
      concat(sigs),
    );
    const g = await lsh.groups({ verify: 'estimate', threshold: 0.9 });
    expect(g.count).toBe(1);
    for (let i = 0; i < n; i++) expect(g.group[i]).toBe(i % 2 === 0 ? 0 : SENT);
    expect(g.pairs.left.length).toBe(n / 2 - 1); // a spanning star
    // candidatePairs still lists every pair of the bucket.
    const small = new MinHashLSH({ bands: 8, rows: 4, backend: 'cpu' });
    small.insert(
      Uint32Array.from({ length: 600 }, (_, i) => i),
      concat(sigs.slice(0, 600)),
    );
    const c = await small.candidatePairs();
    expect(c.left.length).toBe((300 * 299) / 2);
  });

  it('single row, all-empty rows and an empty index give no pairs and no groups', async () => {
    const S = 8;
    const lsh = new MinHashLSH({ bands: 2, rows: 4, backend: 'cpu' });
    expect((await lsh.candidatePairs()).left.length).toBe(0);
    lsh.insert([7], randomSig(rng(1), S));
    const g = await lsh.groups({ verify: 'none' });
    expect(Array.from(g.group)).toEqual([SENT]);
    expect(g.count).toBe(0);
    const e = new MinHashLSH({ bands: 2, rows: 4, backend: 'cpu' });
    e.insert([1, 2, 3], new Uint32Array(3 * 2 * S).fill(SENT));
    expect((await e.candidatePairs()).left.length).toBe(0);
    expect(Array.from((await e.groups({ verify: 'none' })).group)).toEqual([SENT, SENT, SENT]);
  });

  it('isEmptySignature rejects a row or samples out of range instead of answering false', () => {
    const sigs = new Uint32Array(16).fill(0xffffffff);
    sigs[8] = 7;
    expect(isEmptySignature(sigs, 4, 0)).toBe(true);
    expect(isEmptySignature(sigs, 4, 1)).toBe(false);
    expectInvalid(() => isEmptySignature(sigs, 4, 2), RangeError, /i must be an integer in \[0, 1\], got 2/);
    expectInvalid(() => isEmptySignature(sigs, 4, -1), RangeError, /i must be an integer in \[0, 1\], got -1/);
    expectInvalid(() => isEmptySignature(sigs, 0, 0), RangeError, /samples must be an integer/);
    expectInvalid(() => isEmptySignature(sigs, 16, 0), RangeError, /signatures has length 16, less than one row/);
    expectInvalid(() => isEmptySignature([1, 2] as never, 1, 0), TypeError, /signatures must be a Uint32Array/);
  });

  it('native boundary: options are named in messages', () => {
    expectInvalid(
      () => native().lshCandidatePairs(new Uint32Array(8), new Uint32Array(1), { samples: NaN, bands: 1, rows: 1 } as never),
      RangeError,
      /options\.samples must be finite/,
    );
  });

  it('rejects bad input with coded errors naming the argument', async () => {
    const bad: Array<[() => unknown, ErrorConstructor, RegExp]> = [
      [() => new MinHashLSH({ threshold: 0 }), RangeError, /threshold/],
      [() => new MinHashLSH({ threshold: 1 }), RangeError, /threshold/],
      [() => new MinHashLSH({ threshold: 1.5 }), RangeError, /threshold/],
      [() => new MinHashLSH({ threshold: NaN }), RangeError, /threshold/],
      [() => new MinHashLSH({ threshold: '0.5' as never }), TypeError, /threshold/],
      [() => new MinHashLSH({ bands: 10, rows: 13, samples: 128 }), RangeError, /bands \* rows = 130 exceeds samples = 128/],
      [() => new MinHashLSH({ bands: 0, rows: 13 }), RangeError, /bands/],
      [() => new MinHashLSH({ threshold: 0.5, weights: [0.5, 0.6] }), RangeError, /weights must sum to 1/],
      [() => optimalParams(-0.1, 128), RangeError, /threshold/],
      [() => optimalParams(0.5, 0), RangeError, /samples/],
    ];
    for (const [fn, cls, msg] of bad) {
      expect(fn).toThrow(cls);
      expect(fn).toThrow(msg);
      try {
        fn();
      } catch (e) {
        expect((e as { code: string }).code).toBe('CUSIM_INVALID_ARGUMENT');
      }
    }
    const lsh = new MinHashLSH({ bands: 2, rows: 4, samples: 8, backend: 'cpu' });
    expect(() => lsh.insert([1, 2], new Uint32Array(16 * 2 - 1))).toThrow(/signatures has length 31/);
    expect(() => lsh.insert([1], new Float32Array(16) as never)).toThrow(TypeError);
    expect(() => lsh.insert([1, -1], new Uint32Array(32))).toThrow(/ids\[1\]=-1/);
    lsh.insert([1], new Uint32Array(16));
    expect(() => lsh.insert([2, 1], new Uint32Array(32))).toThrow(/ids\[1\]=1 is already/);
    expect(() => lsh.insert([5, 6, 5], new Uint32Array(48))).toThrow(/ids\[2\]=5 repeats ids\[0\]/);
    lsh.insert([2], new Uint32Array(16)); // the failed insert left nothing behind
    expect(lsh.size).toBe(2);
    await expect(lsh.query(new Uint32Array(15))).rejects.toThrow(/signatures has length 15/);
    await expect(lsh.groups({ verify: 'exact' })).rejects.toThrow(/matrix is required/);
    await expect(lsh.groups({ verify: 'bogus' as never })).rejects.toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT' });
    await expect(lsh.groups({ threshold: 2 })).rejects.toThrow(RangeError);
    const m: CsrMatrix = { rows: 2, cols: 4, indptr: new Uint32Array([0, 1, 2]), indices: new Uint32Array([0, 1]) };
    await expect(lsh.groups({ verify: 'exact', matrix: m })).rejects.toThrow(/id 2 \(row 1\) has no row in matrix/);
    const ac = new AbortController();
    ac.abort();
    await expect(lsh.groups({ signal: ac.signal })).rejects.toMatchObject({ name: 'AbortError', code: 'ABORT_ERR' });
    await expect(lsh.candidatePairs({ signal: ac.signal })).rejects.toMatchObject({ code: 'ABORT_ERR' });
    lsh.dispose();
    await expect(lsh.candidatePairs()).rejects.toMatchObject({ code: 'CUSIM_DISPOSED' });
    expect(() => lsh.insert([3], new Uint32Array(16))).toThrow(/disposed/);
  });
});

// ---- dedup: real weighted vectors through WeightedMinHash -----------------------
// Clusters of perturbed copies (weights scaled by up to ±8%, sometimes a column
// dropped or added), exact copies, empty rows and unrelated rows.
function nearDupMatrix(seed: number, clusters: number, cols = 5000): CsrMatrix {
  const r = rng(seed);
  const rowsIdx: number[][] = [];
  const rowsVal: number[][] = [];
  const push = (v: Map<number, number>) => {
    const keys = [...v.keys()].sort((a, b) => a - b);
    rowsIdx.push(keys);
    rowsVal.push(keys.map((k) => v.get(k)!));
  };
  for (let c = 0; c < clusters; c++) {
    const base = new Map<number, number>();
    const len = 20 + randInt(r, 60);
    while (base.size < len) base.set(randInt(r, cols), 0.1 + r());
    push(base);
    const copies = 1 + randInt(r, 3);
    for (let m = 0; m < copies; m++) {
      const v = new Map(base);
      if (r() < 0.25) {
        push(v); // exact copy
        continue;
      }
      for (const k of [...v.keys()]) v.set(k, v.get(k)! * (0.92 + 0.16 * r()));
      if (r() < 0.3) v.delete([...v.keys()][randInt(r, v.size)]);
      if (r() < 0.3) v.set(randInt(r, cols), 0.1 * r());
      push(v);
    }
    if (r() < 0.1) push(new Map());
  }
  const indptr = new Uint32Array(rowsIdx.length + 1);
  rowsIdx.forEach((x, i) => (indptr[i + 1] = indptr[i] + x.length));
  return { rows: rowsIdx.length, cols, indptr, indices: Uint32Array.from(rowsIdx.flat()), values: Float32Array.from(rowsVal.flat()) };
}

async function checkDedup(matrix: CsrMatrix, t: number, backend: 'cpu' | 'cuda'): Promise<void> {
  const res = await dedup(matrix, { threshold: t, weights: [0.05, 0.95], backend, returnSignatures: true });
  expect(res.signatures!.length).toBe(matrix.rows * 128 * 2);
  expect(res.group.length).toBe(matrix.rows);
  // No false positives; edges lie inside groups.
  for (let k = 0; k < res.pairs.left.length; k++) {
    const a = res.pairs.left[k];
    const b = res.pairs.right[k];
    expect(weightedJaccard(matrix, a, b)).toBeGreaterThanOrEqual(t);
    expect(res.group[a]).not.toBe(SENT);
    expect(res.group[a]).toBe(res.group[b]);
  }
  // Recall of pairs with J >= t + 0.05, brute force over all pairs.
  let truePairs = 0;
  let found = 0;
  for (let a = 0; a < matrix.rows; a++) {
    if (matrix.indptr[a] === matrix.indptr[a + 1]) {
      expect(res.group[a]).toBe(SENT);
      continue;
    }
    for (let b = a + 1; b < matrix.rows; b++) {
      const J = weightedJaccard(matrix, a, b);
      if (J >= t + 0.05) {
        truePairs++;
        if (res.group[a] !== SENT && res.group[a] === res.group[b]) found++;
      }
      if (J === 1) expect(res.group[b]).toBe(res.group[a]); // exact copies always group
    }
  }
  expect(truePairs).toBeGreaterThan(200);
  expect(found / truePairs).toBeGreaterThanOrEqual(0.99);
  // Groups are numbered by their first member.
  let next = 0;
  for (const g of res.group) {
    if (g === SENT) continue;
    expect(g).toBeLessThanOrEqual(next);
    if (g === next) next++;
  }
  expect(next).toBe(res.count);
}

describe('dedup', () => {
  it('cpu: no false positives, recall >= 0.99 at J >= t + 0.05, empty rows ungrouped', async () => {
    await checkDedup(nearDupMatrix(91, 250), 0.8, 'cpu');
  });

  it('defaults: threshold 0.9, exact verification; rejects bad options', async () => {
    const m = nearDupMatrix(92, 40);
    const res = await dedup(m, { backend: 'cpu' });
    for (let k = 0; k < res.pairs.left.length; k++)
      expect(weightedJaccard(m, res.pairs.left[k], res.pairs.right[k])).toBeGreaterThanOrEqual(0.9);
    expect(res.count).toBeGreaterThan(5);
    expect(res.signatures).toBeUndefined();
    await expect(dedup(m, { threshold: 1 })).rejects.toThrow(RangeError);
    await expect(dedup(m, { threshold: 0 })).rejects.toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT' });
    await expect(dedup(m, { verify: 'maybe' as never })).rejects.toThrow(/verify/);
    await expect(dedup({ rows: 1 } as never)).rejects.toThrow(TypeError);
  });
});

// ---- CUDA vs CPU ----------------------------------------------------------------
function sameGroups(a: GroupsResult, b: GroupsResult): void {
  expect(b.count).toBe(a.count);
  expect(b.group).toEqual(a.group);
  expect(b.pairs.left).toEqual(a.pairs.left);
  expect(b.pairs.right).toEqual(a.pairs.right);
  expect(b.pairs.similarity).toEqual(a.pairs.similarity);
}

async function compareBackends(sig: Uint32Array, S: number, opts: { bands: number; rows: number }, ids?: Uint32Array, matrix?: CsrMatrix) {
  const n = sig.length / (2 * S);
  const id = ids ?? Uint32Array.from({ length: n }, (_, i) => i);
  const cpu = new MinHashLSH({ ...opts, samples: S, backend: 'cpu' });
  const gpu = new MinHashLSH({ ...opts, samples: S, backend: 'cuda' });
  cpu.insert(id, sig);
  gpu.insert(id, sig);
  const [pc, pg] = await Promise.all([cpu.candidatePairs(), gpu.candidatePairs()]);
  expect(pg.left).toEqual(pc.left);
  expect(pg.right).toEqual(pc.right);
  for (const verify of ['none', 'estimate', ...(matrix ? ['exact' as const] : [])] as const) {
    const [gc, gg] = await Promise.all([cpu.groups({ verify, matrix, threshold: 0.6 }), gpu.groups({ verify, matrix, threshold: 0.6 })]);
    sameGroups(gc, gg);
  }
  return pc;
}

describeGpu('MinHashLSH cuda = cpu', () => {
  it('random + planted corpus with exact copies, empty rows and shuffled ids', async () => {
    for (const [S, bands, rows, seed] of [
      [64, 16, 4, 61],
      [128, 25, 5, 62],
      [7, 2, 3, 63],
    ] as const) {
      const { matrix, sig } = makeCorpus(seed, 700, S);
      const r = rng(seed);
      const n = sig.length / (2 * S);
      const ids = Uint32Array.from({ length: n }, (_, i) => i);
      for (let i = n - 1; i > 0; i--) {
        const j = randInt(r, i + 1);
        [ids[i], ids[j]] = [ids[j], ids[i]];
      }
      const pc = await compareBackends(sig, S, { bands, rows }, ids, matrix);
      expect(pc.left.length).toBeGreaterThan(100);
    }
  });

  it('huge buckets: thousands of identical signatures, and thousands sharing only one band', async () => {
    const S = 32;
    const r = rng(71);
    const same = randomSig(r, S);
    const sigs: Uint32Array[] = [];
    for (let i = 0; i < 2001; i++) sigs.push(same);
    for (let i = 0; i < 1001; i++) {
      const s = randomSig(r, S);
      s.set(same.subarray(0, 8)); // band 0 equal, the rest random
      sigs.push(s);
    }
    for (let i = 0; i < 1003; i++) sigs.push(randomSig(r, S));
    for (let i = 0; i < 17; i++) sigs.push(new Uint32Array(2 * S).fill(SENT));
    const pc = await compareBackends(concat(sigs), S, { bands: 8, rows: 4 });
    const all = 2001 + 1001;
    expect(pc.left.length).toBe((all * (all - 1)) / 2);
  });

  it('dedup on cuda: no false positives, recall >= 0.99 at J >= t + 0.05', async () => {
    await checkDedup(nearDupMatrix(93, 250), 0.8, 'cuda');
  });

  it('a single row, two rows, and only empty rows', async () => {
    const S = 16;
    const r = rng(81);
    await compareBackends(randomSig(r, S), S, { bands: 4, rows: 4 });
    const a = randomSig(r, S);
    const pc = await compareBackends(concat([a, a]), S, { bands: 4, rows: 4 });
    expect(pc.left.length).toBe(1);
    await compareBackends(new Uint32Array(5 * 2 * S).fill(SENT), S, { bands: 4, rows: 4 });
  });
});

describe('groupMembers', () => {
  it('lists each group of two or more rows, ascending, groups by first member (against a direct scan)', async () => {
    const { groupMembers } = await import('../lib/index.js');
    const r = rng(99);
    const NONE = 0xffffffff;
    const dense = Uint32Array.from({ length: 500 }, () => (r() < 0.3 ? NONE : Math.floor(r() * 120)));
    // Labels far above the row count take the path that does not index arrays by label.
    const sparse = dense.map((g) => (g === NONE ? NONE : 4e9 - g * 1e6));
    for (const group of [dense, sparse]) {
      const got = groupMembers(group).map((m) => Array.from(m));
      const want: number[][] = [];
      const seen = new Set<number>();
      for (let i = 0; i < group.length; i++) {
        const g = group[i];
        if (g === NONE || seen.has(g)) continue;
        seen.add(g);
        const rows = [...group.keys()].filter((j) => group[j] === g);
        if (rows.length > 1) want.push(rows);
      }
      expect(got).toEqual(want);
    }
    expect(groupMembers(new Uint32Array(0))).toEqual([]);
    expect(() => groupMembers([1, 2] as unknown as Uint32Array)).toThrow(expect.objectContaining({ code: 'CUSIM_INVALID_ARGUMENT' }));
  });
});
