// In-memory MinHashLSH removal and save/load.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MinHashLSH } from '../lib/index.js';
import { backends, randInt, rng } from './helpers.js';
import { lshCorpus, type LshCorpus } from './lsh-corpus.js';
import { corruptionFuzz, parseContainer, resealed, sectionBytes } from './persist-helpers.js';

const dir = mkdtempSync(path.join(tmpdir(), 'cusim-lsh-persist-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let corpus: LshCorpus;
beforeAll(async () => {
  corpus = await lshCorpus(1, 150);
});

/** The rows of `ids` (in that order) from the corpus. */
function pick(c: LshCorpus, ids: number[]): Uint32Array {
  const per = c.samples * 2;
  const out = new Uint32Array(ids.length * per);
  ids.forEach((id, i) => out.set(c.sigs.subarray(id * per, (id + 1) * per), i * per));
  return out;
}

// What an index answers, without the GPU timings that come with it.
async function snapshot(lsh: MinHashLSH, c: LshCorpus) {
  const untimed = <T extends object>(r: T) => {
    const { kernelMs: _k, transferMs: _t, ...rest } = r as T & { kernelMs?: number; transferMs?: number };
    return rest;
  };
  return {
    query: await lsh.query(pick(c, [0, 3, 17, 40])),
    pairs: untimed(await lsh.candidatePairs()),
    estimate: untimed(await lsh.groups({ verify: 'estimate' })),
    exact: untimed(await lsh.groups({ verify: 'exact', matrix: c.matrix })),
  };
}

describe.each(backends)('MinHashLSH removal and save/load (%s)', (backend) => {
  it('remove: equal to an index that never held the removed rows; removed ids can come back', async () => {
    const c = corpus;
    const r = rng(2);
    const order = [...Array(c.rows).keys()].sort(() => r() - 0.5);
    using lsh = new MinHashLSH({ threshold: 0.7, samples: c.samples, backend });
    lsh.insert(order, pick(c, order));
    const gone = new Set(Array.from({ length: 60 }, () => order[randInt(r, c.rows)]));
    expect(lsh.remove([...gone, 1e9])).toBe(gone.size);
    expect(lsh.remove([...gone])).toBe(0);
    expect(lsh.size).toBe(c.rows - gone.size);
    const kept = order.filter((id) => !gone.has(id));
    using fresh = new MinHashLSH({ threshold: 0.7, samples: c.samples, backend });
    fresh.insert(kept, pick(c, kept));
    expect(await snapshot(lsh, c)).toEqual(await snapshot(fresh, c));
    const q = await lsh.query(c.sigs);
    for (const id of q.ids) expect(gone.has(id)).toBe(false);
    // Re-inserted, a removed id is found again.
    const back = [...gone].slice(0, 5);
    lsh.insert(back, pick(c, back));
    fresh.insert(back, pick(c, back));
    expect(await snapshot(lsh, c)).toEqual(await snapshot(fresh, c));
  });

  it('save/load: the loaded index equals the one saved', async () => {
    const c = corpus;
    using lsh = new MinHashLSH({ bands: 8, rows: 6, samples: c.samples, threshold: 0.6, backend });
    const order = [...Array(c.rows).keys()].reverse();
    lsh.insert(order.slice(0, 100), pick(c, order.slice(0, 100)));
    lsh.insert(order.slice(100), pick(c, order.slice(100)));
    lsh.remove([order[7], order[8]]);
    const file = path.join(dir, `lsh-${backend}.bin`);
    await lsh.save(file);
    expect(parseContainer(readFileSync(file)).kind).toBe('minhash-lsh');
    using back = await MinHashLSH.load(file, { backend });
    expect([back.bands, back.rows, back.samples, back.threshold, back.size]).toEqual([8, 6, c.samples, 0.6, lsh.size]);
    expect(await snapshot(back, c)).toEqual(await snapshot(lsh, c));
    // An empty index round-trips too.
    using empty = new MinHashLSH({ threshold: 0.5, samples: 16, backend });
    await empty.save(file);
    using e2 = await MinHashLSH.load(file, { backend });
    expect([e2.size, e2.bands, e2.rows]).toEqual([0, empty.bands, empty.rows]);
  });
});

describe('MinHashLSH files', () => {
  it('random truncations and byte flips give only CUSIM_BAD_FILE', async () => {
    using lsh = new MinHashLSH({ threshold: 0.7, samples: corpus.samples, backend: 'cpu' });
    lsh.insert([...Array(40).keys()], pick(corpus, [...Array(40).keys()]));
    const file = path.join(dir, 'fuzz.bin');
    await lsh.save(file);
    const bad = path.join(dir, 'fuzz-bad.bin');
    await corruptionFuzz(readFileSync(file), async (b) => {
      writeFileSync(bad, b);
      (await MinHashLSH.load(bad)).dispose();
    });
  });

  it('values that pass the checksums but not the checks are refused', async () => {
    using lsh = new MinHashLSH({ threshold: 0.7, samples: 16, backend: 'cpu' });
    lsh.insert(
      [5, 6, 7],
      new Uint32Array(3 * 32).map((_, i) => i),
    );
    const file = path.join(dir, 'vals.bin');
    await lsh.save(file);
    const good = readFileSync(file);
    const bad = path.join(dir, 'vals-bad.bin');
    const load = (b: Buffer) => {
      writeFileSync(bad, b);
      return MinHashLSH.load(bad);
    };
    const ids = Buffer.from(sectionBytes(good, 'IDS_'));
    ids.writeUInt32LE(5, 4);
    await expect(load(resealed(good, 'IDS_', ids))).rejects.toMatchObject({
      code: 'CUSIM_BAD_FILE',
      message: expect.stringMatching(/repeats/),
    });
    const parm = Buffer.from(sectionBytes(good, 'PARM'));
    parm.writeUInt32LE(17, 0); // samples: the signature section no longer fits
    await expect(load(resealed(good, 'PARM', parm))).rejects.toThrow(/sections do not hold 3 rows of 17 samples/);
    const thr = Buffer.from(sectionBytes(good, 'PARM'));
    thr.writeDoubleLE(NaN, 16);
    await expect(load(resealed(good, 'PARM', thr))).rejects.toThrow(/threshold NaN/);
    await expect(MinHashLSH.load(path.join(dir, 'nope.bin'))).rejects.toMatchObject({
      code: 'CUSIM_IO_ERROR',
      message: expect.stringMatching(/cannot open .*ENOENT/),
    });
    await expect(MinHashLSH.load('a\0b')).rejects.toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT' });
    await expect(lsh.save('')).rejects.toThrow(TypeError);
  });
});
