// similarityJoin / similarityJoinStream. Reference: every pair by brute
// force, with the library's exact test (similarity in double >= threshold,
// overlap > 0, token ids deduplicated per row).
import { breakCsr, copyCsr, csrViews, diff, randomCsr } from '../gen.mjs';
import { scenarioCase, spoilOptions } from './common.mjs';

export const name = 'join';
const MEASURES = ['jaccard', 'cosine', 'dice', 'overlap'];

function rowSet(m, r) {
  return new Set(m.indices.subarray(m.indptr[r], m.indptr[r + 1]));
}

export function bruteJoin(sets, against, measure, t) {
  const L = [];
  const R = [];
  const other = against ?? sets;
  for (let i = 0; i < sets.rows; i++) {
    const a = rowSet(sets, i);
    for (let j = against ? 0 : i + 1; j < other.rows; j++) {
      const b = rowSet(other, j);
      let o = 0;
      for (const x of a) if (b.has(x)) o++;
      if (o === 0) continue;
      const s =
        measure === 'jaccard'
          ? o / (a.size + b.size - o)
          : measure === 'dice'
            ? (2 * o) / (a.size + b.size)
            : measure === 'cosine'
              ? o / Math.sqrt(a.size * b.size)
              : o;
      if (s >= t) {
        L.push(i);
        R.push(j);
      }
    }
  }
  return { left: L, right: R };
}

function sets(g) {
  const cols = g.range(1, 40);
  const m = randomCsr(g, { rows: g.range(0, 30), cols, maxLen: g.range(0, 10), weights: false, messy: g.bool(0.3) });
  // Repeated tokens within a row are allowed (deduplicated).
  if (g.bool(0.2) && m.indices.length) m.indices[g.int(m.indices.length)] = m.indices[0];
  return m;
}

export const generators = [
  {
    entry: 'similarityJoin',
    weight: 7,
    make(g, ctx) {
      const s = sets(g);
      const rs = g.bool(0.3) ? sets(g) : undefined;
      if (rs) rs.cols = Math.max(rs.cols, 1);
      const measure = g.pick(MEASURES);
      const threshold = measure === 'overlap' ? g.range(1, 4) : g.pick([0.1, 0.25, 0.5, 0.7, 1, 1e-9]);
      const algorithm = g.pick(['ppjoin', 'allpairs']);
      const want = bruteJoin(s, rs, measure, threshold);
      const stream = g.bool(0.25);
      return scenarioCase(g, ctx, {
        entry: stream ? 'similarityJoinStream' : this.entry,
        abortable: true,
        want,
        normalize: (r) => {
          const pairs = Array.from(r.left, (l, i) => [l, r.right[i]]).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
          return { left: pairs.map((p) => p[0]), right: pairs.map((p) => p[1]) };
        },
        inputs: () => {
          const a = copyCsr(s);
          const b = rs && copyCsr(rs);
          return { args: { a, b }, views: [...csrViews(a), ...(b ? csrViews(b) : [])] };
        },
        remake: ({ a, b }, fn) => ({ a: { ...a, indptr: fn(a.indptr), indices: fn(a.indices) }, b }),
        call: async (_, { a, b }, signal) => {
          const opts = { threshold, measure, algorithm, against: b, backend: ctx.backend, signal };
          if (!stream) return ctx.lib.similarityJoin(a, opts);
          const left = [];
          const right = [];
          for await (const c of ctx.lib.similarityJoinStream(a, opts)) {
            left.push(...c.left);
            right.push(...c.right);
          }
          return { left, right };
        },
      });
    },
  },
  {
    entry: 'similarityJoin (bad input)',
    weight: 4,
    make(g, { lib }) {
      const s = sets(g);
      const [bad] = g.bool(0.6) ? breakCsr(g, s) : [s];
      const opts = spoilOptions(g, {
        threshold: 0.5,
        measure: 'jaccard',
        algorithm: 'ppjoin',
        blockSize: 16,
        backend: 'cpu',
        against: g.bool(0.2) ? breakCsr(g, sets(g))[0] : undefined,
      });
      return { entry: this.entry, kind: 'either', run: () => lib.similarityJoin(bad, opts) };
    },
  },
  {
    entry: 'similarityJoinStream (abandoned)',
    weight: 1,
    make(g, { lib }) {
      const s = sets(g);
      return {
        entry: this.entry,
        kind: 'valid',
        run: async () => {
          const it = lib.similarityJoinStream(s, { threshold: 0.2, backend: 'cpu' });
          const first = await it.next();
          if (g.bool(0.5)) await it.return(undefined);
          return first.done === true || Array.isArray(Array.from(first.value.left));
        },
        check: (r) => (r === true ? null : 'no chunk'),
      };
    },
  },
];
void diff;
