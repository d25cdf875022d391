// popcountRows, pinnedArray / isPinned, threads, devices, resolveBackend.
import { diff, oddBytes } from '../gen.mjs';
import { scenarioCase, spoilOptions } from './common.mjs';

export const name = 'ops';

function popcount(x) {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return (Math.imul((x + (x >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24) & 0xff;
}

export const generators = [
  {
    entry: 'popcountRows',
    weight: 3,
    make(g, ctx) {
      const bits = 32 * g.range(1, 5);
      const rows = g.range(0, 40);
      const words = Uint32Array.from({ length: (rows * bits) / 32 }, () => (g.r() * 4294967296) >>> 0);
      const want = Uint32Array.from({ length: rows }, (_, r) => {
        let c = 0;
        for (let i = 0; i < bits / 32; i++) c += popcount(words[(r * bits) / 32 + i]);
        return c;
      });
      if (g.bool(0.3)) {
        const bad = spoilOptions(g, { data: words, rows, bits });
        return { entry: this.entry, kind: 'either', run: () => ctx.lib.popcountRows(bad, { backend: 'cpu' }) };
      }
      return scenarioCase(g, ctx, {
        entry: this.entry,
        abortable: true,
        want,
        normalize: (r) => r.counts,
        inputs: () => {
          const d = g.bool(0.3) ? oddBytes(words) : words.slice();
          return { args: d, views: [d] };
        },
        remake: (d, fn) => fn(d),
        call: (_, d, signal) => ctx.lib.popcountRows({ data: d, rows, bits }, { backend: ctx.backend, signal }),
      });
    },
  },
  {
    entry: 'pinnedArray / isPinned / threads / devices / resolveBackend',
    weight: 2,
    make(g, { lib }) {
      const fn = g.pick(['pinnedArray', 'isPinned', 'threads', 'devices', 'resolveBackend']);
      const bad = g.bool(0.5);
      return {
        entry: this.entry,
        kind: bad ? 'either' : 'valid',
        run: () => {
          if (fn === 'pinnedArray') {
            const a = lib.pinnedArray(
              bad ? g.pick([Uint32Array, g.badValue()]) : g.pick([Uint8Array, Float32Array, Float64Array]),
              bad ? g.pick([g.badNumberOrValue(), 2 ** 60]) : g.int(100),
            );
            return a.subarray(0, 4096).every((x) => x === 0) ? 'zeroed' : 'not zeroed';
          }
          if (fn === 'isPinned') return typeof lib.isPinned(bad ? g.badValue() : new Uint8Array(3)) === 'boolean';
          if (fn === 'threads') {
            const before = lib.threads();
            try {
              return lib.threads(bad ? g.badNumberOrValue() : g.range(1, 3)) > 0;
            } finally {
              lib.threads(0);
              void before;
            }
          }
          if (fn === 'devices') return lib.devices().cuda === false || lib.devices().gpus.length > 0;
          return lib.resolveBackend(bad ? g.badValue() : 'cpu');
        },
        check: (r) => (r === false || r === 'not zeroed' ? `unexpected ${r}` : null),
      };
    },
  },
];
void diff;
