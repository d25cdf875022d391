// MinHashLSH (insert, query, candidatePairs, groups), dedup, isEmptySignature.
// Reference: banding by brute force (rows sharing all of a band's (k, t)
// pairs; rows of nothing but the sentinel never match) and union-find over the
// verified pairs (signature agreement >= threshold, exact fractions).
import { breakCsr, diff, randomCsr } from '../gen.mjs';
import { scenarioCase, spoilOptions } from './common.mjs';

export const name = 'lsh';
const S = 0xffffffff;

function sigs(g, rows, samples) {
  const out = new Uint32Array(rows * samples * 2);
  for (let r = 0; r < rows; r++) {
    const empty = g.bool(0.1);
    const copyOf = r > 0 && g.bool(0.2) ? g.int(r) : -1;
    for (let i = 0; i < samples * 2; i++) out[r * samples * 2 + i] = empty ? S : copyOf >= 0 ? out[copyOf * samples * 2 + i] : g.int(3);
  }
  return out;
}

const isEmpty = (s, r, samples) => s.subarray(r * samples * 2, (r + 1) * samples * 2).every((x) => x === S);
const sameBand = (a, i, b, j, samples, band, rows) => {
  for (let t = band * rows * 2; t < (band + 1) * rows * 2; t++) if (a[i * samples * 2 + t] !== b[j * samples * 2 + t]) return false;
  return true;
};

function candidates(s, ids, samples, bands, rows) {
  const n = ids.length;
  const pairs = [];
  for (let i = 0; i < n; i++) {
    if (isEmpty(s, i, samples)) continue;
    for (let j = i + 1; j < n; j++) {
      if (isEmpty(s, j, samples)) continue;
      for (let b = 0; b < bands; b++) {
        if (sameBand(s, i, s, j, samples, b, rows)) {
          pairs.push(ids[i] < ids[j] ? [ids[i], ids[j]] : [ids[j], ids[i]]);
          break;
        }
      }
    }
  }
  pairs.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  return { left: Uint32Array.from(pairs, (p) => p[0]), right: Uint32Array.from(pairs, (p) => p[1]) };
}

function groups(s, ids, samples, bands, rows, threshold) {
  const n = ids.length;
  const parent = Array.from({ length: n }, (_, i) => i);
  const find = (x) => (parent[x] === x ? x : (parent[x] = find(parent[x])));
  const linked = new Array(n).fill(false);
  const pos = new Map(Array.from(ids, (id, i) => [id, i]));
  const c = candidates(s, ids, samples, bands, rows);
  for (let p = 0; p < c.left.length; p++) {
    const i = pos.get(c.left[p]);
    const j = pos.get(c.right[p]);
    let same = 0;
    for (let t = 0; t < samples; t++)
      if (s[(i * samples + t) * 2] === s[(j * samples + t) * 2] && s[(i * samples + t) * 2 + 1] === s[(j * samples + t) * 2 + 1]) same++;
    if (same / samples >= threshold) {
      linked[i] = linked[j] = true;
      parent[find(i)] = find(j);
    }
  }
  const label = new Map();
  const group = new Uint32Array(n).fill(S);
  for (let i = 0; i < n; i++) {
    if (!linked[i]) continue;
    const r = find(i);
    if (!label.has(r)) label.set(r, label.size);
    group[i] = label.get(r);
  }
  return { group, count: label.size };
}

function setup(g, lib, backend) {
  const samples = g.pick([2, 4, 8, 16]);
  const rows = g.pick([1, 2, samples]);
  const bands = g.range(1, samples / rows);
  const n = g.range(0, 30);
  const s = sigs(g, n, samples);
  const ids = Uint32Array.from({ length: n }, (_, i) => i * 3 + g.int(3));
  const lsh = new lib.MinHashLSH({ bands, rows, samples, backend });
  return { samples, rows, bands, n, s, ids, lsh };
}

export const generators = [
  {
    entry: 'MinHashLSH.candidatePairs / groups / query',
    weight: 7,
    make(g, ctx) {
      const t = setup(g, ctx.lib, ctx.backend);
      const { samples, rows, bands, s, ids, lsh } = t;
      // Inserted in one or two calls.
      const cut = g.int(t.n + 1);
      lsh.insert(ids.subarray(0, cut), s.slice(0, cut * samples * 2));
      lsh.insert(Array.from(ids.subarray(cut)), s.slice(cut * samples * 2));
      const op = g.pick(['candidatePairs', 'groups', 'query']);
      const threshold = g.pick([0.25, 0.5, 0.75, 1]);
      const q = sigs(g, g.range(0, 6), samples);
      let want;
      if (op === 'candidatePairs') want = candidates(s, ids, samples, bands, rows);
      else if (op === 'groups') want = groups(s, ids, samples, bands, rows, threshold);
      else {
        const indptr = [0];
        const hits = [];
        for (let i = 0; i < q.length / (samples * 2); i++) {
          if (!isEmpty(q, i, samples)) {
            const found = [];
            for (let j = 0; j < ids.length; j++) {
              if (isEmpty(s, j, samples)) continue;
              for (let b = 0; b < bands; b++) {
                if (sameBand(q, i, s, j, samples, b, rows)) {
                  found.push(ids[j]);
                  b = bands;
                }
              }
            }
            hits.push(...[...new Set(found)].sort((a, b) => a - b));
          }
          indptr.push(hits.length);
        }
        want = { indptr: Uint32Array.from(indptr), ids: Uint32Array.from(hits) };
      }
      return scenarioCase(g, ctx, {
        entry: `MinHashLSH.${op}`,
        abortable: op !== 'query',
        want,
        normalize:
          op === 'candidatePairs'
            ? (r) => ({ left: r.left, right: r.right })
            : op === 'groups'
              ? (r) => ({ group: r.group, count: r.count })
              : (r) => r,
        inputs: () => {
          const c = q.slice();
          return { args: c, views: [c] };
        },
        remake: (c, fn) => fn(c),
        call: (_, c, signal) =>
          op === 'query'
            ? lsh.query(c)
            : op === 'groups'
              ? lsh.groups({ verify: 'estimate', threshold, signal })
              : lsh.candidatePairs({ signal }),
      });
    },
  },
  {
    entry: 'MinHashLSH (bad arguments)',
    weight: 4,
    make(g, { lib }) {
      const u = g.int(5);
      if (u === 0) {
        const o = spoilOptions(g, g.bool(0.5) ? { bands: 4, rows: 2, samples: 8 } : { threshold: 0.5, samples: 64, weights: [0.5, 0.5] });
        return { entry: 'new MinHashLSH', kind: 'either', run: () => new lib.MinHashLSH(o).dispose() };
      }
      const lsh = new lib.MinHashLSH({ bands: 2, rows: 2, samples: 4 });
      const good = new Uint32Array(2 * 8);
      lsh.insert([1, 2], good);
      if (u === 1)
        return {
          entry: 'MinHashLSH.insert',
          kind: 'either',
          run: () =>
            lsh.insert(
              g.pick([[1], [3, 3], [-1, 4], g.badValue(), new Uint32Array([9, 2])]),
              g.pick([good, good.subarray(1), g.badValue()]),
            ),
        };
      if (u === 2)
        return {
          entry: 'MinHashLSH.query',
          kind: 'either',
          run: () => lsh.query(g.pick([g.badValue(), good.subarray(3), new Uint32Array(new SharedArrayBuffer(32))])),
        };
      if (u === 3) {
        if (g.bool(0.3)) lsh.dispose();
        const m = randomCsr(g, { rows: g.range(0, 5), cols: 5, maxLen: 3 });
        return {
          entry: 'MinHashLSH.groups',
          kind: 'either',
          run: () => lsh.groups(spoilOptions(g, { verify: 'exact', matrix: g.bool(0.5) ? breakCsr(g, m)[0] : m, threshold: 0.5 })),
        };
      }
      return {
        entry: 'isEmptySignature',
        kind: 'either',
        run: () =>
          lib.isEmptySignature(g.pick([good, g.badValue()]), g.pick([4, g.badNumberOrValue()]), g.pick([0, 1, 2, g.badNumberOrValue()])),
      };
    },
  },
  {
    entry: 'dedup',
    weight: 2,
    make(g, { lib }) {
      const m = randomCsr(g, { rows: g.range(0, 25), cols: g.range(1, 30), maxLen: 6 });
      // Exact duplicates must end up together.
      for (let r = 1; r < m.rows; r++)
        if (g.bool(0.3)) {
          const src = g.int(r);
          const row = m.indices.subarray(m.indptr[src], m.indptr[src + 1]);
          void row;
        }
      const bad = g.bool(0.3);
      const opts = bad
        ? spoilOptions(g, { threshold: 0.8, samples: 16, verify: 'exact', backend: 'cpu' })
        : { threshold: g.pick([0.5, 0.8]), samples: g.pick([8, 16, 32]), verify: g.pick(['exact', 'estimate', 'none']), backend: 'cpu' };
      return {
        entry: this.entry,
        kind: bad ? 'either' : 'valid',
        run: () => lib.dedup(bad && g.bool(0.3) ? breakCsr(g, m)[0] : m, opts),
        check: (r) => (r.group.length === m.rows ? null : `group length ${r.group.length}`),
      };
    },
  },
];
void diff;
