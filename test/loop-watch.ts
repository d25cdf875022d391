// A setup file for every test file: says when the worker's event loop was
// blocked for 20 s or more, and in which test. vitest's calls from a worker
// to its runner time out after a fixed 60 s ("Timeout calling onTaskUpdate":
// a run whose every test passed exits 1), and that error names no test; the
// GPU host's suite has ended so in about half its runs.
import { beforeAll, beforeEach } from 'vitest';

const BLOCKED_MS = 20_000;
let current = '(loading)';
beforeAll((suite) => {
  current = `${suite.name} (hooks)`;
});
beforeEach((ctx) => {
  current = `${ctx.task.file?.name ?? ''} > ${ctx.task.name}`;
});
let last = performance.now();
setInterval(() => {
  const now = performance.now();
  if (now - last >= BLOCKED_MS)
    process.stderr.write(`[loop-watch] event loop blocked ${((now - last) / 1000).toFixed(1)} s in ${current}\n`);
  last = now;
}, 1000).unref();
