// The join's token order (native/join_prepare.cc OrderByKey): indices of the
// nonzero keys by (key, index), a parallel counting sort for small keys and a
// pair sort for large ones, against a plain stable sort.
import { describe, expect, it } from 'vitest';
import { native } from '../lib/addon.js';
import { threads } from '../lib/index.js';
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
