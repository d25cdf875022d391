// Seeded generators shared by the fuzz families: random numbers, hostile
// values, typed-array variants (SharedArrayBuffer-backed, offset views,
// detached, wrong types), and what a caller can do to its arrays mid-call.

export { mulberry32 as makeRng } from '../oracles.mjs';
import { mulberry32 as makeRng } from '../oracles.mjs';

/** Case seed from the run seed and the case number (splitmix-like). */
export function caseSeed(seed, i) {
  let x = (Math.imul(seed >>> 0, 0x9e3779b1) ^ Math.imul(i + 1, 0x85ebca6b)) >>> 0;
  x = Math.imul(x ^ (x >>> 16), 0x7feb352d) >>> 0;
  x = Math.imul(x ^ (x >>> 15), 0x846ca68b) >>> 0;
  return (x ^ (x >>> 16)) >>> 0;
}

const BAD_NUMBERS = [
  NaN,
  Infinity,
  -Infinity,
  -1,
  -0.5,
  0.5,
  1.5,
  2 ** 31,
  2 ** 32,
  2 ** 32 + 1,
  2 ** 53,
  2 ** 53 + 2,
  1e308,
  -(2 ** 31),
  -0,
];
const BAD_VALUES = [
  null,
  undefined,
  0,
  -1,
  'x',
  '',
  '12',
  true,
  {},
  [],
  [1, 2, 3],
  () => 1,
  Symbol('s'),
  10n,
  new Date(0),
  new Map(),
  Promise.resolve(1),
];

export class Gen {
  constructor(seed) {
    this.seed = seed;
    this.r = makeRng(seed);
  }
  int(n) {
    return Math.floor(this.r() * n);
  }
  range(lo, hi) {
    return lo + this.int(hi - lo + 1);
  }
  bool(p = 0.5) {
    return this.r() < p;
  }
  pick(list) {
    return list[this.int(list.length)];
  }
  /** A number that breaks a size or index: non-finite, negative, fractional, huge. */
  badNumber() {
    return this.pick(BAD_NUMBERS);
  }
  /** Anything of the wrong kind. */
  badValue() {
    if (this.bool(0.3))
      return this.pick(
        BAD_VALUES.concat([
          new Float64Array(3),
          new Int8Array(5),
          new BigInt64Array(2),
          new DataView(new ArrayBuffer(8)),
          new Uint16Array(4),
        ]),
      );
    return this.pick(BAD_VALUES);
  }
  /** A bad replacement for a number, or sometimes any bad value. */
  badNumberOrValue() {
    return this.bool(0.7) ? this.badNumber() : this.badValue();
  }
  /** Finite float32 values including the awkward ones (non-finite weights are refused: the hostile family). */
  weight() {
    const u = this.r();
    if (u < 0.03) return 0;
    if (u < 0.05) return -this.r();
    if (u < 0.06) return 1e-45;
    if (u < 0.07) return 1e-30;
    if (u < 0.08) return 3e38;
    return 0.01 + this.r() * 5;
  }
}

/**
 * A view of `a`'s contents in another form of the same element type:
 * SharedArrayBuffer-backed, at a byte offset inside a larger buffer, or as is.
 */
export function variant(g, a) {
  const C = a.constructor;
  const k = g.int(4);
  if (k === 0) {
    const sab = new SharedArrayBuffer(Math.max(1, a.byteLength));
    const v = new C(sab, 0, a.length);
    v.set(a);
    return { view: v, how: 'sab' };
  }
  if (k === 1) {
    const pad = 1 + g.int(3);
    const buf = new ArrayBuffer((a.length + 2 * pad) * C.BYTES_PER_ELEMENT);
    const v = new C(buf, pad * C.BYTES_PER_ELEMENT, a.length);
    v.set(a);
    return { view: v, how: 'offset' };
  }
  return { view: a.slice(), how: 'copy' };
}

/** `a`'s buffer detached (its contents transferred away). */
export function detached(a) {
  const v = a.slice();
  structuredClone(v.buffer, { transfer: [v.buffer] });
  return v;
}

/** Bytes of `a` at an odd byte offset of a larger buffer (a Uint8Array view). */
export function oddBytes(a) {
  const buf = new ArrayBuffer(a.byteLength + 3);
  const v = new Uint8Array(buf, 1, a.byteLength);
  v.set(new Uint8Array(a.buffer, a.byteOffset, a.byteLength));
  return v;
}

/** What a caller may do to its arrays right after starting a call (each returns when done). */
export const SPOILERS = {
  transfer(views) {
    for (const b of new Set(views.map((v) => v.buffer)))
      if (!(b instanceof SharedArrayBuffer) && b.byteLength >= 0) structuredClone(b, { transfer: [b] });
  },
  rewrite(views, g) {
    for (const v of views) {
      const u = new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
      for (let i = 0; i < u.length; i++) u[i] = g.int(256);
    }
  },
  zero(views) {
    for (const v of views) new Uint8Array(v.buffer, v.byteOffset, v.byteLength).fill(0xff);
  },
};

/** Random CSR (sorted distinct columns per row unless `messy`). */
export function randomCsr(g, { rows, cols, maxLen, weights = true, messy = false }) {
  const indptr = new Uint32Array(rows + 1);
  const idx = [];
  for (let r = 0; r < rows; r++) {
    const len = cols === 0 ? 0 : g.int(maxLen + 1);
    const set = new Set();
    for (let i = 0; i < len; i++) set.add(g.int(cols));
    const row = messy ? [...set] : [...set].sort((a, b) => a - b);
    idx.push(...row);
    indptr[r + 1] = idx.length;
  }
  const m = { rows, cols, indptr, indices: Uint32Array.from(idx) };
  if (weights) m.values = Float32Array.from(idx, () => 0.05 + g.r() * 3);
  return m;
}

export function copyCsr(m) {
  return {
    rows: m.rows,
    cols: m.cols,
    indptr: m.indptr.slice(),
    indices: m.indices.slice(),
    ...(m.values ? { values: m.values.slice() } : {}),
  };
}

export function csrViews(m) {
  return [m.indptr, m.indices, ...(m.values ? [m.values] : [])];
}

/**
 * One way to break a CSR matrix (the result must be a coded error), or null
 * when `g` picks none. Returns [matrix, what].
 */
export function breakCsr(g, m) {
  const b = copyCsr(m);
  switch (g.int(12)) {
    case 0:
      return [{ ...b, rows: g.badNumberOrValue() }, 'rows'];
    case 1:
      return [{ ...b, cols: g.badNumberOrValue() }, 'cols'];
    case 2:
      return [{ ...b, indptr: g.badValue() }, 'indptr type'];
    case 3:
      return [{ ...b, indices: g.badValue() }, 'indices type'];
    case 4:
      return [{ ...b, indptr: b.indptr.subarray(0, Math.max(0, b.indptr.length - 1 - g.int(2))) }, 'indptr length'];
    case 5: {
      if (b.rows < 2) return [{ ...b, rows: b.rows + 1 }, 'rows + 1'];
      const r = 1 + g.int(b.rows - 1);
      b.indptr[r] = b.indptr[b.rows] + 1 + g.int(5);
      return [b, 'indptr non-monotone'];
    }
    case 6:
      b.indptr[b.rows] = b.indices.length + 1 + g.int(1000);
      return [b, 'indptr past indices'];
    case 7:
      if (b.indices.length === 0) return [{ ...b, indptr: detached(b.indptr) }, 'indptr detached'];
      b.indices[g.int(b.indices.length)] = b.cols + g.int(4);
      return [b, 'column out of range'];
    case 8:
      return [{ ...b, indices: b.indices.length ? detached(b.indices) : g.badValue() }, 'indices detached'];
    case 9:
      return [{ ...b, indptr: Float64Array.from(b.indptr) }, 'indptr Float64Array'];
    case 10:
      return [
        { ...b, values: b.values ? b.values.subarray(0, Math.max(0, (b.indptr[b.rows] | 0) - 1 - g.int(3))) : g.badValue() },
        'values short',
      ];
    default:
      return [g.badValue(), 'not an object'];
  }
}

export const KNOWN_CODES = new Set([
  'CUSIM_INVALID_ARGUMENT',
  'CUSIM_OUT_OF_MEMORY',
  'CUSIM_DISPOSED',
  'ABORT_ERR',
  'CUSIM_CUDA_ERROR',
  'CUSIM_BAD_FILE',
  'CUSIM_IO_ERROR',
  'CUSIM_STORAGE_ERROR',
]);

export function sameArray(a, b) {
  if (!a || !b || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i]) && !(a[i] === b[i])) return false;
  return true;
}

/** 'ok' or a short reason: `got` differs from `want` (typed arrays or plain values). */
export function diff(got, want, path = 'result') {
  if (ArrayBuffer.isView(want) || Array.isArray(want)) {
    if (!got || got.length !== want.length) return `${path}: length ${got?.length} != ${want.length}`;
    for (let i = 0; i < want.length; i++) {
      const d = diff(got[i], want[i], `${path}[${i}]`);
      if (d) return d;
    }
    return null;
  }
  if (want !== null && typeof want === 'object') {
    for (const k of Object.keys(want)) {
      // Timings (kernelMs, transferMs, …) are measurements, not results: two runs differ.
      if (k.endsWith('Ms')) continue;
      const d = diff(got?.[k], want[k], `${path}.${k}`);
      if (d) return d;
    }
    return null;
  }
  if (Object.is(got, want) || got === want) return null;
  return `${path}: ${String(got)} != ${String(want)}`;
}
