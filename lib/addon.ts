// Loads the native addon once, from the first place that has one:
//  1. build/Release/cusim.node in this package: a checkout's build
//     (`npm run build`), or an installed package built from source
//     (`npm rebuild cusim` once its install script is approved);
//  2. the platform package for this host, an optional dependency of the
//     published package: cusim-linux-x64-gnu (CUDA + CPU) or
//     cusim-linux-arm64-gnu (CPU), glibc >= 2.28 both.
// A platform package's binary is checked against the size and SHA-256 its
// package.json records before it is loaded (lib/addon-check.ts): a truncated
// file would kill Node with SIGBUS instead of failing to load. A local build
// has no record and is loaded as it is: it was built on this machine.
// When none loads, the error says whether no binary matched this host, one
// is damaged, or one matched and failed to load (with the loader's own
// message), and lists the fixes that apply here.
import { constants } from 'node:buffer';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { familySync, versionSync } from 'detect-libc';
import { binaryDamage } from './addon-check.js';
import type { Addon } from './native-types.js';

const require = createRequire(import.meta.url);

/** Package root: this file lives in lib/ (sources) or dist/ (compiled). */
export const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The oldest glibc the published binaries load on (scripts/glibc-stubs.mjs). */
export const GLIBC_FLOOR = '2.28';

/** Published platform packages, by `${platform}-${arch}-${libc}`. */
export const PLATFORM_PACKAGES: Readonly<Record<string, string>> = {
  'linux-x64-gnu': 'cusim-linux-x64-gnu',
  'linux-arm64-gnu': 'cusim-linux-arm64-gnu',
};

/** The host as the loader sees it. */
export interface Host {
  platform: string;
  arch: string;
  /** 'glibc' or 'musl' on Linux; null elsewhere or when unknown. */
  libc: string | null;
  glibcVersion: string | null;
}

export function currentHost(): Host {
  const linux = process.platform === 'linux';
  const libc = linux ? familySync() : null;
  return { platform: process.platform, arch: process.arch, libc, glibcVersion: libc === 'glibc' ? versionSync() : null };
}

/** The platform package that serves `host`, if cusim publishes one. */
export function platformPackage(host: Host): string | undefined {
  if (host.platform !== 'linux' || host.libc !== 'glibc') return undefined;
  return PLATFORM_PACKAGES[`linux-${host.arch}-gnu`];
}

/** What loadAddon needs from the outside world (injected by the tests). */
export interface LoaderEnv {
  host: Host;
  /** This package's root and version. */
  root: string;
  version: string;
  exists(file: string): boolean;
  /** The file `request` resolves to, or undefined when it does not resolve. */
  resolve(request: string): string | undefined;
  /** Why a platform package's binary must not be loaded, or undefined when it matches its record. */
  check(file: string): string | undefined;
  load(file: string): Addon;
}

interface Attempt {
  what: string;
  file: string;
  error: Error;
  /** The binary failed its check and was not loaded. */
  damaged?: boolean;
}

/** The commands that replace a damaged platform package `pkg` installed at `file`. */
function reinstall(pkg: string, file: string): string {
  const dir = path.dirname(file);
  const modules = path.dirname(dir);
  return path.basename(modules) === 'node_modules' && path.basename(dir) === pkg
    ? `cd ${path.dirname(modules)} && rm -rf node_modules/${pkg} && npm install`
    : `rm -rf ${dir} && npm install (in your project)`;
}

function hostName(host: Host): string {
  const libc = host.libc === 'glibc' && host.glibcVersion ? ` (glibc ${host.glibcVersion})` : host.libc === 'musl' ? ' (musl)' : '';
  return `${host.platform}-${host.arch}${libc}`;
}

function olderThan(version: string, floor: string): boolean {
  const a = version.split('.').map(Number);
  const b = floor.split('.').map(Number);
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) < (b[i] ?? 0);
  }
  return false;
}

const BUILD_FROM_SOURCE =
  "Build from source (a C++17 compiler and CMake >= 3.18; CUDA kernels too where nvcc and cuRAND's headers are found): " +
  'npm install-scripts approve cusim && npm rebuild cusim';

/** The error loadAddon throws when no candidate loaded. */
export function addonError(env: LoaderEnv, attempts: Attempt[]): Error & { code: string } {
  const { host } = env;
  const pkg = platformPackage(host);
  const local = path.join(env.root, 'build', 'Release', 'cusim.node');
  const checkout = !env.root.split(/[\\/]/).includes('node_modules');
  const fixes: string[] = [];
  let message: string;
  let code: string;
  if (attempts.length === 0) {
    code = 'CUSIM_ADDON_NOT_FOUND';
    if (checkout) {
      message = `No native addon for ${hostName(host)}: this checkout has no build (${local})${pkg ? ` and the platform package ${pkg} is not installed` : ''}.`;
      fixes.push("Build it: npm run build (CUDA kernels too where nvcc and cuRAND's headers are found)");
    } else if (pkg) {
      message = `No native addon for ${hostName(host)}: the platform package ${pkg} is not installed, and cusim was not built from source (no ${local}).`;
      fixes.push(
        `Install the prebuilt binary: npm install ${pkg}@${env.version} ` +
          '(npm leaves it out under --omit=optional, and a lockfile written on another platform may lack it)',
      );
      fixes.push(BUILD_FROM_SOURCE);
    } else {
      const published = Object.keys(PLATFORM_PACKAGES)
        .map((k) => k.replace(/-gnu$/, ''))
        .join(' and ');
      message =
        `No native addon for ${hostName(host)}: cusim publishes binaries for ${published} with glibc >= ${GLIBC_FLOOR} only, ` +
        `and it was not built from source here (no ${local}).`;
      fixes.push(BUILD_FROM_SOURCE);
    }
  } else if (attempts.some((a) => a.damaged)) {
    code = 'CUSIM_ADDON_DAMAGED';
    const bad = attempts.filter((a) => a.damaged);
    message =
      `The native addon for ${hostName(host)} is damaged, so it was not loaded:\n` +
      attempts.map((a) => `- ${a.what} (${a.file}): ${a.error.message.trim()}`).join('\n');
    for (const a of bad) if (pkg) fixes.push(`Reinstall ${pkg}: ${reinstall(pkg, a.file)}`);
  } else {
    code = 'CUSIM_ADDON_LOAD_FAILED';
    message =
      `The native addon for ${hostName(host)} was found but failed to load:\n` +
      attempts.map((a) => `- ${a.what} (${a.file}): ${a.error.message.trim()}`).join('\n');
    if (host.glibcVersion && olderThan(host.glibcVersion, GLIBC_FLOOR)) {
      message += `\nThis host's glibc ${host.glibcVersion} is older than ${GLIBC_FLOOR}, the oldest cusim's binaries load on.`;
    }
    if (attempts.some((a) => a.file === local)) {
      fixes.push(checkout ? 'Rebuild it: npm run build' : 'Rebuild it: npm rebuild cusim');
    }
    if (pkg && attempts.some((a) => a.file !== local)) {
      fixes.push(
        `Reinstall the prebuilt binary (a truncated download or a copy from another machine fails this way): npm install ${pkg}@${env.version}`,
      );
    }
    if (!checkout) fixes.push(BUILD_FROM_SOURCE);
  }
  const err = new Error(`${message}\nPossible solutions:\n${fixes.map((f) => `- ${f}`).join('\n')}`) as Error & { code: string };
  err.code = code;
  if (attempts.length > 0) err.cause = attempts[0].error;
  return err;
}

/** The first candidate that loads: the local build, then the platform package. */
export function loadAddon(env: LoaderEnv): Addon {
  const attempts: Attempt[] = [];
  const candidates: { what: string; file: string | undefined }[] = [];
  const local = path.join(env.root, 'build', 'Release', 'cusim.node');
  candidates.push({ what: 'local build', file: env.exists(local) ? local : undefined });
  const pkg = platformPackage(env.host);
  if (pkg) candidates.push({ what: `platform package ${pkg}`, file: env.resolve(`${pkg}/cusim.node`) });
  for (const c of candidates) {
    if (!c.file) continue;
    const damage = c.file === local ? undefined : env.check(c.file);
    if (damage) {
      attempts.push({ what: c.what, file: c.file, error: new Error(damage), damaged: true });
      continue;
    }
    try {
      return env.load(c.file);
    } catch (e) {
      attempts.push({ what: c.what, file: c.file, error: e instanceof Error ? e : new Error(String(e)) });
    }
  }
  throw addonError(env, attempts);
}

function packageVersion(): string {
  try {
    return (JSON.parse(readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'latest';
  }
}

/** Elements one typed array can hold, and bytes Node wraps as external memory (2^32 on Node 20). */
export const MAX_TYPED_LENGTH: number = constants.MAX_LENGTH;

let cached: Addon | undefined;
let loadError: Error | undefined;

export function native(): Addon {
  if (cached) return cached;
  if (loadError) throw loadError;
  try {
    const n = loadAddon({
      host: currentHost(),
      root: packageRoot,
      version: packageVersion(),
      exists: existsSync,
      resolve: (request) => {
        try {
          return require.resolve(request);
        } catch {
          return undefined;
        }
      },
      check: binaryDamage,
      load: (file) => require(file) as Addon,
    });
    // Results above this many bytes cannot wrap native memory (see napi_util.h).
    n.setMaxTypedLength?.(MAX_TYPED_LENGTH);
    cached = n;
    return cached;
  } catch (e) {
    loadError = e as Error;
    throw e;
  }
}
