// `cusim dedup`'s parsed options, shared by the single-process command
// (dedup.ts) and the Redis shard workers and report (dedup-shard.ts). The
// similarity options are the library's (DedupOptions, with its defaults from
// DEDUP_DEFAULTS filled in by the parser); the rest say what to read and how
// to print.
import type { DedupOptions } from '../dedup/options.js';
import type { TextMode, Weighting } from '../text/index.js';
import type { RecordFormat } from './records.js';
import type { RecordReader } from './record-native.js';

export interface DedupCommandOptions
  extends Required<Pick<DedupOptions, 'threshold' | 'recall' | 'seed'>>, Pick<DedupOptions, 'samples' | 'devices'> {
  mode?: TextMode;
  /** Left out: the mode's default (defaultWeighting). */
  weighting?: Weighting;
  /** Weighted MinHash even for binary features. */
  weighted?: boolean;
  q: number;
  backend: 'auto' | 'cpu' | 'cuda';
  json?: boolean;
  csv?: boolean;
  format: RecordFormat;
  field: string;
  idField: string;
  /** --no-header: CSV/TSV records have no header row; fields are 1-based column numbers. */
  header: boolean;
  /** --columns: names for the columns of headerless CSV/TSV records. */
  columns?: string[];
  delimiter?: string;
  ext?: string;
  exclude: string[];
  gitignore: boolean;
  maxSize: number;
  /** Bytes of token sets kept in memory (dedupRecords' spill.afterBytes). */
  spillAfter: number;
  /** Where the rest go (dedupRecords' spill.dir). */
  spillDir?: string;
  minTokens?: number;
  limit: number;
  threads: number;
  native: boolean;
  /** Reader of JSONL and line records (record-blocks.ts); 'native' falls back to 'js' where not compiled in. */
  reader?: RecordReader;
  quiet?: boolean;
  progress: boolean;
  verbose?: boolean;
  hashBits?: number;
  /** --show-text N: the first N characters of each member, where the input has text. */
  showText?: number;
  /** --within-package: node_modules scans also report groups inside one package. */
  withinPackage?: boolean;
  redis?: string;
  shard?: string;
  report?: boolean;
  prefix: string;
  batchDocs: number;
  /** With --redis: enqueue the input's ranges for `cusim worker`s, wait, print the report. */
  queue?: boolean;
  /** With --redis: delete the job's keys. */
  drop?: boolean;
  /** With --queue or --shard over files: the size of one range. */
  rangeBytes?: number;
}
