// Token → column maps. A Vocabulary grows as documents stream in (or stays
// frozen once reused); a HashedVocabulary maps any token to one of 2^bits
// columns with no state, for unbounded vocabularies. Both track document
// frequencies so TF-IDF can be computed, saved and reused.
import { rangeError, typeError } from '../errors.js';
import { checkInt, describe, isObject } from '../validate.js';

/** hashBits in [1, MAX_HASH_BITS]: columns stay below 2^31. */
export const MAX_HASH_BITS = 31;

/** Stable 32-bit string hash: FNV-1a over UTF-16 code units, then murmur3's fmix32. */
export function hashToken(s: string): number {
  // A non-string has no .length and would hash like '' without complaint.
  if (typeof s !== 'string') throw typeError(`token must be a string, got ${describe(s)}`);
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

function checkKeys(json: Record<string, unknown>, keys: string[], name: string): void {
  for (const k of Object.keys(json)) if (!keys.includes(k)) throw typeError(`${name}.${k} is not a field of a saved vocabulary`);
}

/** Growable Uint32 counts indexed by column. */
class Counts {
  data = new Uint32Array(1024);
  ensure(n: number): void {
    if (n <= this.data.length) return;
    let cap = this.data.length;
    while (cap < n) cap *= 2;
    const next = new Uint32Array(cap);
    next.set(this.data);
    this.data = next;
  }
}

export abstract class BaseVocabulary {
  /** Documents counted into `df`. */
  documents = 0;
  protected df = new Counts();

  /** Column of `token`, or -1 when it is unknown and the vocabulary cannot grow. */
  abstract lookup(token: string, grow: boolean): number;
  /** Number of columns a matrix over this vocabulary has. */
  abstract get size(): number;

  /** Records one document's distinct columns. */
  countDocument(distinctCols: Uint32Array, n: number): void {
    this.documents++;
    let max = 0;
    for (let i = 0; i < n; i++) if (distinctCols[i] >= max) max = distinctCols[i] + 1;
    this.df.ensure(max);
    const df = this.df.data;
    for (let i = 0; i < n; i++) df[distinctCols[i]]++;
  }

  /** Records rows[r] = cols[rowPtr[r], rowPtr[r + 1]) (distinct within a row) as documents. */
  countDocuments(cols: Uint32Array, rowPtr: Uint32Array): void {
    this.documents += rowPtr.length - 1;
    let max = 0;
    for (let i = 0; i < cols.length; i++) if (cols[i] >= max) max = cols[i] + 1;
    this.df.ensure(max);
    const df = this.df.data;
    for (let i = 0; i < cols.length; i++) df[cols[i]]++;
  }

  /** Document frequency of a column. */
  documentFrequency(col: number): number {
    return col < this.df.data.length ? this.df.data[col] : 0;
  }

  /**
   * Smoothed inverse document frequency, as scikit-learn's default:
   * ln((1 + N) / (1 + df)) + 1, so unseen and ubiquitous terms stay positive.
   */
  idf(col: number): number {
    return Math.log((1 + this.documents) / (1 + this.documentFrequency(col))) + 1;
  }

  protected dfArray(n: number): number[] {
    const out: number[] = [];
    for (let i = 0; i < n; i++) out.push(this.documentFrequency(i));
    return out;
  }

  protected loadDf(df: unknown, documents: unknown, name: string): void {
    this.documents = checkInt(documents, `${name}.documents`);
    if (!Array.isArray(df)) throw typeError(`${name}.df must be an array of integers, got ${describe(df)}`);
    this.df.ensure(df.length);
    // A term is in at most every document.
    df.forEach((v, i) => (this.df.data[i] = checkInt(v, `${name}.df[${i}]`, 0, Math.min(this.documents, 0xffffffff))));
  }
}

/** Explicit vocabulary: columns in first-seen order. */
export class Vocabulary extends BaseVocabulary {
  private readonly map = new Map<string, number>();
  private readonly terms: string[] = [];

  lookup(token: string, grow: boolean): number {
    const c = this.map.get(token);
    if (c !== undefined) return c;
    if (!grow) return -1;
    const col = this.terms.length;
    this.map.set(token, col);
    this.terms.push(token);
    return col;
  }

  get size(): number {
    return this.terms.length;
  }

  /** The token of a column. */
  term(col: number): string | undefined {
    return this.terms[col];
  }

  toJSON(): { kind: 'vocabulary'; terms: string[]; df: number[]; documents: number } {
    return { kind: 'vocabulary', terms: [...this.terms], df: this.dfArray(this.terms.length), documents: this.documents };
  }

  static fromJSON(json: unknown, name = 'vocabulary'): Vocabulary {
    if (!isObject(json) || json.kind !== 'vocabulary' || !Array.isArray(json.terms)) {
      throw typeError(`${name} must be a saved vocabulary { kind: 'vocabulary', terms, df, documents }`);
    }
    checkKeys(json, ['kind', 'terms', 'df', 'documents'], name);
    const v = new Vocabulary();
    json.terms.forEach((t, i) => {
      if (typeof t !== 'string') throw typeError(`${name}.terms[${i}] must be a string, got ${describe(t)}`);
      if (v.lookup(t, true) !== i) throw rangeError(`${name}.terms[${i}]='${t}' is listed twice`);
    });
    if (!Array.isArray(json.df) || json.df.length !== json.terms.length) {
      throw rangeError(`${name}.df must have one entry per term (${json.terms.length}), got ${describe(json.df)}`);
    }
    v.loadDf(json.df, json.documents, name);
    return v;
  }
}

/** Feature hashing: column = hashToken(token) mod 2^bits. Never grows. */
export class HashedVocabulary extends BaseVocabulary {
  readonly bits: number;
  private readonly mask: number;

  constructor(bits: number) {
    super();
    this.bits = checkInt(bits, 'hashBits', 1, MAX_HASH_BITS);
    this.mask = 2 ** this.bits - 1;
  }

  // Sparse: 2^bits dense counters could be gigabytes.
  private readonly sparseDf = new Map<number, number>();

  lookup(token: string): number {
    return (hashToken(token) & this.mask) >>> 0;
  }

  override countDocument(distinctCols: Uint32Array, n: number): void {
    this.documents++;
    for (let i = 0; i < n; i++) this.sparseDf.set(distinctCols[i], (this.sparseDf.get(distinctCols[i]) ?? 0) + 1);
  }

  override countDocuments(cols: Uint32Array, rowPtr: Uint32Array): void {
    this.documents += rowPtr.length - 1;
    for (let i = 0; i < cols.length; i++) this.sparseDf.set(cols[i], (this.sparseDf.get(cols[i]) ?? 0) + 1);
  }

  override documentFrequency(col: number): number {
    return this.sparseDf.get(col) ?? 0;
  }

  get size(): number {
    return 2 ** this.bits;
  }

  /** Sparse document frequencies: [column, df] pairs for columns seen. */
  toJSON(): { kind: 'hashed'; bits: number; df: [number, number][]; documents: number } {
    const df = [...this.sparseDf.entries()].sort((a, b) => a[0] - b[0]);
    return { kind: 'hashed', bits: this.bits, df, documents: this.documents };
  }

  static fromJSON(json: unknown, name = 'vocabulary'): HashedVocabulary {
    if (!isObject(json) || json.kind !== 'hashed') {
      throw typeError(`${name} must be a saved hashed vocabulary { kind: 'hashed', bits, df, documents }`);
    }
    checkKeys(json, ['kind', 'bits', 'df', 'documents'], name);
    const v = new HashedVocabulary(checkInt(json.bits, `${name}.bits`, 1, MAX_HASH_BITS));
    v.documents = checkInt(json.documents, `${name}.documents`);
    if (!Array.isArray(json.df)) throw typeError(`${name}.df must be an array of [column, df] pairs`);
    let last = -1;
    for (let i = 0; i < json.df.length; i++) {
      const p = json.df[i];
      if (!Array.isArray(p) || p.length !== 2) throw typeError(`${name}.df[${i}] must be a [column, df] pair`);
      // toJSON lists seen columns once each, ascending, with df >= 1.
      const col = checkInt(p[0], `${name}.df[${i}][0]`, last + 1, v.size - 1);
      v.sparseDf.set(col, checkInt(p[1], `${name}.df[${i}][1]`, 1, Math.min(v.documents, 0xffffffff)));
      last = col;
    }
    return v;
  }
}
