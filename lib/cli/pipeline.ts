// Featurizing as records arrive: documents are gathered into batches of a
// few MB of text, each batch is tokenized on the thread pool while the next
// one is read, and batches are added in order. Memory holds two batches of
// text, whatever the input's size.
import type { HashedRows, TextFeaturizer, TokenBatch } from '../text/index.js';
import type { CsrMatrix } from '../validate.js';
import { CliError } from './errors.js';
import type { Doc } from './records.js';

export class StreamFeaturizer {
  /** Ids of the rows added, in order. */
  readonly ids: string[] = [];
  /** Documents seen, and those with fewer than minTokens tokens (no row). */
  documents = 0;
  tooSmall = 0;
  #pending: Doc[] = [];
  #pendingChars = 0;
  #inFlight: { docs: Doc[]; batch: Promise<TokenBatch | HashedRows> } | undefined;
  // Hashed mode: the rows so far, in arrays grown by half as needed.
  #indptr = new Uint32Array(1 << 16);
  #indices = new Uint32Array(1 << 20);
  #values: Float32Array | undefined;
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
     * here (values only when asked for) and returned by matrix(). The
     * featurizer's state is not touched, and batches tokenize on all cores.
     */
    private readonly hashed?: { bits: number; values: boolean },
  ) {
    if (hashed?.values) this.#values = new Float32Array(this.#indices.length);
  }

  /** Hashed mode: the rows added, as a CSR matrix of 2^bits columns (views of the arrays kept). */
  matrix(): CsrMatrix {
    if (!this.hashed) throw new Error('matrix() is for hashed mode; build the featurizer instead');
    const m: CsrMatrix = {
      rows: this.#rows,
      cols: 2 ** this.hashed.bits,
      indptr: this.#indptr.subarray(0, this.#rows + 1),
      indices: this.#indices.subarray(0, this.#nnz),
    };
    if (this.#values) m.values = this.#values.subarray(0, this.#nnz);
    return m;
  }

  #append(r: HashedRows): void {
    const rows = r.indptr.length - 1;
    const nnz = r.indices.length;
    const grow = <T extends Uint32Array | Float32Array>(a: T, need: number): T => {
      if (need <= a.length) return a;
      const b = new (a.constructor as new (n: number) => T)(Math.max(need, Math.ceil(a.length * 1.5)));
      b.set(a);
      return b;
    };
    if (this.#nnz + nnz > 0xffffffff) {
      throw new CliError(
        'more than 2^32 - 1 token entries in one run (one matrix)',
        'dedup fewer documents per run, or shard them with --redis --shard i/N',
        1,
      );
    }
    this.#indptr = grow(this.#indptr, this.#rows + rows + 1);
    this.#indices = grow(this.#indices, this.#nnz + nnz);
    for (let i = 1; i <= rows; i++) this.#indptr[this.#rows + i] = this.#nnz + r.indptr[i];
    this.#indices.set(r.indices, this.#nnz);
    if (this.#values) {
      this.#values = grow(this.#values, this.#nnz + nnz);
      this.#values.set(r.values, this.#nnz);
    }
    this.#rows += rows;
    this.#nnz += nnz;
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
    if ('indices' in b) this.#append(b);
    else this.feat.addTokenBatch(b);
    f.docs.forEach((d, i) => {
      if (b.tokens[i] < this.minTokens) this.tooSmall++;
      else {
        this.ids.push(d.id);
        this.onRow?.(d);
      }
    });
    this.documents += f.docs.length;
    this.onBatch?.(f.docs.length);
  }
}
