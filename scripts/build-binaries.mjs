// `npm run build:binaries`: the binaries cusim publishes, as npm packages in
// build-packages/ (git-ignored):
//   cusim-linux-x64-gnu    CUDA kernels (SASS sm_75..sm_120, PTX 120) + CPU
//   cusim-linux-arm64-gnu  CPU (cross-compiled with Debian's aarch64 toolchain)
//   cusim                  the main package, listing both as optional dependencies
// each as a folder and a tarball. Every binary links against glibc 2.28's
// symbol set (scripts/glibc-stubs.mjs), keeps libstdc++ inside and exports
// only the Node-API entry points; the script refuses to write one that breaks
// these rules (scripts/elf-symbols.mjs) or does not load.
//
// Needs cmake, g++, binutils, apt-get (Debian 11's libc6 symbol tables, fetched
// once into build-glibc/), and per target: x64 CUDA: nvcc and cuRAND's device
// headers ($CUSIM_CURAND_INCLUDE, .cuda-include/ or the toolkit's include/);
// arm64: g++-aarch64-linux-gnu. No GPU is needed.
//
// Usage: node scripts/build-binaries.mjs [--cpu-only] [--arch x64|arm64]
//   --cpu-only  the x64 binary without CUDA (CI: no toolkit)
//   --arch      build one platform package only
//
// simdjson (the native JSONL reader) is compiled in from Debian's source
// package, fetched once into build-simdjson/ (scripts/simdjson-source.mjs).
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { floorViolations, neededLibraries } from './elf-symbols.mjs';
import { glibcStubs, TARGETS } from './glibc-stubs.mjs';
import { fetchLibcsv } from './libcsv-source.mjs';
import { fetchSimdjson } from './simdjson-source.mjs';
import { PACKAGES_DIR as OUT_DIR, packMain, PLATFORMS, root, writePlatformPackage } from './packages.mjs';

const require = createRequire(import.meta.url);
const CACHE_DIR = path.join(root, 'build-glibc');

function fail(message) {
  console.error(`build:binaries: ${message}`);
  process.exit(1);
}
const say = (message) => console.error(`build:binaries: ${message}`);
const runs = (cmd, args) => spawnSync(cmd, args, { stdio: 'ignore' }).status === 0;

const { values: opts } = parseArgs({
  options: { 'cpu-only': { type: 'boolean', default: false }, arch: { type: 'string', multiple: true } },
});
const arches = opts.arch ?? ['x64', 'arm64'];
for (const a of arches) if (!PLATFORMS[a]) fail(`--arch ${a}: expected x64 or arm64`);
if (process.platform !== 'linux' || process.arch !== 'x64') fail(`run this on linux-x64 (this is ${process.platform}-${process.arch})`);
if (!runs('cmake', ['--version'])) fail('cmake not found; install cmake >= 3.18');
if (!runs('readelf', ['--version'])) fail('readelf (binutils) not found; install binutils');

// cuRAND's device headers, as CMake looks for them, for a clear early error.
function curandInclude() {
  const nvcc = process.env.CUDACXX || 'nvcc';
  if (!runs(nvcc, ['--version'])) {
    fail(
      `nvcc not found (${process.env.CUDACXX ? `CUDACXX=${nvcc}` : 'not on PATH'}); install the CUDA toolkit, set CUDACXX, or pass --cpu-only`,
    );
  }
  const has = (dir) => Boolean(dir) && existsSync(path.join(dir, 'curand_kernel.h'));
  const fromEnv = process.env.CUSIM_CURAND_INCLUDE;
  if (fromEnv) return has(fromEnv) ? fromEnv : fail(`CUSIM_CURAND_INCLUDE=${fromEnv} has no curand_kernel.h`);
  if (has(path.join(root, '.cuda-include'))) return path.join(root, '.cuda-include');
  // /usr/local/bin/nvcc may be a wrapper script: ask nvcc where it lives.
  const dry = spawnSync(nvcc, ['--dryrun', '-x', 'cu', '-c', '/dev/null', '-o', '/dev/null'], { encoding: 'utf8' });
  const here = /#\$ _HERE_=(\S+)/.exec(`${dry.stdout ?? ''}${dry.stderr ?? ''}`)?.[1];
  const found = here && ['include', 'targets/x86_64-linux/include'].map((d) => path.resolve(here, '..', d)).find(has);
  return (
    found ||
    fail(
      "cuRAND's curand_kernel.h not found (CUSIM_CURAND_INCLUDE, .cuda-include/, the toolkit); set CUSIM_CURAND_INCLUDE or pass --cpu-only",
    )
  );
}

const cmakeJs = path.join(path.dirname(require.resolve('cmake-js/package.json')), 'bin', 'cmake-js');

function build(arch) {
  const cuda = arch === 'x64' && !opts['cpu-only'];
  const t = TARGETS[arch];
  if (!runs(t.cc, ['--version'])) fail(`${t.cc} not found; install ${arch === 'arm64' ? 'g++-aarch64-linux-gnu' : 'g++'}`);
  say(`${arch}: glibc 2.28 stand-ins`);
  const stubs = glibcStubs(arch, CACHE_DIR);
  const out = path.join(root, `build-${arch}${cuda ? '-cuda' : ''}`);
  const args = [cmakeJs, 'compile', '--out', out, `--CDCUSIM_GLIBC_STUBS=${stubs}`, `--CDCUSIM_CUDA=${cuda ? 'on' : 'off'}`];
  if (arch === 'arm64') args.push(`--CDCMAKE_TOOLCHAIN_FILE=${path.join(root, 'scripts', 'toolchain-linux-arm64.cmake')}`);
  const env = { ...process.env };
  // The architectures of a shipped binary are CMake's release list.
  delete env.CUSIM_CUDA_ARCHITECTURES;
  if (cuda) env.CUSIM_CURAND_INCLUDE = curandInclude();
  say(`${arch}: cmake-js ${cuda ? 'with CUDA' : 'CPU only'} into ${path.relative(root, out)}/`);
  const r = spawnSync(process.execPath, args, { cwd: root, env, stdio: 'inherit' });
  if (r.status !== 0) fail(`${arch}: cmake-js failed (exit ${r.status ?? r.signal}); see the output above`);
  const built = path.join(out, 'Release', 'cusim.node');
  const stripped = path.join(out, 'cusim.node');
  const strip = arch === 'arm64' ? 'aarch64-linux-gnu-strip' : 'strip';
  if (!runs(strip, ['--strip-unneeded', '-o', stripped, built])) fail(`${strip} --strip-unneeded failed on ${built}`);
  const problems = floorViolations(stripped);
  if (problems.length) fail(`${arch}: ${stripped} breaks the binary rules:\n  ${problems.join('\n  ')}`);
  if (arch === 'x64') {
    // It must load here and report CUDA compiled in or not, as built (a GPU is optional).
    const check = spawnSync(
      process.execPath,
      [
        '-e',
        `const a = require(${JSON.stringify(stripped)}); console.log(JSON.stringify({ ...a.devices(), recordReader: a.recordReader, tableReader: a.tableReader }))`,
      ],
      {
        encoding: 'utf8',
      },
    );
    if (check.status !== 0) fail(`${stripped} does not load: ${(check.stderr || '').trim()}`);
    const d = JSON.parse(check.stdout);
    if (d.compiledWithCuda !== cuda) fail(`${stripped}: compiledWithCuda is ${d.compiledWithCuda}, expected ${cuda}`);
    if (!d.recordReader) fail(`${stripped}: no native record reader (simdjson) compiled in`);
    if (!d.tableReader) fail(`${stripped}: no native CSV reader (libcsv) compiled in`);
    say(`${arch}: devices() ${check.stdout.trim()}`);
  }
  say(`${arch}: needs ${neededLibraries(stripped).join(', ')}; ${(statSync(stripped).size / 2 ** 20).toFixed(1)} MiB`);
  return stripped;
}

// The native JSONL reader: simdjson compiled in from Debian's source package (a shipped binary needs no libsimdjson).
try {
  say(`simdjson in ${path.relative(root, fetchSimdjson())}/`);
} catch (e) {
  fail(`simdjson, which the binaries compile in, is not available: ${e.message}`);
}
// The native CSV reader: libcsv compiled in from Debian's source package (LGPL-2.1+; see the README's notices).
try {
  say(`libcsv in ${path.relative(root, fetchLibcsv())}/`);
} catch (e) {
  fail(`libcsv, which the binaries compile in, is not available: ${e.message}`);
}
mkdirSync(OUT_DIR, { recursive: true });
for (const arch of arches) {
  const binary = build(arch);
  const { dir, tarball } = await writePlatformPackage({ arch, binary, outDir: OUT_DIR });
  say(`wrote ${path.relative(root, dir)}/ and ${path.relative(root, tarball)}`);
}
const main = packMain({ outDir: OUT_DIR, stageDir: path.join(OUT_DIR, '.stage') });
say(`wrote ${path.relative(root, main)}`);
