// Base for objects that own native (and possibly GPU) memory. dispose() frees
// it now; the native object's finalizer frees it at GC as a safety net. Work
// already running keeps its own reference, so dispose() during a call is safe.
import { disposedError } from './errors.js';

/** `H`: the native object's declared type (native-types.ts). */
export abstract class NativeResource<H extends { dispose(): void }> implements Disposable {
  #handle: H | undefined;
  readonly #what: string;

  protected constructor(handle: H, what: string) {
    this.#handle = handle;
    this.#what = what;
  }

  /** The native object; throws once disposed. */
  protected get handle(): H {
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
