// Host stages of the exact set similarity join on the bench's Zipf sets
// (bench/join.js: sizes 10..30, mean 20, vocab 1M, s = 1.1): one
// similarityJoin call per repeat, its wall time and its stageMs split
// (normalize, prepare, build, plan, transfer, kernel, verify, output; see
// JoinStageMs). Prepare and build are shared by both backends, so on the CPU
// this times the host work a GPU call does before its first kernel.
//   node bench/join-host.js [sets=10000000] [repeats=3] [--backend cpu|cuda]
//     [--threads N] [--threshold t]
// Threshold 1 (default) keeps the CPU joiner's own work (build's prefix
// index, verify) small. CUSIM_PROFILE=1 adds the native per-phase lines.
import { STAGES, zipfCsr } from './join.js';
import { similarityJoin, threads } from '../dist/index.js';

const args = process.argv.slice(2);
const flag = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  if (i < 0) return dflt;
  const v = args[i + 1];
  args.splice(i, 2);
  return v;
};
const backend = flag('backend', 'cpu');
const nThreads = Number(flag('threads', 0));
const threshold = Number(flag('threshold', 1));
const n = Number(args[0] ?? 10_000_000);
const repeats = Number(args[1] ?? 3);
threads(nThreads);
let t = performance.now();
const sets = zipfCsr(n, 1_000_000);
console.log(
  `generated ${n} sets, ${sets.indices.length} tokens in ${(performance.now() - t).toFixed(0)} ms; ` +
    `${backend}, ${threads()} threads, Jaccard ${threshold}`,
);
for (let r = 0; r < repeats; r++) {
  t = performance.now();
  const res = await similarityJoin(sets, { threshold, backend });
  const wall = performance.now() - t;
  const split = STAGES.map((s) => `${s} ${res.stageMs[s].toFixed(1)}`).join(', ');
  console.log(`run ${r}: wall ${wall.toFixed(1)} ms, ${res.left.length} pairs; ms per stage: ${split}`);
}
