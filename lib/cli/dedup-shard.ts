// `cusim dedup --redis URL --shard i/N` and `cusim dedup --redis URL --report`:
// dedup spread over processes and hosts through a MinHashLSH in Redis
// (docs/redis-lsh.md). Document j of the input (stdin records, then files in
// walk order) has id j and belongs to shard j mod N. Workers featurize with
// hashed columns (shard-independent), hash, and insert signatures plus their
// vectors; the report runs the same exact verification as a single-process
// `cusim dedup` with the same options, so N workers give its groups exactly.
// A worker records each finished batch: restarted after a crash it skips them,
// and a batch sent twice is deduplicated on read (inserts are idempotent).
// The job's settings, the shard count and each shard's batch size are each
// claimed by one script (fields set where absent), so a kill leaves either
// nothing or a whole claim, and a rerun never reads a recorded batch number
// as other documents. Redis calls retry while the server is
// unreachable, for --redis-retry seconds, then the worker exits 1.
import { readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';
import { devices } from '../backend.js';
import { claimHash, storageError } from '../lsh-redis.js';
import { checkEviction, CONNECT_DEFAULTS, RedisSession, type RedisConnectOptions } from '../redis-connect.js';
import { MinHashLSH } from '../lsh.js';
import { TextFeaturizer } from '../text/index.js';
import type { TextFeaturizerOptions, TextMode } from '../text/index.js';
import { CliError } from './errors.js';
import { dedupMethod, defaultWeighting } from './dedup-method.js';
import type { DedupCommandOptions } from './dedup-options.js';
import type { Io } from './options.js';
import type { Readable } from 'node:stream';
import { recallCurve, recallParams } from '../lsh.js';
import { DEDUP_DEFAULTS, dedupParams } from '../dedup/defaults.js';
import { recordIndexer } from '../dedup/records.js';
import { readRecords } from './records.js';
import { buildGroups, renderCsv, renderJson, renderTable } from './report.js';
import { jobMemory } from '../queue/keys.js';
import { checkRangeTotals, finishedJob, workerStages } from '../queue/totals.js';
import { BatchRows } from '../queue/batch-rows.js';
import { jobKeys } from '../queue/job.js';
import type { Job } from '../queue/job.js';
import type { DedupReport } from './report.js';
import { MAX_DOC_BYTES, displayPath, expandPaths, readDoc } from './sources.js';
import type { Doc, Skip } from './sources.js';
import { lowerBound } from '../sorted.js';

export type ShardOptions = Omit<DedupCommandOptions, 'redis' | 'backend'> & {
  redis: string;
  backend: 'cpu' | 'cuda';
  /** --redis-ca FILE: the PEM CA that signed a rediss:// server's certificate. */
  redisCa?: string;
  /** --redis-retry SECONDS: how long Redis calls retry while the server is unreachable (default 120). */
  redisRetry?: number;
  /** --allow-eviction: work on a server whose maxmemory-policy may evict keys (warned, not refused). */
  allowEviction?: boolean;
  /** --crash-at POINT: a test hook; the worker kills itself (SIGKILL) at claim, batch:B or insert:B. */
  crashAt?: string;
};

export type { Job } from '../queue/job.js';

interface BatchStats {
  documents: number;
  tooSmall: number;
  rows: number;
  /** With the document index (-1: an unreadable directory), so the report lists them in input order. */
  skipped: (Skip & { at: number })[];
}

// 2^18 columns: few collisions for corpora of ~10^5 distinct tokens, while the
// weighted MinHash tables (12 bytes per column and sample) stay ~400 MB at 128 samples.
export const DEFAULT_HASH_BITS = 18;

function parseShard(s: string): { i: number; n: number } {
  const m = /^(\d+)\/(\d+)$/.exec(s.trim());
  const i = m ? Number(m[1]) : NaN;
  const n = m ? Number(m[2]) : NaN;
  if (!m || n < 1 || n > 65536 || i >= n)
    throw new CliError(`--shard must be i/N with 0 <= i < N <= 65536, got '${s}'`, 'e.g. --shard 0/4', 2);
  return { i, n };
}

const keys = (prefix: string) => ({
  job: `${prefix}:job`,
  shards: `${prefix}:shards`,
  progress: (shard: string) => `${prefix}:progress{${shard}}`,
  names: (p: number) => `${prefix}:names{${p}}`,
});
const NAME_PARTS = 64;

/** The banding every worker and the report use: the recall target's, as `cusim dedup`'s. */
function paramsFor(job: Job): { bands: number; rows: number; samples: number } {
  return dedupParams({ threshold: job.threshold, recall: job.recall, samples: job.samples });
}

/** The options that say how to reach Redis. */
export interface RedisCliOptions {
  redis: string;
  redisCa?: string;
  redisRetry?: number;
}

/** How to reach Redis: --redis URL, --redis-ca, --redis-retry. */
function connection(o: RedisCliOptions): RedisConnectOptions {
  let ca: Buffer | undefined;
  if (o.redisCa !== undefined) {
    try {
      ca = readFileSync(o.redisCa);
    } catch (e) {
      throw new CliError(
        `cannot read --redis-ca ${o.redisCa}: ${(e as Error).message}`,
        'give a PEM file of the CA that signed the server',
        2,
      );
    }
  }
  return { ...CONNECT_DEFAULTS, url: o.redis, retryFor: (o.redisRetry ?? 120) * 1000, ...(ca ? { tls: { ca } } : {}) };
}

// Test hook (--crash-at): the worker kills itself, as a crash or `kill -9` would, at a named point.
function crashAt(o: ShardOptions, point: string): void {
  if (o.crashAt === point) process.kill(process.pid, 'SIGKILL');
}

function lshFor(o: ShardOptions, job: Job): MinHashLSH {
  const p = paramsFor(job);
  return new MinHashLSH({
    bands: p.bands,
    rows: p.rows,
    threshold: job.threshold,
    samples: p.samples,
    backend: o.backend,
    devices: o.devices,
    kind: job.method,
    storage: { type: 'redis', prefix: `${o.prefix}:lsh`, ...connection(o) },
  });
}

export async function withRedis<T>(o: RedisCliOptions, fn: (s: RedisSession) => Promise<T>): Promise<T> {
  const s = new RedisSession(connection(o));
  try {
    return await fn(s);
  } finally {
    await s.close();
  }
}

/** withRedis with the client itself, for calls that make their own retries (the queue's workers). */
export async function withRedisClient<T>(o: RedisCliOptions, fn: (c: Redis | Cluster) => Promise<T>): Promise<T> {
  return withRedis(o, async (s) => fn(await s.client()));
}

// Records the job's settings and shard count, or checks them against those already recorded (each claim one script).
async function agreeOnJob(s: RedisSession, prefix: string, job: Job, shards: number): Promise<void> {
  const k = keys(prefix);
  const have = await s.run((c) => claimHash(c, k.job, Object.fromEntries(Object.entries(job).map(([f, v]) => [f, JSON.stringify(v)]))));
  for (const [f, v] of Object.entries(job)) {
    if (have[f] !== JSON.stringify(v)) {
      throw new CliError(
        `job '${prefix}' in Redis was started with ${f}=${have[f]}, this worker has ${f}=${JSON.stringify(v)}`,
        'give every worker the same options and input, or use another --prefix',
        2,
      );
    }
  }
  const count = (await s.run((c) => claimHash(c, k.shards, { count: String(shards) }))).count;
  if (count !== String(shards))
    throw new CliError(`job '${prefix}' runs with ${count} shards, not ${shards}`, 'give every worker the same N', 2);
}

async function readJob(c: Redis | Cluster, prefix: string): Promise<Job> {
  const have = await c.hgetall(keys(prefix).job);
  if (!have.samples)
    throw new CliError(`no dedup job named '${prefix}' in Redis`, 'run the --shard workers first, with the same --prefix', 1);
  return Object.fromEntries(Object.entries(have).map(([f, v]) => [f, JSON.parse(v)])) as unknown as Job;
}

/** One worker: featurize, hash and insert shard i of N; resumes after a crash. */
export async function shardCommand(paths: string[], o: ShardOptions, io: Io): Promise<number> {
  const { i: shard, n: shards } = parseShard(o.shard!);
  if (o.crashAt !== undefined && !/^(claim|batch:\d+|insert:\d+)$/.test(o.crashAt))
    throw new CliError(`--crash-at must be claim, batch:B or insert:B, got '${o.crashAt}'`, 'e.g. --crash-at batch:0', 2);
  const say = (s: string): void => {
    if (!o.quiet) io.stderr.write(s + '\n');
  };
  if (paths.length === 0) throw new CliError('--shard needs the input paths (or - for stdin)', 'every worker gets the same input', 2);
  const stdin = paths.includes('-');
  const named = paths.filter((p) => p !== '-');
  const mode: TextMode = o.mode ?? (stdin && named.length === 0 ? 'words' : 'code');
  const weighting = o.weighting ?? defaultWeighting(o.weighted);
  if (weighting === 'tfidf') {
    throw new CliError(
      '--weighting tfidf needs document frequencies over the whole corpus, which no shard has',
      'use --weighting count or binary with --redis',
      2,
    );
  }
  const job: Job = {
    threshold: o.threshold,
    samples: dedupParams({ threshold: o.threshold, recall: o.recall, samples: o.samples }).samples,
    recall: o.recall,
    seed: o.seed,
    mode,
    weighting,
    method: dedupMethod(weighting, o.weighted),
    q: o.q,
    hashBits: o.hashBits ?? DEFAULT_HASH_BITS,
    minTokens: o.minTokens ?? 1,
    source: paths.join(' '),
  };
  const extensions = o.ext ? o.ext.split(',').map((e) => (e.startsWith('.') ? e : '.' + e.trim())) : undefined;
  // The document list, identical in every worker.
  const docs: (Doc | Skip | { file: string })[] = [];
  if (stdin) {
    if (io.stdinIsTTY) throw new CliError("'-' reads records from stdin, but stdin is a terminal", 'pipe data in', 2);
    for await (const d of readRecords(io.stdin as Readable, {
      format: o.format,
      field: o.field,
      idField: o.idField,
      header: o.header,
      columns: o.columns,
      delimiter: o.delimiter,
      source: 'stdin',
      maxRecordBytes: Math.min(o.maxSize, MAX_DOC_BYTES),
    }))
      docs.push(d);
  }
  const { files, unreadable } = expandPaths(named, { extensions, gitignore: o.gitignore, exclude: o.exclude });
  for (const f of files) docs.push({ file: f });
  const featOptions: TextFeaturizerOptions = { mode, weighting, q: o.q, hashBits: job.hashBits, ...(o.native ? {} : { native: false }) };
  const feat = new TextFeaturizer(featOptions).freeze();
  const lsh = lshFor(o, job);
  const indexer = recordIndexer(lsh, {
    method: job.method,
    threshold: job.threshold,
    recall: job.recall,
    samples: job.samples,
    seed: job.seed,
    backend: o.backend,
    devices: o.devices,
    vectors: true,
  });
  const shardName = `${shard}/${shards}`;
  try {
    await withRedis(o, async (s) => {
      const k = keys(o.prefix);
      for (const w of await s.run((c) => checkEviction(c, !!o.allowEviction))) io.stderr.write(`cusim: warning: ${w}\n`);
      await agreeOnJob(s, o.prefix, job, shards);
      crashAt(o, 'claim');
      // The batch size this shard's recorded batches were cut with: a rerun with another would skip other documents.
      const size = (await s.run((c) => claimHash(c, k.shards, { [`batchDocs:${shardName}`]: String(o.batchDocs) })))[
        `batchDocs:${shardName}`
      ];
      if (size !== String(o.batchDocs)) {
        throw new CliError(
          `shard ${shardName} of job '${o.prefix}' was started with --batch-docs ${size}, not ${o.batchDocs}`,
          'rerun it with the same --batch-docs',
          2,
        );
      }
      const done = await s.run((c) => c.hgetall(k.progress(shardName)));
      const mine: number[] = [];
      for (let j = shard; j < docs.length; j += shards) mine.push(j);
      const batches = Math.ceil(mine.length / o.batchDocs);
      let resumed = 0;
      for (let b = 0; b < batches; b++) {
        if (done[`batch:${b}`] !== undefined) {
          resumed++;
          continue;
        }
        const stats: BatchStats = { documents: 0, tooSmall: 0, rows: 0, skipped: [] };
        if (b === 0 && shard === 0) for (const u of unreadable) stats.skipped.push({ id: displayPath(u), reason: 'unreadable', at: -1 });
        const ids: number[] = [];
        const names: string[] = [];
        const texts: string[] = [];
        for (const j of mine.slice(b * o.batchDocs, (b + 1) * o.batchDocs)) {
          const d = docs[j];
          const r = 'file' in d ? readDoc(d.file, displayPath(d.file), o.maxSize) : d;
          if (!('text' in r)) {
            stats.skipped.push({ ...r, at: j });
            continue;
          }
          stats.documents++;
          ids.push(j);
          names.push(r.id);
          texts.push(r.text);
        }
        const tokens = feat.addBatch(texts, job.minTokens);
        const rowIds = ids.filter((_, x) => tokens[x] >= job.minTokens);
        const rowNames = names.filter((_, x) => tokens[x] >= job.minTokens);
        stats.tooSmall = ids.length - rowIds.length;
        stats.rows = rowIds.length;
        const matrix = feat.build();
        if (rowIds.length) {
          // Names first: a row the report can see always has one.
          const byPart = new Map<number, string[]>();
          rowIds.forEach((id, x) => {
            const p = id % NAME_PARTS;
            let a = byPart.get(p);
            if (!a) byPart.set(p, (a = []));
            a.push(String(id), rowNames[x]);
          });
          await s.run((c) => Promise.all([...byPart].map(([p, a]) => c.hset(k.names(p), ...a))));
          crashAt(o, `batch:${b}`);
          // The library's pipeline hashes the batch and inserts it, with its rows for the report's verification.
          await indexer.add({ rows: matrix, indexIds: Uint32Array.from(rowIds) });
          crashAt(o, `insert:${b}`);
        }
        await s.run((c) => c.hset(k.progress(shardName), `batch:${b}`, JSON.stringify(stats)));
        if (o.verbose) io.stderr.write(`cusim: shard ${shardName}: batch ${b + 1} of ${batches} recorded\n`);
      }
      await s.run((c) => c.hset(k.shards, shardName, String(batches)));
      const all = Object.values(await s.run((c) => c.hgetall(k.progress(shardName)))).map((v) => JSON.parse(v) as BatchStats);
      const rows = all.reduce((s, x) => s + x.rows, 0);
      say(
        `cusim: shard ${shardName}: ${mine.length} documents, ${rows} inserted${resumed ? ` (${resumed} of ${batches} batches were already done)` : ''}`,
      );
    });
  } finally {
    indexer.dispose();
    await lsh.close();
  }
  return 0;
}

/** The report over every shard: groups computed from the shared index. */
export async function reportCommand(o: ShardOptions, io: Io): Promise<number> {
  const t0 = performance.now();
  if (o.json && o.csv) throw new CliError('--json and --csv cannot be combined', 'pick one output format', 2);
  return withRedis(o, async (s) => {
    const k = keys(o.prefix);
    const job = await s.run((c) => readJob(c, o.prefix));
    // A job over files (--queue, or --shard with files) keeps totals per range (lib/queue).
    const ranged = await s.run((c) => finishedJob(c, o.prefix));
    const shardHash: Record<string, string> = ranged ? {} : await s.run((c) => c.hgetall(k.shards));
    const shards = ranged ? 0 : Number(shardHash.count);
    const stats: BatchStats[] = ranged ? ranged.done : [];
    for (let i = 0; i < shards; i++) {
      const finished = shardHash[`${i}/${shards}`];
      if (finished === undefined)
        throw new CliError(`shard ${i}/${shards} of job '${o.prefix}' has not finished`, 'run (or rerun) that worker, then the report', 1);
      const recorded = Object.values(await s.run((c) => c.hgetall(k.progress(`${i}/${shards}`)))).map((v) => JSON.parse(v) as BatchStats);
      if (recorded.length !== Number(finished)) {
        throw storageError(
          `job '${o.prefix}' is inconsistent: shard ${i}/${shards} finished ${finished} batches but ${recorded.length} are recorded (key ${k.progress(`${i}/${shards}`)} lost or altered)`,
        );
      }
      stats.push(...recorded);
    }
    // Ranges whose workers stored each batch's rows as one blob (all but jobs of older workers).
    const blobs =
      ranged && ranged.done.every((d) => d.batches)
        ? new BatchRows((fn) => s.run(fn), o.prefix, ranged.done, jobKeys(o.prefix).rows)
        : undefined;
    await blobs?.check();
    const lsh = lshFor(o, job);
    let g;
    try {
      g = await lsh.groups({ verify: 'exact', threshold: job.threshold, rows: blobs && ((ids) => blobs.rows(ids)) });
    } finally {
      await lsh.close();
    }
    if (ranged) checkRangeTotals(ranged, g.ids);
    // The workers' totals against the index: rows lost from Redis must not pass as fewer duplicates.
    const inserted = stats.reduce((a, x) => a + x.rows, 0);
    if (inserted !== g.ids.length) {
      throw storageError(`job '${o.prefix}' is inconsistent: its workers inserted ${inserted} rows, the index holds ${g.ids.length}`);
    }
    // Rows are the live ids ascending, the single-process row order.
    const names: string[] = new Array(g.ids.length).fill('');
    const want = new Map<number, number[]>();
    g.ids.forEach((id, row) => {
      if (g.group[row] === 0xffffffff) return;
      let a = want.get(id % NAME_PARTS);
      if (!a) want.set(id % NAME_PARTS, (a = []));
      a.push(row);
    });
    if (blobs) {
      const rows = want.size ? [...want.values()].flat() : [];
      const got = await blobs.names(Uint32Array.from(rows, (row) => g.ids[row]));
      rows.forEach((row, y) => (names[row] = got[y]));
      want.clear();
    }
    for (const [p, rows] of want) {
      for (let x = 0; x < rows.length; x += 1000) {
        const part = rows.slice(x, x + 1000);
        const got = await s.run((c) => c.hmget(k.names(p), ...part.map((row) => String(g.ids[row]))));
        got.forEach((v, y) => {
          if (v === null)
            throw storageError(`job '${o.prefix}' is inconsistent: no name is stored for document ${g.ids[part[y]]} (key ${k.names(p)})`);
          names[part[y]] = v;
        });
      }
    }
    const rowOf = (id: number): number => lowerBound(g.ids, id);
    const result = {
      group: g.group,
      count: g.count,
      pairs: {
        left: Uint32Array.from(g.pairs.left, rowOf),
        right: Uint32Array.from(g.pairs.right, rowOf),
        similarity: g.pairs.similarity,
      },
    };
    const groups = buildGroups(names, result);
    const report: DedupReport = {
      schema: 'cusim.dedup/1',
      backend: o.backend,
      gpus: o.backend === 'cuda' ? devices().gpus.map((x) => x.name) : [],
      options: {
        threshold: job.threshold,
        samples: job.samples,
        seed: job.seed,
        mode: job.mode,
        weighting: job.weighting,
        method: job.method,
      },
      input: {
        source: job.source,
        documents: stats.reduce((s, x) => s + x.documents, 0),
        featurized: g.ids.length,
        tooSmall: stats.reduce((s, x) => s + x.tooSmall, 0),
        skipped: stats
          .flatMap((x) => x.skipped)
          .sort((a, b) => a.at - b.at)
          .map(({ id, reason }) => ({ id, reason })),
      },
      lsh: {
        ...paramsFor(job),
        recall: recallCurve(
          paramsFor(job).bands,
          paramsFor(job).rows,
          job.threshold,
          recallParams(job.threshold, DEDUP_DEFAULTS.samples, { recall: job.recall }).at,
        ),
      },
      groups,
      packages: [],
      stages: [],
      elapsedMs: 0,
    };
    if (ranged) {
      const w = workerStages(ranged);
      const held = await s.run((c) => jobMemory(c, o.prefix));
      report.stages = [...w.stages, { stage: 'report', ms: Math.round(performance.now() - t0) }];
      report.workers = { count: w.workers, documents: w.documents, docsPerSecond: w.docsPerSecond };
      report.redis = { keys: held.keys, bytes: held.bytes, measured: 'MEMORY USAGE per key, default sampling' };
      if (o.verbose && !o.quiet) {
        io.stderr.write(
          `cusim: ${w.workers} worker(s), ${w.docsPerSecond} docs/s per worker; stages ${report.stages.map((s) => `${s.stage} ${(s.ms / 1000).toFixed(2)} s`).join(', ')}\n`,
        );
      }
      if (!o.quiet)
        io.stderr.write(
          `cusim: job '${o.prefix}' holds ${held.bytes} bytes in ${held.keys} Redis keys (cusim dedup --drop deletes them)\n`,
        );
    }
    report.elapsedMs = Math.round(performance.now() - t0);
    const chunks = o.json ? renderJson(report) : o.csv ? renderCsv(report) : renderTable(report, o.limit === 0 ? Infinity : o.limit);
    for (const c of chunks) {
      if (io.stdoutClosed?.()) break;
      io.stdout.write(c);
    }
    return 0;
  });
}
