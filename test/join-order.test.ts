// The join's token order (native/join_prepare.cc OrderByKey): indices of the
// nonzero keys by (key, index), a parallel counting sort for small keys and a
// pair sort for large ones, against a plain stable sort; and the sparse-id
// vocabulary (ids over the whole 2^32 space, counted and bucketed on all
// cores) against the same rows with dense ids.
import { describe, expect, it } from 'vitest';
import { native } from '../lib/addon.js';
import { similarityJoin, threads, type CsrMatrix, type JoinResult } from '../lib/index.js';
import { randInt, rng } from './helpers.js';

/** Indices of the nonzero keys, stably sorted by key (Array.prototype.sort is stable). */
function oracle(keys: Uint32Array): number[] {
  const idx: number[] = [];
  for (let i = 0; i < keys.length; i++) if (keys[i] !== 0) idx.push(i);
  return idx.sort((a, b) => keys[a] - keys[b]);
}

/** The first difference between the native order and the oracle's, or ''. */
function orderDiff(keys: Uint32Array): string {
  const got = native().joinOrderByKey(keys);
  const want = oracle(keys);
  if (got.length !== want.length) return `${got.length} indices, want ${want.length}`;
  for (let k = 0; k < want.length; k++) if (got[k] !== want[k]) return `position ${k}: ${got[k]}, want ${want[k]}`;
  return '';
}

describe('join token order (parallel counting sort) equals a stable sort by key', () => {
  it('random keys: zeros, small keys with many ties, keys past the dense range up to 2^32-1, every thread count', () => {
    const before = threads();
    try {
      const r = rng(29);
      // 200,000 keys: several of the sort's 2^16-key blocks.
      const keys = new Uint32Array(200_000);
      for (let i = 0; i < keys.length; i++) {
        const u = r();
        if (u < 0.2) keys[i] = 0;
        else if (u < 0.9) keys[i] = 1 + randInt(r, 50);
        else if (u < 0.97) keys[i] = 1 + randInt(r, 5000);
        else if (u < 0.99) keys[i] = 4090 + randInt(r, 12);
        else keys[i] = [4096, 65536, 2 ** 32 - 1, 2 ** 31 + randInt(r, 1000)][randInt(r, 4)];
      }
      for (let t = 1; t <= 4; t++) {
        threads(t);
        expect(orderDiff(keys), `${t} threads`).toBe('');
      }
    } finally {
      threads(before);
    }
  });

  it('edge cases: empty, all zero, one key, only large keys, descending keys', () => {
    expect(Array.from(native().joinOrderByKey(new Uint32Array(0)))).toEqual([]);
    expect(Array.from(native().joinOrderByKey(new Uint32Array(70_000)))).toEqual([]);
    expect(Array.from(native().joinOrderByKey(Uint32Array.from([7])))).toEqual([0]);
    expect(Array.from(native().joinOrderByKey(Uint32Array.from([2 ** 32 - 1, 5000, 2 ** 32 - 1, 4096])))).toEqual([3, 1, 0, 2]);
    const desc = new Uint32Array(100_000);
    for (let i = 0; i < desc.length; i++) desc[i] = desc.length - i;
    expect(orderDiff(desc)).toBe('');
  });
});

/** CSR of rows of token ids; each id mapped through `map`. */
function csr(rows: number[][], cols: number, map: (t: number) => number): CsrMatrix {
  const indptr = new Uint32Array(rows.length + 1);
  rows.forEach((row, i) => (indptr[i + 1] = indptr[i] + row.length));
  return { rows: rows.length, cols, indptr, indices: Uint32Array.from(rows.flat().map(map)) };
}

/** The first difference between two join results' pairs and overlaps, or '' (plain loops, not a deep equal of large arrays). */
function pairDiff(got: JoinResult, want: JoinResult): string {
  if (got.left.length !== want.left.length) return `${got.left.length} pairs, want ${want.left.length}`;
  for (let k = 0; k < want.left.length; k++)
    if (got.left[k] !== want.left[k] || got.right[k] !== want.right[k] || got.overlap[k] !== want.overlap[k])
      return `pair ${k}: (${got.left[k]}, ${got.right[k]}, ${got.overlap[k]}), want (${want.left[k]}, ${want.right[k]}, ${want.overlap[k]})`;
  return '';
}

describe('join over sparse ids (the bucketed vocabulary) equals the same join over dense ids', () => {
  it('ids up to 2^32-2, repeats within rows, empty rows, near copies, several thread counts', async () => {
    const before = threads();
    try {
      const r = rng(2929);
      // 1,200 distinct ids drawn from the whole space (0 and 2^32-2, the
      // largest that cols = 2^32-1 admits, among them) over about 640,000
      // tokens: several of the vocabulary's 2^18-token parts, so its blocks
      // count and scatter separately.
      const ids = new Set<number>([0, 2 ** 32 - 2, 2 ** 32 - 3]);
      while (ids.size < 1200) ids.add(randInt(r, 2 ** 32 - 1));
      const vocab = [...ids];
      const rows: number[][] = [];
      for (let i = 0; i < 8000; i++) {
        if (i % 500 === 7) rows.push([]);
        else if (i > 0 && r() < 0.3) {
          const src = rows[randInt(r, i)];
          rows.push([...src.slice(0, src.length - randInt(r, 2)), ...(r() < 0.3 ? src.slice(0, 3) : [])]);
        } else rows.push(Array.from({ length: 20 + randInt(r, 120) }, () => randInt(r, vocab.length)));
      }
      const dense = csr(rows, vocab.length, (t) => t);
      const sparse = csr(rows, 2 ** 32 - 1, (t) => vocab[t]);
      expect(sparse.cols).toBeGreaterThan(4 * sparse.indices.length + 2 ** 20); // the vocabulary path
      expect(sparse.indices.length).toBeGreaterThan(2 * 2 ** 18);
      for (const threshold of [0.6, 0.95]) {
        threads(1);
        const want = await similarityJoin(dense, { threshold, backend: 'cpu' });
        expect(want.left.length, `pairs at t=${threshold}`).toBeGreaterThan(100);
        for (const t of [1, 2, 5]) {
          threads(t);
          const got = await similarityJoin(sparse, { threshold, backend: 'cpu' });
          expect(pairDiff(got, want), `${t} threads, t=${threshold}`).toBe('');
        }
      }
    } finally {
      threads(before);
    }
  });

  it('a few tokens with ids of 2^31 and over (a bucket shift of 32): one set alone, and two equal sets, exact', async () => {
    // Crashed before: the id's bucket was a 32-bit shift by 32.
    const big = [4_000_000_000, 4_000_000_000, 3_000_000_000];
    const one = await similarityJoin(
      csr([big], 2 ** 32 - 1, (t) => t),
      { threshold: 0.5, backend: 'cpu' },
    );
    expect(one.left.length).toBe(0);
    const two = await similarityJoin(
      csr([big, [3_000_000_000, 2 ** 32 - 2], big], 2 ** 32 - 1, (t) => t),
      {
        threshold: 0.5,
        backend: 'cpu',
      },
    );
    // Rows 0 and 2 are {4e9, 3e9}; row 1 shares 3e9 with each: Jaccard 1/3.
    expect([Array.from(two.left), Array.from(two.right), Array.from(two.overlap)]).toEqual([[0], [2], [2]]);
  });
});
