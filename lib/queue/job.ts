// A range job in Redis: the settings every worker must share, the planned
// ranges with their fingerprints, and one record per finished range (its
// record totals and stage times). Keys, for job prefix P:
//   P:job          settings (JSON per field), incl. the range count and the plan's hash
//   P:ranges       range r -> the range (file, bytes, first line, fingerprint)
//   P:done         range r -> its totals once inserted (documents, rows, skips, stage times)
//   P:names{p}     display names of ids (as --shard workers keep them)
//   P:rows:R:A-B   range R's insert batch of ids A..B: vectors and names, one blob (batch-rows.ts)
//   P:lsh:...      the MinHashLSH index (lib/lsh-redis.ts)
//   P:q{P}:...     the BullMQ queue of ranges (queue.ts)
import type { Cluster, Redis } from 'ioredis';
import { createHash } from 'node:crypto';
import { claimHash } from '../lsh-redis.js';
import { CliError } from '../cli/errors.js';
import type { Skip } from '../cli/sources.js';
import type { TextMode, Weighting } from '../text/index.js';
import type { SignatureKind } from '../lsh.js';
import type { Range } from './ranges.js';

/** The settings of a --shard job (dedup-shard.ts), and those a job over ranges adds. */
/** What every worker of one job must agree on (stored once, checked by each). */
export interface Job {
  threshold: number;
  samples: number;
  recall: number;
  seed: number;
  mode: TextMode;
  weighting: Weighting;
  /** The signature family (and the Redis index's signature width). */
  method: SignatureKind;
  q: number;
  hashBits: number;
  minTokens: number;
  source: string;
}

export interface RangeSettings extends Job {
  field: string;
  idField: string;
  delimiter: string | null;
  /** CSV/TSV: false when the files have no header row (--no-header or --columns). */
  header: boolean;
  /** CSV/TSV: the column names given with --columns, or null. */
  columns: string[] | null;
  maxSize: number;
  /** Ranges planned. */
  ranges: number;
  /** SHA-256 of the ranges as planned (files, cuts, fingerprints). */
  plan: string;
}

/** One finished range. `rows`, the records it inserted, is what the report checks the index against. */
export interface RangeStats {
  documents: number;
  tooSmall: number;
  rows: number;
  /** Ids [idLo, idHi) are this range's. */
  idLo: number;
  idHi: number;
  skipped: (Skip & { at: number })[];
  /**
   * Stage times in ms: read (and fingerprint; parse too where the JavaScript reader parses: CSV, TSV,
   * weighted jobs), featurize (and parse for JSONL and lines, which the block reader does with the
   * features), hash, insert (which overlaps the next batch's stages).
   */
  ms: { read: number; featurize: number; hash: number; insert: number };
  worker: string;
  /**
   * The range's insert batches in order, [first id, last id, rows] each: the batch's rows are the blob
   * at key `rows(r, first, last)`. Absent in jobs of workers that stored rows per document (hashes).
   */
  batches?: [number, number, number][];
}

export const jobKeys = (prefix: string) => ({
  job: `${prefix}:job`,
  ranges: `${prefix}:ranges`,
  done: `${prefix}:done`,
  names: (p: number) => `${prefix}:names{${p}}`,
  /**
   * The insert batch of range r holding ids first..last: their vectors and names (batch-rows.ts). Named
   * by its span, so one key always holds the same rows, whatever --batch-docs the worker that wrote it had.
   */
  rows: (r: number, first: number, last: number) => `${prefix}:rows:${r}:${first}-${last}`,
  lsh: `${prefix}:lsh`,
  /** BullMQ's key prefix: one hash tag, so a Redis Cluster keeps the queue's keys in one slot as BullMQ needs. */
  queue: `${prefix}:q{${prefix}}`,
});
export const NAME_PARTS = 64;

export function planHash(ranges: Range[]): string {
  return createHash('sha256').update(JSON.stringify(ranges)).digest('hex');
}

/** Records the settings and ranges, or checks them against those recorded by an earlier producer or worker. */
export async function claimJob(c: Redis | Cluster, prefix: string, settings: RangeSettings, ranges: Range[]): Promise<void> {
  const k = jobKeys(prefix);
  const fields = Object.fromEntries(Object.entries(settings).map(([f, v]) => [f, JSON.stringify(v)]));
  const have = await claimHash(c, k.job, fields);
  for (const [f, v] of Object.entries(fields)) {
    if (have[f] === v) continue;
    const what =
      f === 'plan' || f === 'ranges'
        ? `was planned over different input (${f} differs: the files, their sizes or contents changed)`
        : `was started with ${f}=${have[f]}, this one has ${f}=${v}`;
    throw new CliError(`job '${prefix}' in Redis ${what}`, 'give every worker the same options and input, or use another --prefix', 2);
  }
  const want = Object.fromEntries(ranges.map((r, i) => [String(i), JSON.stringify(r)]));
  for (let i = 0; i < ranges.length; i += 1000) {
    const part = Object.fromEntries(Object.entries(want).slice(i, i + 1000));
    await claimHash(c, k.ranges, part);
  }
}

/** The job's settings, or undefined where none is recorded. */
export async function readSettings(c: Redis | Cluster, prefix: string): Promise<RangeSettings | undefined> {
  const have = await c.hgetall(jobKeys(prefix).job);
  if (!have.plan) return undefined;
  return Object.fromEntries(Object.entries(have).map(([f, v]) => [f, JSON.parse(v)])) as unknown as RangeSettings;
}

export async function readRange(c: Redis | Cluster, prefix: string, r: number): Promise<Range> {
  const v = await c.hget(jobKeys(prefix).ranges, String(r));
  if (v === null) throw new CliError(`job '${prefix}' has no range ${r}`, 'the job was dropped or never planned; start it again', 1);
  return JSON.parse(v) as Range;
}

export async function finishedRanges(c: Redis | Cluster, prefix: string): Promise<Map<number, RangeStats>> {
  const all = await c.hgetall(jobKeys(prefix).done);
  return new Map(Object.entries(all).map(([r, v]) => [Number(r), JSON.parse(v) as RangeStats]));
}
