// cusim: GPU similarity search and near-duplicate detection for Node.js.
export { devices, threads, resolveBackend } from './backend.js';
export type { Backend, BackendOption, DeviceInfo, GpuInfo } from './backend.js';
export type { CsrMatrix, DenseMatrix, BitCodes, Tuning } from './validate.js';
export type { CusimErrorCode, CodedError } from './errors.js';
export { popcountRows } from './ops.js';
export type { PopcountResult } from './ops.js';
export { FlyHash } from './flyhash.js';
export type { FlyHashOptions, FlyHashTuning, FlyHashResult, FlyHashNormalize, ByteMatrix } from './flyhash.js';
export { StreamClusterer, TfidfTable, tfidf, NO_CLUSTER } from './cluster.js';
export type { StreamClustererOptions, ClusterTuning, ClusterAddResult, AddOptions as ClusterAddOptions } from './cluster.js';
export { HammingIndex, MISSING_ID } from './hamming.js';
export type {
  HammingIndexOptions,
  HammingSearchOptions,
  HammingSearchResult,
  HammingMethod,
  ExactKernel,
  HammingTuning,
} from './hamming.js';
export { similarityJoin, similarityJoinStream, AUTO_GPU_MIN_TOKENS } from './join.js';
export type { JoinMeasure, JoinOptions, JoinTuning, JoinChunk, JoinResult, JoinStageMs } from './join.js';
export {
  MinHashLSH,
  optimalParams,
  recallParams,
  recallCurve,
  candidateProbability,
  groupMembers,
  isEmptySignature,
  MAX_LSH_SAMPLES,
} from './lsh.js';
export type {
  LshParams,
  RecallParams,
  RecallTarget,
  MinHashLSHOptions,
  RedisStorageOptions,
  SignatureKind,
  Verify,
  PairSet,
  GroupsResult,
  GroupsOptions,
} from './lsh.js';
export { dedup } from './dedup/matrix.js';
export { SPILL_AFTER_BYTES, dedupRecords, indexRecords, recordIndexer } from './dedup/records.js';
export type { DedupRecordsOptions, DedupRecordsResult, IndexBlock, IndexRecordsOptions, RecordIndexer } from './dedup/records.js';
export { DEDUP_DEFAULTS, dedupParams } from './dedup/defaults.js';
export type { DedupParamsOptions } from './dedup/defaults.js';
export type { DedupOptions, DedupResult, DedupBlock, BlockBandKeys } from './dedup/options.js';
export { classicTokens } from './dedup/signer.js';
export { idList } from './dedup/ids.js';
export type { IdList } from './dedup/ids.js';
export type { ProgressEvent, OnProgress } from './progress.js';
export { WeightedMinHash, estimateJaccard, estimateJaccardPairs, EMPTY_ROW_SENTINEL, rowChunks } from './minhash.js';
export { MinHash, sha1Hash32, estimateSetJaccard, tokenHashRows, MERSENNE_PRIME, MAX_HASH } from './classic-minhash.js';
export type { MinHashOptions, MinHashPermutations } from './classic-minhash.js';
export type { WeightedMinHashOptions, MinHashParameters, MinHashTuning, HashOptions, HashTiming } from './minhash.js';
export {
  TextFeaturizer,
  Vocabulary,
  HashedVocabulary,
  hashToken,
  codeTokens,
  wordTokens,
  qgramTokens,
  splitIdentifier,
  CODE_KEYWORDS,
  ENGLISH_STOP_WORDS,
} from './text/index.js';
export type { TextFeaturizerOptions, TextFeaturizerJSON, TextMode, Weighting } from './text/index.js';
export { pinnedArray, isPinned } from './pinned.js';
export type { HashedRows, TokenBatch } from './text/index.js';
