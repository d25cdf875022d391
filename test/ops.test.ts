import { describe, expect, it } from 'vitest';
import { popcountRows } from '../lib/index.js';
import { backends, describeGpu, randomBits, rng } from './helpers.js';

function bruteForce(words: Uint32Array, rows: number, bits: number): Uint32Array {
  const w = bits / 32;
  const out = new Uint32Array(rows);
  for (let r = 0; r < rows; r++) {
    let c = 0;
    for (let i = 0; i < w; i++) {
      let x = words[r * w + i];
      while (x) {
        x &= x - 1;
        c++;
      }
    }
    out[r] = c;
  }
  return out;
}

describe('popcountRows', () => {
  for (const backend of backends) {
    it(`${backend}: equals a bit-by-bit count (rows not a multiple of any block)`, async () => {
      const r = rng(7);
      for (const [rows, bits] of [
        [1, 32],
        [1003, 64],
        [517, 1024],
        [0, 256],
      ] as const) {
        const data = randomBits(r, rows, bits);
        const res = await popcountRows({ data, rows, bits }, { backend });
        expect(res.backend).toBe(backend);
        expect(res.counts).toEqual(bruteForce(data, rows, bits));
      }
    });
  }

  it('accepts Uint8Array codes, aligned or not', async () => {
    const buf = new Uint8Array(1 + 8 * 3);
    for (let i = 0; i < buf.length; i++) buf[i] = (i * 37) & 0xff;
    const unaligned = buf.subarray(1);
    const res = await popcountRows({ data: unaligned, rows: 3, bits: 64 }, { backend: 'cpu' });
    const copy = new Uint32Array(unaligned.slice().buffer);
    expect(res.counts).toEqual(bruteForce(copy, 3, 64));
  });

  it('rejects bad codes with a coded error naming the argument', async () => {
    const bad = [
      [{ data: new Uint32Array(3), rows: 2, bits: 64 }, RangeError, /codes\.data has 3 words/],
      [{ data: new Uint32Array(2), rows: 1, bits: 48 }, RangeError, /codes\.bits must be a multiple of 32/],
      [{ data: new Float32Array(2), rows: 1, bits: 64 }, TypeError, /codes\.data must be a Uint32Array or Uint8Array/],
      [null, TypeError, /codes must be packed codes/],
    ] as const;
    for (const [input, cls, msg] of bad) {
      const p = popcountRows(input as never, { backend: 'cpu' });
      await expect(p).rejects.toThrow(cls);
      await expect(p).rejects.toThrow(msg);
      await expect(p).rejects.toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT' });
    }
  });

  it('an aborted signal rejects with AbortError before any work', async () => {
    const ac = new AbortController();
    ac.abort();
    await expect(popcountRows({ data: new Uint32Array(1), rows: 1, bits: 32 }, { signal: ac.signal })).rejects.toMatchObject({
      name: 'AbortError',
      code: 'ABORT_ERR',
    });
  });
});

describeGpu('popcountRows', () => {
  it('cuda equals cpu on random codes, including one row and large odd sizes', async () => {
    const r = rng(11);
    for (const [rows, bits] of [
      [1, 32],
      [100_003, 256],
      [4097, 512],
    ] as const) {
      const data = randomBits(r, rows, bits);
      const [a, b] = await Promise.all([
        popcountRows({ data, rows, bits }, { backend: 'cpu' }),
        popcountRows({ data, rows, bits }, { backend: 'cuda' }),
      ]);
      expect(b.counts).toEqual(a.counts);
      expect(b.kernelMs).toBeGreaterThan(0);
    }
  });
});
