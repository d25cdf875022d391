// Shared CLI plumbing: I/O handles (tests substitute them), option parsers
// that fail with one-line messages, and the backend/GPU banner.
import { InvalidArgumentError, Option } from 'commander';
import type { Command } from 'commander';
import { escapeText } from './escape.js';
import { devices } from '../backend.js';

export interface Io {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  stdinIsTTY: boolean;
  stdin: NodeJS.ReadableStream;
  /** Aborted on Ctrl-C or when stdout's reader has gone (set by main). */
  signal?: AbortSignal;
  stdoutClosed?: () => boolean;
}

export const defaultIo: Io = {
  stdout: process.stdout,
  stderr: process.stderr,
  stdinIsTTY: !!process.stdin.isTTY,
  stdin: process.stdin,
};

/** Whether progress bars may be drawn: asked for, not --quiet, and stderr a terminal (checked by progress()). */
export function wantsProgress(o: { progress?: boolean; quiet?: boolean }): boolean {
  return o.progress !== false && !o.quiet;
}

/** A number strictly between lo and hi. */
export function between(name: string, lo: number, hi: number) {
  return (v: string): number => {
    const x = Number(v);
    if (v.trim() === '' || !Number.isFinite(x) || x <= lo || x >= hi) {
      throw new InvalidArgumentError(`${name} must be a number in (${lo}, ${hi})`);
    }
    return x;
  };
}

export function integer(name: string, lo: number, hi: number) {
  return (v: string): number => {
    const x = Number(v);
    if (!/^\d+$/.test(v.trim()) || x < lo || x > hi) throw new InvalidArgumentError(`${name} must be an integer in [${lo}, ${hi}]`);
    return x;
  };
}

export function deviceList(v: string): 'all' | number[] {
  if (v === 'all') return 'all';
  const parts = v.split(',');
  if (!parts.every((p) => /^\d+$/.test(p.trim()))) {
    throw new InvalidArgumentError("devices must be 'all' or GPU indices like 0,1");
  }
  return parts.map((p) => Number(p));
}

export function backendLine(backend: string): string {
  const d = devices();
  if (backend === 'cuda') {
    const names = d.gpus.map((g) => `${g.index}: ${g.name}`).join(', ');
    return `cusim: backend cuda on ${names}`;
  }
  const why = d.compiledWithCuda ? (d.reason ?? 'not requested') : 'addon built without CUDA';
  return `cusim: backend cpu (GPU: ${why})`;
}

/** --delimiter: one character, or 'tab' / '\\t'. */
export function delimiter(v: string): string {
  const d = v === '\\t' || v.toLowerCase() === 'tab' ? '\t' : v;
  if ([...d].length !== 1) throw new InvalidArgumentError(`--delimiter must be one character (or 'tab'), got '${escapeText(v)}'`);
  return d;
}

/** --columns: comma-separated names, none empty. */
export function columnList(v: string): string[] {
  const names = v.split(',').map((n) => n.trim());
  if (names.some((n) => n === '')) throw new InvalidArgumentError(`--columns must be names separated by commas, got '${escapeText(v)}'`);
  return names;
}

/** The help text every command that reads records ends with: what CSV and TSV input needs. */
export const TABLE_HELP =
  '\nCSV/TSV: the first row names the columns (--field text --id-field id by default); a file without a header row\n' +
  'needs --no-header with column numbers (--no-header --field 2 --id-field 1) or names for its columns (--columns name,text).\n';

/**
 * The record-input options of the commands that read records (dedup, join,
 * cluster): --format, --field, --id-field and, where fields are split,
 * --delimiter.
 */
export function recordOptions(cmd: Command, formatHelp: string, idNoun: string, o: { delimiter?: boolean } = {}): Command {
  cmd
    .addOption(new Option('-f, --format <f>', formatHelp).choices(['auto', 'lines', 'jsonl', 'csv', 'tsv']).default('auto'))
    .option('--field <name>', 'JSONL/CSV/TSV field holding the text (CSV/TSV: a column name, or its number from 1)', 'text')
    .option('--id-field <name>', `JSONL/CSV/TSV field holding the ${idNoun} id; records without one are numbered by line`, 'id')
    .option('--no-header', 'CSV/TSV: the first row is a record, not column names; --field/--id-field are column numbers (1 = first)')
    .option('--columns <names>', 'CSV/TSV without a header row: names for its columns, in order (e.g. name,text)', columnList);
  if (o.delimiter ?? true) cmd.option('--delimiter <c>', 'CSV/TSV field separator (default , for CSV, tab for TSV)', delimiter);
  return cmd.addHelpText('after', TABLE_HELP);
}
