// The test run's skip reasons are printed by the default reporter set
// (vitest.config.ts adds test/skip-reasons.ts): vitest runs a sample file
// with skipped suites and tests, and its output names each group and why.
import { describe, expect, it } from 'vitest';
import path from 'node:path';
import { root } from './cli-helpers.js';
import { sh } from './npm.js';
import config from '../vitest.config.js';

describe('skip reasons in the default output', () => {
  it('npm test runs the default reporter and the skip reasons', () => {
    expect(config.test?.reporters).toEqual(['default', './test/skip-reasons.ts']);
  });

  it('one line per skipped group, with its reason and count', async () => {
    const dir = path.join(root, 'test', 'fixtures', 'skip-reasons');
    const vitest = path.join(root, 'node_modules', 'vitest', 'vitest.mjs');
    const r = await sh(process.execPath, [vitest, 'run', '--config', path.join(dir, 'vitest.config.ts')], dir, 120_000, { CI: '1' });
    expect(r.status, r.out).toBe(0);
    const lines = r.stdout.split('\n');
    const at = lines.indexOf('Skipped, and why:');
    expect(at, r.stdout).toBeGreaterThanOrEqual(0);
    expect(lines.slice(at + 1, at + 3).sort()).toEqual([
      '  ↓ sample.fixture.ts > a suite skipped at collection (skipped: no widget here) (2 tests)',
      '  ↓ sample.fixture.ts: the registry is unreachable (2 tests)',
    ]);
  }, 130_000);
});
