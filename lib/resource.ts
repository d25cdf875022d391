// Base for objects that own native (and possibly GPU) memory. dispose() frees
// it now; the native object's finalizer frees it at GC as a safety net. Work
// already running keeps its own reference, so dispose() during a call is safe.
import { disposedError } from './errors.js';
import type { Native } from './addon.js';

export abstract class NativeResource implements Disposable {
  #handle: Native | undefined;
  readonly #what: string;

  protected constructor(handle: Native, what: string) {
    this.#handle = handle;
    this.#what = what;
  }

  /** The native object; throws once disposed. */
  protected get handle(): Native {
    if (this.#handle === undefined) throw disposedError(this.#what);
    return this.#handle;
  }

  get disposed(): boolean {
    return this.#handle === undefined;
  }

  dispose(): void {
    const h = this.#handle;
    this.#handle = undefined;
    h?.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
