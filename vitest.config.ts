import { configDefaults, defineConfig } from 'vitest/config';

// Native addons and worker threads: one process per file keeps a crash or a
// leaked GPU context from touching other files. The GPU out-of-memory tests
// fill the whole device, so they run alone, after every other file.
const common = { pool: 'forks' as const, testTimeout: 120_000, hookTimeout: 120_000 };
const oom = 'test/gpu-oom.test.ts';

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
          exclude: [...configDefaults.exclude, oom],
          sequence: { groupOrder: 0 },
        },
      },
      { test: { ...common, name: 'gpu-oom', include: [oom], sequence: { groupOrder: 1 } } },
    ],
  },
});
