// simdjson (Apache-2.0), compiled into the addon for the native JSONL reader
// (native/records_cpu.cc). Debian ships it only as a shared library, which a
// shipped binary must not need, so its Debian source package is fetched with
// apt-get from the system's own configured sources (as deb-src, in a private
// apt configuration that leaves the system's untouched), unpacked, and its
// amalgamated singleheader/simdjson.h + simdjson.cpp copied with its LICENSE
// into build-simdjson/ (git-ignored), where CMakeLists.txt and binding.gyp
// look for them. Fetched once: later calls find the copy there.
//
// Never fatal: without apt-get, network or a Debian source for simdjson, it
// says why and exits 0, and the addon builds without the native reader (the
// JavaScript reader is used).
//
// Usage: node scripts/simdjson-source.mjs [--quiet]
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const SIMDJSON_DIR = path.join(root, 'build-simdjson');
const FILES = ['simdjson.h', 'simdjson.cpp'];
const quiet = process.argv.includes('--quiet');
const say = (m) => {
  if (!quiet) console.error(`simdjson-source: ${m}`);
};

/** The deb stanzas of the system's apt sources (deb822 .sources and one-line .list files) as deb822 stanzas. */
export function debStanzas(etc = '/etc/apt') {
  const stanzas = [];
  const parts = path.join(etc, 'sources.list.d');
  const files = [path.join(etc, 'sources.list')];
  if (existsSync(parts)) for (const f of readdirSync(parts).sort()) files.push(path.join(parts, f));
  for (const f of files) {
    if (!existsSync(f)) continue;
    const text = readFileSync(f, 'utf8');
    if (f.endsWith('.sources')) {
      for (const block of text.split(/\n\s*\n/)) {
        const fields = {};
        let last;
        for (const line of block.split('\n')) {
          if (line.startsWith('#')) continue;
          const m = /^([A-Za-z-]+):\s*(.*)$/.exec(line);
          if (m) fields[(last = m[1].toLowerCase())] = m[2].trim();
          else if (last && /^\s/.test(line) && line.trim()) fields[last] += `\n ${line.trim()}`;
        }
        if (!fields.types?.split(/\s+/).includes('deb') || !fields.uris || !fields.suites) continue;
        if (fields.enabled?.toLowerCase() === 'no') continue;
        stanzas.push({ uris: fields.uris, suites: fields.suites, components: fields.components ?? '', signedBy: fields['signed-by'] });
      }
    } else if (f.endsWith('.list') || f === files[0]) {
      for (const raw of text.split('\n')) {
        const line = raw.replace(/#.*/, '').trim();
        const m = /^deb\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)\s*(.*)$/.exec(line);
        if (!m) continue;
        const signedBy = /(?:^|\s)signed-by=(\S+)/.exec(m[1] ?? '')?.[1];
        stanzas.push({ uris: m[2], suites: m[3], components: m[4], signedBy });
      }
    }
  }
  return stanzas;
}

function deb822(stanzas) {
  return stanzas
    .map((s) =>
      [
        'Types: deb-src',
        `URIs: ${s.uris}`,
        `Suites: ${s.suites}`,
        ...(s.components ? [`Components: ${s.components}`] : []),
        ...(s.signedBy ? [`Signed-By: ${s.signedBy}`] : []),
      ].join('\n'),
    )
    .join('\n\n');
}

function run(cmd, args, options = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, ...options });
  if (r.status !== 0) {
    throw new Error(
      `${cmd} ${args.join(' ')} failed (${r.error?.message ?? `exit ${r.status}`}): ${(r.stderr || r.stdout || '').trim().slice(-1500)}`,
    );
  }
  return r.stdout;
}

/** build-simdjson/ with simdjson.h, simdjson.cpp and LICENSE, or throws saying why not. */
export function fetchSimdjson(dir = SIMDJSON_DIR) {
  if (FILES.every((f) => existsSync(path.join(dir, f)))) return dir;
  if (spawnSync('apt-get', ['--version'], { stdio: 'ignore' }).status !== 0) throw new Error('apt-get not found (not a Debian-like host)');
  if (spawnSync('dpkg-source', ['--version'], { stdio: 'ignore' }).status !== 0)
    throw new Error('dpkg-source not found (install dpkg-dev)');
  const stanzas = debStanzas();
  if (stanzas.length === 0) throw new Error('no deb sources configured in /etc/apt');
  mkdirSync(dir, { recursive: true });
  const apt = path.join(dir, 'apt');
  for (const d of ['lists/partial', 'archives/partial']) mkdirSync(path.join(apt, d), { recursive: true });
  const sources = path.join(apt, 'sources.d');
  mkdirSync(sources, { recursive: true });
  writeFileSync(path.join(sources, 'deb-src.sources'), `${deb822(stanzas)}\n`);
  const opts = [
    '-oDir::Etc::SourceList=/dev/null',
    `-oDir::Etc::SourceParts=${sources}`,
    `-oDir::State::Lists=${path.join(apt, 'lists')}`,
    '-oDir::State::status=/dev/null',
    `-oDir::Cache=${apt}`,
    ...(process.getuid?.() === 0 ? ['-oAPT::Sandbox::User=root'] : []),
  ];
  say('apt-get update (deb-src of the configured sources, private lists)');
  run('apt-get', ['-q', ...opts, 'update']);
  const work = mkdtempSync(path.join(dir, 'src-'));
  try {
    say('apt-get source --download-only simdjson');
    run('apt-get', ['-q', ...opts, 'source', '--download-only', 'simdjson'], { cwd: work });
    const dsc = readdirSync(work).find((f) => f.endsWith('.dsc'));
    if (!dsc) throw new Error('apt-get source left no .dsc');
    run('dpkg-source', ['--no-check', '-x', dsc, 'tree'], { cwd: work });
    const single = path.join(work, 'tree', 'singleheader');
    for (const f of FILES) if (!existsSync(path.join(single, f))) throw new Error(`the source package has no singleheader/${f}`);
    // The license travels with the code compiled from it.
    copyFileSync(path.join(work, 'tree', 'LICENSE'), path.join(dir, 'LICENSE'));
    writeFileSync(path.join(dir, 'VERSION'), `${dsc.replace(/\.dsc$/, '')}\n`);
    // simdjson.cpp last: its presence is what says the copy is complete.
    for (const f of ['simdjson.h', 'simdjson.cpp']) copyFileSync(path.join(single, f), path.join(dir, f));
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return dir;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const dir = fetchSimdjson();
    say(
      `simdjson ${existsSync(path.join(dir, 'VERSION')) ? readFileSync(path.join(dir, 'VERSION'), 'utf8').trim() : ''} in ${path.relative(root, dir)}/`,
    );
  } catch (e) {
    console.error(`simdjson-source: not available (${e.message}); the addon builds without the native JSONL reader`);
  }
}
