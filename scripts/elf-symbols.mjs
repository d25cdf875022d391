// A shared object's dynamic symbols, read with binutils' readelf (which reads
// every ELF architecture, so the arm64 binary is checked on an x64 host), and
// the rules every shipped binary keeps: it loads on glibc 2.28 with the
// libgcc_s of GCC 8 (RHEL 8, manylinux_2_28), needs no libstdc++ from the
// system, and exports only the Node-API entry points.
import { execFileSync } from 'node:child_process';

export const GLIBC_FLOOR = '2.28';
// RHEL 8's libgcc_s (GCC 8) defines version nodes up to GCC_7.0.0.
export const GCC_FLOOR = '7.0.0';
export const ENTRY_POINTS = ['napi_register_module_v1', 'node_api_module_get_api_version_v1'];

/** Compares dotted versions numerically: '2.3.2' < '2.28'. */
export function compareVersions(a, b) {
  const x = a.split('.').map(Number);
  const y = b.split('.').map(Number);
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = (x[i] ?? 0) - (y[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/**
 * Every entry of .dynsym: { name, version (undefined when unversioned),
 * defaultVersion (name@@VER), defined, type, bind, size }.
 */
export function dynamicSymbols(file) {
  const out = execFileSync('readelf', ['--dyn-syms', '--wide', file], { encoding: 'utf8', maxBuffer: 256 << 20 });
  const symbols = [];
  for (const line of out.split('\n')) {
    // Num: Value Size Type Bind Vis Ndx Name [(verIndex)]
    const m = /^\s*\d+:\s+[0-9a-f]+\s+(\d+|0x[0-9a-f]+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)(?:\s+\(\d+\))?\s*$/i.exec(line);
    if (!m) continue;
    const [, size, type, bind, , ndx, full] = m;
    const at = full.indexOf('@');
    const name = at < 0 ? full : full.slice(0, at);
    const version = at < 0 ? undefined : full.slice(at).replace(/^@@?/, '');
    symbols.push({
      name,
      version,
      defaultVersion: full.includes('@@'),
      defined: ndx !== 'UND',
      absolute: ndx === 'ABS',
      type,
      bind,
      size: Number(size),
    });
  }
  return symbols;
}

/**
 * What keeps `file` from loading where the floor promises, one line each:
 * GLIBC_ versions above 2.28, GCC_ versions above 7.0.0, any GLIBCXX_ or
 * CXXABI_ (the system's libstdc++), unversioned references other than the
 * Node-API and weak ones, and defined exports other than the
 * Node-API entry points. Empty when the binary keeps every rule.
 */
export function floorViolations(file) {
  const problems = [];
  for (const s of dynamicSymbols(file)) {
    if (s.defined) {
      if (!s.absolute && s.bind !== 'LOCAL' && !ENTRY_POINTS.includes(s.name)) problems.push(`exports ${s.name}`);
      continue;
    }
    if (!s.version) {
      // Unversioned references resolve against whatever the process has: the
      // Node-API from node itself, weak hooks, or nothing (a glibc symbol
      // newer than the stubs, e.g. 2.38's __isoc23_strtol, which the stubs
      // cannot version); only the first two are sound.
      if (s.bind !== 'WEAK' && !/^(napi|node_api|uv)_/.test(s.name)) problems.push(`needs ${s.name} (unversioned)`);
      continue;
    }
    const glibc = /^GLIBC_(\d+(?:\.\d+)+)$/.exec(s.version);
    const gcc = /^GCC_(\d+(?:\.\d+)+)$/.exec(s.version);
    if (glibc && compareVersions(glibc[1], GLIBC_FLOOR) > 0) problems.push(`needs ${s.name}@${s.version}`);
    else if (gcc && compareVersions(gcc[1], GCC_FLOOR) > 0) problems.push(`needs ${s.name}@${s.version}`);
    else if (/^(GLIBCXX|CXXABI)_/.test(s.version)) problems.push(`needs ${s.name}@${s.version} (the system's libstdc++)`);
  }
  return problems;
}

/** The shared libraries `file` names in DT_NEEDED. */
export function neededLibraries(file) {
  const out = execFileSync('readelf', ['--dynamic', '--wide', file], { encoding: 'utf8' });
  return [...out.matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1]);
}
