// WeightedMinHash: constructor, hash, hashStream, parameters, fromParameters,
// estimateJaccard(Pairs). Reference: the ICWS hash in float32 arithmetic op by
// op from the object's own tables (test/minhash.test.ts's oracle).
import { breakCsr, copyCsr, csrViews, diff, randomCsr } from '../gen.mjs';
import { scenarioCase, spoilOptions, withGetter } from './common.mjs';
import { oracleHash } from '../../oracles.mjs';

const SENTINEL = 0xffffffff;

function small(g) {
  const cols = g.range(1, 120);
  const m = randomCsr(g, { rows: g.range(0, 24), cols, maxLen: g.range(0, 12), weights: g.bool(0.8) });
  if (m.values) for (let i = 0; i < m.values.length; i++) if (g.bool(0.1)) m.values[i] = g.weight();
  return m;
}

function remakeCsr(m, fn) {
  return { ...m, indptr: fn(m.indptr), indices: fn(m.indices), ...(m.values ? { values: fn(m.values) } : {}) };
}

export const generators = [
  {
    entry: 'new WeightedMinHash',
    weight: 2,
    make(g, { lib }) {
      const opts = spoilOptions(g, { dim: g.range(1, 1000), samples: g.range(1, 64), seed: g.int(1000), backend: 'cpu' });
      return {
        entry: this.entry,
        kind: 'either',
        run: () => {
          const w = new lib.WeightedMinHash(opts);
          w.dispose();
          return w.disposed;
        },
      };
    },
  },
  {
    entry: 'WeightedMinHash.hash',
    weight: 8,
    make(g, ctx) {
      const m = small(g);
      const samples = g.range(1, 12);
      const w = new ctx.lib.WeightedMinHash({ dim: m.cols, samples, seed: g.int(50), backend: ctx.backend });
      const p = w.parameters();
      const sliced = g.bool(0.3) && m.rows > 0;
      const rs = sliced ? g.int(m.rows + 1) : 0;
      const re = sliced ? rs + g.int(m.rows - rs + 1) : m.rows;
      const useOut = g.bool(0.2);
      const want = oracleHash(m, p, samples, rs, re);
      return scenarioCase(g, ctx, {
        entry: this.entry,
        obj: w,
        abortable: true,
        want,
        inputs: () => {
          const c = copyCsr(m);
          return { args: c, views: csrViews(c) };
        },
        remake: (c) => remakeCsr(c, (a) => a),
        call: (obj, c, signal) => {
          const opts = { signal };
          if (sliced) Object.assign(opts, { rowStart: rs, rowEnd: re });
          if (useOut) opts.out = new Uint32Array((sliced ? re - rs : c.rows) * samples * 2 + g.int(3));
          return obj.hash(c, opts);
        },
        alt: () => {
          if (sliced) return { args: copyCsr(m), want };
          const c = randomCsr(g, { rows: g.range(0, 24), cols: m.cols, maxLen: g.range(0, 12) });
          return { args: c, want: oracleHash(c, p, samples) };
        },
      });
    },
  },
  {
    entry: 'WeightedMinHash.hash (bad matrix)',
    weight: 6,
    make(g, { lib }) {
      const m = small(g);
      const w = new lib.WeightedMinHash({ dim: m.cols, samples: g.range(1, 8), backend: 'cpu' });
      let [bad, what] = breakCsr(g, m);
      if (g.bool(0.15) && bad && typeof bad === 'object') {
        // A getter that detaches another array of the matrix while it is read.
        const victim = g.pick(['indptr', 'indices', 'values'].filter((k) => ArrayBuffer.isView(bad[k])));
        if (victim) {
          const target = bad[victim];
          bad = withGetter(bad, g.pick(['rows', 'cols', 'values', 'indices']), () => {
            if (target.buffer.byteLength) structuredClone(target.buffer, { transfer: [target.buffer] });
          });
          what += ' + detaching getter';
        }
      }
      return { entry: this.entry, kind: 'either', what, run: () => w.hash(bad), cleanup: () => w.dispose() };
    },
  },
  {
    entry: 'WeightedMinHash.hash (bad options)',
    weight: 3,
    make(g, { lib }) {
      const m = small(g);
      const w = new lib.WeightedMinHash({ dim: m.cols, samples: g.range(1, 8), backend: 'cpu' });
      const opts = spoilOptions(g, { rowStart: 0, rowEnd: m.rows, out: new Uint32Array(m.rows * w.samples * 2), signal: undefined });
      const obj = opts !== null && typeof opts === 'object';
      if (obj && g.bool(0.2)) opts.signal = g.badValue();
      if (obj && g.bool(0.15))
        opts.out = g.pick([
          new Uint32Array(new SharedArrayBuffer(m.rows * w.samples * 8 + 4)),
          new Int32Array(m.rows * w.samples * 2),
          new Uint32Array(1),
        ]);
      return { entry: this.entry, kind: 'either', run: () => w.hash(m, opts), cleanup: () => w.dispose() };
    },
  },
  {
    entry: 'WeightedMinHash.hashStream',
    weight: 3,
    make(g, { lib }) {
      const cols = g.range(1, 80);
      const samples = g.range(1, 8);
      const chunks = Array.from({ length: g.range(0, 4) }, () => {
        const c = randomCsr(g, { rows: g.range(0, 10), cols, maxLen: 8 });
        return c;
      });
      const w = new lib.WeightedMinHash({ dim: cols, samples, backend: 'cpu' });
      const p = w.parameters();
      const want = chunks.map((c) => oracleHash(c, p, samples));
      const style = g.pick(['array', 'reuse', 'async', 'bad-chunk', 'bad-source', 'early-return']);
      // A Map, an array of numbers...: iterables of something; some are empty (valid).
      if (style === 'bad-source')
        return {
          entry: this.entry,
          kind: 'either',
          run: async () => {
            for await (const _ of w.hashStream(g.badValue())) void _;
          },
          cleanup: () => w.dispose(),
        };
      const rows = Math.max(0, ...chunks.map((c) => c.rows));
      const nnz = Math.max(0, ...chunks.map((c) => c.indices.length));
      function* reuse() {
        // One set of buffers refilled for every chunk, as a reader of a file would.
        for (const c of chunks) {
          const indptr = new Uint32Array(c.rows + 1);
          const buf = (reuse.buf ??= { indices: new Uint32Array(nnz), values: new Float32Array(nnz) });
          indptr.set(c.indptr);
          buf.indices.fill(0).set(c.indices);
          buf.values.fill(0).set(c.values);
          yield { rows: c.rows, cols, indptr, indices: buf.indices, values: buf.values };
        }
      }
      void rows;
      async function* slow() {
        for (const c of chunks) {
          await new Promise((r) => setTimeout(r, g.int(2)));
          yield c;
        }
      }
      const source = style === 'reuse' ? reuse() : style === 'async' ? slow() : style === 'bad-chunk' ? [...chunks, g.badValue()] : chunks;
      return {
        entry: this.entry,
        kind: style === 'bad-chunk' ? 'invalid' : 'valid',
        run: async () => {
          const got = [];
          for await (const s of w.hashStream(source)) {
            got.push(s);
            if (style === 'early-return' && got.length === 1) break;
          }
          return got;
        },
        check: (got) => diff(got, style === 'early-return' ? want.slice(0, 1) : want),
        cleanup: () => w.dispose(),
      };
    },
  },
  {
    entry: 'WeightedMinHash.fromParameters',
    weight: 1,
    make(g, { lib }) {
      const dim = g.range(1, 20);
      const samples = g.range(1, 6);
      const n = dim * samples;
      const p = {
        dim,
        samples,
        rs: new Float32Array(n).fill(1.5),
        lnCs: new Float32Array(n).fill(0.3),
        betas: new Float32Array(n).fill(0.5),
        backend: 'cpu',
      };
      const k = g.pick(['rs', 'lnCs', 'betas', 'dim', 'samples']);
      if (g.bool(0.7)) {
        if (k === 'dim' || k === 'samples') p[k] = g.badNumberOrValue();
        else if (g.bool(0.5)) p[k] = g.badValue();
        else p[k][g.int(n)] = g.pick([NaN, Infinity, -Infinity, 0, -1]);
      }
      return { entry: this.entry, kind: 'either', run: () => lib.WeightedMinHash.fromParameters(p).dispose() };
    },
  },
  {
    entry: 'estimateJaccard / estimateJaccardPairs',
    weight: 2,
    make(g, { lib }) {
      const samples = g.range(1, 8);
      const rows = g.range(1, 10);
      const sigs = Uint32Array.from({ length: rows * samples * 2 }, () => g.int(3));
      const left = Uint32Array.from({ length: g.int(6) }, () => g.int(rows));
      const right = Uint32Array.from(left, () => g.int(rows));
      const bad = g.bool(0.4);
      const args = [sigs, samples, left, right];
      if (bad)
        args[g.int(4)] = g.pick([
          g.badValue(),
          g.badNumber(),
          new Uint32Array([rows + g.int(3)]),
          new Uint32Array(new SharedArrayBuffer(8)),
        ]);
      const pairs = g.bool(0.6);
      const est = (a, b) => {
        let same = 0;
        for (let s = 0; s < samples; s++)
          if (
            sigs[(a * samples + s) * 2] === sigs[(b * samples + s) * 2] &&
            sigs[(a * samples + s) * 2 + 1] === sigs[(b * samples + s) * 2 + 1]
          )
            same++;
        return sigs[a * samples * 2] === SENTINEL || sigs[b * samples * 2] === SENTINEL ? 0 : Math.fround(same / samples);
      };
      if (pairs) {
        return {
          entry: this.entry,
          kind: bad ? 'either' : 'valid',
          run: () => lib.estimateJaccardPairs(...args),
          check: bad
            ? null
            : (r) =>
                diff(
                  Array.from(r),
                  Array.from(left, (a, i) => est(a, right[i])),
                ),
        };
      }
      const a = sigs.slice(0, samples * 2);
      const b = bad ? g.badValue() : sigs.slice(samples * 2 * (rows - 1));
      return {
        entry: this.entry,
        kind: bad ? 'either' : 'valid',
        run: () => lib.estimateJaccard(a, b),
        check: bad ? null : (r) => (Math.abs(r - est(0, rows - 1)) < 1e-6 ? null : `estimate ${r}`),
      };
    },
  },
];

export const name = 'minhash';
