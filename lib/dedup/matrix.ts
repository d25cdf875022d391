// dedup(): the pipeline over one matrix held in memory.
import { typeError } from '../errors.js';
import { checkEnum, describe, isObject, toCsr, type CsrMatrix } from '../validate.js';
import type { DedupOptions, DedupResult } from './options.js';
import { copyCsr, dedupRecords } from './records.js';

/**
 * Near-duplicate groups of a sparse matrix in one call: MinHash (weighted, or
 * classic over sets with `method: 'classic'`; see classicTokens for how
 * columns feed it), LSH tuned so a pair at threshold + 0.05 is found with
 * probability 0.95 (see `recall`), and verification at the threshold. Row i
 * has id i. Empty rows (no positive weight; classic: no column) are never
 * grouped. The matrix is copied before this returns: the caller may reuse it
 * at once. dedupRecords() is the same over a stream of blocks.
 */
export function dedup(matrix: CsrMatrix, options: DedupOptions = {}): Promise<DedupResult> {
  try {
    if (!isObject(options as unknown)) throw typeError(`options must be an object, got ${describe(options)}`);
    const method = checkEnum(options.method ?? 'weighted', 'method', ['weighted', 'classic'] as const);
    const m = toCsr(matrix, 'matrix', { maxCols: method === 'classic' ? 2 ** 32 : 0xffffffff });
    // Later stages read the rows after this returns: they read a copy.
    const rows = copyCsr(m);
    return dedupRecords([{ rows }], { ...options, totalRows: rows.rows }).then(({ ids: _ids, ms: _ms, ...r }) => r);
  } catch (e) {
    return Promise.reject(e);
  }
}
