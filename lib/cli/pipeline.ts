// Featurizing as records arrive: documents are gathered into batches of a
// few MB of text, each batch is tokenized on the thread pool while the next
// one is read, and batches are added in order. Memory holds two batches of
// text, whatever the input's size.
import type { TextFeaturizer, TokenBatch } from '../text/index.js';
import type { Doc } from './records.js';

export class StreamFeaturizer {
  /** Ids of the rows added, in order. */
  readonly ids: string[] = [];
  /** Documents seen, and those with fewer than minTokens tokens (no row). */
  documents = 0;
  tooSmall = 0;
  #pending: Doc[] = [];
  #pendingChars = 0;
  #inFlight: { docs: Doc[]; batch: Promise<TokenBatch> } | undefined;

  constructor(
    private readonly feat: TextFeaturizer,
    private readonly minTokens: number,
    private readonly batchChars = 4 << 20,
    /** Called for each document that becomes a row, in order. */
    private readonly onRow?: (d: Doc) => void,
    /** Called with the documents of each batch once added. */
    private readonly onBatch?: (docs: number) => void,
  ) {}

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
    const batch = this.feat.tokenizeBatchAsync(
      docs.map((d) => d.text),
      this.minTokens,
    );
    // Rejections surface in #settle; this only keeps them from being unhandled meanwhile.
    batch.catch(() => {});
    this.#inFlight = { docs, batch };
  }

  async #settle(): Promise<void> {
    const f = this.#inFlight;
    if (!f) return;
    this.#inFlight = undefined;
    const b = await f.batch;
    this.feat.addTokenBatch(b);
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
