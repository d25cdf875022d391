import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Native addons and worker threads: one process per file keeps a crash or
    // a leaked GPU context from touching other files.
    pool: 'forks',
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
