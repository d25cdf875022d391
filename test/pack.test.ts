// The published packages as a user gets them. The main package is packed from
// a staging copy of this checkout (scripts/packages.mjs: dist/ compiled
// afresh, the platform packages as optional dependencies); the platform
// package is the one `npm run build:binaries` made (build-packages/), or,
// where none was made (CI: no CUDA toolkit), one packed from this checkout's
// own build. Both tarballs are installed into scratch projects, tarballs
// offline and their dependencies from npm's cache or registry:
//   - with the platform package: nothing compiles, every engine runs and
//     equals this checkout's CPU backend, `npx cusim dedup` works;
//   - without it: the CLI prints the whole diagnosis, and the fix it offers,
//     approving the install script and rebuilding, builds the addon from
//     source (with CUDA kernels exactly where nvcc and cuRAND's headers are).
// Nothing here touches the checkout's build/ while other test files load it.
import { beforeAll, describe, expect, it } from 'vitest';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as cusim from '../lib/index.js';
import { packMain, PACKAGES_DIR, PLATFORMS, tarballs, writePlatformPackage } from '../scripts/packages.mjs';
import { fixture, root } from './cli-helpers.js';
import { runWorkloads } from './engine-checks.mjs';
import { npmWorks, offline, sh } from './npm.js';

const PLANTED = [
  ['app/server.py', 'backup/server_old.py'],
  ['lib/util.js', 'vendor/lib/util.js', 'vendor/util-fork.js'],
];
const platform = PLATFORMS[process.arch as 'x64' | 'arm64'];
const version = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')).version as string;
const localBuild = path.join(root, 'build', 'Release', 'cusim.node');
const why = !npmWorks
  ? 'npm is not on PATH'
  : !platform || process.platform !== 'linux'
    ? `cusim publishes no platform package for ${process.platform}-${process.arch}`
    : undefined;

// Each step of these minutes-long tests says what it does and how long it took.
const t0 = performance.now();
function step(what: string): void {
  console.log(`pack test [${((performance.now() - t0) / 1000).toFixed(0)} s]: ${what}`);
}

function project(dir: string): void {
  mkdirSync(dir);
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: path.basename(dir), version: '1.0.0', private: true }));
}

/**
 * Whether a source build here must have CUDA kernels: false without nvcc;
 * true with nvcc and cuRAND's headers in $CUSIM_CURAND_INCLUDE or in nvcc's
 * toolkit; undefined where only CMake's wider search decides.
 */
function cudaExpected(): boolean | undefined {
  const nvcc = process.env.CUDACXX || 'nvcc';
  if (spawnSync(nvcc, ['--version']).status !== 0) return false;
  const has = (d: string | undefined): boolean => !!d && existsSync(path.join(d, 'curand_kernel.h'));
  if (has(process.env.CUSIM_CURAND_INCLUDE)) return true;
  const dry = spawnSync(nvcc, ['--dryrun', '-x', 'cu', '-c', '/dev/null', '-o', '/dev/null'], { encoding: 'utf8' });
  const here = /#\$ _HERE_=(\S+)/.exec(`${dry.stdout}${dry.stderr}`)?.[1];
  const inToolkit =
    !!here && ['include', 'targets/x86_64-linux/include', 'targets/sbsa-linux/include'].some((d) => has(path.resolve(here, '..', d)));
  return inToolkit ? true : undefined;
}

describe.skipIf(!!why)(`published packages: npm pack → install → every engine${why ? ` (skipped: ${why})` : ''}`, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'cusim-pack-'));
  const withBinary = path.join(work, 'with-binary');
  const fromSource = path.join(work, 'from-source');
  let mainTgz = '';
  let platformTgz = '';
  let shipped = false;
  let noRegistry: string | undefined;

  beforeAll(async () => {
    step('packing the main package (dist/ compiled afresh in a staging copy)');
    mainTgz = packMain({ outDir: work, stageDir: path.join(work, 'stage') });
    const made = tarballs(PACKAGES_DIR)[platform.name];
    shipped = !!made;
    if (made) {
      platformTgz = made;
    } else {
      if (!existsSync(localBuild))
        throw new Error(`no ${platform.name} in build-packages/ and no local build at ${localBuild}; run npm run build`);
      platformTgz = (await writePlatformPackage({ arch: process.arch, binary: localBuild, outDir: path.join(work, 'platform') })).tarball;
    }
    project(withBinary);
    step(`installing ${path.basename(mainTgz)} and ${path.basename(platformTgz)} into a scratch project`);
    const i = await sh('npm', ['install', '--prefer-offline', mainTgz, platformTgz], withBinary);
    if (i.status !== 0 && !(noRegistry = offline(i))) throw new Error(`npm install of the tarballs failed:\n${i.out.slice(-3000)}`);
    for (const f of ['engine-checks.mjs', 'rng.mjs']) copyFileSync(path.join(root, 'test', f), path.join(withBinary, f));
    step('installed');
  }, 600_000);

  it('the main tarball holds the CLI, the compiled library, its CommonJS types and the install script, no binary, and lists the platform packages', async () => {
    const list = (await sh('tar', ['-tzf', mainTgz], work)).out.split('\n');
    for (const f of [
      'bin/cusim',
      'dist/index.js',
      'dist/cli/main.js',
      'dist/cjs/index.cjs',
      'dist/cjs/index.d.ts',
      'scripts/install.mjs',
      'LICENSE',
      'CMakeLists.txt',
      'native/exports.map',
    ]) {
      expect(list).toContain(`package/${f}`);
    }
    // Only compiled sources: every dist/*.js has its lib/*.ts.
    for (const f of list.filter((x) => /^package\/dist\/.*\.js$/.test(x))) {
      expect(list, f).toContain(f.replace('package/dist/', 'package/lib/').replace(/\.js$/, '.ts'));
    }
    expect(list.filter((f) => f.endsWith('.node') || f.startsWith('package/build') || f.startsWith('package/prebuilds'))).toEqual([]);
    const manifest = JSON.parse((await sh('tar', ['-xzOf', mainTgz, 'package/package.json'], work)).stdout);
    expect(manifest.optionalDependencies).toEqual({ 'cusim-linux-x64-gnu': version, 'cusim-linux-arm64-gnu': version });
    expect(manifest.scripts.install).toBe('node scripts/install.mjs');
    expect(manifest.scripts.prepare).toBeUndefined();
    expect(manifest.scripts.prepack).toBe('npm run build:ts');
    // The checkout's own manifest lists none: `npm ci` here must not look for unpublished packages.
    expect(JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')).optionalDependencies).toBeUndefined();
    const plat = (await sh('tar', ['-tzf', platformTgz], work)).out.split('\n').filter(Boolean).sort();
    // With the license texts of the libraries compiled in from Debian's source packages: those this checkout's
    // build had at least (a package built elsewhere, such as the shipped one, may carry them without them here).
    const base = ['package/LICENSE', 'package/README.md', 'package/cusim.node', 'package/package.json'];
    const known = { 'package/LICENSE.simdjson': 'build-simdjson/LICENSE', 'package/LICENSE.libcsv': 'build-libcsv/LICENSE' };
    const notices = plat.filter((f) => !base.includes(f));
    expect(notices.filter((f) => !(f in known))).toEqual([]);
    for (const [to, from] of Object.entries(known)) if (existsSync(path.join(root, from)) && !shipped) expect(notices).toContain(to);
    expect(plat).toEqual([...base, ...notices].sort());
    const platManifest = JSON.parse((await sh('tar', ['-xOzf', platformTgz, 'package/package.json'], work)).out);
    expect([...platManifest.files.map((f: string) => `package/${f}`), 'package/package.json'].sort()).toEqual(plat);
  });

  it(`every engine runs from the installed packages (${platform.name}) and equals this checkout's CPU backend`, async (ctx) => {
    if (noRegistry) return ctx.skip(noRegistry);
    // The install script found the platform binary loading and compiled nothing.
    expect(existsSync(path.join(withBinary, 'node_modules', 'cusim', 'build'))).toBe(false);
    expect(existsSync(path.join(withBinary, 'node_modules', platform.name, 'cusim.node'))).toBe(true);
    // On a GPU host the shipped binary runs the engines on CUDA; the oracle is the CPU backend here.
    step('running every engine from the installed packages');
    const r = await sh(process.execPath, ['engine-checks.mjs', 'gpu'], withBinary, 300_000);
    expect(r.status, r.out.slice(-3000)).toBe(0);
    const installed = JSON.parse(r.stdout);
    expect(installed.arch).toBe(process.arch);
    const { backend, ...got } = installed.results;
    const { backend: _, ...want } = await runWorkloads(cusim, 'cpu');
    expect(got).toEqual(want);
    console.log(
      `pack test: engines ran on ${backend} from ${shipped ? `build-packages/ (${path.basename(platformTgz)})` : "a package of this checkout's build"}`,
    );
  }, 300_000);

  it('npx cusim dedup --json finds the planted groups from the installed packages', async (ctx) => {
    if (noRegistry) return ctx.skip(noRegistry);
    step('npx cusim dedup from the installed packages');
    const r = await sh('npx', ['--no-install', 'cusim', 'dedup', fixture, '--json', '--threshold', '0.8'], withBinary, 120_000);
    expect(r.status, r.out).toBe(0);
    const rep = JSON.parse(r.stdout);
    expect(rep.schema).toBe('cusim.dedup/1');
    const rel = (id: string): string => path.relative(fixture, id).split(path.sep).join('/');
    expect(rep.groups.map((g: { members: { id: string }[] }) => g.members.map((m) => rel(m.id)))).toEqual(PLANTED);
    expect(r.stderr).toMatch(/cusim: backend (cpu|cuda)/);
  }, 120_000);

  it('a damaged platform binary: CUSIM_ADDON_DAMAGED, and the fix it prints reinstalls it', async (ctx) => {
    if (noRegistry) return ctx.skip(noRegistry);
    step('truncating the installed binary, then following the fix the error prints');
    const file = path.join(withBinary, 'node_modules', platform.name, 'cusim.node');
    truncateSync(file, Math.floor(statSync(file).size / 2));
    const fail = await sh('npx', ['--no-install', 'cusim', 'dedup', fixture], withBinary, 120_000);
    expect(fail.status, fail.out).toBe(1);
    expect(fail.stderr).toMatch(/^cusim: The native addon for .* is damaged, so it was not loaded:/m);
    const fix = new RegExp(`- Reinstall ${platform.name}: (cd \\S+ && rm -rf node_modules/${platform.name} && npm install)$`, 'm').exec(
      fail.stderr,
    );
    expect(fix, fail.stderr).not.toBeNull();
    const r = await sh('sh', ['-c', `${fix![1]} --prefer-offline`], withBinary);
    expect(r.status, r.out.slice(-3000)).toBe(0);
    const ok = await sh('npx', ['--no-install', 'cusim', 'dedup', fixture, '--json', '--threshold', '0.8'], withBinary, 120_000);
    expect(ok.status, ok.out).toBe(0);
    expect(JSON.parse(ok.stdout).groups).toHaveLength(PLANTED.length);
  }, 300_000);

  it('without the platform package the CLI prints the whole diagnosis, and its build-from-source fix works', async (ctx) => {
    if (noRegistry) return ctx.skip(noRegistry);
    project(fromSource);
    step('installing the main package alone');
    // Install scripts skipped, as npm does for dependencies it was not told to trust.
    const i = await sh('npm', ['install', '--prefer-offline', '--ignore-scripts', mainTgz], fromSource);
    expect(i.status, i.out.slice(-3000)).toBe(0);
    const fail = await sh('npx', ['--no-install', 'cusim', 'dedup', fixture], fromSource, 120_000);
    expect(fail.status).toBe(1);
    // (npm's own warnings may come first)
    expect(fail.stderr).toMatch(
      new RegExp(
        `^cusim: No native addon for linux-${process.arch} \\(glibc [\\d.]+\\): the platform package ${platform.name} is not installed`,
        'm',
      ),
    );
    expect(fail.stderr).not.toMatch(/cusim: cusim:/);
    expect(fail.stderr).toContain('Possible solutions:');
    expect(fail.stderr).toContain(`- Install the prebuilt binary: npm install ${platform.name}@${version}`);
    expect(fail.stderr).toContain('npm install-scripts approve cusim && npm rebuild cusim');

    step('approving the install script, then npm rebuild cusim (a source build: minutes)');
    const approve = await sh('npm', ['install-scripts', 'approve', 'cusim'], fromSource);
    expect(approve.status, approve.out).toBe(0);
    const rebuild = await sh('npm', ['rebuild', 'cusim', '--foreground-scripts'], fromSource, 1_500_000);
    expect(rebuild.status, rebuild.out.slice(-3000)).toBe(0);
    const addon = path.join(fromSource, 'node_modules', 'cusim', 'build', 'Release', 'cusim.node');
    expect(existsSync(addon)).toBe(true);
    const d = JSON.parse(
      (await sh(process.execPath, ['-e', `console.log(JSON.stringify(require(${JSON.stringify(addon)}).devices()))`], fromSource)).stdout,
    );
    step('rebuilt');
    const reported = /cusim: CUDA kernels (ON|OFF)/.exec(rebuild.out)?.[1];
    expect(reported, rebuild.out.slice(-3000)).toBeDefined();
    // The install script's first and last lines: what it builds, and what it built.
    expect(rebuild.out).toMatch(/cusim: building from source, about 2 minutes; CUDA: (yes|no — .+)/);
    expect(rebuild.out).toMatch(/cusim: built build\/Release\/cusim\.node: (CUDA kernels and the CPU backend|CPU backend only)/);
    expect(d.compiledWithCuda).toBe(reported === 'ON');
    expect(d.compiledWithCuda).toBe(cudaExpected() ?? d.compiledWithCuda);
    const ok = await sh('npx', ['--no-install', 'cusim', 'dedup', fixture, '--json', '--threshold', '0.8'], fromSource, 120_000);
    expect(ok.status, ok.out).toBe(0);
    expect(JSON.parse(ok.stdout).groups).toHaveLength(PLANTED.length);
  }, 1_800_000);
});
