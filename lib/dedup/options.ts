// The options and result of every dedup entry point (dedup(), dedupRecords(),
// indexRecords()), checked in one place.
import { resolveBackend, resolveDevices, type Backend, type BackendOption } from '../backend.js';
import { checkSignal } from '../cancel.js';
import type { LshParams, PairSet, SignatureKind, Verify } from '../lsh.js';
import { checkOnProgress, type OnProgress } from '../progress.js';
import { typeError } from '../errors.js';
import { checkEnum, checkInt, describe, isObject, type CsrMatrix } from '../validate.js';
import { DEDUP_DEFAULTS, dedupParams, type DedupParamsOptions } from './defaults.js';
import type { IdList } from './ids.js';
import type { SketchParams, Staged } from '../native-types.js';

export interface DedupOptions extends DedupParamsOptions {
  /**
   * 'weighted' (default): WeightedMinHash over the matrix's weights, verified
   * by weighted Jaccard. 'classic': MinHash over each row's set of columns
   * (weights ignored; cols up to 2^32, so columns may be token hashes, see
   * classicTokens), verified by set Jaccard.
   */
  method?: SignatureKind;
  seed?: number;
  /** Default 'exact'. */
  verify?: Verify;
  backend?: BackendOption;
  devices?: 'all' | number[];
  signal?: AbortSignal;
  /** Stages 'hash' (rows), 'candidates' and 'verify' (pairs) as ProgressEvents. */
  onProgress?: OnProgress;
  /** Return the signatures too (rows × samples × 2 weighted, rows × samples classic). */
  returnSignatures?: boolean;
}

export interface DedupResult {
  group: Uint32Array;
  count: number;
  pairs: PairSet & { similarity: Float32Array };
  /** The banding used and the samples hashed. */
  lsh: LshParams & { samples: number };
  signatures?: Uint32Array;
}

/** Options as the pipeline uses them. */
export interface CheckedDedupOptions {
  method: SignatureKind;
  threshold: number;
  params: LshParams & { samples: number };
  seed: number;
  verify: Verify;
  backend: Backend;
  devices: 'all' | number[] | undefined;
  signal: AbortSignal | undefined;
  onProgress: OnProgress | undefined;
  returnSignatures: boolean;
}

export function checkDedupOptions(options: DedupOptions): CheckedDedupOptions {
  if (!isObject(options as unknown)) throw typeError(`options must be an object, got ${describe(options)}`);
  const method = checkEnum(options.method ?? 'weighted', 'method', ['weighted', 'classic'] as const);
  const params = dedupParams(options);
  const verify = checkEnum(options.verify ?? 'exact', 'verify', ['none', 'estimate', 'exact'] as const);
  const backend = resolveBackend(options.backend);
  resolveDevices(options.devices);
  return {
    method,
    threshold: options.threshold ?? DEDUP_DEFAULTS.threshold,
    params,
    seed: checkInt(options.seed ?? DEDUP_DEFAULTS.seed, 'seed', 0, 0xffffffff),
    verify,
    backend,
    devices: options.devices,
    signal: checkSignal(options.signal),
    onProgress: checkOnProgress(options.onProgress),
    returnSignatures: options.returnSignatures === true,
  };
}

/**
 * Classic MinHash band keys of a block's rows, made where the rows were made
 * (the record reader's GPU token hasher, from the token hashes on the device:
 * native/text.h Sketch): what a dedup keeps of each row, so its rows need not
 * be hashed again. Used only by a classic dedup over 32-bit token hashes whose
 * samples, seed, bands and rows are these; otherwise the rows are hashed as
 * any others. The block owns them: dedupRecords disposes them.
 */
export interface BlockBandKeys extends SketchParams {
  /** rows × bands keys (lsh::BandKey of each band of the row's signature), row-major. */
  keys: Staged;
  /** Per row, 1 where its signature is empty (no token). */
  empty: Staged;
}

/** One block of a dedupRecords() source: featurized rows and, optionally, their names. */
export interface DedupBlock {
  /** One row per document; every block has the same `cols`. */
  rows: CsrMatrix;
  /** The rows' names (default: none; the result's ids are then row numbers). */
  ids?: IdList | readonly string[];
  /** The rows' band keys, when the reader made them (see BlockBandKeys). */
  bandKeys?: BlockBandKeys;
}
