// Featurizing as records arrive: documents are gathered into batches of a
// few MB of text, each batch is tokenized on the thread pool while the next
// one is read, and batches are added in order. Memory holds two batches of
// text, whatever the input's size.
import type { IdList } from '../dedup/ids.js';
import type { HashedRows, TextFeaturizer, TokenBatch } from '../text/index.js';
import type { BlockRows } from './record-worker.js';
import type { CsrMatrix } from '../validate.js';
import { CliError } from './errors.js';
import type { Doc } from './records.js';

export class StreamFeaturizer {
  /** Ids of the rows added, in order (not with a hashed `onRows` sink: they go with the rows). */
  readonly ids: string[] = [];
  /** Documents seen, and those with fewer than minTokens tokens (no row). */
  documents = 0;
  tooSmall = 0;
  #pending: Doc[] = [];
  #pendingChars = 0;
  #inFlight: { docs: Doc[]; batch: Promise<TokenBatch | HashedRows> } | undefined;
  // Hashed mode: the rows so far, as the batches' arrays (joined once, by matrix()).
  #parts: { indptr: Uint32Array; indices: Uint32Array; values?: Float32Array }[] = [];
  #joined: CsrMatrix | undefined;
  #rows = 0;
  #nnz = 0;

  constructor(
    private readonly feat: TextFeaturizer,
    private readonly minTokens: number,
    private readonly batchChars = 4 << 20,
    /** Called for each document that becomes a row, in order. */
    private readonly onRow?: (d: Doc) => void,
    /** Called with the documents of each batch once added. */
    private readonly onBatch?: (docs: number) => void,
    /**
     * Feature hashing instead of the featurizer's vocabulary: rows over
     * hashToken(token) & (2^bits - 1) (TextFeaturizer.hashedRows), kept
     * here (values only when asked for) and returned by matrix(), or with
     * `onRows` handed over batch by batch (with their ids) and not kept. The
     * featurizer's state is not touched, and batches tokenize on all cores.
     */
    private readonly hashed?: { bits: number; values: boolean; onRows?: (rows: CsrMatrix, ids: string[]) => void },
  ) {}

  /** Hashed mode: the rows added, as a CSR matrix of 2^bits columns. */
  matrix(): CsrMatrix {
    if (!this.hashed) throw new Error('matrix() is for hashed mode; build the featurizer instead');
    if (this.#joined?.rows === this.#rows) return this.#joined;
    // One copy into arrays of the exact size (the batches' arrays go with the parts).
    const parts = this.#parts;
    const indptr = new Uint32Array(this.#rows + 1);
    const indices = new Uint32Array(this.#nnz);
    const values = this.hashed.values ? new Float32Array(this.#nnz) : undefined;
    let row = 0;
    let nz = 0;
    for (const p of parts) {
      const n = p.indptr.length - 1;
      for (let i = 1; i <= n; i++) indptr[row + i] = nz + p.indptr[i];
      indices.set(p.indices, nz);
      if (values && p.values) values.set(p.values, nz);
      row += n;
      nz += p.indices.length;
    }
    // Rows added later join these arrays again.
    this.#parts = [{ indptr, indices, ...(values ? { values } : {}) }];
    this.#joined = { rows: this.#rows, cols: 2 ** this.hashed.bits, indptr, indices, ...(values ? { values } : {}) };
    return this.#joined;
  }

  #append(r: BlockRows, ids: string[]): void {
    const sink = this.hashed?.onRows;
    if (sink) {
      const rows = r.indptr.length - 1;
      sink(
        { rows, cols: 2 ** this.hashed!.bits, indptr: r.indptr, indices: r.indices, ...(this.hashed!.values ? { values: r.values } : {}) },
        ids,
      );
      this.#rows += rows;
      return;
    }
    for (const id of ids) this.ids.push(id);
    const nnz = r.indices.length;
    if (this.#nnz + nnz > 0xffffffff) {
      throw new CliError(
        'more than 2^32 - 1 token entries in one run (one matrix)',
        'dedup fewer documents per run, or shard them with --redis --shard i/N',
        1,
      );
    }
    this.#parts.push({ indptr: r.indptr, indices: r.indices, ...(this.hashed?.values ? { values: r.values } : {}) });
    this.#rows += r.indptr.length - 1;
    this.#nnz += nnz;
  }

  /**
   * Hashed mode: rows featurized elsewhere (record-blocks.ts), with the ids of
   * the documents that became rows and the counts of all documents read.
   * Everything queued before must have been added (finish()).
   */
  addRows(rows: BlockRows, ids: IdList, documents: number, tooSmall: number): void {
    if (!this.hashed) throw new Error('addRows() is for hashed mode');
    if (this.hashed.values && !rows.values) throw new Error('addRows(): the rows have no values, which this featurizer keeps');
    if (this.#pending.length || this.#inFlight) throw new Error('addRows() after add(): call finish() first');
    this.#append(
      rows,
      Array.from({ length: ids.length }, (_, i) => ids.get(i)),
    );
    this.documents += documents;
    this.tooSmall += tooSmall;
    this.onBatch?.(documents);
  }

  /** Queues a document; resolves at once unless a batch had to be handed over. */
  async add(d: Doc): Promise<void> {
    this.#pending.push(d);
    this.#pendingChars += d.text.length;
    if (this.#pendingChars >= this.batchChars) await this.#cut();
  }

  /** Adds everything queued. */
  async finish(): Promise<void> {
    await this.#cut();
    await this.#settle();
  }

  async #cut(): Promise<void> {
    if (this.#pending.length === 0) return;
    await this.#settle();
    const docs = this.#pending;
    this.#pending = [];
    this.#pendingChars = 0;
    const texts = docs.map((d) => d.text);
    const batch = this.hashed
      ? this.feat.hashedRows(texts, { minTokens: this.minTokens, bits: this.hashed.bits })
      : this.feat.tokenizeBatchAsync(texts, this.minTokens);
    // Rejections surface in #settle; this only keeps them from being unhandled meanwhile.
    batch.catch(() => {});
    this.#inFlight = { docs, batch };
  }

  async #settle(): Promise<void> {
    const f = this.#inFlight;
    if (!f) return;
    this.#inFlight = undefined;
    const b = await f.batch;
    const kept = f.docs.filter((_, i) => b.tokens[i] >= this.minTokens);
    this.tooSmall += f.docs.length - kept.length;
    if ('indices' in b)
      this.#append(
        b,
        kept.map((d) => d.id),
      );
    else {
      this.feat.addTokenBatch(b);
      for (const d of kept) this.ids.push(d.id);
    }
    if (this.onRow) for (const d of kept) this.onRow(d);
    this.documents += f.docs.length;
    this.onBatch?.(f.docs.length);
  }
}
