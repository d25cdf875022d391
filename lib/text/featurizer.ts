// Streaming text → CsrMatrix builder. Documents are added one at a time (or
// from any iterable); build() hands back the rows added since the last
// build, so a corpus of any size flows through in batches while the
// vocabulary and document frequencies keep growing across them.
import { rangeError, typeError } from '../errors.js';
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
  private scratchCounts = new Uint32Array(256);
  private stamp = new Int32Array(1024);
  private slot = new Int32Array(1024);
  private rowStamp = 0;
  // Hashed columns span up to 2^31: slots go through a Map instead.
  private readonly hashedSlots: Map<number, number> | undefined;

  constructor(options?: TextFeaturizerOptions, vocabulary?: BaseVocabulary) {
    this.options = Object.freeze(settingsFrom(options, 'options'));
    this.stop = stopWordSet(this.options.stopWords);
    this.vocabulary =
      vocabulary ?? (this.options.hashBits !== undefined ? new HashedVocabulary(this.options.hashBits) : new Vocabulary());
    this.hashedSlots = this.vocabulary instanceof HashedVocabulary ? new Map() : undefined;
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
    // Distinct columns of this row and their counts: a stamp per column
    // (explicit vocabularies are dense) instead of a Map per row.
    let n = 0;
    let kept = 0;
    const row = ++this.rowStamp;
    for (const t of tokens) {
      const col = this.vocabulary.lookup(t, grow);
      if (col < 0) continue;
      kept++;
      const slot = this.slotOf(col, row, n);
      if (slot === n) {
        if (this.scratch.length <= n) this.growScratch();
        this.scratch[n] = col;
        this.scratchCounts[n] = 0;
        n++;
      }
      this.scratchCounts[slot]++;
    }
    if (this.hashedSlots) this.hashedSlots.clear();
    this.appendRow(n, grow);
    return kept;
  }

  /**
   * Adds one row counted elsewhere (a worker thread): distinct local term ids
   * with their counts, and `remap` from local ids to this vocabulary's
   * columns (-1: unknown to a frozen vocabulary). Gives the same row as add().
   */
  addRemapped(localCols: Uint32Array, counts: Uint32Array, remap: Int32Array): number {
    if (!(localCols instanceof Uint32Array)) throw typeError(`localCols must be a Uint32Array, got ${describe(localCols)}`);
    if (!(counts instanceof Uint32Array)) throw typeError(`counts must be a Uint32Array, got ${describe(counts)}`);
    if (!(remap instanceof Int32Array)) throw typeError(`remap must be an Int32Array, got ${describe(remap)}`);
    if (counts.length !== localCols.length) {
      throw rangeError(`counts has length ${counts.length} but localCols has ${localCols.length}`);
    }
    let n = 0;
    let kept = 0;
    for (let i = 0; i < localCols.length; i++) {
      // Past the end, remap reads undefined, which would land in column 0.
      if (localCols[i] >= remap.length) {
        throw rangeError(`localCols[${i}]=${localCols[i]} is out of range for remap.length=${remap.length}`);
      }
      const col = remap[localCols[i]];
      if (col < 0) continue;
      if (this.scratch.length <= n) this.growScratch();
      this.scratch[n] = col;
      this.scratchCounts[n] = counts[i];
      kept += counts[i];
      n++;
    }
    this.appendRow(n, !this.isFrozen);
    return kept;
  }

  /** Appends scratch[0..n) (distinct columns, with counts) as the next row. */
  private appendRow(n: number, countDf: boolean): void {
    // Sort (col, count) pairs by col: pack both into one float64 key.
    const keys = new Float64Array(n);
    for (let i = 0; i < n; i++) keys[i] = this.scratch[i] * 4294967296 + this.scratchCounts[i];
    keys.sort();
    this.reserve(this.nnz + n);
    // Equal columns (two remapped terms hashing alike) merge by summing.
    let m = 0;
    for (let i = 0; i < n; i++) {
      const col = Math.floor(keys[i] / 4294967296);
      const count = keys[i] - col * 4294967296;
      if (m > 0 && this.scratch[m - 1] === col) {
        this.counts[this.nnz + m - 1] += count;
        continue;
      }
      this.scratch[m] = col;
      this.indices[this.nnz + m] = col;
      this.counts[this.nnz + m] = count;
      m++;
    }
    if (countDf) this.vocabulary.countDocument(this.scratch.subarray(0, m), m);
    this.nnz += m;
    this.indptr.push(this.nnz);
  }

  /** Where `col` sits in this row's scratch list, or `n` when it is new. */
  private slotOf(col: number, row: number, n: number): number {
    if (this.hashedSlots) {
      const s = this.hashedSlots.get(col);
      if (s !== undefined) return s;
      this.hashedSlots.set(col, n);
      return n;
    }
    if (col >= this.stamp.length) {
      let cap = this.stamp.length;
      while (cap <= col) cap *= 2;
      const st = new Int32Array(cap);
      st.set(this.stamp);
      const sl = new Int32Array(cap);
      sl.set(this.slot);
      this.stamp = st;
      this.slot = sl;
    }
    if (this.stamp[col] === row) return this.slot[col];
    this.stamp[col] = row;
    this.slot[col] = n;
    return n;
  }

  private growScratch(): void {
    const c = new Uint32Array(this.scratch.length * 2);
    c.set(this.scratch);
    const k = new Uint32Array(this.scratch.length * 2);
    k.set(this.scratchCounts);
    this.scratch = c;
    this.scratchCounts = k;
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
