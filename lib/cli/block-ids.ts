// The ids of a block's kept documents, read one at a time. The native record
// reader keeps them compact (line numbers, id bytes, numbers) and makes a
// string only for an id that is asked for (a reported group's members).

/** Ids of a block's kept documents, in order. */
export interface BlockIds {
  readonly length: number;
  get(i: number): string;
}

/** Ids already held as strings. */
export function arrayIds(ids: readonly string[]): BlockIds {
  return { length: ids.length, get: (i) => ids[i] };
}
