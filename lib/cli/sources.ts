// Where documents come from: files, directory trees, node_modules. Files
// stream out one at a time so a large tree is never held in memory; walks
// honour .gitignore files (nested ones too) and --exclude globs; skipped
// inputs are collected with their reason.
import { closeSync, existsSync, openSync, readSync, readdirSync, statSync, readFileSync, fstatSync } from 'node:fs';
import { constants as bufferConstants } from 'node:buffer';
import path from 'node:path';
import ignore, { type Ignore } from 'ignore';
import picomatch from 'picomatch';
import { CliError, fsError } from './errors.js';
import type { Doc } from './records.js';

export type { Doc } from './records.js';

export interface Skip {
  id: string;
  reason: 'binary' | 'too-large' | 'unreadable' | 'not-utf8';
  /** What happened, in words (the limit that was passed, the error met). */
  detail?: string;
}

/** Source extensions read when scanning node_modules. */
export const SOURCE_EXTENSIONS = ['.js', '.mjs', '.cjs', '.jsx', '.ts', '.mts', '.cts', '.tsx'];

const SNIFF_BYTES = 8000;

/** Binary if a NUL byte appears in the first 8000 bytes (git's rule). */
export function looksBinary(buf: Uint8Array): boolean {
  const n = Math.min(buf.length, SNIFF_BYTES);
  for (let i = 0; i < n; i++) if (buf[i] === 0) return true;
  return false;
}

const decoder = new TextDecoder('utf-8', { fatal: true });

/** The longest file read as one document: V8's longest string, in bytes of UTF-8 (at least one character each). */
export const MAX_DOC_BYTES = bufferConstants.MAX_STRING_LENGTH;

/**
 * An integer with its thousands grouped by commas (toLocaleString('en-US')'s
 * form), without loading ICU's locale data: that first call was 20-70 ms of
 * the event loop in a run's report.
 */
export function grouped(n: number): string {
  if (!Number.isFinite(n)) return String(n);
  const digits = String(Math.abs(Math.round(n)));
  return (n < 0 && Math.round(n) !== 0 ? '-' : '') + digits.replace(/\B(?=(\d{3})+$)/g, ',');
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = -1;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${v >= 100 ? Math.round(v) : v.toFixed(1)} ${units[u]}`;
}

/** Reads one file as a document, or says why it is skipped. */
export function readDoc(file: string, id: string, maxBytes: number): Doc | Skip {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (e) {
    return { id, reason: 'unreadable', detail: (e as NodeJS.ErrnoException).code ?? String(e) };
  }
  try {
    const size = fstatSync(fd).size;
    if (size > maxBytes) return { id, reason: 'too-large', detail: `${formatBytes(size)} > --max-size ${formatBytes(maxBytes)}` };
    if (size > MAX_DOC_BYTES) {
      return {
        id,
        reason: 'too-large',
        detail: `${formatBytes(size)} > ${formatBytes(MAX_DOC_BYTES)}, the longest text one document can hold (read it as records with --format)`,
      };
    }
    const buf = Buffer.allocUnsafe(size);
    let off = 0;
    while (off < size) {
      const n = readSync(fd, buf, off, size - off, off);
      if (n === 0) break;
      off += n;
    }
    const bytes = buf.subarray(0, off);
    if (looksBinary(bytes)) return { id, reason: 'binary', detail: 'a NUL byte in the first 8000 bytes' };
    try {
      return { id, text: decoder.decode(bytes) };
    } catch (e) {
      if (e instanceof TypeError) return { id, reason: 'not-utf8', detail: 'invalid UTF-8' };
      // V8 cannot make the string (too long once decoded).
      return { id, reason: 'too-large', detail: `${formatBytes(size)}: ${(e as Error).message}` };
    }
  } catch (e) {
    return { id, reason: 'unreadable', detail: (e as NodeJS.ErrnoException).code ?? (e as Error).message };
  } finally {
    closeSync(fd);
  }
}

export function displayPath(abs: string): string {
  const rel = path.relative(process.cwd(), abs);
  return rel && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : abs;
}

export interface WalkOptions {
  extensions?: readonly string[];
  /** Honour .gitignore files found on the way down (default true). */
  gitignore?: boolean;
  /** Globs matched against paths relative to the walk's root (and, without a slash, against names). */
  exclude?: readonly string[];
}

interface IgnoreLevel {
  dir: string;
  rules: Ignore;
}

// Git's rule: a path is ignored by the deepest .gitignore that has an opinion
// on it; a directory once ignored is not entered, so nothing under it returns.
function ignoredBy(levels: readonly IgnoreLevel[], p: string, isDir: boolean): boolean {
  let ignored = false;
  for (const l of levels) {
    const rel = path.relative(l.dir, p).split(path.sep).join('/') + (isDir ? '/' : '');
    const r = l.rules.test(rel);
    if (r.ignored) ignored = true;
    else if (r.unignored) ignored = false;
  }
  return ignored;
}

function readGitignore(dir: string): IgnoreLevel | undefined {
  let text: string;
  try {
    text = readFileSync(path.join(dir, '.gitignore'), 'utf8');
  } catch {
    return undefined;
  }
  return { dir, rules: ignore().add(text) };
}

/**
 * Files under `root`, depth first in name order (stable output). Symlinks are
 * not followed (node_modules/.bin, and no cycles); .git is skipped.
 */
export function* walk(root: string, options: WalkOptions = {}): Generator<string> {
  const excluded = options.exclude?.length ? picomatch(options.exclude as string[], { dot: true }) : undefined;
  const excludedName = options.exclude?.length
    ? picomatch(
        options.exclude.filter((g) => !g.includes('/')),
        { dot: true },
      )
    : undefined;
  const gitignore = options.gitignore ?? true;
  function* inner(dir: string, levels: IgnoreLevel[]): Generator<string> {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch (e) {
      throw fsError(e, displayPath(dir));
    }
    const here = gitignore && entries.some((e) => e.name === '.gitignore' && e.isFile()) ? readGitignore(dir) : undefined;
    const active = here ? [...levels, here] : levels;
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const e of entries) {
      const p = path.join(dir, e.name);
      const isDir = e.isDirectory();
      if (isDir && e.name === '.git') continue;
      if (!isDir && !e.isFile()) continue;
      if (excluded) {
        const rel = path.relative(root, p).split(path.sep).join('/');
        if (excluded(rel) || excluded(rel + (isDir ? '/' : '')) || excludedName!(e.name)) continue;
      }
      if (active.length && ignoredBy(active, p, isDir)) continue;
      if (isDir) {
        try {
          yield* inner(p, active);
        } catch (err) {
          // A subdirectory we cannot list is reported like an unreadable file.
          if (err instanceof CliError) yield `\0unreadable:${p}`;
          else throw err;
        }
      } else if (!options.extensions || options.extensions.some((x) => e.name.endsWith(x))) {
        yield p;
      }
    }
  }
  yield* inner(root, []);
}

/** The files named on the command line, expanded; bad paths fail up front. */
export function expandPaths(paths: string[], options: WalkOptions = {}): { files: string[]; unreadable: string[] } {
  const files: string[] = [];
  const unreadable: string[] = [];
  for (const p of paths) {
    const abs = path.resolve(p);
    let st;
    try {
      st = statSync(abs);
    } catch (e) {
      throw fsError(e, p);
    }
    if (st.isDirectory()) {
      for (const f of walk(abs, options)) {
        if (f.startsWith('\0unreadable:')) unreadable.push(f.slice('\0unreadable:'.length));
        else files.push(f);
      }
    } else if (st.isFile()) {
      // Named explicitly: it must be readable, else the user made a mistake.
      try {
        closeSync(openSync(abs, 'r'));
      } catch (e) {
        throw fsError(e, p);
      }
      files.push(abs);
    } else {
      throw new CliError(`not a regular file or directory: ${p}`, 'pass files, directories or - for stdin', 1);
    }
  }
  return { files, unreadable };
}

/**
 * What `cusim dedup` scans with no path: ./node_modules, else the node_modules
 * this package is installed in, else the package's own tree.
 */
export function defaultScanRoot(packageRoot: string): string {
  const local = path.resolve('node_modules');
  if (existsSync(local)) return local;
  const parent = path.dirname(packageRoot);
  if (path.basename(parent) === 'node_modules') return parent;
  if (path.basename(path.dirname(parent)) === 'node_modules' && path.basename(parent).startsWith('@')) {
    return path.dirname(parent);
  }
  const own = path.join(packageRoot, 'node_modules');
  return existsSync(own) ? own : packageRoot;
}

/** The installed package a file belongs to: the deepest node_modules/<name> (or @scope/name) on its path. */
export function packageOf(file: string): string | undefined {
  const parts = file.split(path.sep);
  const i = parts.lastIndexOf('node_modules');
  if (i < 0 || i + 1 >= parts.length - 1) return undefined;
  const scoped = parts[i + 1].startsWith('@');
  if (scoped && i + 2 >= parts.length - 1) return undefined;
  return parts.slice(0, i + (scoped ? 3 : 2)).join(path.sep);
}

/** "name@version" from a package directory's package.json, else its folder name. */
export function packageLabel(dir: string): string {
  try {
    const pj = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
    if (pj.name) return pj.version ? `${pj.name}@${pj.version}` : pj.name;
  } catch {
    // fall through: unnamed or unreadable manifest
  }
  return path.basename(dir);
}
