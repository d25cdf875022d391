// What the report of a range job checks and sums: every range finished, the
// index still holding every record each range inserted (a key evicted under
// memory pressure, or deleted, shows up as missing records instead of as
// silently smaller groups), and the workers' stage times.
import type { Cluster, Redis } from 'ioredis';
import { CliError } from '../cli/errors.js';
import { storageError } from '../lsh-redis.js';
import { finishedRanges, readRange, readSettings } from './job.js';
import type { RangeSettings, RangeStats } from './job.js';
import { lowerBound } from '../sorted.js';

export interface RangeJob {
  settings: RangeSettings;
  /** Stats of every range, by range index. */
  done: RangeStats[];
}

/** The range job at `prefix` with every range finished; undefined for a --shard job over stdin. */
export async function finishedJob(c: Redis | Cluster, prefix: string): Promise<RangeJob | undefined> {
  const settings = await readSettings(c, prefix);
  if (!settings) return undefined;
  const got = await finishedRanges(c, prefix);
  const done: RangeStats[] = [];
  for (let r = 0; r < settings.ranges; r++) {
    const s = got.get(r);
    if (!s) {
      const range = await readRange(c, prefix, r);
      const where =
        range.kind === 'records'
          ? `${range.name} bytes ${range.start}-${range.end}`
          : `${range.files.length} files from ${range.files[0].name}`;
      throw new CliError(
        `range ${r} of ${settings.ranges} of job '${prefix}' (${where}) has not finished (${got.size} have)`,
        'wait for the workers (cusim worker), or run the missing --shard worker, then the report',
        1,
      );
    }
    done.push(s);
  }
  return { settings, done };
}

/** Throws CUSIM_STORAGE_ERROR naming each range whose records the index no longer holds in full. `ids`: the live ids, ascending. */
export function checkRangeTotals(job: RangeJob, ids: Uint32Array): void {
  const lower = (x: number): number => lowerBound(ids, x);
  const short: string[] = [];
  let missing = 0;
  job.done.forEach((s, r) => {
    const have = lower(s.idHi) - lower(s.idLo);
    if (have < s.rows) {
      short.push(`range ${r}: ${have} of ${s.rows}`);
      missing += s.rows - have;
    }
  });
  if (short.length) {
    throw storageError(
      `the index holds fewer records than the workers inserted: ${missing} missing (${short.slice(0, 10).join('; ')}${short.length > 10 ? `; … ${short.length - 10} more ranges` : ''}); ` +
        'keys were evicted or deleted (check maxmemory-policy noeviction); drop the job and run it again',
    );
  }
}

/** The workers' stage times summed over ranges, and their rate: documents per second of worker time. */
export function workerStages(job: RangeJob): {
  stages: { stage: string; ms: number }[];
  documents: number;
  docsPerSecond: number;
  workers: number;
} {
  const ms = { read: 0, featurize: 0, hash: 0, insert: 0 };
  let documents = 0;
  const workers = new Set<string>();
  for (const s of job.done) {
    for (const k of Object.keys(ms) as (keyof typeof ms)[]) ms[k] += s.ms[k];
    documents += s.documents;
    workers.add(s.worker);
  }
  const busy = ms.read + ms.featurize + ms.hash + ms.insert;
  return {
    stages: [
      // JSONL and lines are parsed with the features (natively, in blocks); CSV, TSV and weighted jobs while read.
      { stage: 'workers: read + fingerprint (+ parse: CSV, TSV, weighted)', ms: ms.read },
      { stage: 'workers: featurize (+ parse: JSONL, lines)', ms: ms.featurize },
      { stage: 'workers: hash', ms: ms.hash },
      { stage: 'workers: insert', ms: ms.insert },
    ],
    documents,
    docsPerSecond: busy > 0 ? Math.round((documents * 1000) / busy) : 0,
    workers: workers.size,
  };
}
