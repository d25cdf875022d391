// Streaming text → CsrMatrix builder. Documents are added one at a time (or
// from any iterable); build() hands back the rows added since the last
// build, so a corpus of any size flows through in batches while the
// vocabulary and document frequencies keep growing across them.
import { MAX_TYPED_LENGTH } from '../addon.js';
import { rangeError, typeError } from '../errors.js';
import { checkEnum, checkInt, describe, isObject, checkTyped } from '../validate.js';
import type { CsrMatrix } from '../validate.js';
import { NativeTokenizer, assembleRows, countTokenLists, hashedRows, installUnicodeTables } from './batch.js';
import type { HashedRows, TokenBatch } from './batch.js';
import type { TextTokenizerNative, TokenHasherNative } from '../native-types.js';
import { CODE_KEYWORDS, codeTokens, qgramTokens, stopWordSet, wordTokens } from './tokenize.js';
import { BaseVocabulary, HashedVocabulary, MAX_HASH_BITS, Vocabulary } from './vocabulary.js';

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
  /**
   * Tokenize in native code (multi-threaded, same tokens, rows and
   * vocabulary as the JavaScript tokenizers). Default: whenever the addon
   * loads; false forces the JavaScript path; true fails when the addon is missing.
   */
  native?: boolean;
}

// Batches for the native path: large enough that the per-call cost and the
// per-batch vocabulary lookups amortize, small enough to bound the copy.
const BATCH_CHARS = 4 << 20;
/** Entries and rows a pending CSR can hold: a uint32 indptr, one typed array of indices. */
const NNZ_MAX = Math.min(MAX_TYPED_LENGTH, 0xffffffff);
const ROWS_MAX = Math.min(MAX_TYPED_LENGTH, 0xffffffff);
const BATCH_DOCS = 1 << 16;
// Below this, one document is tokenized faster in JavaScript than the native
// call's fixed cost; the result is the same either way.
const NATIVE_MIN_CHARS = 256;

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
  /** Check value of the other fields (fromJSON refuses a copy that does not match; absent: not checked). */
  checksum?: string;
  vocabulary: ReturnType<Vocabulary['toJSON']> | ReturnType<HashedVocabulary['toJSON']>;
}

const MODES = ['code', 'words', 'qgrams'] as const;
const REQUIRED_SETTINGS = ['mode', 'weighting', 'q', 'pad', 'lowercase', 'stopWords', 'dropKeywords', 'minLength', 'frozen', 'vocabulary'];
const JSON_KEYS = new Set(['format', 'hashBits', 'checksum', ...REQUIRED_SETTINGS]);

/**
 * 64-bit check value of JSON.stringify(body): FNV-1a and a multiply-xorshift
 * over its UTF-16 units, each finished with murmur3's fmix32. Any one changed
 * unit changes FNV-1a (each step is a bijection of the state), so a damaged
 * copy of a saved featurizer is caught.
 */
function jsonChecksum(body: unknown): string {
  const s = JSON.stringify(body);
  let a = 0x811c9dc5;
  let b = 0x9747b28c;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
    b ^= b >>> 15;
  }
  const fmix = (h: number): number => {
    h ^= h >>> 16;
    h = Math.imul(h, 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    return (h ^ (h >>> 16)) >>> 0;
  };
  return fmix(a).toString(16).padStart(8, '0') + fmix(b).toString(16).padStart(8, '0');
}
const WEIGHTINGS = ['count', 'binary', 'tfidf'] as const;

/** A batch's minTokens: documents with fewer tokens are left out (the native calls take a uint32 below 2^32 - 1). */
function checkMinTokens(v: unknown): number {
  return checkInt(v, 'minTokens', 0, 0xfffffffe);
}

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
    hashBits: opts.hashBits === undefined ? undefined : checkInt(opts.hashBits, `${name}.hashBits`, 1, MAX_HASH_BITS),
    q: checkInt(opts.q ?? 3, `${name}.q`, 1, 16),
    pad: bool('pad', false),
    lowercase: bool('lowercase', true),
    stopWords: stop as boolean | string[],
    dropKeywords: bool('dropKeywords', true),
    minLength: checkInt(opts.minLength ?? (mode === 'code' ? 2 : 1), `${name}.minLength`, 1, 1024),
  };
}

function checkTexts(texts: unknown): asserts texts is readonly string[] {
  if (!Array.isArray(texts)) throw typeError(`texts must be an array of strings, got ${describe(texts)}`);
  texts.forEach((t, i) => {
    if (typeof t !== 'string') throw typeError(`texts[${i}] must be a string, got ${describe(t)}`);
  });
}

export class TextFeaturizer {
  readonly options: Readonly<Settings>;
  readonly vocabulary: BaseVocabulary;
  private isFrozen = false;
  private readonly stop: ReadonlySet<string> | undefined;
  // Rows since the last build(): raw counts, weighted at build time so that
  // TF-IDF uses every document frequency seen up to then.
  // A typed array, not number[]: V8 aborts the process (no exception) when a
  // JavaScript array grows past ~10^8 elements.
  private indptr = new Uint32Array(1024);
  private rows = 0;
  private indices = new Uint32Array(4096);
  private counts = new Float32Array(4096);
  private nnz = 0;
  private scratch = new Uint32Array(256);
  private scratchCounts = new Uint32Array(256);
  // Exact per-column sums while a row is merged (float64: integers to 2^53).
  private sums = new Float64Array(256);
  private stamp = new Int32Array(1024);
  private slot = new Int32Array(1024);
  private rowStamp = 0;
  // Hashed columns span up to 2^31: slots go through a Map instead.
  private readonly hashedSlots: Map<number, number> | undefined;
  private readonly nativeTokenizer: NativeTokenizer | undefined;

  constructor(options?: TextFeaturizerOptions, vocabulary?: BaseVocabulary) {
    this.options = Object.freeze(settingsFrom(options, 'options'));
    this.stop = stopWordSet(this.options.stopWords);
    this.vocabulary = vocabulary ?? (this.options.hashBits !== undefined ? new HashedVocabulary(this.options.hashBits) : new Vocabulary());
    this.hashedSlots = this.vocabulary instanceof HashedVocabulary ? new Map() : undefined;
    this.nativeTokenizer = this.makeNativeTokenizer(isObject(options) ? options.native : undefined);
  }

  private makeNativeTokenizer(wanted: unknown): NativeTokenizer | undefined {
    if (wanted !== undefined && typeof wanted !== 'boolean') {
      throw typeError(`options.native must be a boolean, got ${describe(wanted)}`);
    }
    if (wanted === false) return undefined;
    const o = this.options;
    try {
      return new NativeTokenizer({
        mode: o.mode,
        minLength: o.minLength,
        dropKeywords: o.dropKeywords,
        keywords: [...CODE_KEYWORDS],
        stopWords: this.stop ? [...this.stop] : [],
        q: o.q,
        lowercase: o.lowercase,
        pad: o.pad,
      });
    } catch (e) {
      if (wanted === true) throw e;
      return undefined;
    }
  }

  /** Whether documents are tokenized natively (see options.native). */
  get native(): boolean {
    return this.nativeTokenizer !== undefined;
  }

  /** @internal The addon's tokenizer object, where documents are tokenized natively (the CLI's native record reader). */
  get nativeHandle(): TextTokenizerNative | undefined {
    // The reader's text is never seen here: non-ASCII must be ready for.
    if (this.nativeTokenizer && this.options.mode !== 'code') installUnicodeTables();
    return this.nativeTokenizer?.handle;
  }

  /**
   * @internal A token hasher on GPU `device` with this featurizer's options
   * (the native record reader hashes a block's texts with it), where the
   * documents are tokenized natively and the addon has one.
   */
  nativeTokenHasher(device: number): TokenHasherNative | undefined {
    if (!this.nativeTokenizer) return undefined;
    // The reader's text is never seen here: non-ASCII must be ready for.
    if (this.options.mode !== 'code') installUnicodeTables();
    return this.nativeTokenizer.tokenHasher(device);
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
    return this.rows;
  }

  /** Adds one document as the next row; returns its token count (after filtering). */
  add(text: string): number {
    if (this.nativeTokenizer && typeof text === 'string' && text.length >= NATIVE_MIN_CHARS) {
      return this.addTokenBatch(this.tokenizeBatch([text]));
    }
    return this.addTokens(this.tokenize(text));
  }

  /**
   * Adds each text with at least `minTokens` tokens as the next row, in
   * order; returns every text's token count (tokenize(text).length), so the
   * caller knows which became rows.
   */
  addBatch(texts: readonly string[], minTokens = 0): Uint32Array {
    checkMinTokens(minTokens);
    if (!this.nativeTokenizer) {
      const out = new Uint32Array(texts.length);
      texts.forEach((t, i) => {
        const tokens = this.tokenize(t);
        out[i] = tokens.length;
        if (tokens.length >= minTokens) this.addTokens(tokens);
      });
      return out;
    }
    const b = this.tokenizeBatch(texts, minTokens);
    this.addTokenBatch(b);
    return b.tokens;
  }

  /**
   * Rows of `texts` over hashed columns, hashToken(token) & (2^bits - 1) with
   * bits up to 32 (32: the 32-bit token hashes themselves, what MinHash
   * wants), token counts as values. Reads and changes no state of this
   * featurizer (no vocabulary, no document frequencies), so batches can be
   * featurized concurrently and concatenated; tokenizing, hashing and row
   * assembly run on the thread pool where the native tokenizer loads.
   * Documents with fewer than minTokens tokens are left out (`tokens` has
   * every document's count).
   */
  hashedRows(texts: readonly string[], options: { minTokens?: number; bits?: number } = {}): Promise<HashedRows> {
    checkTexts(texts);
    if (!isObject(options)) throw typeError(`options must be an object, got ${describe(options)}`);
    const minTokens = checkMinTokens(options.minTokens ?? 0);
    const bits = checkInt(options.bits ?? 32, 'bits', 1, 32);
    const tokenize = (t: string) => this.tokenize(t);
    return this.nativeTokenizer
      ? this.nativeTokenizer.hashedRowsAsync(texts, minTokens, bits, tokenize)
      : hashedRows(undefined, texts, minTokens, bits, tokenize);
  }

  /**
   * Tokenizes and counts `texts` against a batch-local dictionary without
   * touching this featurizer's state, so it can run on another thread (see
   * lib/cli/featurize-worker.ts); addTokenBatch() then adds the rows.
   */
  tokenizeBatch(texts: readonly string[], minTokens = 0): TokenBatch {
    checkTexts(texts);
    checkMinTokens(minTokens);
    if (this.nativeTokenizer) return this.nativeTokenizer.tokenizeBatch(texts, minTokens, (t) => this.tokenize(t));
    const tokenize = (t: string) => this.tokenize(t);
    return countTokenLists(
      (function* () {
        for (const t of texts) yield tokenize(t);
      })(),
      minTokens,
    );
  }

  /**
   * tokenizeBatch() with the native tokenizer running on the thread pool,
   * off the event loop (a server can keep serving meanwhile). Without the
   * native tokenizer it tokenizes synchronously and resolves at once.
   */
  async tokenizeBatchAsync(texts: readonly string[], minTokens = 0): Promise<TokenBatch> {
    if (!this.nativeTokenizer) return this.tokenizeBatch(texts, minTokens);
    checkTexts(texts);
    checkMinTokens(minTokens);
    return this.nativeTokenizer.tokenizeBatchAsync(texts, minTokens, (t) => this.tokenize(t));
  }

  /**
   * Adds the rows of a batch from tokenizeBatch() (documents with at least
   * batch.minTokens tokens), looking each distinct term up once. Gives the
   * same rows, vocabulary and document frequencies as add() on each kept
   * document; returns the tokens kept (after vocabulary filtering).
   */
  addTokenBatch(b: TokenBatch): number {
    if (!isObject(b) || !Array.isArray(b.terms)) throw typeError(`batch must be a TokenBatch, got ${describe(b)}`);
    const docs = b.tokens.length;
    if (b.indptr.length !== docs + 1 || b.ids.length !== b.counts.length || b.indptr[docs] > b.ids.length) {
      throw rangeError('batch is inconsistent: indptr must have tokens.length + 1 entries ending within ids');
    }
    const grow = !this.isFrozen;
    const remap = new Int32Array(b.terms.length);
    for (let i = 0; i < b.terms.length; i++) remap[i] = this.vocabulary.lookup(b.terms[i], grow);
    if (this.nativeTokenizer) {
      // Sorting and merging rows natively (over all cores) is the same
      // appendRow() below; it dominated the native path's time in JS.
      const r = assembleRows(b, remap);
      this.reserve(this.nnz + r.cols.length);
      this.indices.set(r.cols, this.nnz);
      this.counts.set(r.values, this.nnz);
      if (grow) this.vocabulary.countDocuments(r.cols, r.rowPtr);
      for (let i = 1; i < r.rowPtr.length; i++) this.pushRow(this.nnz + r.rowPtr[i]);
      this.nnz += r.cols.length;
      return r.kept;
    }
    let kept = 0;
    for (let d = 0; d < docs; d++) {
      if (b.tokens[d] >= b.minTokens) kept += this.addRemappedRange(b.ids, b.counts, b.indptr[d], b.indptr[d + 1], remap);
    }
    return kept;
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
    localCols = checkTyped(localCols, Uint32Array, 'localCols');
    counts = checkTyped(counts, Uint32Array, 'counts');
    remap = checkTyped(remap, Int32Array, 'remap');
    if (counts.length !== localCols.length) {
      throw rangeError(`counts has length ${counts.length} but localCols has ${localCols.length}`);
    }
    return this.addRemappedRange(localCols, counts, 0, localCols.length, remap);
  }

  /** addRemapped() over localCols[b, e): no subarray per row. */
  private addRemappedRange(localCols: Uint32Array, counts: Uint32Array, b: number, e: number, remap: Int32Array): number {
    let n = 0;
    let kept = 0;
    for (let i = b; i < e; i++) {
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

  /**
   * Appends scratch[0..n) (columns with counts) as the next row: columns
   * ascending, equal columns (remapped terms hashing alike) summed exactly
   * and rounded to float32 once.
   */
  private appendRow(n: number, countDf: boolean): void {
    let maxCol = 0;
    for (let i = 0; i < n; i++) if (this.scratch[i] > maxCol) maxCol = this.scratch[i];
    this.reserve(this.nnz + n);
    const base = this.nnz;
    let m = 0;
    if (maxCol < 2 ** 21) {
      // Sort (col, count) pairs by col as one float64 key each: exact while
      // col · 2^32 + count < 2^53.
      const keys = new Float64Array(n);
      for (let i = 0; i < n; i++) keys[i] = this.scratch[i] * 4294967296 + this.scratchCounts[i];
      keys.sort();
      for (let i = 0; i < n; i++) {
        const col = Math.floor(keys[i] / 4294967296);
        const count = keys[i] - col * 4294967296;
        if (m > 0 && this.scratch[m - 1] === col) {
          this.sums[m - 1] += count;
          continue;
        }
        this.scratch[m] = col;
        this.sums[m++] = count;
      }
    } else {
      // Wide columns (hashBits > 21, vocabularies past 2M terms): packed
      // keys would round the counts away, so sum per column, then sort.
      const by = new Map<number, number>();
      for (let i = 0; i < n; i++) by.set(this.scratch[i], (by.get(this.scratch[i]) ?? 0) + this.scratchCounts[i]);
      for (const col of Float64Array.from(by.keys()).sort()) {
        this.scratch[m] = col;
        this.sums[m++] = by.get(col)!;
      }
    }
    for (let i = 0; i < m; i++) {
      this.indices[base + i] = this.scratch[i];
      this.counts[base + i] = this.sums[i];
    }
    if (countDf) this.vocabulary.countDocument(this.scratch.subarray(0, m), m);
    this.nnz += m;
    this.pushRow(this.nnz);
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
    this.sums = new Float64Array(c.length);
  }

  /** Adds every document of an iterable (in batches on the native path). */
  addAll(texts: Iterable<string>): this {
    if (!this.nativeTokenizer) {
      for (const t of texts) this.add(t);
      return this;
    }
    let batch: string[] = [];
    let chars = 0;
    for (const t of texts) {
      if (typeof t !== 'string') {
        // Rows before the bad text are added, as on the one-by-one path.
        this.addBatch(batch);
        throw typeError(`text must be a string, got ${describe(t)}`);
      }
      batch.push(t);
      chars += t.length;
      if (chars >= BATCH_CHARS || batch.length >= BATCH_DOCS) {
        this.addBatch(batch);
        batch = [];
        chars = 0;
      }
    }
    if (batch.length > 0) this.addBatch(batch);
    return this;
  }

  /**
   * The rows added since the last build, weighted. `cols` is the vocabulary
   * size now (2^hashBits when hashing), so later batches may be wider.
   */
  build(): CsrMatrix & { values: Float32Array } {
    const rows = this.rows;
    const indptr = this.indptr.slice(0, rows + 1);
    const indices = this.indices.slice(0, this.nnz);
    const values = this.counts.slice(0, this.nnz);
    const w = this.options.weighting;
    if (w === 'binary') values.fill(1);
    else if (w === 'tfidf') for (let i = 0; i < values.length; i++) values[i] *= this.vocabulary.idf(indices[i]);
    this.indptr = new Uint32Array(1024);
    this.rows = 0;
    this.nnz = 0;
    return { rows, cols: this.vocabulary.size, indptr, indices, values };
  }

  /** add() each text, then build(). */
  transform(texts: Iterable<string>): CsrMatrix & { values: Float32Array } {
    return this.addAll(texts).build();
  }

  toJSON(): TextFeaturizerJSON {
    const v = this.vocabulary as Vocabulary | HashedVocabulary;
    const body = { format: 'cusim.text/1' as const, ...this.options, frozen: this.isFrozen, vocabulary: v.toJSON() };
    return { ...body, checksum: jsonChecksum(body) };
  }

  /**
   * Restores a featurizer saved with toJSON() (or JSON.stringify). Every field
   * is checked: malformed JSON, missing, unknown or inconsistent fields and
   * impossible statistics are coded TypeError/RangeError, never a silently
   * different featurizer.
   */
  static fromJSON(json: unknown): TextFeaturizer {
    let j = json;
    if (typeof json === 'string') {
      try {
        j = JSON.parse(json) as unknown;
      } catch (e) {
        throw typeError(`json is not valid JSON: ${(e as Error).message}`);
      }
    }
    if (!isObject(j) || j.format !== 'cusim.text/1') {
      throw typeError("json must be a saved TextFeaturizer (format 'cusim.text/1')");
    }
    for (const k of Object.keys(j)) {
      if (!JSON_KEYS.has(k)) throw typeError(`json.${k} is not a field of a saved TextFeaturizer`);
    }
    for (const k of REQUIRED_SETTINGS) {
      if (j[k] === undefined) throw typeError(`json.${k} is missing`);
    }
    if (typeof j.frozen !== 'boolean') throw typeError(`json.frozen must be a boolean, got ${describe(j.frozen)}`);
    const { format: _f, frozen, vocabulary, checksum, ...opts } = j;
    if (checksum !== undefined) {
      const { checksum: _c, ...body } = j;
      if (typeof checksum !== 'string' || checksum !== jsonChecksum(body)) {
        throw rangeError(
          'json.checksum does not match its contents: the saved featurizer was altered or damaged (delete checksum to load an edited file)',
        );
      }
    }
    const hashed = isObject(vocabulary) && vocabulary.kind === 'hashed';
    if (hashed !== (opts.hashBits !== undefined)) {
      throw typeError(
        `json.vocabulary.kind must be ${opts.hashBits !== undefined ? "'hashed' with json.hashBits" : "'vocabulary' without json.hashBits"}`,
      );
    }
    const vocab = (hashed ? HashedVocabulary : Vocabulary).fromJSON(vocabulary, 'json.vocabulary');
    const f = new TextFeaturizer({ ...(opts as TextFeaturizerOptions), native: undefined }, vocab);
    if (vocab instanceof HashedVocabulary && vocab.bits !== f.options.hashBits) {
      throw rangeError(`json.vocabulary.bits=${vocab.bits} does not match json.hashBits=${f.options.hashBits}`);
    }
    if (frozen) f.freeze();
    return f;
  }

  private pushRow(end: number): void {
    if (this.rows + 2 > this.indptr.length) {
      if (this.rows + 2 > ROWS_MAX) throw rangeError(`pending rows exceed ${ROWS_MAX - 1}; call build() more often`);
      const next = new Uint32Array(Math.min(ROWS_MAX, this.indptr.length * 2));
      next.set(this.indptr);
      this.indptr = next;
    }
    this.indptr[++this.rows] = end;
  }

  private reserve(n: number): void {
    if (n <= this.indices.length) return;
    // A CsrMatrix's indices are one typed array indexed by a uint32 indptr.
    if (n > NNZ_MAX) {
      throw rangeError(
        `pending rows would hold ${n} entries, more than one CsrMatrix holds (${NNZ_MAX}); call build() more often (each build() returns the rows added since the last)`,
      );
    }
    let cap = this.indices.length;
    while (cap < n) cap = Math.min(cap * 2, NNZ_MAX);
    const i = new Uint32Array(cap);
    i.set(this.indices.subarray(0, this.nnz));
    const c = new Float32Array(cap);
    c.set(this.counts.subarray(0, this.nnz));
    this.indices = i;
    this.counts = c;
  }
}
