// `npm test` runs against the addon built from these sources, never a stale
// build or a prebuild: rebuild (cmake-js, which detects CUDA) when the addon
// is missing or older than any native/ or cuda/ source.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { fetchLibcsv, LIBCSV_DIR } from './libcsv-source.mjs';
import { fetchSimdjson, SIMDJSON_DIR } from './simdjson-source.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const addon = path.join(root, 'build', 'Release', 'cusim.node');
// simdjson for the native JSONL reader (kept in build-simdjson/ once fetched; never fatal).
try {
  fetchSimdjson();
} catch (e) {
  console.error(`cusim: simdjson not available (${e.message}); the addon builds without the native JSONL reader`);
}
// libcsv for the native CSV reader (build-libcsv/; never fatal).
try {
  fetchLibcsv();
} catch (e) {
  console.error(`cusim: libcsv not available (${e.message}); the addon builds without the native CSV reader`);
}
const simdjson = path.join(SIMDJSON_DIR, 'simdjson.cpp');
const libcsv = path.join(LIBCSV_DIR, 'libcsv.c');
const sources = ['native', 'cuda']
  .flatMap((d) => readdirSync(path.join(root, d), { recursive: true, encoding: 'utf8' }).map((f) => path.join(root, d, f)))
  .concat(
    [path.join(root, 'CMakeLists.txt')],
    [simdjson, libcsv].filter((f) => existsSync(f)),
  );
const newest = Math.max(...sources.map((f) => statSync(f).mtimeMs));
if (existsSync(addon) && statSync(addon).mtimeMs >= newest) process.exit(0);
console.error('cusim: building the addon from source (cmake-js; CUDA kernels only where nvcc and cuRAND headers exist)');
const r = spawnSync('npx', ['cmake-js', 'compile'], { cwd: root, stdio: 'inherit' });
process.exit(r.status ?? 1);
