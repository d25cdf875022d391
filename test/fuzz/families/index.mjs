// The fuzz families, one module per entry-point family. A family exports
// `name` and `generators`: [{ entry, weight, make(g, ctx) -> case }], where a
// case is { entry, kind: 'valid' | 'invalid' | 'either', run(), check?(value),
// errorCode?, allow?, cleanup?() } (see ../child.mjs for how it is judged).
import * as minhash from './minhash.mjs';
import * as flyhash from './flyhash.mjs';
import * as join from './join.mjs';
import * as hamming from './hamming.mjs';
import * as cluster from './cluster.mjs';
import * as lsh from './lsh.mjs';
import * as text from './text.mjs';
import * as ops from './ops.mjs';
import * as nativeCalls from './native.mjs';
import * as persist from './persist.mjs';
import * as redis from './redis.mjs';
import * as canary from './canary.mjs';
import * as hostile from './hostile.mjs';
import * as signals from './signals.mjs';
import { Gen } from '../gen.mjs';

export const families = [minhash, flyhash, join, hamming, cluster, lsh, text, ops, nativeCalls, persist, redis, hostile, signals];

/** Every generator of the selected families, with cumulative weights. */
export function generatorsOf(names) {
  const gens = [];
  // 'canary' (cases that fail on purpose, for the harness's own test) only when named.
  for (const f of names?.includes('canary') ? [canary] : families)
    if (!names || names.includes(f.name)) for (const g of f.generators) gens.push({ family: f.name, ...g });
  let total = 0;
  for (const g of gens) g.cum = total += g.weight ?? 1;
  return { gens, total };
}

/** The generator of the case with this seed. */
export function pickGenerator(table, seed) {
  const x = new Gen(seed ^ 0x5bd1e995).r() * table.total;
  return table.gens.find((g) => x < g.cum) ?? table.gens[table.gens.length - 1];
}
