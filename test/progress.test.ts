// onProgress on the library's long calls: one shape ({ stage, done, total }),
// delivered on the JS thread, throttled, complete at the end, and results
// identical to the same call without it.
import { describe, expect, it } from 'vitest';
import {
  HammingIndex,
  MinHashLSH,
  StreamClusterer,
  WeightedMinHash,
  dedup,
  similarityJoin,
  type CsrMatrix,
  type ProgressEvent,
} from '../lib/index.js';
import { backends, randomBits, randomCsr, rng } from './helpers.js';
import { isMainThread } from 'node:worker_threads';

function recorder(): { events: ProgressEvent[]; times: number[]; on: (p: ProgressEvent) => void } {
  const events: ProgressEvent[] = [];
  const times: number[] = [];
  return {
    events,
    times,
    on: (p) => {
      expect(isMainThread).toBe(true);
      events.push({ ...p });
      times.push(performance.now());
    },
  };
}

// Per stage: done never decreases and never passes total; the last event of
// the stage named last is complete; events of one stage come at most every
// ~100 ms apart from its last (completion) one.
function checkStages(events: ProgressEvent[], times: number[], final: string, total?: number): void {
  expect(events.length).toBeGreaterThan(0);
  const byStage = new Map<string, number[]>();
  events.forEach((e, i) => {
    if (!byStage.has(e.stage)) byStage.set(e.stage, []);
    byStage.get(e.stage)!.push(i);
  });
  for (const idx of byStage.values()) {
    for (let k = 1; k < idx.length; k++) expect(events[idx[k]].done).toBeGreaterThanOrEqual(events[idx[k - 1]].done);
    for (const i of idx) if (events[i].total !== undefined) expect(events[i].done).toBeLessThanOrEqual(events[i].total!);
    // Completion events come at once; progress between them is throttled.
    const partial = (i: number): boolean => events[i].total === undefined || events[i].done < events[i].total!;
    for (let k = 1; k < idx.length; k++) {
      if (partial(idx[k]) && partial(idx[k - 1])) expect(times[idx[k]] - times[idx[k - 1]]).toBeGreaterThanOrEqual(95);
    }
  }
  const last = events[events.length - 1];
  expect(last.stage).toBe(final);
  if (total !== undefined) expect(last).toEqual({ stage: final, done: total, total });
}

function corpus(seed: number, rows: number): CsrMatrix {
  return randomCsr(rng(seed), rows, 5000, () => 30);
}

describe.each(backends)('onProgress (%s)', (backend) => {
  it('WeightedMinHash.hash: rows hashed, ending at rows / rows; same signatures', async () => {
    const m = corpus(1, 20000);
    const w = new WeightedMinHash({ dim: m.cols, samples: 64, backend });
    const rec = recorder();
    const a = await w.hash(m, { onProgress: rec.on });
    const b = await w.hash(m);
    expect(Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.byteLength), Buffer.from(b.buffer, b.byteOffset, b.byteLength))).toBe(0);
    checkStages(rec.events, rec.times, 'hash', m.rows);
    const sliced = recorder();
    await w.hash(m, { rowStart: 100, rowEnd: 600, onProgress: sliced.on });
    checkStages(sliced.events, sliced.times, 'hash', 500);
    w.dispose();
  });

  it('hashStream: rows of the chunks yielded so far, out of totalRows', async () => {
    const m = corpus(2, 3000);
    const w = new WeightedMinHash({ dim: m.cols, samples: 32, backend });
    const chunk = (a: number, b: number): CsrMatrix => {
      const indptr = m.indptr.slice(a, b + 1).map((x) => x - m.indptr[a]);
      return {
        rows: b - a,
        cols: m.cols,
        indptr,
        indices: m.indices.slice(m.indptr[a], m.indptr[b]),
        values: m.values!.slice(m.indptr[a], m.indptr[b]),
      };
    };
    const rec = recorder();
    let rows = 0;
    for await (const s of w.hashStream([chunk(0, 1000), chunk(1000, 2500), chunk(2500, 3000)], { onProgress: rec.on, totalRows: 3000 }))
      rows += s.length / 64;
    expect(rows).toBe(3000);
    checkStages(rec.events, rec.times, 'hash', 3000);
    w.dispose();
  });

  it("MinHashLSH.groups: 'candidates' then 'verify' (pairs checked of all candidates); dedup adds 'hash'", async () => {
    const r = rng(3);
    const base = corpus(3, 2000);
    // Planted copies so verification has pairs to check.
    const rowsList: [number[], number[]][] = [];
    for (let i = 0; i < base.rows; i++) {
      const cols = Array.from(base.indices.subarray(base.indptr[i], base.indptr[i + 1]));
      const vals = Array.from(base.values!.subarray(base.indptr[i], base.indptr[i + 1]));
      rowsList.push([cols, vals]);
      if (r() < 0.3) rowsList.push([cols.slice(), vals.map((v) => v * (r() < 0.1 ? 1.5 : 1))]);
    }
    const indptr = new Uint32Array(rowsList.length + 1);
    rowsList.forEach(([c], i) => (indptr[i + 1] = indptr[i] + c.length));
    const m: CsrMatrix = {
      rows: rowsList.length,
      cols: base.cols,
      indptr,
      indices: Uint32Array.from(rowsList.flatMap(([c]) => c)),
      values: Float32Array.from(rowsList.flatMap(([, v]) => v)),
    };
    const rec = recorder();
    const res = await dedup(m, { threshold: 0.8, backend, onProgress: rec.on });
    const plain = await dedup(m, { threshold: 0.8, backend });
    expect(res.group).toEqual(plain.group);
    expect(res.pairs).toEqual(plain.pairs);
    const stages = [...new Set(rec.events.map((e) => e.stage))];
    expect(stages).toEqual(['hash', 'candidates', 'verify']);
    const verify = rec.events.filter((e) => e.stage === 'verify');
    const last = verify[verify.length - 1];
    expect(last.total).toBeGreaterThan(0);
    expect(last.done).toBe(last.total);
    checkStages(rec.events, rec.times, 'verify');

    const lsh = new MinHashLSH({ bands: 8, rows: 4, samples: 32 });
    const w = new WeightedMinHash({ dim: m.cols, samples: 32, backend });
    lsh.insert(
      Uint32Array.from({ length: m.rows }, (_, i) => i),
      await w.hash(m),
    );
    const c = recorder();
    await lsh.candidatePairs({ onProgress: c.on });
    expect(c.events.every((e) => e.stage === 'candidates')).toBe(true);
    w.dispose();
    lsh.dispose();
  });

  it('similarityJoin: rows probed, ending complete; same pairs', async () => {
    const sets = randomCsr(rng(4), 3000, 400, () => 12, { weights: false });
    const rec = recorder();
    const a = await similarityJoin(sets, { threshold: 0.3, backend, onProgress: rec.on });
    const b = await similarityJoin(sets, { threshold: 0.3, backend });
    expect(a.left).toEqual(b.left);
    expect(a.right).toEqual(b.right);
    checkStages(rec.events, rec.times, 'join', sets.rows);
  });

  it('HammingIndex.search and StreamClusterer.add: queries and documents', async () => {
    const r = rng(5);
    const ix = new HammingIndex({ bits: 128, backend });
    ix.add(randomBits(r, 5000, 128));
    const q = randomBits(r, 800, 128);
    const rec = recorder();
    const a = await ix.search(q, { k: 5, onProgress: rec.on });
    expect(a.ids).toEqual((await ix.search(q, { k: 5 })).ids);
    checkStages(rec.events, rec.times, 'search', 800);
    ix.dispose();

    const docs = randomCsr(r, 1500, 300, () => 10);
    const c = new StreamClusterer({ threshold: 0.3, backend });
    const c2 = new StreamClusterer({ threshold: 0.3, backend });
    const cr = recorder();
    const x = await c.add(docs, { onProgress: cr.on });
    expect(x.cluster).toEqual((await c2.add(docs)).cluster);
    checkStages(cr.events, cr.times, 'cluster', 1500);
    c.dispose();
    c2.dispose();
  });

  it('rejects a non-function onProgress with a coded TypeError', async () => {
    const m = corpus(6, 10);
    const w = new WeightedMinHash({ dim: m.cols, samples: 8, backend });
    await expect(w.hash(m, { onProgress: 5 as never })).rejects.toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT', name: 'TypeError' });
    w.dispose();
  });
});
