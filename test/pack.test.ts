// The published artifact: `npm pack` → install the tarball into a fresh
// project offline with --ignore-scripts (npm 11's default for dependencies:
// no compile step runs) → `npx cusim dedup` works there from the prebuild.
//
// The tarball must carry prebuilds/linux-x64/*.node. When the checkout has no
// prebuilds/ (the lead commits a CUDA-enabled one built on the GPU host), this
// test packs the locally built addon (build/Release) as the prebuild.
// All of it happens in a staging copy under the OS temp dir, so the
// checkout's build/ and prebuilds/ are never touched while other test files
// load the addon.
import { beforeAll, describe, expect, it } from 'vitest';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { spawn, spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fixture, root } from './cli-helpers.js';

const PLANTED = [
  ['app/server.py', 'backup/server_old.py'],
  ['lib/util.js', 'vendor/lib/util.js', 'vendor/util-fork.js'],
];
const platformDir = `${process.platform}-${process.arch}`;

interface Ran {
  status: number | null;
  out: string;
  stdout: string;
  stderr: string;
}

// Asynchronous on purpose: a minute-long spawnSync would block the test
// worker's event loop and time out vitest's own RPC.
function sh(cmd: string, args: string[], cwd: string, timeout = 540_000): Promise<Ran> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd, timeout, env: { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false' } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', (e) => resolve({ status: null, out: String(e), stdout, stderr: String(e) }));
    child.on('close', (status) => resolve({ status, out: stdout + stderr, stdout, stderr }));
  });
}

const npmWorks = spawnSync('npm', ['--version'], { cwd: root, timeout: 30_000 }).status === 0;
// Packing needs npm and a compiled dist/ (or tsc to make it).
const whyNoPack = !npmWorks ? 'npm is not on PATH' : undefined;

describe.skipIf(!!whyNoPack)(`npm pack → offline install → npx cusim${whyNoPack ? ` (skipped: ${whyNoPack})` : ''}`, () => {
  const work = mkdtempSync(path.join(tmpdir(), 'cusim-pack-'));
  const stage = path.join(work, 'stage');
  const proj = path.join(work, 'project');
  let tarball = '';
  let madePrebuild = false;
  let installSkip: string | undefined;

  beforeAll(async () => {
    const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
    mkdirSync(stage);
    // dist/ is compiled fresh in the stage (the checkout's may hold stale files).
    for (const f of ['package.json', 'tsconfig.json', 'scripts', ...pkg.files]) {
      const rel = f.replace(/\/$/, '');
      const src = path.join(root, rel);
      if (rel !== 'dist' && existsSync(src)) cpSync(src, path.join(stage, rel), { recursive: true });
    }
    // tsc and node-gyp (node-addon-api's headers) come from the checkout's node_modules.
    symlinkSync(path.join(root, 'node_modules'), path.join(stage, 'node_modules'), 'dir');
    const ts = await sh('npm', ['run', 'build:ts'], stage);
    if (ts.status !== 0) throw new Error(`npm run build:ts failed in the stage:\n${ts.out.slice(-3000)}`);
    const prebuilt = path.join(stage, 'prebuilds', platformDir);
    if (!existsSync(prebuilt) || !readdirSync(prebuilt).some((f) => f.endsWith('.node'))) {
      // The addon this suite already runs stands in for the prebuild: building
      // the real one (npm run prebuild) needs nvcc and cuRAND's headers.
      const built = path.join(root, 'build', 'Release', 'cusim.node');
      if (!existsSync(built)) throw new Error(`no prebuild and no local build at ${built}; run npm run build first`);
      mkdirSync(prebuilt, { recursive: true });
      cpSync(built, path.join(prebuilt, 'cusim.node'));
      madePrebuild = true;
    }
    // dist/ is built; --ignore-scripts skips `prepare` rebuilding it.
    const p = await sh('npm', ['pack', '--ignore-scripts', '--pack-destination', work], stage);
    if (p.status !== 0) throw new Error(`npm pack failed:\n${p.out.slice(-3000)}`);
    tarball = path.join(work, readdirSync(work).find((f) => f.endsWith('.tgz'))!);

    mkdirSync(proj);
    writeFileSync(path.join(proj, 'package.json'), JSON.stringify({ name: 'fresh', version: '1.0.0', private: true }));
    const i = await sh('npm', ['install', '--offline', '--ignore-scripts', '--no-audit', '--no-fund', tarball], proj);
    if (i.status !== 0) {
      // Offline install resolves the dependencies from npm's cache only.
      if (/ENOTCACHED/.test(i.out)) installSkip = `npm's cache lacks a dependency and the test runs offline: ${i.out.match(/.*ENOTCACHED.*/)?.[0]}`;
      else throw new Error(`npm install of the tarball failed:\n${i.out.slice(-3000)}`);
    }
  }, 600_000);

  it('the tarball holds the CLI, the compiled library and a linux-x64 prebuild', async () => {
    const list = (await sh('tar', ['-tzf', tarball], work)).out.split('\n');
    expect(list).toContain('package/bin/cusim');
    expect(list).toContain('package/dist/index.js');
    expect(list).toContain('package/dist/cli/main.js');
    // Only compiled sources: every dist/*.js has its lib/*.ts.
    for (const f of list.filter((x) => /^package\/dist\/.*\.js$/.test(x) && !x.includes('/cjs/'))) {
      expect(list, f).toContain(f.replace('package/dist/', 'package/lib/').replace(/\.js$/, '.ts'));
    }
    expect(list.some((f) => f.startsWith(`package/prebuilds/${platformDir}/`) && f.endsWith('.node'))).toBe(true);
    expect(list.some((f) => f.startsWith('package/build/'))).toBe(false);
    const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
    expect(pkg.bin).toEqual({ cusim: 'bin/cusim' });
    expect(pkg.files).toEqual(expect.arrayContaining(['bin/', 'prebuilds/', 'dist/']));
    if (madePrebuild) console.log('pack test: packed the local build as the prebuild (the checkout has none)');
  });

  it('npx cusim dedup --json finds the planted groups from the installed tarball, without compiling', async (ctx) => {
    if (installSkip) ctx.skip(installSkip);
    const installed = path.join(proj, 'node_modules', 'cusim');
    expect(existsSync(path.join(installed, 'build'))).toBe(false); // --ignore-scripts: nothing was compiled
    const r = await sh('npx', ['--no-install', 'cusim', 'dedup', fixture, '--json', '--threshold', '0.8'], proj, 120_000);
    expect(r.status, r.out).toBe(0);
    const rep = JSON.parse(r.stdout);
    expect(rep.schema).toBe('cusim.dedup/1');
    const rel = (id: string): string => path.relative(fixture, id).split(path.sep).join('/');
    expect(rep.groups.map((g: { members: { id: string }[] }) => g.members.map((m) => rel(m.id)))).toEqual(PLANTED);
    expect(r.stderr).toMatch(/cusim: backend (cpu|cuda)/);
  });
});
