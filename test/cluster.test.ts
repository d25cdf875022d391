import { corruptionFuzz, resealed, sectionBytes } from './persist-helpers.js';
import { readFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { NO_CLUSTER, StreamClusterer, TfidfTable, tfidf, threads, type ClusterTuning, type CsrMatrix } from '../lib/index.js';
import { backends, describeGpu, expectInvalid, randInt, rng, zipf } from './helpers.js';

// ---- the oracle: a brute-force cosine scan with the documented semantics ----
const SCALE = 2 ** 61;

function prepare(terms: number[], weights: number[], K: number): { t: number[]; w: number[] } {
  const e = terms.map((t, i) => [t, weights[i]] as [number, number]).filter(([, w]) => w > 0);
  e.sort((a, b) => (a[1] !== b[1] ? b[1] - a[1] : a[0] - b[0]));
  const top = e.slice(0, K).sort((a, b) => a[0] - b[0]);
  let ss = 0;
  for (const [, w] of top) ss += w * w;
  const norm = Math.sqrt(ss);
  return { t: top.map((x) => x[0]), w: top.map((x) => Math.fround(x[1] / norm)) };
}

function similarity(a: { t: number[]; w: number[] }, b: { t: number[]; w: number[] }): number {
  const m = new Map<number, number>();
  b.t.forEach((t, i) => m.set(t, b.w[i]));
  let acc = 0n;
  a.t.forEach((t, i) => {
    const cw = m.get(t);
    if (cw !== undefined) acc += BigInt(Math.trunc(a.w[i] * cw * SCALE));
  });
  return Math.fround(Number(acc) / SCALE);
}

interface OracleCluster {
  sum: Map<number, number>;
  row: { t: number[]; w: number[] };
  members: number;
  last: number;
}

class Oracle {
  clusters: OracleCluster[] = [];
  time = 0;
  constructor(
    readonly T: number,
    readonly K: number,
    readonly maxAge = Infinity,
  ) {}

  add(m: CsrMatrix): { cluster: number[]; similarity: number[]; created: number[] } {
    const out = { cluster: [] as number[], similarity: [] as number[], created: [] as number[] };
    for (let r = 0; r < m.rows; r++) {
      const terms = Array.from(m.indices.subarray(m.indptr[r], m.indptr[r + 1]));
      const weights = m.values ? Array.from(m.values.subarray(m.indptr[r], m.indptr[r + 1])) : terms.map(() => 1);
      const d = prepare(terms, weights, this.K);
      const t = this.time++;
      if (d.t.length === 0) {
        out.cluster.push(NO_CLUSTER);
        out.similarity.push(0);
        out.created.push(0);
        continue;
      }
      let best = -1;
      let bestSim = -1;
      this.clusters.forEach((c, id) => {
        if (t - c.last > this.maxAge) return;
        const s = similarity(d, c.row);
        if (s > bestSim) {
          best = id;
          bestSim = s;
        }
      });
      if (best >= 0 && bestSim > this.T) {
        const c = this.clusters[best];
        d.t.forEach((term, i) => c.sum.set(term, (c.sum.get(term) ?? 0) + d.w[i]));
        c.members++;
        c.last = t;
        const e = [...c.sum.entries()].sort((a, b) => (a[1] !== b[1] ? b[1] - a[1] : a[0] - b[0]));
        const top = e.slice(0, this.K).sort((a, b) => a[0] - b[0]);
        let ss = 0;
        for (const [, v] of top) ss += v * v;
        const norm = Math.sqrt(ss);
        c.row = { t: top.map((x) => x[0]), w: top.map((x) => Math.fround(x[1] / norm)) };
        out.cluster.push(best);
        out.similarity.push(bestSim);
        out.created.push(0);
      } else {
        this.clusters.push({ sum: new Map(d.t.map((term, i) => [term, d.w[i]])), row: d, members: 1, last: t });
        out.cluster.push(this.clusters.length - 1);
        out.similarity.push(0);
        out.created.push(1);
      }
    }
    return out;
  }
}

// ---- inputs -------------------------------------------------------------------
function csr(docs: { t: number[]; w?: number[] }[], cols: number): CsrMatrix {
  const indptr = new Uint32Array(docs.length + 1);
  const idx: number[] = [];
  const val: number[] = [];
  docs.forEach((d, i) => {
    idx.push(...d.t);
    val.push(...(d.w ?? d.t.map(() => 1)));
    indptr[i + 1] = idx.length;
  });
  return { rows: docs.length, cols, indptr, indices: Uint32Array.from(idx), values: Float32Array.from(val) };
}

/** A stream with Zipf terms, empty documents, and perturbed copies of recent documents (so joins happen). */
function randomStream(seed: number, n: number, vocab: number, maxLen: number): CsrMatrix {
  const r = rng(seed);
  const docs: { t: number[]; w: number[] }[] = [];
  for (let i = 0; i < n; i++) {
    const u = r();
    let m: Map<number, number>;
    if (u < 0.05) m = new Map();
    else if (u < 0.55 && docs.length > 0) {
      const src = docs[docs.length - 1 - randInt(r, Math.min(docs.length, 12))];
      m = new Map(src.t.map((t, j) => [t, src.w[j]]));
      const edits = randInt(r, 4);
      for (let k = 0; k < edits; k++) {
        const t = zipf(r, vocab);
        if (r() < 0.5) m.delete(t);
        else m.set(t, Math.fround(r() < 0.3 ? 1 : 1 - r()));
      }
    } else {
      m = new Map();
      const len = 1 + randInt(r, maxLen);
      // Small integer weights make ties in the top-K cut common.
      for (let k = 0; k < len; k++) m.set(zipf(r, vocab), r() < 0.3 ? 1 + randInt(r, 3) : Math.fround(1 - r()));
    }
    const t = [...m.keys()];
    // Shuffle so unsorted rows are exercised too.
    for (let k = t.length - 1; k > 0; k--) {
      const j = randInt(r, k + 1);
      [t[k], t[j]] = [t[j], t[k]];
    }
    docs.push({ t, w: t.map((x) => m.get(x)!) });
  }
  return csr(docs, vocab);
}

/** The same stream with term ids spread over the whole uint32 range (order reversed). */
function bigIds(m: CsrMatrix): CsrMatrix {
  return { ...m, cols: 0xffffffff, indices: m.indices.map((t) => 0xfffffffe - t * 97_000_001) };
}

function slice(m: CsrMatrix, b: number, e: number): CsrMatrix {
  const base = m.indptr[b];
  const indptr = new Uint32Array(e - b + 1);
  for (let i = b; i <= e; i++) indptr[i - b] = m.indptr[i] - base;
  return {
    rows: e - b,
    cols: m.cols,
    indptr,
    indices: m.indices.slice(base, m.indptr[e]),
    values: m.values?.slice(base, m.indptr[e]),
  };
}

function expectSameAsOracle(
  c: StreamClusterer,
  o: Oracle,
  got: { cluster: Uint32Array; similarity: Float32Array; created: Uint8Array },
  want: ReturnType<Oracle['add']>,
) {
  expect(Array.from(got.cluster)).toEqual(want.cluster);
  expect(Array.from(got.created)).toEqual(want.created);
  expect(Array.from(got.similarity)).toEqual(want.similarity);
  expect(c.size).toBe(o.clusters.length);
  o.clusters.forEach((oc, id) => {
    const cen = c.centroid(id);
    expect(Array.from(cen.terms)).toEqual(oc.row.t);
    expect(Array.from(cen.weights)).toEqual(oc.row.w);
    expect(c.members(id)).toBe(oc.members);
  });
}

// Real text: npm package summaries, word-tokenized, TF-IDF with a streaming table.
function npmText(): CsrMatrix {
  const lines = readFileSync(path.join(__dirname, 'fixtures', 'npm-summaries-300.tsv'), 'utf8')
    .trim()
    .split('\n');
  const vocab = new Map<number | string, number>();
  const docs: { t: number[]; w: number[] }[] = [];
  for (const line of lines) {
    const words = (line.split('\t')[1] ?? '').toLowerCase().match(/[a-z0-9]+/g) ?? [];
    const counts = new Map<number, number>();
    for (const w of words) {
      if (!vocab.has(w)) vocab.set(w, vocab.size);
      const id = vocab.get(w)!;
      counts.set(id, (counts.get(id) ?? 0) + 1);
    }
    docs.push({ t: [...counts.keys()], w: [...counts.values()] });
  }
  const counts = csr(docs, vocab.size);
  const table = new TfidfTable();
  // Streaming: each chunk is weighted with the frequencies seen up to it.
  const parts: CsrMatrix[] = [];
  for (let b = 0; b < counts.rows; b += 100) parts.push(tfidf(slice(counts, b, Math.min(counts.rows, b + 100)), table));
  const values = new Float32Array(counts.indices.length);
  let off = 0;
  for (const p of parts) {
    values.set(p.values!, off);
    off += p.values!.length;
  }
  return { ...counts, values };
}

const Ts = [0.1, 0.3, 0.6, 0.9];
const Ks = [1, 8, 35, 200];

describe('StreamClusterer (cpu) equals a brute-force cosine scan', () => {
  it('random streams, every T and K, sequential and batch', async () => {
    let seed = 1;
    for (const T of Ts) {
      for (const K of Ks) {
        const docs = randomStream(seed++, 90, 120, K === 200 ? 260 : 50);
        for (const mode of ['sequential', 'batch'] as const) {
          const o = new Oracle(T, K);
          const want = o.add(docs);
          using c = new StreamClusterer({ threshold: T, maxTerms: K, capacity: 4, backend: 'cpu' });
          const got = await c.add(docs, { mode });
          expect(got.mode).toBe(mode);
          expectSameAsOracle(c, o, got, want);
        }
      }
    }
  });

  it('real text (npm summaries, streaming TF-IDF), every T and K', async () => {
    const docs = npmText();
    for (const T of Ts) {
      for (const K of Ks) {
        const o = new Oracle(T, K);
        const want = o.add(docs);
        using c = new StreamClusterer({ threshold: T, maxTerms: K, backend: 'cpu' });
        const got = await c.add(docs);
        expectSameAsOracle(c, o, got, want);
        if (T === 0.3) expect(want.created.filter((x) => x === 0).length).toBeGreaterThan(0);
      }
    }
  });

  it('micro-batch equals sequential across many batches, re-scoring when the batch best changed', async () => {
    const docs = randomStream(99, 1500, 60, 12);
    const T = 0.3;
    using a = new StreamClusterer({ threshold: T, maxTerms: 8, capacity: 2, backend: 'cpu' });
    using b = new StreamClusterer({ threshold: T, maxTerms: 8, capacity: 2, backend: 'cpu' });
    // The CPU micro-batch is 64 documents per pool thread: 2 threads make 12 batches of
    // 128 here, so later batches re-score; on a 32-core host the default pool makes one
    // batch of all 1,500, and nothing can re-score.
    const pool = threads();
    threads(2);
    let seq, bat;
    try {
      seq = await a.add(docs, { mode: 'sequential' });
      bat = await b.add(docs, { mode: 'batch' });
    } finally {
      threads(pool);
    }
    expect(bat.cluster).toEqual(seq.cluster);
    expect(bat.similarity).toEqual(seq.similarity);
    expect(bat.created).toEqual(seq.created);
    expect(bat.rescored).toBeGreaterThan(0);
    const o = new Oracle(T, 8);
    expect(Array.from(seq.cluster)).toEqual(o.add(docs).cluster);
  });

  it('decay: equals the oracle and drops exactly the clusters unseen for more than maxAge documents', async () => {
    const docs = randomStream(5, 400, 80, 10);
    for (const maxAge of [0, 3, 25]) {
      for (const mode of ['sequential', 'batch'] as const) {
        const o = new Oracle(0.3, 8, maxAge);
        const want = o.add(docs);
        using c = new StreamClusterer({ threshold: 0.3, maxTerms: 8, decay: { maxAge }, backend: 'cpu' });
        expectSameAsOracle(c, o, await c.add(docs, { mode }), want);
        o.clusters.forEach((oc, id) => expect(c.active(id)).toBe(o.time - oc.last <= maxAge));
      }
    }
    // A document re-appears after exactly maxAge and maxAge + 1 unrelated documents.
    for (const [gap, joins] of [
      [4, true],
      [5, false],
    ] as const) {
      using c = new StreamClusterer({ threshold: 0.5, maxTerms: 4, decay: { maxAge: 5 }, backend: 'cpu' });
      const filler = Array.from({ length: gap }, (_, i) => ({ t: [100 + i] }));
      const r = await c.add(csr([{ t: [1, 2, 3] }, ...filler, { t: [1, 2, 3] }], 200));
      expect(r.cluster[gap + 1] === 0).toBe(joins);
      expect(r.created[gap + 1]).toBe(joins ? 0 : 1);
    }
  });

  it('save/load continues the stream identically', async () => {
    const docs = randomStream(17, 300, 70, 15);
    const dir = mkdtempSync(path.join(tmpdir(), 'cusim-cluster-'));
    try {
      using whole = new StreamClusterer({ threshold: 0.3, maxTerms: 8, decay: { maxAge: 40 }, backend: 'cpu' });
      const all = await whole.add(docs);
      using first = new StreamClusterer({ threshold: 0.3, maxTerms: 8, decay: { maxAge: 40 }, backend: 'cpu' });
      await first.add(slice(docs, 0, 170));
      const file = path.join(dir, 'state.bin');
      await first.save(file);
      using resumed = await StreamClusterer.load(file, { backend: 'cpu' });
      expect(resumed.threshold).toBe(0.3);
      expect(resumed.maxTerms).toBe(8);
      expect(resumed.documents).toBe(170);
      // A damaged file is refused, not trusted.
      const bytes = readFileSync(file);
      for (const [at, name] of [
        [10, 'header'],
        [bytes.length - 3, 'truncated'],
      ] as const) {
        const bad = Buffer.from(bytes);
        if (name === 'header') bad.writeUInt32LE(5000, 16); // maxTerms
        const f = path.join(dir, `bad-${at}.bin`);
        writeFileSync(f, name === 'truncated' ? bad.subarray(0, at) : bad);
        await expect(StreamClusterer.load(f, { backend: 'cpu' })).rejects.toMatchObject({
          code: 'CUSIM_BAD_FILE',
          message: expect.stringMatching(/is not a valid cusim stream-cluster file/),
        });
      }
      const rest = await resumed.add(slice(docs, 170, 300));
      expect(rest.cluster).toEqual(all.cluster.slice(170));
      expect(rest.similarity).toEqual(all.similarity.slice(170));
      expect(resumed.size).toBe(whole.size);
      for (let id = 0; id < whole.size; id++) {
        expect(resumed.centroid(id)).toEqual(whole.centroid(id));
        expect(resumed.members(id)).toBe(whole.members(id));
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('edge cases: empty doc, duplicate doc, > K terms with ties, capacity growth, empty batch', async () => {
    using c = new StreamClusterer({ threshold: 0.6, maxTerms: 3, capacity: 1, backend: 'cpu' });
    const r = await c.add(
      csr(
        [
          { t: [], w: [] },
          { t: [5, 1, 9, 7, 3], w: [1, 1, 2, 1, 0.5] }, // top-3: 9 (2), then ties at 1 -> 1, 5
          { t: [5, 1, 9, 7, 3], w: [1, 1, 2, 1, 0.5] },
          { t: [4], w: [0] }, // only a zero weight: empty
          { t: [40], w: [3] },
          { t: [40], w: [7] },
          { t: [41] },
          { t: [42] },
        ],
        64,
      ),
      { mode: 'sequential' },
    );
    expect(Array.from(r.cluster)).toEqual([NO_CLUSTER, 0, 0, NO_CLUSTER, 1, 1, 2, 3]);
    expect(Array.from(r.created)).toEqual([0, 1, 0, 0, 1, 0, 1, 1]);
    expect(r.similarity[2]).toBeCloseTo(1, 6);
    expect(r.similarity[5]).toBe(1); // one term, weight exactly 1
    expect(Array.from(c.centroid(0).terms)).toEqual([1, 5, 9]);
    expect(c.members(0)).toBe(2);
    expect(c.size).toBe(4);
    expect(c.documents).toBe(8);
    const none = await c.add(csr([], 64));
    expect(none.cluster.length).toBe(0);
  });

  it('term ids anywhere in [0, 2^32 - 2] (hashed vocabularies)', async () => {
    const small = randomStream(31, 120, 40, 10);
    const big = bigIds(small);
    for (const mode of ['sequential', 'batch'] as const) {
      const o = new Oracle(0.3, 8);
      using c = new StreamClusterer({ threshold: 0.3, maxTerms: 8, backend: 'cpu' });
      expectSameAsOracle(c, o, await c.add(big, { mode }), o.add(big));
    }
  });

  it('joins only above the threshold (strictly) and breaks similarity ties to the lower cluster id', async () => {
    // {1,2,3,4} vs {1,2,5,6}, unit weights: similarity exactly 0.5.
    for (const [T, joins] of [
      [0.5, false],
      [0.49, true],
    ] as const) {
      for (const backend of backends) {
        using c = new StreamClusterer({ threshold: T, maxTerms: 8, backend });
        const r = await c.add(csr([{ t: [1, 2, 3, 4] }, { t: [1, 2, 5, 6] }], 8), { mode: 'sequential' });
        expect(r.created[1]).toBe(joins ? 0 : 1);
        if (joins) expect(r.similarity[1]).toBe(0.5);
      }
    }
    for (const backend of backends) {
      for (const mode of ['sequential', 'batch'] as const) {
        using c = new StreamClusterer({ threshold: 0.6, maxTerms: 8, backend });
        // Clusters 0 = {3,4} and 1 = {1,2}; {1,2,3,4} is equally similar (1/sqrt 2) to both.
        const r = await c.add(csr([{ t: [3, 4] }, { t: [1, 2] }, { t: [1, 2, 3, 4] }], 8), { mode });
        expect(Array.from(r.cluster)).toEqual([0, 1, 0]);
        expect(r.similarity[2]).toBe(
          Math.fround(Number(2n * BigInt(Math.trunc(Math.fround(0.5) * Math.fround(Math.SQRT1_2) * SCALE))) / SCALE),
        );
      }
    }
  });

  it('an aborted signal rejects with AbortError', async () => {
    using c = new StreamClusterer({ threshold: 0.5, backend: 'cpu' });
    const ac = new AbortController();
    ac.abort();
    await expect(c.add(csr([{ t: [1] }], 4), { signal: ac.signal })).rejects.toMatchObject({ code: 'ABORT_ERR' });
  });

  it('accepts unsorted distinct terms and clusters them as their sorted rows', async () => {
    const r = rng(77);
    const cols = 0xffffffff;
    const docs: { t: number[]; w: number[] }[] = [];
    for (let i = 0; i < 60; i++) {
      // Ids spread over the whole range and ids 2^26 apart (same table slot under a multiplicative hash).
      const set = new Set<number>();
      const n = 1 + Math.floor(r() * 150);
      while (set.size < n) set.add(r() < 0.5 ? Math.floor(r() * 0xfffffffe) : Math.floor(r() * 60) * 2 ** 26);
      const t = [...set];
      docs.push({ t, w: t.map(() => 0.1 + r()) });
      // The same terms again in the next row: a stamp from the previous row must not count as a repeat.
      if (i % 10 === 0) docs.push({ t: [...t].reverse(), w: t.map(() => 0.1 + r()) });
    }
    const sorted = docs.map(({ t, w }) => {
      const o = t.map((x, i) => i).sort((a, b) => t[a] - t[b]);
      return { t: o.map((i) => t[i]), w: o.map((i) => w[i]) };
    });
    using a = new StreamClusterer({ threshold: 0.3, backend: 'cpu' });
    using b = new StreamClusterer({ threshold: 0.3, backend: 'cpu' });
    const ra = await a.add(csr(docs, cols), { mode: 'sequential' });
    const rb = await b.add(csr(sorted, cols), { mode: 'sequential' });
    expect(Array.from(ra.cluster)).toEqual(Array.from(rb.cluster));
    expect(Array.from(ra.similarity)).toEqual(Array.from(rb.similarity));
    expect(a.size).toBeGreaterThan(0);
  });

  it('rejects bad input with coded errors naming the argument', async () => {
    const badOpts = [
      [{ threshold: 1.5 }, RangeError, /threshold/],
      [{ threshold: 'x' }, TypeError, /threshold/],
      [{ threshold: 0.5, maxTerms: 0 }, RangeError, /maxTerms/],
      [{ threshold: 0.5, maxTerms: 2.5 }, RangeError, /maxTerms/],
      [{ threshold: 0.5, capacity: 0 }, RangeError, /capacity/],
      [{ threshold: 0.5, decay: { maxAge: -1 } }, RangeError, /decay\.maxAge/],
      [{ threshold: 0.5, decay: 3 }, TypeError, /decay/],
      [{ threshold: 0.5, backend: 'tpu' }, TypeError, /backend/],
      [{ threshold: 0.5, tuning: { batchSize: 300 } }, TypeError, /tuning\.batchSize must be one of 256, 512, 1024/],
      [{ threshold: 0.5, tuning: { walk: 'term' } }, TypeError, /tuning\.walk is not a tuning option \(known: batchSize\)/],
      [null, TypeError, /options/],
    ] as const;
    for (const [o, cls, msg] of badOpts) {
      expect(() => new StreamClusterer(o as never)).toThrow(cls);
      expect(() => new StreamClusterer(o as never)).toThrow(msg);
    }
    using c = new StreamClusterer({ threshold: 0.5, backend: 'cpu' });
    const badDocs = [
      [csr([{ t: [1, 2, 1] }], 4), RangeError, /docs row 0 lists term 1 twice/],
      // Long unsorted row after a valid one (the repeated-term table grows and is stamped per row).
      [
        csr([{ t: [5, 3] }, { t: [...Array.from({ length: 200 }, (_, i) => 199 - i), 57] }], 300),
        RangeError,
        /docs row 1 lists term 57 twice/,
      ],
      [csr([{ t: [1, 2], w: [1, -1] }], 4), RangeError, /docs\.values\[1\]=-1/],
      [csr([{ t: [1], w: [NaN] }], 4), RangeError, /docs\.values\[0\]=NaN/],
      [csr([{ t: [9] }], 4), RangeError, /docs/],
      [{ rows: 1, cols: 2 }, TypeError, /docs\.indptr/],
      [null, TypeError, /docs must be a CsrMatrix/],
    ] as const;
    for (const [d, cls, msg] of badDocs) {
      const p = c.add(d as never);
      await expect(p).rejects.toThrow(cls);
      await expect(p).rejects.toThrow(msg);
      await expect(p).rejects.toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT' });
    }
    await expect(c.add(csr([{ t: [1] }], 4), { mode: 'fast' as never })).rejects.toThrow(/mode/);
    expect(c.size).toBe(0);
    expect(() => c.centroid(0)).toThrow(RangeError);
    await c.add(csr([{ t: [1] }], 4));
    expect(() => c.centroid(1)).toThrow(/id must be an integer in \[0, 0\]/);
    expect(() => c.members(-1)).toThrow(RangeError);
    await expect(c.save(42 as never)).rejects.toThrow(TypeError);
    await expect(StreamClusterer.load(path.join(tmpdir(), 'cusim-no-such-file.bin'), { backend: 'cpu' })).rejects.toThrow(/cannot open/);
    const d = new StreamClusterer({ threshold: 0.5, backend: 'cpu' });
    d.dispose();
    expect(() => d.size).toThrow(expect.objectContaining({ code: 'CUSIM_DISPOSED' }));
    await expect(d.add(csr([{ t: [1] }], 4))).rejects.toMatchObject({ code: 'CUSIM_DISPOSED' });
  });

  it('load: counts whose checksums hold but exceed the file are rejected, not sized into an allocation', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cusim-cluster-bad-'));
    try {
      const c = new StreamClusterer({ threshold: 0.5, maxTerms: 4, backend: 'cpu' });
      await c.add(csr([{ t: [1, 2] }, { t: [3] }, { t: [1, 2] }], 4));
      const file = path.join(dir, 'ok.bin');
      await c.save(file);
      const good = readFileSync(file);
      const load = async (bytes: Buffer, name: string) => {
        writeFileSync(path.join(dir, name), bytes);
        return StreamClusterer.load(path.join(dir, name), { backend: 'cpu' });
      };
      // PARM: threshold f64, maxTerms u32, 0 u32, maxAge u64, time u64 (at 24), count u64 (at 32), row entries, sum entries.
      const parm = Buffer.from(sectionBytes(good, 'PARM'));
      parm.writeBigUInt64LE(0x7fffffffn, 32);
      await expect(load(resealed(good, 'PARM', parm), 'count.bin')).rejects.toMatchObject({
        code: 'CUSIM_BAD_FILE',
        message: expect.stringMatching(/more clusters than documents/),
      });
      parm.writeBigUInt64LE(0x7fffffffn, 24); // time: now the count is plausible, the sections are not
      await expect(load(resealed(good, 'PARM', parm), 'count2.bin')).rejects.toThrow(
        /section MEMB has 8 bytes where its parameters give 8589934588/,
      );
      // Cluster 0's sum length (SLEN, u64 each).
      const slen = Buffer.from(sectionBytes(good, 'SLEN'));
      slen.writeBigUInt64LE(1n << 31n, 0);
      await expect(load(resealed(good, 'SLEN', slen), 'sums.bin')).rejects.toThrow(/cluster 0: bad sum length/);
      // A NaN sum, a sum term out of order, a row term outside its sum.
      const sval = Buffer.from(sectionBytes(good, 'SVAL'));
      sval.writeDoubleLE(NaN, 0);
      await expect(load(resealed(good, 'SVAL', sval), 'nan.bin')).rejects.toThrow(/cluster 0: bad sum/);
      const rtrm = Buffer.from(sectionBytes(good, 'RTRM'));
      rtrm.writeUInt32LE(3, 0);
      await expect(load(resealed(good, 'RTRM', rtrm), 'row.bin')).rejects.toThrow(/cluster 0: (bad row|row term outside its sum)/);
      // Trailing garbage and a foreign file.
      await expect(load(Buffer.concat([good, Buffer.from('x')]), 'tail.bin')).rejects.toThrow(/1 unexpected bytes after the end/);
      await expect(load(Buffer.from('{"format":"cusim.text/1"}'), 'json.bin')).rejects.toThrow(/not a cusim file/);
      // The undamaged file still loads.
      const ok = await StreamClusterer.load(file, { backend: 'cpu' });
      expect(ok.size).toBe(c.size);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('load: random truncations and byte flips give only CUSIM_BAD_FILE', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cusim-cluster-fuzz-'));
    try {
      using c = new StreamClusterer({ threshold: 0.3, maxTerms: 8, decay: { maxAge: 40 }, backend: 'cpu' });
      await c.add(randomStream(5, 120, 50, 12));
      const file = path.join(dir, 'ok.bin');
      await c.save(file);
      const bad = path.join(dir, 'bad.bin');
      const codes = await corruptionFuzz(readFileSync(file), async (b) => {
        writeFileSync(bad, b);
        (await StreamClusterer.load(bad, { backend: 'cpu' })).dispose();
      });
      expect(codes.get('CUSIM_BAD_FILE')).toBe(181);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('tfidf', () => {
  it('rejects a column index >= cols naming the entry (update and transform)', () => {
    const bad = { rows: 2, cols: 4, indptr: Uint32Array.of(0, 1, 3), indices: Uint32Array.of(1, 2, 9) };
    const t = new TfidfTable();
    expectInvalid(() => t.update(bad), RangeError, /counts\.indices\[2\]=9 is out of range for cols=4/);
    expect(t.documents).toBe(0);
    expectInvalid(() => t.transform(bad), RangeError, /counts\.indices\[2\]=9 is out of range for cols=4/);
    expectInvalid(() => tfidf(bad), RangeError, /counts\.indices\[2\]/);
  });

  it('streams document frequencies and weights tf * (ln((1 + N) / (1 + df)) + 1)', () => {
    const table = new TfidfTable();
    const a = csr([{ t: [0, 1], w: [2, 1] }, { t: [1] }], 3);
    const wa = tfidf(a, table);
    expect(table.documents).toBe(2);
    expect(table.df(1)).toBe(2);
    expect(table.df(2)).toBe(0);
    const idf = (n: number, df: number) => Math.log((1 + n) / (1 + df)) + 1;
    expect(Array.from(wa.values!)).toEqual([2 * idf(2, 1), idf(2, 2), idf(2, 2)].map(Math.fround));
    table.update(csr([{ t: [2, 0], w: [1, 0] }], 3)); // a zero count is not an occurrence
    expect(table.df(0)).toBe(1);
    expect(table.df(2)).toBe(1);
    expect(Array.from(table.transform(csr([{ t: [2], w: [3] }], 3)).values!)).toEqual([Math.fround(3 * idf(3, 1))]);
    expect(() => table.transform(csr([{ t: [0], w: [-1] }], 3))).toThrow(/counts\.values\[0\]=-1/);
    expect(() => table.update(null as never)).toThrow(TypeError);
  });
});

describeGpu('StreamClusterer cuda equals cpu', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'cusim-cluster-gpu-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('random streams, every T and K, sequential and batch, capacity growth from 1', async () => {
    let seed = 100;
    for (const T of Ts) {
      for (const K of Ks) {
        const docs = randomStream(seed++, 300, 150, K === 200 ? 260 : 50);
        using cpu = new StreamClusterer({ threshold: T, maxTerms: K, backend: 'cpu' });
        const want = await cpu.add(docs, { mode: 'sequential' });
        for (const mode of ['sequential', 'batch'] as const) {
          using g = new StreamClusterer({ threshold: T, maxTerms: K, capacity: 1, backend: 'cuda' });
          const got = await g.add(docs, { mode });
          expect(got.cluster).toEqual(want.cluster);
          expect(got.similarity).toEqual(want.similarity);
          expect(got.created).toEqual(want.created);
          expect(g.size).toBe(cpu.size);
          for (let id = 0; id < cpu.size; id++) expect(g.centroid(id)).toEqual(cpu.centroid(id));
        }
      }
    }
  });

  it('real text and long streams over many batches (sizes not multiples of any block), with decay', async () => {
    const text = npmText();
    for (const [docs, K, T, maxAge] of [
      [text, 35, 0.3, undefined],
      [text, 8, 0.6, 50],
      [randomStream(7, 3001, 300, 30), 35, 0.3, 200],
      [randomStream(8, 1, 30, 5), 8, 0.3, undefined],
      [bigIds(randomStream(9, 500, 50, 12)), 8, 0.3, undefined],
    ] as const) {
      const decay = maxAge === undefined ? undefined : { maxAge };
      using cpu = new StreamClusterer({ threshold: T, maxTerms: K, decay, backend: 'cpu' });
      const want = await cpu.add(docs, { mode: 'sequential' });
      for (const mode of ['sequential', 'batch', 'auto'] as const) {
        using g = new StreamClusterer({ threshold: T, maxTerms: K, decay, capacity: 3, backend: 'cuda' });
        // Two calls, so pending row updates cross an add() boundary.
        const h = Math.floor(docs.rows / 2);
        const a = await g.add(slice(docs, 0, h), { mode });
        const b = await g.add(slice(docs, h, docs.rows), { mode });
        expect([...a.cluster, ...b.cluster]).toEqual(Array.from(want.cluster));
        expect([...a.similarity, ...b.similarity]).toEqual(Array.from(want.similarity));
        if (docs.rows > 1) expect(a.kernelMs + b.kernelMs).toBeGreaterThan(0);
      }
    }
  });

  // Kernel variants are picked per clusterer from the environment (read when
  // the CUDA scorer is created): every micro-batch size and both sequential
  // scans must reproduce the CPU's sequential results exactly.
  it('every micro-batch size (tuning.batchSize): batches not multiples of B, long postings, filter collisions, duplicates, empty docs, growth, decay', async () => {
    // Injective and monotone, so rows stay sorted; ids 65,536 apart share
    // their low 16 bits (the document filter's bit index).
    const collide = (m: CsrMatrix): CsrMatrix => ({
      ...m,
      cols: 65536 * 64,
      indices: m.indices.map((t) => (t % 7) + 65536 * Math.floor(t / 7)),
    });
    // Every third copy carries one extra term, so the cluster's row changes
    // inside batches (re-scoring by the host) as well as between them.
    const repeated = csr(
      Array.from({ length: 700 }, (_, i) => ({
        t: [3, 5, 8, 13, 21, 34, ...(i % 3 === 0 ? [1000 + (i % 11)] : [])],
        w: [1, 2, 1, 3, 1, 2, ...(i % 3 === 0 ? [0.5] : [])],
      })),
      2000,
    );
    // One cluster, then a batch of only empty documents (an empty table against existing rows).
    const empties = csr([{ t: [1, 4] }, { t: [] }, { t: [] }, { t: [] }], 10);
    for (const [name, docs, K, T, maxAge] of [
      ['random, 1300 docs', randomStream(31, 1300, 150, 40), 35, 0.3, undefined],
      ['tiny vocabulary: every posting list long', randomStream(32, 1100, 12, 8), 8, 0.6, undefined],
      ['filter collisions', collide(randomStream(33, 600, 400, 30)), 35, 0.3, 40],
      ['one document repeated 700 times', repeated, 35, 0.6, undefined],
      ['one document per add', randomStream(34, 40, 30, 9), 8, 0.3, undefined],
      ['empty documents after a cluster', empties, 8, 0.3, undefined],
      ['decay', randomStream(35, 900, 80, 20), 35, 0.3, 25],
    ] as const) {
      const decay = maxAge === undefined ? undefined : { maxAge };
      using cpu = new StreamClusterer({ threshold: T, maxTerms: K, decay, backend: 'cpu' });
      const want = await cpu.add(docs, { mode: 'sequential' });
      const check = async (label: string, mode: 'sequential' | 'batch', tuning?: ClusterTuning) => {
        using g = new StreamClusterer({ threshold: T, maxTerms: K, decay, capacity: 1, backend: 'cuda', tuning });
        // Single-document batches against existing rows, or a third then the rest.
        const h = Math.floor(docs.rows / 3);
        const cuts = name === 'one document per add' ? Array.from({ length: docs.rows + 1 }, (_, i) => i) : [0, h, docs.rows];
        const parts = [];
        for (let i = 0; i + 1 < cuts.length; i++) parts.push(await g.add(slice(docs, cuts[i], cuts[i + 1]), { mode }));
        expect(
          parts.flatMap((p) => Array.from(p.cluster)),
          `${name}: ${label}`,
        ).toEqual(Array.from(want.cluster));
        expect(
          parts.flatMap((p) => Array.from(p.similarity)),
          `${name}: ${label}`,
        ).toEqual(Array.from(want.similarity));
        expect(
          parts.flatMap((p) => Array.from(p.created)),
          `${name}: ${label}`,
        ).toEqual(Array.from(want.created));
        expect(g.size).toBe(cpu.size);
        for (let id = 0; id < cpu.size; id++) expect(g.centroid(id)).toEqual(cpu.centroid(id));
      };
      await check('sequential', 'sequential');
      for (const batchSize of [256, 512, 1024] as const) await check(`batch ${batchSize}`, 'batch', { batchSize });
    }
  });

  it('state saved on cpu loads on cuda and continues identically', async () => {
    const docs = randomStream(21, 400, 90, 20);
    using cpu = new StreamClusterer({ threshold: 0.3, maxTerms: 8, backend: 'cpu' });
    await cpu.add(slice(docs, 0, 250));
    const file = path.join(dir, 's.bin');
    await cpu.save(file);
    using g = await StreamClusterer.load(file, { backend: 'cuda' });
    const want = await cpu.add(slice(docs, 250, 400));
    for (const mode of ['sequential', 'batch'] as const) {
      using g2 = await StreamClusterer.load(file, { backend: 'cuda' });
      expect((await g2.add(slice(docs, 250, 400), { mode })).cluster).toEqual(want.cluster);
    }
    expect((await g.add(slice(docs, 250, 400))).similarity).toEqual(want.similarity);
  });
});
