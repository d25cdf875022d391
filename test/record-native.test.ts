// The native record reader (native/records_cpu.cc, lib/cli/record-native.ts)
// against the JavaScript reader, its definition (JSON.parse, String(id), the
// JavaScript featurizer): the same rows, ids, counts and first error on
// random and hostile JSONL and plain lines, in one block and in many.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { beforeAll, describe, expect, it } from 'vitest';
import { cusim, ensureDist, fromDist } from './cli-helpers.js';
import { hasGpu, pick, randInt, rng } from './helpers.js';

type Dist = {
  blocks: typeof import('../lib/cli/record-blocks.js');
  text: typeof import('../lib/text/index.js');
  addon: typeof import('../lib/addon.js');
};
let d: Dist;

beforeAll(async () => {
  ensureDist();
  const load = fromDist;
  d = { blocks: await load('cli/record-blocks.js'), text: await load('text/index.js'), addon: await load('addon.js') };
});

type R = () => number;

const WORDS = ['alpha', 'Beta', 'GAMMA', 'delta', 'x', 'parse_json', 'camelCase', 'node42', 'the', 'for', 'if', 'return'];
const WIDE = ['Überall', '東京', 'naïve', 'café', '😀', 'ǅungla', 'straße', 'Ⅻ'];

function words(r: R, wide: boolean): string {
  const n = randInt(r, 14);
  return Array.from({ length: n }, () => (wide && randInt(r, 4) === 0 ? pick(r, WIDE) : pick(r, WORDS))).join(
    pick(r, [' ', '  ', '\t', ', ', '.']),
  );
}

// JSON string bodies that JSON.stringify would not write: escapes of every kind.
const ESCAPED = [
  'a\\nb\\tc',
  '\\"quoted\\" \\\\ back\\/slash',
  '\\u0041\\u0062c \\u00e9t\\u00E9',
  'smile \\ud83d\\ude00 ok',
  'lone \\ud800 high',
  'lone \\udc00 low',
  'nul \\u0000 byte',
  'line\\u2028sep',
];

// Ids of every JSON type, as String() writes them.
const IDS = [
  '"doc-1"',
  '"caf\\u00e9"',
  '"x\\ud800"',
  '7',
  '-0',
  '1.5',
  '1e21',
  '1e-7',
  '123456789012345678901234567890',
  '1e400',
  '-1e-400',
  'true',
  'false',
  'null',
  '{"a":1}',
  '[1,[2,null],"x"]',
  '[]',
  '""',
];

/** A JSONL line that JSON.parse reads as an object with a string text (no error). */
function goodJsonLine(r: R): string {
  const text =
    randInt(r, 3) === 0
      ? `"${pick(r, ESCAPED)} ${JSON.stringify(words(r, false)).slice(1, -1)}"`
      : JSON.stringify(words(r, randInt(r, 3) === 0));
  const parts = [`"text":${text}`];
  if (randInt(r, 2) === 0) parts.push(`"id":${pick(r, IDS)}`);
  if (randInt(r, 4) === 0) parts.push(`"meta":{"text":5,"id":[1],"deep":{"x":[true,false,null,1.25e3]}}`);
  if (randInt(r, 8) === 0) parts.push(`"text":${JSON.stringify(words(r, false))}`); // repeated key: the last wins
  if (randInt(r, 8) === 0) parts.push(`"\\u0069d":"escaped-key"`); // "id" spelled with an escape
  for (let i = parts.length - 1; i > 0; i--) {
    const j = randInt(r, i + 1);
    [parts[i], parts[j]] = [parts[j], parts[i]];
  }
  const ws = () => pick(r, ['', '', ' ', '\t', ' \r ']);
  return `${ws()}{${parts.map((p) => ws() + p + ws()).join(',')}}${ws()}`;
}

/** Lines that are not records: blank in JavaScript's eyes (String.prototype.trim). */
const BLANK = ['', '   ', '\t', '\u000b\f', '\u00a0', '\u3000 \u2028', '\uFEFF'];

function jsonlCorpus(seed: number, lines: number): string {
  const r = rng(seed);
  let s = '';
  for (let i = 0; i < lines; i++) {
    const k = randInt(r, 20);
    let l: string;
    if (k === 0) l = pick(r, BLANK);
    else if (k === 1)
      l = '\uFEFF' + goodJsonLine(r); // TextDecoder drops a leading BOM
    else if (k === 2) l = `{"text":"deep beyond simdjson's depth","x":${'['.repeat(1100)}${']'.repeat(1100)}}`;
    else l = goodJsonLine(r);
    s += l + (randInt(r, 5) === 0 ? '\r\n' : '\n');
  }
  return s;
}

function plainCorpus(seed: number, lines: number): Buffer {
  const r = rng(seed);
  const parts: Buffer[] = [];
  for (let i = 0; i < lines; i++) {
    const k = randInt(r, 12);
    let b: Buffer;
    if (k === 0) b = Buffer.from(pick(r, BLANK));
    else if (k === 1)
      b = Buffer.concat([Buffer.from(words(r, false)), Buffer.from([0xff, 0xc3, 0x28]), Buffer.from(' tail')]); // invalid UTF-8
    else if (k === 2) b = Buffer.from('\uFEFF' + words(r, false));
    else b = Buffer.from(words(r, randInt(r, 3) === 0));
    parts.push(b, Buffer.from(randInt(r, 5) === 0 ? '\r\n' : '\n'));
  }
  return Buffer.concat(parts);
}

function chunked(buf: Buffer, seed: number): Readable {
  const r = rng(seed);
  const parts: Buffer[] = [];
  for (let at = 0; at < buf.length;) {
    const n = 1 + randInt(r, 5000);
    parts.push(buf.subarray(at, at + n));
    at += n;
  }
  return Readable.from(parts);
}

interface Read {
  reader: string;
  ids: string[];
  tokens: number[];
  indptr: number[];
  indices: number[];
  values: number[];
  documents: number;
  tooSmall: number;
}

type Opts = {
  format?: 'auto' | 'jsonl' | 'lines';
  mode?: 'words' | 'qgrams' | 'code';
  minTokens?: number;
  bits?: number;
  blockBytes?: number;
  maxRecordBytes?: number;
  field?: string;
  idField?: string;
  idPrefix?: string;
  values?: boolean;
};

async function read(input: Buffer, reader: 'js' | 'native', o: Opts = {}): Promise<Read> {
  const out: Read = { reader: '', ids: [], tokens: [], indptr: [0], indices: [], values: [], documents: 0, tooSmall: 0 };
  await d.blocks.readRecordBlocks(chunked(input, 5), {
    records: {
      format: o.format ?? 'auto',
      field: o.field ?? 'text',
      idField: o.idField ?? 'id',
      source: 'in.jsonl',
      idPrefix: o.idPrefix,
      maxRecordBytes: o.maxRecordBytes ?? 1 << 20,
    },
    features: { mode: o.mode ?? 'words' },
    minTokens: o.minTokens ?? 1,
    bits: o.bits ?? 32,
    values: o.values,
    threads: 2,
    blockBytes: o.blockBytes,
    reader,
    onReader: (s) => (out.reader = s),
    onBlock: (b) => {
      for (let i = 0; i < b.ids.length; i++) out.ids.push(b.ids.get(i));
      out.tokens.push(...b.rows.tokens);
      const base = out.indices.length;
      for (let i = 1; i < b.rows.indptr.length; i++) out.indptr.push(base + b.rows.indptr[i]);
      out.indices.push(...b.rows.indices);
      out.values.push(...(b.rows.values ?? []));
      out.documents += b.documents;
      out.tooSmall += b.tooSmall;
    },
  });
  return out;
}

/** Both readers on `input`: equal results, or equal errors; the native one must be the one that ran. */
async function same(input: Buffer, o: Opts = {}, nativeRuns = true): Promise<Read | Error> {
  const js = await read(input, 'js', o).catch((e: Error) => e);
  const nat = await read(input, 'native', o).catch((e: Error) => e);
  if (js instanceof Error) {
    expect(nat).toBeInstanceOf(Error);
    expect({
      message: (nat as Error).message,
      fix: (nat as { fix?: string }).fix,
      exitCode: (nat as { exitCode?: number }).exitCode,
    }).toEqual({
      message: js.message,
      fix: (js as { fix?: string }).fix,
      exitCode: (js as { exitCode?: number }).exitCode,
    });
    return js;
  }
  if (nat instanceof Error) throw nat;
  expect(js.reader).toMatch(/^JavaScript/);
  expect(nat.reader).toMatch(nativeRuns ? /^native \(simdjson / : /^JavaScript \(the field name/);
  expect({ ...nat, reader: '' }).toEqual({ ...js, reader: '' });
  return js;
}

describe('the native record reader', () => {
  it('is compiled in and reads clean JSONL without JavaScript', async () => {
    expect(d.addon.native().recordReader).toMatch(/^simdjson \d/);
    const feat = new d.text.TextFeaturizer({ mode: 'words' });
    const lines = Array.from({ length: 500 }, (_, i) => JSON.stringify({ id: `d${i}`, text: `w${i} common words here` }));
    const r = await feat.nativeHandle!.recordsAsync!(Buffer.from(lines.join('\n')), {
      jsonl: true,
      field: 'text',
      idField: 'id',
      maxRecordBytes: 1 << 20,
      minTokens: 1,
      bits: 32,
    });
    expect(r.lines).toBe(500);
    // No entry left to JavaScript: no per-entry arrays, the kept rows' ids and lines ready.
    expect(r.entries).toBe(500);
    expect(r.jsTextEnds.length + r.jsLineStart.length).toBe(0);
    expect(r.kind).toBeUndefined();
    expect([...new Set(r.keptIdKind)]).toEqual([1]);
    const ids = Array.from(r.keptIdA, (a, i) => Buffer.from(r.idBytes.subarray(a, r.keptIdB[i])).toString());
    expect(ids).toEqual(lines.map((_, i) => `d${i}`));
    expect([...r.keptLine]).toEqual(lines.map((_, i) => i + 1));
    // Brute force: each row is the sorted distinct hashToken of its words.
    const want = [...new Set(['w7', 'common', 'words', 'here'].map(d.text.hashToken))].sort((a, b) => a - b);
    expect([...r.cols.subarray(r.rowPtr[7], r.rowPtr[8])]).toEqual(want);
  });

  it('reads a handed, padded block in place with the result of a copied one; kept ids and lines count from firstLine', async () => {
    const feat = new d.text.TextFeaturizer({ mode: 'words' });
    // Ids of the compact kinds, blanks, and rows under minTokens.
    const lines = Array.from({ length: 300 }, (_, i) =>
      i % 50 === 7
        ? ''
        : JSON.stringify({
            ...(i % 5 === 0 ? {} : { id: [`s${i}`, i * 1.5, true, null][i % 4] }),
            text: i % 9 === 0 ? 'one' : `w${i} two three`,
          }),
    );
    const text = lines.join('\n');
    const options = { jsonl: true, field: 'text', idField: 'id', maxRecordBytes: 1 << 20, minTokens: 2, bits: 32, firstLine: 1000 };
    const padded = Buffer.alloc(Buffer.byteLength(text) + 64, 0x7b);
    padded.write(text);
    const block = padded.subarray(0, Buffer.byteLength(text));
    const inPlace = await feat.nativeHandle!.recordsAsync!(block, { ...options, handed: true });
    const copied = await feat.nativeHandle!.recordsAsync!(Buffer.from(text), options);
    expect(inPlace).toEqual(copied);
    // The oracle: JSON.parse of each line, numbered from firstLine + 1.
    const kept = lines.flatMap((l, i) => {
      if (!l) return [];
      const o = JSON.parse(l) as { id?: unknown; text: string };
      return o.text.split(' ').length >= 2 ? [{ line: 1000 + i + 1, id: o.id }] : [];
    });
    expect([...copied.keptLine]).toEqual(kept.map((k) => k.line));
    const got = Array.from(copied.keptIdKind, (k, i) => {
      const a = copied.keptIdA[i];
      return k === 0
        ? `line ${a}`
        : k === 1
          ? Buffer.from(copied.idBytes.subarray(a, copied.keptIdB[i])).toString()
          : k === 2
            ? copied.nums[a]
            : k;
    });
    expect(got).toEqual(kept.map((k) => (k.id === undefined || k.id === null ? `line ${k.line - 1001}` : k.id === true ? 3 : k.id)));
  });

  it('equals the JavaScript reader on random and hostile JSONL (escapes, surrogates, ids of every type, BOM, CRLF, blanks, depth)', async () => {
    for (const seed of [1, 2, 3]) {
      const s = Buffer.from(jsonlCorpus(seed, 3000));
      for (const blockBytes of [1 << 11, 1 << 24]) {
        const got = await same(s, { blockBytes, minTokens: seed });
        expect(got).not.toBeInstanceOf(Error);
        expect((got as Read).documents).toBeGreaterThan(2500);
        expect((got as Read).tooSmall).toBeGreaterThan(0);
      }
    }
  });

  it('values: false gives the same rows without their values, in clean blocks and in blocks with lines left to JavaScript', async () => {
    for (const [input, mode] of [
      [Buffer.from(jsonlCorpus(4, 3000)), 'words'],
      [Buffer.from(jsonlCorpus(5, 2000)), 'qgrams'],
    ] as const) {
      for (const blockBytes of [1 << 11, 1 << 24]) {
        const full = await read(input, 'native', { blockBytes, mode, minTokens: 2 });
        const bare = await read(input, 'native', { blockBytes, mode, minTokens: 2, values: false });
        expect(full.values.length).toBe(full.indices.length);
        expect(full.values.length).toBeGreaterThan(1000);
        expect(bare.values).toEqual([]);
        expect({ ...bare, values: full.values }).toEqual(full);
      }
    }
  });

  it('equals it in every tokenizer mode, with hashed bits below 32 and prefixed line ids', async () => {
    // With very long lines: one of 600 kB among short ones, in a block of its own and inside one.
    const r = rng(10);
    const long = JSON.stringify({ id: 'long', text: Array.from({ length: 60_000 }, () => pick(r, WORDS)).join(' ') });
    const s = Buffer.from(jsonlCorpus(9, 1500) + long + '\n' + jsonlCorpus(10, 200));
    for (const mode of ['words', 'qgrams', 'code'] as const) {
      const got = (await same(s, { mode, bits: 18, idPrefix: 'f.jsonl', blockBytes: 1 << 13 })) as Read;
      expect(got.ids).toContain('long');
      expect(got.ids).toContain('f.jsonl:1');
    }
    // Field names: an escaped key, a missing id field, a key JavaScript finds on Object.prototype.
    await same(s, { idField: 'nope' });
    // String(record.toString) is a function's source: the JavaScript reader reads it.
    const proto = (await same(s, { idField: 'toString' }, false)) as Read;
    expect(proto.ids[0]).toMatch(/^function toString\(\)/);
  });

  it('equals it on plain lines: invalid UTF-8, a BOM, Unicode-only blanks, CRLF', async () => {
    const s = plainCorpus(4, 4000);
    for (const format of ['lines', 'auto'] as const) {
      for (const mode of ['words', 'code'] as const) await same(s, { format, mode, blockBytes: 1 << 12 });
    }
  });

  it('reports the first error with its line number and message, as the JavaScript reader does', async () => {
    const good = jsonlCorpus(5, 2000).split('\n');
    const BAD = [
      '{"text": oops}',
      '{"text":"a",}',
      '[1,2]',
      '"just a string"',
      '5',
      'null',
      '{"id":"x"}',
      '{"text":5}',
      '{"text":null}',
      '{"text":["a"]}',
      '{"text":{"text":"a"}}',
      '{"text":"a"} trailing',
      '{"text":"\\x"}',
      '{"text":"bad \\ud800 \\u12"}',
      '{"text":"tab\there"}',
      `{"text":"${'w '.repeat(3000)}"}`,
    ];
    const r = rng(6);
    for (const bad of BAD) {
      const lines = [...good];
      const at = 10 + randInt(r, 1900);
      lines[at] = bad;
      if (randInt(r, 2) === 0) lines[at + 50] = '{"text": oops}'; // a later error is not the one reported
      for (const blockBytes of [1 << 12, 1 << 24]) {
        const e = await same(Buffer.from(lines.join('\n')), { blockBytes, maxRecordBytes: 4000 });
        expect(e).toBeInstanceOf(Error);
        expect((e as Error).message).toMatch(new RegExp(`^in\\.jsonl line ${at + 1} `));
      }
    }
  });

  it('cusim dedup --verbose names the reader, and --reader js gives the same report', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cusim-reader-'));
    const file = path.join(dir, 'docs.jsonl');
    const r = rng(12);
    const lines: string[] = [];
    let prev = '';
    for (let i = 0; i < 3000; i++) {
      // Random documents (some with non-ASCII words), every 50th a copy of the one before with one word changed.
      const text =
        i % 50 === 49
          ? prev.replace(/^\S+/, 'changed')
          : Array.from({ length: 30 }, () => (randInt(r, 10) ? `w${randInt(r, 5000)}` : pick(r, WIDE))).join(' ');
      lines.push(JSON.stringify({ id: i % 3 ? i : `d${i}`, text }));
      prev = text;
    }
    writeFileSync(file, lines.join('\n') + '\n');
    const run = async (reader: string) => {
      const out = await cusim(
        ['dedup', file, '--field', 'text', '--json', '--backend', 'cpu', '--threads', '2', '-t', '0.8', '--verbose', '--reader', reader],
        {
          maxBuffer: 1 << 26,
        },
      );
      expect(out.status, out.stderr).toBe(0);
      const j = JSON.parse(out.stdout) as { groups: unknown[]; input: unknown };
      return { groups: j.groups, input: j.input, stderr: out.stderr };
    };
    const nat = await run('native');
    expect(nat.stderr).toMatch(/records read by the native \(simdjson \S+\) reader/);
    expect(nat.groups.length).toBeGreaterThan(10);
    const js = await run('js');
    expect(js.stderr).toMatch(/records read by the JavaScript \(reader: js\) reader/);
    expect({ groups: nat.groups, input: nat.input }).toEqual({ groups: js.groups, input: js.input });
  });

  it('reads invalid UTF-8 inside a JSONL string as JavaScript does (U+FFFD)', async () => {
    const lines = [
      Buffer.from('{"text":"ok fine"}\n'),
      Buffer.concat([
        Buffer.from('{"id":"a'),
        Buffer.from([0xc3]),
        Buffer.from('","text":"bad '),
        Buffer.from([0xff, 0xfe]),
        Buffer.from(' words"}\n'),
      ]),
      Buffer.from('{"text":"after"}'),
    ];
    const got = (await same(Buffer.concat(lines), { format: 'jsonl' })) as Read;
    expect(got.ids).toEqual(['1', 'a\uFFFD', '3']);
  });
});

// A token hasher in place of the tokenizer (the GPU path of `cusim dedup
// --backend cuda`): one hash call per block, the rows built from the hashes.
// The CPU hasher checks the assembly (masking, sorting, repeats, counts,
// minTokens, ids); the GPU hasher must give the very same blocks.
describe('the native record reader with a token hasher', () => {
  const MODES = [{ mode: 'words' as const }, { mode: 'qgrams' as const, q: 3 }, { mode: 'code' as const }];
  const devicesToTry = (): { device: number; name: string }[] => [
    { device: -1, name: 'CPU hasher' },
    ...(hasGpu ? [{ device: 0, name: 'GPU hasher' }] : []),
  ];
  for (const m of MODES) {
    it(`gives the tokenizer's blocks (${m.mode}; ASCII, non-ASCII, escapes, hostile lines; bits 32 and 12; values; minTokens 0-3)${hasGpu ? '' : ' (GPU: skipped, no usable GPU)'}`, async () => {
      const feat = new d.text.TextFeaturizer(m);
      const reader = feat.nativeHandle!;
      for (const { device, name } of devicesToTry()) {
        const hasher = feat.nativeTokenHasher(device)!;
        expect(hasher, name).toBeDefined();
        try {
          for (const seed of [11, 12]) {
            const block = Buffer.from(jsonlCorpus(seed, 1500));
            for (const [bits, values, minTokens] of [
              [32, false, 1],
              [32, true, 0],
              [12, true, 3],
              [12, false, 2],
            ] as const) {
              const options = { jsonl: true, field: 'text', idField: 'id', maxRecordBytes: 1 << 20, minTokens, bits, values };
              const want = await reader.recordsAsync!(block, options);
              const got = await reader.recordsAsync!(block, { ...options, hasher });
              expect(want.rowPtr.length, 'rows').toBeGreaterThan(500);
              expect(got, `${name}, seed ${seed}, bits ${bits}, values ${values}, minTokens ${minTokens}`).toEqual(want);
            }
          }
          // Plain lines, and a block with no document at all.
          const lines = { jsonl: false, field: 'text', idField: 'id', maxRecordBytes: 1 << 20, minTokens: 1, bits: 32 };
          const plain = plainCorpus(13, 800);
          expect(await reader.recordsAsync!(plain, { ...lines, hasher }), name).toEqual(await reader.recordsAsync!(plain, lines));
          const blank = Buffer.from('\n  \n\n');
          expect(await reader.recordsAsync!(blank, { ...lines, hasher }), name).toEqual(await reader.recordsAsync!(blank, lines));
        } finally {
          hasher.dispose();
        }
      }
    }, 120_000);
  }

  it('refuses a hasher that is not one', async () => {
    const reader = new d.text.TextFeaturizer({ mode: 'words' }).nativeHandle!;
    const options = { jsonl: true, field: 'text', idField: 'id', maxRecordBytes: 1 << 20, minTokens: 1, bits: 32 };
    await expect(async () => reader.recordsAsync!(Buffer.from('{"text":"a b"}'), { ...options, hasher: {} as never })).rejects.toThrow(
      /options\.hasher must be a TokenHasher/,
    );
  });
});
