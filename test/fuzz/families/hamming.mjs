// HammingIndex: constructor (bounded options), add, search (exact: brute
// force; EWH: every returned distance exact and the order (distance, id)),
// scores (bounded), build, size. Codes as Uint32Array, Uint8Array (odd byte
// offsets too) or { data, rows, bits }.
import { diff, oddBytes } from '../gen.mjs';
import { scenarioCase, spoilOptions } from './common.mjs';

export const name = 'hamming';
const MISSING = 0xffffffff;

function popcount(x) {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return (Math.imul((x + (x >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24) & 0xff;
}

function dist(a, i, b, j, w) {
  let d = 0;
  for (let t = 0; t < w; t++) d += popcount(a[i * w + t] ^ b[j * w + t]);
  return d;
}

function bruteKnn(db, q, w, bits, k) {
  const rows = db.length / w;
  const ids = new Uint32Array((q.length / w) * k).fill(MISSING);
  const ds = new Uint16Array(ids.length).fill(bits);
  for (let i = 0; i < q.length / w; i++) {
    const all = Array.from({ length: rows }, (_, j) => [dist(q, i, db, j, w), j]).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    all.slice(0, k).forEach(([d, j], n) => ((ids[i * k + n] = j), (ds[i * k + n] = d)));
  }
  return { ids, distances: ds };
}

function codes(g, rows, w) {
  return Uint32Array.from({ length: rows * w }, () => (g.bool(0.3) ? 0 : (g.r() * 4294967296) >>> 0));
}

export const generators = [
  {
    entry: 'new HammingIndex',
    weight: 2,
    make(g, { lib }) {
      const opts = spoilOptions(g, {
        bits: 32 * g.range(1, 8),
        method: g.pick(['exact', 'ewh']),
        tables: g.range(1, 64),
        keyBits: g.range(1, 24),
        maxErrors: g.range(0, 3),
        minScore: g.range(-5, 30),
        seed: g.int(9),
        backend: 'cpu',
      });
      return { entry: this.entry, kind: 'either', run: () => new lib.HammingIndex(opts).dispose() };
    },
  },
  {
    entry: 'HammingIndex.search',
    weight: 7,
    make(g, ctx) {
      const bits = 32 * g.range(1, 4);
      const w = bits / 32;
      const method = g.pick(['exact', 'ewh']);
      const keyBits = g.range(1, 10);
      const index = new ctx.lib.HammingIndex({
        bits,
        method,
        backend: ctx.backend,
        tables: g.range(1, 6),
        keyBits,
        maxErrors: g.range(0, Math.min(2, keyBits)),
        minScore: g.range(0, 10),
      });
      const db = codes(g, g.range(1, 60), w);
      index.add(g.bool(0.3) ? oddBytes(db) : db);
      const q = codes(g, g.range(0, 8), w);
      const k = g.range(1, 12);
      const want = bruteKnn(db, q, w, bits, k);
      const check = (r, base = db) => {
        if (method === 'exact' && base === db) return diff({ ids: r.ids, distances: r.distances }, want);
        // EWH is approximate: what it returns must still be exact and ordered.
        for (let i = 0; i < q.length / w; i++) {
          let prev = [-1, -1];
          for (let n = 0; n < k; n++) {
            const id = r.ids[i * k + n];
            const d = r.distances[i * k + n];
            if (id === MISSING) {
              if (d !== bits) return `missing id with distance ${d}`;
              continue;
            }
            if (id >= base.length / w) return `id ${id} out of range`;
            if (d !== dist(q, i, base, id, w)) return `distance of ${id} is ${d}, not ${dist(q, i, base, id, w)}`;
            if (d < prev[0] || (d === prev[0] && id <= prev[1])) return 'not ordered by (distance, id)';
            prev = [d, id];
          }
        }
        return null;
      };
      const spec = {
        entry: this.entry,
        obj: index,
        abortable: true,
        want,
        normalize: (r) => r,
        inputs: () => {
          const c = q.slice();
          return { args: c, views: [c] };
        },
        remake: (c, fn) => fn(c),
        call: (obj, c, signal) => obj.search(g.bool(0.2) ? { data: c, rows: c.length / w, bits } : c, { k, signal }),
      };
      if (g.bool(0.1)) {
        // Codes added while a search is queued or running: the search sees
        // the index before or after the add, never a mix.
        const c = q.slice();
        const extra = codes(g, g.range(1, 20), w);
        const db2 = new Uint32Array(db.length + extra.length);
        db2.set(db);
        db2.set(extra, db.length);
        const after = bruteKnn(db2, q, w, bits, k);
        return {
          entry: this.entry,
          kind: 'valid',
          what: 'add during search',
          run: async () => {
            const p = index.search(c, { k });
            p.catch(() => {});
            await ctx.tick();
            index.add(extra);
            return p;
          },
          check: (r) => {
            if (method !== 'exact') return check(r, db2);
            const a = diff({ ids: r.ids, distances: r.distances }, want);
            return a && diff({ ids: r.ids, distances: r.distances }, after);
          },
        };
      }
      const c = scenarioCase(g, ctx, spec);
      if (c.check) {
        const inner = c.check;
        c.check = (r) => (Array.isArray(r) ? (r.map((x) => check(x)).find((x) => x) ?? null) : method === 'exact' ? inner(r) : check(r));
      }
      return c;
    },
  },
  {
    entry: 'HammingIndex.add / search (bad codes)',
    weight: 4,
    make(g, { lib }) {
      const bits = 32 * g.range(1, 3);
      const index = new lib.HammingIndex({ bits, backend: 'cpu', method: g.pick(['exact', 'ewh']) });
      const good = codes(g, 3, bits / 32);
      const bad = g.pick([
        g.badValue(),
        good.subarray(1),
        new Uint8Array(bits / 8 + 1),
        { data: good, rows: g.badNumberOrValue(), bits },
        { data: good, rows: 3, bits: g.badNumberOrValue() },
        { data: g.badValue(), rows: 3, bits },
        new Uint32Array(new SharedArrayBuffer(bits / 8)),
        (() => {
          const v = good.slice();
          structuredClone(v.buffer, { transfer: [v.buffer] });
          return v;
        })(),
      ]);
      const which = g.pick(['add', 'search', 'scores']);
      return {
        entry: this.entry,
        kind: 'either',
        run: async () => {
          if (which !== 'add') index.add(good);
          if (which === 'add') return index.add(bad);
          if (which === 'search') return index.search(bad, spoilOptions(g, { k: 3 }, g.int(2)));
          return index.scores(bad);
        },
        cleanup: () => index.dispose(),
      };
    },
  },
  {
    entry: 'HammingIndex.scores / build',
    weight: 2,
    make(g, { lib }) {
      const index = new lib.HammingIndex({ bits: 64, method: 'ewh', backend: 'cpu', tables: 3, keyBits: 6 });
      const db = codes(g, g.range(1, 40), 2);
      index.add(db);
      const q = codes(g, g.range(0, 5), 2);
      const huge = g.bool(0.2);
      return {
        entry: this.entry,
        kind: huge ? 'invalid' : 'valid',
        run: async () => {
          if (g.bool(0.5)) await index.build();
          if (huge) {
            // 2^31 score entries: must be refused before allocating 8 GB.
            for (let i = 0; i < 4; i++) index.add(new Uint32Array(2 * 2 ** 19));
            return index.scores(new Uint32Array(2 * 1024));
          }
          return index.scores(q);
        },
        check: (s) => (s.length === (q.length / 2) * (db.length / 2) ? null : `scores length ${s.length}`),
        cleanup: () => index.dispose(),
      };
    },
  },
];
