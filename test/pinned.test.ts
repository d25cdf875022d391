import { describe, expect, it } from 'vitest';
import { native } from '../lib/addon.js';
import { WeightedMinHash, devices, isPinned, pinnedArray } from '../lib/index.js';
import type { CsrMatrix } from '../lib/index.js';
import { backends, describeGpu, expectInvalid, hasGpu, randomCsr, rng } from './helpers.js';

/** The same matrix with indices and values copied into page-locked arrays. */
function pinnedCopy(m: CsrMatrix): CsrMatrix {
  const indices = pinnedArray(Uint32Array, m.indices.length);
  indices.set(m.indices);
  const values = pinnedArray(Float32Array, m.values!.length);
  values.set(m.values!);
  return { ...m, indices, values };
}

describe('pinnedArray', () => {
  it('returns zero-filled arrays of the asked type and length, page-locked exactly when a GPU is present', () => {
    for (const T of [Uint8Array, Int32Array, Uint32Array, Float32Array, Float64Array] as const) {
      const a = pinnedArray(T, 1000);
      expect(a).toBeInstanceOf(T);
      expect(a.length).toBe(1000);
      expect(a.every((x: number) => x === 0)).toBe(true);
      expect(isPinned(a)).toBe(devices().cuda);
    }
    expect(pinnedArray(Uint32Array, 0).length).toBe(0);
    expect(isPinned(new Uint32Array(4))).toBe(false);
  });

  it('rejects bad arguments naming them', () => {
    expectInvalid(() => pinnedArray(Array as never, 4), TypeError, /type must be a typed array constructor/);
    expectInvalid(() => pinnedArray(Uint32Array, -1), RangeError, /length must be an integer/);
    expectInvalid(() => pinnedArray(Uint32Array, 1.5), RangeError, /length must be an integer/);
  });

  it('refuses lengths no typed array can have, and allocations that cannot be satisfied, with coded errors (V8 aborted the process)', () => {
    for (const T of [Uint8Array, Float64Array] as const) {
      // Checked before anything is allocated (the typed array made afterwards threw an uncoded RangeError).
      expect(() => pinnedArray(T, 2 ** 50 / T.BYTES_PER_ELEMENT)).toThrow(
        expect.objectContaining({ code: 'CUSIM_INVALID_ARGUMENT', name: 'RangeError' }),
      );
    }
    expect(() => native().allocPinned(2 ** 50)).toThrow(
      expect.objectContaining({ code: 'CUSIM_OUT_OF_MEMORY', message: expect.stringMatching(/could not allocate 1125899906842624 bytes/) }),
    );
    expect(pinnedArray(Uint8Array, 16).length).toBe(16);
  });
});

describe('WeightedMinHash hash({ out })', () => {
  it('writes into the given array (plain or pinned) and returns its prefix, equal to a fresh result', async () => {
    const m = randomCsr(rng(3), 57, 301, (i) => (i % 9 === 0 ? 0 : 1 + (i % 23)));
    for (const backend of backends) {
      using g = new WeightedMinHash({ dim: 301, samples: 24, seed: 4, backend });
      const ref = await g.hash(m);
      for (const out of [new Uint32Array(ref.length + 5), pinnedArray(Uint32Array, ref.length)]) {
        const got = await g.hash(m, { out });
        expect(got.buffer).toBe(out.buffer);
        expect(got.length).toBe(ref.length);
        expect(got).toEqual(ref);
        const part = await g.hash(m, { out, rowStart: 10, rowEnd: 20 });
        expect(part).toEqual(ref.subarray(10 * 48, 20 * 48));
      }
    }
  });

  it('rejects an out of the wrong type or length', async () => {
    using g = new WeightedMinHash({ dim: 10, samples: 2, backend: 'cpu' });
    const m = randomCsr(rng(1), 3, 10, () => 3);
    await expect(g.hash(m, { out: new Float32Array(12) as never })).rejects.toThrow(/out must be a Uint32Array/);
    await expect(g.hash(m, { out: new Uint32Array(11) })).rejects.toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT', name: 'RangeError' });
  });

  it('hashes the matrix as it was at the call when out shares its memory (inputs are copied first)', async () => {
    for (const backend of backends) {
      using g = new WeightedMinHash({ dim: 100, samples: 16, backend });
      const rows = 2000;
      // indptr and indices as views of one buffer long enough to serve as out too.
      const make = () => {
        const buf = new Uint32Array(rows * 32 + rows * 4 + 1);
        const indptr = buf.subarray(0, rows + 1);
        const indices = buf.subarray(rows + 1, rows + 1 + rows * 4);
        for (let r = 0; r <= rows; r++) indptr[r] = 4 * r;
        for (let i = 0; i < indices.length; i++) indices[i] = (i * 7) % 100;
        const values = new Float32Array(rows * 4).fill(1);
        return { buf, m: { rows, cols: 100, indptr, indices, values } };
      };
      const { m: m0 } = make();
      const ref = await g.hash({ ...m0, indptr: m0.indptr.slice(), indices: m0.indices.slice() });
      let { buf, m } = make();
      expect(await g.hash(m, { out: buf })).toEqual(ref);
      ({ buf, m } = make());
      expect(await g.hash(m, { out: buf.subarray(rows) })).toEqual(ref);
      ({ m } = make());
      const overValues = new Uint32Array(m.values.buffer);
      expect(await g.hash({ ...m, indices: m.indices.slice() }, { out: overValues, rowEnd: 100 })).toEqual(ref.subarray(0, 100 * 32));
    }
  });
});

describeGpu('WeightedMinHash with page-locked inputs and output (CUDA)', () => {
  it('gives byte-identical signatures to pageable arrays: whole, sliced, reused out, several GPUs', async () => {
    const m = randomCsr(rng(9), 2500, 4001, (i) => (i % 97 === 0 ? 0 : 1 + ((i * 37) % 150)));
    const p = pinnedCopy(m);
    expect(isPinned(p.indices) && isPinned(p.values!)).toBe(true);
    using g = new WeightedMinHash({ dim: 4001, samples: 64, seed: 8, backend: 'cuda', devices: 'all' });
    const ref = await g.hash(m);
    const out = pinnedArray(Uint32Array, ref.length);
    expect(await g.hash(p, { out })).toEqual(ref);
    out.fill(7);
    expect(await g.hash(p, { out })).toEqual(ref);
    expect(await g.hash(p)).toEqual(ref);
    expect(await g.hash(m, { out })).toEqual(ref);
    expect(await g.hash(p, { out, rowStart: 1234, rowEnd: 2500 })).toEqual(ref.subarray(1234 * 128, 2500 * 128));
  });

  it('checks pinned inputs on the GPU: a bad column or +inf weight is named, nothing is read out of range', async () => {
    const m = pinnedCopy(randomCsr(rng(10), 800, 999, (i) => 1 + (i % 60)));
    const nnz = m.indptr[m.rows];
    using g = new WeightedMinHash({ dim: 999, samples: 8, backend: 'cuda', devices: [0] });
    const ref = await g.hash(m);
    const col = m.indices[nnz - 3];
    m.indices[nnz - 3] = 999;
    await expect(g.hash(m)).rejects.toThrow(new RegExp(`matrix\\.indices\\[${nnz - 3}\\]=999 is out of range for cols=999`));
    m.indices[nnz - 3] = col;
    const w = m.values![nnz - 2];
    m.values![nnz - 2] = Infinity;
    await expect(g.hash(m)).rejects.toThrow(new RegExp(`matrix\\.values\\[${nnz - 2}\\]=Infinity`));
    m.values![nnz - 2] = w;
    expect(await g.hash(m)).toEqual(ref);
  });
});

// bench/minhash.js's probe of two ways to page-lock a staging block.
describe('probePageLocking', () => {
  it('refuses a size that is not a positive integer with a coded error naming it', () => {
    for (const bad of [0, -1, 1.5, NaN])
      expectInvalid(() => native().probePageLocking(bad), RangeError, /bytes must be a positive integer/);
  });
  it.skipIf(hasGpu)('rejects with CUSIM_CUDA_ERROR where CUDA is unavailable', async () => {
    await expect(native().probePageLocking(1 << 20)).rejects.toMatchObject({ code: 'CUSIM_CUDA_ERROR' });
  });
});

describeGpu('probePageLocking', () => {
  it('page-locks a block both ways, and each uploads (timings of every step, a positive H2D rate from each)', async () => {
    const p = await native().probePageLocking(64 << 20);
    for (const k of ['hostAllocMs', 'hostFreeMs', 'touchMs', 'registerMs', 'unregisterMs'] as const)
      expect(p[k], k).toBeGreaterThanOrEqual(0);
    expect(p.hostAllocH2dGBs).toBeGreaterThan(0);
    expect(p.registeredH2dGBs).toBeGreaterThan(0);
  });
});
