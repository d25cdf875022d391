// linux-arm64: the packed main package with the cusim-linux-arm64-gnu tarball
// (npm run build:binaries) installed into a scratch project as npm installs
// them on an arm64 host, then every engine run by an arm64 Node under
// qemu-user on Debian 11's glibc 2.31. Each engine's output must equal this
// checkout's CPU backend on the same inputs, and the engines with a brute-force
// oracle are checked against it inside the run (test/engine-checks.mjs).
import { beforeAll, describe, expect, it } from 'vitest';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as cusim from '../lib/index.js';
import { bullseyeRoot } from '../scripts/glibc-stubs.mjs';
import { packMain, PACKAGES_DIR, PLATFORMS, tarballs } from '../scripts/packages.mjs';
import { root } from './cli-helpers.js';
import { runWorkloads } from './engine-checks.mjs';
import { offline, sh } from './npm.js';
import { arm64Node, qemu } from './qemu.js';

const platformTgz = tarballs(PACKAGES_DIR)[PLATFORMS.arm64.name];
const node = qemu() ? arm64Node() : { why: 'qemu-aarch64-static is not installed (apt-get install qemu-user-static)' };
const why = !platformTgz
  ? `no ${PLATFORMS.arm64.name} tarball in ${path.relative(root, PACKAGES_DIR)}/: run npm run build:binaries`
  : !node.path
    ? node.why
    : undefined;

describe.skipIf(!!why)(`linux-arm64 under qemu${why ? ` (skipped: ${why})` : ''}`, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'cusim-arm64-'));
  const proj = path.join(work, 'project');
  let noRegistry: string | undefined;

  beforeAll(async () => {
    const main = packMain({ outDir: work, stageDir: path.join(work, 'stage') });
    mkdirSync(proj);
    writeFileSync(path.join(proj, 'package.json'), JSON.stringify({ name: 'arm64-app', version: '1.0.0', private: true }));
    // As on an arm64 host: npm picks the arm64 package by its cpu field (--force:
    // this host is x64); no install script runs (it would build for x64).
    const i = await sh(
      'npm',
      ['install', '--prefer-offline', '--force', '--ignore-scripts', '--os=linux', '--cpu=arm64', '--libc=glibc', main, platformTgz!],
      proj,
    );
    if (i.status !== 0 && !(noRegistry = offline(i))) throw new Error(`npm install failed:\n${i.out.slice(-3000)}`);
    for (const f of ['engine-checks.mjs', 'rng.mjs']) copyFileSync(path.join(root, 'test', f), path.join(proj, f));
  }, 600_000);

  it('every engine runs and equals the x64 CPU backend', async (ctx) => {
    if (noRegistry) return ctx.skip(noRegistry);
    expect(existsSync(path.join(proj, 'node_modules', PLATFORMS.arm64.name, 'cusim.node'))).toBe(true);
    expect(existsSync(path.join(proj, 'node_modules', 'cusim', 'build'))).toBe(false);
    const deb = bullseyeRoot('arm64', path.join(root, 'build-glibc'));
    const r = await sh(qemu(), [deb.loader, '--library-path', deb.libraryPath, node.path!, 'engine-checks.mjs', 'cpu'], proj, 600_000);
    expect(r.status, r.out.slice(-3000)).toBe(0);
    const arm = JSON.parse(r.stdout);
    expect(arm.arch).toBe('arm64');
    expect(arm.glibc).toBe('2.31');
    expect(arm.results).toEqual(await runWorkloads(cusim, 'cpu'));
  }, 600_000);
});
