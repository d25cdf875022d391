// The real crossing of 4 GiB on the CPU: the signature array that used to
// abort with "double free", 4.3 GB in one typed array (and, as Node copies a
// result it cannot wrap, 8.5 GB at the peak). It runs apart from `npm test`,
// so that a machine with 4 GB can run that: `npm run test:large-memory`
// (.ci/run runs both). test/scale.test.ts crosses the same limits at a lowered size.
import { describe, expect, it } from 'vitest';
import { WeightedMinHash, MinHash, EMPTY_ROW_SENTINEL, type CsrMatrix } from '../lib/index.js';

describe('4 GiB of signatures (CPU, the real boundary)', () => {
  it('WeightedMinHash: 8,193 rows x 65,536 samples = 4.3 GB of signatures, one array, no abort', async () => {
    // Empty rows cost only their sentinel fill; the last row has one nonzero.
    const rows = 8193;
    const indptr = new Uint32Array(rows + 1);
    indptr[rows] = 1;
    const m: CsrMatrix = { rows, cols: 10, indptr, indices: Uint32Array.of(7), values: Float32Array.of(2.5) };
    using wmh = new WeightedMinHash({ dim: 10, samples: 65536, seed: 3, backend: 'cpu' });
    let sig: Uint32Array | undefined = await wmh.hash(m);
    expect(sig.length).toBe(rows * 65536 * 2);
    expect(sig.byteLength).toBeGreaterThan(2 ** 32);
    for (let i = 0; i < sig.length - 2 * 65536; i += 999_983) expect(sig[i]).toBe(EMPTY_ROW_SENTINEL);
    const last = await wmh.hash({
      rows: 1,
      cols: 10,
      indptr: Uint32Array.of(0, 1),
      indices: Uint32Array.of(7),
      values: Float32Array.of(2.5),
    });
    expect(sig.subarray(sig.length - 2 * 65536)).toEqual(last);
    // Classic MinHash into the same 4.3 GB (out), 16,385 rows x 65,536 samples past 4 GiB too.
    using mh = new MinHash({ samples: 65536, seed: 1, backend: 'cpu' });
    const crows = 16385;
    const cptr = new Uint32Array(crows + 1);
    cptr[crows] = 2;
    const cm: CsrMatrix = { rows: crows, cols: 2 ** 32, indptr: cptr, indices: Uint32Array.of(1, 0xffffffff) };
    const out = await mh.hash(cm, { out: sig });
    expect(out.byteLength).toBeGreaterThan(2 ** 32);
    expect(out[0]).toBe(0xffffffff);
    const lastC = await mh.hash({ rows: 1, cols: 2 ** 32, indptr: Uint32Array.of(0, 2), indices: Uint32Array.of(1, 0xffffffff) });
    expect(out.subarray(out.length - 65536)).toEqual(lastC);
    sig = undefined;
  });
});
