// The rows of a scale-out job's insert batches as one packed blob per batch
// (key P:rows:R:A-B, range R, ids A..B), written by one SET: the report needs a
// document's vector only when it ends a candidate pair (or shares its
// signature with another row) and its name only when it is grouped, so
// keeping them per document (a hash field each, as the library's index keeps
// vectors for point reads) made Redis do per-document work on every insert,
// most of the server's time. A blob costs the server one memcpy per batch. A
// range run again (a retry after a crash) writes the same rows under the same
// keys: SET overwrites, nothing is counted twice; a rerun that cuts other
// batches (another --batch-docs) writes other keys, and the range's record in
// P:done names the ones its last run wrote.
//
// Blob layout, 32-bit little-endian words then bytes:
//   MAGIC, n, flags (1: weights follow the columns), nnz, name bytes,
//   ids[n] (ascending), indptr[n + 1] (from 0), columns[nnz], weights[nnz] (f32, with flag 1),
//   name ends[n] (byte offsets after each name), the names (UTF-8).
import type { Cluster, Redis } from 'ioredis';
import { storageError } from '../lsh-redis.js';
import type { CsrMatrix } from '../validate.js';
import type { IdList } from '../dedup/ids.js';
import type { RangeStats } from './job.js';
import { lowerBound, sortedHas } from '../sorted.js';

const MAGIC = 0x31776f72; // 'row1'
const HEAD = 5;
const LITTLE_ENDIAN = new Uint8Array(Uint32Array.of(1).buffer)[0] === 1;

/** Batch `ids` (ascending), row i of `m` and name `names.get(i)` each, as one blob. */
export function packRows(ids: Uint32Array, m: CsrMatrix, names: IdList): Buffer {
  const n = ids.length;
  const base = m.indptr[0];
  const nnz = m.indptr[n] - base;
  const text = Buffer.from(Array.from({ length: n }, (_, i) => names.get(i)).join(''), 'utf8');
  const weights = m.values !== undefined;
  const words = HEAD + n + (n + 1) + nnz + (weights ? nnz : 0) + n;
  const buf = Buffer.from(new ArrayBuffer(4 * words + text.length));
  const u = new Uint32Array(buf.buffer, 0, words);
  u.set([MAGIC, n, weights ? 1 : 0, nnz, text.length]);
  let at = HEAD;
  u.set(ids, at);
  at += n;
  for (let i = 0; i <= n; i++) u[at + i] = m.indptr[i] - base;
  at += n + 1;
  u.set(m.indices.subarray(base, base + nnz), at);
  at += nnz;
  if (m.values) new Float32Array(buf.buffer, 4 * at, nnz).set(m.values.subarray(base, base + nnz));
  if (weights) at += nnz;
  for (let i = 0, end = 0; i < n; i++) u[at + i] = end += Buffer.byteLength(names.get(i));
  text.copy(buf, 4 * words);
  if (!LITTLE_ENDIAN) buf.subarray(0, 4 * words).swap32();
  return buf;
}

interface Parsed {
  ids: Uint32Array;
  indptr: Uint32Array;
  indices: Uint32Array;
  values?: Float32Array;
  nameEnds: Uint32Array;
  text: Buffer;
}

function parseRows(blob: Buffer, key: string): Parsed {
  const damaged = () => storageError(`the batch blob ${key} is damaged (not written by a cusim worker, or altered)`);
  if (blob.length < 4 * HEAD) throw damaged();
  // An aligned copy of the words (a reply's Buffer may start at any byte).
  const head = Buffer.from(blob.subarray(0, 4 * HEAD));
  if (!LITTLE_ENDIAN) head.swap32();
  const [magic, n, flags, nnz, textBytes] = new Uint32Array(head.buffer, head.byteOffset, HEAD);
  const words = HEAD + n + (n + 1) + nnz + (flags & 1 ? nnz : 0) + n;
  if (magic !== MAGIC || blob.length !== 4 * words + textBytes) throw damaged();
  const w = new Uint8Array(4 * words);
  w.set(blob.subarray(0, 4 * words));
  if (!LITTLE_ENDIAN) Buffer.from(w.buffer).swap32();
  let at = HEAD;
  const take = (k: number) => new Uint32Array(w.buffer, 4 * (at += k) - 4 * k, k);
  const ids = take(n);
  const indptr = take(n + 1);
  const indices = take(nnz);
  const values = flags & 1 ? new Float32Array(take(nnz).buffer, 4 * (at - nnz), nnz) : undefined;
  const nameEnds = take(n);
  for (let i = 1; i < n; i++) if (ids[i] <= ids[i - 1]) throw damaged();
  if (indptr[n] !== nnz || (n > 0 && nameEnds[n - 1] !== textBytes)) throw damaged();
  return { ids, indptr, indices, values, nameEnds, text: blob.subarray(4 * words) };
}

/** Index of `id` in ascending `ids`, or -1. */
function find(ids: Uint32Array, id: number): number {
  return sortedHas(ids, id) ? lowerBound(ids, id) : -1;
}

// Blobs read at once: each is a batch (~16K documents, a few MB).
const IN_FLIGHT = 8;

type Run = <T>(fn: (c: Redis | Cluster) => Promise<T>) => Promise<T>;

/**
 * The report's view of a finished job's batch blobs: the vectors of the ids
 * exact verification asks for (groups' `rows`), then the names of the
 * grouped ids, each blob read only when it holds an id asked for. Names of
 * every id whose vector was read are kept, so the grouped ids (pair ends and
 * rows sharing a signature, both read for verification) cost no second read.
 */
export class BatchRows {
  readonly #run: Run;
  readonly #prefix: string;
  // Batches by first id: [lo, hi, key], ascending and disjoint.
  readonly #spans: { lo: number; hi: number; key: string }[] = [];
  readonly #names = new Map<number, string>();

  constructor(run: Run, prefix: string, done: RangeStats[], key: (r: number, first: number, last: number) => string) {
    this.#run = run;
    this.#prefix = prefix;
    done.forEach((s, r) => {
      const batches = s.batches ?? [];
      let rows = 0;
      for (const [lo, hi, n] of batches) {
        rows += n;
        this.#spans.push({ lo, hi, key: key(r, lo, hi) });
      }
      if (rows !== s.rows)
        throw this.#inconsistent(`range ${r} inserted ${s.rows} rows but its batches list ${rows} (key ${prefix}:done altered)`);
    });
    this.#spans.sort((a, b) => a.lo - b.lo);
  }

  #inconsistent(what: string): Error {
    return storageError(`job '${this.#prefix}' is inconsistent: ${what}`);
  }

  /** Throws naming the first batch blobs that are gone (deleted, FLUSHALL, evicted). */
  async check(): Promise<void> {
    const missing: string[] = [];
    for (let i = 0; i < this.#spans.length; i += 256) {
      const got = await this.#run((c) => Promise.all(this.#spans.slice(i, i + 256).map((s) => c.exists(s.key))));
      got.forEach((x, j) => {
        if (!x) missing.push(this.#spans[i + j].key);
      });
    }
    if (missing.length)
      throw this.#inconsistent(
        `the rows of ${missing.length} of its ${this.#spans.length} insert batches are gone ` +
          `(${missing.slice(0, 5).join(', ')}${missing.length > 5 ? ', …' : ''}): ` +
          'keys were evicted or deleted (check maxmemory-policy noeviction); drop the job and run it again',
      );
  }

  // Calls fn(parsed blob, key, positions of `ids` it holds) for every blob holding some of `ids`.
  async #each(ids: Uint32Array, fn: (p: Parsed, key: string, at: number[]) => void): Promise<void> {
    const byBlob = new Map<number, number[]>();
    ids.forEach((id, i) => {
      let lo = 0;
      let hi = this.#spans.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (this.#spans[mid].lo <= id) lo = mid + 1;
        else hi = mid;
      }
      const s = lo - 1;
      if (s < 0 || id > this.#spans[s].hi) throw this.#inconsistent(`document ${id} is in no batch the workers recorded`);
      let a = byBlob.get(s);
      if (!a) byBlob.set(s, (a = []));
      a.push(i);
    });
    const todo = [...byBlob];
    const one = async ([s, at]: [number, number[]]) => {
      const key = this.#spans[s].key;
      const blob = await this.#run((c) => c.getBuffer(key));
      if (!blob) throw this.#inconsistent(`the batch blob ${key} is gone (deleted, FLUSHALL, or evicted)`);
      fn(parseRows(blob, key), key, at);
    };
    for (let i = 0; i < todo.length; i += IN_FLIGHT) await Promise.all(todo.slice(i, i + IN_FLIGHT).map(one));
  }

  /** The vectors of `ids` (row i = ids[i]), as MinHashLSH.groups' `rows` takes them. */
  async rows(ids: Uint32Array): Promise<CsrMatrix> {
    const found: { p: Parsed; row: number }[] = new Array(ids.length);
    await this.#each(ids, (p, key, at) => {
      for (const i of at) {
        const row = find(p.ids, ids[i]);
        if (row < 0) throw this.#inconsistent(`no vector is stored for document ${ids[i]} (key ${key})`);
        found[i] = { p, row };
        const e = p.nameEnds[row];
        this.#names.set(ids[i], p.text.toString('utf8', row ? p.nameEnds[row - 1] : 0, e));
      }
    });
    const indptr = new Uint32Array(ids.length + 1);
    found.forEach(({ p, row }, i) => (indptr[i + 1] = indptr[i] + p.indptr[row + 1] - p.indptr[row]));
    const indices = new Uint32Array(indptr[ids.length]);
    // Sets (classic jobs) are stored without weights; exact verification compares their columns.
    const values = new Float32Array(indptr[ids.length]).fill(1);
    let cols = 0;
    found.forEach(({ p, row }, i) => {
      const b = p.indptr[row];
      const e = p.indptr[row + 1];
      indices.set(p.indices.subarray(b, e), indptr[i]);
      if (p.values) values.set(p.values.subarray(b, e), indptr[i]);
      for (let j = b; j < e; j++) if (p.indices[j] >= cols) cols = p.indices[j] + 1;
    });
    return { rows: ids.length, cols, indptr, indices, values };
  }

  /** The names of `ids`. */
  async names(ids: Uint32Array): Promise<string[]> {
    const out = Array.from(ids, (id) => this.#names.get(id));
    const rest = Uint32Array.from(ids.filter((_, i) => out[i] === undefined));
    if (rest.length) {
      await this.#each(rest, (p, key, at) => {
        for (const i of at) {
          const row = find(p.ids, rest[i]);
          if (row < 0) throw this.#inconsistent(`no name is stored for document ${rest[i]} (key ${key})`);
          this.#names.set(rest[i], p.text.toString('utf8', row ? p.nameEnds[row - 1] : 0, p.nameEnds[row]));
        }
      });
    }
    return Array.from(ids, (id) => this.#names.get(id)!);
  }
}
