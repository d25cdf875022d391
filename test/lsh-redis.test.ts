// MinHashLSH with Redis storage against the in-memory index on the same
// inserts: one real redis-server and a real 3-node Redis Cluster.
import { beforeAll, describe, expect, it } from 'vitest';
import { MinHash, MinHashLSH, tokenHashRows, type CsrMatrix } from '../lib/index.js';
import { randInt, rng } from './helpers.js';
import type { Cluster, Redis } from 'ioredis';
import { connectRedis } from '../lib/lsh-redis.js';
import { lshCorpus, sigRows, type LshCorpus } from './lsh-corpus.js';
import { describeRedis, useRedis } from './redis-helpers.js';

let corpus: LshCorpus;
beforeAll(async () => {
  corpus = await lshCorpus(7, 220);
});

function rowsOf(m: CsrMatrix, b: number, e: number): CsrMatrix {
  const base = m.indptr[b];
  return {
    rows: e - b,
    cols: m.cols,
    indptr: Uint32Array.from(m.indptr.subarray(b, e + 1), (x) => x - base),
    indices: m.indices.subarray(base, m.indptr[e]),
    values: m.values!.subarray(base, m.indptr[e]),
  };
}

/** Rows `ids` of `m` (row i = ids[i]). */
function rowsById(m: CsrMatrix, ids: Uint32Array): CsrMatrix {
  const indptr = new Uint32Array(ids.length + 1);
  ids.forEach((id, i) => (indptr[i + 1] = indptr[i] + m.indptr[id + 1] - m.indptr[id]));
  const indices = new Uint32Array(indptr[ids.length]);
  const values = new Float32Array(indptr[ids.length]);
  ids.forEach((id, i) => {
    indices.set(m.indices.subarray(m.indptr[id], m.indptr[id + 1]), indptr[i]);
    values.set(m.values!.subarray(m.indptr[id], m.indptr[id + 1]), indptr[i]);
  });
  return { rows: ids.length, cols: m.cols, indptr, indices, values };
}

function weightedJaccardRows(m: CsrMatrix, a: number, b: number): number {
  const row = (r: number) => {
    const w = new Map<number, number>();
    for (let i = m.indptr[r]; i < m.indptr[r + 1]; i++) w.set(m.indices[i], (w.get(m.indices[i]) ?? 0) + m.values![i]);
    return w;
  };
  const x = row(a);
  const y = row(b);
  let mn = 0;
  let mx = 0;
  for (const k of new Set([...x.keys(), ...y.keys()])) {
    mn += Math.min(x.get(k) ?? 0, y.get(k) ?? 0);
    mx += Math.max(x.get(k) ?? 0, y.get(k) ?? 0);
  }
  return mx > 0 ? mn / mx : 0;
}

async function everything(lsh: MinHashLSH, c: LshCorpus, withMatrix = true) {
  return {
    count: await lsh.count(),
    query: await lsh.query(c.sigs),
    pairs: await lsh.candidatePairs(),
    none: await lsh.groups({ verify: 'none' }),
    estimate: await lsh.groups({ verify: 'estimate' }),
    exact: await lsh.groups({ verify: 'exact', ...(withMatrix ? { matrix: c.matrix } : {}) }),
  };
}

function sameGroups(a: Awaited<ReturnType<typeof everything>>, b: Awaited<ReturnType<typeof everything>>) {
  expect(a.count).toBe(b.count);
  expect(a.query).toEqual(b.query);
  expect(a.pairs.left).toEqual(b.pairs.left);
  expect(a.pairs.right).toEqual(b.pairs.right);
  for (const k of ['none', 'estimate', 'exact'] as const) {
    expect(a[k].ids).toEqual(b[k].ids);
    expect(a[k].group).toEqual(b[k].group);
    expect(a[k].count).toBe(b[k].count);
    expect(a[k].pairs).toEqual(b[k].pairs);
  }
}

/** Every 12-byte entry of the band keys `prefix:b{…}`, over every master, as hex (a Redis index's raw band entries). */
async function bandEntries(url: string, prefix: string): Promise<string[]> {
  const c = await connectRedis(url);
  try {
    const nodes: Redis[] = (c as Cluster).isCluster ? (c as Cluster).nodes('master') : [c as Redis];
    const out: string[] = [];
    for (const node of nodes) {
      for (const key of await node.keys(`${prefix}:b{*`)) {
        const d = (await node.getBuffer(key))!;
        expect(d.length % 12).toBe(0);
        for (let i = 0; i < d.length; i += 12) out.push(`${key}/${d.subarray(i, i + 12).toString('hex')}`);
      }
    }
    return out;
  } finally {
    c.disconnect();
  }
}

function suite(cluster: boolean) {
  const handle = useRedis({ cluster });
  let n = 0;
  const open = (prefix: string, { kind, ...extra }: Record<string, unknown> & { kind?: 'classic' } = {}) =>
    new MinHashLSH({
      threshold: 0.7,
      samples: corpus.samples,
      backend: 'cpu',
      kind,
      storage: { type: 'redis', url: handle().url, prefix, partitions: 16, signatures: true, ...extra },
    });

  it('equals the in-memory index on the same inserts: queries, pairs, groups under every verification', async () => {
    const c = corpus;
    using mem = new MinHashLSH({ threshold: 0.7, samples: c.samples, backend: 'cpu' });
    const all = Uint32Array.from({ length: c.rows }, (_, i) => i);
    mem.insert(all, c.sigs);
    const lsh = open(`eq${n++}`);
    // Batches out of order, through two clients: the index is the set of rows.
    const other = open(lsh.storagePrefix!);
    const cuts = [0, 37, 150, 151, c.rows];
    for (const k of [2, 0, 3, 1]) {
      await (k % 2 ? other : lsh).insert(all.subarray(cuts[k], cuts[k + 1]), sigRows(c.sigs, c.samples, cuts[k], cuts[k + 1]), {
        vectors: rowsOf(c.matrix, cuts[k], cuts[k + 1]),
      });
    }
    const want = await everything(mem, c);
    sameGroups(await everything(lsh, c), want);
    sameGroups(await everything(other, c, false), want); // exact verification from the stored vectors
    expect(want.exact.count).toBeGreaterThan(20);
    // Vectors the caller keeps elsewhere (groups' rows): asked only for inserted ids, and the groups are the same.
    const asked: number[] = [];
    const fromRows = await other.groups({
      verify: 'exact',
      rows: async (ids) => {
        asked.push(...ids);
        return rowsById(c.matrix, ids);
      },
    });
    expect(fromRows.group).toEqual(want.exact.group);
    expect(fromRows.pairs).toEqual(want.exact.pairs);
    expect(asked.length).toBeGreaterThan(0);
    expect(asked.every((id) => id < c.rows)).toBe(true);
    await expect(other.groups({ verify: 'exact', rows: 'x' as never })).rejects.toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT' });
    await expect(other.groups({ verify: 'exact', matrix: c.matrix, rows: async (ids) => rowsById(c.matrix, ids) })).rejects.toThrow(
      /pass matrix or rows, not both/,
    );
    await expect(other.groups({ verify: 'exact', rows: async (ids) => rowsById(c.matrix, ids.subarray(1)) })).rejects.toThrow(
      /returned \d+ rows for \d+ ids/,
    );
    await expect(mem.groups({ verify: 'exact', rows: async (ids) => rowsById(c.matrix, ids) })).rejects.toThrow(
      /rows applies to Redis storage/,
    );
    // A batch sent again (a restarted worker) changes nothing, and adds no band entry.
    const before = await bandEntries(handle().url, lsh.storagePrefix!);
    expect(new Set(before).size).toBe(before.length);
    expect(before.length).toBeGreaterThan(lsh.bands * 100);
    await lsh.insert(all.subarray(cuts[1], cuts[2]), sigRows(c.sigs, c.samples, cuts[1], cuts[2]), {
      vectors: rowsOf(c.matrix, cuts[1], cuts[2]),
    });
    expect((await bandEntries(handle().url, lsh.storagePrefix!)).sort()).toEqual(before.sort());
    sameGroups(await everything(lsh, c), want);
    await other.close();
    await lsh.clear();
  });

  it("classic signatures (kind 'classic'): equal to the in-memory index; exact verification is set Jaccard", async () => {
    const c = corpus;
    using mh = new MinHash({ samples: c.samples, seed: 5, backend: 'cpu' });
    const sigs = await mh.hash(tokenHashRows(c.matrix));
    const cc = { ...c, sigs };
    using mem = new MinHashLSH({ threshold: 0.7, samples: c.samples, backend: 'cpu', kind: 'classic' });
    const all = Uint32Array.from({ length: c.rows }, (_, i) => i);
    mem.insert(all, sigs);
    const lsh = open(`cl${n++}`, { kind: 'classic' });
    const other = open(lsh.storagePrefix!, { kind: 'classic' });
    const cut = 101;
    await lsh.insert(all.subarray(cut), sigs.subarray(cut * c.samples), { vectors: rowsOf(c.matrix, cut, c.rows) });
    await other.insert(all.subarray(0, cut), sigs.subarray(0, cut * c.samples), { vectors: rowsOf(c.matrix, 0, cut) });
    const want = await everything(mem, cc);
    sameGroups(await everything(lsh, cc), want);
    sameGroups(await everything(other, cc, false), want);
    // Independent oracle: brute-force Jaccard of the rows' column sets (the weights vary, so weighted Jaccard differs).
    const set = (r: number) => new Set(c.matrix.indices.subarray(c.matrix.indptr[r], c.matrix.indptr[r + 1]));
    const g = await other.groups({ verify: 'exact' });
    expect(g.pairs.left.length).toBeGreaterThan(20);
    let weightedDiffers = 0;
    g.pairs.left.forEach((l, k) => {
      const a = set(l);
      const b = set(g.pairs.right[k]);
      const inter = [...a].filter((x) => b.has(x)).length;
      const j = inter / (a.size + b.size - inter);
      expect(g.pairs.similarity[k]).toBeCloseTo(j, 6);
      expect(j).toBeGreaterThanOrEqual(0.7);
      if (j < 1 && Math.abs(weightedJaccardRows(c.matrix, l, g.pairs.right[k]) - j) > 1e-3) weightedDiffers++;
    });
    expect(weightedDiffers).toBeGreaterThan(0);
    // The index's kind is fixed in Redis: a weighted MinHashLSH on it is refused.
    const weighted = open(lsh.storagePrefix!);
    await expect(weighted.count()).rejects.toMatchObject({
      code: 'CUSIM_STORAGE_ERROR',
      message: expect.stringMatching(/has width=1, this MinHashLSH has width=2/),
    });
    await weighted.close();
    expect(() => lsh.insert([1], sigRows(c.sigs, c.samples, 1, 2))).toThrow(/samples \* 1 = /);
    await other.close();
    await lsh.clear();
  });

  it('removal: equal to the in-memory index after the same removals; removed ids are retired', async () => {
    const c = corpus;
    const r = rng(3);
    const gone = [...new Set(Array.from({ length: 40 }, () => randInt(r, c.rows)))];
    using mem = new MinHashLSH({ threshold: 0.7, samples: c.samples, backend: 'cpu' });
    mem.insert(
      Uint32Array.from({ length: c.rows }, (_, i) => i),
      c.sigs,
    );
    mem.remove(gone);
    const lsh = open(`rm${n++}`);
    await lsh.insert(
      Uint32Array.from({ length: c.rows }, (_, i) => i),
      c.sigs,
    );
    expect(await lsh.remove([...gone, 999999])).toBe(gone.length);
    expect(await lsh.remove(gone)).toBe(0);
    sameGroups(await everything(lsh, c), await everything(mem, c));
    for (const id of (await lsh.query(c.sigs)).ids) expect(gone.includes(id)).toBe(false);
    await expect(lsh.insert([gone[0]], sigRows(c.sigs, c.samples, gone[0], gone[0] + 1))).rejects.toThrow(
      /was removed from this Redis index/,
    );
    await lsh.clear();
  });

  it('a second process sees inserts at once; mismatched parameters and data are coded errors', async () => {
    const c = corpus;
    const a = open(`vis${n++}`);
    const b = open(a.storagePrefix!);
    await a.insert([5, 6], sigRows(c.sigs, c.samples, 5, 7));
    expect(await b.count()).toBe(2);
    const q = await b.query(sigRows(c.sigs, c.samples, 5, 6));
    expect([...q.ids]).toContain(5);
    const wrong = new MinHashLSH({
      bands: 3,
      rows: 2,
      samples: c.samples,
      storage: { type: 'redis', url: handle().url, prefix: a.storagePrefix! },
    });
    await expect(wrong.count()).rejects.toMatchObject({
      code: 'CUSIM_STORAGE_ERROR',
      message: expect.stringMatching(/has bands=\d+, this MinHashLSH has bands=3/),
    });
    await wrong.close();
    // One id with two different signatures.
    await a.insert([5], sigRows(c.sigs, c.samples, 9, 10));
    await expect(b.groups({ verify: 'estimate' })).rejects.toMatchObject({
      code: 'CUSIM_STORAGE_ERROR',
      message: expect.stringMatching(/id 5 was inserted twice/),
    });
    // Without stored signatures, only exact verification applies.
    const noSig = open(`nosig${n++}`, { signatures: false });
    const twice = new Uint32Array(c.samples * 4);
    twice.set(sigRows(c.sigs, c.samples, 1, 2));
    twice.set(sigRows(c.sigs, c.samples, 1, 2), c.samples * 2);
    await noSig.insert([1, 2], twice);
    await expect(noSig.groups({ verify: 'estimate' })).rejects.toThrow(/storage.signatures: true/);
    await expect(noSig.groups({ verify: 'exact' })).rejects.toMatchObject({
      code: 'CUSIM_STORAGE_ERROR',
      // Either id may be the first a cluster node reports missing.
      message: expect.stringMatching(/no vector .* is stored for id [12]\b/),
    });
    await noSig.clear();
    await b.close();
    await a.clear();
  });

  it('clients opening one new index at once all agree on its parameters; an index from before widths were recorded is weighted', async () => {
    // Each client records the parameters it brings where none are: done field by field, a client
    // could read another's half-written set (format but no width) and take it for an old index.
    for (let round = 0; round < 4; round++) {
      const prefix = `race${n++}`;
      const clients = Array.from({ length: 12 }, () => open(prefix, { kind: 'classic' }));
      const counts = await Promise.allSettled(clients.map((l) => l.count()));
      expect(counts.map((r) => (r.status === 'fulfilled' ? r.value : String(r.reason)))).toEqual(clients.map(() => 0));
      await Promise.all(clients.map((l) => l.close()));
    }
    const c = await connectRedis(handle().url);
    try {
      const prefix = `old${n++}`;
      await c.hset(`${prefix}:meta`, { format: 'cusim.lsh/1', samples: String(corpus.samples) });
      const classic = open(prefix, { kind: 'classic' });
      await expect(classic.count()).rejects.toThrow(/has width=2, this MinHashLSH has width=1/);
      await classic.close();
      const weighted = open(prefix);
      expect(await weighted.count()).toBe(0);
      expect(await c.hget(`${prefix}:meta`, 'width')).toBe('2');
      await weighted.clear();
    } finally {
      c.disconnect();
    }
  });
}

describeRedis('MinHashLSH on one Redis server', () => suite(false));
describeRedis('MinHashLSH on a 3-node Redis Cluster', () => suite(true));

describe('MinHashLSH Redis options', () => {
  it('bad storage options are coded errors; an unreachable server is CUSIM_STORAGE_ERROR', async () => {
    const base = { threshold: 0.5, samples: 8 } as const;
    expect(() => new MinHashLSH({ ...base, storage: { type: 'redis', url: 'http://x' } as never })).toThrow(/redis:\/\/ URL/);
    expect(() => new MinHashLSH({ ...base, storage: { type: 'redis', url: 'redis://x', prefix: 'a{b}' } })).toThrow(/no braces/);
    expect(() => new MinHashLSH({ ...base, storage: { type: 'redis', url: 'redis://x', partitions: 0 } })).toThrow(RangeError);
    expect(() => new MinHashLSH({ ...base, storage: { type: 'disk' } as never })).toThrow(/storage.type must be 'redis'/);
    const lsh = new MinHashLSH({ ...base, storage: { type: 'redis', url: 'redis://127.0.0.1:1', retryFor: 0 } });
    expect(() => lsh.size).toThrow(/use await lsh.count\(\)/);
    await expect(lsh.count()).rejects.toMatchObject({
      code: 'CUSIM_STORAGE_ERROR',
      message: expect.stringMatching(/Redis at redis:\/\/127.0.0.1:1: unreachable \(.*ECONNREFUSED.*gave up after retrying for 0 s/),
    });
    await expect(lsh.save('/tmp/x.bin')).rejects.toThrow(/lives in Redis/);
    await lsh.close();
  });
});
