// The defaults of every dedup entry point (dedup(), dedupRecords(), `cusim
// dedup` and its --shard workers) and the banding they imply, in one place.
import { optimalParams, recallParams, type LshParams } from '../lsh.js';
import { checkSamples, MAX_SAMPLES } from '../minhash.js';
import { rangeError, typeError } from '../errors.js';
import { checkOpenFraction } from '../validate.js';

/**
 * threshold: verified similarity a pair needs; recall: least probability of
 * finding a pair at similarity threshold + margin; samples: the most MinHash
 * samples hashed where they reach the recall; seed: MinHash's seed.
 */
export const DEDUP_DEFAULTS: Readonly<{ threshold: number; recall: number; margin: number; samples: number; seed: number }> = Object.freeze(
  { threshold: 0.9, recall: 0.95, margin: 0.05, samples: 128, seed: 1 },
);

/** The options that decide dedup's banding. */
export interface DedupParamsOptions {
  threshold?: number;
  /**
   * Least probability that a pair at similarity threshold + margin is found
   * (default 0.95; see recallParams). Ignored when `weights` is given.
   */
  recall?: number;
  /** Default 0.05. */
  margin?: number;
  /** LSH [fpWeight, fnWeight] for datasketch's choice of (bands, rows) instead of the recall target. */
  weights?: readonly [number, number];
  /**
   * Samples hashed. Left out: bands * rows of the choice made within 128 samples
   * (or, where 128 cannot reach `recall`, within the fewest that can).
   */
  samples?: number;
}

/** (bands, rows, samples) dedup uses for these options. */
export function dedupParams(options: DedupParamsOptions = {}): LshParams & { samples: number } {
  const threshold = checkOpenFraction(options.threshold ?? DEDUP_DEFAULTS.threshold, 'threshold');
  const samples = checkSamples(options.samples ?? DEDUP_DEFAULTS.samples);
  if (options.weights !== undefined) {
    if (options.recall !== undefined) throw typeError('give recall or weights, not both');
    return { ...optimalParams(threshold, samples, options.weights), samples };
  }
  const recall = options.recall ?? DEDUP_DEFAULTS.recall;
  const r = recallParams(threshold, samples, { recall, margin: options.margin ?? DEDUP_DEFAULTS.margin });
  if (r.samples > samples && options.samples !== undefined) {
    throw rangeError(`recall ${recall} at similarity ${r.at} needs at least ${r.samples} samples, got samples = ${samples}`);
  }
  if (r.samples > MAX_SAMPLES)
    throw rangeError(`recall ${recall} at similarity ${r.at} needs ${r.samples} samples, more than ${MAX_SAMPLES}`);
  // Samples past bands * rows would be hashed and never read.
  return { bands: r.bands, rows: r.rows, samples: options.samples === undefined ? r.bands * r.rows : samples };
}
