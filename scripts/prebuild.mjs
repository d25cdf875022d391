// `npm run prebuild`: the CUDA-enabled linux-x64 prebuild that ships in the
// package (prebuilds/linux-x64/node.napi.node), built the way the committed
// one is: cmake-js with CUSIM_CUDA=on for sm_80/86/89 (SASS) + sm_90 (SASS and
// PTX), in build-prebuild/, then stripped. nvcc and cuRAND's device headers
// are required; no GPU is. Build on the oldest glibc you support (README).
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const ARCHS = '80-real;86-real;89-real;90';
const OUT_DIR = path.join(root, 'build-prebuild');
const TARGET = path.join(root, 'prebuilds', 'linux-x64', 'node.napi.node');

function fail(message) {
  console.error(`prebuild: ${message}`);
  process.exit(1);
}

const runs = (cmd, args) => spawnSync(cmd, args, { stdio: 'ignore' }).status === 0;

if (process.platform !== 'linux' || process.arch !== 'x64') {
  fail(`this makes the linux-x64 prebuild, but this is ${process.platform}-${process.arch}; run it on linux-x64`);
}

// nvcc the way CMake's check_language(CUDA) finds it: $CUDACXX, else PATH.
const nvcc = process.env.CUDACXX || 'nvcc';
if (!runs(nvcc, ['--version'])) {
  fail(`nvcc not found (${process.env.CUDACXX ? `CUDACXX=${nvcc}` : 'not on PATH'}); install the CUDA toolkit or set CUDACXX`);
}

// cuRAND's device headers: $CUSIM_CURAND_INCLUDE, else .cuda-include/, else the toolkit's own include dir.
const hasCurand = (dir) => Boolean(dir) && existsSync(path.join(dir, 'curand_kernel.h'));
const fromEnv = process.env.CUSIM_CURAND_INCLUDE;
if (fromEnv && !hasCurand(fromEnv)) fail(`CUSIM_CURAND_INCLUDE=${fromEnv} has no curand_kernel.h`);
let curand = fromEnv;
if (!curand && hasCurand(path.join(root, '.cuda-include'))) curand = path.join(root, '.cuda-include');
if (!curand) {
  const which = spawnSync('sh', ['-c', `command -v "${nvcc}"`], { encoding: 'utf8' }).stdout.trim();
  const real = which ? spawnSync('readlink', ['-f', which], { encoding: 'utf8' }).stdout.trim() : '';
  // /usr/local/bin/nvcc may be a wrapper script: ask nvcc where it lives.
  const dryrun = spawnSync(nvcc, ['--dryrun', '-x', 'cu', '-c', '/dev/null', '-o', '/dev/null'], { encoding: 'utf8' });
  const here = /#\$ _HERE_=(\S+)/.exec(`${dryrun.stdout ?? ''}${dryrun.stderr ?? ''}`)?.[1];
  const toolkits = [here && path.resolve(here, '..'), real && path.resolve(path.dirname(real), '..')].filter(Boolean);
  curand = toolkits.flatMap((t) => [path.join(t, 'include'), path.join(t, 'targets', 'x86_64-linux', 'include')]).find(hasCurand);
}
if (!curand) {
  fail("cuRAND's curand_kernel.h not found (not in CUSIM_CURAND_INCLUDE, .cuda-include/ or the CUDA toolkit); set CUSIM_CURAND_INCLUDE to a folder that has it");
}
if (!runs('strip', ['--version'])) fail('strip (binutils) not found; install binutils');

const cmakeJs = path.join(path.dirname(require.resolve('cmake-js/package.json')), 'bin', 'cmake-js');
console.error(`prebuild: cmake-js, CUDA on (archs ${ARCHS}, cuRAND headers in ${curand}) into ${path.relative(root, OUT_DIR)}/`);
const env = { ...process.env, CUSIM_CUDA: 'on', CUSIM_CUDA_ARCHITECTURES: ARCHS, CUSIM_CURAND_INCLUDE: curand };
const build = spawnSync(
  process.execPath,
  [cmakeJs, "compile", "--out", OUT_DIR, "--CDCUSIM_CUDA=on"],
  { cwd: root, env, stdio: 'inherit' },
);
if (build.status !== 0) fail(`cmake-js failed (exit ${build.status ?? build.signal}); see the output above`);

const built = path.join(OUT_DIR, 'Release', 'cusim.node');
if (!existsSync(built)) fail(`the build finished but ${path.relative(root, built)} is missing`);
mkdirSync(path.dirname(TARGET), { recursive: true });
if (!runs('strip', ['--strip-unneeded', '-o', TARGET, built])) fail(`strip --strip-unneeded failed on ${built}`);

// The prebuild must load here and report CUDA compiled in (a GPU is optional).
const check = spawnSync(
  process.execPath,
  ['-e', `const d = require(${JSON.stringify(TARGET)}).devices(); if (!d.compiledWithCuda) process.exit(3); console.log(JSON.stringify(d));`],
  { encoding: 'utf8' },
);
if (check.status !== 0) fail(`${path.relative(root, TARGET)} does not load with CUDA compiled in: ${(check.stderr || '').trim().split('\n')[0]}`);
const mb = (statSync(TARGET).size / 2 ** 20).toFixed(1);
console.error(`prebuild: wrote ${path.relative(root, TARGET)} (${mb} MiB); devices(): ${check.stdout.trim()}`);
