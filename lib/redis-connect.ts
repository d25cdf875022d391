// Connections to Redis for MinHashLSH's storage and the scale-out CLI
// (docs/redis-lsh.md). Every call ends: connecting (TCP, TLS, AUTH, SELECT and
// a PING) has one deadline, each command another, and a server that goes away
// is waited for, reconnecting with backoff, for a bounded time. Failures come
// out as one coded CUSIM_STORAGE_ERROR that says what answered: unreachable,
// authentication failed, TLS: ..., not a Redis server, or its error reply.
import type { Cluster, Redis } from 'ioredis';
import { codedError } from './errors.js';
import { describe, isObject } from './validate.js';
import { typeError } from './errors.js';

/** TLS settings, as ioredis (Node's tls.connect) takes them; a rediss:// URL alone uses the system's CAs. */
export interface RedisTlsOptions {
  /** PEM certificate(s) of the authorities to trust. */
  ca?: string | Buffer | (string | Buffer)[];
  /** PEM client certificate and its key, for servers that ask for one (tls-auth-clients). */
  cert?: string | Buffer;
  key?: string | Buffer;
  /** The name the server's certificate must carry (default: the URL's host). */
  servername?: string;
  /** Default true; false accepts any certificate (tests only). */
  rejectUnauthorized?: boolean;
}

export interface RedisConnectOptions {
  url: string;
  tls?: RedisTlsOptions;
  /** Milliseconds to connect: TCP, TLS, AUTH, SELECT and a first PING. Default 10000. */
  connectTimeout: number;
  /** Milliseconds one command may take. Default 60000. */
  commandTimeout: number;
  /** Milliseconds to keep reconnecting to a server that went away (or is not up yet) before failing. Default 120000. */
  retryFor: number;
}

export const CONNECT_DEFAULTS = { connectTimeout: 10_000, commandTimeout: 60_000, retryFor: 120_000 } as const;

export function storageError(message: string, cause?: unknown): Error {
  return codedError(message, 'CUSIM_STORAGE_ERROR', cause === undefined ? undefined : { cause });
}

/** The URL without its credentials. */
export function redactUrl(url: string): string {
  return url.replace(/\/\/[^@/]*@/, '//');
}

const TLS_KEYS = ['ca', 'cert', 'key', 'servername', 'rejectUnauthorized'];

export function checkTls(v: unknown, name: string): RedisTlsOptions | undefined {
  if (v === undefined) return undefined;
  if (!isObject(v)) throw typeError(`${name} must be { ca?, cert?, key?, servername?, rejectUnauthorized? }, got ${describe(v)}`);
  for (const k of Object.keys(v)) if (!TLS_KEYS.includes(k)) throw typeError(`${name}.${k} is not an option`);
  const pem = (x: unknown) => typeof x === 'string' || Buffer.isBuffer(x);
  for (const k of ['cert', 'key'] as const) {
    if (v[k] !== undefined && !pem(v[k])) throw typeError(`${name}.${k} must be a PEM string or Buffer, got ${describe(v[k])}`);
  }
  if (v.ca !== undefined && !pem(v.ca) && !(Array.isArray(v.ca) && v.ca.every(pem)))
    throw typeError(`${name}.ca must be a PEM string or Buffer (or an array of them), got ${describe(v.ca)}`);
  if (v.servername !== undefined && typeof v.servername !== 'string')
    throw typeError(`${name}.servername must be a string, got ${describe(v.servername)}`);
  if (v.rejectUnauthorized !== undefined && typeof v.rejectUnauthorized !== 'boolean')
    throw typeError(`${name}.rejectUnauthorized must be a boolean, got ${describe(v.rejectUnauthorized)}`);
  return { ...(v as RedisTlsOptions) };
}

// A failure, and whether waiting (reconnecting) may cure it.
interface Failure {
  transient: boolean;
  message: string;
}

const NET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

function isTls(e: Error & { code?: string; library?: string }): boolean {
  const c = e.code ?? '';
  return (
    c.startsWith('ERR_SSL') ||
    c.startsWith('ERR_TLS') ||
    /CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)/.test(c) ||
    e.library === 'SSL routines' ||
    /before secure TLS connection was established/.test(e.message)
  );
}

function classify(e: unknown, db = 0): Failure {
  const err = (e instanceof Error ? e : new Error(String(e))) as Error & { code?: string };
  const msg = err.message;
  if (db !== 0 && /DB index is out of range|invalid DB index/i.test(msg))
    return { transient: false, message: `the URL names database ${db}, which the server does not have (${msg})` };
  if (/^(WRONGPASS|NOAUTH)|invalid username-password|invalid password|AUTH failed/i.test(msg))
    return { transient: false, message: `authentication failed (${msg})` };
  if (isTls(err)) return { transient: false, message: `TLS: ${msg}` };
  if (/Protocol error/i.test(msg)) return { transient: false, message: `the server does not speak the Redis protocol (${msg})` };
  if (/^(LOADING|TRYAGAIN|CLUSTERDOWN|MASTERDOWN)/.test(msg)) return { transient: true, message: `the server is not ready (${msg})` };
  if (
    NET_CODES.has(err.code ?? '') ||
    /^Connection is closed|Stream isn't writeable|None of startup nodes is available|Failed to refresh slots cache/.test(msg) ||
    err.name === 'MaxRetriesPerRequestError' ||
    err.name === 'ClusterAllFailedError'
  )
    return { transient: true, message: `unreachable (${msg})` };
  if (err.name === 'ReplyError') return { transient: false, message: `the server answered with an error: ${msg}` };
  return { transient: false, message: msg };
}

class ConnectFailure extends Error {
  constructor(
    readonly failure: Failure,
    readonly original: unknown,
  ) {
    super(failure.message);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function status(c: Redis | Cluster | undefined): string {
  return c?.status ?? 'none';
}

// One attempt: connects, checks the database and the server's answer, detects a cluster.
async function connectOnce(o: RedisConnectOptions): Promise<Redis | Cluster> {
  const { Redis, Cluster } = await import('ioredis');
  // Reconnects after a drop for retryFor, then gives up (status 'end'): the session reconnects afresh.
  let downSince = 0;
  const retryStrategy = (times: number): number | null => {
    downSince ||= Date.now();
    if (Date.now() - downSince > o.retryFor) return null;
    return Math.min(100 * 2 ** Math.min(times, 5), 2000);
  };
  const common = {
    lazyConnect: true,
    enableAutoPipelining: true,
    connectTimeout: o.connectTimeout,
    commandTimeout: o.commandTimeout,
    ...(o.tls ? { tls: { ...o.tls } } : {}),
  };
  const probe = new Redis(o.url, {
    ...common,
    // The PING below is the ready check, under the connect deadline (ioredis' own waits without one).
    enableReadyCheck: false,
    // Commands issued while reconnecting wait (commandTimeout bounds them) instead of failing at once.
    maxRetriesPerRequest: null,
    // Before the first PING is answered, a failure ends this attempt (the session decides on retries).
    retryStrategy: (times) => (usable ? retryStrategy(times) : null),
  });
  let usable = false;
  probe.on('ready', () => (downSince = 0));
  let lastError: unknown;
  let failNow: (f: ConnectFailure) => void = () => undefined;
  // Surfaced through the commands' rejections; while connecting, a failure no wait can cure (AUTH, TLS) ends it.
  probe.on('error', (e) => {
    lastError = e;
    const f = classify(e, db);
    if (!usable && !f.transient) failNow(new ConnectFailure(f, e));
  });
  const db = probe.options.db ?? 0;
  let timer: NodeJS.Timeout | undefined;
  let cluster = false;
  try {
    await Promise.race([
      (async () => {
        await probe.connect();
        if (db !== 0) await probe.select(db);
        const pong = await probe.ping();
        if (pong !== 'PONG')
          throw new ConnectFailure({ transient: false, message: `answered PING with '${pong}': not a Redis server` }, pong);
        cluster = /cluster_enabled:1/.test(await probe.info('cluster'));
      })(),
      new Promise<never>((_, reject) => {
        failNow = reject;
        timer = setTimeout(() => {
          const connected = probe.status === 'connect' || probe.status === 'ready';
          reject(
            new ConnectFailure(
              connected
                ? {
                    transient: false,
                    message: `accepted the connection but did not answer within ${o.connectTimeout} ms (storage.connectTimeout): not a Redis server, or a stalled one`,
                  }
                : { transient: true, message: `unreachable (no connection within ${o.connectTimeout} ms)` },
              undefined,
            ),
          );
        }, o.connectTimeout);
      }),
    ]);
  } catch (e) {
    probe.disconnect();
    if (e instanceof ConnectFailure) throw e;
    // The event's error says more than the rejection ("Connection is closed").
    const f = classify(lastError !== undefined && /^Connection is closed/.test((e as Error).message ?? '') ? lastError : e, db);
    throw new ConnectFailure(f, e);
  } finally {
    clearTimeout(timer);
  }
  usable = true;
  if (!cluster) return probe;
  if (db !== 0) {
    probe.disconnect();
    throw new ConnectFailure(
      { transient: false, message: `the URL names database ${db}, but a Redis Cluster has only database 0` },
      undefined,
    );
  }
  const { host, port, username, password, tls } = probe.options;
  probe.disconnect();
  const c = new Cluster([{ host, port }], {
    lazyConnect: true,
    enableAutoPipelining: true,
    redisOptions: {
      username,
      password,
      tls,
      connectTimeout: o.connectTimeout,
      commandTimeout: o.commandTimeout,
      maxRetriesPerRequest: null,
    },
    clusterRetryStrategy: retryStrategy,
  });
  c.on('ready', () => (downSince = 0));
  c.on('error', () => undefined);
  try {
    await Promise.race([
      c.connect(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new ConnectFailure({ transient: true, message: 'the cluster did not become ready' }, undefined)),
          o.connectTimeout,
        );
      }),
    ]);
  } catch (e) {
    c.disconnect();
    throw e instanceof ConnectFailure ? e : new ConnectFailure(classify(e), e);
  } finally {
    clearTimeout(timer);
  }
  return c;
}

function where(o: RedisConnectOptions): string {
  return `Redis at ${redactUrl(o.url)}`;
}

/**
 * A connection that every storage call goes through: connects on first use
 * (then runs `onConnect`), and runs calls with retries while the server is
 * unreachable, up to retryFor; every other failure is thrown at once.
 */
export class RedisSession {
  readonly #o: RedisConnectOptions;
  readonly #onConnect: ((c: Redis | Cluster) => Promise<void>) | undefined;
  #client: Promise<Redis | Cluster> | undefined;

  constructor(o: RedisConnectOptions, onConnect?: (c: Redis | Cluster) => Promise<void>) {
    this.#o = o;
    this.#onConnect = onConnect;
  }

  get options(): RedisConnectOptions {
    return this.#o;
  }

  #connect(): Promise<Redis | Cluster> {
    if (!this.#client) {
      const p = (async () => {
        const c = await connectOnce(this.#o);
        try {
          await this.#onConnect?.(c);
        } catch (e) {
          c.disconnect();
          throw e;
        }
        return c;
      })();
      this.#client = p;
      p.catch(() => {
        if (this.#client === p) this.#client = undefined;
      });
    }
    return this.#client;
  }

  /** Runs `fn` with the client; retries it (it must be idempotent) while the server is unreachable. */
  async run<T>(fn: (c: Redis | Cluster) => Promise<T>): Promise<T> {
    let since = 0;
    for (let attempt = 0; ; attempt++) {
      let c: Redis | Cluster | undefined;
      let f: Failure;
      try {
        c = await this.#connect();
        return await fn(c);
      } catch (e) {
        if (e instanceof ConnectFailure) f = e.failure;
        else if ((e as { code?: string }).code?.startsWith('CUSIM_')) throw e;
        else if ((e as Error).message === 'Command timed out') {
          // Timed out while reconnecting: the server went away. While connected: it stalls.
          f =
            status(c) === 'ready'
              ? { transient: false, message: `a command got no answer within ${this.#o.commandTimeout} ms (storage.commandTimeout)` }
              : { transient: true, message: 'unreachable (the connection dropped)' };
        } else f = classify(e);
        const cause = e instanceof ConnectFailure ? e.original : e;
        if (!f.transient) throw storageError(`${where(this.#o)}: ${f.message}`, cause);
        since ||= Date.now();
        const left = this.#o.retryFor - (Date.now() - since);
        if (left <= 0) {
          const s = this.#o.retryFor / 1000;
          throw storageError(`${where(this.#o)}: ${f.message}; gave up after retrying for ${s} s (storage.retryFor)`, cause);
        }
        if (c && status(c) === 'end') this.#drop(c);
        await sleep(Math.min(100 * 2 ** Math.min(attempt, 5), 2000, left));
      }
    }
  }

  #drop(c: Redis | Cluster): void {
    c.disconnect();
    this.#client = undefined;
  }

  /** The connected client (connecting, with retries, if needed). */
  client(): Promise<Redis | Cluster> {
    return this.run(async (c) => c);
  }

  async close(): Promise<void> {
    const p = this.#client;
    this.#client = undefined;
    if (!p) return;
    try {
      const c = await p;
      // A client that is not connected would queue QUIT until the server
      // came back, holding the process for the whole command timeout.
      if (status(c) !== 'ready') {
        c.disconnect();
        return;
      }
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([c.quit(), new Promise((r) => (timer = setTimeout(r, this.#o.commandTimeout)))]);
      clearTimeout(timer);
      c.disconnect();
    } catch {
      // never connected, or already gone
    }
  }
}

/** Connects once (with the session's retries) and returns the client: for one-off tools and tests. */
export async function connectRedis(url: string, options: Partial<Omit<RedisConnectOptions, 'url'>> = {}): Promise<Redis | Cluster> {
  return new RedisSession({ ...CONNECT_DEFAULTS, ...options, url }).client();
}

/**
 * Refuses a server that may evict keys (maxmemory-policy other than
 * noeviction): a lost key is a lost row. Returns a warning when memory use is
 * above 80% of maxmemory. `allow` turns the refusal into a warning.
 */
export async function checkEviction(c: Redis | Cluster, allow: boolean): Promise<string[]> {
  const nodes = 'nodes' in c ? c.nodes('master') : [c];
  const warnings: string[] = [];
  for (const n of nodes) {
    const info = await n.info('memory');
    const field = (k: string) => new RegExp(`^${k}:(.*)$`, 'm').exec(info)?.[1]?.trim();
    const policy = field('maxmemory_policy') ?? 'noeviction';
    const max = Number(field('maxmemory') ?? 0);
    const used = Number(field('used_memory') ?? 0);
    const at = `${n.options.host}:${n.options.port}`;
    if (policy !== 'noeviction') {
      const msg = `Redis at ${at} has maxmemory-policy ${policy}: it may evict keys of the index, and evicted rows are lost`;
      if (!allow) throw storageError(`${msg} (set maxmemory-policy noeviction, or pass --allow-eviction)`);
      warnings.push(msg);
    }
    if (max > 0 && used > 0.8 * max)
      warnings.push(`Redis at ${at} uses ${Math.round((100 * used) / max)}% of its maxmemory (${max} bytes)`);
  }
  return warnings;
}
