// Token hashes per document (native/text_hash.h), the input of classic
// MinHash: the CPU backend against the JavaScript tokenizers and hashToken()
// as the oracle, and the CUDA backend against the CPU backend, bit for bit,
// in all three modes, on ASCII and non-ASCII text, random and edge cases
// (empty documents, only separators, very long tokens, documents spread
// over several page-locked chunks).
import { describe, expect, it } from 'vitest';
import { native } from '../lib/addon.js';
import { encode, installUnicodeTables } from '../lib/text/batch.js';
import { CODE_KEYWORDS, ENGLISH_STOP_WORDS, codeTokens, qgramTokens, wordTokens } from '../lib/text/tokenize.js';
import { hashToken } from '../lib/text/vocabulary.js';
import type { TextTokenizerOptions } from '../lib/native-types.js';
import { hasGpu, randInt, rng } from './helpers.js';

const Hasher = native().TokenHasher;
const SCRIPTS = ['ΟΔΟΣ', 'ΑΣ.Σ', 'İstanbul', 'ᏣᎳᎩ', 'Ⴀა', '𐐀𐐨', '😀👩‍👧', 'e\u0301', 'नमस्ते', '東京', 'ẞ', '\uD800', '\uFFFD'];
const ASCII = ['getHTTPServer2Base', 'snake_case_v2', '0x1fBar', 'class', 'The', 'and', 'x', 'I', '$el', '__init__', 'WebServer'];
const SEPS = [' ', '\t', '\n', '.', ',', '(', ')', '-', "'", '\u00A0'];

function randomDoc(r: () => number, unicode: boolean): string {
  let s = '';
  const n = randInt(r, 30);
  for (let i = 0; i < n; i++) {
    const k = randInt(r, 5);
    if (k === 0) s += SEPS[randInt(r, SEPS.length)];
    else if (k === 1 && unicode) s += randInt(r, 3) ? SCRIPTS[randInt(r, SCRIPTS.length)] : String.fromCodePoint(randInt(r, 0x110000));
    else s += ASCII[randInt(r, ASCII.length)] + SEPS[randInt(r, SEPS.length)];
  }
  return s;
}

function corpus(seed: number, unicode: boolean): string[] {
  const r = rng(seed);
  const docs = ['', ' ', '...', '\t\n', 'a', 'Σ', 'x'.repeat(70_000), 'Ab'.repeat(40_000) + ' end', 'ΣΑ'.repeat(30_000)];
  for (let i = 0; i < 1500; i++) docs.push(randomDoc(r, unicode));
  return unicode ? docs : docs.filter((d) => !/[^\x00-\x7f]/.test(d)); // eslint-disable-line no-control-regex
}

interface Case {
  name: string;
  options: TextTokenizerOptions;
  js: (t: string) => string[];
}

const STOP = new Set([...ENGLISH_STOP_WORDS, 'οδος']);
const base = {
  minLength: 1,
  dropKeywords: true,
  keywords: [...CODE_KEYWORDS],
  stopWords: [] as string[],
  q: 3,
  lowercase: true,
  pad: false,
};
const CASES: Case[] = [
  { name: 'code', options: { ...base, mode: 'code', minLength: 2 }, js: (t) => codeTokens(t) },
  {
    name: 'code, keywords kept',
    options: { ...base, mode: 'code', dropKeywords: false, minLength: 1 },
    js: (t) => codeTokens(t, { dropKeywords: false, minLength: 1 }),
  },
  { name: 'words', options: { ...base, mode: 'words' }, js: (t) => wordTokens(t) },
  { name: 'words, lowercase: false (words ignore it)', options: { ...base, mode: 'words', lowercase: false }, js: (t) => wordTokens(t) },
  {
    name: 'words, stop words, minLength 2',
    options: { ...base, mode: 'words', stopWords: [...STOP], minLength: 2 },
    js: (t) => wordTokens(t, STOP, 2),
  },
  { name: 'qgrams q=3', options: { ...base, mode: 'qgrams' }, js: (t) => qgramTokens(t, 3) },
  { name: 'qgrams q=5 pad', options: { ...base, mode: 'qgrams', q: 5, pad: true }, js: (t) => qgramTokens(t, 5, true, true) },
  {
    name: 'qgrams q=2 pad, no lowercase',
    options: { ...base, mode: 'qgrams', q: 2, pad: true, lowercase: false },
    js: (t) => qgramTokens(t, 2, false, true),
  },
];

/** Each document's hashes, sorted (the backends' order is their own). */
function sortedRows(r: { indptr: BigUint64Array; hashes: Uint32Array }): number[][] {
  const out: number[][] = [];
  for (let d = 0; d + 1 < r.indptr.length; d++)
    out.push(Array.from(r.hashes.subarray(Number(r.indptr[d]), Number(r.indptr[d + 1]))).sort((a, b) => a - b));
  return out;
}

describe.skipIf(typeof Hasher !== 'function')('token hashes per document', () => {
  // The GPU hasher needs them for 'words' and 'qgrams' even on ASCII text.
  installUnicodeTables();
  for (const c of CASES) {
    for (const unicode of [false, true]) {
      const texts = corpus(c.name.length + (unicode ? 100 : 0), unicode);
      const label = `${c.name}, ${unicode ? 'non-ASCII' : 'ASCII'}`;

      it(`CPU: ${label}: hashToken() of the JavaScript tokens`, async () => {
        const { bytes, offsets } = encode(texts, true);
        const hasher = new Hasher!(c.options);
        const cpu = sortedRows(await hasher.hashAsync(bytes, offsets));
        // { sorted: true }: the same hashes, ascending per document as they come.
        expect(Array.from((await hasher.hashAsync(bytes, offsets, { sorted: true })).hashes)).toEqual(cpu.flat());
        texts.forEach((t, d) =>
          expect(cpu[d], `${label}, document ${d}`).toEqual(
            c
              .js(t)
              .map(hashToken)
              .sort((a, b) => a - b),
          ),
        );
      }, 120_000);

      it.skipIf(!hasGpu)(
        `CUDA = CPU, bit for bit: ${label}${hasGpu ? '' : ' (skipped: no usable GPU on this host)'}`,
        async () => {
          const { bytes, offsets } = encode(texts, true);
          const cpu = await new Hasher!(c.options).hashAsync(bytes, offsets);
          // 64 KiB chunks: the long documents are chunks of their own, the rest spread over many.
          const gpu = new Hasher!(c.options, { device: 0, chunkBytes: 1 << 16 });
          const got = await gpu.hashAsync(bytes, offsets);
          expect(Array.from(got.indptr)).toEqual(Array.from(cpu.indptr));
          expect(sortedRows(got)).toEqual(sortedRows(cpu));
          // Sorted on the device: each document's hashes come back ascending, as they are.
          const sorted = await gpu.hashAsync(bytes, offsets, { sorted: true });
          expect(Array.from(sorted.indptr)).toEqual(Array.from(cpu.indptr));
          expect(Array.from(sorted.hashes)).toEqual(sortedRows(cpu).flat());
          gpu.dispose();
        },
        120_000,
      );
    }
  }
});
