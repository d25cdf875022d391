// The Unicode facts the native tokenizer needs for non-ASCII text, taken from
// this JavaScript engine itself, so that they agree with the JavaScript
// tokenizers (lib/text/tokenize.ts) by construction: which code points are
// word characters ([\p{L}\p{N}\p{M}]), what String.prototype.toLowerCase maps
// each one to, and the two properties toLowerCase's one context-dependent
// rule (Final_Sigma) reads. Built once per process, when the first native
// tokenizer for 'words' or 'qgrams' is made.

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

/** The tables of this engine's Unicode data (built on the first call, about a second on a loaded core). */
export function unicodeTables(): UnicodeTables {
  return (cached ??= buildTables());
}

function flagsOf(s: string, re: RegExp, flag: number, entries: Uint32Array, base: number, count: number): void {
  // One regex pass over the block: matched code points become two U+0001
  // (no code point's own string), then the separator split gives one part
  // per code point.
  const parts = s.replace(re, '\x01\x01').split(',');
  for (let i = 0; i < count; i++) if (parts[i] === '\x01\x01') entries[base + i] |= flag;
}

function buildTables(): UnicodeTables {
  const B = 4096;
  const entries = new Uint32Array(CODE_POINTS);
  const extra: number[] = [0];
  const any = /[\p{L}\p{N}\p{M}\p{Case_Ignorable}\p{Cased}]/u;
  // Code points joined by ',' (itself ASCII, not cased, not a word
  // character): each is lowered, and tested, on its own, with no context
  // from its neighbours, and a lone surrogate never pairs with the next one.
  const cps = new Array<number>(2 * B - 1).fill(0x2c);
  for (let base = 0; base < CODE_POINTS; base += B) {
    for (let i = 0; i < B; i++) cps[2 * i] = base + i === 0x2c ? 0x41 : base + i;
    const s = String.fromCodePoint(...cps);
    const low = s.toLowerCase();
    // Most blocks (unassigned, private use, CJK) are all zero entries.
    if (low === s && !any.test(s)) continue;
    const lows = low.split(',');
    // The same code points after a cased letter: any that lowers differently
    // there depends on context.
    const after = ('A' + s.replaceAll(',', ',A')).toLowerCase().split(',');
    for (let i = 0; i < B; i++) {
      const c = base + i;
      if (c === 0x2c) continue;
      const l = Array.from(lows[i], (x) => x.codePointAt(0)!);
      if (l.length === 1) entries[c] = (l[0] - c) & 0x1fffff;
      else {
        entries[c] = ENTRY.MULTI | extra.length;
        extra.push(l.length, ...l);
      }
      if (after[i].slice(1) !== lows[i]) entries[c] |= ENTRY.CONTEXT;
    }
    flagsOf(s, /[\p{L}\p{N}\p{M}]/gu, ENTRY.WORD, entries, base, B);
    flagsOf(s, /\p{Case_Ignorable}/gu, ENTRY.IGNORABLE, entries, base, B);
    flagsOf(s, /\p{Cased}/gu, ENTRY.CASED, entries, base, B);
    if (base === 0) entries[0x2c] = 0; // ',' stood in for 'A' above
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
