// Band keys made where the rows are made (native/text.h Sketch): a token
// hasher's keys are classic MinHash + lshBandKeys of each document's row
// (the CPU hasher, and a GPU's bit for bit); the record reader keeps the kept
// rows' keys in row order; dedupRecords takes a block's keys in place of its
// signatures only where they are this dedup's, and `cusim dedup --backend
// cuda` (which has the GPU make them) reports what the CPU backend reports.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { MinHash, TextFeaturizer, dedupParams, dedupRecords, type BlockBandKeys, type CsrMatrix, type DedupBlock } from '../lib/index.js';
import { native } from '../lib/addon.js';
import type { SketchParams, Staged } from '../lib/native-types.js';
import { cusim, ensureDist, fromDist } from './cli-helpers.js';
import { backends, blocksOf, components, describeGpu, hasGpu, pick, randInt, rng } from './helpers.js';

beforeAll(() => ensureDist());

const NONE = 0xffffffff;
const devicesToTry = [-1, ...(hasGpu ? [0] : [])];
const deviceName = (d: number): string => (d < 0 ? 'CPU hasher' : `GPU ${d} hasher`);

// Words of ASCII and non-ASCII letters, documents of 0 to 300 of them, some
// repeated (repeats leave a minimum as it is), some exact copies.
function texts(seed: number, n: number): string[] {
  const r = rng(seed);
  const letters = ['a', 'b', 'c', 'é', 'ß', 'Ω', 'ж', 'x', 'y', 'z', '字', 'Ä'];
  const word = () => Array.from({ length: 1 + randInt(r, 5) }, () => pick(r, letters)).join('');
  const out: string[] = [];
  while (out.length < n) {
    const len = pick(r, [0, 1, 2, 5, 31, 32, 33, 80, 300]);
    const t = Array.from({ length: len }, word).join(pick(r, [' ', '  ', ', ', '\n']));
    out.push(t);
    if (r() < 0.2) out.push(t);
  }
  return out;
}

function encode(docs: string[]): { bytes: Uint8Array; offsets: Uint32Array } {
  const parts = docs.map((t) => Buffer.from(t));
  const offsets = new Uint32Array(docs.length + 1);
  parts.forEach((p, i) => (offsets[i + 1] = offsets[i] + p.length));
  return { bytes: Buffer.concat(parts), offsets };
}

/** The oracle: classic MinHash of the rows (on the CPU), then lshBandKeys of the signatures. */
async function keysOf(rows: CsrMatrix, s: SketchParams): Promise<{ keys: BigUint64Array; empty: Uint8Array }> {
  const mh = new MinHash({ samples: s.samples, seed: s.seed, backend: 'cpu' });
  try {
    const sigs = await mh.hash(rows);
    return await native().lshBandKeys(sigs, { samples: s.samples, bands: s.bands, rows: s.rows, width: 1 });
  } finally {
    mh.dispose();
  }
}

const SHAPES: SketchParams[] = [
  { samples: 108, seed: 1, bands: 6, rows: 18 },
  { samples: 40, seed: 7, bands: 5, rows: 8 },
  { samples: 200, seed: 3, bands: 10, rows: 20 },
  { samples: 1, seed: 0, bands: 1, rows: 1 },
];

describe('a token hasher sketches each document: its classic MinHash band keys', () => {
  for (const mode of ['words', 'qgrams', 'code'] as const) {
    it(`equal MinHash + lshBandKeys of the document's row (${mode}; ASCII and not, empty and long documents; 1 to 200 samples)${hasGpu ? '' : ' (GPU: skipped, no usable GPU)'}`, async () => {
      const feat = new TextFeaturizer({ mode, weighting: 'binary' });
      const docs = texts(mode.length, 400);
      // The rows as the CPU dedup reads them: every document's distinct 32-bit token hashes.
      const h = await feat.hashedRows(docs, { minTokens: 0, bits: 32 });
      const rows: CsrMatrix = { rows: docs.length, cols: 2 ** 32, indptr: h.indptr, indices: h.indices };
      expect(rows.indptr.length).toBe(docs.length + 1);
      const { bytes, offsets } = encode(docs);
      for (const device of devicesToTry) {
        const hasher = feat.nativeTokenHasher(device)!;
        try {
          for (const s of SHAPES) {
            const want = await keysOf(rows, s);
            for (const sorted of [true, false]) {
              const got = await hasher.hashAsync(bytes, offsets, { sorted, sketch: s });
              const at = `${deviceName(device)}, ${JSON.stringify(s)}, sorted ${sorted}`;
              expect(got.keys, at).toEqual(want.keys);
              expect(got.empty, at).toEqual(want.empty);
            }
          }
          // An empty row's signature is all sentinels: flagged, as lshBandKeys flags it.
          const none = await hasher.hashAsync(...(Object.values(encode(['', ' ', 'x'])) as [Uint8Array, Uint32Array]), {
            sketch: SHAPES[0],
          });
          expect([...none.empty!].slice(0, 2), deviceName(device)).toEqual(mode === 'qgrams' ? [1, 0] : [1, 1]);
        } finally {
          hasher.dispose();
        }
      }
    }, 120_000);
  }

  it('refuses a sketch whose bands do not fit its samples, or without a hasher', async () => {
    const feat = new TextFeaturizer({ mode: 'words' });
    const hasher = feat.nativeTokenHasher(-1)!;
    const { bytes, offsets } = encode(['a b c']);
    try {
      await expect(
        Promise.resolve().then(() => hasher.hashAsync(bytes, offsets, { sketch: { samples: 10, seed: 1, bands: 3, rows: 4 } })),
      ).rejects.toMatchObject({
        code: 'CUSIM_INVALID_ARGUMENT',
        message: expect.stringMatching(/bands × rows must be at most samples/),
      });
      await expect(
        Promise.resolve().then(() => hasher.hashAsync(bytes, offsets, { sketch: { samples: 10, seed: -1, bands: 2, rows: 4 } })),
      ).rejects.toMatchObject({
        message: expect.stringMatching(/seed must be an integer/),
      });
    } finally {
      hasher.dispose();
    }
    const reader = feat.nativeHandle!;
    const options = { jsonl: true, field: 'text', idField: 'id', maxRecordBytes: 1 << 20, minTokens: 1, bits: 32 };
    await expect(
      Promise.resolve().then(() => reader.recordsAsync!(Buffer.from('{"text":"a b"}'), { ...options, sketch: SHAPES[0] })),
    ).rejects.toThrow(/options\.sketch needs options\.hasher/);
  });
});

describe('the record reader keeps the kept rows keys', () => {
  it(`in row order, rows under minTokens left out (JSONL and CSV)${hasGpu ? '' : ' (GPU: skipped, no usable GPU)'}`, async () => {
    const feat = new TextFeaturizer({ mode: 'words', weighting: 'binary' });
    const reader = feat.nativeHandle!;
    const docs = texts(5, 1500);
    const jsonl = Buffer.from(docs.map((t, i) => JSON.stringify({ id: `d${i}`, text: t })).join('\n') + '\n');
    const csv = Buffer.from(docs.map((t, i) => `d${i},"${t.replaceAll('"', '""')}"`).join('\n') + '\n');
    const s = SHAPES[0];
    for (const device of devicesToTry) {
      const hasher = feat.nativeTokenHasher(device)!;
      try {
        for (const [name, block, table] of [
          ['JSONL', jsonl, undefined],
          ['CSV', csv, { delimiter: ',', quoted: true, textColumn: 1, idColumn: 0 }],
        ] as const) {
          if (table && !native().tableReader) continue;
          for (const minTokens of [0, 3]) {
            const options = {
              jsonl: !table,
              ...(table ? { table } : {}),
              field: 'text',
              idField: 'id',
              maxRecordBytes: 1 << 20,
              minTokens,
              bits: 32,
            };
            const r = await reader.recordsAsync!(block, { ...options, values: false, hasher, sketch: s });
            const rows: CsrMatrix = { rows: r.rowPtr.length - 1, cols: 2 ** 32, indptr: r.rowPtr, indices: r.cols };
            expect(rows.rows, name).toBeGreaterThan(minTokens ? 900 : 1400);
            if (minTokens) expect(rows.rows, name).toBeLessThan(docs.length);
            const want = await keysOf(rows, s);
            const at = `${deviceName(device)}, ${name}, minTokens ${minTokens}`;
            expect(r.keys!.toArray(), at).toEqual(want.keys);
            expect(r.empty!.toArray(), at).toEqual(want.empty);
            // The rows themselves are the reader's without a sketch.
            const plain = await reader.recordsAsync!(block, { ...options, values: false });
            expect(r.cols, at).toEqual(plain.cols);
          }
        }
      } finally {
        hasher.dispose();
      }
    }
  }, 120_000);
});

// Near copies of random word documents, as 32-bit token hash rows in blocks.
async function nearCopyBlocks(seed: number, bases: number, size: number): Promise<{ docs: string[]; blocks: () => DedupBlock[] }> {
  const r = rng(seed);
  const word = () => Array.from({ length: 3 + randInt(r, 6) }, () => String.fromCharCode(97 + randInt(r, 26))).join('');
  const docs: string[] = [];
  for (let b = 0; b < bases; b++) {
    const base = Array.from({ length: 30 }, word);
    docs.push(base.join(' '));
    for (let c = 0; c < randInt(r, 3); c++) {
      const w = base.slice();
      for (let e = 0; e <= randInt(r, 3); e++) w[randInt(r, w.length)] = word();
      docs.push(w.join(' '));
    }
  }
  const h = await new TextFeaturizer({ mode: 'words', weighting: 'binary' }).hashedRows(docs, { minTokens: 1, bits: 32 });
  const m: CsrMatrix = { rows: docs.length, cols: 2 ** 32, indptr: h.indptr, indices: h.indices };
  const ids = docs.map((_, i) => String(i));
  const blocks = (): DedupBlock[] => blocksOf(m, ids, size);
  return { docs, blocks };
}

/** The oracle: groups of every pair of documents at set Jaccard >= threshold over their words. */
function bruteGroups(docs: string[], threshold: number): string[][] {
  const sets = docs.map((t) => new Set(t.split(' ')));
  const edges: [number, number][] = [];
  for (let i = 0; i < docs.length; i++)
    for (let j = i + 1; j < docs.length; j++) {
      let both = 0;
      for (const w of sets[i]) if (sets[j].has(w)) both++;
      if (both / (sets[i].size + sets[j].size - both) >= threshold) edges.push([i, j]);
    }
  return asGroups(components(docs.length, edges).group);
}

function asGroups(group: Uint32Array): string[][] {
  const by = new Map<number, number[]>();
  group.forEach((g, i) => {
    if (g === NONE) return;
    by.set(g, [...(by.get(g) ?? []), i]);
  });
  return [...by.values()]
    .filter((g) => g.length > 1)
    .map((g) => g.map(String))
    .sort((a, b) => Number(a[0]) - Number(b[0]));
}

// Keys that put every row in one bucket of every band: every pair is a
// candidate, so the verified groups are the brute-force ones (what banding
// alone would miss, these find). A block's keys are its own (staged here).
function oneBucket(rows: number, p: SketchParams): { keys: Staged; empty: Staged } {
  return {
    keys: native().stageArray([new BigUint64Array(rows * p.bands).fill(42n)]),
    empty: native().stageArray([new Uint8Array(rows)]),
  };
}

describe('dedupRecords takes a block’s band keys in place of its signatures', () => {
  it('where they are its own (classic, 32-bit token hashes, its samples, seed and banding); otherwise it hashes the rows and lets them go', async () => {
    const threshold = 0.8;
    const { docs, blocks } = await nearCopyBlocks(17, 150, 64);
    const p = { ...dedupParams({ threshold }), seed: 5 };
    const brute = bruteGroups(docs, threshold);
    expect(brute.length).toBeGreaterThan(40);
    for (const backend of backends) {
      const options = { method: 'classic' as const, threshold, seed: p.seed, backend };
      const plain = await dedupRecords(blocks(), options);
      // The banding's own groups miss some pairs the brute force finds (so the keys below make the difference).
      expect(asGroups(plain.group), backend).not.toEqual(brute);
      // One bucket per band, as this dedup's: every pair verified.
      const own = blocks().map((b) => ({ ...b, bandKeys: { ...p, ...oneBucket(b.rows.rows, p) } }));
      const used = await dedupRecords(own, options);
      expect(asGroups(used.group), backend).toEqual(brute);
      for (const b of own) expect([b.bandKeys.keys.length, b.bandKeys.empty.length], 'owned and disposed').toEqual([0, 0]);
      // Another seed, samples or banding, or keys for fewer rows: not this dedup's; hashed as usual.
      for (const [why, change] of [
        ['seed', { seed: p.seed + 1 }],
        ['samples', { samples: p.samples + 1 }],
        ['bands', { bands: p.bands - 1 }],
        ['rows', { short: 1 }],
      ] as const) {
        const other = blocks().map((b) => {
          const k = oneBucket(b.rows.rows - ('short' in change ? 1 : 0), p);
          return { ...b, bandKeys: { ...p, ...change, ...k } };
        });
        const got = await dedupRecords(other, options);
        expect(got.group, `${backend}: ${why}`).toEqual(plain.group);
        for (const b of other) expect(b.bandKeys.keys.length, `${why}: let go`).toBe(0);
      }
      // Keys that are not a reader's (plain typed arrays, say) are a coded error naming the block, never ignored.
      const plainKeys = blocks().map((b) => ({
        ...b,
        bandKeys: { ...p, keys: new BigUint64Array(b.rows.rows * p.bands), empty: new Uint8Array(b.rows.rows) } as unknown as BlockBandKeys,
      }));
      await expect(dedupRecords(plainKeys, options)).rejects.toMatchObject({
        code: 'CUSIM_INVALID_ARGUMENT',
        message: expect.stringMatching(/blocks\[0\]\.bandKeys must be band keys a reader made/),
      });
    }
  }, 120_000);
});

describe('the block reader hands each block its keys', () => {
  it(`dedupRecords over them gives the groups of the rows hashed as usual (CPU hashers${hasGpu ? ' and the GPU' : ''})`, async () => {
    // Compiled modules, as the CLI runs them.
    const blocks = await fromDist<typeof import('../lib/cli/record-blocks.js')>('cli/record-blocks.js');
    const lib = await fromDist<typeof import('../lib/index.js')>('index.js');
    const { docs } = await nearCopyBlocks(23, 400, 1);
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'cusim-keys-')), 'near.jsonl');
    writeFileSync(file, docs.map((t, i) => JSON.stringify({ id: `d${i}`, text: t })).join('\n') + '\n');
    const threshold = 0.8;
    const p = { ...lib.dedupParams({ threshold }), seed: 9 };
    const read = async (tokenDevices: number[], sketch?: SketchParams): Promise<DedupBlock[]> => {
      const out: DedupBlock[] = [];
      await blocks.readRecordBlocks(
        { file },
        {
          records: { format: 'jsonl', field: 'text', idField: 'id', source: file, maxRecordBytes: 1 << 20 },
          features: { mode: 'words' },
          minTokens: 1,
          bits: 32,
          values: false,
          threads: 2,
          blockBytes: 4096,
          tokenDevices,
          ...(sketch ? { sketch } : {}),
          onBlock: (r) => {
            out.push({
              rows: { rows: r.ids.length, cols: 2 ** 32, indptr: r.rows.indptr, indices: r.rows.indices },
              ids: r.ids,
              ...(r.bandKeys ? { bandKeys: r.bandKeys } : {}),
            });
          },
        },
      );
      return out;
    };
    const options = { method: 'classic' as const, threshold, seed: p.seed, backend: 'cpu' as const };
    const plain = await lib.dedupRecords(await read([]), options);
    expect(plain.count).toBeGreaterThan(100);
    for (const device of devicesToTry) {
      const keyed = await read([device], p);
      expect(keyed.length, 'blocks').toBeGreaterThan(20);
      for (const b of keyed) expect(b.bandKeys?.keys.length, deviceName(device)).toBe(b.rows.rows * p.bands);
      const got = await lib.dedupRecords(keyed, options);
      expect(got.group, deviceName(device)).toEqual(plain.group);
      expect([got.pairs.left, got.pairs.right, got.pairs.similarity], deviceName(device)).toEqual([
        plain.pairs.left,
        plain.pairs.right,
        plain.pairs.similarity,
      ]);
      for (const b of keyed) expect(b.bandKeys!.keys.length, 'owned by the dedup, and let go').toBe(0);
    }
  }, 120_000);
});

describeGpu('cusim dedup: band keys made where the tokens are hashed', () => {
  it('reports the CPU backend’s groups and pairs, on one GPU and on all', async () => {
    const docs: string[] = [];
    const r = rng(77);
    const word = () => Array.from({ length: 3 + randInt(r, 6) }, () => String.fromCharCode(97 + randInt(r, 26))).join('');
    for (let b = 0; b < 3000; b++) {
      const base = Array.from({ length: 25 }, word);
      docs.push(base.join(' '));
      if (r() < 0.3) {
        base[randInt(r, base.length)] = word();
        docs.push(base.join(' '));
      }
    }
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'cusim-keys-')), 'keys.jsonl');
    writeFileSync(file, docs.map((t, i) => JSON.stringify({ id: `d${i}`, text: t })).join('\n') + '\n');
    const run = async (backend: string, more: string[] = []) => {
      const out = await cusim(['dedup', file, '--field', 'text', '--json', '-t', '0.85', '--backend', backend, ...more]);
      expect(out.status, out.stderr).toBe(0);
      const rep = JSON.parse(out.stdout) as { groups: unknown[] };
      return rep.groups;
    };
    const cpu = await run('cpu');
    expect(cpu.length).toBeGreaterThan(500);
    expect(await run('cuda')).toEqual(cpu);
    expect(await run('cuda', ['--devices', 'all'])).toEqual(cpu);
  }, 240_000);
});
