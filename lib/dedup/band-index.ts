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
import type { RowSpillNative, Staged } from '../native-types.js';
import { ProgressReporter, withNativeProgress } from '../progress.js';
import type { CsrMatrix } from '../validate.js';

export interface BandIndexOptions extends LshParams {
  samples: number;
  width: 1 | 2;
  backend: Backend;
  devices?: number[];
  /**
   * Rows' vectors past `afterBytes` in memory go to an unlinked file in
   * `dir` once hashed (settle()); verification reads back only the rows of
   * candidate pairs. Default: all in memory.
   */
  spill?: { afterBytes: number; dir: string };
}

export class BandIndex implements Disposable {
  #keys: Staged[] = [];
  #empty: Staged[] = [];
  // The vectors in memory, in row order, before those in #spill.
  #rows: Staged[] = [];
  // Per staged block: the bytes of the vectors of it and every block before
  // it (blocks are staged ahead of hashing, so what is in memory when a block
  // settles counts blocks after it too).
  #upTo = new Map<Staged, number>();
  #added = 0;
  #spill: RowSpillNative | undefined;
  // The spill writes, one after another: a block's rows go to the file after
  // the block before it (calls started together may run in any order).
  #spilling: Promise<void> = Promise.resolve();
  // The last addVectors copy (they run one after another).
  #staging: Promise<void> = Promise.resolve();
  #size = 0;
  #vectorRows = 0;

  constructor(private readonly o: BandIndexOptions) {}

  /** Bytes of vectors written to the spill file so far. */
  get spilledBytes(): number {
    return this.#spill?.bytes ?? 0;
  }

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

  /** The next rows' band keys and empty flags as made elsewhere (a GPU token hasher's, BlockBandKeys): kept, and owned, as they are. */
  addKeys(keys: Staged, empty: Staged): void {
    this.#keys.push(keys);
    this.#empty.push(empty);
    this.#size += empty.length;
  }

  /**
   * The next rows' vectors, copied on a worker over the CPU pool (classic:
   * column ids only; weighted: with weights); `m`'s arrays must stay as they
   * are until this settles. Returns the staged copy, which the index owns and
   * frees: its rows may be hashed from it (hashStaged) until dispose().
   */
  async addVectors(m: CsrMatrix): Promise<Staged | undefined> {
    if (m.rows === 0) return undefined;
    // Copies one after another, so blocks added while one is copied keep their order.
    const before = this.#staging;
    let copied!: () => void;
    this.#staging = new Promise<void>((resolve) => (copied = resolve));
    let staged: Staged;
    try {
      await before;
      staged = await native().stageCsrAsync(m, this.o.width === 2);
    } finally {
      copied();
    }
    this.#rows.push(staged);
    const bytes = 4 * (m.rows + 1) + 4 * this.o.width * (m.indptr[m.rows] - m.indptr[0]);
    this.#added += bytes;
    this.#upTo.set(staged, this.#added);
    this.#vectorRows += m.rows;
    return staged;
  }

  /**
   * Called once `staged` (an addVectors() copy) has been hashed: past the
   * memory budget, it is written to the spill file (in the background; this
   * block and every later one, so the rows in memory stay a prefix) and freed.
   */
  settle(staged: Staged): void {
    const spill = this.o.spill;
    if (!spill || (!this.#spill && (this.#upTo.get(staged) ?? 0) <= spill.afterBytes)) return;
    this.#spill ??= new (native().RowSpill)(spill.dir, this.o.width === 2);
    const at = this.#rows.indexOf(staged);
    if (at < 0) return;
    this.#rows.splice(at, 1);
    this.#upTo.delete(staged);
    // Each append starts once the one before it is done; each block is freed once written.
    const file = this.#spill;
    const p = this.#spilling.then(() => file.spillAsync(staged)).finally(() => staged.dispose());
    p.catch(() => {});
    this.#spilling = p;
  }

  /** Verified groups of every row added (ids are row numbers), as MinHashLSH.groups({ verify: 'exact' }). */
  async groups(threshold: number, reporter: ProgressReporter, signal?: AbortSignal): Promise<Omit<GroupsResult, 'ids'>> {
    if (this.#vectorRows !== this.#size) throw new Error(`${this.#size} rows were hashed but ${this.#vectorRows} have vectors`);
    await this.#spilling;
    const rows: (Staged | RowSpillNative)[] = this.#spill ? [...this.#rows, this.#spill] : this.#rows;
    // The keys stay in their blocks (a joined copy was the peak of a large
    // dedup's memory: 4.8 GB more at 100M rows); the empty flags, a byte a
    // row, are joined on a worker.
    const keys = this.#keys;
    const empty = this.#empty.length ? await native().stageArrayAsync(this.#empty, true) : native().stageArray([new Uint8Array(0)]);
    this.#empty = [empty];
    const { bands, backend, devices } = this.o;
    const r = await withCancel(signal, (cancel) =>
      withNativeProgress(reporter, ['candidates', 'verify'], (progress) =>
        native().lshGroupsFromKeys(keys, empty, rows, {
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
    this.#upTo.clear();
    this.#spill?.dispose();
    this.#spill = undefined;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
