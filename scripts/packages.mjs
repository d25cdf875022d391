// The npm packages cusim publishes, as sharp (@img/sharp-*) and esbuild do:
// the main package, which lists one platform package per supported host as
// an optional dependency, and the platform packages, each holding one
// cusim.node with the os/cpu/libc fields that make npm install only the one
// matching the host. Used by scripts/build-binaries.mjs and test/pack.test.ts.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  cpSync,
  createReadStream,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** Where `npm run build:binaries` writes the packages (git-ignored). */
export const PACKAGES_DIR = path.join(root, 'build-packages');

/** Platform packages by Node's process.arch (Linux, glibc). */
export const PLATFORMS = {
  x64: { name: 'cusim-linux-x64-gnu', cpu: 'x64', what: 'CUDA kernels (sm_75 to sm_120) and the CPU backend' },
  arm64: { name: 'cusim-linux-arm64-gnu', cpu: 'arm64', what: 'the CPU backend' },
};

export function mainManifest() {
  return JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
}

function run(cmd, args, cwd) {
  const r = spawnSync(cmd, args, {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' },
  });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed in ${cwd}:\n${`${r.stdout}${r.stderr}`.slice(-3000)}`);
  return r.stdout;
}

/** `npm pack` of `dir` into `outDir`; returns the tarball's path. */
function pack(dir, outDir) {
  const out = run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', outDir], dir);
  return path.join(outDir, JSON.parse(out)[0].filename);
}

/** Size and SHA-256 of `file`, read as a stream. */
async function digest(file) {
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of createReadStream(file)) {
    hash.update(chunk);
    size += chunk.length;
  }
  return { size, sha256: hash.digest('hex') };
}

/** Libraries compiled into the binary, and where their license texts go in a platform package. */
const THIRD_PARTY = [
  { from: 'build-simdjson/LICENSE', to: 'LICENSE.simdjson', what: 'simdjson (Apache-2.0) is compiled in' },
  {
    from: 'build-libcsv/LICENSE',
    to: 'LICENSE.libcsv',
    what:
      "libcsv (LGPL-2.1-or-later) is compiled in, from Debian's source package; cusim's complete source and " +
      "scripts/libcsv-source.mjs, which fetches libcsv's, let you rebuild the binary with a modified libcsv",
  },
];

/**
 * Writes outDir/<name>/ (package.json, cusim.node, LICENSE, README.md) for
 * `binary` built for `arch`; the package.json records the binary's size and
 * SHA-256, which the loader checks before loading it (lib/addon-check.ts).
 * Returns the folder.
 */
export async function writePlatformDir({ arch, binary, outDir, version = mainManifest().version }) {
  const p = PLATFORMS[arch];
  if (!p) throw new Error(`no platform package for ${arch}`);
  const main = mainManifest();
  const dir = path.join(outDir, p.name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  copyFileSync(binary, path.join(dir, 'cusim.node'));
  copyFileSync(path.join(root, 'LICENSE'), path.join(dir, 'LICENSE'));
  // The libraries compiled into the binary from Debian's source packages ship
  // their license texts with it (libcsv is LGPL-2.1+: see the README).
  const notices = THIRD_PARTY.filter((t) => existsSync(path.join(root, t.from)));
  for (const t of notices) copyFileSync(path.join(root, t.from), path.join(dir, t.to));
  const manifest = {
    name: p.name,
    version,
    description: `cusim's native addon for Linux ${p.cpu} (glibc >= 2.28): ${p.what}.`,
    license: main.license,
    os: ['linux'],
    cpu: [p.cpu],
    libc: ['glibc'],
    files: ['cusim.node', 'LICENSE', ...notices.map((t) => t.to), 'README.md'],
    engines: main.engines,
    cusimBinary: { file: 'cusim.node', ...(await digest(path.join(dir, 'cusim.node'))) },
  };
  writeFileSync(path.join(dir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  writeFileSync(
    path.join(dir, 'README.md'),
    `# ${p.name}\n\nThe prebuilt native addon of cusim for Linux ${p.cpu} with glibc >= 2.28: ${p.what}.\n` +
      'Install `cusim`, which depends on this package where it applies; it is not meant to be used on its own.\n' +
      notices.map((t) => `\n${t.what}: see ${t.to}.\n`).join(''),
  );
  return dir;
}

/** writePlatformDir, then packs the folder; returns { dir, tarball }. */
export async function writePlatformPackage(o) {
  const dir = await writePlatformDir(o);
  return { dir, tarball: pack(dir, o.outDir) };
}

/**
 * Packs the main package into outDir from a staging copy of this checkout
 * (dist/ compiled afresh), with every platform package as an optional
 * dependency at `version`. Returns the tarball's path.
 */
export function packMain({ outDir, stageDir, version = mainManifest().version }) {
  const main = mainManifest();
  rmSync(stageDir, { recursive: true, force: true });
  mkdirSync(stageDir, { recursive: true });
  for (const f of ['package.json', 'tsconfig.json', 'scripts', ...main.files]) {
    const rel = f.replace(/\/$/, '');
    const src = path.join(root, rel);
    if (rel !== 'dist' && existsSync(src)) cpSync(src, path.join(stageDir, rel), { recursive: true });
  }
  // tsc comes from the checkout's node_modules.
  symlinkSync(path.join(root, 'node_modules'), path.join(stageDir, 'node_modules'), 'dir');
  run('npm', ['run', 'build:ts'], stageDir);
  const manifest = { ...main, version };
  // Only the published package lists them: they are published beside it,
  // and the checkout's own `npm ci` must not look for them on the registry.
  manifest.optionalDependencies = Object.fromEntries(Object.values(PLATFORMS).map((p) => [p.name, version]));
  // An installed copy has dist/ and no TypeScript: `prepare` would run tsc on
  // every `npm install` of it from git or a folder, and fail. `prepack`
  // compiles only where a tarball is made.
  const { prepare, ...scripts } = manifest.scripts;
  manifest.scripts = { ...scripts, prepack: prepare };
  writeFileSync(path.join(stageDir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  rmSync(path.join(stageDir, 'node_modules'));
  mkdirSync(outDir, { recursive: true });
  return pack(stageDir, outDir);
}

/** Tarballs already in outDir, by package name (newest version wins). */
export function tarballs(outDir) {
  /** @type {Record<string, string>} */
  const found = {};
  if (!existsSync(outDir)) return found;
  for (const f of readdirSync(outDir).sort()) {
    const m = /^(cusim(?:-linux-[a-z0-9]+-gnu)?)-(\d+\.\d+\.\d+.*)\.tgz$/.exec(f);
    if (m) found[m[1]] = path.join(outDir, f);
  }
  return found;
}
