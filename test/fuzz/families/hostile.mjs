// What a hostile caller does beyond bad values (issue 33's probe): Proxies
// around typed arrays (a coded TypeError) and subclass instances whose
// getters lie (read as what they are: the plain arrays' result); non-finite
// weights wherever weights are read (a coded RangeError); and arrays
// rewritten once a multi-stage call has returned its promise (dedup, groups,
// the join's streamed form, StreamClusterer.add: the result of the data as
// passed); a worker ended (terminate() or process.exit()) while an engine's
// call is in flight, after which this process must live on. CLI signals need
// a process per case and stay in test/cli-signals.test.ts; the teardown of an
// addon loaded by workers only, in test/workers.test.ts (here the harness's
// own process holds the addon).
import { Worker } from 'node:worker_threads';
import { fileURLToPath, pathToFileURL } from 'node:url';
import path from 'node:path';
import { copyCsr, diff, randomCsr } from '../gen.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = pathToFileURL(path.join(here, '..', '..', '..', 'dist', 'index.js')).href;
const ENGINES = ['minhash', 'join', 'joinStream', 'dedup', 'hamming', 'cluster', 'flyhash', 'popcount', 'text'];

export const name = 'hostile';

function liar(a) {
  const Base = Object.getPrototypeOf(a).constructor;
  class Liar extends Base {
    get length() {
      return 3;
    }
    get buffer() {
      throw new Error('buffer read');
    }
    get byteOffset() {
      throw new Error('byteOffset read');
    }
    subarray() {
      throw new Error('subarray called');
    }
    slice() {
      throw new Error('slice called');
    }
  }
  return new Liar(a.buffer, a.byteOffset, a.length);
}

const plain = (v) => v;
const matrix = (g) => randomCsr(g, { rows: g.range(1, 20), cols: g.range(1, 30), maxLen: g.range(1, 8) });

// Calls taking typed arrays: (ctx, wrap, g) -> Promise, `wrap` applied to one argument array.
const CALLS = {
  'WeightedMinHash.hash': (ctx, g, m) => {
    const k = g.pick(['indptr', 'indices', 'values']);
    return (wrap) => new ctx.lib.WeightedMinHash({ dim: m.cols, samples: 8, backend: ctx.backend }).hash({ ...m, [k]: wrap(m[k]) });
  },
  'MinHashLSH.insert/query': (ctx, g, m) => {
    const which = g.pick(['ids', 'signatures', 'query']);
    return async (wrap) => {
      const sigs = await new ctx.lib.WeightedMinHash({ dim: m.cols, samples: 8, backend: ctx.backend }).hash(m);
      const lsh = new ctx.lib.MinHashLSH({ threshold: 0.5, samples: 8, backend: ctx.backend });
      const ids = Uint32Array.from({ length: m.rows }, (_, i) => i);
      lsh.insert(which === 'ids' ? wrap(ids) : ids, which === 'signatures' ? wrap(sigs) : sigs);
      const q = await lsh.query(which === 'query' ? wrap(sigs) : sigs);
      return { q, pairs: await lsh.candidatePairs() };
    };
  },
  similarityJoin: (ctx, g, m) => {
    const k = g.pick(['indptr', 'indices']);
    return (wrap) =>
      ctx.lib.similarityJoin(
        { rows: m.rows, cols: m.cols, indptr: m.indptr, indices: m.indices, [k]: wrap(m[k]) },
        { threshold: 0.3, backend: ctx.backend },
      );
  },
  'HammingIndex.add/search': (ctx, g) => {
    const codes = Uint32Array.from({ length: 2 * g.range(1, 30) }, () => g.int(2 ** 32));
    const which = g.pick(['add', 'search']);
    return (wrap) => {
      const h = new ctx.lib.HammingIndex({ bits: 64, backend: ctx.backend });
      h.add(which === 'add' ? wrap(codes) : codes);
      return h.search(which === 'search' ? wrap(codes) : codes, { k: 2 });
    };
  },
  estimateJaccardPairs: (ctx, g) => {
    const sigs = Uint32Array.from({ length: 4 * 2 * 3 }, () => g.int(4));
    const k = g.pick([0, 1, 2]);
    const args = [sigs, Uint32Array.of(0, 1), Uint32Array.of(2, 2)];
    return async (wrap) =>
      ctx.lib.estimateJaccardPairs(...args.map((a, i) => (i === k ? wrap(a) : a)).flatMap((a, i) => (i === 0 ? [a, 4] : [a])));
  },
};

// Multi-stage calls: run(args) and the arrays a caller could rewrite after the call.
const STAGED = {
  dedup: (ctx, g) => {
    const m = matrix(g);
    const threshold = g.pick([0.5, 0.8]);
    return { m, call: (x) => ctx.lib.dedup(x, { threshold, backend: ctx.backend }) };
  },
  'MinHashLSH.groups': (ctx, g) => {
    const m = matrix(g);
    let lsh;
    return {
      m,
      // The index is built first: groups() is the call whose matrix is rewritten.
      prepare: async () => {
        const sigs = await new ctx.lib.WeightedMinHash({ dim: m.cols, samples: 8, backend: ctx.backend }).hash(m);
        lsh = new ctx.lib.MinHashLSH({ threshold: 0.5, samples: 8, backend: ctx.backend });
        lsh.insert(
          Uint32Array.from({ length: m.rows }, (_, i) => i),
          sigs,
        );
      },
      call: (x) => lsh.groups({ verify: 'exact', matrix: x }),
    };
  },
  similarityJoinStream: (ctx, g) => {
    const m = matrix(g);
    delete m.values;
    return {
      m,
      call: async (x) => {
        const it = ctx.lib.similarityJoinStream(x, { threshold: 0.3, backend: ctx.backend, tuning: { maxChunkPairs: 1 } });
        // The stream's first promise: its arrays are read before it returns.
        const first = it.next();
        const left = [];
        const right = [];
        for (let c = await first; !c.done; c = await it.next()) {
          left.push(...c.value.left);
          right.push(...c.value.right);
        }
        return { left, right };
      },
    };
  },
  'StreamClusterer.add': (ctx, g) => {
    const m = matrix(g);
    return {
      m,
      call: async (x) => {
        const c = new ctx.lib.StreamClusterer({ threshold: 0.3, backend: ctx.backend });
        const r = await c.add(x);
        return { cluster: r.cluster, created: r.created };
      },
    };
  },
};

export const generators = [
  {
    entry: 'worker ended mid-call',
    weight: 1,
    make(g, ctx) {
      const call = g.pick(ENGINES);
      const exit = g.bool(0.5);
      const rounds = g.int(3);
      return {
        entry: `${this.entry}: ${call}`,
        kind: 'valid',
        what: `${call}, ${exit ? 'process.exit()' : 'terminate()'} after ${rounds} more calls`,
        run: async () => {
          const w = new Worker(path.join(here, '..', 'terminate-worker.mjs'), { workerData: { dist, call, backend: ctx.backend } });
          const exited = new Promise((resolve) => w.once('exit', resolve));
          let seen = 0;
          await new Promise((resolve, reject) => {
            w.on('message', () => ++seen > rounds && resolve());
            w.once('error', reject);
            w.once('exit', (code) => reject(new Error(`worker exited (${code}) before its call was in flight`)));
          });
          if (exit) w.postMessage('exit');
          else await w.terminate();
          await exited;
          return true;
        },
        check: (r) => (r === true ? null : 'no result'),
      };
    },
  },
  {
    entry: 'Proxy receivers',
    weight: 3,
    make(g, ctx) {
      const entry = g.pick(Object.keys(CALLS));
      const call = CALLS[entry](ctx, g, matrix(g));
      return {
        entry: `${this.entry}: ${entry}`,
        kind: 'invalid',
        errorCode: 'CUSIM_INVALID_ARGUMENT',
        run: () => call((a) => new Proxy(a, {})),
      };
    },
  },
  {
    entry: 'subclass receivers',
    weight: 3,
    make(g, ctx) {
      const entry = g.pick(Object.keys(CALLS));
      const call = CALLS[entry](ctx, g, matrix(g));
      let want;
      return {
        entry: `${this.entry}: ${entry}`,
        kind: 'valid',
        run: async () => ((want = await call(plain)), call(liar)),
        check: (r) => diff(r, want),
      };
    },
  },
  {
    entry: 'non-finite weights',
    weight: 3,
    make(g, ctx) {
      const entry = g.pick(['WeightedMinHash.hash', 'MinHashLSH.groups', 'dedup', 'StreamClusterer.add', 'tfidf']);
      // groups() verifies against the rows its index holds: the matrix must be the one indexed.
      const staged = entry === 'MinHashLSH.groups' ? STAGED['MinHashLSH.groups'](ctx, g) : undefined;
      const m = staged ? staged.m : matrix(g);
      const bad = g.pick([Infinity, -Infinity, NaN, 1e39, -1e39]);
      const vals = Array.from(m.values);
      // A matrix with no entries has no weight to spoil: then it is valid input.
      const spoiled = vals.length > 0;
      if (spoiled) vals[g.int(vals.length)] = bad;
      const kind = g.pick(['f32', 'f64', 'array']);
      const values = kind === 'f32' ? Float32Array.from(vals) : kind === 'f64' ? Float64Array.from(vals) : vals;
      const x = { ...m, values };
      const run = {
        'WeightedMinHash.hash': () => new ctx.lib.WeightedMinHash({ dim: m.cols, samples: 8, backend: ctx.backend }).hash(x),
        'MinHashLSH.groups': async () => {
          await staged.prepare();
          return staged.call(x);
        },
        dedup: () => ctx.lib.dedup(x, { backend: ctx.backend }),
        'StreamClusterer.add': () => new ctx.lib.StreamClusterer({ threshold: 0.3, backend: ctx.backend }).add(x),
        tfidf: async () => ctx.lib.tfidf(x),
      }[entry];
      return spoiled
        ? { entry: `${this.entry}: ${entry}`, kind: 'invalid', errorCode: 'CUSIM_INVALID_ARGUMENT', run, what: `${bad} in ${kind}` }
        : { entry: `${this.entry}: ${entry}`, kind: 'valid', run, what: 'no entries' };
    },
  },
  {
    entry: 'rewritten after the call',
    weight: 3,
    make(g, ctx) {
      const entry = g.pick(Object.keys(STAGED));
      const { m, call, prepare } = STAGED[entry](ctx, g);
      let want;
      return {
        entry: `${this.entry}: ${entry}`,
        kind: 'valid',
        run: async () => {
          if (prepare) await prepare();
          want = await call(copyCsr(m));
          const p = call(m);
          p.catch(() => {});
          m.indices.reverse();
          m.indptr.fill(0, 0, 1);
          if (m.values) m.values.fill(g.pick([1e-3, 7]));
          return p;
        },
        check: (r) => diff(r, want),
      };
    },
  },
];
