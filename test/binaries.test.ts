// The binaries cusim ships (npm run build:binaries → build-packages/): their
// versioned symbols allow glibc 2.28 and the libgcc_s of GCC 8, they need no
// system libstdc++ and export only the Node-API entry points, and they really
// load on an older glibc than this machine's: Debian 11's 2.31, run through
// its own dynamic loader (arm64 under qemu-user). The local build keeps the
// export rule too.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { compareVersions, dynamicSymbols, ENTRY_POINTS, floorViolations, neededLibraries } from '../scripts/elf-symbols.mjs';
import { bullseyeRoot } from '../scripts/glibc-stubs.mjs';
import { PACKAGES_DIR, PLATFORMS, root } from '../scripts/packages.mjs';
import { arm64Node, qemu } from './qemu.js';

const localBuild = path.join(root, 'build', 'Release', 'cusim.node');
// Libraries any glibc system has; nothing from CUDA, no libstdc++.
const ALLOWED_NEEDED = [
  'libc.so.6',
  'libm.so.6',
  'libpthread.so.0',
  'libdl.so.2',
  'librt.so.1',
  'libgcc_s.so.1',
  'ld-linux-x86-64.so.2',
  'ld-linux-aarch64.so.1',
];
const RELEASE_ARCHS = /set\(CUSIM_RELEASE_CUDA_ARCHITECTURES "([^"]+)"\)/.exec(readFileSync(path.join(root, 'CMakeLists.txt'), 'utf8'))![1];

/** Runs `node -e script` on Debian 11's glibc 2.31 for `arch`; null when that cannot run here (with why). */
function onGlibc231(arch: 'x64' | 'arm64', script: string): { status: number | null; out: string } | string {
  let deb;
  try {
    deb = bullseyeRoot(arch, path.join(root, 'build-glibc'));
  } catch (e) {
    return `Debian 11's libraries could not be fetched: ${(e as Error).message.split('\n')[0]}`;
  }
  let cmd: string[];
  if (arch === 'x64') {
    cmd = [deb.loader, '--library-path', deb.libraryPath, process.execPath, '-e', script];
  } else {
    const q = qemu();
    if (!q) return 'qemu-aarch64-static is not installed (apt-get install qemu-user-static)';
    const node = arm64Node();
    if (!node.path) return node.why;
    cmd = [q, deb.loader, '--library-path', deb.libraryPath, node.path, '-e', script];
  }
  const r = spawnSync(cmd[0], cmd.slice(1), { encoding: 'utf8', timeout: 120_000 });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

describe('binary rules', () => {
  it.skipIf(!existsSync(localBuild))('the local build exports only the Node-API entry points', () => {
    const exported = dynamicSymbols(localBuild).filter((s) => s.defined && !s.absolute && s.bind !== 'LOCAL');
    expect(exported.map((s) => s.name).sort()).toEqual([...ENTRY_POINTS].sort());
    // libstdc++ is linked in, not bound from the system's copy.
    expect(dynamicSymbols(localBuild).filter((s) => /^(GLIBCXX|CXXABI)_/.test(s.version ?? ''))).toEqual([]);
    expect(neededLibraries(localBuild)).not.toContain('libstdc++.so.6');
  });

  for (const [arch, p] of Object.entries(PLATFORMS) as ['x64' | 'arm64', (typeof PLATFORMS)['x64']][]) {
    const binary = path.join(PACKAGES_DIR, p.name, 'cusim.node');
    const why = existsSync(binary) ? undefined : `no ${path.relative(root, binary)}: run npm run build:binaries`;
    describe.skipIf(!!why)(`${p.name}${why ? ` (skipped: ${why})` : ''}`, () => {
      it('needs nothing newer than GLIBC_2.28 and GCC_7.0.0, no GLIBCXX_/CXXABI_, and exports only the entry points', () => {
        expect(floorViolations(binary)).toEqual([]);
        const versions = dynamicSymbols(binary).flatMap((s) => (s.defined || !s.version ? [] : [s.version]));
        const glibc = versions.filter((v) => v.startsWith('GLIBC_2.')).map((v) => v.slice(6));
        expect(glibc.length).toBeGreaterThan(10);
        for (const v of glibc) expect(compareVersions(v, '2.28'), v).toBeLessThanOrEqual(0);
        expect(neededLibraries(binary).filter((l) => !ALLOWED_NEEDED.includes(l))).toEqual([]);
      });

      it('the package declares its platform and holds the binary built for it', () => {
        const manifest = JSON.parse(readFileSync(path.join(PACKAGES_DIR, p.name, 'package.json'), 'utf8'));
        expect(manifest).toMatchObject({ name: p.name, os: ['linux'], cpu: [p.cpu], libc: ['glibc'] });
        expect(manifest.version).toBe(JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')).version);
        // The record the loader checks before loading (lib/addon-check.ts), against a hash of the whole file.
        const bytes = readFileSync(binary);
        expect(manifest.cusimBinary).toEqual({
          file: 'cusim.node',
          size: bytes.length,
          sha256: createHash('sha256').update(bytes).digest('hex'),
        });
        const machine = spawnSync('readelf', ['-h', binary], { encoding: 'utf8' }).stdout;
        expect(machine).toMatch(arch === 'x64' ? /Machine:\s+Advanced Micro Devices X86-64/ : /Machine:\s+AArch64/);
      });

      it("loads and reports devices on glibc 2.31 (Debian 11), where a build against this machine's glibc does not", (ctx) => {
        const script = `const d = require(${JSON.stringify(binary)}).devices(); console.log(JSON.stringify(d))`;
        const r = onGlibc231(arch, script);
        if (typeof r === 'string') return ctx.skip(r);
        expect(r.status, r.out).toBe(0);
        const d = JSON.parse(r.out.trim().split('\n').pop()!);
        expect(typeof d.cuda).toBe('boolean');
        if (arch === 'arm64') expect(d.compiledWithCuda).toBe(false);
        // The same loader rejects a binary that needs a newer glibc, so the check above can fail.
        if (arch === 'x64' && existsSync(localBuild) && floorViolations(localBuild).some((v) => /GLIBC_2\.(3[2-9]|[4-9]\d)/.test(v))) {
          const bad = onGlibc231(arch, `require(${JSON.stringify(localBuild)})`);
          if (typeof bad !== 'string') {
            expect(bad.status).not.toBe(0);
            expect(bad.out).toMatch(/GLIBC_2\.\d+' not found/);
          }
        }
      }, 180_000);

      it.skipIf(arch !== 'x64')('carries kernels for every current GPU architecture where built with CUDA', (ctx) => {
        const r = spawnSync(process.execPath, ['-e', `console.log(JSON.stringify(require(${JSON.stringify(binary)}).devices()))`], {
          encoding: 'utf8',
        });
        const d = JSON.parse(r.stdout);
        if (!d.compiledWithCuda) return ctx.skip('built CPU-only (npm run build:binaries -- --cpu-only)');
        expect(d.cudaArchitectures).toBe(RELEASE_ARCHS.replaceAll(';', ','));
        const dump = spawnSync('cuobjdump', ['--list-elf', '--list-ptx', binary], { encoding: 'utf8' });
        if (dump.status !== 0) return; // no cuobjdump here: the devices() report stands
        const sass = new Set([...dump.stdout.matchAll(/\.sm_(\d+)\.cubin/g)].map((m) => Number(m[1])));
        const ptx = new Set([...dump.stdout.matchAll(/\.sm_(\d+)\.ptx/g)].map((m) => Number(m[1])));
        expect([...sass].sort((a, b) => a - b)).toEqual([75, 80, 86, 89, 90, 100, 120]);
        expect([...ptx]).toEqual([120]);
      });
    });
  }
});
