// The native CSV/TSV reader (native/records_table.cc with libcsv,
// lib/cli/record-blocks.ts) against its definition, the csv-parse reader
// (lib/cli/records.ts readRecords) and the JavaScript featurizer: the same
// documents (ids, line numbers, token rows), counts and first error on
// random and hostile CSV and TSV, in one block and in many small ones.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { beforeAll, describe, expect, it } from 'vitest';
import { cusim, ensureDist, fromDist } from './cli-helpers.js';
import { pick, randInt, rng } from './helpers.js';

type Dist = {
  blocks: typeof import('../lib/cli/record-blocks.js');
  records: typeof import('../lib/cli/records.js');
  text: typeof import('../lib/text/index.js');
};
let d: Dist;

beforeAll(async () => {
  ensureDist();
  const load = fromDist;
  d = { blocks: await load('cli/record-blocks.js'), records: await load('cli/records.js'), text: await load('text/index.js') };
});

type R = () => number;
const WORDS = ['alpha', 'Beta', 'GAMMA', 'delta', 'x', 'parse_json', 'camelCase', 'node42', 'the', 'for', 'Überall', '東京', 'naïve', '😀'];

function chunked(buf: Buffer, seed: number): Readable {
  const r = rng(seed);
  const parts: Buffer[] = [];
  for (let at = 0; at < buf.length;) {
    const n = 1 + randInt(r, 3000);
    parts.push(buf.subarray(at, at + n));
    at += n;
  }
  return Readable.from(parts);
}

interface Table {
  tsv: boolean;
  delimiter: string;
  header: boolean;
  columns?: string[];
  field: string;
  idField: string;
}

/** A random field: words, with (CSV) quoted delimiters, quotes and line breaks of every kind. */
function field(r: R, t: Table): string {
  const words = Array.from({ length: randInt(r, 12) }, () => pick(r, WORDS)).join(pick(r, [' ', '  ', '.']));
  if (t.tsv) return words.replace(/[\t\r\n]/g, ' ') + (randInt(r, 6) === 0 ? ' "quoted" here' : '');
  const extra = pick(r, ['', '', t.delimiter, '""', '\n', '\r\n', '\r', ` ${t.delimiter} "x" `]);
  const body = words + extra + (randInt(r, 2) ? pick(r, WORDS) : '');
  const needs = /["\r\n]/.test(body) || body.includes(t.delimiter);
  if (needs || randInt(r, 4) === 0) return `"${body.replace(/"/g, '""')}"`;
  return body;
}

/** A random table (header per t, rows with missing and extra columns, empty lines, mixed line ends). */
function table(r: R, t: Table, rows: number): string {
  const eol = () => pick(r, ['\n', '\n', '\r\n', '\r']);
  const names = ['id', 'text', 'other'];
  let out = randInt(r, 4) === 0 ? '\uFEFF' : '';
  if (t.header) out += names.join(t.delimiter) + eol();
  for (let i = 0; i < rows; i++) {
    if (randInt(r, 10) === 0) out += eol();
    const n = pick(r, [3, 3, 3, 1, 2, 4]);
    const fields = Array.from({ length: n }, (_, c) => (c === 0 && randInt(r, 3) ? `d${randInt(r, 50)}` : field(r, t)));
    out += fields.join(t.delimiter) + (i === rows - 1 && randInt(r, 2) ? '' : eol());
  }
  return out;
}

interface Read {
  ids: string[];
  lines: number[];
  tokens: number[];
  indptr: number[];
  indices: number[];
  documents: number;
  tooSmall: number;
}

type Opts = Table & { blockBytes?: number; maxRecordBytes?: number; mode?: 'words' | 'qgrams' | 'code' };

function recordOptions(o: Opts) {
  return {
    format: o.tsv ? ('tsv' as const) : ('csv' as const),
    field: o.field,
    idField: o.idField,
    delimiter: o.delimiter,
    header: o.header,
    columns: o.columns,
    source: 'in.csv',
    maxRecordBytes: o.maxRecordBytes ?? 1 << 20,
  };
}

/** The native reader's documents. */
async function native(input: Buffer, o: Opts): Promise<Read & { reader: string }> {
  const out = { reader: '', ids: [] as string[], lines: [] as number[], tokens: [] as number[], indptr: [0], indices: [] as number[] };
  const counts = { documents: 0, tooSmall: 0 };
  await d.blocks.readRecordBlocks(chunked(input, 5), {
    records: recordOptions(o),
    features: { mode: o.mode ?? 'words' },
    minTokens: 1,
    bits: 32,
    threads: 2,
    blockBytes: o.blockBytes,
    onReader: (s) => (out.reader = s),
    onBlock: (b) => {
      for (let i = 0; i < b.ids.length; i++) out.ids.push(b.ids.get(i));
      out.lines.push(...b.lines);
      out.tokens.push(...b.rows.tokens);
      const base = out.indices.length;
      for (let i = 1; i < b.rows.indptr.length; i++) out.indptr.push(base + b.rows.indptr[i]);
      out.indices.push(...b.rows.indices);
      counts.documents += b.documents;
      counts.tooSmall += b.tooSmall;
    },
  });
  return { ...out, ...counts };
}

/** The oracle: csv-parse's documents (readRecords), featurized by TextFeaturizer.hashedRows. */
async function oracle(input: Buffer, o: Opts): Promise<Read> {
  const docs: { id: string; text: string; line?: number }[] = [];
  for await (const doc of d.records.readRecords(chunked(input, 7), recordOptions(o))) docs.push(doc);
  const feat = new d.text.TextFeaturizer({ mode: o.mode ?? 'words' });
  const rows = await feat.hashedRows(
    docs.map((x) => x.text),
    { minTokens: 1, bits: 32 },
  );
  const kept = docs.filter((_, i) => rows.tokens[i] >= 1);
  return {
    ids: kept.map((x) => x.id),
    lines: kept.map((x) => x.line!),
    tokens: [...rows.tokens],
    indptr: [...rows.indptr],
    indices: [...rows.indices],
    documents: docs.length,
    tooSmall: docs.length - kept.length,
  };
}

const errorOf = (e: unknown) => ({
  message: (e as Error).message,
  fix: (e as { fix?: string }).fix,
  exitCode: (e as { exitCode?: number }).exitCode,
});

/** Both readers on `input`: equal documents, or equal errors. */
async function same(input: Buffer, o: Opts): Promise<Read | Error> {
  const js = await oracle(input, o).catch((e: Error) => e);
  const nat = await native(input, o).catch((e: Error) => e);
  if (js instanceof Error) {
    expect(nat).toBeInstanceOf(Error);
    expect(errorOf(nat)).toEqual(errorOf(js));
    return js;
  }
  if (nat instanceof Error) throw nat;
  expect(nat.reader).toMatch(/^native \(libcsv /);
  expect({ ...nat, reader: undefined }).toEqual({ ...js, reader: undefined });
  return js;
}

const CSV: Table = { tsv: false, delimiter: ',', header: true, field: 'text', idField: 'id' };
const TSV: Table = { tsv: true, delimiter: '\t', header: true, field: 'text', idField: 'id' };

describe('the native CSV/TSV reader', () => {
  it('reads clean CSV records natively (none left to csv-parse) and leaves malformed ones to it', async () => {
    const feat = new d.text.TextFeaturizer({ mode: 'words' });
    const handle = feat.nativeHandle!;
    const opts = {
      jsonl: false,
      field: 'text',
      idField: 'id',
      maxRecordBytes: 1 << 20,
      minTokens: 1,
      bits: 32,
      table: { delimiter: ',', quoted: true, textColumn: 1, idColumn: 0 },
    };
    const clean = Buffer.from('a,"one, two\r\nthree"\n\nb,four five\r\n"c""",six\rd,seven\ne\n');
    const r = await handle.recordsAsync!(clean, opts);
    expect(r.jsLineStart.length).toBe(0);
    // e: no text column, so '' (no tokens, not kept).
    expect(r.entries).toBe(5);
    // csv-parse's info.lines: a \r\n inside quotes counts twice; the empty line once.
    expect([...r.keptLine]).toEqual([3, 5, 6, 7]);
    expect([...r.keptIdKind]).toEqual([1, 1, 1, 1]);
    expect(Buffer.from(r.idBytes).toString()).toBe('abc"de');
    const bad = await handle.recordsAsync!(Buffer.from('a,x y\nb,p"q\nc,z\n'), opts);
    expect([...bad.jsLineStart]).toEqual([6]);
    // An odd quote: parity runs on to the block's end, all of it csv-parse's to reject.
    expect([...bad.jsLineEnd]).toEqual([16]);
    expect(bad.keptIdKind!.length).toBe(1);
  });

  it('equals csv-parse on random CSV: quoted delimiters, quotes and line breaks, empty lines, BOM, missing and extra columns', async () => {
    const r = rng(1);
    for (let k = 0; k < 24; k++) {
      const t: Table = { ...CSV, delimiter: pick(r, [',', ',', ';', '|']) };
      if (k % 6 === 1) t.idField = 'none';
      if (k % 6 === 2) Object.assign(t, { header: false, columns: ['id', 'text', 'other'] });
      if (k % 6 === 3) Object.assign(t, { header: false, field: '2', idField: '1' });
      if (k % 6 === 4) Object.assign(t, { header: false, field: '2' });
      const input = Buffer.from(table(r, t, 50 + randInt(r, 400)));
      const blockBytes = pick(r, [64, 500, 1 << 12, 1 << 24]);
      const o = { ...t, blockBytes, mode: pick(r, ['words', 'qgrams', 'code'] as const) };
      const js = await same(input, o);
      expect(js).not.toBeInstanceOf(Error);
      expect((js as Read).documents).toBeGreaterThan(40);
    }
  });

  it('equals csv-parse on random TSV (no quoting: quotes are text)', async () => {
    const r = rng(2);
    for (let k = 0; k < 12; k++) {
      const t: Table = k % 3 === 1 ? { ...TSV, header: false, field: '2', idField: '1' } : TSV;
      const input = Buffer.from(table(r, t, 50 + randInt(r, 400)));
      const js = await same(input, { ...t, blockBytes: pick(r, [64, 1 << 12, 1 << 24]) });
      expect(js).not.toBeInstanceOf(Error);
    }
  });

  it('cuts blocks only outside quotes: a quoted line break straddling every block boundary', async () => {
    const rows = Array.from({ length: 200 }, (_, i) => `d${i},"first line ${i}\nsecond, line\r\nthird ""line"" ${i}"`);
    const input = Buffer.from(`id,text\n${rows.join('\n')}\n`);
    for (const blockBytes of [16, 37, 64, 100, 333]) {
      const js = (await same(input, { ...CSV, blockBytes })) as Read;
      // csv-parse counts a \r\n inside quotes as two lines.
      expect(js.lines[0]).toBe(5);
      expect(js.lines[1]).toBe(9);
    }
  });

  it('reports the first error with csv-parse words and line, as the JavaScript reader does', async () => {
    const r = rng(3);
    const BAD = ['d1,a"b', 'd1,"a"b', 'd1,"a" ,c', 'd1, "a"', 'd1,"unclosed', `d1,${'w '.repeat(3000)}`, `d1,"${'w '.repeat(3000)}"`];
    for (const bad of BAD) {
      const t = { ...CSV };
      const lines = table(r, t, 300)
        .replace(/^\uFEFF/, '')
        .split(/\r\n|\n|\r/)
        .map((l) => l.replace(/"/g, ''));
      const at = 10 + randInt(r, 250);
      lines[at] = bad;
      for (const blockBytes of [200, 1 << 12, 1 << 24]) {
        const e = await same(Buffer.from(lines.join('\n')), { ...t, blockBytes, maxRecordBytes: 4000 });
        expect(e).toBeInstanceOf(Error);
      }
    }
  });

  it('equals csv-parse, records or first error, on CSV with quotes added and removed at random', async () => {
    const r = rng(4);
    let errors = 0;
    for (let k = 0; k < 40; k++) {
      const t = { ...CSV, delimiter: pick(r, [',', ';']) };
      let s = table(r, t, 30 + randInt(r, 200));
      for (let m = 1 + randInt(r, 3); m > 0; m--) {
        const at = randInt(r, s.length);
        const q = s.indexOf('"', at);
        s = randInt(r, 2) && q >= 0 ? s.slice(0, q) + s.slice(q + 1) : s.slice(0, at) + '"' + s.slice(at);
      }
      const e = await same(Buffer.from(s), { ...t, blockBytes: pick(r, [100, 1 << 12, 1 << 24]), maxRecordBytes: 3000 });
      if (e instanceof Error) errors++;
    }
    expect(errors).toBeGreaterThan(10);
  });

  it('names a header without the text column as csv-parse does, and reads invalid UTF-8 as csv-parse does', async () => {
    const e = await same(Buffer.from('id,body\n1,a b c\n'), CSV);
    expect((e as Error).message).toMatch(/the header has no column 'text'/);
    const bad = Buffer.concat([
      Buffer.from('id,text\n1,caf'),
      Buffer.from([0xe9, 0x20]),
      Buffer.from('x y\n2,"q \xff"\n3,plain words\n', 'latin1'),
    ]);
    const js = (await same(bad, CSV)) as Read;
    expect(js.documents).toBe(3);
  });

  it('cusim dedup gives the same report natively and with --reader js', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cusim-csv-'));
    const r = rng(12);
    const rows: string[] = ['id,text'];
    let prev = '';
    for (let i = 0; i < 2000; i++) {
      const text = i % 40 === 39 ? prev.replace(/^\S+/, 'changed') : Array.from({ length: 25 }, () => `w${randInt(r, 4000)}`).join(' ');
      rows.push(`${i % 3 ? i : ''},"${i % 7 ? text : text.replace(' ', '\n')}"`);
      prev = text;
    }
    for (const [name, body] of [
      ['docs.csv', rows.join('\r\n')],
      ['docs.tsv', rows.map((l) => l.replace(',', '\t').replace(/"/g, '').replace(/\n/g, ' ')).join('\n')],
    ]) {
      const file = path.join(dir, name);
      writeFileSync(file, body);
      const run = async (reader: string) => {
        const out = await cusim(
          ['dedup', file, '--field', 'text', '--json', '--threads', '2', '-t', '0.8', '--verbose', '--reader', reader],
          {
            maxBuffer: 1 << 26,
          },
        );
        expect(out.status, out.stderr).toBe(0);
        const j = JSON.parse(out.stdout) as { groups: unknown[]; input: unknown };
        return { groups: j.groups, input: j.input, stderr: out.stderr };
      };
      const nat = await run('native');
      expect(nat.stderr).toMatch(/records read by the native \(libcsv [^,)]+(, tokens hashed on [^)]+)?\) reader/);
      expect(nat.groups.length).toBeGreaterThan(10);
      const js = await run('js');
      expect({ groups: nat.groups, input: nat.input }).toEqual({ groups: js.groups, input: js.input });
    }
    // A header without the text column and bad quoting in the first 64 KiB stream chunk, which csv-parse
    // parses before the header reaches tableRecords: csv-parse's error, as there. (Past that chunk, which
    // of the two the csv-parse reader reports depends on how far its stream ran ahead: either is right.)
    const near = path.join(dir, 'near.csv');
    writeFileSync(near, rows.map((l, i) => (i === 0 ? 'id,body' : i === 50 ? 'x,a"b' : l)).join('\n'));
    const stderr = await Promise.all(
      ['native', 'js'].map(async (reader) => {
        const out = await cusim(['dedup', near, '--field', 'text', '--json', '--reader', reader]);
        expect(out.status).toBe(1);
        return out.stderr;
      }),
    );
    expect(stderr[0]).toMatch(/Invalid Opening Quote: a quote is found on field 1 at line \d+, value is "a"/);
    expect(stderr[0]).toBe(stderr[1]);
    // A quote opened inside a field is a CSV error like any other csv-parse error (its code lacks the CSV_
    // prefix, and it was worded as an unreadable path): one coded line naming the line, with the CSV fix.
    const quoted = path.join(dir, 'quoted.csv');
    writeFileSync(quoted, 'id,text\n1,hello world foo bar\n2,x"y" some text here\n');
    for (const reader of ['native', 'js']) {
      const out = await cusim(['dedup', quoted, '--field', 'text', '--reader', reader]);
      expect(out.status).toBe(1);
      expect(out.stderr).toMatch(
        /^cusim: .*quoted\.csv: Invalid Opening Quote: a quote is found on field 1 at line 3, value is "x" \(check the CSV or pass --format lines\)$/m,
      );
      expect(out.stderr).not.toMatch(/check the path/);
    }
    // A UTF-16 file (csv-parse decodes it after its byte-order mark) is left to csv-parse.
    const wide = path.join(dir, 'wide.csv');
    writeFileSync(wide, Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(rows.slice(0, 200).join('\n'), 'utf16le')]));
    const out = await cusim(['dedup', wide, '--field', 'text', '--json', '-t', '0.8', '--verbose'], { maxBuffer: 1 << 26 });
    expect(out.status, out.stderr).toBe(0);
    expect(out.stderr).not.toMatch(/native \(libcsv/);
    expect((JSON.parse(out.stdout) as { input: { documents: number } }).input.documents).toBe(199);
  });
});
