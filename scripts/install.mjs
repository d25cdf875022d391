// The package's install script. npm 11 runs a dependency's install script
// only once the project approves it (`npm install-scripts approve cusim`,
// then `npm rebuild cusim`); a checkout's `npm install` always runs it.
//
// Nothing is built when an addon already loads here: the platform package
// (cusim-linux-x64-gnu, cusim-linux-arm64-gnu) or an earlier local build. The
// library's loader checks a platform binary's size and SHA-256 before loading
// it (lib/addon-check.ts), so this script never loads one it has not checked;
// a damaged one fails the install with the commands that replace it.
// Otherwise, or with `--build-from-source` (npm's own flag, which npm passes
// as npm_config_build_from_source), the addon is built from source with
// cmake-js into build/Release/, with CUDA kernels where nvcc and cuRAND's
// headers are found: one line before (what is built, how long it takes) and
// one after (which backend was built). Without a C++ compiler, CMake or a
// build tool the install still succeeds: it says what is missing, and the
// first call raises CUSIM_ADDON_NOT_FOUND with the fixes.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const fromSource = process.env.npm_config_build_from_source === 'true';
const say = (line) => console.error(`cusim: ${line}`);

// The library's own loader decides what would load, where it is compiled
// (an installed package; a checkout compiles it in `prepare`, after this).
// Resolves to true, or the loader's error, or undefined without a loader.
async function loads() {
  const loader = path.join(root, 'dist', 'addon.js');
  if (!existsSync(loader)) return undefined;
  try {
    const { native } = await import(loader);
    native();
    return true;
  } catch (e) {
    return e;
  }
}

const runs = (cmd, args = ['--version']) => {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  return r.status === 0 ? `${r.stdout ?? ''}${r.stderr ?? ''}` : undefined;
};

/** What a source build needs and this machine lacks. */
function missingTools() {
  const missing = [];
  try {
    require.resolve('cmake-js/package.json');
  } catch {
    missing.push('cmake-js (npm install cmake-js)');
  }
  const cxx = process.env.CXX ? [process.env.CXX] : ['c++', 'g++', 'clang++'];
  if (!cxx.some((c) => runs(c))) missing.push(`a C++17 compiler (${cxx.join(', ')}: none runs)`);
  if (!runs('cmake')) missing.push('CMake >= 3.18 (cmake: not found)');
  if (!runs('make') && !runs('ninja')) missing.push('a build tool (make or ninja: not found)');
  return missing;
}

/** Whether CMakeLists.txt will compile the CUDA kernels, and why not: the same search, in short. */
function cudaPlan() {
  if ((process.env.CUSIM_CUDA ?? '').toLowerCase() === 'off') return 'no — CUSIM_CUDA=off';
  const nvcc = process.env.CUDACXX || 'nvcc';
  if (!runs(nvcc)) return `no — nvcc not found (${process.env.CUDACXX ? `CUDACXX=${nvcc}` : 'not on PATH'})`;
  const dirs = [process.env.CUSIM_CURAND_INCLUDE].filter(Boolean);
  const here = /#\$ _HERE_=(\S+)/.exec(runs(nvcc, ['--dryrun', '-x', 'cu', '-c', '/dev/null', '-o', '/dev/null']) ?? '')?.[1];
  if (here) {
    for (const d of ['include', 'targets/x86_64-linux/include', 'targets/sbsa-linux/include']) dirs.push(path.resolve(here, '..', d));
  }
  const found = dirs.find((d) => existsSync(path.join(d, 'curand_kernel.h')));
  return found ? `yes (cuRAND headers in ${found})` : `no — cuRAND headers not found at ${dirs.join(', ') || 'the toolkit'}`;
}

const loaded = fromSource ? undefined : await loads();
if (loaded === true) process.exit(0);
if (loaded?.code === 'CUSIM_ADDON_DAMAGED') {
  say(loaded.message);
  process.exit(1);
}

const missing = missingTools();
if (missing.length > 0) {
  // The loader's first line says why no binary loads (no platform package for this host, or which failed).
  const why = loaded instanceof Error ? ` (${loaded.message.split('\n')[0].replace(/\.$/, '')})` : '';
  say(`no prebuilt binary loads here${why}, and the addon cannot be built from source: missing ${missing.join('; ')}.`);
  say(
    'cusim is installed without its native addon; its first call raises CUSIM_ADDON_NOT_FOUND with the fixes. ' +
      'To build it later, install what is missing and run: npm rebuild cusim',
  );
  process.exit(0);
}

say(`building from source, about 2 minutes; CUDA: ${cudaPlan()}`);
// simdjson for the native JSONL reader, from Debian's source package; never
// fatal: without it the addon builds with the JavaScript reader only.
try {
  const { fetchSimdjson } = await import('./simdjson-source.mjs');
  fetchSimdjson();
} catch (e) {
  say(`simdjson not available (${e.message}); building without the native JSONL reader`);
}
// libcsv for the native CSV reader, likewise (without it CSV is read by csv-parse).
try {
  const { fetchLibcsv } = await import('./libcsv-source.mjs');
  fetchLibcsv();
} catch (e) {
  say(`libcsv not available (${e.message}); building without the native CSV reader`);
}
const cmakeJs = path.join(path.dirname(require.resolve('cmake-js/package.json')), 'bin', 'cmake-js');
const build = spawnSync(process.execPath, [cmakeJs, 'compile'], { cwd: root, stdio: 'inherit' });
if (build.status !== 0) {
  say(
    `the build failed (exit ${build.status ?? build.signal}); it needs a C++17 compiler and CMake >= 3.18 ` +
      "(and, for CUDA kernels, nvcc with cuRAND's headers). See the output above.",
  );
  process.exit(1);
}
const addon = path.join(root, 'build', 'Release', 'cusim.node');
try {
  // A local build, made just now: loaded as it is (it has no recorded checksum).
  const d = require(addon).devices();
  say(
    `built ${path.relative(root, addon)}: ${d.compiledWithCuda ? 'CUDA kernels and the CPU backend' : `CPU backend only (${d.reason})`}; ` +
      `record reader ${require(addon).recordReader ?? 'JavaScript (no simdjson)'}`,
  );
} catch (e) {
  say(`built ${addon}, but it does not load: ${e.message}`);
  process.exit(1);
}
