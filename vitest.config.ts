import { configDefaults, defineConfig } from 'vitest/config';

// Native addons and worker threads: one process per file keeps a crash or a
// leaked GPU context from touching other files. The GPU out-of-memory tests
// fill the whole device, so they run alone, after every other file. The real
// 4 GiB crossing peaks at 8.5 GB of memory: its own project, left out of
// `npm test` (the one file measured above 4 GB) and run by
// `npm run test:large-memory` (.ci/run runs both).
const common = { pool: 'forks' as const, testTimeout: 120_000, hookTimeout: 120_000 };
const oom = 'test/gpu-oom.test.ts';
const largeMemory = 'test/scale-4gib.test.ts';

export default defineConfig({
  test: {
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
