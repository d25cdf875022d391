// Classic MinHash for sets on CPU or GPU, bit for bit datasketch's MinHash.
//
// Each row of a CsrMatrix is a set of 32-bit token hashes: its column ids
// (values are ignored, repeats change nothing), so `cols` may be up to 2^32
// and any uint32 is a token. Sample s of a row is
//   min over tokens h of ((a[s] * h + b[s]) mod 2^64) mod (2^61 - 1), low 32 bits
// which is datasketch's update(): it computes a * h + b in numpy uint64
// arithmetic, so the product wraps modulo 2^64 before the Mersenne-prime
// reduction. There are no tables: (a, b) per sample are all the state.
//
// Seed contract: new MinHash({ samples, seed }) draws (a, b) exactly as
// datasketch's MinHash(num_perm=samples, seed=seed) does, with numpy's
// RandomState(seed) (MT19937, seed in [0, 2^32 - 1]): per sample
// a = randint(1, 2^61 - 1), then b = randint(0, 2^61 - 1), as uint64. So
// signatures equal datasketch's hashvalues for the same seed and token hashes
// (sha1Hash32 is datasketch's default token hash).
//
// Empty rows: every sample is 2^32 - 1 (datasketch's empty hashvalues). A
// non-empty row has a sample below that with overwhelming probability, so
// "all samples 2^32 - 1" is the empty-row test (isEmptySignature with kind
// 'classic'); estimates against an empty row are 0.
import { createHash } from 'node:crypto';
import { native } from './addon.js';
import { resolveBackend, resolveDevices, type BackendOption } from './backend.js';
import { rangeError, typeError } from './errors.js';
import { checkMinHashTuning, checkSamples, MinHashBase, type MinHashTuning } from './minhash.js';
import type { MinHashNative } from './native-types.js';
import { checkInt, describe, isObject, toCsr, type CsrMatrix, checkTyped, asTyped } from './validate.js';
import type { MinHashPermutations } from './types.js';
export type { MinHashPermutations } from './types.js';

/** 2^61 - 1, the modulus of the universal hash. */
export const MERSENNE_PRIME = (1n << 61n) - 1n;
/** Every sample of an empty row (datasketch's max_hash). */
export const MAX_HASH = 0xffffffff;

export interface MinHashOptions {
  /** Number of samples (datasketch's num_perm); default 128. */
  samples?: number;
  /** RandomState seed in [0, 2^32 - 1]; default 1, as datasketch. */
  seed?: number;
  backend?: BackendOption;
  devices?: 'all' | number[];
  /** GPU choices that never change a signature: `{ overlap }` (see MinHashTuning). */
  tuning?: Pick<MinHashTuning, 'overlap'>;
}

function toU64(v: unknown, name: string, min: bigint): BigUint64Array {
  let out: BigUint64Array;
  const u64 = asTyped(v, BigUint64Array, name);
  const src = u64 ? undefined : Array.isArray(v) ? (v as unknown[]) : asTyped(v, BigInt64Array, name);
  if (u64) out = u64;
  else if (src) {
    out = new BigUint64Array(src.length);
    for (let i = 0; i < src.length; i++) {
      const x = src[i] as unknown;
      if (typeof x !== 'bigint' && !(typeof x === 'number' && Number.isSafeInteger(x))) {
        throw typeError(`${name}[${i}] must be a bigint (or a safe integer), got ${describe(x)}`);
      }
      const y = BigInt(x as bigint | number);
      if (y < 0n || y >= 1n << 64n) throw rangeError(`${name}[${i}]=${y} is not a uint64`);
      out[i] = y;
    }
  } else {
    throw typeError(`${name} must be a BigUint64Array or an array of bigints, got ${describe(v)}`);
  }
  for (let i = 0; i < out.length; i++) {
    if (out[i] < min || out[i] >= MERSENNE_PRIME) throw rangeError(`${name}[${i}]=${out[i]} must be in [${min}, 2^61 - 1)`);
  }
  return out;
}

/**
 * Signatures are rows × samples uint32, each row's column ids taken as its
 * token hashes (matrix.cols up to 2^32; values ignored).
 */
export class MinHash extends MinHashBase<MinHashNative> {
  /** The RandomState seed, or undefined for permutations given to fromPermutations. */
  readonly seed: number | undefined;

  constructor(options: MinHashOptions = {}) {
    if (!isObject(options)) throw typeError(`options must be an object, got ${describe(options)}`);
    const o = options as MinHashOptions & { _permutations?: MinHashPermutations };
    const samples = checkSamples(o._permutations ? o._permutations.a.length : (o.samples ?? 128));
    const seed = o._permutations ? undefined : checkInt(o.seed ?? 1, 'seed', 0, 0xffffffff);
    const backend = resolveBackend(o.backend);
    const devices = backend === 'cuda' ? resolveDevices(o.devices ?? 'all') : undefined;
    const tuning = checkMinHashTuning(o.tuning, false);
    const h = new (native().MinHashNative)({ samples, seed, backend, devices, tuning, ...(o._permutations ?? {}) });
    super(h, 'MinHash', samples, backend, tuning);
    this.seed = seed;
  }

  /**
   * A MinHash over given permutations, such as datasketch's
   * `MinHash.permutations` (a, b): its hashvalues are reproduced exactly.
   */
  static fromPermutations(p: {
    a: BigUint64Array | readonly bigint[];
    b: BigUint64Array | readonly bigint[];
    backend?: BackendOption;
    devices?: 'all' | number[];
    tuning?: Pick<MinHashTuning, 'overlap'>;
  }): MinHash {
    if (!isObject(p)) throw typeError(`permutations must be an object { a, b }, got ${describe(p)}`);
    const a = toU64(p.a, 'a', 1n);
    const b = toU64(p.b, 'b', 0n);
    if (a.length !== b.length) throw rangeError(`a has length ${a.length} but b has ${b.length}`);
    checkSamples(a.length, 'a.length');
    return new MinHash({ backend: p.backend, devices: p.devices, tuning: p.tuning, _permutations: { a, b } } as MinHashOptions);
  }

  /** The permutations (a, b), as datasketch's MinHash.permutations. */
  permutations(): MinHashPermutations {
    return this.handle.permutations();
  }

  protected prepare(matrix: CsrMatrix): { m: CsrMatrix; wordsPerRow: number } {
    return { m: toCsr(matrix, 'matrix', { values: 'ignore', maxCols: 2 ** 32 }), wordsPerRow: this.shape() };
  }

  // Any column count toCsr accepts (up to 2^32) is hashed.
  protected shape(): number {
    return this.samples;
  }
}

/** murmur3's fmix32 finalizer: a bijection of uint32 with full avalanche. */
export function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * The rows of `matrix` with each column id c replaced by fmix32(c), as input
 * for MinHash when columns are ids rather than token hashes (a vocabulary's
 * 0, 1, 2, …): the linear hash family is biased on sequential ids
 * (docs/perf/minhash.md), and fmix32 makes them look random. It is a
 * bijection, so every row's set, and every set Jaccard, is unchanged. Values
 * are dropped (MinHash ignores them); cols becomes 2^32.
 */
export function tokenHashRows(matrix: CsrMatrix): CsrMatrix {
  const m = toCsr(matrix, 'matrix', { values: 'ignore', maxCols: 2 ** 32 });
  const indices = new Uint32Array(m.indices.length);
  for (let i = 0; i < indices.length; i++) indices[i] = fmix32(m.indices[i]);
  return { rows: m.rows, cols: 2 ** 32, indptr: m.indptr, indices };
}

/** datasketch's default token hash (sha1_hash32): the first 4 bytes of SHA-1, little-endian. Strings are UTF-8. */
export function sha1Hash32(token: string | Uint8Array): number {
  const bytes = typeof token === 'string' ? token : asTyped(token, Uint8Array, 'token');
  if (bytes === undefined) throw typeError(`token must be a string or a Uint8Array, got ${describe(token)}`);
  return createHash('sha1').update(bytes).digest().readUInt32LE(0);
}

/** Fraction of equal samples of two classic signatures; 0 if either row is empty (every sample 2^32 - 1). */
export function estimateSetJaccard(sigA: Uint32Array, sigB: Uint32Array): number {
  sigA = checkTyped(sigA, Uint32Array, 'sigA');
  sigB = checkTyped(sigB, Uint32Array, 'sigB');
  for (const [v, name] of [
    [sigA, 'sigA'],
    [sigB, 'sigB'],
  ] as const) {
    if (v.length === 0) throw rangeError(`${name} must hold at least one sample`);
  }
  if (sigA.length !== sigB.length) throw rangeError(`sigA has length ${sigA.length} but sigB has ${sigB.length}`);
  if (sigA.every((x) => x === MAX_HASH) || sigB.every((x) => x === MAX_HASH)) return 0;
  let same = 0;
  for (let i = 0; i < sigA.length; i++) if (sigA[i] === sigB[i]) same++;
  return same / sigA.length;
}
