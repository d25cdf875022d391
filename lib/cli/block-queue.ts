// A reader's blocks as an async iterable: the reader pushes as it goes (from
// callbacks such as readRecordBlocks' onBlock), the pipeline pulls. Blocks
// wait here only while hashing is behind reading; their rows are what the
// pipeline keeps anyway.
export class BlockQueue<T> implements AsyncIterable<T> {
  #items: T[] = [];
  #closed = false;
  #error: { e: unknown } | undefined;
  #wake: (() => void) | undefined;
  /** Set when the consumer stopped early: the reader should stop too. */
  readonly stopped = new AbortController();

  push(item: T): void {
    this.#items.push(item);
    this.#notify();
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
          yield this.#items.shift()!;
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
      if (!finished) {
        this.#items = [];
        this.stopped.abort();
      }
    }
  }
}
