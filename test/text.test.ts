// Featurizers: tokenizers against hand-derived token lists, weights against
// hand-computed counts and idf formulas, and save/reuse round trips.
import { describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  TextFeaturizer,
  codeTokens,
  hashToken,
  qgramTokens,
  splitIdentifier,
  wordTokens,
  ENGLISH_STOP_WORDS,
  type CsrMatrix,
} from '../lib/index.js';
import { Readable } from 'node:stream';
import { readRecords, type RecordFormat } from '../lib/cli/records.js';
import { readDoc } from '../lib/cli/sources.js';
import { expectInvalid } from './helpers.js';

/** Row r of a CSR as a token → weight map, through the featurizer's vocabulary. */
function rowMap(m: CsrMatrix, r: number, term: (c: number) => string): Record<string, number> {
  const out: Record<string, number> = {};
  for (let k = m.indptr[r]; k < m.indptr[r + 1]; k++) out[term(m.indices[k])] = m.values![k];
  return out;
}

function terms(f: TextFeaturizer): (c: number) => string {
  const json = f.toJSON().vocabulary as { terms: string[] };
  return (c) => json.terms[c];
}

describe('code identifiers (bag of names)', () => {
  it('class WebServer(ServerBase) gives web, server ×2, base: the keyword is dropped', () => {
    expect(codeTokens('class WebServer(ServerBase)')).toEqual(['web', 'server', 'server', 'base']);
    const f = new TextFeaturizer({ mode: 'code' });
    const m = f.transform(['class WebServer(ServerBase)']);
    expect(m.rows).toBe(1);
    expect(rowMap(m, 0, terms(f))).toEqual({ web: 1, server: 2, base: 1 });
  });

  it('splits camelCase, acronyms, snake_case and digits', () => {
    const split = (s: string): string[] => {
      const out: string[] = [];
      splitIdentifier(s, out);
      return out;
    };
    expect(split('XMLHttpRequest')).toEqual(['xml', 'http', 'request']);
    expect(split('HTTPServer2Base')).toEqual(['http', 'server', 'base']);
    expect(split('parse_json_v2_data')).toEqual(['parse', 'json', 'data']); // 'v' is below minLength 2
    expect(split('utf8Decode')).toEqual(['utf', 'decode']);
    expect(split('__init__')).toEqual(['init']);
    expect(split('MAX_BUFFER_SIZE')).toEqual(['max', 'buffer', 'size']);
  });

  it('keywords are dropped only as whole identifiers; numbers are not names', () => {
    expect(codeTokens('const className = this.getName(); return 0x1fAbc + 42;')).toEqual(['class', 'name', 'get', 'name']);
    expect(codeTokens('class Foo', { dropKeywords: false })).toEqual(['class', 'foo']);
    expect(codeTokens('a = b + xy', { minLength: 1 })).toEqual(['a', 'b', 'xy']);
    expect(codeTokens('')).toEqual([]);
    // Non-ASCII letters are not identifier characters here; the ASCII parts survive.
    expect(codeTokens('let größeWert = naïveFn()')).toEqual(['gr', 'wert', 'na', 've', 'fn']);
  });
});

describe('words', () => {
  it('lowercases Unicode words, keeps combining marks, and drops stop words on request', () => {
    const text = 'The Café in 東京 — naïve ÉCOLE, नमस्ते 2023!';
    expect(wordTokens(text)).toEqual(['the', 'café', 'in', '東京', 'naïve', 'école', 'नमस्ते', '2023']);
    expect(wordTokens(text, ENGLISH_STOP_WORDS)).toEqual(['café', '東京', 'naïve', 'école', 'नमस्ते', '2023']);
    const f = new TextFeaturizer({ mode: 'words', stopWords: ['café', 'the'] });
    expect(f.tokenize(text)).toEqual(['in', '東京', 'naïve', 'école', 'नमस्ते', '2023']);
  });
});

describe('character q-grams', () => {
  it('q=2 and q=3 counts match a hand count', () => {
    const f2 = new TextFeaturizer({ mode: 'qgrams', q: 2 });
    const m2 = f2.transform(['abcab']);
    expect(rowMap(m2, 0, terms(f2))).toEqual({ ab: 2, bc: 1, ca: 1 });
    const f3 = new TextFeaturizer({ mode: 'qgrams', q: 3 });
    const m3 = f3.transform(['Banana']);
    expect(rowMap(m3, 0, terms(f3))).toEqual({ ban: 1, ana: 2, nan: 1 });
  });

  it('padding, short strings and surrogate pairs', () => {
    expect(qgramTokens('ab', 3, true, true)).toEqual(['\u0002\u0002a', '\u0002ab', 'ab\u0003', 'b\u0003\u0003']);
    expect(qgramTokens('ab', 3)).toEqual(['ab']);
    expect(qgramTokens('', 3)).toEqual([]);
    expect(qgramTokens('x😀y', 2)).toEqual(['x😀', '😀y']);
    expect(qgramTokens('AbC', 2, false)).toEqual(['Ab', 'bC']);
  });
});

describe('weights', () => {
  const docs = ['apple banana apple', 'banana cherry', 'cherry cherry date'];

  it('counts and binary', () => {
    const f = new TextFeaturizer({ mode: 'words' });
    const m = f.transform(docs);
    const t = terms(f);
    expect([0, 1, 2].map((r) => rowMap(m, r, t))).toEqual([
      { apple: 2, banana: 1 },
      { banana: 1, cherry: 1 },
      { cherry: 2, date: 1 },
    ]);
    const b = new TextFeaturizer({ mode: 'words', weighting: 'binary' });
    const mb = b.transform(docs);
    expect(rowMap(mb, 0, terms(b))).toEqual({ apple: 1, banana: 1 });
    // Columns sorted within each row (CSR order is part of MinHash semantics).
    for (let r = 0; r < m.rows; r++) {
      for (let k = m.indptr[r] + 1; k < m.indptr[r + 1]; k++) expect(m.indices[k]).toBeGreaterThan(m.indices[k - 1]);
    }
  });

  it('tf-idf = count × (ln((1 + N) / (1 + df)) + 1) with N and df seen so far', () => {
    const f = new TextFeaturizer({ mode: 'words', weighting: 'tfidf' });
    const m = f.transform(docs);
    const idf = (df: number, n: number): number => Math.log((1 + n) / (1 + df)) + 1;
    const got = [0, 1, 2].map((r) => rowMap(m, r, terms(f)));
    const want: Record<string, number>[] = [
      { apple: 2 * idf(1, 3), banana: idf(2, 3) },
      { banana: idf(2, 3), cherry: idf(2, 3) },
      { cherry: 2 * idf(2, 3), date: idf(1, 3) },
    ];
    for (let r = 0; r < 3; r++) {
      expect(Object.keys(got[r]).sort()).toEqual(Object.keys(want[r]).sort());
      for (const k of Object.keys(want[r])) expect(got[r][k]).toBeCloseTo(want[r][k], 5);
    }
    // Streaming: a second batch sees df over all 5 documents.
    const m2 = f.transform(['apple', 'apple elder']);
    const t = terms(f);
    expect(rowMap(m2, 0, t).apple).toBeCloseTo(idf(3, 5), 5);
    expect(rowMap(m2, 1, t).elder).toBeCloseTo(idf(1, 5), 5);
    expect(m2.cols).toBe(5);
  });
});

describe('vocabulary and hashing', () => {
  it('batches stream into the same rows as one pass', () => {
    const docs = ['alpha beta', '', 'beta gamma gamma', 'delta'];
    const one = new TextFeaturizer().transform(docs);
    const f = new TextFeaturizer();
    const a = f.transform(docs.slice(0, 2));
    const b = f.transform(docs.slice(2));
    expect(a.rows + b.rows).toBe(one.rows);
    expect([...a.indices, ...b.indices]).toEqual([...one.indices]);
    expect([...a.values, ...b.values]).toEqual([...one.values]);
    // The empty document is an empty row, not a missing one.
    expect(a.indptr[2] - a.indptr[1]).toBe(0);
  });

  it('toJSON/fromJSON: a frozen copy reproduces rows and drops unknown tokens', () => {
    const f = new TextFeaturizer({ mode: 'words', weighting: 'tfidf' });
    f.transform(['red green', 'green blue', 'blue blue red']);
    const saved = JSON.stringify(f.toJSON());
    const g = TextFeaturizer.fromJSON(saved).freeze();
    const h = TextFeaturizer.fromJSON(JSON.parse(saved)).freeze();
    const x = g.transform(['green purple red']);
    const y = h.transform(['green purple red']);
    expect([...x.indices]).toEqual([...y.indices]);
    const t = terms(g);
    expect(Object.keys(rowMap(x, 0, t)).sort()).toEqual(['green', 'red']);
    const idf = (df: number): number => Math.log(4 / (1 + df)) + 1;
    expect(rowMap(x, 0, t).green).toBeCloseTo(idf(2), 5);
    // Frozen: neither the vocabulary nor the statistics moved.
    expect(g.toJSON().vocabulary).toEqual(JSON.parse(saved).vocabulary);
    expect(() => TextFeaturizer.fromJSON({ format: 'nope' })).toThrow(/TextFeaturizer/);
  });

  it('hashToken is FNV-1a (UTF-16 units) finished with fmix32', () => {
    const oracle = (s: string): number => {
      let h = 0x811c9dc5n;
      for (let i = 0; i < s.length; i++) h = ((h ^ BigInt(s.charCodeAt(i))) * 0x01000193n) & 0xffffffffn;
      h ^= h >> 16n;
      h = (h * 0x85ebca6bn) & 0xffffffffn;
      h ^= h >> 13n;
      h = (h * 0xc2b2ae35n) & 0xffffffffn;
      h ^= h >> 16n;
      return Number(h);
    };
    for (const s of ['', 'a', 'server', '東京', 'x😀y', 'a'.repeat(1000)]) expect(hashToken(s)).toBe(oracle(s));
    const f = new TextFeaturizer({ mode: 'code', hashBits: 10 });
    const m = f.transform(['class WebServer(ServerBase)']);
    expect(m.cols).toBe(1024);
    const want = new Map<number, number>();
    for (const t of ['web', 'server', 'server', 'base']) {
      const c = hashToken(t) & 1023;
      want.set(c, (want.get(c) ?? 0) + 1);
    }
    const got = new Map<number, number>();
    for (let k = 0; k < m.indices.length; k++) got.set(m.indices[k], m.values[k]);
    expect(got).toEqual(want);
    const back = TextFeaturizer.fromJSON(JSON.stringify(f.toJSON()));
    expect(back.vocabulary.documentFrequency(hashToken('server') & 1023)).toBe(1);
    expect(back.vocabulary.documents).toBe(1);
  });

  it('addRemapped (rows counted in a worker) equals add(), hashed collisions merged', () => {
    const docs = ['alpha beta alpha', '', 'gamma beta delta delta', 'epsilon alpha'];
    for (const opts of [
      { mode: 'words' as const, weighting: 'tfidf' as const },
      { mode: 'words' as const, hashBits: 1 },
    ]) {
      const want = new TextFeaturizer(opts).transform(docs);
      const f = new TextFeaturizer(opts);
      // A "worker" vocabulary in first-seen order, as the CLI's workers build it.
      const local = new Map<string, number>();
      const rows = docs.map((d) => {
        const counts = new Map<number, number>();
        for (const t of f.tokenize(d)) {
          if (!local.has(t)) local.set(t, local.size);
          counts.set(local.get(t)!, (counts.get(local.get(t)!) ?? 0) + 1);
        }
        return counts;
      });
      const remap = Int32Array.from([...local.keys()].map((t) => f.vocabulary.lookup(t, true)));
      for (const r of rows) f.addRemapped(Uint32Array.from(r.keys()), Uint32Array.from(r.values()), remap);
      const got = f.build();
      expect([...got.indptr]).toEqual([...want.indptr]);
      expect([...got.indices]).toEqual([...want.indices]);
      expect([...got.values]).toEqual([...want.values]);
    }
  });

  it('bad options name the argument', () => {
    const bad = (o: unknown, re: RegExp): void => {
      try {
        new TextFeaturizer(o as never);
        expect.unreachable();
      } catch (e) {
        expect((e as { code: string }).code).toBe('CUSIM_INVALID_ARGUMENT');
        expect((e as Error).message).toMatch(re);
      }
    };
    bad({ mode: 'chars' }, /options\.mode/);
    bad({ weighting: 'bm25' }, /options\.weighting/);
    bad({ hashBits: 40 }, /options\.hashBits/);
    bad({ q: 0 }, /options\.q/);
    bad({ stopWords: 3 }, /options\.stopWords/);
    expect(() => new TextFeaturizer().add(5 as never)).toThrow(/text must be a string/);
  });
});

describe('file and record sources', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'cusim-text-'));

  it('empty files are documents with no tokens; NUL bytes mark binary; bad UTF-8 is reported', () => {
    writeFileSync(path.join(dir, 'empty.js'), '');
    writeFileSync(path.join(dir, 'bin.dat'), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2]));
    writeFileSync(path.join(dir, 'latin1.txt'), Buffer.from([0x63, 0x61, 0x66, 0xe9]));
    writeFileSync(path.join(dir, 'uni.txt'), 'naïve 東京 😀');
    expect(readDoc(path.join(dir, 'empty.js'), 'e', 1e6)).toEqual({ id: 'e', text: '' });
    expect(readDoc(path.join(dir, 'bin.dat'), 'b', 1e6)).toEqual({
      id: 'b',
      reason: 'binary',
      detail: 'a NUL byte in the first 8000 bytes',
    });
    expect(readDoc(path.join(dir, 'latin1.txt'), 'l', 1e6)).toEqual({ id: 'l', reason: 'not-utf8', detail: 'invalid UTF-8' });
    expect(readDoc(path.join(dir, 'uni.txt'), 'u', 1e6)).toEqual({ id: 'u', text: 'naïve 東京 😀' });
    expect(readDoc(path.join(dir, 'uni.txt'), 'u', 4)).toEqual({ id: 'u', reason: 'too-large', detail: '18 B > --max-size 4 B' });
    expect(readDoc(path.join(dir, 'missing'), 'm', 4)).toEqual({ id: 'm', reason: 'unreadable', detail: 'ENOENT' });
  });

  it('CSV with quotes and newlines, JSONL ids, auto-detection, chunks split anywhere', async () => {
    // Every input also arrives one byte per chunk: lines and UTF-8 sequences split across reads.
    const parse = async (s: string, format: RecordFormat, field: string, idField: string, bytewise = false) => {
      const buf = Buffer.from(s);
      const input = Readable.from(bytewise ? [...buf].map((b) => Buffer.from([b])) : [buf]);
      const out = [];
      for await (const d of readRecords(input, { format, field, idField, source: 'stdin', maxRecordBytes: 1 << 20 }))
        out.push({ id: d.id, text: d.text });
      return out;
    };
    for (const bytewise of [false, true]) {
      expect(await parse('id,text\n1,"a, ""b""\nc"\r\n2,d\n', 'csv', 'text', 'id', bytewise)).toEqual([
        { id: '1', text: 'a, "b"\nc' },
        { id: '2', text: 'd' },
      ]);
      expect(await parse('{"id":"x","text":"hi"}\n\n{"text":"yo é"}\n', 'auto', 'text', 'id', bytewise)).toEqual([
        { id: 'x', text: 'hi' },
        { id: '3', text: 'yo é' },
      ]);
      expect(await parse('one\r\n\ntwo 東京', 'auto', 'text', 'id', bytewise)).toEqual([
        { id: '1', text: 'one' },
        { id: '3', text: 'two 東京' },
      ]);
      expect(await parse('name\tbody\nk\t"v"\n', 'tsv', 'body', 'name', bytewise)).toEqual([{ id: 'k', text: '"v"' }]);
    }
    await expect(parse('{"t":1}', 'jsonl', 'text', 'id')).rejects.toThrow(/stdin line 1 has no string field 'text'/);
  });
});

describe('text bad input', () => {
  it('qgramTokens rejects q outside [1, 1024] and non-string text instead of empty or no grams', () => {
    expectInvalid(() => qgramTokens('abc', 0), RangeError, /q must be an integer in \[1, 1024\], got 0/);
    expectInvalid(() => qgramTokens('abc', NaN), RangeError, /q must be an integer in \[1, 1024\], got NaN/);
    expectInvalid(() => qgramTokens('abc', 2.5), RangeError, /q must be an integer/);
    expectInvalid(() => qgramTokens(5 as never, 3), TypeError, /text must be a string, got 5/);
  });

  it('hashToken rejects a non-string instead of hashing it like the empty string', () => {
    expectInvalid(() => hashToken(5 as never), TypeError, /token must be a string, got 5/);
    expectInvalid(() => hashToken(undefined as never), TypeError, /token must be a string, got undefined/);
  });

  it('addRemapped rejects local ids past remap and mismatched lengths instead of filing them under column 0', () => {
    const f = new TextFeaturizer({ mode: 'words' });
    const remap = Int32Array.of(0);
    expectInvalid(
      () => f.addRemapped(Uint32Array.of(5), Uint32Array.of(1), remap),
      RangeError,
      /localCols\[0\]=5 is out of range for remap\.length=1/,
    );
    expectInvalid(
      () => f.addRemapped(Uint32Array.of(0, 0), Uint32Array.of(1), remap),
      RangeError,
      /counts has length 1 but localCols has 2/,
    );
    expectInvalid(() => f.addRemapped([0] as never, Uint32Array.of(1), remap), TypeError, /localCols must be a Uint32Array/);
    expectInvalid(() => f.addRemapped(Uint32Array.of(0), Uint32Array.of(1), [0] as never), TypeError, /remap must be an Int32Array/);
    // Nothing was appended by the failed calls.
    expect(f.build().rows).toBe(0);
  });
});
