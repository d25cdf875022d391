#!/usr/bin/env node
// clang-format (the WebAssembly build from npm, so every platform runs the
// same version) over native/ and cuda/: `--check` fails on any file that is
// not formatted (.clang-format), otherwise the files are rewritten in place.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const check = process.argv.includes('--check');
const cli = createRequire(import.meta.url).resolve('@wasm-fmt/clang-format/clang-format-cli.cjs');
const files = ['native', 'cuda'].flatMap((dir) =>
  readdirSync(path.join(root, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => /\.(cc|h|cu|cuh)$/.test(f))
    .map((f) => path.join(dir, f))
    .sort(),
);
const args = check ? ['--dry-run', '--Werror', ...files] : ['-i', ...files];
const r = spawnSync(process.execPath, [cli, ...args], { cwd: root, stdio: 'inherit' });
if (r.status !== 0) {
  if (check) console.error('clang-format: run `npm run format` to format native/ and cuda/');
  process.exit(r.status ?? 1);
}
