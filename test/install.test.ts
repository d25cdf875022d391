// The installed package's first minutes, in scratch projects laid out as npm
// lays them out (node_modules/cusim with dist/ and the install script, the
// platform package beside it, written by scripts/packages.mjs from this
// checkout's build): a platform binary is checked against its recorded size
// and SHA-256 before anything loads it, so a truncated or corrupted one is a
// coded error with a fix instead of a SIGBUS; and an install with neither a
// platform package nor a compiler succeeds, saying what is missing, and the
// first call raises CUSIM_ADDON_NOT_FOUND.
import { beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { binaryDamage, binaryDigest } from '../lib/addon-check.js';
import { platformPackage, currentHost } from '../lib/addon.js';
import { PLATFORMS, writePlatformDir } from '../scripts/packages.mjs';
import { ensureDist, fixture, root } from './cli-helpers.js';
import { sh } from './npm.js';

const localBuild = path.join(root, 'build', 'Release', 'cusim.node');
const pkg = platformPackage(currentHost());
const why = !pkg
  ? `cusim publishes no platform package for ${process.platform}-${process.arch}`
  : !existsSync(localBuild)
    ? `no local build at ${localBuild} (npm run build)`
    : undefined;

/** A project with cusim installed (no binary): dist/, the install script, and its dependencies as links. */
function project(): string {
  const app = mkdtempSync(path.join(tmpdir(), 'cusim-install-'));
  const modules = path.join(app, 'node_modules');
  const cusimDir = path.join(modules, 'cusim');
  mkdirSync(path.join(cusimDir, 'scripts'), { recursive: true });
  writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }));
  cpSync(path.join(root, 'dist'), path.join(cusimDir, 'dist'), { recursive: true });
  cpSync(path.join(root, 'package.json'), path.join(cusimDir, 'package.json'));
  cpSync(path.join(root, 'scripts', 'install.mjs'), path.join(cusimDir, 'scripts', 'install.mjs'));
  cpSync(path.join(root, 'bin'), path.join(cusimDir, 'bin'), { recursive: true });
  for (const d of readdirSync(path.join(root, 'node_modules'))) {
    if (d !== 'cusim' && !d.startsWith('.')) symlinkSync(path.join(root, 'node_modules', d), path.join(modules, d));
  }
  return app;
}

/** A PATH with node and nothing else: no compiler, no cmake, no make, no nvcc (and no variables naming one). */
function bare(): NodeJS.ProcessEnv {
  const bin = mkdtempSync(path.join(tmpdir(), 'cusim-bare-path-'));
  symlinkSync(process.execPath, path.join(bin, 'node'));
  return { PATH: bin, CXX: '', CUDACXX: '', npm_config_build_from_source: '' };
}

// Child processes run asynchronously: a blocked worker would time out vitest's own RPC on a busy host.
async function node(args: string[], cwd: string, env: NodeJS.ProcessEnv = {}) {
  const r = await sh(process.execPath, args, cwd, 120_000, env);
  return { status: r.status, signal: r.status === null ? 'killed' : null, stderr: r.stderr, stdout: r.stdout };
}

// The first call of the library, as a user's script makes it: prints the error's code and message.
const FIRST_CALL =
  "import('cusim').then((c) => { c.devices(); console.log('loaded'); }, (e) => { throw e; }).catch((e) => { console.log(e.code); console.error(e.message); process.exit(1); })";

describe.skipIf(!!why)(`installed package: binary check and install script${why ? ` (skipped: ${why})` : ''}`, () => {
  let app = '';
  let pkgDir = '';
  let size = 0;

  beforeAll(async () => {
    ensureDist();
    app = project();
    pkgDir = await writePlatformDir({ arch: process.arch, binary: localBuild, outDir: path.join(app, 'node_modules') });
    size = statSync(path.join(pkgDir, 'cusim.node')).size;
  });

  it('the platform package records the size and SHA-256 of its binary, and the check reads the whole file', () => {
    const file = path.join(pkgDir, 'cusim.node');
    const bytes = readFileSync(file);
    const record = JSON.parse(readFileSync(path.join(pkgDir, 'package.json'), 'utf8')).cusimBinary;
    expect(record).toEqual({ file: 'cusim.node', size: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') });
    expect(binaryDigest(file)).toEqual({ size: record.size, sha256: record.sha256 });
    expect(binaryDamage(file)).toBeUndefined();
    const t0 = performance.now();
    binaryDamage(file);
    console.log(`binary check: ${(size / 2 ** 20).toFixed(1)} MiB in ${(performance.now() - t0).toFixed(1)} ms`);
  });

  it('an intact platform package: the install script loads it and builds nothing, even without a compiler', async () => {
    const r = await node([path.join('node_modules', 'cusim', 'scripts', 'install.mjs')], app, bare());
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    expect(existsSync(path.join(app, 'node_modules', 'cusim', 'build'))).toBe(false);
    expect((await node(['-e', FIRST_CALL], app)).stdout.trim()).toBe('loaded');
  });

  const damages: [string, (file: string) => void][] = [
    ['truncated to 0 bytes', (f) => truncateSync(f, 0)],
    ['truncated to 4096 bytes', (f) => truncateSync(f, 4096)],
    ['truncated to half', (f) => truncateSync(f, Math.floor(size / 2))],
    ['one byte short', (f) => truncateSync(f, size - 1)],
    [
      'one byte flipped',
      (f) => {
        const b = readFileSync(f);
        b[Math.floor(b.length / 3)] ^= 0x01;
        writeFileSync(f, b);
      },
    ],
  ];
  it.each(damages)(
    'a binary %s: CUSIM_ADDON_DAMAGED from the first call and the install script, with a fix that works',
    async (_, damage) => {
      const file = path.join(pkgDir, 'cusim.node');
      damage(file);
      expect(binaryDamage(file)).toMatch(
        /^it is \d+ bytes, but the package recorded \d+|^its SHA-256 is [0-9a-f]{64}, but the package recorded/,
      );
      const fix = `cd ${app} && rm -rf node_modules/${pkg} && npm install`;

      const call = await node(['-e', FIRST_CALL], app);
      expect(call.signal).toBeNull();
      expect(call.status, call.stderr).toBe(1);
      expect(call.stdout.trim()).toBe('CUSIM_ADDON_DAMAGED');
      expect(call.stderr).toMatch(/is damaged, so it was not loaded/);
      expect(call.stderr).toContain(`- Reinstall ${pkg}: ${fix}`);

      // The install script (npm rebuild cusim) checks it the same way, and does not build over it.
      const install = await node([path.join('node_modules', 'cusim', 'scripts', 'install.mjs')], app, bare());
      expect(install.signal).toBeNull();
      expect(install.status).toBe(1);
      expect(install.stderr).toContain(`- Reinstall ${pkg}: ${fix}`);

      const cli = await node([path.join('node_modules', 'cusim', 'bin', 'cusim'), 'dedup', fixture], app);
      expect(cli.signal).toBeNull();
      expect(cli.status).toBe(1);
      expect(cli.stderr).toMatch(/^cusim: The native addon for .* is damaged/m);

      // The fix: what `npm install` does for the removed package is to write it again.
      rmSync(pkgDir, { recursive: true });
      await writePlatformDir({ arch: process.arch, binary: localBuild, outDir: path.join(app, 'node_modules') });
      expect((await node(['-e', FIRST_CALL], app)).stdout.trim()).toBe('loaded');
    },
  );

  it('no platform package and no compiler: the install succeeds, says what is missing, and the first call raises CUSIM_ADDON_NOT_FOUND', async () => {
    const bareApp = project();
    const r = await node([path.join('node_modules', 'cusim', 'scripts', 'install.mjs')], bareApp, bare());
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toContain(`the platform package ${PLATFORMS[process.arch as 'x64' | 'arm64'].name} is not installed`);
    expect(r.stderr).toMatch(
      /cannot be built from source: missing a C\+\+17 compiler \(c\+\+, g\+\+, clang\+\+: none runs\); CMake >= 3\.18/,
    );
    expect(r.stderr).toContain('a build tool (make or ninja: not found)');
    expect(r.stderr).toContain('its first call raises CUSIM_ADDON_NOT_FOUND');
    expect(existsSync(path.join(bareApp, 'node_modules', 'cusim', 'build'))).toBe(false);
    const call = await node(['-e', FIRST_CALL], bareApp);
    expect(call.status).toBe(1);
    expect(call.stdout.trim()).toBe('CUSIM_ADDON_NOT_FOUND');
    expect(call.stderr).toContain(`npm install ${pkg}@`);
  });
});
