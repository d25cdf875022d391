// Scale-out over byte ranges (lib/queue): `cusim dedup FILES --redis URL
// --queue` plans and enqueues a job's ranges, waits for them and prints the
// report; `cusim worker --redis URL` (any number, on any host that sees the
// same files) takes ranges until the job is done; `cusim dedup FILES --redis
// URL --shard i/N` does ranges i, i + N, … without the queue (launchers that
// start a fixed set of workers, such as Kubernetes Indexed Jobs); `--drop`
// deletes a job's keys.
import { Command, Option } from 'commander';
import type { Cluster, Redis } from 'ioredis';
import { resolveBackend } from '../backend.js';
import type { Backend } from '../backend.js';
import { dedupParams } from '../dedup/defaults.js';
import { claimJob, finishedRanges, jobKeys, planHash, readRange, readSettings } from '../queue/job.js';
import type { RangeSettings, RangeStats } from '../queue/job.js';
import { dropJob } from '../queue/keys.js';
import { jobIndex, makeSigner, processRange } from '../queue/process.js';
import type { RangeContext } from '../queue/process.js';
import { enqueue, failedRanges, openQueue, queueConnection, startWorker } from '../queue/queue.js';
import { checkSplittable, planRanges } from '../queue/ranges.js';
import type { Range } from '../queue/ranges.js';
import { dedupMethod, defaultWeighting } from './dedup-method.js';
import { DEFAULT_HASH_BITS, withRedisClient } from './dedup-shard.js';
import type { DedupCommandOptions } from './dedup-options.js';
import { CliError } from './errors.js';
import { backendLine, deviceList, integer } from './options.js';
import type { Io } from './options.js';

/** Bytes per range unless --range-bytes: large enough that per-range costs vanish, small enough to spread over workers. */
export const DEFAULT_RANGE_BYTES = 32 << 20;
/** Milliseconds a dead worker's range stays locked unless --stalled-ms. */
export const DEFAULT_STALLED_MS = 30_000;

export type RangeOptions = DedupCommandOptions & { redis: string; backend: Backend; redisCa?: string; redisRetry?: number };

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function checkWeighting(o: RangeOptions): Exclude<RangeOptions['weighting'], 'tfidf' | undefined> {
  const weighting = o.weighting ?? defaultWeighting(o.weighted);
  if (weighting === 'tfidf') {
    throw new CliError(
      '--weighting tfidf needs document frequencies over the whole corpus, which no worker has',
      'use --weighting count or binary with --redis',
      2,
    );
  }
  return weighting;
}

/** Plans the ranges of `paths` and records (or checks) the job. */
async function planJob(
  c: Redis | Cluster,
  paths: string[],
  o: RangeOptions,
): Promise<{ settings: RangeSettings; ranges: Range[]; unreadable: string[] }> {
  const weighting = checkWeighting(o);
  const plan = await planRanges(paths, {
    format: o.format,
    ext: o.ext,
    exclude: o.exclude,
    gitignore: o.gitignore,
    maxSize: o.maxSize,
    rangeBytes: o.rangeBytes ?? DEFAULT_RANGE_BYTES,
    headerRow: o.header !== false && !o.columns,
  });
  const method = dedupMethod(weighting, o.weighted);
  const settings: RangeSettings = {
    threshold: o.threshold,
    samples: dedupParams({ threshold: o.threshold, recall: o.recall, samples: o.samples }).samples,
    recall: o.recall,
    seed: o.seed,
    mode: o.mode ?? plan.mode,
    weighting,
    method,
    q: o.q,
    // Classic MinHash hashes tokens to 32 bits as the single process does; weighted rows need a fixed width.
    hashBits: o.hashBits ?? (method === 'classic' ? 32 : DEFAULT_HASH_BITS),
    minTokens: o.minTokens ?? 1,
    source: plan.source,
    field: o.field,
    idField: o.idField,
    delimiter: o.delimiter ?? null,
    header: o.header !== false && !o.columns,
    columns: o.columns ?? null,
    maxSize: o.maxSize,
    ranges: plan.ranges.length,
    plan: planHash(plan.ranges),
  };
  await claimJob(c, o.prefix, settings, plan.ranges);
  return { settings, ranges: plan.ranges, unreadable: plan.unreadable };
}

/** What every range run in one process shares: the index, the signer, the stats record. */
async function rangeRunner(
  c: Redis | Cluster,
  o: { redis: string; prefix: string; backend: Backend; devices?: 'all' | number[]; native: boolean; batchDocs: number; crashAt?: string },
  settings: RangeSettings,
  say: (s: string) => void,
  verbose: boolean,
) {
  const lsh = jobIndex(o.redis, o.prefix, settings, o.backend, o.devices);
  const signer = makeSigner(settings, o.backend, o.devices, o.native);
  const cache = new Map<number, Range>();
  let docs = 0;
  let busy = 0;
  return {
    async run(r: number): Promise<RangeStats> {
      const range = cache.get(r) ?? (await readRange(c, o.prefix, r));
      cache.set(r, range);
      // Test hook (--crash-at insert:B): killed as `kill -9` would, holding the range, once its batch B is written.
      const crashAfter = /^insert:(\d+)$/.exec(o.crashAt ?? '')?.[1];
      let batches = 0;
      const ctx: RangeContext = {
        c,
        prefix: o.prefix,
        settings,
        lsh,
        batchDocs: o.batchDocs,
        signer,
        onBatch: (n) => {
          if (verbose) say(`cusim: range ${r}: ${n} records inserted`);
          if (++batches === Number(crashAfter)) process.kill(process.pid, 'SIGKILL');
        },
        onReader: verbose ? (d) => say(`cusim: range ${r}: records read by the ${d} reader`) : undefined,
      };
      const t0 = performance.now();
      const stats = await processRange(ctx, r, range);
      await c.hset(jobKeys(o.prefix).done, String(r), JSON.stringify(stats));
      const ms = performance.now() - t0;
      docs += stats.documents;
      busy += ms;
      if (verbose) {
        const m = stats.ms;
        say(
          `cusim: range ${r}: ${stats.documents} records in ${(ms / 1000).toFixed(2)} s (${Math.round((stats.documents * 1000) / ms)} docs/s; ` +
            `read ${m.read} ms, featurize ${m.featurize} ms, hash ${m.hash} ms, insert ${m.insert} ms)`,
        );
      }
      return stats;
    },
    rate: () => ({ docs, docsPerSecond: busy > 0 ? Math.round((docs * 1000) / busy) : 0 }),
    async close() {
      signer.dispose();
      await lsh.close();
    },
  };
}

/** `cusim dedup FILES --redis URL --shard i/N`: ranges i, i + N, … of the job, no queue. */
export async function rangeShardCommand(paths: string[], o: RangeOptions, io: Io): Promise<number> {
  const say = (s: string): void => {
    if (!o.quiet) io.stderr.write(s + '\n');
  };
  const { i, n } = parseShard(o.shard!, process.env.JOB_COMPLETION_INDEX);
  checkWeighting(o);
  return withRedisClient(o, async (c) => {
    const { settings } = await planJob(c, paths, o);
    const done = await finishedRanges(c, o.prefix);
    const runner = await rangeRunner(c, o, settings, say, !!o.verbose);
    let resumed = 0;
    let mine = 0;
    try {
      for (let r = i; r < settings.ranges; r += n) {
        mine++;
        if (done.has(r)) resumed++;
        else await runner.run(r);
      }
    } finally {
      await runner.close();
    }
    const { docs, docsPerSecond } = runner.rate();
    say(
      `cusim: shard ${i}/${n}: ${mine} of ${settings.ranges} ranges, ${docs} records (${docsPerSecond} docs/s)${resumed ? `; ${resumed} were already done` : ''}`,
    );
    return 0;
  });
}

/** `--shard i/N`; `--shard JOB_COMPLETION_INDEX/N` takes i from that variable (set by Kubernetes Indexed Jobs). */
export function parseShard(s: string, completionIndex: string | undefined): { i: number; n: number } {
  const m = /^(\d+|JOB_COMPLETION_INDEX)\/(\d+)$/.exec(s.trim());
  let i = m ? Number(m[1]) : NaN;
  if (m && m[1] === 'JOB_COMPLETION_INDEX') {
    const v = completionIndex;
    if (v === undefined || !/^\d+$/.test(v)) {
      throw new CliError(
        `--shard ${s}: JOB_COMPLETION_INDEX is ${v === undefined ? 'not set' : `'${v}', not an index`}`,
        'run it in a Kubernetes Indexed Job, or give i',
        2,
      );
    }
    i = Number(v);
  }
  const n = m ? Number(m[2]) : NaN;
  if (!m || n < 1 || n > 65536 || i >= n)
    throw new CliError(`--shard must be i/N with 0 <= i < N <= 65536, got '${s}'`, 'e.g. --shard 0/4 or --shard JOB_COMPLETION_INDEX/4', 2);
  return { i, n };
}

/** `cusim dedup FILES --redis URL --queue`: enqueues the ranges, waits until every one is done; the caller prints the report. */
export async function queueCommand(paths: string[], o: RangeOptions, io: Io): Promise<void> {
  const say = (s: string): void => {
    if (!o.quiet) io.stderr.write(s + '\n');
  };
  checkWeighting(o);
  checkSplittable(paths);
  await withRedisClient(o, async (c) => {
    const { settings } = await planJob(c, paths, o);
    const done = await finishedRanges(c, o.prefix);
    const conn = await queueConnection(o.redis);
    const q = await openQueue(conn, o.prefix);
    try {
      const todo = Array.from({ length: settings.ranges }, (_, r) => r).filter((r) => !done.has(r));
      await enqueue(q, todo);
      say(
        `cusim: job '${o.prefix}': ${settings.ranges} ranges, ${todo.length} queued; waiting for workers ` +
          `(cusim worker --redis URL --prefix ${o.prefix})`,
      );
      for (;;) {
        const finished = await c.hlen(jobKeys(o.prefix).done);
        if (finished >= settings.ranges) break;
        const failed = await failedRanges(q);
        if (failed.length) {
          throw new CliError(
            `range ${failed[0].r} of job '${o.prefix}' failed after its retries: ${failed[0].reason}` +
              (failed.length > 1 ? ` (and ${failed.length - 1} more ranges)` : ''),
            'fix the cause, then run the same command again (finished ranges are kept)',
            1,
          );
        }
        if (io.signal?.aborted) throw new CliError('interrupted while waiting for the workers', 'the queued ranges stay queued', 130);
        await sleep(200);
      }
      // Failed ranges that were retried to success by a rerun stay in the failed set; clear them with the job.
      await q.clean(0, 0, 'failed');
    } finally {
      await q.close();
      await conn.quit().catch(() => undefined);
    }
  });
}

/** `cusim dedup --redis URL --prefix P --drop`. */
export async function dropCommand(o: { redis: string; prefix: string; quiet?: boolean }, io: Io): Promise<number> {
  const n = await withRedisClient(o, (c) => dropJob(c, o.prefix));
  if (!o.quiet) io.stderr.write(`cusim: dropped job '${o.prefix}': ${n} keys deleted\n`);
  return 0;
}

interface WorkerOptions {
  redis: string;
  prefix: string;
  backend: 'auto' | 'cpu' | 'cuda';
  devices?: 'all' | number[];
  batchDocs: number;
  stalledMs: number;
  native: boolean;
  crashAt?: string;
  quiet?: boolean;
  verbose?: boolean;
}

/** `cusim worker`: takes ranges of job `prefix` until all are done. */
async function workerCommand(o: WorkerOptions, io: Io): Promise<number> {
  const say = (s: string): void => {
    if (!o.quiet) io.stderr.write(s + '\n');
  };
  const backend = resolveBackend(o.backend, '--backend');
  say(backendLine(backend));
  return withRedisClient(o, async (c) => {
    let settings = await readSettings(c, o.prefix);
    let waited = false;
    while (!settings) {
      if (!waited) say(`cusim: no job '${o.prefix}' yet; waiting for cusim dedup --queue`);
      waited = true;
      if (io.signal?.aborted) return 130;
      await sleep(Math.min(1000, o.stalledMs / 4));
      settings = await readSettings(c, o.prefix);
    }
    const s = settings;
    const runner = await rangeRunner(c, { ...o, backend }, s, say, !!o.verbose);
    const conn = await queueConnection(o.redis);
    let fatal: unknown;
    const worker = await startWorker(conn, o.prefix, {
      stalledMs: o.stalledMs,
      process: async (r) => {
        try {
          await runner.run(r);
        } catch (e) {
          // Input that differs from the job's: this worker stops, the range goes back to the others.
          if (e instanceof CliError && e.exitCode === 2) {
            fatal ??= e;
            void worker.close();
          }
          throw e;
        }
      },
    });
    worker.on('error', () => undefined); // connection trouble is retried by BullMQ; failures reach the producer
    let ranges = 0;
    worker.on('completed', () => ranges++);
    try {
      for (;;) {
        if (fatal) throw fatal;
        if (io.signal?.aborted) break;
        if ((await c.hlen(jobKeys(o.prefix).done)) >= s.ranges) break;
        await sleep(Math.min(1000, Math.max(50, o.stalledMs / 10)));
      }
    } finally {
      await worker.close();
      await runner.close();
      await conn.quit().catch(() => undefined);
    }
    if (fatal) throw fatal;
    const { docs, docsPerSecond } = runner.rate();
    say(`cusim: worker done: ${ranges} ranges, ${docs} records (${docsPerSecond} docs/s); job '${o.prefix}' is complete`);
    return 0;
  });
}

export function registerWorker(program: Command, io: Io, done: (code: number) => void): void {
  program
    .command('worker')
    .description('scale out `cusim dedup --queue`: take ranges of a job from Redis, featurize, hash and insert them, until the job is done')
    .requiredOption('--redis <url>', 'the Redis server (or any node of a cluster) holding the job')
    .option('--prefix <name>', "the job's key prefix", 'cusim-dedup')
    .addOption(new Option('-b, --backend <b>', 'compute backend').choices(['auto', 'cpu', 'cuda']).default('auto'))
    .option('-d, --devices <list>', "GPUs to use: 'all' or indices like 0,1", deviceList)
    .option('--batch-docs <n>', 'records per insert batch', integer('batch-docs', 1, 1e7), 16384)
    .option(
      '--stalled-ms <ms>',
      "how long a dead worker's range stays locked before another worker takes it (also how often workers look)",
      integer('stalled-ms', 100, 3_600_000),
      DEFAULT_STALLED_MS,
    )
    .option('--no-native', 'tokenize in JavaScript instead of the native tokenizer (same output)')
    .option(
      '--crash-at <point>',
      'for recovery tests: kill the worker (SIGKILL) at insert:B, once batch B of a range is inserted (the range not yet done)',
    )
    .option('--quiet', 'print nothing but errors')
    .option('-v, --verbose', 'print each range and batch with its rate and stage times')
    .action(async (opts: WorkerOptions) => {
      done(await workerCommand(opts, io));
    });
}
