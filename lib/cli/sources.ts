// Where documents come from: files, directory trees, node_modules, stdin
// records. Documents stream out one at a time so a large tree is never held
// in memory; skipped inputs are collected with their reason.
import { closeSync, existsSync, openSync, readSync, readdirSync, statSync, readFileSync, fstatSync } from 'node:fs';
import path from 'node:path';
import { CliError, fsError } from './errors.js';

export interface Doc {
  /** File path (relative to the working directory when inside it) or record id. */
  id: string;
  text: string;
}

export interface Skip {
  id: string;
  reason: 'binary' | 'too-large' | 'unreadable' | 'not-utf8';
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

/** Reads one file as a document, or says why it is skipped. */
export function readDoc(file: string, id: string, maxBytes: number): Doc | Skip {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch {
    return { id, reason: 'unreadable' };
  }
  try {
    const size = fstatSync(fd).size;
    if (size > maxBytes) return { id, reason: 'too-large' };
    const buf = Buffer.allocUnsafe(size);
    let off = 0;
    while (off < size) {
      const n = readSync(fd, buf, off, size - off, off);
      if (n === 0) break;
      off += n;
    }
    const bytes = buf.subarray(0, off);
    if (looksBinary(bytes)) return { id, reason: 'binary' };
    try {
      return { id, text: decoder.decode(bytes) };
    } catch {
      return { id, reason: 'not-utf8' };
    }
  } catch {
    return { id, reason: 'unreadable' };
  } finally {
    closeSync(fd);
  }
}

export function displayPath(abs: string): string {
  const rel = path.relative(process.cwd(), abs);
  return rel && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : abs;
}

/**
 * Files under `root`, depth first in name order (stable output). Symlinks are
 * not followed (node_modules/.bin, and no cycles); .git is skipped.
 */
export function* walk(root: string, extensions?: readonly string[]): Generator<string> {
  let entries;
  try {
    entries = readdirSync(root, { withFileTypes: true });
  } catch (e) {
    throw fsError(e, displayPath(root));
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const e of entries) {
    const p = path.join(root, e.name);
    if (e.isDirectory()) {
      if (e.name === '.git') continue;
      try {
        yield* walk(p, extensions);
      } catch (err) {
        // A subdirectory we cannot list is reported like an unreadable file.
        if (err instanceof CliError) yield `\0unreadable:${p}`;
        else throw err;
      }
    } else if (e.isFile()) {
      if (!extensions || extensions.some((x) => e.name.endsWith(x))) yield p;
    }
  }
}

/** The files named on the command line, expanded; bad paths fail up front. */
export function expandPaths(paths: string[], extensions?: readonly string[]): { files: string[]; unreadable: string[] } {
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
      for (const f of walk(abs, extensions)) {
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

export type RecordFormat = 'auto' | 'lines' | 'jsonl' | 'csv';

/** RFC 4180 CSV: quoted fields may hold commas, quotes ("") and newlines. */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"') {
        if (text[i + 1] === '"') {
          field += '"';
          i++;
        } else quoted = false;
      } else field += c;
    } else if (c === '"' && field === '') quoted = true;
    else if (c === ',') {
      row.push(field);
      field = '';
    } else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
    } else field += c;
  }
  if (quoted) throw new CliError('CSV input ends inside a quoted field', 'close the quote or use --format lines', 1);
  if (field !== '' || row.length > 0) {
    row.push(field);
    rows.push(row);
  }
  return rows;
}

/**
 * Records from text read on stdin. `lines`: one document per non-empty line,
 * id = line number. `jsonl`: objects, text in `field`, id in `idField` (else
 * the line number). `csv`: a header row names the columns. `auto` picks jsonl
 * when the first non-empty line is a JSON object, else lines.
 */
export function parseRecords(input: string, format: RecordFormat, field: string, idField: string): Doc[] {
  const lines = input.split(/\r?\n/);
  if (format === 'auto') {
    const first = lines.find((l) => l.trim() !== '')?.trim() ?? '';
    format = first.startsWith('{') ? 'jsonl' : 'lines';
  }
  const docs: Doc[] = [];
  if (format === 'lines') {
    lines.forEach((l, i) => {
      if (l.trim() !== '') docs.push({ id: String(i + 1), text: l });
    });
  } else if (format === 'jsonl') {
    lines.forEach((l, i) => {
      if (l.trim() === '') return;
      let o: unknown;
      try {
        o = JSON.parse(l);
      } catch {
        throw new CliError(`stdin line ${i + 1} is not valid JSON`, 'fix the line or use --format lines', 1);
      }
      if (typeof o !== 'object' || o === null || Array.isArray(o)) {
        throw new CliError(`stdin line ${i + 1} is not a JSON object`, 'each JSONL line must be an object', 1);
      }
      const rec = o as Record<string, unknown>;
      const text = rec[field];
      if (typeof text !== 'string') {
        throw new CliError(`stdin line ${i + 1} has no string field '${field}'`, `name the text field with --field`, 1);
      }
      const id = rec[idField];
      docs.push({ id: id === undefined || id === null ? String(i + 1) : String(id), text });
    });
  } else {
    const rows = parseCsv(input);
    if (rows.length === 0) return docs;
    const header = rows[0];
    const ti = header.indexOf(field);
    if (ti < 0) {
      throw new CliError(`CSV header has no column '${field}' (columns: ${header.join(', ')})`, 'name it with --field', 1);
    }
    const ii = header.indexOf(idField);
    for (let r = 1; r < rows.length; r++) {
      const row = rows[r];
      if (row.length === 1 && row[0] === '') continue;
      docs.push({ id: ii >= 0 && row[ii] !== undefined ? row[ii] : String(r + 1), text: row[ti] ?? '' });
    }
  }
  return docs;
}
