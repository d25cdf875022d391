// MinHashLSH storage in Redis (docs/redis-lsh.md): any number of processes on
// any hosts insert into and query one index. Writes are batched: per insert
// batch, one APPEND of packed binary entries per (band, partition) key and per
// record partition, so a signature costs bytes, not commands. Keys carry hash
// tags that spread partitions over a Redis Cluster's slots. Reads are
// idempotent: entries written twice (a batch sent again after a crash) count
// once. groups() streams band keys a few at a time and unions their pairs.
import { createHash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { native } from './addon.js';
import type { LshShape } from './native-types.js';
// murmur3's fmix32: native/lsh_store.cc partitions ids with the same function.
import { fmix32 } from './classic-minhash.js';
import { rangeError, typeError } from './errors.js';
import { CONNECT_DEFAULTS, checkTls, RedisSession, storageError, type RedisTlsOptions } from './redis-connect.js';
import { describe, isObject, toCsr, type CsrMatrix } from './validate.js';
import { checkInt } from './validate.js';
import { sortedHas } from './sorted.js';

export { connectRedis, storageError } from './redis-connect.js';

export interface RedisStorageOptions {
  type: 'redis';
  /** redis[s]://[user:password@]host:port[/db]; any node of a Redis Cluster (detected). */
  url: string;
  /** Key prefix naming the index (letters, digits, `_.:-`). Default 'cusim'. */
  prefix?: string;
  /** Partitions per band, fixed when the index is created. Default 64: more make a point query read less, fewer make inserts cheaper. */
  partitions?: number;
  /**
   * Store each row's whole signature too (samples × 8 bytes per row weighted, × 4 classic), so that
   * groups() can verify 'estimate' or 'none'; fixed when the index is created.
   * Default false: 'exact' verification needs vectors instead.
   */
  signatures?: boolean;
  /** TLS: the CA to trust, and a client certificate and key (as ioredis takes them). */
  tls?: RedisTlsOptions;
  /** Milliseconds to connect (TCP, TLS, AUTH, SELECT, a first PING). Default 10000. */
  connectTimeout?: number;
  /** Milliseconds one Redis command may take. Default 60000. */
  commandTimeout?: number;
  /** Milliseconds to keep reconnecting, with backoff, to a server that is unreachable before a call fails. Default 120000. */
  retryFor?: number;
}

export type RedisStorageConfig = Required<Omit<RedisStorageOptions, 'type' | 'tls'>> & { tls?: RedisTlsOptions };

const NONE = 0xffffffff;
const FORMAT = 'cusim.lsh/1';
const BATCH = 1 << 16;
// Band keys in flight at once while streaming: bounds groups()' memory.
const STREAM_KEYS = 32;
// Sets the fields absent from a hash and returns the whole hash, atomically, so that workers starting
// together never see each other's half-written settings. ARGV[1] is the number of legacy triples that
// follow: (field, when, value) gives field the value first when it is missing while `when` is present
// (a default for hashes written by older versions).
const CLAIM_HASH = `
local h = KEYS[1]
local n = tonumber(ARGV[1])
for i = 2, 1 + 3 * n, 3 do
  if redis.call('HEXISTS', h, ARGV[i + 1]) == 1 and redis.call('HEXISTS', h, ARGV[i]) == 0 then
    redis.call('HSET', h, ARGV[i], ARGV[i + 2])
  end
end
for i = 2 + 3 * n, #ARGV, 2 do redis.call('HSETNX', h, ARGV[i], ARGV[i + 1]) end
return redis.call('HGETALL', h)`;
// One partition's records of one batch, once: a batch sent again (a restarted worker, a retried call)
// finds its digest and appends nothing, so the partition's bytes are always 16 × its 'rows' total.
const ADD_RECORDS = `
if redis.call('HSETNX', KEYS[2], ARGV[2], ARGV[3]) == 1 then
  redis.call('APPEND', KEYS[1], ARGV[1])
  redis.call('HINCRBY', KEYS[2], 'rows', ARGV[3])
end
return 1`;
// ADD_RECORDS for many partitions in one call (a single server: no slots to respect): KEYS come in
// pairs (records, total) and ARGV in triples (records, digest, rows), pair k's triple k.
const ADD_RECORDS_MANY = `
for k = 1, #KEYS / 2 do
  local a = 3 * k - 2
  if redis.call('HSETNX', KEYS[2 * k], ARGV[a + 1], ARGV[a + 2]) == 1 then
    redis.call('APPEND', KEYS[2 * k - 1], ARGV[a])
    redis.call('HINCRBY', KEYS[2 * k], 'rows', ARGV[a + 2])
  end
end
return 1`;
// Appends to the removed list the ids it does not hold yet, and counts them: its bytes are always
// 4 × its 'removed' total. Returns how many were added.
const ADD_REMOVED = `
local cur = redis.call('GET', KEYS[1]) or ''
local have = {}
for i = 1, #cur, 4 do have[string.sub(cur, i, i + 3)] = true end
local add = {}
for i = 1, #ARGV[1], 4 do
  local k = string.sub(ARGV[1], i, i + 3)
  if not have[k] then have[k] = true; add[#add + 1] = k end
end
if #add > 0 then
  redis.call('APPEND', KEYS[1], table.concat(add))
  redis.call('HINCRBY', KEYS[2], 'removed', #add)
end
return #add`;

// One insert batch's band entries, once per band key: KEYS come in pairs (band key, its digest hash,
// in the same slot), ARGV[1] is the batch's digest and ARGV[1 + k] the entries of pair k. A batch sent
// again (a restarted worker, a retried call) finds its digest and appends nothing.
const APPEND_ONCE = `
local d = ARGV[1]
for k = 1, #KEYS / 2 do
  if redis.call('HSETNX', KEYS[2 * k], d, 1) == 1 then redis.call('APPEND', KEYS[2 * k - 1], ARGV[k + 1]) end
end
return 0`;
// Keys per script call: bounds each command's size.
const SCRIPT_KEYS = 2048;
// HSET of many fields as one packed argument (packFields): each field as its own argument costs the
// client far more than the bytes (ioredis builds a command per argument), ~40% of a worker's time at
// 16K rows a batch. Unpacked here in slices that Lua's unpack() takes (its C stack holds ~8000 values).
const HSET_PACKED = `
local s = ARGV[1]
local pos, n, t = 1, 0, {}
while pos <= #s do
  local fl, vl = struct.unpack('<I4I4', s, pos)
  pos = pos + 8
  t[n + 1] = string.sub(s, pos, pos + fl - 1)
  pos = pos + fl
  t[n + 2] = string.sub(s, pos, pos + vl - 1)
  pos = pos + vl
  n = n + 2
  if n >= 4000 then redis.call('HSET', KEYS[1], unpack(t, 1, n)); n = 0 end
end
if n > 0 then redis.call('HSET', KEYS[1], unpack(t, 1, n)) end
return 0`;

/** A batch's digest as the write scripts record it: 'd:' and 22 characters of SHA-256. */
function sha22(bytes: Uint8Array): string {
  return 'd:' + createHash('sha256').update(bytes).digest('base64url').slice(0, 22);
}

/** (field, value) pairs packed as HSET_PACKED reads them: u32 field bytes, u32 value bytes, field, value. */
export function packFields(pairs: readonly (Buffer | string)[]): Buffer {
  let bytes = 0;
  for (const x of pairs) bytes += typeof x === 'string' ? Buffer.byteLength(x) : x.length;
  const out = Buffer.allocUnsafe(bytes + 4 * pairs.length);
  let at = 0;
  for (let i = 0; i + 1 < pairs.length; i += 2) {
    const f = pairs[i];
    const v = pairs[i + 1];
    const fl = typeof f === 'string' ? Buffer.byteLength(f) : f.length;
    const vl = typeof v === 'string' ? Buffer.byteLength(v) : v.length;
    out.writeUInt32LE(fl, at);
    out.writeUInt32LE(vl, at + 4);
    at += 8;
    at += typeof f === 'string' ? out.write(f, at) : f.copy(out, at);
    at += typeof v === 'string' ? out.write(v, at) : v.copy(out, at);
  }
  return out;
}

/** HSET key with all of `pairs` (field, value, field, value, …) in one command whatever their number. */
export function hsetPacked(c: Redis | Cluster, key: string, pairs: readonly (Buffer | string)[]): Promise<unknown> {
  return c.eval(HSET_PACKED, 1, key, packFields(pairs));
}

/**
 * Sends a batch's writes in order on one connection: runs of band appends as
 * APPEND_ONCE calls (each alone would cost a command; a batch has one per
 * (band, partition) key), HSETs as HSET_PACKED calls (one per partition).
 */
class ScriptBatch {
  #keys: string[] = [];
  #data: Buffer[] = [];
  #sent: Promise<unknown>[] = [];
  constructor(
    private readonly c: Redis,
    private readonly digest: string,
  ) {}

  /** Appends `data` to band key `key` unless `digestKey` (its digest hash) has this batch's digest. */
  append(key: string, digestKey: string, data: Buffer): void {
    this.#keys.push(key, digestKey);
    this.#data.push(data);
    if (this.#data.length >= SCRIPT_KEYS) this.#send();
  }

  /** HSET of a packFields/packByPart argument. */
  hset(key: string, packed: Buffer): void {
    this.#send();
    this.#sent.push(this.c.eval(HSET_PACKED, 1, key, packed));
  }

  #send(): void {
    if (this.#keys.length === 0) return;
    this.#sent.push(this.c.eval(APPEND_ONCE, this.#keys.length, ...this.#keys, this.digest, ...this.#data));
    this.#keys = [];
    this.#data = [];
  }

  async flush(): Promise<void> {
    this.#send();
    await Promise.all(this.#sent);
  }
}

/** Records `fields` in the hash `key` where absent and returns what the hash then holds. */
export async function claimHash(
  c: Redis | Cluster,
  key: string,
  fields: Record<string, string>,
  legacy: { field: string; when: string; value: string }[] = [],
): Promise<Record<string, string>> {
  const args = [String(legacy.length), ...legacy.flatMap((l) => [l.field, l.when, l.value]), ...Object.entries(fields).flat()];
  const flat = (await c.eval(CLAIM_HASH, 1, key, ...args)) as string[];
  const have: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) have[flat[i]] = flat[i + 1];
  return have;
}

function u32(buf: Uint8Array | null): Uint32Array {
  if (!buf || buf.length === 0) return new Uint32Array(0);
  if (buf.length % 4) throw storageError('a key holds a partial 32-bit value: not a cusim LSH index, or damaged');
  return new Uint32Array(Uint8Array.from(buf).buffer);
}

function idField(id: number): Buffer {
  const b = Buffer.allocUnsafe(4);
  b.writeUInt32LE(id, 0);
  return b;
}

const STORAGE_KEYS = ['type', 'url', 'prefix', 'partitions', 'signatures', 'tls', 'connectTimeout', 'commandTimeout', 'retryFor'];

export function checkRedisOptions(o: unknown): RedisStorageConfig {
  if (!isObject(o)) throw typeError(`storage must be { type: 'redis', url, prefix? }, got ${describe(o)}`);
  if (o.type !== 'redis') throw typeError(`storage.type must be 'redis', got ${describe(o.type)}`);
  for (const k of Object.keys(o)) {
    if (!STORAGE_KEYS.includes(k)) throw typeError(`storage.${k} is not an option`);
  }
  if (typeof o.url !== 'string' || !/^rediss?:\/\//.test(o.url))
    throw typeError(`storage.url must be a redis:// URL, got ${describe(o.url)}`);
  const prefix = o.prefix ?? 'cusim';
  if (typeof prefix !== 'string' || !/^[A-Za-z0-9_.:-]{1,100}$/.test(prefix)) {
    throw typeError(`storage.prefix must be 1-100 characters of letters, digits and _.:- (no braces), got ${describe(prefix)}`);
  }
  const partitions = checkInt(o.partitions ?? 64, 'storage.partitions', 1, 65536);
  if (o.signatures !== undefined && typeof o.signatures !== 'boolean')
    throw typeError(`storage.signatures must be a boolean, got ${describe(o.signatures)}`);
  const ms = (k: keyof typeof CONNECT_DEFAULTS, min: number) => checkInt(o[k] ?? CONNECT_DEFAULTS[k], `storage.${k}`, min, 2 ** 31 - 1);
  return {
    url: o.url,
    prefix,
    partitions,
    signatures: o.signatures === true,
    tls: checkTls(o.tls, 'storage.tls'),
    connectTimeout: ms('connectTimeout', 1),
    commandTimeout: ms('commandTimeout', 1),
    retryFor: ms('retryFor', 0),
  };
}

/** The vectors of `ids` (row i = ids[i]) for exact verification, from wherever the caller keeps them. */
export type RowSource = (ids: Uint32Array) => Promise<CsrMatrix>;

export interface StoredGroups {
  ids: Uint32Array;
  group: Uint32Array;
  count: number;
  pairs: { left: Uint32Array; right: Uint32Array; similarity: Float32Array };
}

const LITTLE_ENDIAN = new Uint8Array(Uint32Array.of(1).buffer)[0] === 1;

/**
 * Rows [b, e) as one HSET_PACKED argument per partition: (4, 4 × words(i),
 * id, the row's words) each, every part a 32-bit little-endian word, written
 * straight into one allocation per partition (no buffer per row: a batch
 * has tens of thousands). Vectors are stored as u32 nnz, nnz u32 columns,
 * nnz f32 weights; signatures as their words.
 */
function packByPart(
  ids: Uint32Array,
  b: number,
  e: number,
  part: (id: number) => number,
  words: (i: number) => number,
  write: (i: number, u: Uint32Array, f: Float32Array, at: number) => void,
): Map<number, Buffer> {
  const size = new Map<number, number>();
  const parts = new Int32Array(e - b);
  for (let i = b; i < e; i++) {
    const p = (parts[i - b] = part(ids[i]));
    size.set(p, (size.get(p) ?? 0) + 3 + words(i));
  }
  const out = new Map<number, { u: Uint32Array; f: Float32Array; at: number }>();
  for (const [p, n] of size) {
    const buf = new ArrayBuffer(n * 4);
    out.set(p, { u: new Uint32Array(buf), f: new Float32Array(buf), at: 0 });
  }
  for (let i = b; i < e; i++) {
    const o = out.get(parts[i - b])!;
    const w = words(i);
    o.u[o.at] = 4;
    o.u[o.at + 1] = 4 * w;
    o.u[o.at + 2] = ids[i];
    write(i, o.u, o.f, o.at + 3);
    o.at += 3 + w;
  }
  const bufs = new Map<number, Buffer>();
  for (const [p, o] of out) {
    const buf = Buffer.from(o.u.buffer);
    bufs.set(p, LITTLE_ENDIAN ? buf : buf.swap32());
  }
  return bufs;
}

export class RedisLsh {
  readonly #p: LshShape;
  readonly #o: RedisStorageConfig;
  readonly #session: RedisSession;
  // Whether the index keeps the totals that reads check its keys against (indexes made before them do not).
  #totals = true;

  constructor(params: LshShape, options: RedisStorageConfig) {
    this.#p = params;
    this.#o = options;
    this.#session = new RedisSession(options, (c) => this.#claim(c));
  }

  get prefix(): string {
    return this.#o.prefix;
  }

  #bandKey(b: number, p: number): string {
    return `${this.#o.prefix}:b{${b}.${p}}`;
  }
  // Digests of the batches appended to band key (b, p) (same slot as b{b.p}).
  #bandDigestKey(b: number, p: number): string {
    return `${this.#o.prefix}:bd{${b}.${p}}`;
  }
  #recKey(p: number): string {
    return `${this.#o.prefix}:r{${p}}`;
  }
  // The 'rows' total of record partition p and the digests of the batches counted in it (same slot as r{p}).
  #recTotalKey(p: number): string {
    return `${this.#o.prefix}:n{${p}}`;
  }
  #sigKey(p: number): string {
    return `${this.#o.prefix}:s{${p}}`;
  }
  #vecKey(p: number): string {
    return `${this.#o.prefix}:v{${p}}`;
  }
  get #delKey(): string {
    return `${this.#o.prefix}:del`;
  }
  // The 'removed' total (same slot as the removed list: its hash tag is that key's name).
  get #delTotalKey(): string {
    return `{${this.#o.prefix}:del}:n`;
  }
  get #metaKey(): string {
    return `${this.#o.prefix}:meta`;
  }
  #part(id: number): number {
    return fmix32(id) % this.#o.partitions;
  }

  #want(): Record<string, string> {
    return {
      format: FORMAT,
      samples: String(this.#p.samples),
      bands: String(this.#p.bands),
      rows: String(this.#p.rows),
      width: String(this.#p.width),
      partitions: String(this.#o.partitions),
      signatures: this.#o.signatures ? '1' : '0',
      totals: '1',
    };
  }

  // The index's parameters checked against Redis's (first use creates them).
  async #claim(c: Redis | Cluster): Promise<void> {
    const want = this.#want();
    // Indexes made before the width was recorded hold weighted signatures; those made before the totals have none.
    const have = await claimHash(c, this.#metaKey, want, [
      { field: 'width', when: 'format', value: '2' },
      { field: 'totals', when: 'format', value: '0' },
    ]);
    for (const [k, v] of Object.entries(want)) {
      if (k === 'totals') continue;
      if (have[k] !== v) {
        throw storageError(
          `the index at prefix '${this.#o.prefix}' has ${k}=${have[k]}, this MinHashLSH has ${k}=${v} ` +
            '(use the same options, or another prefix)',
        );
      }
    }
    this.#totals = have.totals === '1';
  }

  /** The connected client, with the index's parameters checked against Redis's (first use creates them). */
  client(): Promise<Redis | Cluster> {
    return this.#session.client();
  }

  // Every call: retried while Redis is unreachable (calls are idempotent), and refused once the index's
  // settings key is gone (FLUSHALL, a clear() elsewhere, eviction), which would otherwise read as empty.
  #run<T>(fn: (c: Redis | Cluster) => Promise<T>): Promise<T> {
    return this.#session.run(async (c) => {
      if ((await c.hget(this.#metaKey, 'format')) !== FORMAT) {
        throw storageError(
          `the index at prefix '${this.#o.prefix}' is inconsistent: its settings key ${this.#metaKey} is gone ` +
            '(deleted, FLUSHALL, or evicted), so its rows are lost',
        );
      }
      return fn(c);
    });
  }

  #inconsistent(what: string): Error {
    return storageError(
      `the index at prefix '${this.#o.prefix}' is inconsistent: ${what} ` +
        '(keys were deleted, replaced or evicted; a server whose maxmemory-policy is not noeviction drops keys)',
    );
  }

  /** Removed ids, ascending, checked against their total. */
  async #removed(c: Redis | Cluster): Promise<Uint32Array> {
    const [[, buf], [, total]] = (await c.multi().getBuffer(this.#delKey).hget(this.#delTotalKey, 'removed').exec()) as [
      [unknown, Buffer | null],
      [unknown, string | null],
    ];
    const n = buf?.length ?? 0;
    if (this.#totals && n !== 4 * Number(total ?? 0))
      throw this.#inconsistent(`the removed list names ${n / 4} ids, its total says ${Number(total ?? 0)}`);
    return u32(buf).sort();
  }

  // Record partitions `parts`, each read atomically with its total and checked against it.
  async #recordBufs(c: Redis | Cluster, parts: number[]): Promise<Buffer[]> {
    const bufs: Buffer[] = [];
    for (let i = 0; i < parts.length; i += 64) {
      const got = await Promise.all(
        parts.slice(i, i + 64).map(async (p) => {
          const r = (await c.multi().getBuffer(this.#recKey(p)).hget(this.#recTotalKey(p), 'rows').exec()) as [
            [unknown, Buffer | null],
            [unknown, string | null],
          ];
          const have = (r[0][1]?.length ?? 0) / 16;
          const want = Number(r[1][1] ?? 0);
          if (this.#totals && have !== want) throw this.#inconsistent(`record partition ${p} holds ${have} rows, its total says ${want}`);
          return r[0][1];
        }),
      );
      for (const b of got) if (b) bufs.push(b);
    }
    return bufs;
  }

  /** Signature words per row. */
  get #per(): number {
    return this.#p.samples * this.#p.width;
  }

  /**
   * Adds rows. With `vectors` (row i is ids[i]'s weighted vector; with
   * classic signatures, its set of columns) the rows are stored for groups()'
   * exact verification. Idempotent per row: sending a batch again (a
   * restarted worker) adds nothing.
   */
  async insert(ids: Uint32Array, sigs: Uint32Array, vectors?: CsrMatrix): Promise<void> {
    const per = this.#per;
    const given = vectors === undefined ? undefined : toCsr(vectors, 'vectors', { maxCols: this.#sets ? 2 ** 32 : 0xffffffff });
    if (given && given.rows !== ids.length) throw rangeError(`vectors has ${given.rows} rows but ids has ${ids.length}`);
    // Copies, taken before the first await: the caller may reuse or overwrite its arrays as soon as this returns.
    ids = ids.slice();
    sigs = sigs.slice();
    const m = given && {
      rows: given.rows,
      cols: given.cols,
      indptr: given.indptr.slice(),
      indices: given.indices.slice(),
      values: given.values?.slice(),
    };
    await this.#run(async (c) => {
      const removed = await this.#removed(c);
      if (removed.length) {
        for (const id of ids) {
          if (sortedHas(removed, id)) throw rangeError(`id ${id} was removed from this Redis index; removed ids are not reused`);
        }
      }
      let pending: Promise<void> | undefined;
      try {
        for (let b = 0; b < ids.length; b += BATCH) {
          const e = Math.min(ids.length, b + BATCH);
          const entries = await native().lshStoreEntries(sigs.subarray(b * per, e * per), ids.subarray(b, e), {
            ...this.#p,
            partitions: this.#o.partitions,
          });
          if (pending) await pending;
          pending = this.#write(c, ids, sigs, m, b, e, entries);
        }
      } finally {
        if (pending) await pending;
      }
    });
  }

  // One batch: band entries, then signatures and vectors, then the records,
  // so a row with a record has everything else. A single server takes the
  // whole batch as a few scripts (WRITE_BATCH) on one connection, in that
  // order: a few round trips and commands instead of one command per
  // (band, partition) key. A cluster's keys live in many slots, which no
  // script may span, so there each key gets its command (pipelined per node).
  async #write(
    c: Redis | Cluster,
    ids: Uint32Array,
    sigs: Uint32Array,
    m: CsrMatrix | undefined,
    b: number,
    e: number,
    entries: { band: Uint8Array; bandOffsets: Float64Array; rec: Uint8Array; recOffsets: Float64Array },
  ): Promise<void> {
    const P = this.#o.partitions;
    const view = (a: Uint8Array, lo: number, hi: number) => Buffer.from(a.buffer, a.byteOffset + lo, hi - lo);
    // The batch's records (id and signature fingerprint per row) name its band entries too.
    const digest = sha22(entries.rec);
    const script = (c as Cluster).isCluster ? undefined : new ScriptBatch(c as Redis, digest);
    const writes: Promise<unknown>[] = [];
    for (let k = 0; k < this.#p.bands * P; k++) {
      const lo = entries.bandOffsets[k];
      const hi = entries.bandOffsets[k + 1];
      if (hi <= lo) continue;
      const [key, dkey] = [this.#bandKey(Math.floor(k / P), k % P), this.#bandDigestKey(Math.floor(k / P), k % P)];
      if (script) script.append(key, dkey, view(entries.band, lo, hi));
      else writes.push(c.eval(APPEND_ONCE, 2, key, dkey, digest, view(entries.band, lo, hi)));
    }
    if (this.#o.signatures || m) {
      const per = this.#per;
      const part = (id: number) => this.#part(id);
      const packed: [(p: number) => string, Map<number, Buffer>][] = [];
      if (this.#o.signatures)
        packed.push([
          (p) => this.#sigKey(p),
          packByPart(
            ids,
            b,
            e,
            part,
            () => per,
            (i, u, _f, at) => u.set(sigs.subarray(i * per, (i + 1) * per), at),
          ),
        ]);
      if (m)
        packed.push([
          (p) => this.#vecKey(p),
          packByPart(
            ids,
            b,
            e,
            part,
            (i) => 1 + 2 * (m.indptr[i + 1] - m.indptr[i]),
            (i, u, f, at) => {
              const lo = m.indptr[i];
              const n = m.indptr[i + 1] - lo;
              u[at] = n;
              u.set(m.indices.subarray(lo, lo + n), at + 1);
              if (m.values) f.set(m.values.subarray(lo, lo + n), at + 1 + n);
              else f.fill(1, at + 1 + n, at + 1 + 2 * n);
            },
          ),
        ]);
      for (const [key, bufs] of packed)
        for (const [p, buf] of bufs) {
          if (script) script.hset(key(p), buf);
          else writes.push(c.eval(HSET_PACKED, 1, key(p), buf));
        }
    }
    // Everything else is stored before a record names the row.
    if (script) await script.flush();
    else await Promise.all(writes);
    // Records go through ADD_RECORDS (a batch sent again is recorded once, and counted in the totals):
    // on a single server every partition's in one call, on a cluster one call per partition (its slot).
    const keys: string[] = [];
    const args: (Buffer | string)[] = [];
    for (let p = 0; p < P; p++) {
      const lo = entries.recOffsets[p];
      const hi = entries.recOffsets[p + 1];
      if (hi === lo) continue;
      const bytes = view(entries.rec, lo, hi);
      keys.push(this.#recKey(p), this.#recTotalKey(p));
      args.push(bytes, sha22(bytes), String((hi - lo) / 16));
    }
    // Key pairs [a, b) and their argument triples.
    const call = (lua: string, a: number, b: number) => c.eval(lua, b - a, ...keys.slice(a, b), ...args.slice((a / 2) * 3, (b / 2) * 3));
    const calls: Promise<unknown>[] = [];
    if (script)
      for (let i = 0; i < keys.length; i += SCRIPT_KEYS) calls.push(call(ADD_RECORDS_MANY, i, Math.min(keys.length, i + SCRIPT_KEYS)));
    else for (let i = 0; i < keys.length; i += 2) calls.push(call(ADD_RECORDS, i, i + 2));
    await Promise.all(calls);
  }

  /** Candidate ids per query (sharing a band bucket), deduplicated and ascending; removed ids never appear. */
  async query(sigs: Uint32Array): Promise<{ indptr: Uint32Array; ids: Uint32Array }> {
    const nq = sigs.length / this.#per;
    const e = await native().lshStoreEntries(
      sigs,
      Uint32Array.from({ length: nq }, (_, i) => i),
      {
        ...this.#p,
        partitions: this.#o.partitions,
      },
    );
    return this.#run(async (c) => {
      const P = this.#o.partitions;
      const stored: Promise<Buffer | null>[] = [];
      const queries: Uint8Array[] = [];
      for (let k = 0; k < this.#p.bands * P; k++) {
        const lo = e.bandOffsets[k];
        const hi = e.bandOffsets[k + 1];
        if (hi === lo) continue;
        stored.push(c.getBuffer(this.#bandKey(Math.floor(k / P), k % P)));
        queries.push(e.band.subarray(lo, hi));
      }
      const got = (await Promise.all(stored)).map((b) => b ?? new Uint8Array(0));
      return native().lshStoreQuery(got, queries, nq, await this.#removed(c));
    });
  }

  /** Live rows (inserted, not removed): ids ascending, signature fingerprints, empty flags. */
  async #records(c: Redis | Cluster): Promise<{ ids: Uint32Array; fp: BigUint64Array; empty: Uint8Array }> {
    const bufs = await this.#recordBufs(
      c,
      Array.from({ length: this.#o.partitions }, (_, p) => p),
    );
    return native().lshStoreRecords(bufs, await this.#removed(c));
  }

  /** Number of rows in the index; checks the stored totals against the keys (band keys by their sizes). */
  async count(): Promise<number> {
    return this.#run(async (c) => {
      const { ids, empty } = await this.#records(c);
      if (this.#totals) {
        let rows = 0;
        for (const e of empty) rows += e ? 0 : 1;
        // Every live non-empty row has one entry per band (a batch sent twice may add more).
        const P = this.#o.partitions;
        for (let b = 0; b < this.#p.bands; b++) {
          const lens = await Promise.all(Array.from({ length: P }, (_, p) => c.strlen(this.#bandKey(b, p))));
          const entries = lens.reduce((a, x) => a + x, 0) / 12;
          if (entries < rows) throw this.#inconsistent(`band ${b} holds ${entries} entries for ${rows} rows`);
        }
      }
      return ids.length;
    });
  }

  /** Removes rows by id; returns how many of them were in the index. Removed ids are retired for good. */
  async remove(ids: Uint32Array): Promise<number> {
    return this.#run(async (c) => {
      const parts = [...new Set(Array.from(ids, (id) => this.#part(id)))];
      const bufs = await this.#recordBufs(c, parts);
      const live = (await native().lshStoreRecords(bufs, await this.#removed(c))).ids;
      const want = new Set(ids);
      const hit = live.filter((id) => want.has(id));
      if (!hit.length) return 0;
      const bytes = Buffer.from(hit.buffer, hit.byteOffset, hit.byteLength);
      return Number(await c.eval(ADD_REMOVED, 2, this.#delKey, this.#delTotalKey, bytes));
    });
  }

  // Streams every band key through `fn`, STREAM_KEYS at a time.
  async #eachBandKey(c: Redis | Cluster, fn: (data: Uint8Array, band: number, part: number) => Promise<void>): Promise<void> {
    const P = this.#o.partitions;
    const total = this.#p.bands * P;
    for (let k = 0; k < total; k += STREAM_KEYS) {
      const n = Math.min(STREAM_KEYS, total - k);
      const data = await Promise.all(Array.from({ length: n }, (_, i) => c.getBuffer(this.#bandKey(Math.floor((k + i) / P), (k + i) % P))));
      await Promise.all(data.map((d, i) => (d !== null && d.length > 0 ? fn(d, Math.floor((k + i) / P), (k + i) % P) : undefined)));
    }
  }

  // Candidate pairs of the live rows; checks on the way that every live non-empty row has an entry
  // in every band, in the partition its bucket belongs to.
  async #pairs(c: Redis | Cluster, live: Uint32Array, rep: Uint32Array, empty: Uint8Array): Promise<BigUint64Array> {
    const chunks: BigUint64Array[] = [];
    const bands = this.#p.bands;
    const P = this.#o.partitions;
    const seen = this.#totals ? new Uint32Array(Math.ceil((live.length * bands) / 32)) : undefined;
    const at = seen && new IdIndex(live);
    await this.#eachBandKey(c, async (d, band, part) => {
      if (seen && at) {
        if (d.length % 12) throw this.#inconsistent(`band key ${this.#bandKey(band, part)} holds a partial entry`);
        const w = new Uint32Array(Uint8Array.from(d).buffer);
        for (let e = 0; e < w.length; e += 3) {
          const i = at.get(w[e + 2]);
          if (i < 0) continue; // a removed row, or one whose insert has not finished
          if (w[e + 1] % P !== part)
            throw this.#inconsistent(`band key ${this.#bandKey(band, part)} holds an entry of id ${w[e + 2]} that is not its own`);
          const bit = i * bands + band;
          seen[bit >>> 5] |= 1 << (bit & 31);
        }
      }
      const p = await native().lshStorePairs(d, live, rep);
      if (p.length) chunks.push(p);
    });
    if (seen) {
      for (let i = 0; i < live.length; i++) {
        if (empty[i]) continue;
        let have = 0;
        for (let b = 0, bit = i * bands; b < bands; b++, bit++) have += (seen[bit >>> 5] >>> (bit & 31)) & 1;
        if (have !== bands) throw this.#inconsistent(`id ${live[i]} has entries in ${have} of its ${bands} bands`);
      }
    }
    return native().lshStoreMerge(chunks);
  }

  /** Every unique pair of ids sharing a band bucket (left < right, sorted). */
  async candidatePairs(): Promise<{ left: Uint32Array; right: Uint32Array }> {
    return this.#run(async (c) => {
      const { ids, empty } = await this.#records(c);
      const rep = Uint32Array.from(empty, (e, i) => (e ? NONE : i));
      const p = await this.#pairs(c, ids, rep, empty);
      const left = new Uint32Array(p.length);
      const right = new Uint32Array(p.length);
      for (let k = 0; k < p.length; k++) {
        left[k] = ids[Number(p[k] >> 32n)];
        right[k] = ids[Number(p[k] & 0xffffffffn)];
      }
      return { left, right };
    });
  }

  // Fetches stored hash fields (signatures or vectors) of `ids`.
  async #fetch(c: Redis | Cluster, ids: Uint32Array, key: (p: number) => string, what: string): Promise<Buffer[]> {
    const byPart = new Map<number, number[]>();
    ids.forEach((id, i) => {
      const p = this.#part(id);
      let a = byPart.get(p);
      if (!a) byPart.set(p, (a = []));
      a.push(i);
    });
    const out: Buffer[] = new Array(ids.length);
    const jobs: Promise<void>[] = [];
    for (const [p, idx] of byPart) {
      for (let s = 0; s < idx.length; s += 1000) {
        const part = idx.slice(s, s + 1000);
        jobs.push(
          c.hmgetBuffer(key(p), ...part.map((i) => idField(ids[i]))).then((vals) => {
            vals.forEach((v, j) => {
              if (v === null) throw storageError(`no ${what} is stored for id ${ids[part[j]]}`);
              out[part[j]] = v;
            });
          }),
        );
      }
      if (jobs.length >= 64) await Promise.all(jobs.splice(0));
    }
    await Promise.all(jobs);
    return out;
  }

  async #signatures(c: Redis | Cluster, ids: Uint32Array): Promise<Uint32Array> {
    if (!this.#o.signatures) {
      throw typeError(
        "verify 'estimate' and 'none' need the signatures: create the Redis index with storage.signatures: true, or verify 'exact'",
      );
    }
    const per = this.#per;
    const bufs = await this.#fetch(c, ids, (p) => this.#sigKey(p), 'signature');
    const out = new Uint32Array(ids.length * per);
    const bytes = new Uint8Array(out.buffer);
    bufs.forEach((b, i) => {
      if (b.length !== per * 4) throw storageError(`the signature stored for id ${ids[i]} has ${b.length} bytes, not ${per * 4}`);
      bytes.set(b, i * per * 4);
    });
    return out;
  }

  // Rows of `ids` as a local CSR (row i = ids[i]), from `matrix` (rows by id), the caller's `rows`, or the stored vectors.
  async #vectors(c: Redis | Cluster, ids: Uint32Array, matrix: CsrMatrix | RowSource | undefined): Promise<CsrMatrix> {
    if (typeof matrix === 'function') {
      const got = toCsr(await matrix(ids.slice()), 'the rows that groups({ rows }) returned', {
        maxCols: this.#sets ? 2 ** 32 : 0xffffffff,
      });
      if (got.rows !== ids.length) throw rangeError(`groups({ rows }) returned ${got.rows} rows for ${ids.length} ids`);
      return got;
    }
    const indptr = new Uint32Array(ids.length + 1);
    if (matrix) {
      for (let i = 0; i < ids.length; i++) {
        if (ids[i] >= matrix.rows) throw rangeError(`id ${ids[i]} has no row in matrix (matrix.rows = ${matrix.rows})`);
        indptr[i + 1] = indptr[i] + matrix.indptr[ids[i] + 1] - matrix.indptr[ids[i]];
      }
      const indices = new Uint32Array(indptr[ids.length]);
      const values = new Float32Array(indptr[ids.length]);
      for (let i = 0; i < ids.length; i++) {
        const b = matrix.indptr[ids[i]];
        const e = matrix.indptr[ids[i] + 1];
        indices.set(matrix.indices.subarray(b, e), indptr[i]);
        if (matrix.values) values.set(matrix.values.subarray(b, e), indptr[i]);
        else values.fill(1, indptr[i], indptr[i + 1]);
      }
      return { rows: ids.length, cols: matrix.cols, indptr, indices, values };
    }
    const bufs = await this.#fetch(c, ids, (p) => this.#vecKey(p), 'vector (insert with { vectors }, or pass groups({ matrix }))');
    let cols = 0;
    bufs.forEach((b, i) => {
      const n = b.length >= 4 ? b.readUInt32LE(0) : -1;
      if (n < 0 || b.length !== 4 + 8 * n) throw storageError(`the vector stored for id ${ids[i]} is damaged`);
      indptr[i + 1] = indptr[i] + n;
    });
    const indices = new Uint32Array(indptr[ids.length]);
    const values = new Float32Array(indptr[ids.length]);
    bufs.forEach((b, i) => {
      const n = indptr[i + 1] - indptr[i];
      for (let j = 0; j < n; j++) {
        indices[indptr[i] + j] = b.readUInt32LE(4 + 4 * j);
        values[indptr[i] + j] = b.readFloatLE(4 + 4 * n + 4 * j);
        if (indices[indptr[i] + j] >= cols) cols = indices[indptr[i] + j] + 1;
      }
    });
    return { rows: ids.length, cols, indptr, indices, values };
  }

  // Classic signatures stand for sets: exact verification is set Jaccard, weights ignored.
  get #sets(): boolean {
    return this.#p.width === 1;
  }

  /**
   * Connected components of verified candidate pairs over every live row,
   * exactly as the in-memory index computes them for the same rows inserted
   * in ascending id order (groups numbered by smallest member id).
   */
  async groups(verify: 'none' | 'estimate' | 'exact', threshold: number, matrix: CsrMatrix | RowSource | undefined): Promise<StoredGroups> {
    return this.#run(async (c) => {
      const { ids, fp, empty } = await this.#records(c);
      // Representatives: rows with identical signatures (and, for 'exact',
      // identical vectors) collapse to their smallest member, as lsh::Groups does.
      const rep = Uint32Array.from(empty, (e, i) => (e ? NONE : i));
      const runs = native().lshStoreClasses(fp, empty);
      if (runs.members.length) {
        const ends = runs.members;
        let same: (a: number[], b: number[]) => Promise<Uint8Array>;
        if (verify === 'exact') {
          const local = await this.#vectors(
            c,
            Uint32Array.from(ends, (i) => ids[i]),
            matrix,
          );
          const at = new Map<number, number>();
          ends.forEach((idx, j) => at.set(idx, j));
          same = async (a, b) =>
            (
              await native().lshStoreRowPairs(
                local,
                Uint32Array.from(a, (x) => at.get(x)!),
                Uint32Array.from(b, (x) => at.get(x)!),
                this.#sets,
              )
            ).same;
        } else {
          const s = await this.#signatures(
            c,
            Uint32Array.from(ends, (i) => ids[i]),
          );
          const per = this.#per;
          const at = new Map<number, number>();
          ends.forEach((idx, j) => at.set(idx, j));
          same = async (a, b) =>
            Uint8Array.from(a, (x, k) => {
              const p = at.get(x)! * per;
              const q = at.get(b[k])! * per;
              for (let w = 0; w < per; w++) if (s[p + w] !== s[q + w]) return 0;
              return 1;
            });
        }
        // Rounds: each unresolved member is compared with its run's smallest unresolved member.
        let open: number[][] = [];
        for (let r = 0; r + 1 < runs.ptr.length; r++) open.push(Array.from(runs.members.subarray(runs.ptr[r], runs.ptr[r + 1])));
        while (open.length) {
          const a: number[] = [];
          const b: number[] = [];
          for (const run of open) {
            for (let j = 1; j < run.length; j++) {
              a.push(run[0]);
              b.push(run[j]);
            }
          }
          const eq = await same(a, b);
          const next: number[][] = [];
          let k = 0;
          for (const run of open) {
            const rest: number[] = [];
            for (let j = 1; j < run.length; j++, k++) {
              if (eq[k]) rep[run[j]] = run[0];
              else rest.push(run[j]);
            }
            if (rest.length > 1) next.push(rest);
          }
          open = next;
        }
      }
      const cand = await this.#pairs(c, ids, rep, empty);
      const a = new Uint32Array(cand.length);
      const b = new Uint32Array(cand.length);
      for (let k = 0; k < cand.length; k++) {
        a[k] = Number(cand[k] >> 32n);
        b[k] = Number(cand[k] & 0xffffffffn);
      }
      const ends = Uint32Array.from(new Set([...a, ...b])).sort();
      const at = new Map<number, number>();
      ends.forEach((idx, j) => at.set(idx, j));
      const la = Uint32Array.from(a, (x) => at.get(x)!);
      const lb = Uint32Array.from(b, (x) => at.get(x)!);
      const endIds = Uint32Array.from(ends, (i) => ids[i]);
      let sim: Float32Array;
      let keep: Uint8Array;
      if (verify === 'exact') {
        const j = (await native().lshStoreRowPairs(await this.#vectors(c, endIds, matrix), la, lb, this.#sets)).jaccard;
        sim = Float32Array.from(j);
        keep = Uint8Array.from(j, (x) => (x >= threshold ? 1 : 0));
      } else {
        sim = native().lshStoreEstimate(await this.#signatures(c, endIds), this.#p.samples, la, lb, this.#p.width);
        keep = Uint8Array.from(sim, (x) => (verify === 'none' || x >= threshold ? 1 : 0));
      }
      let kept = 0;
      for (const x of keep) kept += x;
      const edges = new BigUint64Array(kept);
      const edgeSim = new Float32Array(kept);
      for (let k = 0, o = 0; k < cand.length; k++) {
        if (!keep[k]) continue;
        edges[o] = cand[k];
        edgeSim[o++] = sim[k];
      }
      const r = native().lshStoreFinish(ids, rep, edges, edgeSim);
      return { ids, group: r.group, count: r.count, pairs: { left: r.left, right: r.right, similarity: r.similarity } };
    });
  }

  /** Deletes every key of this index (its prefix). */
  async clear(): Promise<void> {
    await this.#run(async (c) => {
      const P = this.#o.partitions;
      const keys = [this.#metaKey, this.#delKey];
      for (let p = 0; p < P; p++) keys.push(this.#recKey(p), this.#sigKey(p), this.#vecKey(p));
      for (let b = 0; b < this.#p.bands; b++) for (let p = 0; p < P; p++) keys.push(this.#bandKey(b, p), this.#bandDigestKey(b, p));
      // One key per command: keys of different slots cannot share a DEL on a cluster.
      for (let i = 0; i < keys.length; i += 512) await Promise.all(keys.slice(i, i + 512).map((k) => c.unlink(k)));
    });
    await this.close();
  }

  async close(): Promise<void> {
    await this.#session.close();
  }
}

// Ids to their index in an ascending list: an open-addressing table, O(1) per look-up.
class IdIndex {
  readonly #keys: Uint32Array;
  readonly #vals: Int32Array;
  readonly #mask: number;

  constructor(ids: Uint32Array) {
    let size = 16;
    while (size < ids.length * 2) size *= 2;
    this.#keys = new Uint32Array(size);
    this.#vals = new Int32Array(size).fill(-1);
    this.#mask = size - 1;
    ids.forEach((id, i) => {
      let h = fmix32(id) & this.#mask;
      while (this.#vals[h] >= 0) h = (h + 1) & this.#mask;
      this.#keys[h] = id;
      this.#vals[h] = i;
    });
  }

  get(id: number): number {
    let h = fmix32(id) & this.#mask;
    while (this.#vals[h] >= 0) {
      if (this.#keys[h] === id) return this.#vals[h];
      h = (h + 1) & this.#mask;
    }
    return -1;
  }
}
