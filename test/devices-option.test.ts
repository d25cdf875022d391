// One GPU option across engines: `devices` ('all' or indices) everywhere; the
// engines that run on one GPU take one index. The removed `device: n` is a
// coded error, not silently GPU 0. Checked on the CPU backend, where the option is validated
// the same way and results must not change. The first block holds on every
// host (a list of two is refused as such before its indices meet the host's
// GPUs); the range checks against this host's GPU count say what they assume.
import { describe, expect, it } from 'vitest';
import { FlyHash, HammingIndex, StreamClusterer, popcountRows, similarityJoin } from '../lib/index.js';
import { expectInvalid, gpuCount, itGpus } from './helpers.js';

type Gpu = { devices?: 'all' | number[]; device?: number };

const engines: { name: string; run: (g: Gpu) => Promise<unknown[]> }[] = [
  {
    name: 'HammingIndex',
    run: async (g) => {
      using ix = new HammingIndex({ bits: 32, backend: 'cpu', ...g });
      ix.add(Uint32Array.of(0b1011, 0b1111, 0));
      const r = await ix.search(Uint32Array.of(0b1010), { k: 2 });
      return [...r.ids, ...r.distances];
    },
  },
  {
    name: 'similarityJoin',
    run: async (g) => {
      const sets = { rows: 3, cols: 8, indptr: Uint32Array.of(0, 3, 6, 8), indices: Uint32Array.of(0, 1, 2, 0, 1, 3, 5, 6) };
      const r = await similarityJoin(sets, { threshold: 0.4, backend: 'cpu', ...g });
      return [...r.left, ...r.right, ...r.similarity];
    },
  },
  {
    name: 'StreamClusterer',
    run: async (g) => {
      using c = new StreamClusterer({ threshold: 0.5, maxTerms: 8, backend: 'cpu', ...g });
      const docs = {
        rows: 2,
        cols: 4,
        indptr: Uint32Array.of(0, 2, 4),
        indices: Uint32Array.of(0, 1, 0, 1),
        values: Float32Array.of(1, 2, 1, 2),
      };
      const r = await c.add(docs);
      return [...r.cluster, ...r.similarity, ...r.created];
    },
  },
  {
    name: 'FlyHash',
    run: async (g) => {
      using fly = new FlyHash({ inputDim: 8, hashLength: 32, connections: 3, winners: 4, seed: 1, backend: 'cpu', ...g });
      const r = await fly.hash({ rows: 1, cols: 8, data: Float32Array.of(1, 0, 3, 2, 0, 5, 1, 1) });
      return [...r.data];
    },
  },
  {
    name: 'popcountRows',
    run: async (g) => [...(await popcountRows({ data: Uint32Array.of(7, 1), rows: 2, bits: 32 }, { backend: 'cpu', ...g })).counts],
  },
];

describe('the devices option of the single-GPU engines', () => {
  for (const e of engines) {
    it(`${e.name}: devices 'all' or [0] give the default's result; two GPUs or the removed device option are coded errors`, async () => {
      const want = await e.run({});
      expect(want.length).toBeGreaterThan(0);
      expect(await e.run({ devices: 'all' })).toEqual(want);
      expect(await e.run({ devices: [0] })).toEqual(want);
      const fails = async (g: Gpu, cls: ErrorConstructor, msg: RegExp) => {
        let err: unknown;
        try {
          await e.run(g);
        } catch (x) {
          err = x;
        }
        expectInvalid(
          () => {
            if (err) throw err;
          },
          cls,
          msg,
        );
      };
      await fails({ devices: [0, 1] }, RangeError, new RegExp(`devices lists 2 GPUs, but ${e.name} runs on one`));
      await fails({ device: 0 }, TypeError, /device was removed: pass devices: \[n\]/);
      await fails({ devices: [0], device: 0 }, TypeError, /device was removed/);
      await fails({ devices: [] }, TypeError, /devices must be 'all' or a non-empty array/);
    });

    itGpus(1, Infinity, `${e.name}: an index past this host's GPUs is a coded RangeError naming the count`, async () => {
      const past = new RegExp(`devices\\[0\\]=${gpuCount} is out of range: this host has ${gpuCount} GPU\\(s\\)`);
      await expect(e.run({ devices: [gpuCount] })).rejects.toThrow(past);
      await expect(e.run({ devices: [gpuCount] })).rejects.toBeInstanceOf(RangeError);
      await expect(e.run({ devices: [gpuCount] })).rejects.toHaveProperty('code', 'CUSIM_INVALID_ARGUMENT');
      expect(await e.run({ devices: [gpuCount - 1] })).toEqual(await e.run({}));
    });

    itGpus(0, 0, `${e.name}: without GPUs the CPU backend has no indices to check an index against`, async () => {
      expect(await e.run({ devices: [3] })).toEqual(await e.run({}));
    });
  }
});
