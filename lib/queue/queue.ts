// The queue of a job's ranges, on BullMQ: a range is a BullMQ job with id
// `r<index>` (enqueueing twice adds nothing), taken by one worker at a time
// under a lock the worker renews. A worker that dies (kill -9, lost host)
// stops renewing; once the lock lapses, any live worker's stalled check puts
// the range back in the queue, and a range whose processing failed is retried
// with exponential backoff. Inserts are idempotent, so a range done twice
// counts once.
// bullmq (some 200 modules) is loaded by the first queue opened, not at start:
// every other command, `cusim dedup` without --queue included, starts without it.
import type { Job, Queue, Worker } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import { connectRedis } from '../lsh-redis.js';
import { jobKeys } from './job.js';

export const QUEUE = 'ranges';
/** Tries of a failing range (an error, not a crash) before the job fails. */
export const ATTEMPTS = 5;
/** Recoveries of a range whose worker died, before the job fails. */
export const MAX_STALLED = 10;

/** A connection as BullMQ needs it (no per-command retry limit: blocking reads wait for work). */
export async function queueConnection(url: string): Promise<Redis | Cluster> {
  const probe = await connectRedis(url);
  const c = (probe as Cluster).isCluster
    ? (probe as Cluster).duplicate(undefined, {
        redisOptions: { ...(probe as Cluster).options.redisOptions, maxRetriesPerRequest: null },
        enableAutoPipelining: false,
      })
    : (probe as Redis).duplicate({ maxRetriesPerRequest: null, enableAutoPipelining: false, lazyConnect: false });
  probe.disconnect();
  c.on('error', () => undefined); // surfaced through the commands' rejections
  return c;
}

export async function openQueue(connection: Redis | Cluster, prefix: string): Promise<Queue> {
  const { Queue } = await import('bullmq');
  return new Queue(QUEUE, { connection, prefix: jobKeys(prefix).queue });
}

/** Enqueues ranges `rs` (those already queued or done are left as they are). */
export async function enqueue(q: Queue, rs: number[]): Promise<void> {
  for (let i = 0; i < rs.length; i += 1000) {
    await q.addBulk(
      rs.slice(i, i + 1000).map((r) => ({
        name: 'range',
        data: { r },
        opts: {
          jobId: `r${r}`,
          attempts: ATTEMPTS,
          backoff: { type: 'exponential', delay: 1000 },
          removeOnComplete: false,
          removeOnFail: false,
        },
      })),
    );
  }
}

/** Ranges whose tries are spent, with the last error of each. */
export async function failedRanges(q: Queue): Promise<{ r: number; reason: string }[]> {
  const failed = await q.getFailed(0, 100);
  return failed.map((j) => ({ r: (j.data as { r: number }).r, reason: j.failedReason }));
}

export interface RangeWorkerOptions {
  /** How long a dead worker's range stays locked, and how often live workers look for such ranges (ms). */
  stalledMs: number;
  /** Processes range r; throws to have it retried. */
  process: (r: number, job: Job) => Promise<void>;
}

export async function startWorker(connection: Redis | Cluster, prefix: string, o: RangeWorkerOptions): Promise<Worker> {
  const { Worker } = await import('bullmq');
  return new Worker(QUEUE, (job: Job) => o.process((job.data as { r: number }).r, job), {
    connection,
    prefix: jobKeys(prefix).queue,
    concurrency: 1,
    lockDuration: o.stalledMs,
    stalledInterval: o.stalledMs,
    maxStalledCount: MAX_STALLED,
    // Short polls: a worker notices the job's end (and a stalled range) promptly.
    drainDelay: Math.max(1, Math.ceil(o.stalledMs / 4000)),
  });
}
