// Records from a byte stream (a file or stdin), one at a time: lines, JSONL,
// CSV or TSV. Streams are pulled chunk by chunk, so memory holds one chunk
// and the record being read, whatever the input's size; CSV and TSV go
// through csv-parse. Ids come from `idField`, else the record's line number.
import { CsvError, parse } from 'csv-parse';
import { parse as parseSync } from 'csv-parse/sync';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { escapeText } from './escape.js';
import { CliError } from './errors.js';

export interface Doc {
  /** File path (relative to the working directory when inside it) or record id. */
  id: string;
  text: string;
  /** Records: the line number the id is numbered by (with RecordOptions.lineOffset added). */
  line?: number;
}

export type RecordFormat = 'auto' | 'lines' | 'jsonl' | 'csv' | 'tsv';

/** Files named with these extensions are read as records even without --format. */
export const RECORD_EXTENSIONS: Readonly<Record<string, Exclude<RecordFormat, 'auto' | 'lines'>>> = {
  '.jsonl': 'jsonl',
  '.ndjson': 'jsonl',
  '.csv': 'csv',
  '.tsv': 'tsv',
};

export function formatOfFile(file: string): RecordFormat | undefined {
  return RECORD_EXTENSIONS[path.extname(file).toLowerCase()];
}

export interface RecordOptions {
  format: RecordFormat;
  field: string;
  idField: string;
  /** CSV/TSV field separator (default ',' for CSV, tab for TSV). */
  delimiter?: string;
  /** CSV/TSV: false when the first row is a record (--no-header); fields are then column numbers. */
  header?: boolean;
  /** CSV/TSV: names for the columns of a file without a header row (--columns). */
  columns?: string[];
  /** Names the input in messages: a path or 'stdin'. */
  source: string;
  /** Prepended to line-number ids ("file:line") when several inputs are read. */
  idPrefix?: string;
  /** Longest record accepted, in bytes; longer ones are an error naming the line. */
  maxRecordBytes: number;
  /** Called with the bytes of each chunk read (progress). */
  onBytes?: (n: number) => void;
  /** Added to every line number: the lines before this part of a file (a scale-out range, lib/queue/ranges.ts). */
  lineOffset?: number;
}

const NEWLINE = 0x0a;

export function tooLongError(o: RecordOptions, line: number): CliError {
  return new CliError(
    `${escapeText(o.source)} line ${line} is longer than ${o.maxRecordBytes} bytes`,
    'raise --max-size, or check that the input has line breaks',
    1,
  );
}

/**
 * Lines of a byte stream (LF or CRLF), decoded as UTF-8, with their 1-based
 * numbers. A line longer than `max` bytes is an error, not an allocation.
 */
async function* lines(input: Readable, o: RecordOptions): AsyncGenerator<[string, number]> {
  const decoder = new TextDecoder('utf-8');
  let carry: Buffer[] = [];
  let carryBytes = 0;
  let lineNo = o.lineOffset ?? 0;
  const tooLong = (): CliError => tooLongError(o, lineNo + 1);
  for await (const chunk of input as AsyncIterable<Buffer | string>) {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    o.onBytes?.(buf.length);
    let start = 0;
    for (let nl = buf.indexOf(NEWLINE); nl >= 0; nl = buf.indexOf(NEWLINE, start)) {
      let piece = buf.subarray(start, nl);
      if (carryBytes + piece.length > o.maxRecordBytes) throw tooLong();
      if (carryBytes > 0) {
        carry.push(piece);
        piece = Buffer.concat(carry);
        carry = [];
        carryBytes = 0;
      }
      const end = piece.length > 0 && piece[piece.length - 1] === 0x0d ? piece.length - 1 : piece.length;
      yield [decoder.decode(piece.subarray(0, end)), ++lineNo];
      start = nl + 1;
    }
    if (start < buf.length) {
      carryBytes += buf.length - start;
      if (carryBytes > o.maxRecordBytes) throw tooLong();
      carry.push(buf.subarray(start));
    }
  }
  if (carryBytes > 0) {
    const piece = Buffer.concat(carry);
    const end = piece[piece.length - 1] === 0x0d ? piece.length - 1 : piece.length;
    yield [decoder.decode(piece.subarray(0, end)), ++lineNo];
  }
}

export function lineId(o: RecordOptions, line: number): string {
  return o.idPrefix === undefined ? String(line) : `${o.idPrefix}:${line}`;
}

function fromJson(l: string, line: number, o: RecordOptions): Doc {
  const where = (): string => `${escapeText(o.source)} line ${line}`;
  let v: unknown;
  try {
    v = JSON.parse(l);
  } catch {
    throw new CliError(`${where()} is not valid JSON`, 'fix the line or use --format lines', 1);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw new CliError(`${where()} is not a JSON object`, 'each JSONL line must be an object', 1);
  }
  const rec = v as Record<string, unknown>;
  const text = rec[o.field];
  if (typeof text !== 'string') {
    throw new CliError(`${where()} has no string field '${escapeText(o.field)}'`, 'name the text field with --field', 1);
  }
  const id = rec[o.idField];
  return { id: id === undefined || id === null ? lineId(o, line) : String(id), text };
}

/** The format of line-based input whose first non-blank line is `l`. */
export function lineFormat(format: RecordFormat, l: string): 'lines' | 'jsonl' {
  if (format === 'lines' || format === 'jsonl') return format;
  return l.trimStart().startsWith('{') ? 'jsonl' : 'lines';
}

/** The record of line number `line` (1-based), or undefined for a blank line. */
export function lineRecord(l: string, line: number, format: 'lines' | 'jsonl', o: RecordOptions): Doc | undefined {
  if (l.trim() === '') return undefined;
  return format === 'jsonl' ? fromJson(l, line, o) : { id: lineId(o, line), text: l };
}

async function* lineRecords(input: Readable, o: RecordOptions): AsyncGenerator<Doc> {
  let format: 'lines' | 'jsonl' | undefined;
  for await (const [l, n] of lines(input, o)) {
    if (l.trim() === '') continue;
    format ??= lineFormat(o.format, l);
    const d = lineRecord(l, n, format, o)!;
    d.line = n;
    yield d;
  }
}

/**
 * The records of a block of whole lines (a worker's share of line-based input),
 * numbered from `firstLine` + 1: the same records, ids and errors as
 * readRecords gives for those lines.
 */
export function blockRecords(block: Uint8Array, firstLine: number, format: 'lines' | 'jsonl', o: RecordOptions): Doc[] {
  const decoder = new TextDecoder('utf-8');
  const docs: Doc[] = [];
  let line = firstLine;
  for (let start = 0; start < block.length;) {
    let nl = block.indexOf(NEWLINE, start);
    if (nl < 0) nl = block.length;
    const d = blockLine(block, start, nl, ++line, format, o, decoder);
    if (d) {
      d.line = line;
      docs.push(d);
    }
    start = nl + 1;
  }
  return docs;
}

/** The record of block[start, nl), line number `line` (1-based), or undefined for a blank line. */
export function blockLine(
  block: Uint8Array,
  start: number,
  nl: number,
  line: number,
  format: 'lines' | 'jsonl',
  o: RecordOptions,
  decoder: { decode(bytes: Uint8Array): string },
): Doc | undefined {
  if (nl - start > o.maxRecordBytes) throw tooLongError(o, line);
  const end = nl > start && block[nl - 1] === 0x0d ? nl - 1 : nl;
  return lineRecord(decoder.decode(block.subarray(start, end)), line, format, o);
}

const HEADERLESS_FIX =
  'name the text column with --field (a name, or a number: 1 is the first column); ' +
  'for a file without a header row pass --no-header with --field N, or --columns name,text';

/** The 0-based column `spec` names: a name in `header`, else a number counted from 1; -1 when neither. */
function columnIndex(spec: string, header: readonly string[] | undefined): number {
  const named = header ? header.indexOf(spec) : -1;
  if (named >= 0) return named;
  return /^[1-9]\d{0,5}$/.test(spec) ? Number(spec) - 1 : -1;
}

/**
 * The text and id columns known before the first row: from --columns, or, with
 * --no-header, from column numbers; `names` is undefined when the first row
 * is the header that names them.
 */
export function tableColumns(o: RecordOptions): { ti: number; ii: number; names?: string[] } {
  if (o.columns) {
    const ti = columnIndex(o.field, o.columns);
    if (ti < 0) {
      throw new CliError(
        `--columns ${o.columns.map(escapeText).join(',')} names no column '${escapeText(o.field)}'`,
        'name the text column with --field, or call it text in --columns',
        2,
      );
    }
    return { ti, ii: columnIndex(o.idField, o.columns), names: o.columns };
  }
  if (o.header !== false) return { ti: -1, ii: -1 };
  const ti = columnIndex(o.field, undefined);
  if (ti < 0) {
    throw new CliError(
      `--no-header: --field '${escapeText(o.field)}' is not a column number`,
      'name the text column by number (--field 2: the second column), or name the columns with --columns name,text',
      2,
    );
  }
  // The id column's default name ('id') means line numbers here.
  const ii = columnIndex(o.idField, undefined);
  if (ii < 0 && o.idField !== 'id') {
    throw new CliError(
      `--no-header: --id-field '${escapeText(o.idField)}' is not a column number`,
      'name the id column by number (--id-field 1: the first column), or leave it out to number records by line',
      2,
    );
  }
  return { ti, ii, names: [] };
}

/** csv-parse's options for CSV or TSV input. */
function tableParseOptions(o: RecordOptions) {
  const tsv = o.format === 'tsv';
  return {
    delimiter: o.delimiter ?? (tsv ? '\t' : ','),
    quote: tsv ? false : '"',
    bom: true,
    info: true as const,
    skip_empty_lines: true,
    // Mixed line endings (files edited on several systems) are common.
    record_delimiter: ['\r\n', '\n', '\r'],
    relax_column_count: true,
    max_record_size: o.maxRecordBytes,
  };
}

/** The text and id columns a header row names, or the error saying it lacks the text column. */
export function headerColumns(header: string[], o: RecordOptions): { ti: number; ii: number } {
  const ti = columnIndex(o.field, header);
  if (ti < 0) {
    throw new CliError(
      `${escapeText(o.source)}: the header has no column '${escapeText(o.field)}' (columns: ${header.map(escapeText).join(', ')})`,
      HEADERLESS_FIX,
      1,
    );
  }
  return { ti, ii: columnIndex(o.idField, header) };
}

/**
 * csv-parse's error as the CLI words it: a CliError for any of its parse
 * errors (most codes start with CSV_, but not all: INVALID_OPENING_QUOTE).
 */
function tableError(failure: unknown, o: RecordOptions): unknown {
  const e = failure as Error & { code?: string };
  if (!(failure instanceof CliError) && (failure instanceof CsvError || (typeof e?.code === 'string' && e.code.startsWith('CSV_')))) {
    return new CliError(
      `${escapeText(o.source)}: ${escapeText(e.message)}`,
      `check the ${o.format === 'tsv' ? 'TSV' : 'CSV'} or pass --format lines`,
      1,
    );
  }
  return failure;
}

/**
 * The records csv-parse reads from bytes[start, end) of a CSV or TSV input,
 * `linesBefore` lines into it (the lines before the bytes, as csv-parse
 * counts them): each with its line number (plus lineOffset) as tableRecords
 * gives it and the bytes read through its end, or the error tableRecords
 * throws there, words and line included. The native reader (record-native.ts,
 * record-blocks.ts) hands here what it leaves to csv-parse. `to`: stop after
 * that many records; `open`: the bytes may end inside a record, so an
 * unclosed quote at their end is no error (no records then); `bom`: the
 * bytes start the input.
 */
export function tableSlice(
  bytes: Uint8Array,
  start: number,
  end: number,
  linesBefore: number,
  o: RecordOptions,
  { to = -1, open = false, bom = false }: { to?: number; open?: boolean; bom?: boolean } = {},
): { record: string[]; line: number; bytes: number }[] {
  const options = { ...tableParseOptions(o), bom, to };
  const slice = Buffer.from(bytes.buffer, bytes.byteOffset + start, end - start);
  try {
    return (parseSync(slice, options) as unknown as { record: string[]; info: { lines: number; bytes: number } }[]).map((r) => ({
      record: r.record,
      line: linesBefore + r.info.lines + (o.lineOffset ?? 0),
      bytes: r.info.bytes,
    }));
  } catch (first) {
    if (open && (first as { code?: string }).code === 'CSV_QUOTE_NOT_CLOSED') return [];
    // Parsed again after as many (empty, skipped) lines as come before it, so that
    // csv-parse's message names the line it would name reading the whole input.
    try {
      parseSync(Buffer.concat([Buffer.alloc(linesBefore, 0x0a), slice]), options);
    } catch (e) {
      throw tableError(e, o);
    }
    throw new Error('csv-parse failed on a record only when read alone');
  }
}

/** A table record's document (line: its line number, lineOffset included). */
export function tableDoc(rec: readonly string[], line: number, ti: number, ii: number, o: RecordOptions): Doc {
  return { id: ii >= 0 && rec[ii] !== undefined ? rec[ii] : lineId(o, line), text: rec[ti] ?? '', line };
}

/** CSV or TSV, with a header row naming the columns unless --no-header or --columns says there is none. TSV has no quoting (IANA text/tab-separated-values). */
async function* tableRecords(input: Readable, o: RecordOptions): AsyncGenerator<Doc> {
  let ti: number, ii: number, names: string[] | undefined;
  try {
    ({ ti, ii, names } = tableColumns(o));
  } catch (e) {
    input.destroy();
    throw e;
  }
  const parser = parse(tableParseOptions(o));
  let failure: unknown;
  input.on('error', (e) => parser.destroy(e));
  // An input destroyed without an error (stdin on SIGINT/SIGTERM) never ends the
  // pipe: end the parser, or the loop below waits forever and Node exits 13.
  input.on('close', () => {
    if (!input.readableEnded) parser.end();
  });
  if (o.onBytes) input.on('data', (c: Buffer) => o.onBytes!(c.length));
  input.pipe(parser);
  let text = ti;
  let id = ii;
  let header = names;
  try {
    for await (const row of parser as AsyncIterable<{ record: string[]; info: { lines: number } }>) {
      const rec = row.record;
      if (!header) {
        header = rec;
        ({ ti: text, ii: id } = headerColumns(header, o));
        continue;
      }
      yield tableDoc(rec, row.info.lines + (o.lineOffset ?? 0), text, id, o);
    }
  } catch (e) {
    failure = e;
  } finally {
    input.unpipe(parser);
    parser.destroy();
  }
  if (failure) throw tableError(failure, o);
}

/** The records of one input, in order. */
export function readRecords(input: Readable, o: RecordOptions): AsyncGenerator<Doc> {
  return o.format === 'csv' || o.format === 'tsv' ? tableRecords(input, o) : lineRecords(input, o);
}
