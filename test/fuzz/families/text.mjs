// Tokenizers and TextFeaturizer. Reference: the native batch tokenizer must
// give each document the same (term, count) multiset as the JavaScript
// tokenizer of the same featurizer (tokenize()).
import { diff } from '../gen.mjs';
import { spoilOptions } from './common.mjs';

export const name = 'text';

const ALPHABET = [
  'a',
  'b',
  'Z',
  '_',
  '$',
  '0',
  '9',
  ' ',
  ' ',
  '\n',
  '\t',
  '.',
  '(',
  ')',
  'é',
  'ß',
  'İ',
  'ﬃ',
  '中',
  '😀',
  '\u0301',
  '\ud800',
  '\udc00',
  '\u0000',
  'camelCase',
  'HTTPServer',
  'the',
  'class ',
  'foo_bar',
];

function text(g, n = g.range(0, 60)) {
  let s = '';
  for (let i = 0; i < n; i++) s += g.pick(ALPHABET);
  return s;
}

function perDoc(b) {
  const docs = [];
  for (let d = 0; d + 1 < b.indptr.length; d++) {
    const m = new Map();
    for (let p = b.indptr[d]; p < b.indptr[d + 1]; p++) m.set(b.terms[b.ids[p]], b.counts[p]);
    docs.push([...m].sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0)));
  }
  return docs;
}

function countTokens(toks) {
  const m = new Map();
  for (const t of toks) m.set(t, (m.get(t) ?? 0) + 1);
  return [...m].sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0));
}

export const generators = [
  {
    entry: 'codeTokens / wordTokens / qgramTokens / splitIdentifier / hashToken',
    weight: 2,
    make(g, { lib }) {
      const fn = g.pick(['codeTokens', 'wordTokens', 'qgramTokens', 'splitIdentifier', 'hashToken']);
      const args = fn === 'qgramTokens' ? [text(g), g.range(1, 5)] : fn === 'splitIdentifier' ? [text(g, 10), []] : [text(g)];
      const bad = g.bool(0.4);
      if (bad) args[g.int(args.length)] = g.badValue();
      return { entry: this.entry, kind: bad ? 'either' : 'valid', run: () => lib[fn](...args) };
    },
  },
  {
    entry: 'TextFeaturizer.tokenizeBatch(Async)',
    weight: 5,
    make(g, { lib }) {
      const mode = g.pick(['code', 'words', 'qgrams']);
      const f = new lib.TextFeaturizer({
        mode,
        q: g.range(1, 4),
        pad: g.bool(),
        lowercase: g.bool(),
        stopWords: g.bool(0.3),
        dropKeywords: g.bool(),
        minLength: g.range(1, 3),
      });
      // Long enough documents for the native path, short ones too.
      const texts = Array.from({ length: g.range(0, 12) }, () => (g.bool(0.5) ? text(g, g.range(100, 400)) : text(g)));
      const minTokens = g.pick([0, 0, 1, 3]);
      const want = texts.map((t) => f.tokenize(t)).map((toks) => (toks.length >= minTokens ? countTokens(toks) : []));
      const isAsync = g.bool(0.5);
      const mutate = isAsync && g.bool(0.3);
      return {
        entry: this.entry,
        kind: 'valid',
        what: mutate ? 'texts array changed during the call' : undefined,
        run: async () => {
          if (!isAsync) return perDoc(f.tokenizeBatch(texts, minTokens));
          const p = f.tokenizeBatchAsync(texts, minTokens);
          // The caller reuses its array for the next batch.
          if (mutate) for (let i = 0; i < texts.length; i++) texts[i] = g.bool(0.5) ? text(g) : undefined;
          return perDoc(await p);
        },
        check: (got) => diff(got, want),
      };
    },
  },
  {
    entry: 'TextFeaturizer (options, add, build, transform)',
    weight: 3,
    make(g, { lib }) {
      const opts = spoilOptions(
        g,
        { mode: 'words', weighting: 'count', hashBits: g.bool(0.3) ? g.range(1, 20) : undefined, q: 3, minLength: 1, stopWords: false },
        g.int(3),
      );
      const texts = Array.from({ length: g.range(0, 6) }, () => (g.bool(0.2) ? g.badValue() : text(g)));
      return {
        entry: this.entry,
        kind: 'either',
        run: () => {
          const f = new lib.TextFeaturizer(opts);
          f.addBatch(texts);
          const m = f.build();
          return f.transform(texts.filter((t) => typeof t === 'string')).rows + m.rows;
        },
      };
    },
  },
];
