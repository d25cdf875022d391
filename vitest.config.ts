import os from 'node:os';
import { configDefaults, defineConfig } from 'vitest/config';

// At most 16 files at once: each file's addon runs a thread per core, and on a
// 64-core GPU host 63 forks starved each other until a fork's reply from the
// runner waited past vitest's fixed 60 s RPC timeout ("Timeout calling
// onTaskUpdate": a green run that exits 1). Fewer cores: one fewer than the cores.
// The files share the cores: each file's addon gets cores / files threads
// (CUSIM_THREADS, unless set), so the host is not oversubscribed many times over.
const cores = os.availableParallelism();
const maxWorkers = Math.max(1, Math.min(cores - 1, 16));
const threads = process.env.CUSIM_THREADS ?? String(Math.max(2, Math.floor(cores / maxWorkers)));

// Native addons and worker threads: one process per file keeps a crash or a
// leaked GPU context from touching other files. The GPU out-of-memory tests
// fill the whole device, so they run alone, after every other file. The real
// 4 GiB crossing peaks at 8.5 GB of memory: its own project, left out of
// `npm test` (the one file measured above 4 GB) and run by
// `npm run test:large-memory` (.ci/run runs both).
// test/loop-watch.ts names a test that blocks its worker's event loop long
// enough to come near vitest's 60 s RPC timeout.
const common = {
  pool: 'forks' as const,
  testTimeout: 120_000,
  hookTimeout: 120_000,
  env: { CUSIM_THREADS: threads },
  setupFiles: ['./test/loop-watch.ts'],
};
const oom = 'test/gpu-oom.test.ts';
const largeMemory = 'test/scale-4gib.test.ts';

export default defineConfig({
  test: {
    maxWorkers,
    // The default reporter, and a line per group of skipped tests saying why (test/skip-reasons.ts).
    reporters: ['default', './test/skip-reasons.ts'],
    projects: [
      {
        test: {
          ...common,
          name: 'main',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, oom, largeMemory],
          sequence: { groupOrder: 0 },
        },
      },
      { test: { ...common, name: 'gpu-oom', include: [oom], sequence: { groupOrder: 1 } } },
      { test: { ...common, name: 'large-memory', include: [largeMemory], sequence: { groupOrder: 2 } } },
    ],
  },
});
