// HammingIndex removal and save/load: removal equals an index of the live
// codes alone (ids mapped), save/load equals the index saved, on both backends.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { HammingIndex, MISSING_ID, type HammingIndexOptions } from '../lib/index.js';
import { backends, describeGpu, randInt, randomBits, rng } from './helpers.js';
import { corruptionFuzz, parseContainer, resealed, sectionBytes } from './persist-helpers.js';

const dir = mkdtempSync(path.join(tmpdir(), 'cusim-hamming-persist-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function popc32(x: number): number {
  x = x - ((x >>> 1) & 0x55555555);
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return (Math.imul((x + (x >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24) & 0xff;
}

/** Brute force over (id, code) pairs: sorted by (distance, id), padded with (MISSING_ID, bits). */
function oracle(codes: Map<number, Uint32Array>, qs: Uint32Array, bits: number, k: number) {
  const w = bits / 32;
  const nq = qs.length / w;
  const ids = new Uint32Array(nq * k).fill(MISSING_ID);
  const dist = new Uint16Array(nq * k).fill(bits);
  for (let q = 0; q < nq; q++) {
    const all = [...codes].map(([id, c]) => {
      let d = 0;
      for (let x = 0; x < w; x++) d += popc32((c[x] ^ qs[q * w + x]) >>> 0);
      return [d, id];
    });
    all.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    for (let i = 0; i < Math.min(k, all.length); i++) {
      ids[q * k + i] = all[i][1];
      dist[q * k + i] = all[i][0];
    }
  }
  return { ids, dist };
}

/** Codes with many exact ties (few distinct values), so the id tie rule matters. */
function tiedCodes(seed: number, n: number, bits: number): Uint32Array {
  const r = rng(seed);
  const w = bits / 32;
  const base = randomBits(r, 12, bits);
  const out = new Uint32Array(n * w);
  for (let i = 0; i < n; i++) out.set(base.subarray(randInt(r, 12) * w, (randInt(r, 12) + 1) * w).slice(0, w), i * w);
  return out;
}

const ewh: HammingIndexOptions = { bits: 64, method: 'ewh', tables: 6, keyBits: 6, maxErrors: 2, weights: [4, 2, 1], minScore: 3, seed: 5 };

describe.each(backends)('HammingIndex removal (%s)', (backend) => {
  it('exact: searches equal brute force over the live codes, never a removed id; ids keep counting', async () => {
    const bits = 96;
    const w = bits / 32;
    const r = rng(3);
    const codes = tiedCodes(1, 500, bits);
    using ix = new HammingIndex({ bits, backend });
    ix.add(codes);
    const live = new Map<number, Uint32Array>();
    for (let i = 0; i < 500; i++) live.set(i, codes.subarray(i * w, (i + 1) * w));
    const gone = Array.from({ length: 180 }, () => randInt(r, 500));
    const distinct = new Set(gone);
    expect(ix.remove(gone)).toBe(distinct.size);
    expect(ix.remove(gone.slice(0, 10))).toBe(0); // already removed
    expect(ix.remove([100000, 0xffffffff])).toBe(0); // never added
    for (const g of distinct) live.delete(g);
    expect(ix.size).toBe(live.size);
    expect([...ix.ids()]).toEqual([...live.keys()].sort((a, b) => a - b));
    const qs = randomBits(r, 20, bits);
    for (const k of [1, 7, 64, 400]) {
      const got = await ix.search(qs, { k });
      const want = oracle(live, qs, bits, k);
      expect(got.ids).toEqual(want.ids);
      expect(got.distances).toEqual(want.dist);
    }
    // Adds after a removal get new ids, and removing them works before any search.
    const more = tiedCodes(2, 50, bits);
    expect(ix.add(more)).toBe(live.size + 50);
    for (let i = 0; i < 50; i++) live.set(500 + i, more.subarray(i * w, (i + 1) * w));
    expect(ix.remove([501, 549, 3])).toBe(distinct.has(3) ? 2 : 3);
    for (const g of [501, 549, 3]) live.delete(g);
    const got = await ix.search(qs, { k: 30 });
    expect(got.ids).toEqual(oracle(live, qs, bits, 30).ids);
    // Everything removed: an empty index.
    expect(ix.remove(ix.ids())).toBe(live.size);
    expect(ix.size).toBe(0);
    await expect(ix.search(qs, { k: 1 })).rejects.toThrow(/empty index/);
  });

  it('EWH: search and scores equal an index built from the live codes alone, ids mapped', async () => {
    const r = rng(9);
    const w = ewh.bits / 32;
    const codes = randomBits(r, 800, ewh.bits);
    using ix = new HammingIndex({ ...ewh, backend });
    ix.add(codes);
    await ix.build(); // buckets built before the removal are rebuilt after it
    const gone = new Set(Array.from({ length: 300 }, () => randInt(r, 800)));
    ix.remove([...gone]);
    const liveIds = [...Array(800).keys()].filter((i) => !gone.has(i));
    using fresh = new HammingIndex({ ...ewh, backend });
    const liveCodes = new Uint32Array(liveIds.length * w);
    liveIds.forEach((id, j) => liveCodes.set(codes.subarray(id * w, (id + 1) * w), j * w));
    fresh.add(liveCodes);
    expect([...ix.ids()]).toEqual(liveIds);
    const qs = randomBits(r, 25, ewh.bits);
    expect(await ix.scores(qs)).toEqual(await fresh.scores(qs));
    const a = await ix.search(qs, { k: 10 });
    const b = await fresh.search(qs, { k: 10 });
    expect(a.ids).toEqual(b.ids.map((p) => (p === MISSING_ID ? p : liveIds[p])));
    expect(a.distances).toEqual(b.distances);
    for (const id of a.ids) expect(gone.has(id)).toBe(false);
  });

  it('rejects bad ids with coded errors', () => {
    using ix = new HammingIndex({ bits: 32, backend });
    expect(() => ix.remove('x' as never)).toThrow(expect.objectContaining({ code: 'CUSIM_INVALID_ARGUMENT' }));
    expect(() => ix.remove([1.5])).toThrow(expect.objectContaining({ code: 'CUSIM_INVALID_ARGUMENT' }));
    expect(() => ix.remove([-1])).toThrow(RangeError);
    expect(ix.remove([])).toBe(0);
  });
});

describe.each(backends)('HammingIndex save/load (%s)', (backend) => {
  it('exact and EWH indexes load equal to what was saved: searches, scores, ids, positions; adds continue the ids', async () => {
    const r = rng(11);
    for (const opts of [{ bits: 128 } as HammingIndexOptions, ewh]) {
      const codes = randomBits(r, 600, opts.bits);
      using ix = new HammingIndex({ ...opts, backend });
      ix.add(codes);
      ix.remove([0, 5, 77, 599]);
      const file = path.join(dir, `ix-${opts.method ?? 'exact'}-${backend}.bin`);
      await ix.save(file);
      using back = await HammingIndex.load(file, { backend });
      expect(back.bits).toBe(opts.bits);
      expect(back.method).toBe(opts.method ?? 'exact');
      expect(back.size).toBe(ix.size);
      expect(back.ids()).toEqual(ix.ids());
      expect(back.positions()).toEqual(ix.positions());
      const qs = randomBits(r, 30, opts.bits);
      const [a, b] = [await ix.search(qs, { k: 12 }), await back.search(qs, { k: 12 })];
      expect(b.ids).toEqual(a.ids);
      expect(b.distances).toEqual(a.distances);
      if (opts.method === 'ewh') expect(await back.scores(qs)).toEqual(await ix.scores(qs));
      const more = randomBits(r, 3, opts.bits);
      expect(back.add(more)).toBe(ix.add(more));
      expect(back.ids()).toEqual(ix.ids());
      expect(back.ids()[back.size - 1]).toBe(602);
    }
  });
});

describe('HammingIndex files', () => {
  it('an index without removals has no id section; one with removals stores its ids', async () => {
    using ix = new HammingIndex({ bits: 32, backend: 'cpu' });
    ix.add(new Uint32Array([1, 2, 3, 4]));
    const a = path.join(dir, 'plain.bin');
    await ix.save(a);
    const pa = parseContainer(readFileSync(a));
    expect(pa.kind).toBe('hamming');
    expect(pa.sections.map((s) => s.tag)).toEqual(['PARM', 'CODE']);
    expect(pa.sections[1].bytes).toBe(16);
    ix.remove([1]);
    await ix.save(a);
    const pb = parseContainer(readFileSync(a));
    expect(pb.sections.map((s) => [s.tag, s.bytes])).toEqual([
      ['PARM', pa.sections[0].bytes],
      ['CODE', 12],
      ['IDS_', 12],
    ]);
    expect([...new Uint32Array(Uint8Array.from(sectionBytes(readFileSync(a), 'IDS_')).buffer)]).toEqual([0, 2, 3]);
  });

  it('random truncations and byte flips give only CUSIM_BAD_FILE', async () => {
    using ix = new HammingIndex({ ...ewh, backend: 'cpu' });
    ix.add(randomBits(rng(4), 300, ewh.bits));
    ix.remove([3, 4, 200]);
    const file = path.join(dir, 'fuzz.bin');
    await ix.save(file);
    const bad = path.join(dir, 'fuzz-bad.bin');
    await corruptionFuzz(readFileSync(file), async (b) => {
      writeFileSync(bad, b);
      (await HammingIndex.load(bad, { backend: 'cpu' })).dispose();
    });
  });

  it('values that pass the checksums but not the checks are refused', async () => {
    using ix = new HammingIndex({ bits: 64, backend: 'cpu' });
    ix.add(randomBits(rng(5), 10, 64));
    ix.remove([2]);
    const file = path.join(dir, 'vals.bin');
    await ix.save(file);
    const good = readFileSync(file);
    const bad = path.join(dir, 'vals-bad.bin');
    const load = (b: Buffer) => {
      writeFileSync(bad, b);
      return HammingIndex.load(bad, { backend: 'cpu' });
    };
    const ids = Buffer.from(sectionBytes(good, 'IDS_'));
    ids.writeUInt32LE(ids.readUInt32LE(4), 0); // not ascending
    await expect(load(resealed(good, 'IDS_', ids))).rejects.toThrow(/ids are not ascending/);
    // PARM: bits u32 at 0; rows u64 at 52.
    const parm = Buffer.from(sectionBytes(good, 'PARM'));
    parm.writeUInt32LE(48, 0);
    await expect(load(resealed(good, 'PARM', parm))).rejects.toThrow(/bad bits or method/);
    const rows = Buffer.from(sectionBytes(good, 'PARM'));
    rows.writeBigUInt64LE(1000n, 52);
    await expect(load(resealed(good, 'PARM', rows))).rejects.toMatchObject({ code: 'CUSIM_BAD_FILE' });
    // Another engine's file.
    const { StreamClusterer } = await import('../lib/index.js');
    using c = new StreamClusterer({ threshold: 0.5, backend: 'cpu' });
    const cf = path.join(dir, 'cluster.bin');
    await c.save(cf);
    await expect(HammingIndex.load(cf)).rejects.toThrow(/holds a 'stream-cluster' state, not a 'hamming'/);
  });
});

describeGpu('HammingIndex removal and load', () => {
  it('exact search after removal equals the CPU backend for every kernel; a CPU save loads on CUDA', async () => {
    const r = rng(21);
    for (const bits of [64, 256, 512]) {
      const codes = tiedCodes(bits, 3000, bits);
      const gone = Array.from({ length: 900 }, () => randInt(r, 3000));
      using cpu = new HammingIndex({ bits, backend: 'cpu' });
      cpu.add(codes);
      cpu.remove(gone);
      const file = path.join(dir, `gpu-${bits}.bin`);
      await cpu.save(file);
      const before = randomBits(r, 2, bits);
      const qs = randomBits(r, 40, bits);
      // The exact kernel is fixed at construction: one index per kernel.
      for (const exactKernel of ['auto', 'popc', 'mma2'] as const) {
        using gpu = new HammingIndex({ bits, backend: 'cuda', tuning: { exactKernel } });
        gpu.add(codes);
        await gpu.search(before, { k: 3 }); // a device copy made before the removal
        gpu.remove(gone);
        for (const k of [1, 10, 300]) {
          const want = await cpu.search(qs, { k });
          const got = await gpu.search(qs, { k });
          expect(got.ids, exactKernel).toEqual(want.ids);
          expect(got.distances, exactKernel).toEqual(want.distances);
        }
        for (const id of (await gpu.search(qs, { k: 300 })).ids) expect(gone.includes(id)).toBe(false);
      }
      using loaded = await HammingIndex.load(file, { backend: 'cuda' });
      for (const k of [1, 10, 300]) expect((await loaded.search(qs, { k })).ids).toEqual((await cpu.search(qs, { k })).ids);
    }
  });

  it('EWH search and scores after removal equal the CPU backend', async () => {
    const r = rng(22);
    const codes = randomBits(r, 2000, ewh.bits);
    const gone = Array.from({ length: 700 }, () => randInt(r, 2000));
    using cpu = new HammingIndex({ ...ewh, backend: 'cpu' });
    using gpu = new HammingIndex({ ...ewh, backend: 'cuda' });
    cpu.add(codes);
    gpu.add(codes);
    await gpu.build();
    cpu.remove(gone);
    gpu.remove(gone);
    const qs = randomBits(r, 30, ewh.bits);
    expect(await gpu.scores(qs)).toEqual(await cpu.scores(qs));
    const [a, b] = [await cpu.search(qs, { k: 16 }), await gpu.search(qs, { k: 16 })];
    expect(b.ids).toEqual(a.ids);
    expect(b.distances).toEqual(a.distances);
  });
});
