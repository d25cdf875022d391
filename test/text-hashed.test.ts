// TextFeaturizer.hashedRows: rows over hashed token columns with no
// vocabulary, held to a brute-force oracle (tokenize, hashToken, count) and to
// a featurizer with hashBits, on both tokenizers and with documents the
// native tokenizer leaves to JavaScript (non-ASCII words and q-grams).
import { describe, expect, it } from 'vitest';
import { TextFeaturizer, hashToken } from '../lib/index.js';
import type { TextMode } from '../lib/index.js';
import { rng, randInt } from './helpers.js';

function corpus(seed: number, n: number): string[] {
  const r = rng(seed);
  const words = [
    'alpha',
    'beta',
    'gamma',
    'delta',
    'epsilon',
    'zeta',
    'eta',
    'theta',
    'café',
    'naïve',
    'δέλτα',
    'x',
    'yy',
    'const',
    'return',
  ];
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const len = randInt(r, 30);
    const parts: string[] = [];
    for (let k = 0; k < len; k++) parts.push(words[randInt(r, words.length)] + (randInt(r, 4) === 0 ? String(randInt(r, 50)) : ''));
    out.push(i % 17 === 5 ? '' : parts.join(randInt(r, 2) ? ' ' : '_'));
  }
  return out;
}

/** The oracle: every kept document's distinct (hashToken(t) & mask) with its count, ascending. */
function bruteForce(f: TextFeaturizer, texts: string[], minTokens: number, bits: number) {
  const mask = bits === 32 ? 0xffffffff : 2 ** bits - 1;
  const tokens: number[] = [];
  const rows: [number, number][][] = [];
  for (const t of texts) {
    const toks = f.tokenize(t);
    tokens.push(toks.length);
    if (toks.length < minTokens) continue;
    const m = new Map<number, number>();
    for (const k of toks) m.set((hashToken(k) & mask) >>> 0, (m.get((hashToken(k) & mask) >>> 0) ?? 0) + 1);
    rows.push([...m].sort((a, b) => a[0] - b[0]));
  }
  return { tokens, rows };
}

function rowsOf(r: { indptr: Uint32Array; indices: Uint32Array; values: Float32Array }): [number, number][][] {
  const out: [number, number][][] = [];
  for (let i = 0; i + 1 < r.indptr.length; i++) {
    const row: [number, number][] = [];
    for (let k = r.indptr[i]; k < r.indptr[i + 1]; k++) row.push([r.indices[k], r.values[k]]);
    out.push(row);
  }
  return out;
}

describe('TextFeaturizer.hashedRows', () => {
  const modes: TextMode[] = ['words', 'code', 'qgrams'];
  for (const mode of modes) {
    for (const native of [true, false]) {
      it(`${mode}, ${native ? 'native' : 'JavaScript'} tokenizer: equals tokenize + hashToken + count, at 32 and 20 bits`, async () => {
        const f = new TextFeaturizer({ mode, native });
        const texts = corpus(mode.length * 7 + (native ? 1 : 0), 400);
        for (const [bits, minTokens] of [
          [32, 0],
          [20, 3],
        ] as const) {
          const got = await f.hashedRows(texts, { bits, minTokens });
          const want = bruteForce(f, texts, minTokens, bits);
          expect(Array.from(got.tokens)).toEqual(want.tokens);
          expect(rowsOf(got)).toEqual(want.rows);
        }
      });
    }
  }

  it('at bits <= 31 the rows equal a featurizer with hashBits (count weighting)', async () => {
    const texts = corpus(3, 300);
    const g = new TextFeaturizer({ mode: 'words', hashBits: 18 });
    g.addBatch(texts, 2);
    const m = g.build();
    const got = await new TextFeaturizer({ mode: 'words' }).hashedRows(texts, { bits: 18, minTokens: 2 });
    expect(got.indptr).toEqual(m.indptr);
    expect(got.indices).toEqual(m.indices);
    expect(got.values).toEqual(m.values);
  });

  it('rejects bad options with coded errors and an empty batch gives no rows', async () => {
    const f = new TextFeaturizer({ mode: 'words' });
    expect(() => f.hashedRows(['a'], { bits: 33 })).toThrow(expect.objectContaining({ code: 'CUSIM_INVALID_ARGUMENT' }));
    expect(() => f.hashedRows([1 as unknown as string])).toThrow(expect.objectContaining({ code: 'CUSIM_INVALID_ARGUMENT' }));
    const r = await f.hashedRows([]);
    expect(r.indptr).toEqual(Uint32Array.of(0));
    expect(r.indices.length).toBe(0);
  });
});
