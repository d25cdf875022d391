// Streaming text → CsrMatrix builder. Documents are added one at a time (or
// from any iterable); build() hands back the rows added since the last
// build, so a corpus of any size flows through in batches while the
// vocabulary and document frequencies keep growing across them.
import { typeError } from '../errors.js';
import { checkEnum, checkInt, describe, isObject } from '../validate.js';
import type { CsrMatrix } from '../validate.js';
import { codeTokens, qgramTokens, stopWordSet, wordTokens } from './tokenize.js';
import { BaseVocabulary, HashedVocabulary, Vocabulary } from './vocabulary.js';

export type TextMode = 'code' | 'words' | 'qgrams';
export type Weighting = 'count' | 'binary' | 'tfidf';

export interface TextFeaturizerOptions {
  /** 'code': bag of identifier names; 'words': Unicode words; 'qgrams': character q-grams. Default 'words'. */
  mode?: TextMode;
  /** Entry weights. 'tfidf' is count × smoothed idf from the document frequencies seen so far. Default 'count'. */
  weighting?: Weighting;
  /** Feature hashing into 2^hashBits columns instead of an explicit vocabulary. */
  hashBits?: number;
  /** q for 'qgrams'. Default 3. */
  q?: number;
  /** 'qgrams': pad with q−1 start/end marks. Default false. */
  pad?: boolean;
  /** 'qgrams': lowercase first. Default true. */
  lowercase?: boolean;
  /** 'words': true for English stop words, or a list. Default none. */
  stopWords?: boolean | string[];
  /** 'code': drop language keywords. Default true. */
  dropKeywords?: boolean;
  /** 'code' and 'words': shortest token kept. Defaults 2 (code) and 1 (words). */
  minLength?: number;
}

interface Settings {
  mode: TextMode;
  weighting: Weighting;
  hashBits?: number;
  q: number;
  pad: boolean;
  lowercase: boolean;
  stopWords: boolean | string[];
  dropKeywords: boolean;
  minLength: number;
}

/** What toJSON() writes: settings plus the vocabulary and its statistics. */
export interface TextFeaturizerJSON extends Settings {
  format: 'cusim.text/1';
  frozen: boolean;
  vocabulary: ReturnType<Vocabulary['toJSON']> | ReturnType<HashedVocabulary['toJSON']>;
}

const MODES = ['code', 'words', 'qgrams'] as const;
const WEIGHTINGS = ['count', 'binary', 'tfidf'] as const;

function settingsFrom(o: unknown, name: string): Settings {
  if (o !== undefined && !isObject(o)) throw typeError(`${name} must be an options object, got ${describe(o)}`);
  const opts = (o ?? {}) as Record<string, unknown>;
  const mode = checkEnum(opts.mode ?? 'words', `${name}.mode`, MODES);
  const stop = opts.stopWords ?? false;
  if (typeof stop !== 'boolean' && !(Array.isArray(stop) && stop.every((w) => typeof w === 'string'))) {
    throw typeError(`${name}.stopWords must be a boolean or an array of strings, got ${describe(stop)}`);
  }
  const bool = (k: string, d: boolean): boolean => {
    const v = opts[k] ?? d;
    if (typeof v !== 'boolean') throw typeError(`${name}.${k} must be a boolean, got ${describe(v)}`);
    return v;
  };
  return {
    mode,
    weighting: checkEnum(opts.weighting ?? 'count', `${name}.weighting`, WEIGHTINGS),
    hashBits: opts.hashBits === undefined ? undefined : checkInt(opts.hashBits, `${name}.hashBits`, 1, 31),
    q: checkInt(opts.q ?? 3, `${name}.q`, 1, 16),
    pad: bool('pad', false),
    lowercase: bool('lowercase', true),
    stopWords: stop as boolean | string[],
    dropKeywords: bool('dropKeywords', true),
    minLength: checkInt(opts.minLength ?? (mode === 'code' ? 2 : 1), `${name}.minLength`, 1, 1024),
  };
}

export class TextFeaturizer {
  readonly options: Readonly<Settings>;
  readonly vocabulary: BaseVocabulary;
  private isFrozen = false;
  private readonly stop: ReadonlySet<string> | undefined;
  // Rows since the last build(): raw counts, weighted at build time so that
  // TF-IDF uses every document frequency seen up to then.
  private indptr: number[] = [0];
  private indices = new Uint32Array(4096);
  private counts = new Float32Array(4096);
  private nnz = 0;
  private scratch = new Uint32Array(256);

  constructor(options?: TextFeaturizerOptions, vocabulary?: BaseVocabulary) {
    this.options = Object.freeze(settingsFrom(options, 'options'));
    this.stop = stopWordSet(this.options.stopWords);
    this.vocabulary =
      vocabulary ?? (this.options.hashBits !== undefined ? new HashedVocabulary(this.options.hashBits) : new Vocabulary());
  }

  /** The tokens of one document, before mapping to columns. */
  tokenize(text: string): string[] {
    if (typeof text !== 'string') throw typeError(`text must be a string, got ${describe(text)}`);
    const o = this.options;
    if (o.mode === 'code') return codeTokens(text, { dropKeywords: o.dropKeywords, minLength: o.minLength });
    if (o.mode === 'words') return wordTokens(text, this.stop, o.minLength);
    return qgramTokens(text, o.q, o.lowercase, o.pad);
  }

  /** Stops vocabulary growth and document-frequency updates (reuse on new data). */
  freeze(): this {
    this.isFrozen = true;
    return this;
  }

  get frozen(): boolean {
    return this.isFrozen;
  }

  /** Rows waiting for build(). */
  get pendingRows(): number {
    return this.indptr.length - 1;
  }

  /** Adds one document as the next row; returns its token count (after filtering). */
  add(text: string): number {
    return this.addTokens(this.tokenize(text));
  }

  /** Adds a document already split into tokens. */
  addTokens(tokens: readonly string[]): number {
    const grow = !this.isFrozen;
    const rowCounts = new Map<number, number>();
    let kept = 0;
    for (const t of tokens) {
      const col = this.vocabulary.lookup(t, grow);
      if (col < 0) continue;
      kept++;
      rowCounts.set(col, (rowCounts.get(col) ?? 0) + 1);
    }
    const n = rowCounts.size;
    if (this.scratch.length < n) this.scratch = new Uint32Array(Math.max(n, this.scratch.length * 2));
    const cols = this.scratch;
    let k = 0;
    for (const c of rowCounts.keys()) cols[k++] = c;
    const sorted = cols.subarray(0, n).sort();
    if (grow) this.vocabulary.countDocument(sorted, n);
    this.reserve(this.nnz + n);
    for (let i = 0; i < n; i++) {
      this.indices[this.nnz + i] = sorted[i];
      this.counts[this.nnz + i] = rowCounts.get(sorted[i])!;
    }
    this.nnz += n;
    this.indptr.push(this.nnz);
    return kept;
  }

  /** Adds every document of an iterable. */
  addAll(texts: Iterable<string>): this {
    for (const t of texts) this.add(t);
    return this;
  }

  /**
   * The rows added since the last build, weighted. `cols` is the vocabulary
   * size now (2^hashBits when hashing), so later batches may be wider.
   */
  build(): CsrMatrix & { values: Float32Array } {
    const rows = this.indptr.length - 1;
    const indptr = Uint32Array.from(this.indptr);
    const indices = this.indices.slice(0, this.nnz);
    const values = this.counts.slice(0, this.nnz);
    const w = this.options.weighting;
    if (w === 'binary') values.fill(1);
    else if (w === 'tfidf') for (let i = 0; i < values.length; i++) values[i] *= this.vocabulary.idf(indices[i]);
    this.indptr = [0];
    this.nnz = 0;
    return { rows, cols: this.vocabulary.size, indptr, indices, values };
  }

  /** add() each text, then build(). */
  transform(texts: Iterable<string>): CsrMatrix & { values: Float32Array } {
    return this.addAll(texts).build();
  }

  toJSON(): TextFeaturizerJSON {
    const v = this.vocabulary as Vocabulary | HashedVocabulary;
    return { format: 'cusim.text/1', ...this.options, frozen: this.isFrozen, vocabulary: v.toJSON() };
  }

  /** Restores a featurizer saved with toJSON() (or JSON.stringify). */
  static fromJSON(json: unknown): TextFeaturizer {
    const j = typeof json === 'string' ? (JSON.parse(json) as unknown) : json;
    if (!isObject(j) || j.format !== 'cusim.text/1') {
      throw typeError("json must be a saved TextFeaturizer (format 'cusim.text/1')");
    }
    const { format: _f, frozen, vocabulary, ...opts } = j;
    const vocab = (isObject(vocabulary) && vocabulary.kind === 'hashed' ? HashedVocabulary : Vocabulary).fromJSON(
      vocabulary,
      'json.vocabulary',
    );
    const f = new TextFeaturizer(opts as TextFeaturizerOptions, vocab);
    if (vocab instanceof HashedVocabulary && vocab.bits !== f.options.hashBits) {
      throw typeError(`json.vocabulary.bits=${vocab.bits} does not match json.hashBits=${f.options.hashBits}`);
    }
    if (frozen === true) f.freeze();
    return f;
  }

  private reserve(n: number): void {
    if (n <= this.indices.length) return;
    let cap = this.indices.length;
    while (cap < n) cap *= 2;
    const i = new Uint32Array(cap);
    i.set(this.indices.subarray(0, this.nnz));
    const c = new Float32Array(cap);
    c.set(this.counts.subarray(0, this.nnz));
    this.indices = i;
    this.counts = c;
  }
}
