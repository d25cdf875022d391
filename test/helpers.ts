// Shared test utilities: a seeded RNG, random inputs, and the GPU gate.
import { describe, expect, it } from 'vitest';
import { devices, type Backend, type CsrMatrix, type DedupBlock } from '../lib/index.js';

export const deviceInfo = devices();
export const hasGpu = deviceInfo.cuda;

/** A describe block for CUDA tests; skips itself, saying why, without a GPU. */
export function describeGpu(name: string, fn: () => void): void {
  const title = hasGpu ? `GPU: ${name}` : `GPU: ${name} (skipped: ${deviceInfo.reason})`;
  describe.skipIf(!hasGpu)(title, fn);
}

/** Usable GPUs here (0 where CUDA is not). */
export const gpuCount = hasGpu ? deviceInfo.gpus.length : 0;

/**
 * Why this host cannot run a test that assumes between `min` and `max` GPUs,
 * or undefined when it can. Tests whose property depends on the GPU count
 * state it through this, so the suite passes on 0-, 1-, 2- and 4-GPU hosts.
 */
export function gpuCountMismatch(min: number, max = Infinity): string | undefined {
  if (gpuCount >= min && gpuCount <= max) return undefined;
  const want = max === Infinity ? `${min} or more GPUs` : max === 0 ? 'no GPU' : min === max ? `${min} GPU(s)` : `${min} to ${max} GPUs`;
  return `assumes ${want}, this host has ${gpuCount}${hasGpu ? '' : ` (${deviceInfo.reason})`}`;
}

/** A test that assumes between `min` and `max` GPUs; skips itself, saying why, elsewhere. */
export function itGpus(min: number, max: number, name: string, fn: () => Promise<void> | void): void {
  const why = gpuCountMismatch(min, max);
  it.skipIf(why !== undefined)(why ? `${name} (skipped: ${why})` : name, fn);
}

/** Backends available here: always 'cpu', plus 'cuda' where a GPU is usable. */
export const backends: Backend[] = hasGpu ? ['cpu', 'cuda'] : ['cpu'];

export { rng } from './rng.mjs';

export function randInt(r: () => number, n: number): number {
  return Math.floor(r() * n);
}

/** One of `xs`, drawn with `r`. */
export function pick<T>(r: () => number, xs: readonly T[]): T {
  return xs[randInt(r, xs.length)];
}

/** Zipf-like column draw: popular columns are small ids. */
export function zipf(r: () => number, n: number, s = 1.1): number {
  // Inverse-CDF on a continuous approximation; good enough for test skew.
  const u = r();
  const x = Math.pow(1 - u * (1 - Math.pow(n, 1 - s)), 1 / (1 - s));
  return Math.min(n - 1, Math.max(0, Math.floor(x) - 1));
}

/**
 * Random CSR with distinct sorted columns per row. `lengths` gives each row's
 * nnz (clamped to cols); values are uniform in (0, 1] unless `weights` is false.
 */
export function randomCsr(
  r: () => number,
  rows: number,
  cols: number,
  lengths: (row: number) => number,
  { weights = true, skew = false }: { weights?: boolean; skew?: boolean } = {},
): CsrMatrix {
  const indptr = new Uint32Array(rows + 1);
  const idx: number[] = [];
  for (let i = 0; i < rows; i++) {
    const want = Math.min(cols, Math.max(0, lengths(i)));
    const set = new Set<number>();
    if (want > cols / 2) {
      for (let c = 0; c < cols && set.size < want; c++) if (r() < want / cols || cols - c <= want - set.size) set.add(c);
    } else {
      while (set.size < want) set.add(skew ? zipf(r, cols) : randInt(r, cols));
    }
    const sorted = [...set].sort((a, b) => a - b);
    idx.push(...sorted);
    indptr[i + 1] = idx.length;
  }
  const indices = Uint32Array.from(idx);
  const m: CsrMatrix = { rows, cols, indptr, indices };
  if (weights) {
    const values = new Float32Array(indices.length);
    for (let i = 0; i < values.length; i++) values[i] = 1 - r();
    m.values = values;
  }
  return m;
}

export function randomBits(r: () => number, rows: number, bits: number): Uint32Array {
  const out = new Uint32Array((rows * bits) / 32);
  for (let i = 0; i < out.length; i++) out[i] = Math.floor(r() * 4294967296) >>> 0;
  return out;
}

/** Asserts that fn throws synchronously a `cls` with code CUSIM_INVALID_ARGUMENT and a message matching `msg`. */
export function expectInvalid(fn: () => unknown, cls: ErrorConstructor, msg: RegExp): void {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(cls);
  expect((err as Error).message).toMatch(msg);
  expect(err).toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT' });
}

/** LSH groups as an oracle computes them: components of edges over positions, labelled by smallest member. */
export function components(n: number, edges: Array<[number, number]>): { group: Uint32Array; count: number } {
  const parent = Int32Array.from({ length: n }, (_, i) => i);
  const find = (x: number): number => {
    while (parent[x] !== x) x = parent[x] = parent[parent[x]];
    return x;
  };
  const linked = new Uint8Array(n);
  for (const [a, b] of edges) {
    linked[a] = linked[b] = 1;
    const ra = find(a);
    const rb = find(b);
    if (ra !== rb) parent[Math.max(ra, rb)] = Math.min(ra, rb);
  }
  const group = new Uint32Array(n).fill(0xffffffff);
  const label = new Map<number, number>();
  for (let i = 0; i < n; i++) {
    if (!linked[i]) continue;
    const r = find(i);
    if (!label.has(r)) label.set(r, label.size);
    group[i] = label.get(r)!;
  }
  return { group, count: label.size };
}

/** A matrix cut into dedupRecords blocks of `size` rows (copies), each with its rows' ids. */
export function blocksOf(m: CsrMatrix, ids: string[], size: number): DedupBlock[] {
  const out: DedupBlock[] = [];
  for (let b = 0; b < m.rows; b += size) {
    const e = Math.min(m.rows, b + size);
    const base = m.indptr[b];
    out.push({
      rows: {
        rows: e - b,
        cols: m.cols,
        indptr: Uint32Array.from(m.indptr.subarray(b, e + 1), (x) => x - base),
        indices: m.indices.slice(base, m.indptr[e]),
        ...(m.values ? { values: m.values.slice(base, m.indptr[e]) } : {}),
      },
      ids: ids.slice(b, e),
    });
  }
  return out;
}
