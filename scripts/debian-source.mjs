// Debian source packages compiled into the addon (simdjson, libcsv: the
// native record reader's parsers). Debian ships them only as shared
// libraries, which a shipped binary must not need, so a package's source is
// fetched with apt-get from the system's own configured sources (as deb-src,
// in a private apt configuration under the package's build folder that leaves
// the system's untouched), unpacked with dpkg-source, and the files the
// build compiles copied with the license into a git-ignored build-<name>/
// folder, where CMakeLists.txt and binding.gyp look for them. Fetched once:
// later calls find the copy there. Never fatal to a build: a caller that
// cannot fetch says why and the addon builds without that parser.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

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

export function run(cmd, args, options = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, ...options });
  if (r.status !== 0) {
    throw new Error(
      `${cmd} ${args.join(' ')} failed (${r.error?.message ?? `exit ${r.status}`}): ${(r.stderr || r.stdout || '').trim().slice(-1500)}`,
    );
  }
  return r.stdout;
}

/**
 * `dir` with `files` (name in dir -> path in the unpacked source tree) and
 * LICENSE (from `license`, a path in the tree) copied from Debian's source
 * package `pkg`, or throws saying why not. The last of `files` is copied last:
 * its presence is what says the copy is complete.
 */
export function fetchDebianSource({ pkg, dir, files, license, say = () => {} }) {
  const names = Object.keys(files);
  if (names.every((f) => existsSync(path.join(dir, f)))) return dir;
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
    say(`apt-get source --download-only ${pkg}`);
    run('apt-get', ['-q', ...opts, 'source', '--download-only', pkg], { cwd: work });
    const dsc = readdirSync(work).find((f) => f.endsWith('.dsc'));
    if (!dsc) throw new Error('apt-get source left no .dsc');
    run('dpkg-source', ['--no-check', '-x', dsc, 'tree'], { cwd: work });
    const tree = path.join(work, 'tree');
    for (const f of [...Object.values(files), license])
      if (!existsSync(path.join(tree, f))) throw new Error(`the source package has no ${f}`);
    // The license travels with the code compiled from it.
    copyFileSync(path.join(tree, license), path.join(dir, 'LICENSE'));
    writeFileSync(path.join(dir, 'VERSION'), `${dsc.replace(/\.dsc$/, '')}\n`);
    for (const f of names) copyFileSync(path.join(tree, files[f]), path.join(dir, f));
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return dir;
}

/** Runs `fetch` when `url` (a script's import.meta.url) is the script node was started with, saying what it got. */
export function fetchMain(url, name, fetch, without) {
  if (!process.argv[1] || path.resolve(process.argv[1]) !== fileURLToPath(url)) return;
  try {
    const dir = fetch();
    const version = existsSync(path.join(dir, 'VERSION')) ? readFileSync(path.join(dir, 'VERSION'), 'utf8').trim() : '';
    console.error(`${name}-source: ${name} ${version} in ${path.relative(ROOT, dir)}/`);
  } catch (e) {
    console.error(`${name}-source: not available (${e.message}); the addon builds without ${without}`);
  }
}

/** A script's progress lines on stderr, unless it was started with --quiet. */
export const sayer = (name) => (m) => {
  if (!process.argv.includes('--quiet')) console.error(`${name}-source: ${m}`);
};
