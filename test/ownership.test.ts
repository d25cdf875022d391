// Inputs are owned by a call for its whole length (native/owned.h): whatever
// the caller does to its arrays once a call has started (transfer them to a
// worker that then dies, detach them, reuse them for the next batch), the
// call returns what the arrays held when it was made, or for an `out` array
// that is gone by the end, a coded error. Each case compares against the same
// call on untouched copies.
import { describe, expect, it } from 'vitest';
import { pbkdf2 } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import {
  FlyHash,
  HammingIndex,
  MinHash,
  MinHashLSH,
  StreamClusterer,
  TextFeaturizer,
  WeightedMinHash,
  dedup,
  pinnedArray,
  popcountRows,
  similarityJoin,
  type CsrMatrix,
} from '../lib/index.js';
import { native } from '../lib/addon.js';
import type { Backend } from '../lib/backend.js';
import { backends, describeGpu, hasGpu, randomBits, randomCsr, rng } from './helpers.js';

type View = ArrayBufferView;

// A worker that takes buffers and drops them; terminating it frees them.
function sink(): Worker {
  return new Worker('require("node:worker_threads").parentPort.on("message", () => {})', { eval: true });
}

function buffers(views: View[]): ArrayBuffer[] {
  return [...new Set(views.map((v) => v.buffer as ArrayBuffer))];
}

// What a caller may do to its arrays right after starting a call.
const spoilers: Array<[string, (views: View[]) => Promise<void> | void]> = [
  ['transferred by structuredClone', (views) => void buffers(views).forEach((b) => structuredClone(b, { transfer: [b] }))],
  [
    'posted to a worker that is then terminated (the memory is freed mid-call)',
    async (views) => {
      const w = sink();
      const bs = buffers(views);
      w.postMessage(bs, bs);
      await w.terminate();
    },
  ],
  [
    'rewritten (the buffer reused for the next batch)',
    (views) => views.forEach((v) => new Uint8Array(v.buffer, v.byteOffset, v.byteLength).fill(0xa5)),
  ],
];
const transfer = (ArrayBuffer.prototype as { transfer?: () => ArrayBuffer }).transfer;
if (transfer) spoilers.push(['moved by ArrayBuffer.prototype.transfer', (views) => void buffers(views).forEach((b) => transfer.call(b))]);

/**
 * One set of buffers a source refills with each of `chunks` in turn (all of
 * one row count; nnz sized for the largest, the rest zeroed): fill(c) writes
 * c into them and returns the matrix over them; views are the buffers.
 */
function oneBuffer(chunks: CsrMatrix[]): { views: View[]; fill: (c: CsrMatrix) => CsrMatrix } {
  const { rows, cols } = chunks[0];
  const nnz = Math.max(...chunks.map((c) => c.indices.length));
  const indptr = new Uint32Array(rows + 1);
  const indices = new Uint32Array(nnz);
  const values = new Float32Array(nnz);
  const fill = (c: CsrMatrix): CsrMatrix => {
    indptr.set(c.indptr);
    indices.fill(0).set(c.indices);
    values.fill(0).set(c.values!);
    return { rows, cols, indptr, indices, values };
  };
  return { views: [indptr, indices, values], fill };
}

function copyCsr(m: CsrMatrix): CsrMatrix {
  return { ...m, indptr: m.indptr.slice(), indices: m.indices.slice(), values: m.values?.slice() };
}
function csrViews(m: CsrMatrix): View[] {
  return [m.indptr, m.indices, ...(m.values ? [m.values] : [])];
}

interface Case<T> {
  name: string;
  /** Fresh inputs; `views` are the arrays the caller spoils right after run() starts the call. */
  make: () => Promise<{ views: View[]; run: () => Promise<T> }> | { views: View[]; run: () => Promise<T> };
}

function check<T>(c: Case<T>, normalize: (r: T) => unknown = (r) => r): void {
  for (const [how, spoil] of spoilers) {
    it(`${c.name}: inputs ${how} during the call`, async () => {
      const ref = normalize(await (await c.make()).run());
      const { views, run } = await c.make();
      const p = run();
      p.catch(() => {}); // settles while the spoiler runs; awaited below
      await spoil(views);
      expect(normalize(await p)).toEqual(ref);
    });
  }
}

const pairs = (r: { left: Uint32Array; right: Uint32Array }) => ({ left: Array.from(r.left), right: Array.from(r.right) });

for (const backend of backends) {
  describe(`inputs owned by the call (${backend})`, () => {
    const R = rng(11);
    const matrix = randomCsr(R, 3000, 4000, (i) => 1 + (i % 40));
    const wmh = new WeightedMinHash({ dim: 4000, samples: 64, seed: 3, backend });
    check({
      name: 'WeightedMinHash.hash',
      make: () => {
        const m = copyCsr(matrix);
        return { views: csrViews(m), run: () => wmh.hash(m) };
      },
    });
    check({
      name: 'WeightedMinHash.hash (rows 1000..2500)',
      make: () => {
        const m = copyCsr(matrix);
        return { views: csrViews(m), run: () => wmh.hash(m, { rowStart: 1000, rowEnd: 2500 }) };
      },
    });

    const X = new Float32Array(2000 * 96).map(() => R() * 4 - 1);
    const bytes = new Uint8Array(2000 * 96).map(() => (R() * 256) | 0);
    const fly = new FlyHash({ inputDim: 96, hashLength: 320, connections: 9, winners: 12, seed: 2, backend });
    for (const [kind, input] of [
      ['float', X],
      ['bytes', bytes],
    ] as const) {
      check(
        {
          name: `FlyHash.hash (${kind})`,
          make: () => {
            const data = input.slice();
            return { views: [data], run: () => fly.hash({ data, rows: 2000, cols: 96 } as never) };
          },
        },
        (r) => r.data,
      );
    }

    const sets = randomCsr(R, 3000, 300, (i) => 2 + (i % 12), { weights: false });
    check(
      {
        name: 'similarityJoin',
        make: () => {
          const m = copyCsr(sets);
          return { views: csrViews(m), run: () => similarityJoin(m, { threshold: 0.4, backend }) };
        },
      },
      pairs,
    );

    const codes = randomBits(R, 5000, 128);
    for (const method of ['exact', 'ewh'] as const) {
      const index = new HammingIndex({ bits: 128, method, backend, minScore: 5 });
      index.add(codes);
      const queries = randomBits(R, 300, 128);
      check(
        {
          name: `HammingIndex.search (${method})`,
          make: () => {
            const q = queries.slice();
            return { views: [q], run: () => index.search(q, { k: 7 }) };
          },
        },
        (r) => ({ ids: r.ids, distances: r.distances }),
      );
      if (method === 'ewh') {
        check({
          name: 'HammingIndex.scores',
          make: () => {
            const q = queries.slice(0, 40 * 4);
            return { views: [q], run: () => index.scores(q) };
          },
        });
      }
    }

    const docs = randomCsr(R, 2500, 600, (i) => 1 + (i % 25));
    check(
      {
        name: 'StreamClusterer.add',
        make: () => {
          const m = copyCsr(docs);
          const c = new StreamClusterer({ threshold: 0.3, backend });
          return { views: csrViews(m), run: async () => ({ r: await c.add(m), size: c.size }) };
        },
      },
      ({ r, size }) => ({ cluster: r.cluster, similarity: r.similarity, size }),
    );

    const sigsP = wmh.hash(matrix);
    const ids = Uint32Array.from({ length: matrix.rows }, (_, i) => i);
    check({
      name: 'MinHashLSH.query',
      make: async () => {
        const lsh = new MinHashLSH({ threshold: 0.5, samples: 64, backend });
        const s = await sigsP;
        lsh.insert(ids, s);
        const q = s.slice(0, 64 * 2 * 300);
        return { views: [q], run: () => lsh.query(q) };
      },
    });
    check(
      {
        name: 'MinHashLSH.groups (exact, matrix spoiled)',
        make: async () => {
          const m = copyCsr(matrix);
          const lsh = new MinHashLSH({ threshold: 0.5, samples: 64, backend });
          lsh.insert(ids, await sigsP);
          return { views: csrViews(m), run: () => lsh.groups({ verify: 'exact', matrix: m }) };
        },
      },
      (g) => ({ group: g.group, count: g.count }),
    );
    check(
      {
        name: 'MinHashLSH.candidatePairs (inserted signatures spoiled)',
        make: async () => {
          const s = (await sigsP).slice();
          const lsh = new MinHashLSH({ threshold: 0.5, samples: 64, backend });
          lsh.insert(ids, s);
          return { views: [s], run: () => lsh.candidatePairs() };
        },
      },
      pairs,
    );

    check(
      {
        name: 'popcountRows',
        make: () => {
          const data = codes.slice();
          return { views: [data], run: () => popcountRows({ data, rows: 5000, bits: 128 }, { backend }) };
        },
      },
      (r) => r.counts,
    );

    it('WeightedMinHash.hash with `out`: written when the call ends; a detached `out` is a coded error', async () => {
      const ref = await wmh.hash(matrix);
      const out = new Uint32Array(ref.length);
      const p = wmh.hash(matrix, { out });
      out.fill(7); // the caller's writes during the call are overwritten by the result
      expect(await p).toEqual(ref);
      expect(out).toEqual(ref);
      for (const [how, spoil] of spoilers.slice(0, 2)) {
        const o = new Uint32Array(ref.length);
        const q = wmh.hash(matrix, { out: o });
        q.catch(() => {});
        await spoil([o]);
        await expect(q, how).rejects.toMatchObject({
          code: 'CUSIM_INVALID_ARGUMENT',
          name: 'TypeError',
          message: expect.stringMatching(/out .*detached/),
        });
      }
      // The object still works.
      expect(await wmh.hash(matrix)).toEqual(ref);
    });

    it("hash with a handed `out` (outHanded, the dedup pipeline's own buffer) is written in place: the same signatures, rows by slices", async () => {
      const ref = await wmh.hash(matrix);
      const out = new Uint32Array(ref.length + 5).fill(3);
      const half = Math.floor(matrix.rows / 2);
      const per = ref.length / matrix.rows;
      const a = await wmh.hash(matrix, { out, outHanded: true, rowEnd: half });
      // The prefix of `out` itself, not a copy, holds the first slice.
      expect(a.buffer).toBe(out.buffer);
      expect(a).toEqual(ref.subarray(0, half * per));
      const b = await wmh.hash(matrix, { out, outHanded: true, rowStart: half });
      expect(b).toEqual(ref.subarray(half * per));
      expect(out[ref.length - half * per]).toBe(3);
      using mh = new MinHash({ samples: 32, backend });
      const c = await mh.hash(matrix, { out, outHanded: true });
      expect(c).toEqual(await mh.hash(matrix));
    });

    it('pinnedArray buffers transferred or dropped during a call are freed only after it', async () => {
      const ref = await wmh.hash(matrix);
      for (let round = 0; round < 3; round++) {
        const indices = pinnedArray(Uint32Array, matrix.indices.length);
        indices.set(matrix.indices);
        const out = pinnedArray(Uint32Array, ref.length);
        const p = wmh.hash({ ...matrix, indices }, { out });
        p.catch(() => {});
        const w = sink();
        w.postMessage([indices.buffer, out.buffer], [indices.buffer, out.buffer]);
        await w.terminate();
        const r = await p.then(
          (v) => ({ ok: true as const, v }),
          (e: { code?: string }) => ({ ok: false as const, e }),
        );
        // Pinned memory is used in place on CUDA (the result lands in `out`,
        // which the caller gave away); elsewhere it is an ordinary array.
        if (!r.ok) expect(r.e.code).toBe('CUSIM_INVALID_ARGUMENT');
      }
      expect(await wmh.hash(matrix)).toEqual(ref);
    });
  });
}

describe('TextFeaturizer.tokenizeBatchAsync owns its texts', () => {
  it('a texts array reused for the next batch during the call does not change the result', async () => {
    const f = new TextFeaturizer({ mode: 'words' });
    // Long ASCII documents take the native path; non-ASCII ones ('words' mode)
    // are tokenized in JavaScript, after the native call's await.
    const texts = Array.from(
      { length: 50 },
      (_, i) => `the quick brown fox ${i} jumps over the lazy dog ${i % 7} `.repeat(8) + (i % 10 === 0 ? 'café naïve' : ''),
    );
    const want = f.tokenizeBatch(texts);
    const p = f.tokenizeBatchAsync(texts);
    texts.fill('replaced text for the next batch');
    texts.length = 3;
    expect(await p).toEqual(want);
  });
});

describe('hashStream reads each chunk before the source can reuse its buffer', () => {
  it('a generator refilling one buffer gets the signatures of every chunk', async () => {
    const R = rng(5);
    const chunks = [0, 1, 2, 3].map(() => randomCsr(R, 700, 900, (i) => 1 + (i % 30)));
    using wmh = new WeightedMinHash({ dim: 900, samples: 32, backend: 'cpu' });
    const want = await Promise.all(chunks.map((c) => wmh.hash(c)));
    const { fill } = oneBuffer(chunks);
    function* reuse(): Generator<CsrMatrix> {
      for (const c of chunks) yield fill(c);
    }
    const got: Uint32Array[] = [];
    for await (const s of wmh.hashStream(reuse())) got.push(s);
    expect(got).toEqual(want);
  });

  // The copy runs on a worker after the stream has the chunk: the stream must
  // neither ask the source for the next chunk nor hand the consumer the
  // previous signatures until that copy is done. This source spoils its one
  // set of buffers the moment it is asked for the next chunk, and the consumer
  // spoils them whenever it is handed signatures; a copy still running or not
  // yet started then reads the spoiled bytes (wrong signatures, or an indptr
  // error). So that a copy cannot slip in first, every chunk is yielded with
  // the worker threads (libuv's pool, where the copy runs) busy for a while.
  // The oracle is hash() of untouched copies of each chunk, on the same
  // backend (on CUDA the copy lands in page-locked staging, DMAed in place).
  const R = rng(17);
  const rows = 4000;
  const chunks = [0, 1, 2, 3, 4].map((k) => randomCsr(R, rows, 5000, (i) => 1 + ((i * 7 + k) % 60)));
  const busyWorkers = () => {
    const n = Number(process.env.UV_THREADPOOL_SIZE) || 4;
    for (let i = 0; i < n; i++) pbkdf2('spoil', 'salt', 20000, 32, 'sha256', () => {});
  };
  const engines = [
    ['WeightedMinHash', (backend: Backend) => new WeightedMinHash({ dim: 5000, samples: 8, seed: 4, backend })],
    ['MinHash', (backend: Backend) => new MinHash({ samples: 8, seed: 4, backend })],
  ] as const;
  for (const [name, make] of engines.flatMap(([n, f]) => backends.map((b) => [`${n} (${b})`, () => f(b)] as const))) {
    it(`${name}: a source that overwrites its buffer as soon as it is asked for the next chunk`, async () => {
      using engine = make();
      const want: Uint32Array[] = [];
      for (const c of chunks) want.push(await engine.hash(copyCsr(c)));
      const { views, fill } = oneBuffer(chunks);
      const spoil = () => void spoilers[2][1](views);
      async function* reuse(): AsyncGenerator<CsrMatrix> {
        for (const c of chunks) {
          const m = fill(c);
          busyWorkers();
          yield m;
          spoil(); // at once, before anything awaits
          await new Promise((r) => setTimeout(r, 5));
        }
      }
      const got: Uint32Array[] = [];
      for await (const s of engine.hashStream(reuse())) {
        got.push(s);
        spoil();
      }
      expect(got.length).toBe(chunks.length);
      got.forEach((s, k) => expect(s, `chunk ${k}`).toEqual(want[k]));
    });
  }

  it('a chunk detached while it is copied is refused with a coded TypeError (the memory kept alive elsewhere)', async () => {
    const m = copyCsr(chunks[0]);
    const p = native().stageCsrAsync(m, true, false);
    const kept = structuredClone(m.indices.buffer, { transfer: [m.indices.buffer as ArrayBuffer] });
    await expect(p).rejects.toMatchObject({
      code: 'CUSIM_INVALID_ARGUMENT',
      name: 'TypeError',
      message: expect.stringMatching(/^matrix\.indices is detached/),
    });
    expect(kept.byteLength).toBe(chunks[0].indices.byteLength);
  });

  // Chunks whose indices and values pass 1 MB are staged into the stream's own
  // blocks (a StagingSet), which come back to it when a chunk's call ends and
  // are then refilled with a later chunk. A block handed back too early (while
  // its call still reads it) would be overwritten by the next chunk's copy
  // under a running call. The calls here take far longer than a copy (64
  // samples over 400k elements on the CPU), so every copy lands while the
  // previous chunk's call runs. The source also refills its one buffer per
  // chunk, and the chunks differ in size (the set's blocks grow once). The
  // oracle is hash() of untouched copies of each chunk on the CPU.
  const big = [0, 1, 2, 3, 4, 5].map((k) => randomCsr(rng(40 + k), 4000, 20_000, (i) => 60 + ((i * 13 + k * 7) % 80) + (k === 3 ? 40 : 0)));
  it('the stream reuses its staging blocks only once the call reading them has ended', async () => {
    using cpu = new WeightedMinHash({ dim: 20_000, samples: 64, seed: 3, backend: 'cpu' });
    const want: Uint32Array[] = [];
    for (const c of big) want.push(await cpu.hash(copyCsr(c)));
    expect(Math.min(...big.map((c) => c.indices.byteLength))).toBeGreaterThan(1 << 20);
    for (const backend of backends) {
      using wmh = new WeightedMinHash({ dim: 20_000, samples: 64, seed: 3, backend });
      const { fill } = oneBuffer(big);
      function* reuse(): Generator<CsrMatrix> {
        for (const c of big) yield fill(c);
      }
      const got: Uint32Array[] = [];
      for await (const s of wmh.hashStream(reuse())) got.push(s);
      expect(got.length).toBe(big.length);
      got.forEach((s, k) => expect(s, `${backend} chunk ${k}`).toEqual(want[k]));
    }
  });

  it("a StagingSet's third chunk reuses the first chunk's blocks, and a staged copy outlives the set", async () => {
    const n = native();
    const set = new n.StagingSet();
    const [a, b, c] = big.slice(0, 3).map(copyCsr);
    const bytes = (m: CsrMatrix) => m.indices.byteLength + m.values!.byteLength;
    const sa = await n.stageCsrAsync(a, true, false, set);
    const sb = await n.stageCsrAsync(b, true, false, set);
    // Both held (a call reads each): the second could not take the first's blocks.
    expect(sa.stats).toMatchObject({ bulkBytes: bytes(a), pinned: false });
    expect(sb.stats).toMatchObject({ bulkBytes: bytes(b) });
    sa.dispose(); // its blocks go back to the set
    // big[2] is no larger than big[0] (big[3] is the large one).
    expect(bytes(c)).toBeLessThanOrEqual(bytes(a));
    const sc = await n.stageCsrAsync(c, true, false, set);
    expect(sc.stats).toMatchObject({ bulkBytes: bytes(c), freshBytes: 0 });
    set.dispose();
    using wmh = new WeightedMinHash({ dim: 20_000, samples: 16, seed: 3, backend: 'cpu' });
    const [wb, wc] = [await wmh.hash(copyCsr(big[1])), await wmh.hash(copyCsr(big[2]))];
    expect(await wmh.hashStaged(sb, b)).toEqual(wb);
    expect(await wmh.hashStaged(sc, c)).toEqual(wc);
    sb.dispose();
    sc.dispose();
    expect(() => n.stageCsrAsync(a, true, false, {} as never)).toThrow(
      expect.objectContaining({ code: 'CUSIM_INVALID_ARGUMENT', name: 'TypeError', message: 'staging must be a StagingSet' }),
    );
  });
});

// { transfer: true } hands a chunk's buffers to the call instead of copying
// them: the caller's ArrayBuffers are detached at once, so nothing it does
// afterwards can reach what the call reads. The oracle is the same call on an
// untouched copy.
for (const backend of backends) {
  describe(`hash and hashStream with transfer: true (${backend})`, () => {
    const R = rng(29);
    const chunks = [0, 1, 2, 3].map(() => randomCsr(R, 600, 800, (i) => 1 + (i % 35)));
    const wmh = new WeightedMinHash({ dim: 800, samples: 32, seed: 9, backend });

    it("detaches the caller's buffers and returns the signatures of the matrix as given", async () => {
      const want = await wmh.hash(chunks[0]);
      const m = copyCsr(chunks[0]);
      const p = wmh.hash(m, { transfer: true, rowStart: 0, rowEnd: 600 });
      // Detached before the promise is returned: nothing left to rewrite.
      expect([m.indptr.length, m.indices.length, m.values!.length]).toEqual([0, 0, 0]);
      expect(await p).toEqual(want);
    });

    it('a row range of a handed-over matrix', async () => {
      const want = await wmh.hash(chunks[1], { rowStart: 100, rowEnd: 450 });
      expect(await wmh.hash(copyCsr(chunks[1]), { rowStart: 100, rowEnd: 450, transfer: true })).toEqual(want);
    });

    it('arrays sharing one buffer are moved together; SharedArrayBuffer values are copied, not moved', async () => {
      const c = chunks[2];
      const want = await wmh.hash(c);
      // indptr and indices as views of one ArrayBuffer.
      const nnz = c.indices.length;
      const one = new ArrayBuffer((c.indptr.length + nnz) * 4);
      const indptr = new Uint32Array(one, 0, c.indptr.length);
      const indices = new Uint32Array(one, c.indptr.length * 4, nnz);
      indptr.set(c.indptr);
      indices.set(c.indices);
      const values = new Float32Array(new SharedArrayBuffer(nnz * 4));
      values.set(c.values!);
      const p = wmh.hash({ rows: c.rows, cols: c.cols, indptr, indices, values }, { transfer: true });
      expect(one.byteLength).toBe(0);
      values.fill(0.5); // still attached: the call works on its copy
      expect(await p).toEqual(want);
    });

    it("hashStream: a source making fresh arrays per chunk gets every chunk's signatures, each chunk detached", async () => {
      const want = await Promise.all(chunks.map((c) => wmh.hash(c)));
      const given: CsrMatrix[] = [];
      function* fresh(): Generator<CsrMatrix> {
        for (const c of chunks) {
          const m = copyCsr(c);
          given.push(m);
          yield m;
        }
      }
      const got: Uint32Array[] = [];
      for await (const s of wmh.hashStream(fresh(), { transfer: true })) got.push(s);
      expect(got).toEqual(want);
      for (const m of given) expect(m.indices.byteLength).toBe(0);
    });

    it('a bad transfer option is a coded error that leaves the buffers attached', async () => {
      const m = copyCsr(chunks[3]);
      await expect(wmh.hash(m, { transfer: 'yes' as never })).rejects.toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT', name: 'TypeError' });
      expect(m.indices.length).toBe(chunks[3].indices.length);
      const ac = new AbortController();
      ac.abort();
      await expect(wmh.hash(m, { transfer: true, signal: ac.signal })).rejects.toThrow();
      expect(m.indices.length).toBe(chunks[3].indices.length);
    });
  });
}

// Calls of several stages (hash, then band, then verify) read their inputs
// only at the call: what the caller writes into its arrays once the call has
// returned its promise never reaches a later stage.
describe('dedup owns its matrix across its stages', () => {
  for (const backend of backends) {
    it(`arrays rewritten after the call: the identical rows it was given are still paired at similarity 1 (${backend})`, async () => {
      const m = {
        rows: 2,
        cols: 3,
        indptr: new Uint32Array([0, 3, 6]),
        indices: new Uint32Array([0, 1, 2, 0, 1, 2]),
        values: new Float32Array([1, 1, 1, 1, 1, 1]),
      };
      const p = dedup(m, { threshold: 0.9, backend });
      m.values.set([100, 1, 1, 1, 1, 100]);
      const r = await p;
      expect(Array.from(r.group)).toEqual([0, 0]);
      expect({ left: Array.from(r.pairs.left), right: Array.from(r.pairs.right), similarity: Array.from(r.pairs.similarity) }).toEqual({
        left: [0],
        right: [1],
        similarity: [1],
      });
    });

    it(`indices and values rewritten after the call: the groups of the matrix as given (${backend})`, async () => {
      const R = rng(33);
      const base = randomCsr(R, 300, 400, (i) => 5 + (i % 20));
      // Rows 2k and 2k+1 identical: 150 pairs at exact similarity 1.
      const indptr = new Uint32Array(base.rows + 1);
      const idx: number[] = [];
      const val: number[] = [];
      for (let i = 0; i < base.rows; i++) {
        const src = i - (i % 2);
        for (let p = base.indptr[src]; p < base.indptr[src + 1]; p++) {
          idx.push(base.indices[p]);
          val.push(base.values![p]);
        }
        indptr[i + 1] = idx.length;
      }
      const m = { rows: base.rows, cols: base.cols, indptr, indices: Uint32Array.from(idx), values: Float32Array.from(val) };
      const want = await dedup(
        { ...m, indptr: m.indptr.slice(), indices: m.indices.slice(), values: m.values.slice() },
        { threshold: 0.9, backend },
      );
      const p = dedup(m, { threshold: 0.9, backend });
      m.indices.reverse();
      m.values.fill(1e-3);
      m.values.fill(50, 0, 40);
      const r = await p;
      expect(r.count).toBe(want.count);
      expect(r.group).toEqual(want.group);
      expect(r.pairs).toEqual(want.pairs);
      for (let k = 0; k < r.pairs.left.length; k++)
        expect(r.pairs.right[k] - r.pairs.left[k] === 1 && r.pairs.left[k] % 2 === 0).toBe(true);
      expect(Array.from(r.pairs.similarity).every((x) => x === 1)).toBe(true);
    });
  }
});

describe('StreamClusterer.add is all or nothing', () => {
  for (const backend of backends) {
    it(`an aborted add leaves the state as it was (${backend})`, async () => {
      const R = rng(21);
      const first = randomCsr(R, 3000, 2000, (i) => 3 + (i % 30));
      const big = randomCsr(R, 60000, 2000, (i) => 3 + (i % 30));
      const after = randomCsr(R, 2000, 2000, (i) => 3 + (i % 30));
      using c = new StreamClusterer({ threshold: 0.25, backend });
      using ref = new StreamClusterer({ threshold: 0.25, backend });
      await c.add(first);
      await ref.add(first);
      let aborted = 0;
      for (const mode of ['sequential', 'batch'] as const) {
        for (const delay of [0, 2, 10, 40]) {
          const ac = new AbortController();
          const p = c.add(big, { signal: ac.signal, mode });
          setTimeout(() => ac.abort(), delay);
          const r = await p.then(
            () => 'done',
            (e: { code?: string }) => e.code,
          );
          if (r === 'done') {
            await ref.add(big); // finished before the abort: applied in full
          } else {
            expect(r).toBe('ABORT_ERR');
            aborted++;
          }
          expect(c.size).toBe(ref.size);
          expect(c.documents).toBe(ref.documents);
        }
      }
      expect(aborted).toBeGreaterThan(0);
      // Afterwards the object clusters exactly like one that never saw the aborted adds.
      const a = await c.add(after);
      const b = await ref.add(after);
      expect(a.cluster).toEqual(b.cluster);
      expect(a.similarity).toEqual(b.similarity);
      for (let id = 0; id < c.size; id += Math.max(1, Math.floor(c.size / 50))) {
        expect(c.centroid(id)).toEqual(ref.centroid(id));
        expect(c.members(id)).toBe(ref.members(id));
      }
    });
  }
});

describeGpu('inputs owned by the call: GPU-only paths', () => {
  it('pinned staging is reused across a stream of calls (identical signatures)', async () => {
    const R = rng(31);
    const m = randomCsr(R, 20000, 50000, (i) => 1 + (i % 300));
    using g = new WeightedMinHash({ dim: 50000, samples: 64, backend: 'cuda' });
    using c = new WeightedMinHash({ dim: 50000, samples: 64, backend: 'cpu' });
    const want = await c.hash(m);
    for (let i = 0; i < 4; i++) expect(await g.hash(m)).toEqual(want);
  });
  it('runs where a GPU is present', () => {
    expect(hasGpu).toBe(true);
  });
});
