// The native tokenizer against the JavaScript one as the oracle: for every
// mode and option combination, the whole CSR (indptr, columns, weights), the
// vocabulary's order and the document frequencies must be identical, on
// random ASCII, on real files, and on corpora where some documents contain
// Unicode (test/text-unicode.test.ts covers Unicode text in depth).
import { describe, expect, it } from 'vitest';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import {
  CODE_KEYWORDS,
  ENGLISH_STOP_WORDS,
  HashedVocabulary,
  TextFeaturizer,
  Vocabulary,
  type TextFeaturizerOptions,
} from '../lib/index.js';
import { native } from '../lib/addon.js';
import { NativeTokenizer, countTokenLists, type TokenBatch } from '../lib/text/batch.js';
import { expectInvalid, rng, randInt } from './helpers.js';
import { cusim, ensureDist, fixture, fixtureDocs, root } from './cli-helpers.js';

const WORDS = ['web', 'server', 'base', 'http', 'json', 'parse', 'data', 'node', 'util', 'max', 'size', 'buffer', 'x', 'i', 'id'];
const PUNCT = '!"#%&\'()*+,-./:;<=>?@[\\]^`{|}~';
const SPACE = [' ', ' ', ' ', '\t', '\n', '\r\n', '  '];
const CONTROL = ['\x00', '\x01', '\x02', '\x03', '\x7f', '\x1b'];
const KEYWORDS = [...CODE_KEYWORDS];
const STOPS = [...ENGLISH_STOP_WORDS];

const cap = (w: string): string => w[0].toUpperCase() + w.slice(1);

/** One random ASCII piece: identifiers in every casing style, numbers, keywords, punctuation, controls. */
function piece(r: () => number): string {
  const w = (): string => WORDS[randInt(r, WORDS.length)];
  switch (randInt(r, 16)) {
    case 0:
      return w() + cap(w()) + cap(w()); // camelCase
    case 1:
      return cap(w()) + cap(w()); // PascalCase
    case 2:
      return `${w()}_${w()}_v${randInt(r, 10)}`; // snake_case with a digit part
    case 3:
      return `${w().toUpperCase()}_${w().toUpperCase()}`; // SCREAMING_CASE
    case 4:
      return w().toUpperCase() + cap(w()) + String(randInt(r, 100)) + cap(w()); // acronym, digits
    case 5:
      return KEYWORDS[randInt(r, KEYWORDS.length)];
    case 6:
      return STOPS[randInt(r, STOPS.length)] + (r() < 0.3 ? 'S' : '');
    case 7:
      return r() < 0.5 ? String(randInt(r, 100000)) : `0x${randInt(r, 1 << 20).toString(16)}Fe${w()}`;
    case 8:
      return (r() < 0.5 ? '$' : '_') + w() + (r() < 0.5 ? '$' : '__');
    case 9:
      return PUNCT[randInt(r, PUNCT.length)].repeat(1 + randInt(r, 3));
    case 10:
      return CONTROL[randInt(r, CONTROL.length)];
    case 11:
      return w().toUpperCase();
    case 12:
      return w() + String(randInt(r, 10)) + w();
    default:
      return w();
  }
}

function randomAsciiDoc(r: () => number, maxPieces = 40): string {
  const n = randInt(r, maxPieces + 1);
  let s = '';
  for (let i = 0; i < n; i++) {
    s += piece(r);
    const sep = randInt(r, 4);
    s += sep === 0 ? '' : sep === 1 ? PUNCT[randInt(r, PUNCT.length)] : SPACE[randInt(r, SPACE.length)];
  }
  return s;
}

function randomAsciiCorpus(seed: number, docs: number): string[] {
  const r = rng(seed);
  const out = ['', ' ', '\t\n  \r\n', 'a', 'A', 'ab', 'Ab', 'x_y', '__', '$', '42', 'class', 'None none NONE'];
  for (let i = 0; i < docs; i++) out.push(randomAsciiDoc(r));
  // Duplicates: the same document twice must count twice.
  out.push(out[out.length - 1], out[20]);
  return out;
}

const UNICODE = [
  'café',
  'Ünïcödé',
  '東京',
  '😀',
  'İstanbul',
  'ΟΔΟΣ',
  'ﬁle',
  'e\u0301',
  '\u212Aelvin',
  '\uD800',
  'größeWert',
  'naïveFn',
  'नमस्ते',
];

/** ASCII documents with Unicode spliced into every third one. */
function mixedCorpus(seed: number, docs: number): string[] {
  const r = rng(seed);
  return randomAsciiCorpus(seed, docs).map((d, i) => {
    if (i % 3 !== 1) return d;
    const at = randInt(r, d.length + 1);
    return d.slice(0, at) + UNICODE[randInt(r, UNICODE.length)] + d.slice(at);
  });
}

const OPTION_SETS: TextFeaturizerOptions[] = [
  { mode: 'code' },
  { mode: 'code', dropKeywords: false },
  { mode: 'code', minLength: 1 },
  { mode: 'code', minLength: 4, weighting: 'tfidf' },
  { mode: 'code', hashBits: 6 },
  { mode: 'code', hashBits: 20, weighting: 'binary' },
  { mode: 'words' },
  { mode: 'words', stopWords: true },
  { mode: 'words', stopWords: ['The', 'FOO', 'café', 'x1', 'web'], minLength: 2 },
  { mode: 'words', minLength: 3, weighting: 'tfidf' },
  { mode: 'words', hashBits: 5, weighting: 'tfidf' },
  { mode: 'qgrams', q: 1 },
  { mode: 'qgrams', q: 2 },
  { mode: 'qgrams', q: 3, pad: true },
  { mode: 'qgrams', q: 3, lowercase: false },
  { mode: 'qgrams', q: 5, pad: true, lowercase: false, weighting: 'binary' },
  { mode: 'qgrams', q: 16 },
  { mode: 'qgrams', q: 2, hashBits: 8, weighting: 'tfidf' },
];

const label = (o: TextFeaturizerOptions): string => JSON.stringify(o);

function pair(opts: TextFeaturizerOptions): [TextFeaturizer, TextFeaturizer] {
  const a = new TextFeaturizer({ ...opts, native: true });
  const b = new TextFeaturizer({ ...opts, native: false });
  expect(a.native).toBe(true);
  expect(b.native).toBe(false);
  return [a, b];
}

// Deep equality of large arrays is slow in expect(); compare bytes first and
// fall back to toEqual only for the failure message.
function sameArray(a: ArrayBufferView, b: ArrayBufferView): boolean {
  const x = Buffer.from(a.buffer, a.byteOffset, a.byteLength);
  return x.length === b.byteLength && x.equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
}

/** Two featurizers agree on their saved state: vocabulary order, document frequencies, documents. */
function expectSameState(a: TextFeaturizer, b: TextFeaturizer): void {
  const ja = a.toJSON();
  const jb = b.toJSON();
  if (JSON.stringify(ja) !== JSON.stringify(jb)) expect(ja).toEqual(jb);
}

function expectSameMatrix(ma: ReturnType<TextFeaturizer['build']>, mb: ReturnType<TextFeaturizer['build']>): void {
  expect(ma.rows).toBe(mb.rows);
  expect(ma.cols).toBe(mb.cols);
  for (const k of ['indptr', 'indices', 'values'] as const) {
    if (!sameArray(ma[k], mb[k])) expect(ma[k], k).toEqual(mb[k]);
  }
}

/** Native and JavaScript featurizers over two streamed batches, then frozen reuse on a third. */
function expectSameEverywhere(opts: TextFeaturizerOptions, docs: string[]): void {
  const [a, b] = pair(opts);
  const half = docs.length >> 1;
  expectSameMatrix(a.transform(docs.slice(0, half)), b.transform(docs.slice(0, half)));
  expectSameMatrix(a.transform(docs.slice(half)), b.transform(docs.slice(half)));
  expectSameState(a, b);
  // Frozen: unknown tokens dropped, document frequencies unchanged.
  const json = b.toJSON();
  const vocab = (): Vocabulary | HashedVocabulary =>
    json.vocabulary.kind === 'hashed' ? HashedVocabulary.fromJSON(json.vocabulary) : Vocabulary.fromJSON(json.vocabulary);
  const fa = new TextFeaturizer({ ...opts, native: true }, vocab()).freeze();
  const fb = new TextFeaturizer({ ...opts, native: false }, vocab()).freeze();
  const fresh = docs.map((d) => d.split('').reverse().join(''));
  expectSameMatrix(fa.transform(fresh), fb.transform(fresh));
  expectSameState(fa, fb);
}

function plainBatch(b: TokenBatch): unknown {
  return { ...b, tokens: [...b.tokens], indptr: [...b.indptr], ids: [...b.ids], counts: [...b.counts] };
}

describe('native tokenizer equals the JavaScript tokenizers', () => {
  const ascii = randomAsciiCorpus(11, 300);

  for (const opts of OPTION_SETS) {
    it(`random ASCII with identifiers, punctuation, controls, empty and blank docs: ${label(opts)}`, () => {
      expectSameEverywhere(opts, ascii);
    });
  }

  it('tokenizeBatch gives the JavaScript batch (terms, per-document pairs, token counts) for every mode', () => {
    for (const opts of OPTION_SETS) {
      const [a, b] = pair(opts);
      for (const minTokens of [0, 1, 7]) {
        const got = a.tokenizeBatch(ascii, minTokens);
        const want = countTokenLists(
          ascii.map((t) => b.tokenize(t)),
          minTokens,
        );
        expect(plainBatch(got), `${label(opts)} minTokens=${minTokens}`).toEqual(plainBatch(want));
      }
    }
  });

  it('addBatch with minTokens adds exactly the documents a tokenize()+addTokens() loop would', () => {
    for (const opts of [{ mode: 'code' }, { mode: 'words', stopWords: true }, { mode: 'qgrams', q: 3 }] as TextFeaturizerOptions[]) {
      const a = new TextFeaturizer({ ...opts, native: true });
      const oracle = new TextFeaturizer({ ...opts, native: false });
      const want: number[] = [];
      for (const t of ascii) {
        const tokens = oracle.tokenize(t);
        want.push(tokens.length);
        if (tokens.length >= 10) oracle.addTokens(tokens);
      }
      expect([...a.addBatch(ascii, 10)]).toEqual(want);
      expectSameMatrix(a.build(), oracle.build());
      expectSameState(a, oracle);
    }
  });

  it('add() one document at a time (long ones go native) returns the same kept counts and rows', () => {
    const long = randomAsciiCorpus(5, 60).map((d) => d + ' ' + d + ' ' + d);
    for (const opts of [{ mode: 'code' }, { mode: 'words' }, { mode: 'qgrams', q: 2 }] as TextFeaturizerOptions[]) {
      const [a, b] = pair(opts);
      expect(long.map((t) => a.add(t))).toEqual(long.map((t) => b.add(t)));
      expectSameMatrix(a.build(), b.build());
      expectSameState(a, b);
    }
  });

  it('a corpus over the 4M-character batch size is split into batches and still equals one JavaScript pass', () => {
    const r = rng(3);
    const docs: string[] = [];
    let chars = 0;
    while (chars < 4.5e6) {
      const d = randomAsciiDoc(r, 400);
      docs.push(d);
      chars += d.length;
    }
    for (const opts of [{ mode: 'code', weighting: 'tfidf' }, { mode: 'words' }] as TextFeaturizerOptions[]) {
      const [a, b] = pair(opts);
      expectSameMatrix(a.transform(docs), b.transform(docs));
      expectSameState(a, b);
    }
  });

  it('the WebServer example: web, server ×2, base on the native path', () => {
    const f = new TextFeaturizer({ mode: 'code', native: true });
    const m = f.transform(['class WebServer(ServerBase)']);
    const terms = (f.toJSON().vocabulary as { terms: string[] }).terms;
    const row: Record<string, number> = {};
    for (let k = m.indptr[0]; k < m.indptr[1]; k++) row[terms[m.indices[k]]] = m.values[k];
    expect(row).toEqual({ web: 1, server: 2, base: 1 });
  });
});

describe('native tokenizer on real files', () => {
  const files = fixtureDocs().map((d) => d.text);
  const summaries = readFileSync(path.join(root, 'test', 'fixtures', 'npm-summaries-2k.tsv'), 'utf8').split('\n');
  const sources = ['lib', 'lib/text', 'lib/cli', 'native', 'bench'].flatMap((dir) =>
    readdirSync(path.join(root, dir))
      .filter((f) => /\.(ts|cc|h|js)$/.test(f))
      .sort()
      .map((f) => readFileSync(path.join(root, dir, f), 'utf8')),
  );

  it('has both ASCII and non-ASCII documents (so both paths are exercised)', () => {
    // eslint-disable-next-line no-control-regex -- non-ASCII test: the range starts at NUL on purpose
    const nonAscii = (t: string): boolean => /[^\x00-\x7f]/.test(t);
    expect(summaries.some(nonAscii)).toBe(true);
    expect(summaries.filter((t) => !nonAscii(t)).length).toBeGreaterThan(1000);
    expect(sources.filter((t) => !nonAscii(t)).length).toBeGreaterThan(20);
  });

  for (const opts of OPTION_SETS) {
    it(`test/fixtures/dedup, npm summaries (lines and whole file) and this repository's sources: ${label(opts)}`, () => {
      // Long q-grams make nearly every window a new term: a smaller corpus keeps the JS oracle quick.
      const corpus = (opts.q ?? 3) > 5 ? [...files, ...summaries] : [...files, ...summaries, summaries.join('\n'), ...sources];
      expectSameEverywhere(opts, corpus);
    });
  }
});

describe('native tokenizer with Unicode documents', () => {
  const mixed = mixedCorpus(21, 240);

  for (const opts of OPTION_SETS) {
    it(`mixed corpus, Unicode in every third document: ${label(opts)}`, () => {
      expectSameEverywhere(opts, mixed);
    });
  }

  it('every mode tokenizes every document natively, non-ASCII ones included (none goes to JavaScript)', () => {
    const settings = { minLength: 1, dropKeywords: true, keywords: KEYWORDS, stopWords: [], q: 3, lowercase: true, pad: false };
    // eslint-disable-next-line no-control-regex -- non-ASCII test: the range starts at NUL on purpose
    const nonAscii = mixed.filter((t) => /[^\x00-\x7f]/.test(t));
    expect(nonAscii.length).toBeGreaterThan(50);
    for (const mode of ['code', 'words', 'qgrams'] as const) {
      const seen: string[] = [];
      const tok = new NativeTokenizer({ ...settings, mode });
      tok.tokenizeBatch(mixed, 0, (t) => {
        seen.push(t);
        return [];
      });
      expect(seen, mode).toEqual([]);
    }
  });
});

describe('native tokenizer interface', () => {
  it('tokenizeAsync resolves to the same batch as tokenize', async () => {
    const docs = randomAsciiCorpus(8, 50);
    const bytes = Buffer.from(docs.join(''), 'utf8');
    const offsets = new Uint32Array(docs.length + 1);
    docs.forEach((d, i) => (offsets[i + 1] = offsets[i] + d.length));
    const tok = new (native().TextTokenizer!)({ mode: 'code', minLength: 2, keywords: KEYWORDS } as never);
    const sync = tok.tokenize(bytes, offsets, 3);
    const async = await tok.tokenizeAsync(bytes, offsets, 3);
    expect(plainBatch({ minTokens: 3, ...async })).toEqual(plainBatch({ minTokens: 3, ...sync }));
    expect(sync.terms.length).toBeGreaterThan(10);
  });

  it('TextFeaturizer.tokenizeBatchAsync gives the same batch as tokenizeBatch, Unicode fallback included', async () => {
    const docs = mixedCorpus(4, 120);
    for (const opts of [
      { mode: 'code' },
      { mode: 'words', stopWords: true },
      { mode: 'qgrams', q: 3, pad: true },
    ] as TextFeaturizerOptions[]) {
      const [a, b] = pair(opts);
      const [got, again] = await Promise.all([a.tokenizeBatchAsync(docs, 2), a.tokenizeBatchAsync(docs.slice(5), 0)]);
      expect(plainBatch(got), label(opts)).toEqual(
        plainBatch(
          countTokenLists(
            docs.map((t) => b.tokenize(t)),
            2,
          ),
        ),
      );
      expect(plainBatch(again)).toEqual(plainBatch(b.tokenizeBatch(docs.slice(5))));
      a.addTokenBatch(got);
      b.addBatch(docs, 2);
      expectSameMatrix(a.build(), b.build());
      expectSameState(a, b);
    }
  });

  it('bad arguments are clear errors, never a crash', () => {
    expectInvalid(
      () => new TextFeaturizer({ native: 'yes' } as unknown as TextFeaturizerOptions),
      TypeError,
      /options\.native must be a boolean/,
    );
    const f = new TextFeaturizer({ mode: 'code' });
    expectInvalid(() => f.tokenizeBatch(['a', 3 as unknown as string]), TypeError, /texts\[1\] must be a string/);
    expectInvalid(() => f.addBatch(['a'], -1), RangeError, /minTokens/);
    const bad = { ...f.tokenizeBatch(['a b c']), indptr: new Uint32Array([0]) };
    expectInvalid(() => f.addTokenBatch(bad), RangeError, /indptr/);
    const tok = new (native().TextTokenizer!)({ mode: 'words' } as never);
    expectInvalid(() => tok.tokenize(new Uint8Array(4), new Uint32Array([0, 5]), 0), RangeError, /offsets end at 5/);
    expectInvalid(() => tok.tokenize(new Uint8Array(4), new Uint32Array([0, 3, 2]), 0), RangeError, /non-decreasing/);
    expectInvalid(() => tok.tokenize(new Uint8Array(4), [0, 4] as never, 0), TypeError, /offsets must be a Uint32Array/);
    expectInvalid(() => new (native().TextTokenizer!)({ mode: 'lines' } as never), RangeError, /options\.mode/);
    const assemble = native().assembleTextRows;
    const one = new Uint32Array([1]);
    expectInvalid(
      () => assemble(new Uint32Array([0, 1]), one, 0, new Uint32Array([5]), one, new Int32Array(2)),
      RangeError,
      /ids\[0\]=5 is out of range for 2 terms/,
    );
    expectInvalid(() => assemble(new Uint32Array([0, 2]), one, 0, one, one, new Int32Array(2)), RangeError, /end within ids/);
    expectInvalid(() => assemble(new Uint32Array([0, 1]), one, 0, one, new Uint32Array(2), new Int32Array(2)), RangeError, /same length/);
    tok.dispose();
    expect(() => tok.tokenize(new Uint8Array(0), new Uint32Array([0]), 0)).toThrow(expect.objectContaining({ code: 'CUSIM_DISPOSED' }));
  });
});

describe('cusim dedup with the native tokenizer', () => {
  it('reports the same groups as --no-native, with one thread and with worker threads', async () => {
    ensureDist();
    const strip = (out: string): unknown => {
      const r = JSON.parse(out);
      delete r.elapsedMs;
      delete r.stages;
      return r;
    };
    const runs = [];
    for (const extra of [
      ['--threads', '1'],
      ['--threads', '1', '--no-native'],
      ['--threads', '3'],
      ['--threads', '3', '--no-native'],
    ])
      runs.push(await cusim(['dedup', '.', '--json', '-t', '0.8', ...extra], { cwd: fixture }));
    for (const r of runs) expect(r.status, r.stderr).toBe(0);
    const want = strip(runs[1].stdout);
    expect((want as { groups: unknown[] }).groups).toHaveLength(2);
    for (const r of runs) expect(strip(r.stdout)).toEqual(want);
  });
});

describe('rows over wide columns', () => {
  it('hashBits 31: counts survive columns past 2^21 (packed float64 keys used to round them to 0)', () => {
    const docs = ['alpha alpha alpha beta beta', 'gamma delta delta gamma gamma gamma epsilon'];
    for (const nat of [true, false]) {
      const f = new TextFeaturizer({ mode: 'words', hashBits: 31, native: nat });
      const m = f.transform(docs);
      docs.forEach((d, r) => {
        // Oracle: a brute-force column → count map over hashToken's columns.
        const want = new Map<number, number>();
        for (const w of d.split(' ')) {
          const col = f.vocabulary.lookup(w, false);
          want.set(col, (want.get(col) ?? 0) + 1);
        }
        const cols = [...want.keys()].sort((a, b) => a - b);
        expect([...m.indices.subarray(m.indptr[r], m.indptr[r + 1])]).toEqual(cols);
        expect([...m.values.subarray(m.indptr[r], m.indptr[r + 1])]).toEqual(cols.map((c) => want.get(c)));
      });
      expect(Math.max(...m.indices)).toBeGreaterThan(2 ** 21);
    }
  });
});

// ~12 GB of memory and several minutes: run with CUSIM_TEST_HEAVY=1.
describe.skipIf(!process.env.CUSIM_TEST_HEAVY)('native tokenizer past the JavaScript array limit (heavy)', () => {
  it('a batch with more than 2^27 distinct tokens is a coded error, not a V8 abort of the process', async () => {
    // 137,500 documents of 1,000 random printable bytes: ~135.7M distinct 5-grams.
    const r = rng(5);
    const texts: string[] = [];
    const chars = new Uint8Array(1000);
    for (let d = 0; d < 137_500; d++) {
      for (let i = 0; i < chars.length; i++) chars[i] = 0x21 + randInt(r, 94);
      texts.push(Buffer.from(chars).toString('latin1'));
    }
    const f = new TextFeaturizer({ mode: 'qgrams', q: 5, lowercase: false, native: true });
    // The async call keeps the event loop (and vitest's worker RPC) responsive.
    await expect(f.tokenizeBatchAsync(texts)).rejects.toMatchObject({
      code: 'CUSIM_INVALID_ARGUMENT',
      message: expect.stringMatching(/distinct tokens, more than a JavaScript array holds/),
    });
  }, 1_800_000);
});
