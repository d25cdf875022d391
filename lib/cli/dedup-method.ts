// The signature family of `cusim dedup` (single process and --shard alike):
// classic MinHash over sets where the features are binary, weighted MinHash
// over counts and tf-idf.
// (The signers themselves are the library's: lib/dedup/signer.ts.)
import type { SignatureKind } from '../lsh.js';
import type { Weighting } from '../text/index.js';

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
