// Host stages of the exact set similarity join on the bench's Zipf sets
// (bench/join.js: sizes 10..30, mean 20, vocab 1M, s = 1.1), without a GPU:
// the JavaScript normalization, the synchronous staging copy, and the native
// open (validation, join::Prepare) on the CPU backend, whose phases
// CUSIM_PROFILE=1 prints. Prepare is shared with the CUDA backend, so this
// times the host work a GPU call does before its first kernel.
//   node bench/join-host.js [sets=10000000] [repeats=3]
// Set CUSIM_PROFILE=1 for the per-phase lines ("join open", "join prepare").
import { zipfCsr } from './join.js';
import { native } from '../dist/addon.js';
import { toCsr } from '../dist/validate.js';

const n = Number(process.argv[2] ?? 10_000_000);
const repeats = Number(process.argv[3] ?? 3);
let t = performance.now();
const sets = zipfCsr(n, 1_000_000);
console.log(`generated ${n} sets, ${sets.indices.length} tokens in ${(performance.now() - t).toFixed(0)} ms`);

for (let r = 0; r < repeats; r++) {
  t = performance.now();
  const s = toCsr(sets, 'sets', { values: 'ignore' });
  const tNorm = performance.now() - t;
  const handle = new (native().JoinHandle)();
  t = performance.now();
  // Threshold 1: the CPU joiner's own prefix index (logged apart as
  // "joiner", not part of a GPU call) stays small.
  const p = handle.open(s, undefined, {
    measure: 0,
    threshold: 1,
    backend: 'cpu',
    algorithm: 'ppjoin',
    blockSize: 0,
    maxChunkPairs: 2 ** 26,
  });
  const tSync = performance.now() - t;
  await p;
  const tOpen = performance.now() - t;
  handle.dispose();
  console.log(
    `run ${r}: normalize ${tNorm.toFixed(1)} ms, open sync (staging copy) ${tSync.toFixed(1)} ms, open total ${tOpen.toFixed(1)} ms`,
  );
}
