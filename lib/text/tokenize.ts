// Tokenizers for the text featurizers. Each returns plain strings; the
// featurizer maps them to columns. They are written as hand-rolled scanners
// over char codes because regex-per-token splitting dominated featurization
// time on large source trees.

import { typeError } from '../errors.js';
import { checkInt, describe } from '../validate.js';

/**
 * Reserved words of the languages most often found in source trees (JS/TS,
 * Python, Java/C#, C/C++, Go, Rust, Ruby, PHP, shell). A bag of names keeps
 * the names people chose, not the syntax: `class WebServer(ServerBase)` is
 * web, server, server, base. Matched against the whole identifier as written,
 * so `className` still yields class + name.
 */
export const CODE_KEYWORDS: ReadonlySet<string> = new Set(
  (
    'abstract and as assert async await auto bool boolean break byte case catch chan char class const constexpr ' +
    'continue crate def default defer del delete do double dyn elif else elsif end ensure enum except export extends ' +
    'extern false final finally float fn for foreach friend from func function go goto if impl implements import in ' +
    'include inline instanceof int interface is lambda let long loop match mod module mut namespace native new nil ' +
    'none not null nullptr or package pass private protected pub public raise register rescue return select short ' +
    'signed sizeof static struct super switch synchronized template then this throw throws trait true try type ' +
    'typedef typename typeof uint union unless unsigned until use using var virtual void volatile where while with ' +
    'yield None True False self elif fi esac done'
  ).split(' '),
);

/** A short English stop-word list for `words` mode (`stopWords: true`). */
export const ENGLISH_STOP_WORDS: ReadonlySet<string> = new Set(
  (
    'a about above after again against all am an and any are as at be because been before being below between ' +
    'both but by can could did do does doing down during each few for from further had has have having he her here ' +
    'hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now of ' +
    'off on once only or other our ours ourselves out over own same she should so some such than that the their ' +
    'theirs them themselves then there these they this those through to too under until up very was we were what ' +
    'when where which while who whom why will with would you your yours yourself yourselves'
  ).split(' '),
);

// ASCII character classes in one table: the scanner's inner loop is a load.
const LOWER = 1;
const UPPER = 2;
const DIGIT = 4;
const OTHER_IDENT = 8; // _ and $
const CLASS = new Uint8Array(65536);
for (let c = 97; c <= 122; c++) CLASS[c] = LOWER;
for (let c = 65; c <= 90; c++) CLASS[c] = UPPER;
for (let c = 48; c <= 57; c++) CLASS[c] = DIGIT;
CLASS[95] = CLASS[36] = OTHER_IDENT;
const IDENT_START = LOWER | UPPER | OTHER_IDENT;
const IDENT_PART = IDENT_START | DIGIT;

const isUpper = (c: number): boolean => CLASS[c] === UPPER;
const isLower = (c: number): boolean => CLASS[c] === LOWER;

export interface CodeTokenOptions {
  /** Drop reserved words (see CODE_KEYWORDS). Default true. */
  dropKeywords?: boolean;
  /** Shortest sub-token kept, in characters. Default 2 (drops `i`, `x`). */
  minLength?: number;
}

/**
 * Splits one identifier into lowercase sub-tokens: snake_case and digits are
 * separators, camelCase and acronym boundaries split (`HTTPServer2Base` →
 * http, server, base). Pushes onto `out` to avoid an array per identifier.
 */
export function splitIdentifier(id: string, out: string[], minLength = 2): void {
  if (typeof id !== 'string') throw typeError(`id must be a string, got ${describe(id)}`);
  if (!Array.isArray(out)) throw typeError(`out must be an array, got ${describe(out)}`);
  const n = id.length;
  let start = -1;
  let upper = false;
  for (let i = 0; i <= n; i++) {
    const c = i < n ? id.charCodeAt(i) : 0;
    let cut = false;
    let begin = false;
    if (isUpper(c)) {
      if (start < 0) begin = true;
      else {
        const prev = id.charCodeAt(i - 1);
        const next = i + 1 < n ? id.charCodeAt(i + 1) : 0;
        // aB → split before B; ABc → split before B (acronym ends).
        if (isLower(prev) || (isUpper(prev) && isLower(next))) cut = begin = true;
      }
    } else if (isLower(c)) {
      if (start < 0) begin = true;
    } else if (start >= 0) {
      cut = true;
    }
    if (cut) {
      if (i - start >= minLength) {
        // Lowercase only when needed: most names are already lowercase, and
        // a whole lowercase identifier is pushed without any copy.
        const part = start === 0 && i === n ? id : id.slice(start, i);
        out.push(upper ? part.toLowerCase() : part);
      }
      start = -1;
    }
    if (begin) {
      start = i;
      upper = isUpper(c);
    } else if (start >= 0 && isUpper(c)) {
      upper = true;
    }
  }
}

/** Identifiers of source code, split into a bag of names. */
export function codeTokens(text: string, options: CodeTokenOptions = {}): string[] {
  if (typeof text !== 'string') throw typeError(`text must be a string, got ${describe(text)}`);
  if (typeof options !== 'object' || options === null) throw typeError(`options must be an object, got ${describe(options)}`);
  const { dropKeywords = true, minLength = 2 } = options;
  const out: string[] = [];
  const n = text.length;
  let i = 0;
  while (i < n) {
    const k = CLASS[text.charCodeAt(i)];
    if (k & IDENT_START) {
      let j = i + 1;
      while (j < n && CLASS[text.charCodeAt(j)] & IDENT_PART) j++;
      const id = text.slice(i, j);
      // Every keyword is 2–12 characters: skip the set lookup for the rest.
      if (!(dropKeywords && j - i >= 2 && j - i <= 12 && CODE_KEYWORDS.has(id))) splitIdentifier(id, out, minLength);
      i = j;
    } else if (k === DIGIT) {
      // Numeric literals such as 0x1fBar are not names: skip the whole run.
      let j = i + 1;
      while (j < n && CLASS[text.charCodeAt(j)] & IDENT_PART) j++;
      i = j;
    } else {
      i++;
    }
  }
  return out;
}

export interface WordTokenOptions {
  /** true for ENGLISH_STOP_WORDS, or your own list. Default: keep every word. */
  stopWords?: boolean | Iterable<string>;
  /** Shortest word kept, in code points. Default 1. */
  minLength?: number;
}

// Letters and digits of any script, plus combining marks so that words in
// scripts such as Devanagari stay whole.
const WORD_RE = /[\p{L}\p{N}\p{M}]+/gu;

export function stopWordSet(stopWords: WordTokenOptions['stopWords']): ReadonlySet<string> | undefined {
  if (stopWords === undefined || stopWords === false) return undefined;
  if (stopWords === true) return ENGLISH_STOP_WORDS;
  return new Set([...stopWords].map((w) => w.toLowerCase()));
}

/** Unicode words, lowercased (locale-independent), stop words removed. */
export function wordTokens(text: string, stop?: ReadonlySet<string>, minLength = 1): string[] {
  if (typeof text !== 'string') throw typeError(`text must be a string, got ${describe(text)}`);
  if (stop !== undefined && typeof (stop as { has?: unknown })?.has !== 'function')
    throw typeError(`stop must be a Set of words, got ${describe(stop)}`);
  const out: string[] = [];
  const lower = text.toLowerCase();
  for (const m of lower.matchAll(WORD_RE)) {
    const w = m[0];
    if (minLength > 1 && [...w].length < minLength) continue;
    if (stop && stop.has(w)) continue;
    out.push(w);
  }
  return out;
}

export interface QgramOptions {
  q?: number;
  /** Lowercase first. Default true. */
  lowercase?: boolean;
  /**
   * Pad with q−1 start (U+0002) and end (U+0003) marks, as the set-join
   * papers do, so prefixes and suffixes count. Default false.
   */
  pad?: boolean;
}

/**
 * Overlapping character q-grams over code points (never splitting a
 * surrogate pair). A non-empty string shorter than q is one gram by itself,
 * so short records still have a feature.
 */
const SURROGATE = /[\uD800-\uDFFF]/;

export function qgramTokens(text: string, q: number, lowercase = true, pad = false): string[] {
  if (typeof text !== 'string') throw typeError(`text must be a string, got ${describe(text)}`);
  // q = 0 would yield empty grams and NaN no grams at all, silently.
  checkInt(q, 'q', 1, 1024);
  let s = lowercase ? text.toLowerCase() : text;
  if (pad && s.length > 0) s = '\u0002'.repeat(q - 1) + s + '\u0003'.repeat(q - 1);
  const out: string[] = [];
  if (s.length === 0) return out;
  if (!SURROGATE.test(s)) {
    // Fast path: one UTF-16 unit per code point.
    if (s.length < q) out.push(s);
    else for (let i = 0; i + q <= s.length; i++) out.push(s.slice(i, i + q));
    return out;
  }
  const cps = Array.from(s);
  if (cps.length < q) {
    out.push(s);
    return out;
  }
  for (let i = 0; i + q <= cps.length; i++) {
    let g = cps[i];
    for (let k = 1; k < q; k++) g += cps[i + k];
    out.push(g);
  }
  return out;
}
