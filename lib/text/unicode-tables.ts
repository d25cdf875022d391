// The Unicode facts the native tokenizer needs for non-ASCII text, taken from
// this JavaScript engine itself, so that they agree with the JavaScript
// tokenizers (lib/text/tokenize.ts) by construction: which code points are
// word characters ([\p{L}\p{N}\p{M}]), what String.prototype.toLowerCase maps
// each one to, and the two properties toLowerCase's one context-dependent
// rule (Final_Sigma) reads. Built once per process, when the first native
// tokenizer for 'words' or 'qgrams' is made.

import { Worker } from 'node:worker_threads';

/** Code points: 0 to 0x10FFFF. */
const CODE_POINTS = 0x110000;
/** Code points per second-stage block. */
export const UNICODE_BLOCK = 256;

// One 32-bit entry per code point c (native/text_unicode.h reads the same layout):
// bits 0-20: (lower(c) - c) mod 2^21, or with MULTI an index into `extra`;
// WORD: c is a word character; IGNORABLE / CASED: Case_Ignorable / Cased as
// the Final_Sigma rule reads them; MULTI: lower(c) is extra[i + 1 .. i + extra[i]];
// CONTEXT: lower(c) depends on the text around c (U+03A3, Final_Sigma).
export const ENTRY = { WORD: 1 << 21, IGNORABLE: 1 << 22, CASED: 1 << 23, MULTI: 1 << 24, CONTEXT: 1 << 25 } as const;

/** A two-stage table: entry(c) = blocks[stage1[c >> 8] * 256 + (c & 255)]. */
export interface UnicodeTables {
  stage1: Uint16Array;
  blocks: Uint32Array;
  /** Lowercase expansions of more than one code point: count, then the code points. */
  extra: Uint32Array;
}

let cached: UnicodeTables | undefined;
let prefetching: Promise<void> | undefined;

/** The tables of this engine's Unicode data (built on the first call, about a second on a loaded core). */
export function unicodeTables(): UnicodeTables {
  return (cached ??= buildTables());
}

/**
 * Builds the tables on a worker thread (the same engine, so the same Unicode
 * data), for a caller with other startup work to do meanwhile (`cusim dedup`
 * while the GPU starts); unicodeTables() then returns them at once. Resolves
 * once they are here, or once the worker failed (unicodeTables() then builds
 * them on this thread, as without it).
 */
export function prefetchUnicodeTables(): Promise<void> {
  if (cached) return Promise.resolve();
  return (prefetching ??= new Promise<void>((resolve) => {
    let w: Worker;
    try {
      w = new Worker(new URL('./unicode-worker.js', import.meta.url));
    } catch {
      resolve();
      return;
    }
    w.once('message', (t: UnicodeTables) => {
      cached ??= t;
      resolve();
    });
    w.once('error', () => resolve());
    w.once('exit', () => resolve());
  }));
}

/** @internal The tables built here, for the worker of prefetchUnicodeTables. */
export function buildUnicodeTables(): UnicodeTables {
  return buildTables();
}

const COMMA = 0x2c;

/**
 * Sets `flag` on the code points of `s` (a block's code points joined by ',')
 * that `re` matches: one regex pass replaces each match by two U+0001 (no
 * code point's own string), then a scan of the code units finds them, with
 * no string made per code point.
 */
function flagsOf(s: string, re: RegExp, flag: number, entries: Uint32Array, base: number, count: number): void {
  const r = s.replace(re, '\x01\x01');
  // Code units of an unmatched code point, its ',' included.
  const step = base > 0xffff ? 3 : 2;
  for (let i = 0, at = 0; i < count; i++) {
    if (r.charCodeAt(at) === 1 && r.charCodeAt(at + 1) === 1) {
      entries[base + i] |= flag;
      at += 3;
    } else at += step;
  }
}

function buildTables(): UnicodeTables {
  const B = 4096;
  const entries = new Uint32Array(CODE_POINTS);
  const extra: number[] = [0];
  // Anchored and negated: one pass over the string, not a match tried at
  // every position (half the time of /[...]/u.test on the blocks it skips).
  const none = /^[^\p{L}\p{N}\p{M}\p{Case_Ignorable}\p{Cased}]*$/u;
  // Code points joined by ',' (itself ASCII, not cased, not a word
  // character): each is lowered, and tested, on its own, with no context
  // from its neighbours, and a lone surrogate never pairs with the next one.
  const cps = new Array<number>(2 * B - 1).fill(COMMA);
  const lowered: number[] = [];
  for (let base = 0; base < CODE_POINTS; base += B) {
    for (let i = 0; i < B; i++) cps[2 * i] = base + i === COMMA ? 0x41 : base + i;
    const s = String.fromCodePoint(...cps);
    const low = s.toLowerCase();
    // Most blocks (unassigned, private use, CJK) are all zero entries.
    if (low === s && none.test(s)) continue;
    // The same code points after a cased letter: where the whole block lowers
    // as it does alone, no code point in it depends on context.
    const after = ('A' + s.replaceAll(',', ',A')).toLowerCase();
    const context = after !== 'a' + low.replaceAll(',', ',a') ? after.split(',') : undefined;
    const lows = context && low.split(',');
    // lower(c) read off `low` code point by code point, up to its ','.
    for (let i = 0, at = 0; i < B; i++) {
      const c = base + i;
      lowered.length = 0;
      for (let u = low.charCodeAt(at); at < low.length && u !== COMMA; u = low.charCodeAt(at)) {
        const x = low.codePointAt(at)!;
        lowered.push(x);
        at += x > 0xffff ? 2 : 1;
      }
      at++;
      if (c === COMMA) continue;
      if (lowered.length === 1) entries[c] = (lowered[0] - c) & 0x1fffff;
      else {
        entries[c] = ENTRY.MULTI | extra.length;
        extra.push(lowered.length, ...lowered);
      }
      if (context && context[i].slice(1) !== lows![i]) entries[c] |= ENTRY.CONTEXT;
    }
    flagsOf(s, /[\p{L}\p{N}\p{M}]/gu, ENTRY.WORD, entries, base, B);
    flagsOf(s, /\p{Case_Ignorable}/gu, ENTRY.IGNORABLE, entries, base, B);
    flagsOf(s, /\p{Cased}/gu, ENTRY.CASED, entries, base, B);
    if (base === 0) entries[COMMA] = 0; // ',' stood in for 'A' above
  }
  const stage1 = new Uint16Array(CODE_POINTS / UNICODE_BLOCK);
  const ids = new Map<string, number>();
  const blocks: Uint32Array[] = [];
  for (let i = 0; i < stage1.length; i++) {
    const blk = entries.subarray(i * UNICODE_BLOCK, (i + 1) * UNICODE_BLOCK);
    const key = Buffer.from(blk.buffer, blk.byteOffset, blk.byteLength).toString('latin1');
    let id = ids.get(key);
    if (id === undefined) {
      id = blocks.length;
      ids.set(key, id);
      blocks.push(blk);
    }
    stage1[i] = id;
  }
  const flat = new Uint32Array(blocks.length * UNICODE_BLOCK);
  blocks.forEach((b, i) => flat.set(b, i * UNICODE_BLOCK));
  return { stage1, blocks: flat, extra: Uint32Array.from(extra) };
}
