// Non-finite weights (NaN, ±Infinity, and numbers that overflow float32 on
// the way in from a number[] or Float64Array) are refused by every entry
// point that reads weights, with a coded RangeError naming the entry and its
// row (one check, checkWeights in lib/validate.ts). They used to be accepted:
// MinHashLSH.groups verified with them and returned groups.
import { describe, expect, it } from 'vitest';
import { MinHashLSH, StreamClusterer, TfidfTable, WeightedMinHash, dedup, tfidf, type CsrMatrix } from '../lib/index.js';
import { backends } from './helpers.js';

// Three rows over 4 columns; row 1 holds the weight under test at entry 3.
function matrix(bad: number, kind: 'f32' | 'f64' | 'array'): CsrMatrix {
  const vals = [1, 2, 1, bad, 3, 1];
  const values = kind === 'f32' ? Float32Array.from(vals) : kind === 'f64' ? Float64Array.from(vals) : vals;
  return {
    rows: 3,
    cols: 4,
    indptr: Uint32Array.of(0, 2, 4, 6),
    indices: Uint32Array.of(0, 1, 1, 2, 0, 3),
    values: values as Float32Array,
  };
}

const BAD: [number, 'f32' | 'f64' | 'array'][] = [
  [Infinity, 'f32'],
  [-Infinity, 'f32'],
  [NaN, 'f32'],
  [1e39, 'f64'],
  [-1e39, 'array'],
  [NaN, 'array'],
];

async function refused(call: () => unknown, name: string): Promise<void> {
  const p = Promise.resolve().then(call);
  await expect(p).rejects.toThrow(RangeError);
  await expect(p).rejects.toThrow(new RegExp(`^${name}\\.values\\[3\\]=\\S+ in row 1: weights must be finite$`));
  await expect(p).rejects.toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT' });
}

for (const backend of backends) {
  describe(`non-finite weights are refused wherever weights are read (${backend})`, () => {
    for (const [bad, kind] of BAD) {
      it(`${bad} in a ${kind} matrix`, async () => {
        using wmh = new WeightedMinHash({ dim: 4, samples: 8, backend });
        await refused(() => wmh.hash(matrix(bad, kind)), 'matrix');
        const sigs = await wmh.hash(matrix(1, 'f32'));
        using lsh = new MinHashLSH({ threshold: 0.5, samples: 8, backend });
        lsh.insert(Uint32Array.of(0, 1, 2), sigs);
        await refused(() => lsh.groups({ verify: 'exact', matrix: matrix(bad, kind) }), 'matrix');
        await refused(() => dedup(matrix(bad, kind), { threshold: 0.5, backend }), 'matrix');
        using c = new StreamClusterer({ threshold: 0.5, backend });
        await refused(() => c.add(matrix(bad, kind)), 'docs');
        expect(c.documents).toBe(0);
        await refused(() => tfidf(matrix(bad, kind)), 'counts');
        await refused(() => new TfidfTable().update(matrix(bad, kind)), 'counts');
      });
    }

    it('finite weights at the ends of float32 are accepted', async () => {
      using wmh = new WeightedMinHash({ dim: 4, samples: 8, backend });
      const m = matrix(3.4e38, 'f64');
      expect((await wmh.hash(m)).length).toBe(3 * 8 * 2);
      expect((await dedup(m, { threshold: 0.5, backend })).group.length).toBe(3);
    });
  });
}
