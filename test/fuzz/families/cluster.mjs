// StreamClusterer: constructor (bounded capacity), add (reference: the same
// documents added one by one in 'sequential' mode to a fresh clusterer, a
// different code path than 'batch'), aborted adds (all or nothing), the
// getters; TfidfTable and tfidf.
import { breakCsr, copyCsr, csrViews, diff, randomCsr } from '../gen.mjs';
import { scenarioCase, spoilOptions } from './common.mjs';

export const name = 'cluster';

function docs(g, cols) {
  return randomCsr(g, { rows: g.range(0, 40), cols, maxLen: g.range(0, 8), messy: g.bool(0.3) });
}

async function reference(lib, list, opts) {
  const c = new lib.StreamClusterer({ ...opts, backend: 'cpu' });
  const out = [];
  for (const d of list) out.push(await c.add(d, { mode: 'sequential' }));
  const state = { size: c.size, documents: c.documents };
  c.dispose();
  return { results: out.map((r) => ({ cluster: r.cluster, similarity: r.similarity, created: r.created })), state };
}

export const generators = [
  {
    entry: 'new StreamClusterer',
    weight: 2,
    make(g, { lib }) {
      const base = {
        threshold: g.r(),
        maxTerms: g.range(1, 1024),
        capacity: g.pick([1, 16, 1024, 2 ** 32 - 2, 2 ** 31]),
        decay: g.bool(0.3) ? { maxAge: g.int(100) } : undefined,
        backend: 'cpu',
      };
      const opts = g.bool(0.6) ? spoilOptions(g, base) : base;
      return { entry: this.entry, kind: 'either', run: () => new lib.StreamClusterer(opts).dispose() };
    },
  },
  {
    entry: 'StreamClusterer.add',
    weight: 7,
    async make(g, ctx) {
      const cols = g.range(1, 60);
      const opts = {
        threshold: g.pick([0, 0.1, 0.3, 0.6, 1]),
        maxTerms: g.range(1, 12),
        decay: g.bool(0.3) ? { maxAge: g.int(20) } : undefined,
      };
      const before = docs(g, cols);
      const batch = docs(g, cols);
      const ref = await reference(ctx.lib, [before, batch], opts);
      const c = new ctx.lib.StreamClusterer({ ...opts, backend: ctx.backend });
      await c.add(before, { mode: g.pick(['auto', 'batch', 'sequential']) });
      const mode = g.pick(['auto', 'batch', 'sequential']);
      const want = ref.results[1];
      const scenario = g.pick([
        'plain',
        'variant',
        'transfer',
        'rewrite',
        'worker',
        'abort-before',
        'abort-during',
        'dispose-before',
        'dispose-during',
        'queued',
      ]);
      if (scenario === 'queued') {
        // Adds made without waiting run in call order, each on the state the previous one left.
        const third = docs(g, cols);
        const ref3 = await reference(ctx.lib, [before, batch, third], opts);
        return {
          entry: this.entry,
          kind: 'valid',
          what: 'two adds queued',
          run: () =>
            Promise.all([c.add(copyCsr(batch), { mode }), c.add(copyCsr(third), { mode: g.pick(['auto', 'batch', 'sequential']) })]),
          check: ([a, b]) =>
            diff({ cluster: a.cluster, similarity: a.similarity, created: a.created }, ref3.results[1], 'first') ??
            diff({ cluster: b.cluster, similarity: b.similarity, created: b.created }, ref3.results[2], 'second'),
          cleanup: () => c.dispose(),
        };
      }
      const spec = {
        entry: this.entry,
        obj: c,
        abortable: true,
        want,
        normalize: (r) => ({ cluster: r.cluster, similarity: r.similarity, created: r.created }),
        inputs: () => {
          const d = copyCsr(batch);
          return { args: d, views: csrViews(d) };
        },
        remake: (d, fn) => ({ ...d, indptr: fn(d.indptr), indices: fn(d.indices), values: fn(d.values) }),
        call: (obj, d, signal) => obj.add(d, { mode, signal }),
      };
      const k = scenarioCase(g, ctx, spec, scenario);
      if (scenario === 'abort-during' || scenario === 'abort-before') {
        // All or nothing: after an abort the state is the pre-add state.
        const sizeBefore = c.size;
        const docsBefore = c.documents;
        const inner = k.run;
        const innerCheck = k.check;
        k.run = async () => {
          try {
            return await inner();
          } catch (e) {
            if (e?.code === 'ABORT_ERR' && (c.size !== sizeBefore || c.documents !== docsBefore))
              return { partial: true, size: c.size, documents: c.documents };
            throw e;
          }
        };
        k.check = (r) =>
          r?.partial
            ? `aborted add left size ${r.size} (was ${sizeBefore}), documents ${r.documents} (was ${docsBefore})`
            : innerCheck
              ? innerCheck(r)
              : null;
      }
      k.cleanup = () => c.dispose();
      return k;
    },
  },
  {
    entry: 'StreamClusterer.add (bad docs)',
    weight: 3,
    make(g, { lib }) {
      const c = new lib.StreamClusterer({ threshold: 0.3, backend: 'cpu' });
      const d = docs(g, g.range(1, 30));
      const [bad] = breakCsr(g, d);
      const u = g.int(4);
      if (u === 0 && d.values?.length) d.values[g.int(d.values.length)] = g.pick([NaN, -1, Infinity]);
      if (u === 1 && d.indices.length > 1 && d.indptr[1] >= 2) d.indices[1] = d.indices[0];
      return {
        entry: this.entry,
        kind: 'either',
        run: () => c.add(u < 2 ? d : bad, spoilOptions(g, { mode: 'auto' }, g.int(2))),
        cleanup: () => c.dispose(),
      };
    },
  },
  {
    entry: 'StreamClusterer getters',
    weight: 1,
    async make(g, { lib }) {
      const c = new lib.StreamClusterer({ threshold: 0.2, backend: 'cpu' });
      await c.add(docs(g, 20));
      const id = g.bool(0.5) ? g.int(c.size + 2) : g.badNumberOrValue();
      if (g.bool(0.2)) c.dispose();
      const which = g.pick(['centroid', 'members', 'active', 'size', 'documents', 'threshold']);
      return {
        entry: this.entry,
        kind: 'either',
        run: () => (typeof c[which] === 'function' ? c[which](id) : c[which]),
        cleanup: () => c.dispose(),
      };
    },
  },
  {
    entry: 'TfidfTable / tfidf',
    weight: 2,
    make(g, { lib }) {
      const t = new lib.TfidfTable();
      const m = randomCsr(g, { rows: g.range(0, 10), cols: g.pick([5, 100, 2 ** 32 - 1]), maxLen: 5 });
      const input = g.bool(0.3) ? breakCsr(g, m)[0] : m;
      const df = new Map();
      if (input === m)
        for (let r = 0; r < m.rows; r++)
          for (const x of new Set(m.indices.subarray(m.indptr[r], m.indptr[r + 1]))) df.set(x, (df.get(x) ?? 0) + 1);
      return {
        entry: this.entry,
        kind: input === m ? 'valid' : 'either',
        run: () => {
          lib.tfidf(input, t);
          return [...df.keys()].map((x) => [t.df(x), df.get(x)]);
        },
        check: (pairs) => pairs.map(([a, b]) => (a === b ? null : `df ${a} != ${b}`)).find((x) => x) ?? null,
      };
    },
  },
];
void diff;
