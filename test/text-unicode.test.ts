// The native tokenizer on non-ASCII text, against the JavaScript tokenizers
// (lib/text/tokenize.ts) as the oracle: the Unicode tables it is given are
// checked against this engine's toLowerCase and regex properties over every
// code point, and on random text from every plane (Greek final sigma,
// Turkish dotted I, Cherokee, Georgian, Deseret, emoji, combining marks, lone
// surrogates, invalid UTF-8) no document falls back to JavaScript and every
// document's tokens and token hashes are the JavaScript ones.
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { native } from '../lib/addon.js';
import { NativeTokenizer, encode, installUnicodeTables } from '../lib/text/batch.js';
import { TextFeaturizer } from '../lib/index.js';
import { CODE_KEYWORDS, ENGLISH_STOP_WORDS, qgramTokens, wordTokens } from '../lib/text/tokenize.js';
import { ENTRY, UNICODE_BLOCK, buildUnicodeTables, unicodeTables, type UnicodeTables } from '../lib/text/unicode-tables.js';
import { hashToken } from '../lib/text/vocabulary.js';
import { ensureDist } from './cli-helpers.js';
import { randInt, rng } from './helpers.js';

const FALLBACK = 0xffffffff;
const hasTokenizer = typeof native().TextTokenizer === 'function' && typeof native().setUnicodeTables === 'function';

/** Pieces that exercise casing rules and scripts; random code points are added on top. */
const PIECES = [
  'ΟΔΟΣ',
  'Σ',
  'ΑΣ',
  'ΑΣΑ',
  "Σ'",
  "Α'Σ",
  'Α\u0301Σ',
  'ΑΣ\u0301',
  'ΑΣ.',
  'Σ.Σ',
  'ʰΣ',
  'ΑΣʰ',
  'ΑΣ\u0345',
  'ς σ Σ',
  'İstanbul',
  'IİıI',
  'i\u0307',
  'ǅǄǆ',
  'ẞß',
  'ﬁle',
  '\u212Aelvin',
  '\u212B',
  'ᏣᎳᎩ',
  '\uAB70\uAB71',
  '\u13F8\u13F5', // Cherokee
  'ႠႡ',
  'ა',
  'Ა',
  '\u1C90\u1CBF', // Georgian
  '𐐀𐐨',
  '𐐷',
  '\u{1E900}\u{1E922}', // Deseret, Adlam
  '😀',
  '👩‍👩‍👧',
  '🇫🇷',
  '\u{1F3FB}',
  'e\u0301',
  'a\u0300\u0316',
  'नमस्ते',
  '東京',
  'العربية',
  '\uFEFF',
  '\u00B5',
  'ÀÉÎÕÜ',
  'Ωmega',
  'Ⱥ',
  'ɐ',
  '\uD800',
  '\uDC00x',
  'a\uDBFF',
  '\uFFFD',
  '\u0000',
  '\u0002\u0003',
];
const SEPS = [' ', '  ', '\t', '\n', '.', ',', '-', "'", '_', '\u00A0', '\u3000', '·'];

function randomCodePoint(r: () => number): string {
  // Every plane, assigned or not; surrogates give lone surrogates.
  const c = randInt(r, 4) === 0 ? randInt(r, 0x110000) : randInt(r, 0x3000);
  return String.fromCodePoint(c);
}

function randomDoc(r: () => number): string {
  const n = randInt(r, 24);
  let s = '';
  for (let i = 0; i < n; i++) {
    const k = randInt(r, 6);
    if (k === 0) s += randomCodePoint(r);
    else if (k === 1) s += SEPS[randInt(r, SEPS.length)];
    else if (k === 2) s += ['Web', 'SERVER', 'the', 'a1', 'x'][randInt(r, 5)];
    else s += PIECES[randInt(r, PIECES.length)];
  }
  return s;
}

function corpus(seed: number, docs: number): string[] {
  const r = rng(seed);
  const out = ['', ' ', 'Σ', 'ΣΣ', 'İ', '😀', '\uD800', 'x'.repeat(300) + 'Σ', 'Ü'.repeat(2000), ...PIECES];
  for (let i = 0; i < docs; i++) out.push(randomDoc(r));
  return out;
}

/** Per document: token → count, from a native batch. */
function nativeBags(
  b: { terms: string[]; indptr: Uint32Array; ids: Uint32Array; counts: Uint32Array },
  docs: number,
): Map<string, number>[] {
  const out: Map<string, number>[] = [];
  for (let d = 0; d < docs; d++) {
    const m = new Map<string, number>();
    for (let k = b.indptr[d]; k < b.indptr[d + 1]; k++) m.set(b.terms[b.ids[k]], b.counts[k]);
    out.push(m);
  }
  return out;
}

function bag<T>(xs: readonly T[]): Map<T, number> {
  const m = new Map<T, number>();
  for (const x of xs) m.set(x, (m.get(x) ?? 0) + 1);
  return m;
}

interface Mode {
  name: string;
  options: { mode: 'words' | 'qgrams'; minLength?: number; stopWords?: string[]; q?: number; lowercase?: boolean; pad?: boolean };
  js: (t: string) => string[];
}

const STOP = new Set([...ENGLISH_STOP_WORDS, 'οδος', 'i̇stanbul', 'σ']);
const MODES: Mode[] = [
  { name: 'words', options: { mode: 'words' }, js: (t) => wordTokens(t) },
  {
    name: 'words, stop words, minLength 2',
    options: { mode: 'words', stopWords: [...STOP], minLength: 2 },
    js: (t) => wordTokens(t, STOP, 2),
  },
  { name: 'qgrams q=1', options: { mode: 'qgrams', q: 1 }, js: (t) => qgramTokens(t, 1) },
  { name: 'qgrams q=3', options: { mode: 'qgrams', q: 3 }, js: (t) => qgramTokens(t, 3) },
  { name: 'qgrams q=3 pad', options: { mode: 'qgrams', q: 3, pad: true }, js: (t) => qgramTokens(t, 3, true, true) },
  { name: 'qgrams q=4 no lowercase', options: { mode: 'qgrams', q: 4, lowercase: false }, js: (t) => qgramTokens(t, 4, false) },
  {
    name: 'qgrams q=2 pad no lowercase',
    options: { mode: 'qgrams', q: 2, lowercase: false, pad: true },
    js: (t) => qgramTokens(t, 2, false, true),
  },
];

function makeTokenizer(m: Mode): NativeTokenizer {
  return new NativeTokenizer({
    mode: m.options.mode,
    minLength: m.options.minLength ?? 1,
    dropKeywords: true,
    keywords: [...CODE_KEYWORDS],
    stopWords: m.options.stopWords ?? [],
    q: m.options.q ?? 3,
    lowercase: m.options.lowercase ?? true,
    pad: m.options.pad ?? false,
  });
}

describe.skipIf(!hasTokenizer)('native tokenizer, non-ASCII text', () => {
  it('the Unicode tables agree with toLowerCase and the regex properties at every code point', () => {
    const t = unicodeTables();
    const entry = (c: number): number => t.blocks[t.stage1[c >> 8] * UNICODE_BLOCK + (c & 0xff)];
    const word = /^[\p{L}\p{N}\p{M}]$/u;
    let checked = 0;
    for (let c = 0; c < 0x110000; c++) {
      const e = entry(c);
      const s = String.fromCodePoint(c);
      // The lowercase of c on its own, decoded from the entry.
      let lower: string;
      if (e & ENTRY.MULTI) {
        const i = e & 0x1fffff;
        lower = String.fromCodePoint(...t.extra.subarray(i + 1, i + 1 + t.extra[i]));
      } else lower = String.fromCodePoint((c + (e & 0x1fffff)) & 0x1fffff);
      if (lower !== s.toLowerCase())
        throw new Error(`U+${c.toString(16)}: table lowers to ${escape(lower)}, JS to ${escape(s.toLowerCase())}`);
      if (Boolean(e & ENTRY.WORD) !== word.test(s)) throw new Error(`U+${c.toString(16)}: word class differs`);
      // Final_Sigma as JS runs it, probed from both sides: whether c counts
      // as a cased letter, is skipped (case-ignorable), or stops the search.
      const before = ('A' + s + 'Σ').toLowerCase().endsWith('ς');
      const alone = (s + 'Σ').toLowerCase().endsWith('ς');
      const after = ('AΣ' + s).toLowerCase().startsWith('aς');
      const ign = Boolean(e & ENTRY.IGNORABLE);
      const cased = !ign && Boolean(e & ENTRY.CASED);
      if (c !== 0x3a3 && (before !== (ign || cased) || alone !== cased || after !== !cased))
        throw new Error(`U+${c.toString(16)}: Final_Sigma context differs (ignorable ${ign}, cased ${cased})`);
      checked++;
    }
    expect(checked).toBe(0x110000);
  }, 600_000);

  for (const m of MODES) {
    it(`${m.name}: no document falls back, tokens and hashes equal JavaScript's`, async () => {
      const texts = corpus(28 + m.name.length, 400);
      const tok = makeTokenizer(m);
      const { bytes, offsets } = encode(texts, true);
      const raw = tok.handle.tokenize(bytes, offsets, 0);
      expect(raw.tokens.indexOf(FALLBACK)).toBe(-1);
      const bags = nativeBags(raw, texts.length);
      const rows = await tok.handle.hashedRowsAsync(bytes, offsets, 0, 32);
      for (let d = 0; d < texts.length; d++) {
        const js = m.js(texts[d]);
        const where = `${m.name}, document ${d}: ${escape(texts[d])}`;
        expect(raw.tokens[d], where).toBe(js.length);
        expect(bags[d], where).toEqual(bag(js));
        const hashes = bag(js.map(hashToken));
        const cols = [...hashes.keys()].sort((a, b) => a - b);
        expect(Array.from(rows.cols.subarray(rows.rowPtr[d], rows.rowPtr[d + 1])), where).toEqual(cols);
        expect(Array.from(rows.values.subarray(rows.rowPtr[d], rows.rowPtr[d + 1])), where).toEqual(cols.map((c) => hashes.get(c)));
      }
    }, 120_000);
  }

  it('invalid UTF-8 decodes as TextDecoder does (each maximal invalid subpart one U+FFFD)', async () => {
    const r = rng(2828);
    const decoder = new TextDecoder('utf-8');
    const chunks: Uint8Array[] = [];
    const interesting = [
      0x80, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1, 0xec, 0xed, 0xee, 0xef, 0xf0, 0xf4, 0xf5, 0xff, 0x9f, 0xa0, 0x8f, 0x90, 0x41, 0x20,
      0xce, 0xa3,
    ];
    for (let i = 0; i < 3000; i++) {
      const n = randInt(r, 12);
      const c = new Uint8Array(n);
      for (let k = 0; k < n; k++) c[k] = randInt(r, 3) === 0 ? randInt(r, 256) : interesting[randInt(r, interesting.length)];
      // ED A0-BF is a lone surrogate in the strings path (WTF-8); the
      // reader's path decodes it as TextDecoder does, checked below.
      for (let k = 0; k + 1 < n; k++) if (c[k] === 0xed && c[k + 1] >= 0xa0) c[k + 1] = 0x80;
      chunks.push(c);
    }
    const offsets = new Uint32Array(chunks.length + 1);
    chunks.forEach((c, i) => (offsets[i + 1] = offsets[i] + c.length));
    const bytes = new Uint8Array(offsets[chunks.length]);
    chunks.forEach((c, i) => bytes.set(c, offsets[i]));
    installUnicodeTables(); // these bytes never pass through encode()
    for (const m of [MODES[0], MODES[3], MODES[5]]) {
      const tok = makeTokenizer(m);
      const raw = tok.handle.tokenize(bytes, offsets, 0);
      const rows = await tok.handle.hashedRowsAsync(bytes, offsets, 0, 32);
      const bags = nativeBags(raw, chunks.length);
      for (let d = 0; d < chunks.length; d++) {
        const js = m.js(decoder.decode(chunks[d]));
        const where = `${m.name}, bytes ${Buffer.from(chunks[d]).toString('hex')}`;
        expect(raw.tokens[d], where).toBe(js.length);
        expect(bags[d], where).toEqual(bag(js));
        const hashes = bag(js.map(hashToken));
        expect(Array.from(rows.cols.subarray(rows.rowPtr[d], rows.rowPtr[d + 1])), where).toEqual([...hashes.keys()].sort((a, b) => a - b));
      }
    }
  }, 120_000);
});

describe.skipIf(!hasTokenizer || typeof native().recordReader !== 'string')('native record reader, non-ASCII text', () => {
  it('JSONL records with non-ASCII text are tokenized natively, to the JavaScript token hashes', async () => {
    // Lone surrogates are left out: JSON.stringify escapes them, and the
    // reader hands such lines to JavaScript by design (simdjson rejects them).
    const texts = corpus(7, 300).filter((t) => (t as unknown as { isWellFormed(): boolean }).isWellFormed());
    for (const mode of ['words', 'qgrams'] as const) {
      const feat = new TextFeaturizer({ mode, q: 3, native: true });
      const reader = feat.nativeHandle!;
      const block = Buffer.from(texts.map((t, i) => JSON.stringify({ id: i, text: t })).join('\n') + '\n');
      const r = await reader.recordsAsync!(block, {
        jsonl: true,
        field: 'text',
        idField: 'id',
        maxRecordBytes: 1 << 30,
        minTokens: 0,
        bits: 32,
      });
      // Every line read natively: no entry left to JavaScript (and so no per-entry kinds).
      expect(r.jsTextEnds.length + r.jsLineStart.length, mode).toBe(0);
      expect(r.entries).toBe(texts.length);
      for (let d = 0; d < texts.length; d++) {
        const js = feat.tokenize(texts[d]);
        const hashes = bag(js.map(hashToken));
        const cols = [...hashes.keys()].sort((a, b) => a - b);
        const where = `${mode}, document ${d}: ${escape(texts[d])}`;
        expect(r.tokens[d], where).toBe(js.length);
        expect(Array.from(r.cols.subarray(r.rowPtr[d], r.rowPtr[d + 1])), where).toEqual(cols);
      }
    }
  }, 120_000);
});

function escape(s: string): string {
  return JSON.stringify(s).replace(/[^\x20-\x7e]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

describe('the Unicode tables built on a worker thread (prefetchUnicodeTables)', () => {
  it('equal the tables this thread builds, array for array', async () => {
    ensureDist();
    // The worker as prefetchUnicodeTables starts it (dist/, as the CLI runs it).
    const w = new Worker(new URL('../dist/text/unicode-worker.js', import.meta.url));
    const got = await new Promise<UnicodeTables>((resolve, reject) => {
      w.once('message', resolve);
      w.once('error', reject);
    });
    await w.terminate();
    const want = buildUnicodeTables();
    expect(got.stage1).toEqual(want.stage1);
    expect(got.blocks).toEqual(want.blocks);
    expect(got.extra).toEqual(want.extra);
    expect(got.blocks.length).toBeGreaterThan(100 * UNICODE_BLOCK);
  }, 60_000);
});
