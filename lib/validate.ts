// Input types and their normalization. Everything is checked here, in
// TypeScript, before any native call, so users get messages that name the
// argument. The O(nnz) column-range check runs natively (multi-threaded) with
// the same message shape, inside the async call.
import { rangeError, typeError } from './errors.js';
import type { CsrMatrix, DenseMatrix, BitWords, Tuning } from './types.js';
export type { CsrMatrix, DenseMatrix, BitWords, Tuning } from './types.js';

/** Packed bit codes: `bits` per row, a multiple of 32, little-endian words. */
export interface BitCodes {
  data: Uint32Array | Uint8Array;
  rows: number;
  bits: number;
}

type NumericArray = ArrayLike<number>;

export interface CsrLike {
  rows: number;
  cols: number;
  indptr: NumericArray;
  indices: NumericArray;
  values?: NumericArray | null;
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null;
}

/** `v` when it is an options object; a coded TypeError naming `name` otherwise. */
export function checkOptions<T extends object>(v: T, name = 'options'): T {
  if (!isObject(v)) throw typeError(`${name} must be an object, got ${describe(v)}`);
  return v;
}

export function checkInt(v: unknown, name: string, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof v !== 'number') throw typeError(`${name} must be an integer, got ${describe(v)}`);
  if (!Number.isInteger(v) || v < min || v > max) {
    throw rangeError(`${name} must be an integer in [${min}, ${max}], got ${v}`);
  }
  return v;
}

export function checkNumber(
  v: unknown,
  name: string,
  { min = -Infinity, max = Infinity, minExclusive = false }: { min?: number; max?: number; minExclusive?: boolean } = {},
): number {
  if (typeof v !== 'number') throw typeError(`${name} must be a number, got ${describe(v)}`);
  if (Number.isNaN(v) || (minExclusive ? v <= min : v < min) || v > max) {
    throw rangeError(`${name} must be in ${minExclusive ? '(' : '['}${min}, ${max}], got ${v}`);
  }
  return v;
}

/** A similarity threshold: in (0, 1]. */
export function checkFraction(v: unknown, name: string): number {
  return checkNumber(v, name, { min: 0, max: 1, minExclusive: true });
}

/** In (0, 1): a threshold or recall that LSH banding is tuned for (at 1 no banding separates). */
export function checkOpenFraction(v: unknown, name: string): number {
  const x = checkFraction(v, name);
  if (x >= 1) throw rangeError(`${name} must be in (0, 1), got ${x}`);
  return x;
}

export function checkEnum<T extends string>(v: unknown, name: string, allowed: readonly T[]): T {
  if (typeof v !== 'string' || !(allowed as readonly string[]).includes(v)) {
    throw typeError(`${name} must be one of ${allowed.map((a) => `'${a}'`).join(', ')}, got ${describe(v)}`);
  }
  return v as T;
}

export function checkChoice<T extends number>(v: unknown, name: string, allowed: readonly T[]): T {
  if (typeof v !== 'number' || !(allowed as readonly number[]).includes(v)) {
    throw typeError(`${name} must be one of ${allowed.join(', ')}, got ${describe(v)}`);
  }
  return v as T;
}

export function checkTuning(v: unknown, name = 'tuning'): Required<Tuning> {
  const t = checkTuningKeys(v, name, ['tensorCores']);
  return { tensorCores: checkBool(t.tensorCores ?? true, `${name}.tensorCores`) };
}

/**
 * An engine's `tuning` object (absent: empty), rejecting keys it does not
 * know; each engine checks the values of its own keys.
 */
export function checkTuningKeys(v: unknown, name: string, known: readonly string[]): Record<string, unknown> {
  if (v === undefined) return {};
  if (!isObject(v) || Array.isArray(v)) throw typeError(`${name} must be an object, got ${describe(v)}`);
  for (const key of Object.keys(v)) {
    if (!known.includes(key)) throw typeError(`${name}.${key} is not a tuning option (known: ${known.join(', ')})`);
  }
  return v;
}

export function checkBool(v: unknown, name: string): boolean {
  if (typeof v !== 'boolean') throw typeError(`${name} must be a boolean, got ${describe(v)}`);
  return v;
}

// ---- typed arrays as their internal slots say --------------------------------
// A typed array argument is recognized by ArrayBuffer.isView and read through
// the intrinsic %TypedArray%.prototype getters, never through the object's own
// properties: a Proxy around a typed array is not one (isView is false, and
// the getters would throw an untyped TypeError on it), and a subclass
// instance whose `length` or `buffer` getters lie is read as what it is.
const TYPED_PROTO = Object.getPrototypeOf(Uint8Array.prototype) as object;
const intrinsic = (key: PropertyKey): ((this: unknown) => unknown) =>
  Object.getOwnPropertyDescriptor(TYPED_PROTO, key)!.get! as (this: unknown) => unknown;
const tagOf = intrinsic(Symbol.toStringTag);
const lengthOf = intrinsic('length');
const offsetOf = intrinsic('byteOffset');
const bufferOf = intrinsic('buffer');

// What the library reads of a typed array besides its elements: an instance
// with any of these as own properties is re-viewed (cheaply) like a subclass's.
const SHADOWED = [
  'length',
  'buffer',
  'byteOffset',
  'byteLength',
  'slice',
  'subarray',
  'set',
  'fill',
  'sort',
  'reverse',
  'indexOf',
  'every',
];

type TypedCtor =
  | Uint8ArrayConstructor
  | Uint8ClampedArrayConstructor
  | Int8ArrayConstructor
  | Uint16ArrayConstructor
  | Int16ArrayConstructor
  | Uint32ArrayConstructor
  | Int32ArrayConstructor
  | Float32ArrayConstructor
  | Float64ArrayConstructor
  | BigUint64ArrayConstructor
  | BigInt64ArrayConstructor;

/** The element type of a genuine typed array ('Uint32Array', ...), from its internal slots; undefined for anything else. */
export function typedKind(v: unknown): string | undefined {
  return ArrayBuffer.isView(v) ? (tagOf.call(v) as string | undefined) : undefined;
}

/**
 * v as a plain `ctor` array over the same memory when it is a genuine typed
 * array of that type (a subclass instance, or one with own properties, gets
 * a fresh plain view), else undefined. A detached subclass instance is a
 * coded TypeError naming `name`.
 */
export function asTyped<C extends TypedCtor>(v: unknown, ctor: C, name: string): InstanceType<C> | undefined {
  if (typedKind(v) !== ctor.name) return undefined;
  // O(1): listing own keys would list every index.
  if (Object.getPrototypeOf(v) === ctor.prototype && !SHADOWED.some((k) => Object.hasOwn(v as object, k))) return v as InstanceType<C>;
  try {
    return new ctor(bufferOf.call(v) as ArrayBuffer, offsetOf.call(v) as number, lengthOf.call(v) as number) as InstanceType<C>;
  } catch {
    throw typeError(`${name}'s buffer is detached`);
  }
}

/** v as asTyped gives it, or a coded TypeError naming `name`. */
export function checkTyped<C extends TypedCtor>(v: unknown, ctor: C, name: string): InstanceType<C> {
  const t = asTyped(v, ctor, name);
  if (!t) throw typeError(`${name} must be ${ctor.name.startsWith('Int') ? 'an' : 'a'} ${ctor.name}, got ${describe(v)}`);
  return t;
}

export function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return `an array of length ${v.length}`;
  if (ArrayBuffer.isView(v)) return `a ${typedKind(v) ?? 'DataView'}`;
  if (typeof v === 'string') return `'${v.length > 40 ? v.slice(0, 40) + '…' : v}'`;
  return typeof v === 'object' ? 'an object' : String(v);
}

// A number array, or any genuine typed array as a plain view (see asTyped).
function arrayLikeNumbers(v: unknown, name: string): NumericArray | undefined {
  if (Array.isArray(v)) return v as NumericArray;
  const kind = typedKind(v);
  if (kind === undefined || kind.startsWith('Big')) return undefined;
  return asTyped(v, globalThis[kind as 'Uint8Array'], name);
}

// Converts number arrays and other typed arrays, checking that each element
// fits the target type. Typed arrays of the right type pass through uncopied.
export function toU32(v: unknown, name: string): Uint32Array {
  const same = asTyped(v, Uint32Array, name);
  if (same) return same;
  const a = arrayLikeNumbers(v, name);
  if (!a) throw typeError(`${name} must be a Uint32Array or an array of integers, got ${describe(v)}`);
  const out = new Uint32Array(a.length);
  for (let i = 0; i < a.length; i++) {
    const x = a[i];
    if (!Number.isInteger(x) || x < 0 || x > 0xffffffff) throw rangeError(`${name}[${i}]=${x} is not a uint32`);
    out[i] = x;
  }
  return out;
}

function toF32(v: unknown, name: string): Float32Array {
  const same = asTyped(v, Float32Array, name);
  if (same) return same;
  const a = arrayLikeNumbers(v, name);
  if (!a) throw typeError(`${name} must be a Float32Array or an array of numbers, got ${describe(v)}`);
  const out = new Float32Array(a.length);
  for (let i = 0; i < a.length; i++) {
    const x = a[i];
    if (typeof x !== 'number') throw typeError(`${name}[${i}] must be a number`);
    out[i] = x;
  }
  return out;
}

/**
 * Validates and normalizes a CSR matrix. `values: 'ignore'` drops weights
 * (set inputs); `'optional'` keeps them when present, checked finite (see
 * checkWeights) unless `weights: 'unchecked'` (a consumer that reads only
 * some rows checks those itself). `maxCols` is 2^32 - 1 unless a consumer
 * takes any uint32 as a column (token hashes: 2^32).
 */
export function toCsr(
  m: unknown,
  name: string,
  {
    values = 'optional',
    maxCols = 0xffffffff,
    weights = 'check',
  }: { values?: 'optional' | 'ignore'; maxCols?: number; weights?: 'check' | 'unchecked' } = {},
): CsrMatrix {
  if (!isObject(m)) throw typeError(`${name} must be a CsrMatrix { rows, cols, indptr, indices, values? }, got ${describe(m)}`);
  const rows = checkInt(m.rows, `${name}.rows`, 0, 0xfffffffe);
  const cols = checkInt(m.cols, `${name}.cols`, 0, maxCols);
  const indptr = asTyped(m.indptr, Int32Array, `${name}.indptr`) ?? toU32(m.indptr, `${name}.indptr`);
  const indices = toU32(m.indices, `${name}.indices`);
  if (indptr.length !== rows + 1) {
    throw rangeError(`${name}.indptr has length ${indptr.length} but rows + 1 = ${rows + 1}`);
  }
  if (indptr.length > 0 && indptr[0] < 0) throw rangeError(`${name}.indptr[0]=${indptr[0]} is negative`);
  for (let r = 0; r < rows; r++) {
    if (indptr[r + 1] < indptr[r]) {
      throw rangeError(`${name}.indptr must be non-decreasing (indptr[${r + 1}] < indptr[${r}])`);
    }
  }
  const end = rows > 0 ? indptr[rows] : 0;
  if (end > indices.length) {
    throw rangeError(`${name}.indptr[${rows}]=${end} exceeds ${name}.indices.length=${indices.length}`);
  }
  const out: CsrMatrix = { rows, cols, indptr, indices };
  if (values === 'optional' && m.values !== undefined && m.values !== null) {
    const vals = toF32(m.values, `${name}.values`);
    if (vals.length < end) throw rangeError(`${name}.values has length ${vals.length} but indptr[${rows}]=${end}`);
    out.values = vals;
    if (weights === 'check') checkWeights(out, name, 0, rows, m.values as ArrayLike<number>);
  }
  return out;
}

/**
 * Weights of rows [rowStart, rowEnd) are finite: a coded RangeError naming
 * the first that is not (NaN, ±Infinity, or a number that overflowed float32
 * on the way in, shown as given in `given`) and its row. One pass.
 */
export function checkWeights(m: CsrMatrix, name: string, rowStart = 0, rowEnd = m.rows, given: ArrayLike<number> = m.values!): void {
  const v = m.values;
  if (!v || rowEnd <= rowStart) return;
  const end = m.indptr[rowEnd];
  for (let p = m.indptr[rowStart]; p < end; p++) {
    if (v[p] - v[p] !== 0) {
      let lo = rowStart;
      let hi = rowEnd - 1;
      while (lo < hi) {
        const mid = (lo + hi + 1) >>> 1;
        if (m.indptr[mid] <= p) lo = mid;
        else hi = mid - 1;
      }
      throw rangeError(`${name}.values[${p}]=${given[p]} in row ${lo}: weights must be finite`);
    }
  }
}

/** A copy of m's arrays, for a pipeline stage that reads them after an await. */
export function copyCsr(m: CsrMatrix): CsrMatrix {
  const out: CsrMatrix = { rows: m.rows, cols: m.cols, indptr: m.indptr.slice(), indices: m.indices.slice() };
  if (m.values) out.values = m.values.slice();
  return out;
}

/**
 * The O(nnz) column-range check, for consumers that never reach the native
 * layer (which checks it there). Same message as the native check.
 */
export function checkColumns(m: CsrMatrix, name: string): void {
  const end = m.rows > 0 ? m.indptr[m.rows] : 0;
  for (let p = m.rows > 0 ? m.indptr[0] : 0; p < end; p++) {
    if (m.indices[p] >= m.cols) throw rangeError(`${name}.indices[${p}]=${m.indices[p]} is out of range for cols=${m.cols}`);
  }
}

/** Row-major dense matrix; `cols` pins the expected width when given. */
export function toDense(m: unknown, name: string, { cols }: { cols?: number } = {}): DenseMatrix {
  if (!isObject(m)) throw typeError(`${name} must be a dense matrix { data, rows, cols }, got ${describe(m)}`);
  const rows = checkInt(m.rows, `${name}.rows`);
  const c = checkInt(m.cols, `${name}.cols`);
  if (cols !== undefined && c !== cols) throw rangeError(`${name}.cols is ${c} but this object was built for ${cols}`);
  const data = toF32(m.data, `${name}.data`);
  if (data.length !== rows * c) throw rangeError(`${name}.data has length ${data.length} but rows * cols = ${rows * c}`);
  return { data, rows, cols: c };
}

/**
 * Packed codes as 32-bit words. Uint8Array input is reinterpreted in place
 * when aligned (bytes are little-endian within each word), else copied.
 */
export function toBits(m: unknown, name: string, { bits }: { bits?: number } = {}): BitWords {
  if (!isObject(m)) throw typeError(`${name} must be packed codes { data, rows, bits }, got ${describe(m)}`);
  const rows = checkInt(m.rows, `${name}.rows`);
  const b = checkInt(m.bits, `${name}.bits`, 32, 65536);
  if (b % 32 !== 0) throw rangeError(`${name}.bits must be a multiple of 32, got ${b}`);
  if (bits !== undefined && b !== bits) throw rangeError(`${name}.bits is ${b} but this index holds ${bits}-bit codes`);
  const words = (rows * b) / 32;
  let data: Uint32Array;
  const u32 = asTyped(m.data, Uint32Array, `${name}.data`);
  const u8 = u32 ? undefined : asTyped(m.data, Uint8Array, `${name}.data`);
  if (u32) {
    data = u32;
  } else if (u8) {
    if (u8.length !== words * 4) {
      throw rangeError(`${name}.data has ${u8.length} bytes but rows * bits / 8 = ${words * 4}`);
    }
    data = u8.byteOffset % 4 === 0 ? new Uint32Array(u8.buffer, u8.byteOffset, words) : new Uint32Array(u8.slice().buffer, 0, words);
  } else {
    throw typeError(`${name}.data must be a Uint32Array or Uint8Array, got ${describe(m.data)}`);
  }
  if (data.length !== words) throw rangeError(`${name}.data has ${data.length} words but rows * bits / 32 = ${words}`);
  return { data, rows, bits: b };
}
