// A scale-out job's input as ranges a worker can take alone: record files
// (JSONL, CSV, TSV, lines) cut into byte ranges at record boundaries, and the
// whole-file documents of directory walks as lists. The inputs are chosen
// exactly as a single-process `cusim dedup` chooses them (planInputs), and the
// ids are global: record line L of record input k has id base(k) + L, the
// document files follow, so ids ascend in the single process's row order.
// Cutting is one sequential pass per file that counts newlines (each range
// records the line count before it) and hashes each range (fingerprint.ts).
import { createReadStream, readFileSync, statSync } from 'node:fs';
import { CliError, fsError } from '../cli/errors.js';
import { formatOfFile, lineFormat } from '../cli/records.js';
import type { RecordFormat } from '../cli/records.js';
import { displayPath, expandPaths } from '../cli/sources.js';
import type { TextMode } from '../text/index.js';
import { fingerprintOf, newHash, readBytes } from './fingerprint.js';
import type { Fingerprint } from './fingerprint.js';

export interface RecordRange {
  kind: 'records';
  /** The path as given (relative paths resolve against each worker's working directory). */
  file: string;
  /** As the single process names it in ids and messages. */
  name: string;
  /** The whole file's size when planned. */
  fileSize: number;
  format: 'lines' | 'jsonl' | 'csv' | 'tsv';
  start: number;
  end: number;
  /** Newlines before `start`: the range's first line is number linesBefore + 1. */
  linesBefore: number;
  /** A record of line L has id idBase + L. */
  idBase: number;
  /** "name:line" ids, as the single process gives when it reads several record inputs. */
  idPrefix?: string;
  /** CSV/TSV ranges after the first: the header record, bytes [0, end), with `lines` newlines. */
  header?: { end: number; lines: number; fp: Fingerprint };
  fp: Fingerprint;
}

export interface FileRange {
  kind: 'files';
  /** Document i has id idBase + i. */
  idBase: number;
  /** sha256 '' where the file was unreadable or larger than --max-size when planned (it is skipped then). */
  files: { file: string; name: string; fp: Fingerprint }[];
}

export type Range = RecordRange | FileRange;

export interface PlanOptions {
  format: RecordFormat;
  ext?: string;
  exclude: string[];
  gitignore: boolean;
  maxSize: number;
  /** Bytes per range (records) or per list of files. */
  rangeBytes: number;
  /** CSV/TSV files start with a header row (false with --no-header or --columns). */
  headerRow: boolean;
}

export interface Plan {
  ranges: Range[];
  /** Directories that could not be listed (reported as skipped). */
  unreadable: string[];
  /** The single process's default mode for these inputs. */
  mode: TextMode;
  source: string;
}

const NEWLINE = 0x0a;
const QUOTE = 0x22;

/** Cuts one record file into ranges of about `rangeBytes`, each ending after a newline outside CSV quotes. */
export async function splitRecordFile(
  file: string,
  format: 'lines' | 'jsonl' | 'csv' | 'tsv',
  rangeBytes: number,
  headerRow = true,
): Promise<{
  cuts: { start: number; end: number; linesBefore: number; fp: Fingerprint }[];
  lines: number;
  headerEnd?: number;
  headerLines?: number;
}> {
  const csv = format === 'csv';
  // Only a header row is prepended to the ranges after the first.
  const table = (csv || format === 'tsv') && headerRow;
  const cuts: { start: number; end: number; linesBefore: number; fp: Fingerprint }[] = [];
  let hash = newHash();
  let rangeStart = 0;
  let rangeLines = 0;
  let lines = 0;
  let pos = 0;
  let inQuote = false;
  let content = false;
  let headerEnd: number | undefined;
  let headerLines: number | undefined;
  for await (const chunk of createReadStream(file, { highWaterMark: 1 << 22 }) as AsyncIterable<Buffer>) {
    let seg = 0;
    let i = 0;
    while (i < chunk.length) {
      const nl = chunk.indexOf(NEWLINE, i);
      if (csv) {
        // RFC 4180: quotes toggle (an escaped "" toggles twice); newlines inside quotes are data.
        let q = chunk.indexOf(QUOTE, i);
        while (q >= 0 && (nl < 0 || q < nl)) {
          inQuote = !inQuote;
          content = true;
          q = chunk.indexOf(QUOTE, q + 1);
        }
        if (inQuote) {
          if (nl < 0) break;
          lines++;
          i = nl + 1;
          continue;
        }
      }
      if (nl < 0) {
        if (!content) for (let j = i; j < chunk.length; j++) if (chunk[j] !== 0x0d) content = true;
        break;
      }
      if (!content) for (let j = i; j < nl; j++) if (chunk[j] !== 0x0d) content = true;
      lines++;
      i = nl + 1;
      if (table && headerEnd === undefined && content) {
        headerEnd = pos + i;
        headerLines = lines;
      }
      if (pos + i - rangeStart >= rangeBytes) {
        hash.update(chunk.subarray(seg, i));
        cuts.push({
          start: rangeStart,
          end: pos + i,
          linesBefore: rangeLines,
          fp: { size: pos + i - rangeStart, sha256: hash.digest('hex') },
        });
        hash = newHash();
        seg = i;
        rangeStart = pos + i;
        rangeLines = lines;
      }
    }
    hash.update(chunk.subarray(seg));
    pos += chunk.length;
  }
  if (pos > rangeStart)
    cuts.push({ start: rangeStart, end: pos, linesBefore: rangeLines, fp: { size: pos - rangeStart, sha256: hash.digest('hex') } });
  return { cuts, lines, headerEnd, headerLines };
}

// The format of a line-based file ('auto' only reaches here through --format auto on stdin, never for files).
function concrete(format: RecordFormat, file: string): 'lines' | 'jsonl' | 'csv' | 'tsv' {
  if (format !== 'auto') return format;
  const head = readBytes(file, 0, Math.min(statSync(file).size, 1 << 16)).toString('utf8');
  return lineFormat('auto', head.split('\n').find((l) => l.trim() !== '') ?? '');
}

/** Refuses inputs that cannot be cut into ranges (stdin). */
export function checkSplittable(paths: string[]): void {
  if (paths.length === 0 || paths.includes('-')) {
    throw new CliError(
      '--queue splits files into ranges; stdin cannot be split',
      'name the input files (every worker must see them at the same paths), or use --shard i/N with -',
      2,
    );
  }
}

/** The ranges of `paths`, planned as `cusim dedup` plans its inputs. */
export async function planRanges(paths: string[], o: PlanOptions): Promise<Plan> {
  checkSplittable(paths);
  const records: { file: string; name: string; format: RecordFormat; size: number }[] = [];
  const docRoots: string[] = [];
  for (const p of paths) {
    let st;
    try {
      st = statSync(p);
    } catch (e) {
      throw fsError(e, p);
    }
    const format = o.format !== 'auto' ? o.format : formatOfFile(p);
    if (st.isFile() && format) records.push({ file: p, name: displayPath(p), format, size: st.size });
    else docRoots.push(p);
  }
  const extensions = o.ext ? o.ext.split(',').map((e) => (e.startsWith('.') ? e : '.' + e.trim())) : undefined;
  const { files, unreadable } = expandPaths(docRoots, { extensions, gitignore: o.gitignore, exclude: o.exclude });
  const docFiles: string[] = [];
  for (const f of files) {
    if (o.format !== 'auto') records.push({ file: f, name: displayPath(f), format: o.format, size: statSync(f).size });
    else docFiles.push(f);
  }
  const ranges: Range[] = [];
  let base = 0;
  for (const r of records) {
    const format = concrete(r.format, r.file);
    const split = await splitRecordFile(r.file, format, o.rangeBytes, o.headerRow);
    const header =
      split.headerEnd !== undefined && split.cuts.length > 1
        ? { end: split.headerEnd, lines: split.headerLines!, fp: fingerprintOf(readBytes(r.file, 0, split.headerEnd)) }
        : undefined;
    split.cuts.forEach((c, k) => {
      ranges.push({
        kind: 'records',
        file: r.file,
        name: r.name,
        fileSize: r.size,
        format,
        start: c.start,
        end: c.end,
        linesBefore: c.linesBefore,
        idBase: base,
        ...(records.length > 1 ? { idPrefix: r.name } : {}),
        ...(k > 0 && header ? { header } : {}),
        fp: c.fp,
      });
    });
    // Line numbers run 1..lines + 1 (a last line without a newline).
    base += split.lines + 2;
  }
  let list: FileRange | undefined;
  let listBytes = 0;
  for (const f of docFiles) {
    if (!list || listBytes >= o.rangeBytes) {
      list = { kind: 'files', idBase: base, files: [] };
      ranges.push(list);
      listBytes = 0;
    }
    let fp: Fingerprint = { size: -1, sha256: '' };
    try {
      const size = statSync(f).size;
      fp = size > o.maxSize ? { size, sha256: '' } : fingerprintOf(readFileSync(f));
    } catch {
      // unreadable: the worker skips it as the single process does
    }
    list.files.push({ file: f, name: displayPath(f), fp });
    listBytes += Math.max(0, Math.min(fp.size, o.maxSize));
    base++;
  }
  if (base > 0xfffffffe)
    throw new CliError(
      `the input has ${base} lines and files, more than ids of 32 bits can number`,
      'split the corpus into several jobs',
      1,
    );
  const mode: TextMode = docFiles.length === 0 && records.length > 0 ? 'words' : 'code';
  return { ranges, unreadable, mode, source: paths.join(' ') };
}
