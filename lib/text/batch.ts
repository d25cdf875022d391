// Token batches: documents counted against a batch-local dictionary, so that
// the vocabulary is consulted once per distinct token per batch instead of
// once per token. The native tokenizer (native/text_cpu.cc) fills one for
// the documents it can handle exactly; the rest go through the JavaScript
// tokenizers and are merged in, in document order.
import { native } from '../addon.js';
import type { NativeTokenBatch, TextRows, TextTokenizerNative, TextTokenizerOptions, TokenHasherNative } from '../native-types.js';
import { rangeError, typeError } from '../errors.js';
import { hashToken } from './vocabulary.js';
import { unicodeTables } from './unicode-tables.js';
import type { TokenBatch } from '../types.js';
export type { TokenBatch } from '../types.js';

/** tokens[d] of the native result for a document JavaScript must tokenize. */
const FALLBACK = 0xffffffff;

/** Builds a TokenBatch document by document, in order. */
class BatchBuilder {
  private readonly dict = new Map<string, number>();
  private readonly terms: string[] = [];
  private readonly tokens: number[] = [];
  private readonly indptr: number[] = [0];
  private readonly ids: number[] = [];
  private readonly counts: number[] = [];
  private readonly row = new Map<number, number>();

  constructor(private readonly minTokens: number) {}

  termId(t: string): number {
    let id = this.dict.get(t);
    if (id === undefined) {
      id = this.terms.length;
      this.dict.set(t, id);
      this.terms.push(t);
    }
    return id;
  }

  /** A document split into tokens in JavaScript. */
  addList(toks: readonly string[]): void {
    this.tokens.push(toks.length);
    if (toks.length >= this.minTokens) {
      this.row.clear();
      for (const t of toks) {
        const id = this.termId(t);
        this.row.set(id, (this.row.get(id) ?? 0) + 1);
      }
      for (const [id, c] of this.row) {
        this.ids.push(id);
        this.counts.push(c);
      }
    }
    this.indptr.push(this.ids.length);
  }

  /** Document d of a native batch; fromNative caches its term ids here (-1: not yet). */
  addNative(raw: NativeTokenBatch, d: number, fromNative: Int32Array): void {
    this.tokens.push(raw.tokens[d]);
    for (let k = raw.indptr[d]; k < raw.indptr[d + 1]; k++) {
      const local = raw.ids[k];
      if (fromNative[local] < 0) fromNative[local] = this.termId(raw.terms[local]);
      this.ids.push(fromNative[local]);
      this.counts.push(raw.counts[k]);
    }
    this.indptr.push(this.ids.length);
  }

  finish(): TokenBatch {
    return {
      minTokens: this.minTokens,
      terms: this.terms,
      tokens: Uint32Array.from(this.tokens),
      indptr: Uint32Array.from(this.indptr),
      ids: Uint32Array.from(this.ids),
      counts: Uint32Array.from(this.counts),
    };
  }
}

/** Counts documents already split into tokens (the JavaScript path). */
export function countTokenLists(lists: Iterable<readonly string[]>, minTokens: number): TokenBatch {
  const b = new BatchBuilder(minTokens);
  for (const toks of lists) b.addList(toks);
  return b.finish();
}

// One encoding buffer for synchronous calls: the native call has finished
// reading it before the next batch is written.
let scratch = Buffer.allocUnsafeSlow(1 << 16);
const SCRATCH_MAX = 64 << 20;

/** UTF-8 of every text, back to back; `own` gives a buffer of its own (async calls read it later). */
export function encode(texts: readonly string[], own: boolean): { bytes: Buffer; offsets: Uint32Array } {
  let cap = 0;
  // A UTF-16 unit is at most 3 bytes of UTF-8 (a surrogate pair is 4 for 2).
  for (const t of texts) cap += 3 * t.length;
  if (cap >= 2 ** 32) throw rangeError(`texts must total under 4 GiB of UTF-8 per batch (${texts.length} texts)`);
  let bytes = scratch;
  // One huge document must not pin its size in memory for the process's life.
  if (own || cap > SCRATCH_MAX) bytes = Buffer.allocUnsafeSlow(cap);
  else if (scratch.length < cap) bytes = scratch = Buffer.allocUnsafeSlow(Math.min(SCRATCH_MAX, Math.max(cap, scratch.length * 2)));
  const offsets = new Uint32Array(texts.length + 1);
  let off = 0;
  let ascii = true;
  for (let i = 0; i < texts.length; i++) {
    const t = texts[i];
    const n = bytes.write(t, off, 'utf8');
    ascii &&= n === t.length;
    // Buffer#write turns a lone surrogate into U+FFFD, which a q-gram would
    // then hash differently: such strings are written as WTF-8 instead.
    off += n === t.length || isWellFormed(t) ? n : writeWtf8(t, bytes, off);
    offsets[i + 1] = off;
  }
  // The tables cost a fraction of a second to build: only text that needs them pays.
  if (!ascii) installUnicodeTables();
  return { bytes, offsets };
}

const isWellFormed = (t: string): boolean => (t as unknown as { isWellFormed(): boolean }).isWellFormed();

/** UTF-8 of `t` with each lone surrogate as its own 3-byte sequence (native/text_unicode.h, wtf8). */
function writeWtf8(t: string, out: Buffer, at: number): number {
  let o = at;
  for (let i = 0; i < t.length; i++) {
    let c = t.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < t.length) {
      const d = t.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        i++;
      }
    }
    if (c < 0x80) out[o++] = c;
    else if (c < 0x800) {
      out[o++] = 0xc0 | (c >> 6);
      out[o++] = 0x80 | (c & 0x3f);
    } else if (c < 0x10000) {
      out[o++] = 0xe0 | (c >> 12);
      out[o++] = 0x80 | ((c >> 6) & 0x3f);
      out[o++] = 0x80 | (c & 0x3f);
    } else {
      out[o++] = 0xf0 | (c >> 18);
      out[o++] = 0x80 | ((c >> 12) & 0x3f);
      out[o++] = 0x80 | ((c >> 6) & 0x3f);
      out[o++] = 0x80 | (c & 0x3f);
    }
  }
  return o - at;
}

/**
 * Hands this engine's Unicode tables (lib/text/unicode-tables.ts) to the addon
 * once per process, so that 'words' and 'qgrams' tokenize non-ASCII text
 * natively. encode() calls it on the first non-ASCII text; callers that hand
 * the addon bytes JavaScript never sees (the native record reader) call it first.
 */
export function installUnicodeTables(): void {
  const set = native().setUnicodeTables;
  if (installed || typeof set !== 'function') return;
  const t = unicodeTables();
  set(t.stage1, t.blocks, t.extra);
  installed = true;
}
let installed = false;

/** Kept documents of a batch as rows over remapped columns (see native/text.h AssembleRows). */
export function assembleRows(b: TokenBatch, remap: Int32Array): TextRows {
  return native().assembleTextRows(b.indptr, b.tokens, b.minTokens, b.ids, b.counts, remap);
}

/** The native tokenizer for one set of featurizer settings. */
export class NativeTokenizer {
  /** The addon's tokenizer object (the native record reader runs on it). */
  readonly handle: TextTokenizerNative;

  constructor(readonly options: TextTokenizerOptions) {
    const Tokenizer = native().TextTokenizer;
    if (typeof Tokenizer !== 'function') {
      throw typeError(
        'native: true needs the native tokenizer, which the loaded cusim addon lacks (an older build): rebuild it with `npm run build`, or pass native: false',
      );
    }
    this.handle = new Tokenizer(options);
  }

  /**
   * A token hasher with these options on GPU `device` (the native record
   * reader's `hasher`: the same rows as this tokenizer gives), or undefined
   * where the addon has none.
   */
  tokenHasher(device: number): TokenHasherNative | undefined {
    const Hasher = native().TokenHasher;
    return typeof Hasher === 'function' ? new Hasher(this.options, { device }) : undefined;
  }

  /**
   * Counts `texts` natively where that is exact and with `jsTokenize`
   * elsewhere, giving the same batch as countTokenLists(texts.map(jsTokenize)).
   */
  tokenizeBatch(texts: readonly string[], minTokens: number, jsTokenize: (t: string) => string[]): TokenBatch {
    const { bytes, offsets } = encode(texts, false);
    return finish(texts, this.handle.tokenize(bytes, offsets, minTokens), minTokens, jsTokenize);
  }

  /**
   * `texts` as rows over hashed columns, hashToken(token) & (2^bits - 1)
   * (bits up to 32: token hashes), with no vocabulary: tokenizing, hashing and
   * assembling run on the thread pool; documents left to JavaScript go
   * through `jsTokenize`. The same rows as a featurizer with hashBits = bits
   * would build (count weighting), for bits <= 31.
   */
  hashedRowsAsync(texts: readonly string[], minTokens: number, bits: number, jsTokenize: (t: string) => string[]): Promise<HashedRows> {
    return hashedRows(this.handle, texts, minTokens, bits, jsTokenize);
  }

  /** tokenizeBatch() with the native part on the thread pool, off the event loop. */
  async tokenizeBatchAsync(texts: readonly string[], minTokens: number, jsTokenize: (t: string) => string[]): Promise<TokenBatch> {
    // The texts as they are now: documents left to JavaScript are read after
    // the await, when the caller may have changed its array.
    const own = Array.from(texts);
    const { bytes, offsets } = encode(own, true);
    return finish(own, await this.handle.tokenizeAsync(bytes, offsets, minTokens), minTokens, jsTokenize);
  }
}

/** Rows over hashed columns (see NativeTokenizer.hashedRowsAsync). */
export interface HashedRows {
  /** Per document: its number of tokens (tokenize(text).length). */
  tokens: Uint32Array;
  /** Kept documents (tokens >= minTokens) + 1 entries. */
  indptr: Uint32Array;
  /** hashToken(token) & (2^bits - 1), ascending within a row; equal columns summed. */
  indices: Uint32Array;
  values: Float32Array;
}

/** Kept documents of `texts` as rows over hashToken columns, in document order. */
export async function hashedRows(
  handle: TextTokenizerNative | undefined,
  texts: readonly string[],
  minTokens: number,
  bits: number,
  jsTokenize: (t: string) => string[],
): Promise<HashedRows> {
  const own = Array.from(texts);
  let r: Omit<TextRows, 'kept'> & { tokens: Uint32Array };
  if (handle) {
    const { bytes, offsets } = encode(own, true);
    r = await handle.hashedRowsAsync(bytes, offsets, minTokens, bits);
  } else {
    r = {
      tokens: new Uint32Array(own.length).fill(FALLBACK),
      rowPtr: Uint32Array.of(0),
      cols: new Uint32Array(0),
      values: new Float32Array(0),
    };
  }
  if (!r.tokens.includes(FALLBACK)) return { tokens: r.tokens, indptr: r.rowPtr, indices: r.cols, values: r.values };
  // Documents the native tokenizer leaves to JavaScript (an addon without
  // the Unicode tables, or a lowercasing rule it does not reproduce):
  // tokenized here and spliced in at their place.
  const mask = bits === 32 ? 0xffffffff : 2 ** bits - 1;
  const tokens = r.tokens.slice();
  const rows: { at: number; cols: Uint32Array; values: Float32Array }[] = [];
  let kept = 0;
  for (let d = 0; d < own.length; d++) {
    if (r.tokens[d] !== FALLBACK) {
      if (r.tokens[d] >= minTokens) kept++;
      continue;
    }
    const toks = jsTokenize(own[d]);
    tokens[d] = toks.length;
    if (toks.length < minTokens) continue;
    const counts = new Map<number, number>();
    for (const t of toks) {
      const c = (hashToken(t) & mask) >>> 0;
      counts.set(c, (counts.get(c) ?? 0) + 1);
    }
    const cols = Uint32Array.from(counts.keys()).sort();
    rows.push({ at: kept++, cols, values: Float32Array.from(cols, (c) => counts.get(c)!) });
  }
  const extra = rows.reduce((a, x) => a + x.cols.length, 0);
  const indptr = new Uint32Array(kept + 1);
  const indices = new Uint32Array(r.cols.length + extra);
  const values = new Float32Array(r.cols.length + extra);
  let src = 0; // native row
  let nz = 0;
  let next = 0; // rows[next]
  for (let row = 0; row < kept; row++) {
    if (next < rows.length && rows[next].at === row) {
      indices.set(rows[next].cols, nz);
      values.set(rows[next].values, nz);
      nz += rows[next].cols.length;
      next++;
    } else {
      const a = r.rowPtr[src];
      const b = r.rowPtr[src + 1];
      indices.set(r.cols.subarray(a, b), nz);
      values.set(r.values.subarray(a, b), nz);
      nz += b - a;
      src++;
    }
    indptr[row + 1] = nz;
  }
  return { tokens, indptr, indices, values };
}

function finish(texts: readonly string[], raw: NativeTokenBatch, minTokens: number, jsTokenize: (t: string) => string[]): TokenBatch {
  if (!raw.tokens.includes(FALLBACK)) return { minTokens, ...raw };
  return mergeFallback(texts, raw, minTokens, jsTokenize);
}

/**
 * Renumbers a native batch with some documents left to JavaScript into one
 * dictionary in first-occurrence order over all kept documents.
 */
function mergeFallback(
  texts: readonly string[],
  raw: NativeTokenBatch,
  minTokens: number,
  jsTokenize: (t: string) => string[],
): TokenBatch {
  const b = new BatchBuilder(minTokens);
  const fromNative = new Int32Array(raw.terms.length).fill(-1);
  for (let d = 0; d < texts.length; d++) {
    if (raw.tokens[d] === FALLBACK) b.addList(jsTokenize(texts[d]));
    else b.addNative(raw, d, fromNative);
  }
  return b.finish();
}
