// The package's install script. npm 11 runs a dependency's install script
// only once the project approves it (`npm install-scripts approve cusim`,
// then `npm rebuild cusim`); a checkout's `npm install` always runs it.
//
// Nothing is built when an addon already loads here: the platform package
// (cusim-linux-x64-gnu, cusim-linux-arm64-gnu) or an earlier local build.
// Otherwise, or with `--build-from-source` (npm's own flag, which npm passes
// as npm_config_build_from_source), the addon is built from source with
// cmake-js into build/Release/, with CUDA kernels where nvcc and cuRAND's
// headers are found, and loaded once to report what was built.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const fromSource = process.env.npm_config_build_from_source === 'true';

// The library's own loader decides what would load, where it is compiled
// (an installed package; a checkout compiles it in `prepare`, after this).
async function loads() {
  const loader = path.join(root, 'dist', 'addon.js');
  if (!existsSync(loader)) return undefined;
  try {
    const { native } = await import(loader);
    native();
    return true;
  } catch {
    return false;
  }
}

if (!fromSource && (await loads())) process.exit(0);

let cmakeJs;
try {
  cmakeJs = path.join(path.dirname(require.resolve('cmake-js/package.json')), 'bin', 'cmake-js');
} catch {
  console.error('cusim: cannot build from source: cmake-js is not installed (npm install cmake-js)');
  process.exit(1);
}
// simdjson for the native JSONL reader, from Debian's source package; never
// fatal: without it the addon builds with the JavaScript reader only.
try {
  const { fetchSimdjson } = await import('./simdjson-source.mjs');
  fetchSimdjson();
} catch (e) {
  console.error(`cusim: simdjson not available (${e.message}); building without the native JSONL reader`);
}
console.error("cusim: building the native addon from source (cmake-js; CUDA kernels where nvcc and cuRAND's headers are found)");
const build = spawnSync(process.execPath, [cmakeJs, 'compile'], { cwd: root, stdio: 'inherit' });
if (build.status !== 0) {
  console.error(
    `cusim: the build failed (exit ${build.status ?? build.signal}); it needs a C++17 compiler and CMake >= 3.18 ` +
      "(and, for CUDA kernels, nvcc with cuRAND's headers). See the output above.",
  );
  process.exit(1);
}
const addon = path.join(root, 'build', 'Release', 'cusim.node');
try {
  const d = require(addon).devices();
  console.error(
    `cusim: built ${path.relative(root, addon)}: ${d.compiledWithCuda ? 'CUDA kernels and the CPU backend' : `CPU backend only (${d.reason})`}; ` +
      `record reader ${require(addon).recordReader ?? 'JavaScript (no simdjson)'}`,
  );
} catch (e) {
  console.error(`cusim: built ${addon}, but it does not load: ${e.message}`);
  process.exit(1);
}
