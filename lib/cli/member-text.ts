// `cusim dedup --show-text N`: the first N characters of each group member.
// The pipeline keeps no text (memory holds the features, not the input), so
// the members are read again once the groups are known: files by path,
// records by a second pass over their input, stopping once every member is
// found. stdin cannot be read twice, so --show-text refuses it up front.
import path from 'node:path';
import type { Readable } from 'node:stream';
import { CliError } from './errors.js';
import type { RecordOptions } from './records.js';
import { readRecords } from './records.js';
import type { ReportGroup } from './report.js';
import { MAX_DOC_BYTES, readDoc } from './sources.js';

/** A records input as dedup reads it: its name, and how to open it again. */
export interface RecordSource {
  name: string;
  open: () => Readable;
  options: RecordOptions;
}

/** The first n characters of text (whole code points). */
export function clip(text: string, n: number): string {
  if (text.length <= n) return text;
  return Array.from(text.slice(0, 2 * n))
    .slice(0, n)
    .join('');
}

export function refuseStdin(paths: readonly string[]): void {
  if (paths.includes('-')) {
    throw new CliError(
      '--show-text reads the members again once the groups are known, and stdin can be read only once',
      'save the input to a file and name it instead of -',
      2,
    );
  }
}

/**
 * Sets `text` on every member of `groups`: files (`files` maps a member id to
 * its path) read again, records found by id in `records` (the first record
 * with an id wins).
 */
export async function attachTexts(
  groups: ReportGroup[],
  n: number,
  records: readonly RecordSource[],
  files: ReadonlyMap<string, string>,
  maxBytes: number,
): Promise<void> {
  const wanted = new Map<string, string | undefined>();
  for (const g of groups) for (const m of g.members) wanted.set(m.id, undefined);
  let missing = wanted.size;
  for (const id of wanted.keys()) {
    const file = files.get(id);
    if (file === undefined) continue;
    const d = readDoc(file, id, maxBytes);
    wanted.set(id, 'text' in d ? clip(d.text, n) : '');
    missing--;
  }
  for (const src of records) {
    if (missing === 0) break;
    const input = src.open();
    try {
      for await (const d of readRecords(input, src.options)) {
        if (wanted.has(d.id) && wanted.get(d.id) === undefined) {
          wanted.set(d.id, clip(d.text, n));
          if (--missing === 0) break;
        }
      }
    } finally {
      input.destroy();
    }
  }
  for (const g of groups) for (const m of g.members) m.text = wanted.get(m.id) ?? '';
}

/** The record options dedup reads an input with (ids: line numbers prefixed with the input's name when there are several). */
export function recordOptionsOf(
  input: { name: string; format: RecordOptions['format'] },
  inputs: number,
  o: Pick<RecordOptions, 'field' | 'idField' | 'delimiter' | 'header' | 'columns'> & { maxSize: number },
): RecordOptions {
  return {
    format: input.format,
    field: o.field,
    idField: o.idField,
    delimiter: o.delimiter,
    header: o.header,
    columns: o.columns,
    source: input.name,
    idPrefix: inputs > 1 ? input.name : undefined,
    maxRecordBytes: Math.min(o.maxSize, MAX_DOC_BYTES),
  };
}

/** The member id → path map of the files dedup read (ids are display paths). */
export function fileIds(files: readonly string[], displayPath: (abs: string) => string): Map<string, string> {
  return new Map(files.map((f) => [displayPath(f), path.resolve(f)]));
}
