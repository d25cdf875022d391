// Row names as a pipeline carries them: read one at a time, so a reader may
// keep them in any form (strings, byte offsets into its input) until a group
// is reported.
import { typeError } from '../errors.js';
import { describe } from '../validate.js';

/** The names of rows: `length` of them, row i's from get(i). */
export interface IdList {
  readonly length: number;
  get(i: number): string;
}

/** An IdList over an array of strings (not copied). */
export function idList(ids: readonly string[]): IdList {
  return { length: ids.length, get: (i) => ids[i] };
}

/** An IdList as given, or over an array of strings. */
export function toIdList(v: unknown, name: string): IdList {
  if (Array.isArray(v)) return idList(v as string[]);
  const o = v as Partial<IdList> | null;
  if (typeof o !== 'object' || o === null || typeof o.get !== 'function' || !Number.isSafeInteger(o.length) || o.length! < 0)
    throw typeError(`${name} must be an array of strings or { length, get(i) }, got ${describe(v)}`);
  return o as IdList;
}

/** Lists one after another, as one list (row i of the whole is found by binary search over the parts). */
export class IdListChain implements IdList {
  #parts: IdList[] = [];
  #starts: number[] = [];
  #length = 0;

  get length(): number {
    return this.#length;
  }

  push(part: IdList): void {
    if (part.length === 0) return;
    this.#parts.push(part);
    this.#starts.push(this.#length);
    this.#length += part.length;
  }

  get(i: number): string {
    let lo = 0;
    let hi = this.#starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >>> 1;
      if (this.#starts[mid] <= i) lo = mid;
      else hi = mid - 1;
    }
    return this.#parts[lo].get(i - this.#starts[lo]);
  }
}
