// A reader's blocks as an async iterable: the reader pushes as it goes (from
// callbacks such as readRecordBlocks' onBlock), the pipeline pulls. Blocks
// wait here only while hashing is behind reading, and at most `limit` of
// them: push() resolves once there is room, so a reader that awaits it
// holds no more than that many blocks of rows beyond what is hashed.
export class BlockQueue<T> implements AsyncIterable<T> {
  #items: T[] = [];
  #closed = false;
  #error: { e: unknown } | undefined;
  #wake: (() => void) | undefined;
  #room: (() => void)[] = [];
  /** Set when the consumer stopped early: the reader should stop too. */
  readonly stopped = new AbortController();

  constructor(private readonly limit = 4) {}

  /** Queues a block; resolves at once while fewer than `limit` wait, else once one is taken (or the consumer stopped). */
  push(item: T): Promise<void> {
    this.#items.push(item);
    this.#notify();
    if (this.#items.length <= this.limit || this.stopped.signal.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => this.#room.push(resolve));
  }

  #freed(): void {
    while (this.#room.length && (this.#items.length <= this.limit || this.stopped.signal.aborted)) this.#room.shift()!();
  }

  /** The consumer failed without pulling (or stopped): drop what waits, free the reader. */
  abandon(): void {
    this.#items = [];
    this.stopped.abort();
    this.#freed();
  }

  /** No more blocks. */
  close(): void {
    this.#closed = true;
    this.#notify();
  }

  /** The reader failed: the consumer gets `e` after the blocks already queued. */
  fail(e: unknown): void {
    this.#error ??= { e };
    this.#closed = true;
    this.#notify();
  }

  #notify(): void {
    const w = this.#wake;
    this.#wake = undefined;
    w?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    let finished = false;
    try {
      for (;;) {
        if (this.#items.length) {
          const item = this.#items.shift()!;
          this.#freed();
          yield item;
          continue;
        }
        if (this.#error) throw this.#error.e;
        if (this.#closed) {
          finished = true;
          return;
        }
        await new Promise<void>((resolve) => (this.#wake = resolve));
      }
    } finally {
      if (!finished) this.abandon();
    }
  }
}
