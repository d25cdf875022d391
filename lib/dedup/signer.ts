// One signer per dedup method, and the one rule for what classic MinHash is
// fed: every dedup entry point (dedup(), dedupRecords(), `cusim dedup`, its
// --shard workers) hashes through here.
import type { BackendOption } from '../backend.js';
import { MinHash, tokenHashRows } from '../classic-minhash.js';
import type { SignatureKind } from '../lsh.js';
import { WeightedMinHash, type HashOptions } from '../minhash.js';
import type { Staged } from '../native-types.js';
import type { CsrMatrix } from '../validate.js';

/**
 * The token hashes classic MinHash reads for a matrix's rows. A matrix of
 * 2^32 columns holds 32-bit token hashes (TextFeaturizer.hashedRows with 32
 * bits, sha1Hash32, hashToken): they go in as they are, so signatures match
 * datasketch's for the same tokens. Narrower columns are ids (a vocabulary's
 * 0, 1, 2, …, or hashes masked to fewer bits), on which the linear hash
 * family is biased: they are mixed by fmix32 first (tokenHashRows). Both are
 * bijections of the columns, so every set Jaccard is unchanged; only which
 * pairs the banding finds differs.
 */
export function classicTokens(matrix: CsrMatrix): CsrMatrix {
  return matrix.cols >= 2 ** 32 ? matrix : tokenHashRows(matrix);
}

/** A dedup method's hasher. */
export interface Signer {
  readonly method: SignatureKind;
  readonly samples: number;
  /** Words per sample (1 classic, 2 weighted). */
  readonly width: 1 | 2;
  /** The rows this signer hashes for `matrix` (classic: classicTokens; weighted: as they are). */
  input(matrix: CsrMatrix): CsrMatrix;
  /** Signatures of rows of a matrix input() returned. */
  hash(input: CsrMatrix, options?: HashOptions): Promise<Uint32Array>;
  /** hash() reading the rows from `staged`, a stageCsr copy of an input of `shape` (no copy on this thread; the input is not read). */
  hashStaged(staged: Staged, shape: { rows: number; cols: number }, options?: HashOptions): Promise<Uint32Array>;
  dispose(): void;
}

export interface SignerOptions {
  samples: number;
  seed: number;
  backend?: BackendOption;
  devices?: 'all' | number[];
  /** Columns of the weighted rows (WeightedMinHash's dim); unused for classic. */
  dim: number;
}

export function makeSigner(method: SignatureKind, o: SignerOptions): Signer {
  const { samples, seed, backend, devices } = o;
  if (method === 'weighted') {
    const wmh = new WeightedMinHash({ dim: o.dim, samples, seed, backend, devices });
    return {
      method,
      samples,
      width: 2,
      input: (m) => m,
      hash: (m, options) => wmh.hash(m, options),
      hashStaged: (s, m, options) => wmh.hashStaged(s, m, options),
      dispose: () => wmh.dispose(),
    };
  }
  const mh = new MinHash({ samples, seed, backend, devices });
  return {
    method,
    samples,
    width: 1,
    input: classicTokens,
    hash: (m, options) => mh.hash(m, options),
    hashStaged: (s, m, options) => mh.hashStaged(s, m, options),
    dispose: () => mh.dispose(),
  };
}
