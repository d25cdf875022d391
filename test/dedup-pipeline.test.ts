// The one dedup pipeline (lib/dedup/): dedup(), dedupRecords() over blocks
// and `cusim dedup` give the same groups on the same records, checked against
// brute-force set Jaccard; classic MinHash reads the token hashes one rule
// decides (classicTokens), checked against MinHash itself; the compact path
// (band keys, no signatures kept) equals MinHashLSH over whole signatures;
// progress and abort; dedup() owns its input.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  DEDUP_DEFAULTS,
  MinHash,
  MinHashLSH,
  TextFeaturizer,
  WeightedMinHash,
  dedup,
  dedupParams,
  dedupRecords,
  tokenHashRows,
  type CsrMatrix,
  type DedupBlock,
  type ProgressEvent,
} from '../lib/index.js';
import { native } from '../lib/addon.js';
import { cusim, ensureDist } from './cli-helpers.js';
import { backends, blocksOf, randInt, randomCsr, rng } from './helpers.js';

beforeAll(() => ensureDist());

const NONE = 0xffffffff;

// Base documents of random lowercase words, near copies (one or two words
// replaced: set Jaccard about 0.9 to 0.96) and unrelated documents.
function corpus(seed: number, bases: number): { id: string; text: string }[] {
  const r = rng(seed);
  const word = () => Array.from({ length: 3 + randInt(r, 6) }, () => String.fromCharCode(97 + randInt(r, 26))).join('');
  const docs: { id: string; text: string }[] = [];
  for (let b = 0; b < bases; b++) {
    const base = Array.from({ length: 40 }, word);
    docs.push({ id: `b${b}`, text: base.join(' ') });
    for (let c = 0; c < randInt(r, 3); c++) {
      const w = base.slice();
      for (let e = 0; e <= randInt(r, 2); e++) w[randInt(r, w.length)] = word();
      docs.push({ id: `b${b}c${c}`, text: w.join(' ') });
    }
  }
  return docs;
}

/** The oracle: set Jaccard of the documents' word sets, formed here. */
function wordJaccard(a: string, b: string): number {
  const x = new Set(a.split(' '));
  const y = new Set(b.split(' '));
  let both = 0;
  for (const w of x) if (y.has(w)) both++;
  return both / (x.size + y.size - both);
}

/** Groups as sorted lists of ids, and pairs as 'left|right' -> similarity. */
function shape(ids: (i: number) => string, group: Uint32Array, pairs: { left: Uint32Array; right: Uint32Array; similarity: Float32Array }) {
  const by = new Map<number, string[]>();
  group.forEach((g, i) => {
    if (g === NONE) return;
    if (!by.has(g)) by.set(g, []);
    by.get(g)!.push(ids(i));
  });
  const groups = [...by.values()].map((g) => g.sort()).sort((a, b) => (a[0] < b[0] ? -1 : 1));
  const edges = new Map<string, number>();
  for (let k = 0; k < pairs.left.length; k++) {
    const [l, r] = [ids(pairs.left[k]), ids(pairs.right[k])].sort();
    edges.set(`${l}|${r}`, Math.round(pairs.similarity[k] * 1e6) / 1e6);
  }
  return { groups, edges };
}

async function hashedMatrix(texts: string[], bits: number): Promise<CsrMatrix> {
  const rows = await new TextFeaturizer({ mode: 'words', weighting: 'binary' }).hashedRows(texts, { minTokens: 1, bits });
  return { rows: texts.length, cols: 2 ** bits, indptr: rows.indptr, indices: rows.indices };
}

function fromRows(rows: [number[], number[]][], cols: number): CsrMatrix {
  const indptr = new Uint32Array(rows.length + 1);
  rows.forEach(([c], i) => (indptr[i + 1] = indptr[i] + c.length));
  return {
    rows: rows.length,
    cols,
    indptr,
    indices: Uint32Array.from(rows.flatMap(([c]) => c)),
    values: Float32Array.from(rows.flatMap(([, v]) => v)),
  };
}

/**
 * At least `n` random rows (lengths base + [0, spread), columns below `cols`,
 * weights 1 + [0, maxWeight)) with exact copies, copies without their first
 * column, and empty rows, each following a row at its rate.
 */
function nearCopies(
  seed: number,
  n: number,
  cols: number,
  [base, spread]: [number, number],
  rates: { copy: number; edit?: number; empty?: number; maxWeight?: number },
): CsrMatrix {
  const r = rng(seed);
  const rows: [number[], number[]][] = [];
  while (rows.length < n) {
    const c = Array.from({ length: base + randInt(r, spread) }, () => randInt(r, cols));
    const v = c.map(() => 1 + randInt(r, rates.maxWeight ?? 3));
    rows.push([c, v]);
    if (r() < rates.copy) rows.push([c, v]);
    if (rates.edit !== undefined && r() < rates.edit) rows.push([c.slice(1), v.slice(1)]);
    if (rates.empty !== undefined && r() < rates.empty) rows.push([[], []]);
  }
  return fromRows(rows, cols);
}

describe('one pipeline: dedup(), dedupRecords() and cusim dedup agree', () => {
  it.each([32, 20])('classic over %i-bit token hashes: same groups and pairs, every pair at its brute-force Jaccard', async (bits) => {
    const docs = corpus(11, 120);
    const texts = docs.map((d) => d.text);
    const ids = docs.map((d) => d.id);
    const t = 0.85;
    const m = await hashedMatrix(texts, bits);
    const lib = await dedup(m, { method: 'classic', threshold: t, backend: 'cpu' });
    const streamed = await dedupRecords(blocksOf(m, ids, 37), { method: 'classic', threshold: t, backend: 'cpu' });
    // --hash-bits takes 1..31; 32 bits (whole token hashes) is the default.
    const run = await cusim(
      [
        'dedup',
        '-',
        '--format',
        'jsonl',
        '--backend',
        'cpu',
        '--json',
        '--quiet',
        '--threshold',
        String(t),
        ...(bits === 32 ? [] : ['--hash-bits', String(bits)]),
      ],
      { input: docs.map((d) => JSON.stringify(d)).join('\n') },
    );
    expect(run.status, run.stderr).toBe(0);
    const report = JSON.parse(run.stdout) as {
      options: { method: string };
      groups: { members: { id: string }[]; pairs: { left: string; right: string; similarity: number }[] }[];
    };
    expect(report.options.method).toBe('classic');

    const a = shape((i) => ids[i], lib.group, lib.pairs);
    const b = shape((i) => streamed.ids.get(i), streamed.group, streamed.pairs);
    const cliGroups = report.groups.map((g) => g.members.map((x) => x.id).sort()).sort((x, y) => (x[0] < y[0] ? -1 : 1));
    const cliEdges = new Map(report.groups.flatMap((g) => g.pairs.map((p) => [[p.left, p.right].sort().join('|'), p.similarity] as const)));
    expect(a.groups.length).toBeGreaterThan(20);
    expect(b).toEqual(a);
    expect(cliGroups).toEqual(a.groups);
    expect(cliEdges).toEqual(a.edges);
    expect(streamed.group).toEqual(lib.group);
    expect(streamed.pairs).toEqual(lib.pairs);
    // Every edge is a pair at or above the threshold by the oracle (hash
    // collisions of distinct words aside, which 32 and 20 bits make rare here).
    const text = new Map(docs.map((d) => [d.id, d.text]));
    for (const [key, s] of a.edges) {
      const [l, r] = key.split('|');
      expect(s).toBeGreaterThanOrEqual(t);
      expect(Math.abs(s - wordJaccard(text.get(l)!, text.get(r)!))).toBeLessThan(0.03);
    }
  });

  it('cusim dedup --spill-after 0 --spill-dir: every token set through the file, the same report; a spill dir that cannot hold one is one coded line', async () => {
    const docs = corpus(12, 150);
    const input = docs.map((d) => JSON.stringify(d)).join('\n');
    const args = ['dedup', '-', '--format', 'jsonl', '--backend', 'cpu', '--json', '--quiet', '--threshold', '0.85'];
    const kept = await cusim(args, { input });
    const spilled = await cusim([...args, '--spill-after', '0', '--spill-dir', mkdtempSync(path.join(tmpdir(), 'cusim-spill-'))], {
      input,
    });
    expect(kept.status, kept.stderr).toBe(0);
    expect(spilled.status, spilled.stderr).toBe(0);
    const groups = (out: string) => (JSON.parse(out) as { groups: unknown[] }).groups;
    expect(groups(kept.stdout).length).toBeGreaterThan(20);
    expect(groups(spilled.stdout)).toEqual(groups(kept.stdout));
    const bad = await cusim([...args, '--spill-after', '0', '--spill-dir', '/nonexistent/cusim-spill'], { input });
    expect(bad.status).toBe(1);
    expect(bad.stdout).toBe('');
    expect(bad.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/^cusim: cannot make a file for spilled token sets in \/nonexistent\/cusim-spill .*--spill-dir/),
    ]);
  });

  it('weighted rows in blocks equal one matrix, on every backend', async () => {
    const r = rng(5);
    const base = randomCsr(r, 300, 2000, () => 25);
    // Near copies: each row again with a few weights nudged.
    const rows: [number[], number[]][] = [];
    for (let i = 0; i < base.rows; i++) {
      const cols = Array.from(base.indices.subarray(base.indptr[i], base.indptr[i + 1]));
      const vals = Array.from(base.values!.subarray(base.indptr[i], base.indptr[i + 1]));
      rows.push([cols, vals]);
      if (r() < 0.5) rows.push([cols, vals.map((v) => v * (r() < 0.1 ? 1.3 : 1))]);
    }
    const m = fromRows(rows, base.cols);
    const ids = Array.from({ length: m.rows }, (_, i) => `r${i}`);
    for (const backend of backends) {
      const whole = await dedup(m, { threshold: 0.8, backend });
      const streamed = await dedupRecords(blocksOf(m, ids, 50), { threshold: 0.8, backend });
      expect(whole.count).toBeGreaterThan(50);
      expect(streamed.group).toEqual(whole.group);
      expect(streamed.pairs).toEqual(whole.pairs);
      expect(streamed.ids.get(77)).toBe('r77');
    }
  });
});

describe('the compact path (band keys and vectors) equals MinHashLSH over whole signatures', () => {
  it.each(['weighted', 'classic'] as const)('%s: same groups, pairs and similarities', async (method) => {
    const r = rng(17);
    const base = randomCsr(r, 400, 3000, () => 20);
    // Exact copies (classes of identical rows), near copies, and empty rows.
    const rows: [number[], number[]][] = [];
    for (let i = 0; i < base.rows; i++) {
      const cols = Array.from(base.indices.subarray(base.indptr[i], base.indptr[i + 1]));
      const vals = Array.from(base.values!.subarray(base.indptr[i], base.indptr[i + 1]));
      rows.push([cols, vals]);
      if (r() < 0.3) rows.push([cols, vals]);
      if (r() < 0.3) rows.push([cols.slice(1), vals.slice(1)]);
      if (r() < 0.05) rows.push([[], []]);
    }
    const m = fromRows(rows, base.cols);
    const perBackend: { group: Uint32Array; pairs: unknown }[] = [];
    for (const backend of backends) {
      const compact = await dedup(m, { method, threshold: 0.85, backend });
      perBackend.push({ group: compact.group, pairs: compact.pairs });
      // returnSignatures keeps the signatures, so it runs MinHashLSH.groups over them.
      const full = await dedup(m, { method, threshold: 0.85, backend, returnSignatures: true });
      expect(compact.count).toBeGreaterThan(100);
      expect(compact.group).toEqual(full.group);
      expect(compact.pairs).toEqual(full.pairs);
      // And that is MinHashLSH itself over the same signatures.
      const p = dedupParams({ threshold: 0.85 });
      const lsh = new MinHashLSH({ ...p, threshold: 0.85, backend, kind: method });
      lsh.insert(
        Uint32Array.from({ length: m.rows }, (_, i) => i),
        full.signatures!,
      );
      const g = await lsh.groups({ verify: 'exact', matrix: m });
      lsh.dispose();
      expect(compact.group).toEqual(g.group);
      expect(compact.pairs).toEqual(g.pairs);
      for (let i = 0; i < m.rows; i++) if (m.indptr[i] === m.indptr[i + 1]) expect(compact.group[i]).toBe(NONE);
    }
    // The GPU buckets the same keys (where there is one): the same groups as the CPU.
    for (const r of perBackend.slice(1)) expect(r).toEqual(perBackend[0]);
  });

  it.each(['weighted', 'classic'] as const)(
    '%s: a block of more than 65,536 rows, hashed in slices from the band index copy, gives the signatures path groups',
    async (method) => {
      // Copies across the 65,536-row slice boundary too.
      const m = nearCopies(29, 70_000, 50_000, [3, 8], { copy: 0.02, maxWeight: 4 });
      // One block (dedupRecords), so its rows go through the one staged copy in slices.
      const blocks = async function* (): AsyncGenerator<DedupBlock> {
        yield { rows: m };
      };
      const staged = await dedupRecords(blocks(), { method, threshold: 0.9, backend: 'cpu' });
      const full = await dedup(m, { method, threshold: 0.9, backend: 'cpu', returnSignatures: true });
      expect(staged.count).toBeGreaterThan(500);
      expect(staged.group).toEqual(full.group);
      expect(staged.pairs).toEqual(full.pairs);
    },
    120_000,
  );

  it.each(['weighted', 'classic'] as const)(
    '%s: vectors spilled to a file past spill.afterBytes give the groups, pairs and similarities of vectors kept in memory',
    async (method) => {
      const m = nearCopies(31, 3000, 5000, [2, 30], { copy: 0.1, edit: 0.1, empty: 0.01 });
      // Blocks of 250 rows: with afterBytes 0 every block goes to the file, with 100,000 the first few stay.
      const blocks = (): DedupBlock[] =>
        blocksOf(
          m,
          Array.from({ length: m.rows }, (_, i) => String(i)),
          250,
        );
      for (const backend of backends) {
        const full = await dedup(m, { method, threshold: 0.8, backend, returnSignatures: true });
        expect(full.count).toBeGreaterThan(100);
        const kept = await dedupRecords(blocks(), { method, threshold: 0.8, backend });
        expect(kept.spilledBytes).toBe(0);
        for (const afterBytes of [0, 100_000]) {
          const spilled = await dedupRecords(blocks(), { method, threshold: 0.8, backend, spill: { afterBytes } });
          // Every vector past the budget, columns (and weights): all of them at 0, some at 100,000.
          const all = (method === 'weighted' ? 8 : 4) * m.indices.length;
          expect(spilled.spilledBytes).toBeGreaterThan(0);
          expect(spilled.spilledBytes).toBeLessThanOrEqual(all);
          if (afterBytes === 0) expect(spilled.spilledBytes).toBe(all);
          else expect(spilled.spilledBytes).toBeLessThan(all);
          expect(spilled.group).toEqual(full.group);
          expect(spilled.pairs).toEqual(full.pairs);
        }
      }
    },
    120_000,
  );

  it('a spill directory that cannot hold a file, and a bad spill option, are errors', async () => {
    const m = fromRows(
      Array.from(
        { length: 50 },
        (_, i) =>
          [
            [i, i + 1, i + 2],
            [1, 1, 1],
          ] as [number[], number[]],
      ),
      100,
    );
    const one = async function* (): AsyncGenerator<DedupBlock> {
      yield { rows: m };
    };
    await expect(dedupRecords(one(), { spill: { afterBytes: 0, dir: '/nonexistent/cusim-spill' } })).rejects.toThrow(
      /cannot make a file for spilled token sets in \/nonexistent\/cusim-spill/,
    );
    await expect(dedupRecords(one(), { spill: { afterBytes: -1 } })).rejects.toThrow(RangeError);
    await expect(dedupRecords(one(), { spill: 'tmp' as never })).rejects.toThrow(TypeError);
  });

  it('band keys of handed signatures (read in place) equal those of copied ones, and the signatures are left as they were', async () => {
    const r = rng(5);
    const shape = { samples: 108, bands: 6, rows: 18, width: 1 as const };
    const sigs = Uint32Array.from({ length: 300 * shape.samples }, () => randInt(r, 2 ** 32));
    // Some empty signatures (all 0xffffffff).
    sigs.fill(0xffffffff, 7 * shape.samples, 9 * shape.samples);
    const before = sigs.slice();
    const copied = await native().lshBandKeys(sigs, shape);
    const handed = await native().lshBandKeys(sigs, { ...shape, handed: true });
    expect(handed.keys).toEqual(copied.keys);
    expect(handed.empty).toEqual(copied.empty);
    expect([...copied.empty.subarray(6, 10)]).toEqual([0, 1, 1, 0]);
    expect(sigs).toEqual(before);
    // Kept natively (what BandIndex keeps): groups from them equal those from the typed arrays.
    const staged = await native().lshBandKeys(sigs, { ...shape, handed: true, staged: true });
    expect(staged.keys.length).toBe(copied.keys.length);
    expect(staged.empty.length).toBe(copied.empty.length);
    const rows = randomCsr(rng(6), 300, 50, () => 5, { weights: false });
    const opts = { bands: shape.bands, threshold: 0.5, sets: true, backend: 'cpu' as const };
    const fromTyped = await native().lshGroupsFromKeys(copied.keys, copied.empty, [rows], opts);
    const fromStaged = await native().lshGroupsFromKeys(staged.keys, staged.empty, [rows], opts);
    expect(fromStaged.group).toEqual(fromTyped.group);
    staged.keys.dispose();
    staged.empty.dispose();
  });
});

describe('band keys in row blocks (what BandIndex keeps) are read in place', () => {
  it('keys cut into blocks of every size (empty, one row, many within 1,024 rows, across them) give the groups of one array, on every backend', async () => {
    // 6,000 rows with copies and near copies, so classes and candidate pairs are many.
    const m = nearCopies(41, 6000, 20_000, [4, 10], { copy: 0.2, edit: 0.2, empty: 0.02 });
    const shape = { samples: 108, bands: 6, rows: 18, width: 1 as const };
    const mh = new MinHash({ samples: shape.samples, seed: 3, backend: 'cpu' });
    const sigs = await mh.hash(m);
    mh.dispose();
    const { keys, empty } = await native().lshBandKeys(sigs, shape);
    // Cuts: a few long blocks, runs of one-row and empty blocks, and 40 blocks inside one 1,024-row window.
    const cuts = [0, 0, 1, 2, 2, 3, 700, 1023, 1024, 1025, 1500];
    for (let c = 1500; c < 1540; c++) cuts.push(c);
    cuts.push(2100, 4096, 4097, m.rows - 1, m.rows, m.rows);
    const parts = cuts.slice(1).map((c, k) => keys.slice(cuts[k] * shape.bands, c * shape.bands));
    parts.unshift(keys.slice(0, 0));
    let first: unknown;
    for (const backend of backends) {
      const opts = { bands: shape.bands, threshold: 0.8, sets: true, backend };
      const whole = await native().lshGroupsFromKeys(keys, empty, [m], opts);
      const cut = await native().lshGroupsFromKeys(parts, empty, [m], opts);
      expect(whole.count).toBeGreaterThan(500);
      expect(cut.group).toEqual(whole.group);
      expect([cut.left, cut.right, cut.similarity]).toEqual([whole.left, whole.right, whole.similarity]);
      first ??= whole.group;
      expect(whole.group).toEqual(first);
    }
    // Blocks that do not hold whole rows, or more or fewer rows than `empty`, are coded errors.
    const opts = { bands: shape.bands, threshold: 0.8, sets: true, backend: 'cpu' as const };
    await expect(
      Promise.resolve().then(() => native().lshGroupsFromKeys([keys.slice(0, 5), keys.slice(5)], empty, [m], opts)),
    ).rejects.toMatchObject({
      code: 'CUSIM_INVALID_ARGUMENT',
      message: expect.stringMatching(/keys\[0\] has length 5, not whole rows of 6 band keys/),
    });
    await expect(Promise.resolve().then(() => native().lshGroupsFromKeys(parts.slice(0, -2), empty, [m], opts))).rejects.toMatchObject({
      code: 'CUSIM_INVALID_ARGUMENT',
      message: expect.stringMatching(/keys hold \d+ rows of band keys but empty.length is 6/),
    });
  });
});

describe('classic MinHash reads token hashes by one rule (classicTokens)', () => {
  it('2^32 columns are token hashes as given; narrower columns are mixed by fmix32 first', async () => {
    const sets = randomCsr(rng(23), 200, 5000, () => 15, { weights: false });
    const params = dedupParams({ threshold: 0.8 });
    const mh = new MinHash({ samples: params.samples, seed: DEDUP_DEFAULTS.seed, backend: 'cpu' });
    // The oracle: MinHash over the columns as the rule says.
    const asIds = await dedup(sets, { method: 'classic', threshold: 0.8, backend: 'cpu', returnSignatures: true });
    expect(asIds.signatures).toEqual(await mh.hash(tokenHashRows(sets)));
    const wide = { ...sets, cols: 2 ** 32 };
    const asHashes = await dedup(wide, { method: 'classic', threshold: 0.8, backend: 'cpu', returnSignatures: true });
    expect(asHashes.signatures).toEqual(await mh.hash(wide));
    mh.dispose();
  });
});

describe('dedupRecords: progress, abort, bad blocks', () => {
  it('reports hash (rows, to the total), then candidates and verify (pairs, to the total)', async () => {
    const m = randomCsr(rng(31), 3000, 800, () => 20);
    const events: ProgressEvent[] = [];
    const blocks = blocksOf(m, Array.from({ length: m.rows }, String), 700);
    const r = await dedupRecords(blocks, { threshold: 0.5, backend: 'cpu', totalRows: m.rows, onProgress: (e) => events.push({ ...e }) });
    const stages = [...new Set(events.map((e) => e.stage))];
    expect(stages).toEqual(['hash', 'candidates', 'verify']);
    const hash = events.filter((e) => e.stage === 'hash');
    for (let k = 1; k < hash.length; k++) expect(hash[k].done).toBeGreaterThanOrEqual(hash[k - 1].done);
    expect(hash[hash.length - 1]).toEqual({ stage: 'hash', done: m.rows, total: m.rows });
    const last = events[events.length - 1];
    expect(last.stage).toBe('verify');
    expect(last.done).toBe(last.total);
    expect(r.group.length).toBe(m.rows);
  });

  it('an abort while the source waits rejects with ABORT_ERR at once', async () => {
    const m = randomCsr(rng(37), 100, 500, () => 10);
    const ac = new AbortController();
    let waiting!: () => void;
    const reached = new Promise<void>((resolve) => (waiting = resolve));
    async function* source(): AsyncGenerator<DedupBlock> {
      yield { rows: m };
      waiting();
      // A reader waiting on a pipe that never delivers.
      await new Promise(() => {});
    }
    const p = dedupRecords(source(), { backend: 'cpu', signal: ac.signal });
    await reached;
    ac.abort();
    await expect(p).rejects.toMatchObject({ code: 'ABORT_ERR' });
    const pre = new AbortController();
    pre.abort();
    await expect(dedupRecords([{ rows: m }], { backend: 'cpu', signal: pre.signal })).rejects.toMatchObject({ code: 'ABORT_ERR' });
  });

  it('an abort between blocks stops reading: the source is asked no further and is closed', async () => {
    const m = randomCsr(rng(41), 100, 500, () => 10);
    const ac = new AbortController();
    let asked = 0;
    let closed = false;
    const source: Iterable<DedupBlock> = {
      [Symbol.iterator]: () => ({
        next: () => {
          asked++;
          if (asked === 2) ac.abort();
          return { done: false, value: { rows: m } };
        },
        return: () => {
          closed = true;
          return { done: true, value: undefined };
        },
      }),
    };
    await expect(dedupRecords(source, { backend: 'cpu', signal: ac.signal })).rejects.toMatchObject({ code: 'ABORT_ERR' });
    expect(asked).toBe(2);
    expect(closed).toBe(true);
  });

  it('blocks of different columns, ids of the wrong length and non-blocks are coded errors', async () => {
    const a = randomCsr(rng(43), 10, 50, () => 5);
    const b = { ...randomCsr(rng(44), 10, 60, () => 5) };
    await expect(dedupRecords([{ rows: a }, { rows: b }], { backend: 'cpu' })).rejects.toMatchObject({
      code: 'CUSIM_INVALID_ARGUMENT',
      message: expect.stringMatching(/blocks\[1\]\.rows\.cols/),
    });
    await expect(dedupRecords([{ rows: a, ids: ['x'] }], { backend: 'cpu' })).rejects.toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT' });
    await expect(dedupRecords([42 as never], { backend: 'cpu' })).rejects.toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT' });
    await expect(dedupRecords(7 as never)).rejects.toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT' });
    const empty = await dedupRecords([], { backend: 'cpu' });
    expect(empty.group.length).toBe(0);
    expect(empty.ids.length).toBe(0);
  });
});

describe('dedupRecords reads each block before it asks for the next', () => {
  it.each(['weighted', 'classic'] as const)(
    '%s: a source that refills one set of arrays for every block (and scribbles on them at the end) gives the groups of the whole matrix, on every backend and verification',
    async (method) => {
      const r = rng(53);
      const m = nearCopies(54, 9000, 8000, [3, 12], { copy: 0.15, edit: 0.15 });
      // Blocks of 1 to 700 rows, an empty one among them, all read from the same arrays.
      const cuts = [0];
      while (cuts[cuts.length - 1] < m.rows)
        cuts.push(Math.min(m.rows, cuts[cuts.length - 1] + (cuts.length === 5 ? 0 : 1 + randInt(r, 700))));
      const indptr = new Uint32Array(701);
      const indices = new Uint32Array(700 * 16);
      const values = new Float32Array(700 * 16);
      async function* refilled(): AsyncGenerator<DedupBlock> {
        for (let k = 0; k + 1 < cuts.length; k++) {
          const [b, e] = [cuts[k], cuts[k + 1]];
          const base = m.indptr[b];
          const nnz = m.indptr[e] - base;
          for (let i = b; i <= e; i++) indptr[i - b] = m.indptr[i] - base;
          indices.set(m.indices.subarray(base, base + nnz));
          values.set(m.values!.subarray(base, base + nnz));
          // A tick between blocks, so calls still running see the arrays change under them if they read them.
          await new Promise((resolve) => setImmediate(resolve));
          yield {
            rows: {
              rows: e - b,
              cols: m.cols,
              indptr: indptr.subarray(0, e - b + 1),
              indices: indices.subarray(0, nnz),
              values: values.subarray(0, nnz),
            },
          };
        }
        indices.fill(7);
        values.fill(3);
      }
      for (const backend of backends) {
        const want = await dedup(m, { method, threshold: 0.8, backend });
        expect(want.count).toBeGreaterThan(300);
        for (const verify of ['exact', 'estimate'] as const) {
          const got = await dedupRecords(refilled(), { method, threshold: 0.8, backend, verify });
          const oracle = verify === 'exact' ? want : await dedup(m, { method, threshold: 0.8, backend, verify });
          expect(got.group).toEqual(oracle.group);
          expect(got.pairs).toEqual(oracle.pairs);
        }
      }
    },
  );
});

describe('dedup() owns its input', () => {
  it('rewriting the matrix after the call returns changes nothing', async () => {
    const m: CsrMatrix = {
      rows: 2,
      cols: 3,
      indptr: Uint32Array.from([0, 3, 6]),
      indices: Uint32Array.from([0, 1, 2, 0, 1, 2]),
      values: Float32Array.from([1, 1, 1, 1, 1, 1]),
    };
    const p = dedup(m, { threshold: 0.9, backend: 'cpu' });
    m.values!.set([100, 1, 1, 1, 1, 100]);
    const r = await p;
    expect(Array.from(r.pairs.similarity)).toEqual([1]);
    expect(r.group[0]).toBe(r.group[1]);
  });
});

// Keeps the import list honest for the weighted signer (dim = the blocks' columns).
it('the weighted signer hashes with dim = the blocks’ columns', async () => {
  const m = randomCsr(rng(47), 50, 300, () => 8);
  const r = await dedup(m, { threshold: 0.5, backend: 'cpu', returnSignatures: true });
  const w = new WeightedMinHash({ dim: m.cols, samples: r.lsh.samples, seed: DEDUP_DEFAULTS.seed, backend: 'cpu' });
  expect(r.signatures).toEqual(await w.hash(m));
  w.dispose();
});
