// A near-duplicate corpus for the LSH storage tests: clusters of perturbed
// copies of random rows (exact copies and empty rows among them), hashed with
// the real weighted MinHash so signatures follow the vectors.
import { WeightedMinHash, type CsrMatrix } from '../lib/index.js';
import { randInt, rng } from './helpers.js';

export interface LshCorpus {
  matrix: CsrMatrix & { values: Float32Array };
  sigs: Uint32Array;
  samples: number;
  rows: number;
}

export async function lshCorpus(seed: number, clusters: number, samples = 64, cols = 2000): Promise<LshCorpus> {
  const r = rng(seed);
  const rowsIdx: number[][] = [];
  const rowsVal: number[][] = [];
  for (let c = 0; c < clusters; c++) {
    const base = new Map<number, number>();
    const len = 5 + randInt(r, 40);
    while (base.size < len) base.set(randInt(r, cols), 0.1 + r());
    const members = 1 + randInt(r, 5);
    for (let m = 0; m < members; m++) {
      const v = new Map(base);
      const u = r();
      if (m > 0 && u < 0.7) {
        for (const k of [...v.keys()]) if (r() < 0.08) v.delete(k);
        if (r() < 0.5) v.set(randInt(r, cols), r());
        for (const k of [...v.keys()]) if (r() < 0.1) v.set(k, v.get(k)! * (0.9 + 0.2 * r()));
      }
      // m > 0 && u >= 0.7: an exact copy
      const keys = [...v.keys()].sort((a, b) => a - b);
      rowsIdx.push(keys);
      rowsVal.push(keys.map((k) => v.get(k)!));
    }
    if (r() < 0.1) {
      rowsIdx.push([]);
      rowsVal.push([]);
    }
  }
  const indptr = new Uint32Array(rowsIdx.length + 1);
  rowsIdx.forEach((x, i) => (indptr[i + 1] = indptr[i] + x.length));
  const matrix = {
    rows: rowsIdx.length,
    cols,
    indptr,
    indices: Uint32Array.from(rowsIdx.flat()),
    values: Float32Array.from(rowsVal.flat()),
  };
  using wmh = new WeightedMinHash({ dim: cols, samples, seed: 3, backend: 'cpu' });
  const sigs = await wmh.hash(matrix);
  return { matrix, sigs, samples, rows: matrix.rows };
}

/** Rows [b, e) of a signature array. */
export function sigRows(sigs: Uint32Array, samples: number, b: number, e: number): Uint32Array {
  return sigs.subarray(b * samples * 2, e * samples * 2);
}
