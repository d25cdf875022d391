// Independent references shared by the vitest files and the fuzz harness
// (plain JavaScript so both can load it): the tests' seeded RNG and the
// weighted MinHash (ICWS) oracle.

export { rng as mulberry32 } from './rng.mjs';

const f = Math.fround;
const SENTINEL = 0xffffffff;

/**
 * The ICWS hash of rows [rowStart, rowEnd) in float32 arithmetic, op by op,
 * from [samples][dim] tables { rs, lnCs, betas }: (k*, t*) per sample, the
 * sentinel pair for a row without positive weight.
 */
export function oracleHash(m, p, samples, rowStart = 0, rowEnd = m.rows) {
  const dim = m.cols;
  const out = new Uint32Array((rowEnd - rowStart) * samples * 2);
  for (let r = rowStart; r < rowEnd; r++) {
    for (let s = 0; s < samples; s++) {
      let bestA = Infinity;
      let bestK = SENTINEL;
      let bestT = 0;
      for (let j = m.indptr[r]; j < m.indptr[r + 1]; j++) {
        const w = m.values ? m.values[j] : 1;
        if (!(w > 0)) continue;
        const d = m.indices[j];
        const rr = p.rs[s * dim + d];
        const c = p.lnCs[s * dim + d];
        const b = p.betas[s * dim + d];
        const lw = f(Math.log(w));
        const t = Math.floor(f(f(lw / rr) + b));
        const lna = f(f(c - f(f(t - b) * rr)) - rr);
        if (lna < bestA) {
          bestA = lna;
          bestK = d;
          bestT = t;
        }
      }
      const o = ((r - rowStart) * samples + s) * 2;
      out[o] = bestK;
      out[o + 1] = bestK === SENTINEL ? SENTINEL : bestT >>> 0;
    }
  }
  return out;
}
