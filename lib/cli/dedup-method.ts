// The signature family of `cusim dedup` (single process and --shard alike):
// classic MinHash over sets where the features are binary, weighted MinHash
// over counts and tf-idf.
import type { Backend } from '../backend.js';
import { MinHash, tokenHashRows } from '../classic-minhash.js';
import type { SignatureKind } from '../lsh.js';
import { WeightedMinHash } from '../minhash.js';
import type { HashOptions } from '../minhash.js';
import type { Weighting } from '../text/index.js';
import type { CsrMatrix } from '../validate.js';

/**
 * Documents are sets by default (shingles, words, identifiers: classic
 * MinHash, the standard for document dedup); --weighted means token counts.
 */
export function defaultWeighting(weighted: boolean | undefined): Weighting {
  return weighted ? 'count' : 'binary';
}

/**
 * The signature family: classic MinHash (set Jaccard, one word per sample,
 * no per-column tables) for binary features, weighted MinHash for counts and
 * tf-idf, or with --weighted.
 */
export function dedupMethod(weighting: Weighting, weighted: boolean | undefined): SignatureKind {
  return weighting === 'binary' && !weighted ? 'classic' : 'weighted';
}

/**
 * The hasher of a method. Classic MinHash is fed token hashes
 * (tokenHashRows: column ids through fmix32), never the raw column ids,
 * on which its linear hash family is biased.
 */
export function signer(
  method: SignatureKind,
  o: { samples: number; seed: number; backend: Backend; devices?: 'all' | number[]; dim: number },
): { hash(m: CsrMatrix, options?: HashOptions): Promise<Uint32Array>; dispose(): void } {
  if (method === 'weighted')
    return new WeightedMinHash({ dim: o.dim, samples: o.samples, seed: o.seed, backend: o.backend, devices: o.devices });
  const mh = new MinHash({ samples: o.samples, seed: o.seed, backend: o.backend, devices: o.devices });
  return { hash: (m, options) => mh.hash(tokenHashRows(m), options), dispose: () => mh.dispose() };
}
