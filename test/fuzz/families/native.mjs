// Every native method called directly (bypassing the TypeScript checks): each
// function and each class's constructor and methods, with arguments from
// per-method templates spoiled at random (wrong types, bad numbers, broken
// matrices, SharedArrayBuffer-backed and detached arrays, staged inputs,
// cancel flags). Nothing is compared: the addon must answer with a coded
// error or a value, never crash, hang or throw an uncoded error.
// Not covered here: StreamClusterer save/load (file formats; see the
// persistence work) and threads() beyond small counts.
import { breakCsr, detached, randomCsr, variant } from '../gen.mjs';

export const name = 'native';

function typed(g, C, n) {
  const a = new C(n);
  for (let i = 0; i < n; i++) a[i] = C === Float32Array ? g.r() * 4 : g.int(8);
  const u = g.int(8);
  if (u === 0) return variant(g, a).view;
  if (u === 1 && n) return detached(a);
  return a;
}

function csr(g, cols = g.range(1, 30)) {
  const m = randomCsr(g, { rows: g.range(0, 12), cols, maxLen: 6 });
  if (g.bool(0.25)) return breakCsr(g, m)[0];
  if (g.bool(0.2)) return { ...m, indptr: variant(g, m.indptr).view, indices: variant(g, m.indices).view };
  return m;
}

function dense(g, cols, bytes = false) {
  const rows = g.range(0, 6);
  const data = bytes ? typed(g, Uint8Array, rows * cols) : typed(g, Float32Array, rows * cols);
  const d = { data, rows, cols };
  if (g.bool(0.15)) d[g.pick(['rows', 'cols'])] = g.badNumberOrValue();
  return d;
}

function bitsArg(g, bits) {
  const rows = g.range(0, 8);
  const d = { data: typed(g, Uint32Array, (rows * bits) / 32), rows, bits };
  if (g.bool(0.15)) d[g.pick(['rows', 'bits', 'data'])] = g.badNumberOrValue();
  return d;
}

/** `v` most of the time, else something hostile. */
function maybe(g, v, p = 0.15) {
  return g.bool(p) ? g.badValue() : v;
}

function options(g, ctx, o) {
  const r = { ...o };
  if (g.bool(0.3)) r.cancel = g.pick([new ctx.native.CancelFlag(), new Int32Array(1), g.badValue()]);
  if (g.bool(0.2)) {
    const k = g.pick(Object.keys(r).concat(['backend', 'devices']));
    r[k] = g.pick([g.badNumberOrValue(), 'cuda', 'cpu', [0], [-1], [99]]);
  }
  if (g.bool(0.05)) return g.badValue();
  return r;
}

function maybeStaged(g, ctx, m) {
  if (!g.bool(0.15) || !m || typeof m !== 'object') return m;
  try {
    return ctx.native.stageCsr(m);
  } catch {
    return m;
  }
}

const CLASSES = {
  WeightedMinHashNative: {
    make: (g) => ({ dim: g.range(1, 40), samples: g.range(1, 8), seed: g.int(5), backend: 'cpu' }),
    methods: {
      hash: (g, ctx, o) => [
        maybeStaged(g, ctx, csr(g, o.dim)),
        options(g, ctx, {
          rowStart: g.int(3),
          rowEnd: g.bool(0.5) ? undefined : g.int(12),
          out: g.bool(0.2) ? typed(g, Uint32Array, g.int(200)) : undefined,
        }),
      ],
      parameters: () => [],
      deviceParameters: (g) => [g.pick([0, 1, -1, NaN])],
      devices: () => [],
    },
  },
  FlyHash: {
    make: (g) => {
      const inputDim = g.range(1, 30);
      const hashLength = g.range(1, 80);
      return { inputDim, hashLength, connections: g.range(1, inputDim), winners: g.range(1, hashLength), seed: g.int(4), backend: 'cpu' };
    },
    methods: {
      hash: (g, ctx, o) => [dense(g, o.inputDim, g.bool(0.3)), options(g, ctx, { output: g.pick(['bits', 'indices', 'x']) })],
      projection: () => [],
    },
  },
  HammingIndex: {
    make: (g) => {
      const maxErrors = g.range(0, 2);
      return {
        bits: 32 * g.range(1, 3),
        method: g.pick(['exact', 'ewh']),
        tables: g.range(1, 4),
        keyBits: g.range(2, 8),
        maxErrors,
        weights: Int32Array.from({ length: maxErrors + 1 }, () => g.int(5)),
        minScore: g.int(5),
        shortlist: g.int(3),
        seed: 1,
        backend: 'cpu',
        exactKernel: g.pick(['auto', 'popc', 'mma2', 'x']),
      };
    },
    methods: {
      add: (g, _, o) => [typed(g, Uint32Array, (o.bits / 32) * g.int(20) + (g.bool(0.1) ? 1 : 0))],
      search: (g, ctx, o) => [bitsArg(g, o.bits), options(g, ctx, { k: g.pick([1, 3, 1024, 1025, 0]) })],
      scores: (g, _, o) => [bitsArg(g, o.bits)],
      build: () => [],
      positions: () => [],
      size: () => [],
    },
  },
  StreamClusterer: {
    make: (g) => ({ threshold: g.r(), maxTerms: g.range(1, 20), capacity: g.range(1, 64), maxAge: g.pick([-1, 3]), backend: 'cpu' }),
    methods: {
      add: (g, ctx) => [maybeStaged(g, ctx, csr(g)), options(g, ctx, { mode: g.pick(['auto', 'batch', 'sequential', 'x']) })],
      size: () => [],
      info: () => [],
      centroid: (g) => [g.pick([0, 1, 5, -1, NaN, 'x'])],
      members: (g) => [g.pick([0, 1, 5, -1, NaN])],
      active: (g) => [g.pick([0, 1, 5, -1, NaN])],
    },
  },
  JoinHandle: {
    make: () => undefined,
    methods: {
      open: (g, ctx) => [
        maybeStaged(g, ctx, csr(g)),
        g.bool(0.3) ? csr(g) : undefined,
        options(g, ctx, {
          measure: g.pick([0, 1, 2, 3, 4]),
          threshold: g.pick([0.5, 1, 2, 0, NaN]),
          backend: 'cpu',
          algorithm: g.pick(['ppjoin', 'allpairs']),
          blockSize: g.pick([0, 4, -1]),
        }),
      ],
      next: (g, ctx) => [options(g, ctx, {})],
    },
  },
  TextTokenizer: {
    make: (g) => ({
      mode: g.pick(['code', 'words', 'qgrams', 'x']),
      minLength: g.range(1, 3),
      q: g.range(1, 5),
      keywords: ['if'],
      stopWords: ['the'],
      lowercase: g.bool(),
      pad: g.bool(),
    }),
    methods: {
      tokenize: (g) => textArgs(g),
      tokenizeAsync: (g) => textArgs(g),
    },
  },
  CancelFlag: { make: () => undefined, methods: { abort: () => [] } },
};

function textArgs(g) {
  const bytes = new TextEncoder().encode('fooBar baz_qux the if 12 é'.repeat(g.range(0, 4)));
  const n = g.range(0, 4);
  const offsets = new Uint32Array(n + 1);
  for (let i = 1; i <= n; i++) offsets[i] = Math.min(bytes.length, offsets[i - 1] + g.int(20));
  if (g.bool(0.2)) offsets[g.int(n + 1)] = g.pick([bytes.length + 1, 0xffffffff, 3]);
  return [maybe(g, g.bool(0.2) ? variant(g, bytes).view : bytes), maybe(g, offsets), g.pick([0, 1, -1, 2 ** 32])];
}

const FUNCTIONS = {
  minhashSplitRows: (g) => [csr(g), g.int(3), g.int(12), g.pick([1, 2, 4096, 4097, 0, NaN])],
  minhashJaccardPairs: (g) => {
    const samples = g.range(1, 4);
    const rows = g.range(0, 5);
    return [typed(g, Uint32Array, rows * samples * 2), g.pick([samples, 0, 65537]), typed(g, Uint32Array, 3), typed(g, Uint32Array, 3)];
  },
  joinSortPairs: (g) => {
    const n = g.int(20);
    return [typed(g, Uint32Array, n), typed(g, Uint32Array, n), typed(g, Uint32Array, g.bool(0.9) ? n : n + 1), typed(g, Float32Array, n)];
  },
  lshCandidatePairs: (g, ctx) => lshArgs(g, ctx),
  lshGroups: (g, ctx) => {
    const a = lshArgs(g, ctx);
    if (a[2] && typeof a[2] === 'object')
      Object.assign(a[2], {
        verify: g.pick(['none', 'estimate', 'exact', 'x']),
        threshold: g.pick([0.5, 0, 2]),
        matrix: g.bool(0.5) ? csr(g) : undefined,
      });
    return a;
  },
  lshQuery: (g, ctx) => {
    const a = lshArgs(g, ctx);
    return [a[0], a[1], typed(g, Uint32Array, 8 * g.int(4)), a[2]];
  },
  popcountRows: (g, ctx) => [bitsArg(g, 32 * g.range(1, 3)), options(g, ctx, { backend: 'cpu' })],
  stageCsr: (g) => [csr(g), g.bool()],
  stageArray: (g) => [
    g.bool(0.8) ? [typed(g, Uint32Array, g.int(9)), typed(g, g.pick([Uint32Array, Float32Array]), g.int(5))] : g.badValue(),
  ],
  philoxStream: (g) => [g.int(9), g.int(9), g.int(9), g.pick([0, 5, 2 ** 24 + 1, -1, NaN]), g.bool()],
  allocPinned: (g) => [g.pick([0, 8, 1 << 20, -1, NaN, 2 ** 53, 'x'])],
  devices: () => [],
  deviceMemory: (g) => [g.pick([0, 1, -1, NaN, 'x'])],
  threads: (g) => [g.pick([undefined, 0, 1, 2, -1, NaN, 5000, 'x'])],
  assembleTextRows: (g) => {
    const docs = g.int(4);
    const indptr = Uint32Array.from({ length: docs + 1 }, (_, i) => i * 2);
    const ids = Uint32Array.from({ length: docs * 2 }, () => g.int(4));
    return [
      maybe(g, indptr),
      maybe(g, new Uint32Array(docs).fill(2)),
      g.pick([0, 1, -1, NaN]),
      maybe(g, ids),
      maybe(g, new Uint32Array(docs * 2).fill(1)),
      maybe(
        g,
        Int32Array.from({ length: g.int(5) }, () => g.int(3) - 1),
      ),
    ];
  },
};

function lshArgs(g, ctx) {
  const samples = g.range(1, 4);
  const rows = g.int(6);
  const sigs = typed(g, Uint32Array, rows * samples * 2 + (g.bool(0.1) ? 1 : 0));
  let staged = sigs;
  if (g.bool(0.1)) {
    try {
      staged = ctx.native.stageArray([sigs]);
    } catch {
      // a detached array cannot be staged
    }
  }
  return [staged, typed(g, Uint32Array, rows), options(g, ctx, { samples, bands: g.range(1, samples), rows: 1, backend: 'cpu' })];
}

/**
 * Puts a getter on the last options-like object of `args` that, when the
 * addon reads that property, detaches every array reachable from the other
 * arguments (the addon must read properties before it resolves arrays).
 */
function armDetachingGetter(g, args) {
  const at = args
    .map((a, i) => [a, i])
    .filter(([a]) => a && typeof a === 'object' && !ArrayBuffer.isView(a) && !Array.isArray(a))
    .pop();
  if (!at) return;
  const [opts] = at;
  const arrays = [];
  const visit = (v, depth) => {
    if (ArrayBuffer.isView(v)) arrays.push(v);
    else if (v && typeof v === 'object' && depth < 2 && v !== opts) for (const k of Object.keys(v)) visit(v[k], depth + 1);
  };
  args.forEach((a) => visit(a, 0));
  const key = g.pick(Object.keys(opts).concat(['rowStart', 'k', 'mode', 'backend', 'samples']));
  const value = opts[key];
  try {
    Object.defineProperty(opts, key, {
      enumerable: true,
      configurable: true,
      get() {
        for (const a of arrays)
          if (!(a.buffer instanceof SharedArrayBuffer) && a.buffer.byteLength) structuredClone(a.buffer, { transfer: [a.buffer] });
        return value;
      },
    });
  } catch {
    // a frozen object
  }
}

async function settle(v) {
  if (v && typeof v.then === 'function') return await v;
  return v;
}

export const generators = [
  {
    entry: 'native functions',
    weight: 4,
    make(g, ctx) {
      const fn = g.pick(Object.keys(FUNCTIONS));
      const args = FUNCTIONS[fn](g, ctx);
      if (g.bool(0.1)) args[g.int(Math.max(1, args.length))] = g.badValue();
      if (g.bool(0.12)) armDetachingGetter(g, args);
      return {
        entry: `native ${fn}`,
        kind: 'either',
        run: async () => {
          try {
            return await settle(ctx.native[fn](...args));
          } finally {
            if (fn === 'threads') ctx.native.threads(0);
          }
        },
      };
    },
  },
  {
    entry: 'native classes',
    weight: 6,
    make(g, ctx) {
      const cls = g.pick(Object.keys(CLASSES));
      const spec = CLASSES[cls];
      let opts = spec.make(g);
      if (opts && g.bool(0.2)) {
        const k = g.pick(Object.keys(opts));
        opts = { ...opts, [k]: g.badNumberOrValue() };
      }
      const steps = Array.from({ length: g.range(1, 4) }, () =>
        g.pick(Object.keys(spec.methods).concat(g.bool(0.1) && cls !== 'CancelFlag' ? ['dispose'] : [])),
      );
      const concurrent = g.bool(0.3);
      return {
        entry: `native ${cls}`,
        kind: 'either',
        run: async () => {
          const obj = opts === undefined ? new ctx.native[cls]() : new ctx.native[cls](opts);
          const calls = steps.map((m) => () => {
            if (m === 'dispose') return settle(obj.dispose());
            const args = spec.methods[m](g, ctx, opts ?? {});
            if (g.bool(0.12)) armDetachingGetter(g, args);
            return settle(obj[m](...args));
          });
          try {
            if (concurrent) {
              const rs = await Promise.allSettled(calls.map((c) => c()));
              const bad = rs.find((r) => r.status === 'rejected');
              if (bad) throw bad.reason;
            } else {
              for (const c of calls) await c();
            }
          } finally {
            obj.dispose?.();
          }
        },
      };
    },
  },
];
