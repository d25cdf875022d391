// FlyHash: constructor (cost-bounded options), hash (float and byte X, bits
// and indices), projection, similarity. Reference: activations summed in
// float32 in ascending input order from the object's projection, k winners
// with ties to the lower index (test/flyhash.test.ts's oracle).
import { diff } from '../gen.mjs';
import { scenarioCase, spoilOptions } from './common.mjs';

export const name = 'flyhash';

function winners(data, rows, cols, proj, m, s, k) {
  const out = [];
  for (let r = 0; r < rows; r++) {
    const act = new Float32Array(m);
    for (let j = 0; j < m; j++) {
      let a = 0;
      for (let t = 0; t < s; t++) a = Math.fround(a + data[r * cols + proj[j * s + t]]);
      act[j] = a;
    }
    const order = Array.from({ length: m }, (_, j) => j).sort((a, b) => act[b] - act[a] || a - b);
    out.push(order.slice(0, k).sort((a, b) => a - b));
  }
  return out;
}

function encode(win, m, k, output) {
  const w = Math.ceil(m / 32);
  const out = new Uint32Array(win.length * (output === 'bits' ? w : k));
  win.forEach((list, r) => {
    if (output === 'indices') out.set(list, r * k);
    else for (const j of list) out[r * w + (j >> 5)] |= 1 << (j & 31);
  });
  return out;
}

export const generators = [
  {
    entry: 'new FlyHash',
    weight: 2,
    make(g, { lib }) {
      const base = { inputDim: g.range(1, 300), hashLength: g.range(1, 600), connections: 1, winners: 1, seed: g.int(9) };
      base.connections = g.range(1, base.inputDim);
      base.winners = g.range(1, base.hashLength);
      // Cost-growing sizes: the table is hashLength x connections; these must be refused at once or cost nothing until used.
      if (g.bool(0.3))
        Object.assign(
          base,
          g.pick([
            { inputDim: 2 ** 30, connections: 4, hashLength: 2 ** 30 },
            { inputDim: 2 ** 30, connections: 2 ** 30, hashLength: 4 },
            { hashLength: 2 ** 30, winners: 1 },
            { inputDim: 2 ** 16, connections: 2 ** 16, hashLength: 2 ** 16 },
          ]),
        );
      const opts = g.bool(0.5) ? spoilOptions(g, base) : base;
      return {
        entry: this.entry,
        kind: 'either',
        run: () => {
          const t0 = Date.now();
          const fly = new lib.FlyHash({ ...opts, backend: 'cpu' });
          fly.dispose();
          if (Date.now() - t0 > 1000) throw new Error(`constructor took ${Date.now() - t0} ms`);
        },
      };
    },
  },
  {
    entry: 'FlyHash.hash',
    weight: 7,
    make(g, ctx) {
      const d = g.range(1, 40);
      const m = g.range(1, 96);
      const s = g.range(1, d);
      const k = g.range(1, m);
      const rows = g.range(0, 12);
      const bytes = g.bool(0.35);
      const output = g.pick(['bits', 'indices']);
      const fly = new ctx.lib.FlyHash({ inputDim: d, hashLength: m, connections: s, winners: k, seed: g.int(20), backend: ctx.backend });
      const proj = fly.projection();
      const ties = g.bool(0.3);
      const data = bytes
        ? Uint8Array.from({ length: rows * d }, () => g.int(ties ? 3 : 256))
        : Float32Array.from({ length: rows * d }, () => (ties ? g.int(3) : g.bool(0.5) ? g.int(256) : g.r() * 10 - 3));
      const want = encode(winners(bytes ? Float32Array.from(data) : data, rows, d, proj, m, s, k), m, k, output);
      return scenarioCase(g, ctx, {
        entry: this.entry,
        obj: fly,
        abortable: true,
        want,
        normalize: (r) => r.data,
        inputs: () => {
          const x = data.slice();
          return { args: { data: x, rows, cols: d }, views: [x] };
        },
        remake: (a, fn) => ({ ...a, data: fn(a.data) }),
        call: (obj, x, signal) => obj.hash(x, { output, signal }),
      });
    },
  },
  {
    entry: 'FlyHash.hash (bad X or options)',
    weight: 4,
    make(g, { lib }) {
      const d = g.range(1, 30);
      const fly = new lib.FlyHash({ inputDim: d, hashLength: g.range(1, 64), connections: 1, winners: 1, backend: 'cpu' });
      const rows = g.range(0, 6);
      let x = { data: new Float32Array(rows * d).fill(1), rows, cols: d };
      const u = g.int(9);
      if (u === 0) x = g.badValue();
      else if (u === 1) x.rows = g.badNumberOrValue();
      else if (u === 2) x.cols = g.badNumberOrValue();
      else if (u === 3) x.data = g.badValue();
      else if (u === 4 && rows) x.data[g.int(x.data.length)] = g.pick([NaN, Infinity, -Infinity]);
      else if (u === 5) x.data = x.data.subarray(1);
      else if (u === 6 && rows) {
        const v = x.data.slice();
        structuredClone(v.buffer, { transfer: [v.buffer] });
        x.data = v;
      } else if (u === 7) x = { data: new Uint8ClampedArray(rows * d), rows, cols: d };
      const opts = spoilOptions(g, { output: 'bits', signal: undefined });
      return {
        entry: this.entry,
        kind: 'either',
        run: () => fly.hash(x, u === 8 ? opts : { output: 'bits' }),
        cleanup: () => fly.dispose(),
      };
    },
  },
  {
    entry: 'FlyHash.similarity / projection',
    weight: 1,
    make(g, { lib }) {
      const fly = new lib.FlyHash({ inputDim: 20, hashLength: 64, connections: 3, winners: 4, backend: 'cpu' });
      const args = [new Uint32Array(2), new Uint32Array(2), undefined];
      if (g.bool(0.6)) args[g.int(3)] = g.badValue();
      const disposed = g.bool(0.2);
      if (disposed) fly.dispose();
      return {
        entry: this.entry,
        kind: 'either',
        run: () => (g.bool(0.5) ? fly.projection().length : fly.similarity(...args)),
        check: (r) => (typeof r === 'number' ? (r === 64 * 3 ? null : `projection length ${r}`) : diff(r.overlap, 0)),
        cleanup: () => fly.dispose(),
      };
    },
  },
];
