// Link-time stand-ins for glibc 2.28, so that binaries built on a newer
// system load on RHEL 8, Ubuntu 20.04 and every later glibc.
//
// The linker records, for each glibc symbol a binary calls, the version that
// the library it links against marks as default. Linking against the build
// machine's glibc (2.36 here) would record pthread_create@GLIBC_2.34 and
// friends. Instead each binary links against stub libraries that define every
// symbol glibc 2.28 exported, each at its newest version not above 2.28 and
// nothing newer, so a call glibc 2.28 could not resolve fails at link time
// rather than at load time on a user's machine.
//
// The symbol tables come from Debian 11's libc6 (glibc 2.31, the oldest glibc
// Debian's mirror still serves), filtered to versions <= GLIBC_2.28; 2.31
// keeps 2.28's split into libc, libm, libpthread, libdl and librt, so calls
// bind to the same libraries a 2.28 build would name. The packages are
// fetched once with apt-get into the cache folder (git-ignored), never
// installed, from the Debian archive the system's own apt sources name (so a
// proxy or a local mirror configured for apt serves this too). Symbols only newer glibc has, which GCC 12's static libstdc++ and
// headers reach for, get hidden replacements in native/compat/glibc_floor.cc.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { compareVersions, dynamicSymbols, GLIBC_FLOOR } from './elf-symbols.mjs';

export const TARGETS = {
  x64: { deb: 'amd64', triple: 'x86_64-linux-gnu', loader: 'ld-linux-x86-64.so.2', cc: 'gcc' },
  arm64: { deb: 'arm64', triple: 'aarch64-linux-gnu', loader: 'ld-linux-aarch64.so.1', cc: 'aarch64-linux-gnu-gcc' },
};
const SUITE = 'bullseye';

function run(cmd, args, options = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, ...options });
  if (r.status !== 0) {
    throw new Error(
      `${cmd} ${args.join(' ')} failed (${r.error?.message ?? `exit ${r.status}`}):\n${(r.stderr || r.stdout || '').slice(-3000)}`,
    );
  }
  return r.stdout;
}

// Debian 11's C and C++ runtime libraries: libc6 for the stubs, and with
// libstdc++6 and libgcc-s1 a root that runs Node on glibc 2.31 (the tests
// load the shipped binaries there).
const PACKAGES = ['libc6', 'libstdc++6', 'libgcc-s1'];

/**
 * The Debian archive among the system's configured apt sources: the one
 * serving this Debian release's own suite (not -updates, -security or
 * another vendor's). Every Debian mirror serves bullseye too. `apt-get
 * --print-uris update` lists each index the sources name without fetching
 * it; an empty lists folder makes it list every one.
 */
export function debianArchive() {
  const release = existsSync('/etc/os-release') ? readFileSync('/etc/os-release', 'utf8') : '';
  const codename = /^VERSION_CODENAME="?([^"\n]*)/m.exec(release)?.[1];
  if (!/^ID="?debian"?$/m.test(release) || !codename) {
    throw new Error("the Debian 11 libraries are fetched through a Debian system's apt sources; this system is not Debian");
  }
  const lists = mkdtempSync(path.join(os.tmpdir(), 'cusim-apt-lists-'));
  let uris;
  try {
    mkdirSync(path.join(lists, 'partial'));
    uris = run('apt-get', ['-q', `-oDir::State::Lists=${lists}`, '--print-uris', 'update']);
  } finally {
    rmSync(lists, { recursive: true, force: true });
  }
  for (const [, base, suite] of uris.matchAll(/^'([^']+)\/dists\/([^/']+)\/main\/binary-[^/']+\/Packages/gm)) {
    if (suite === codename) return base;
  }
  throw new Error(`no configured apt source serves Debian ${codename}'s main archive; add one to /etc/apt/sources.list.d/`);
}

function downloadDebs(cacheDir) {
  const debs = path.join(cacheDir, 'debs');
  const all = Object.values(TARGETS).flatMap((t) => PACKAGES.map((p) => [p, t.deb]));
  const have = () => (existsSync(debs) ? readdirSync(debs) : []);
  const missing = () => all.filter(([p, deb]) => !have().some((f) => f.startsWith(`${p}_`) && f.endsWith(`_${deb}.deb`)));
  if (missing().length === 0) return debs;
  // A private apt configuration: the system's sources, lists and state stay untouched.
  const apt = path.join(cacheDir, 'apt');
  for (const d of ['lists/partial', 'archives/partial']) mkdirSync(path.join(apt, d), { recursive: true });
  mkdirSync(debs, { recursive: true });
  const sources = path.join(apt, 'sources.list');
  const keyring = '/usr/share/keyrings/debian-archive-keyring.gpg';
  if (!existsSync(keyring)) throw new Error(`${keyring} is missing; install debian-archive-keyring`);
  writeFileSync(
    sources,
    `deb [arch=${Object.values(TARGETS)
      .map((t) => t.deb)
      .join(',')} signed-by=${keyring}] ${debianArchive()} ${SUITE} main\n`,
  );
  const opts = [
    `-oDir::Etc::SourceList=${sources}`,
    '-oDir::Etc::SourceParts=/dev/null',
    `-oDir::State::Lists=${path.join(apt, 'lists')}`,
    '-oDir::State::status=/dev/null',
    `-oDir::Cache=${apt}`,
    '-oAPT::Sandbox::User=root',
    ...Object.values(TARGETS).map((t) => `-oAPT::Architectures::=${t.deb}`),
  ];
  run('apt-get', ['-q', ...opts, 'update']);
  run('apt-get', ['-q', ...opts, 'download', ...missing().map(([p, deb]) => `${p}:${deb}`)], { cwd: debs });
  if (missing().length)
    throw new Error(
      `apt-get download left ${missing()
        .map((m) => m.join(':'))
        .join(', ')} missing in ${debs}`,
    );
  return debs;
}

/**
 * Debian 11's libc6, libstdc++6 and libgcc-s1 for `arch`, unpacked once:
 * { root, libDir, loader (ld-2.31.so), libraryPath } to run a program on
 * glibc 2.31 with `loader --library-path libraryPath program`.
 */
export function bullseyeRoot(arch, cacheDir) {
  const t = TARGETS[arch];
  if (!t) throw new Error(`no Debian root for ${arch}`);
  const root = path.join(cacheDir, `root-${t.deb}`);
  const libDir = path.join(root, 'lib', t.triple);
  const result = {
    root,
    libDir,
    loader: path.join(libDir, 'ld-2.31.so'),
    libraryPath: `${libDir}:${path.join(root, 'usr', 'lib', t.triple)}`,
  };
  const stamp = path.join(root, '.complete');
  if (existsSync(stamp)) return result;
  const debs = downloadDebs(cacheDir);
  rmSync(root, { recursive: true, force: true });
  for (const f of readdirSync(debs).filter((f) => f.endsWith(`_${t.deb}.deb`) && PACKAGES.some((p) => f.startsWith(`${p}_`)))) {
    run('dpkg-deb', ['-x', path.join(debs, f), root]);
  }
  writeFileSync(stamp, '');
  return result;
}

/** name -> { version, type, size, bind }: each symbol at its newest version <= the floor. */
export function floorSymbols(library) {
  const chosen = new Map();
  for (const s of dynamicSymbols(library)) {
    if (!s.defined || s.absolute || !s.version) continue;
    const m = /^GLIBC_(\d+(?:\.\d+)+)$/.exec(s.version);
    if (!m || compareVersions(m[1], GLIBC_FLOOR) > 0) continue;
    const prev = chosen.get(s.name);
    if (!prev || compareVersions(m[1], prev.version.slice(6)) > 0) chosen.set(s.name, s);
  }
  return chosen;
}

// One stub library: a symbol per name with its type and size, versioned by a
// version script. No code runs from it; it is only linked against.
function writeStub(dir, soname, symbols, cc) {
  const asm = ['.text'];
  const byVersion = new Map();
  for (const [name, s] of [...symbols].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const size = Math.max(1, s.size);
    const bind = s.bind === 'WEAK' ? '.weak' : '.globl';
    if (s.type === 'OBJECT')
      asm.push('.data', `${bind} ${name}`, `.type ${name}, %object`, `${name}: .zero ${size}`, `.size ${name}, ${size}`, '.text');
    else if (s.type === 'TLS')
      asm.push(
        '.section .tbss,"awT",%nobits',
        `${bind} ${name}`,
        `.type ${name}, %tls_object`,
        `${name}: .zero ${size}`,
        `.size ${name}, ${size}`,
        '.text',
      );
    else asm.push(`${bind} ${name}`, `.type ${name}, %function`, `${name}: .zero 1`, `.size ${name}, 1`);
    if (!byVersion.has(s.version)) byVersion.set(s.version, []);
    byVersion.get(s.version).push(name);
  }
  const versions = [...byVersion.keys()].sort((a, b) => compareVersions(a.slice(6), b.slice(6)));
  const script = versions.map(
    (v, i) =>
      `${v} {\n  global:\n${byVersion
        .get(v)
        .map((n) => `    ${n};\n`)
        .join('')}${i === 0 ? '  local: *;\n' : ''}};\n`,
  );
  const base = path.join(dir, `${soname}.stub`);
  writeFileSync(`${base}.S`, `${asm.join('\n')}\n`);
  writeFileSync(`${base}.map`, script.join(''));
  run(cc, [
    '-shared',
    '-nostdlib',
    '-o',
    path.join(dir, soname),
    `${base}.S`,
    `-Wl,--version-script=${base}.map`,
    `-Wl,-soname,${soname}`,
    '-Wl,--hash-style=both',
  ]);
}

/**
 * A folder to put first on the linker's search path (-L, -rpath-link) for
 * `arch` (x64 | arm64): stub libc.so.6, libm.so.6, libpthread.so.0,
 * libdl.so.2, librt.so.1 and the dynamic loader, with the -lc/-lm/...
 * names the compiler driver asks for. Built once per cache folder.
 */
export function glibcStubs(arch, cacheDir) {
  const t = TARGETS[arch];
  if (!t) throw new Error(`no glibc stubs for ${arch}`);
  const dir = path.join(cacheDir, `stubs-${arch}`);
  const stamp = path.join(dir, '.complete');
  if (existsSync(stamp)) return dir;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const { libDir } = bullseyeRoot(arch, cacheDir);
  const libs = ['libc.so.6', 'libm.so.6', 'libpthread.so.0', 'libdl.so.2', 'librt.so.1', t.loader];
  for (const soname of libs) writeStub(dir, soname, floorSymbols(path.join(libDir, soname)), t.cc);
  // -lc: the stub plus the toolchain's libc_nonshared.a (atexit,
  // __stack_chk_fail_local: it only calls symbols 2.28 has), as glibc's own
  // libc.so linker script does.
  const nonshared = execFileSync(t.cc, ['-print-file-name=libc_nonshared.a'], { encoding: 'utf8' }).trim();
  if (!path.isAbsolute(nonshared)) throw new Error(`${t.cc} cannot find libc_nonshared.a; install the libc6-dev package for ${arch}`);
  writeFileSync(
    path.join(dir, 'libc.so'),
    `/* glibc ${GLIBC_FLOOR} stand-in (scripts/glibc-stubs.mjs) */\nGROUP ( ${path.join(dir, 'libc.so.6')} ${nonshared} AS_NEEDED ( ${path.join(dir, t.loader)} ) )\n`,
  );
  for (const soname of ['libm.so.6', 'libpthread.so.0', 'libdl.so.2', 'librt.so.1']) {
    symlinkSync(soname, path.join(dir, soname.replace(/\.so\.\d+$/, '.so')));
  }
  writeFileSync(stamp, '');
  return dir;
}
