// What dedup keeps between hashing and grouping, in native memory: each row's
// band keys (8 bytes per band, not its signature: 48 bytes a row at the
// default 6 bands, against 432 for a classic and 864 for a weighted signature
// of 108 samples) and its vector, as the blocks arrived (classic: column ids
// only; weighted: ids and weights). Groups come from one native call that
// buckets the keys (CPU or GPU) and verifies candidates exactly, with the
// same result as MinHashLSH.groups({ verify: 'exact' }) over the signatures.
import { native } from '../addon.js';
import type { Backend } from '../backend.js';
import { withCancel } from '../cancel.js';
import type { LshParams, GroupsResult } from '../lsh.js';
import type { Staged } from '../native-types.js';
import { ProgressReporter, withNativeProgress } from '../progress.js';
import type { CsrMatrix } from '../validate.js';

export interface BandIndexOptions extends LshParams {
  samples: number;
  width: 1 | 2;
  backend: Backend;
  devices?: number[];
}

export class BandIndex implements Disposable {
  #keys: Staged[] = [];
  #empty: Staged[] = [];
  #rows: Staged[] = [];
  #size = 0;
  #vectorRows = 0;

  constructor(private readonly o: BandIndexOptions) {}

  /** Rows added. */
  get size(): number {
    return this.#size;
  }

  /**
   * The next rows' signatures: only their band keys are kept. `handed`: the
   * caller neither writes nor detaches `signatures` until this settles (a
   * buffer of its own, such as dedupRecords' reused signature buffer), so
   * the native call reads them in place instead of copying them first.
   */
  async addSignatures(signatures: Uint32Array, handed = false): Promise<void> {
    const { samples, bands, rows, width } = this.o;
    // Kept as the native call made them: no typed array or copy on this thread.
    const r = await native().lshBandKeys(signatures, { samples, bands, rows, width, handed, staged: true });
    this.#keys.push(r.keys);
    this.#empty.push(r.empty);
    this.#size += r.empty.length;
  }

  /**
   * The next rows' vectors, copied on a worker over the CPU pool (classic:
   * column ids only; weighted: with weights); `m`'s arrays must stay as they
   * are until this settles. Returns the staged copy, which the index owns and
   * frees: its rows may be hashed from it (hashStaged) until dispose().
   */
  async addVectors(m: CsrMatrix): Promise<Staged | undefined> {
    if (m.rows === 0) return undefined;
    const staged = await native().stageCsrAsync(m, this.o.width === 2);
    this.#rows.push(staged);
    this.#vectorRows += m.rows;
    return staged;
  }

  /** Verified groups of every row added (ids are row numbers), as MinHashLSH.groups({ verify: 'exact' }). */
  async groups(threshold: number, reporter: ProgressReporter, signal?: AbortSignal): Promise<Omit<GroupsResult, 'ids'>> {
    if (this.#vectorRows !== this.#size) throw new Error(`${this.#size} rows were hashed but ${this.#vectorRows} have vectors`);
    // One block of keys, joined on a worker (the chunks are released as they are copied).
    const keys = this.#keys.length ? await native().stageArrayAsync(this.#keys, true) : native().stageArray([new BigUint64Array(0)]);
    this.#keys = [keys];
    const empty = this.#empty.length ? await native().stageArrayAsync(this.#empty, true) : native().stageArray([new Uint8Array(0)]);
    this.#empty = [empty];
    const { bands, backend, devices } = this.o;
    const r = await withCancel(signal, (cancel) =>
      withNativeProgress(reporter, ['candidates', 'verify'], (progress) =>
        native().lshGroupsFromKeys(keys, empty, this.#rows, {
          bands,
          threshold,
          sets: this.o.width === 1,
          backend,
          devices,
          cancel,
          progress,
        }),
      ),
    );
    return {
      group: r.group,
      count: r.count,
      pairs: { left: r.left, right: r.right, similarity: r.similarity },
      kernelMs: r.kernelMs,
      transferMs: r.transferMs,
    };
  }

  dispose(): void {
    for (const s of [...this.#keys, ...this.#empty, ...this.#rows]) s.dispose();
    this.#keys = [];
    this.#empty = [];
    this.#rows = [];
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
