// The native record reader (native/records.h): a block of JSONL or plain
// lines parsed with simdjson, tokenized and hashed in C++ on the thread pool,
// with no JavaScript object or string per document. The JavaScript reader
// (record-worker.ts) stays the definition: lines the native reader leaves to
// it (invalid JSON, missing fields, odd ids, Unicode whitespace, over-long
// lines) are read here with the same code, errors included, and documents
// the native tokenizer leaves to JavaScript are featurized as hashedRows()
// does; both are spliced in at their place, so the rows, ids and first error
// are those of the JavaScript reader.
import { native } from '../addon.js';
import type { NativeRecordBlock, SketchParams, TextTokenizerNative, TokenHasherNative } from '../native-types.js';
import type { HashedRows, TextFeaturizer } from '../text/index.js';
import type { IdList } from '../dedup/ids.js';
import { blockLine, lineId, tableDoc, tableSlice } from './records.js';
import type { Doc, RecordOptions } from './records.js';
import type { BlockResult, BlockTask } from './record-worker.js';

/** Which reader parses line records: the native one where it loads, or the JavaScript one. */
export type RecordReader = 'native' | 'js';

const NATIVE = 0;
const JS_LINE = 2;
const ID_LINE = 0;
const ID_STRING = 1;
const ID_NUMBER = 2;
const ID_TRUE = 3;
const ID_FALSE = 4;
const ID_OBJECT = 5;
/** An id read in JavaScript (a JS line's): strings[a]. */
const ID_JS = 6;

/**
 * The parser of the native record reader ('simdjson 3.0.1'), or why it is
 * not used: an addon built without simdjson, or a field name that the
 * native reader would look up differently from JavaScript.
 */
export function nativeRecordReader(
  feat: TextFeaturizer,
  records: Pick<RecordOptions, 'field' | 'idField'> & Partial<Pick<RecordOptions, 'format' | 'delimiter'>>,
): { reader?: TextTokenizerNative; why: string } {
  let version: string | undefined;
  const table = records.format === 'csv' || records.format === 'tsv';
  try {
    version = native().recordReader;
    if (version && table) version = native().tableReader;
  } catch {
    return { why: 'the addon does not load' };
  }
  const handle = feat.nativeHandle;
  if (!version || (handle && typeof handle.recordsAsync !== 'function'))
    return { why: `the addon was built without ${table ? 'libcsv' : 'simdjson'}` };
  if (!handle) return { why: 'native tokenizer off' };
  if (table) {
    const d = tableDelimiter(records as RecordOptions);
    if (Buffer.byteLength(d) !== 1 || d === '\r' || d === '\n' || (records.format === 'csv' && d === '"'))
      return { why: `the delimiter '${d}' is read in JavaScript` };
    return { reader: handle, why: version };
  }
  // record[name] also finds Object.prototype's members ('toString',
  // '__proto__'), and a lone surrogate has no UTF-8: JavaScript's to read.
  for (const name of [records.field, records.idField]) {
    if (name in Object.prototype || Buffer.from(name).toString() !== name) return { why: `the field name '${name}' is read in JavaScript` };
  }
  return { reader: handle, why: version };
}

/** The CSV/TSV field separator (csv-parse's, records.ts). */
export function tableDelimiter(o: Pick<RecordOptions, 'format' | 'delimiter'>): string {
  return o.delimiter ?? (o.format === 'tsv' ? '\t' : ',');
}

/**
 * A CSV/TSV record the native reader left to csv-parse: block bytes
 * [start, end), `before` lines into the block. One record, or csv-parse's
 * error for it as reading the whole input gives it.
 */
function tableEntry(t: BlockTask, start: number, end: number, before: number, records: RecordOptions): Doc | undefined {
  const lineOffset = records.lineOffset ?? 0;
  const recs = tableSlice(t.block, start, end, t.firstLine - lineOffset + before, records);
  // The native reader cuts records where csv-parse does for any input it accepts.
  if (recs.length > 1) throw new Error(`${records.source}: a CSV record read natively held ${recs.length} records`);
  return recs.length ? tableDoc(recs[0].record, recs[0].line, t.table!.text, t.table!.id, records) : undefined;
}

class NativeIds implements IdList {
  private readonly decoder = new TextDecoder('utf-8');
  constructor(
    readonly length: number,
    private readonly kind: Uint8Array,
    private readonly a: Uint32Array,
    private readonly b: Uint32Array,
    // Only the id arrays: the block's rows are not kept alive by its ids.
    private readonly idBytes: Uint8Array,
    private readonly nums: Float64Array,
    private readonly strings: readonly string[],
    private readonly firstLine: number,
    private readonly records: RecordOptions,
  ) {}

  get(i: number): string {
    const a = this.a[i];
    switch (this.kind[i]) {
      case ID_LINE:
        return lineId(this.records, this.firstLine + a + 1);
      case ID_STRING:
        return this.decoder.decode(this.idBytes.subarray(a, this.b[i]));
      case ID_NUMBER:
        return String(this.nums[a]);
      case ID_TRUE:
        return 'true';
      case ID_FALSE:
        return 'false';
      case ID_OBJECT:
        return '[object Object]';
      default:
        return this.strings[a];
    }
  }
}

/** Featurizes texts as TextFeaturizer.hashedRows() does (on this thread, or on a worker). */
export type HashTexts = (texts: string[], minTokens: number, bits: number) => Promise<HashedRows>;

/**
 * One block read natively; the same result as featurizeBlock(t, feat) gives.
 * `hashTexts` (default: feat.hashedRows on this thread) featurizes the
 * documents left to JavaScript.
 */
export async function featurizeNativeBlock(
  t: BlockTask,
  reader: TextTokenizerNative,
  feat: TextFeaturizer,
  hashTexts: HashTexts = (texts, minTokens, bits) => feat.hashedRows(texts, { minTokens, bits }),
  /** NativeRecordOptions.handed: t.block's buffer is the block's alone, padded, and left alone until this settles. */
  handed = false,
  /** NativeRecordOptions.hasher: splits and hashes the block's texts (a GPU's) instead of `reader`. */
  hasher?: TokenHasherNative,
): Promise<BlockResult> {
  return nativeBlockResult(t, await readNativeBlock(t, reader, handed, hasher), hashTexts);
}

/**
 * The native read of a block (the first half of featurizeNativeBlock), its
 * lines numbered from t.firstLine. Its `lines` (the block's line count) lets
 * a reader number the next block's lines from it instead of counting them.
 */
export function readNativeBlock(
  t: BlockTask,
  reader: TextTokenizerNative,
  handed = false,
  /** NativeRecordOptions.hasher: splits and hashes the block's texts (a GPU's) instead of `reader`. */
  hasher?: TokenHasherNative,
  /** NativeRecordOptions.sketch (with a hasher): the rows' band keys too. */
  sketch?: SketchParams,
): Promise<NativeRecordBlock> {
  const table = t.table && {
    delimiter: tableDelimiter(t.records as RecordOptions),
    quoted: t.format === 'csv',
    textColumn: t.table.text,
    idColumn: t.table.id,
  };
  return reader.recordsAsync!(t.block, {
    jsonl: t.format === 'jsonl',
    ...(table ? { table } : {}),
    field: t.records.field,
    idField: t.records.idField,
    maxRecordBytes: t.records.maxRecordBytes,
    minTokens: t.minTokens,
    bits: t.bits,
    values: t.values !== false,
    firstLine: t.firstLine,
    handed,
    ...(hasher ? { hasher } : {}),
    ...(hasher && sketch ? { sketch } : {}),
  });
}

/**
 * The block's result from its native read (the second half of
 * featurizeNativeBlock). `base`: the read numbered lines from 0, and they go
 * on from t.firstLine = base, added here.
 */
export async function nativeBlockResult(
  t: BlockTask,
  r: NativeRecordBlock,
  hashTexts: HashTexts,
  base = 0,
  /** The sketch r was read with, if any: its keys go with the rows. */
  sketch?: SketchParams,
): Promise<BlockResult> {
  if (base !== 0) for (let i = 0; i < r.keptLine.length; i++) r.keptLine[i] += base;
  const records = t.records as RecordOptions;
  const entries = r.entries ?? r.kind!.length;
  // No entry left to JavaScript: the native arrays are the block's, as they come.
  if (r.jsTextEnds.length + r.jsLineStart.length === 0 && r.keptIdKind) {
    const kept = r.keptIdKind.length;
    const ids = new NativeIds(kept, r.keptIdKind, r.keptIdA, r.keptIdB, r.idBytes, r.nums, [], t.firstLine, records);
    return {
      task: t.task,
      ids,
      lines: r.keptLine,
      documents: entries,
      tooSmall: entries - kept,
      rows: { tokens: r.tokens, indptr: r.rowPtr, indices: r.cols, values: r.values },
      ...(sketch && r.keys && r.empty ? { bandKeys: { ...sketch, keys: r.keys, empty: r.empty } } : {}),
    };
  }
  // Rows spliced with JavaScript's have no keys for those: all are hashed as usual.
  r.keys?.dispose();
  r.empty?.dispose();
  return mixedBlock(t, r as Required<NativeRecordBlock>, records, entries, hashTexts);
}

/** A block with entries left to JavaScript: those read here, spliced in at their place. */
async function mixedBlock(
  t: BlockTask,
  r: Required<NativeRecordBlock>,
  records: RecordOptions,
  entries: number,
  hashTexts: HashTexts,
): Promise<BlockResult> {
  const decoder = new TextDecoder('utf-8');
  // Entries left to JavaScript, in order: a JS line's record (undefined:
  // blank) or a text; the first failing line throws here, as it would there.
  const jsDocs: (Doc | undefined)[] = [];
  const texts: string[] = [];
  for (let e = 0, tx = 0, ln = 0; e < entries; e++) {
    const k = r.kind[e];
    if (k === NATIVE) continue;
    if (k === JS_LINE) {
      const d = t.table
        ? tableEntry(t, r.jsLineStart[ln], r.jsLineEnd[ln], r.line[e], records)
        : blockLine(t.block, r.jsLineStart[ln], r.jsLineEnd[ln], t.firstLine + r.line[e] + 1, t.format as 'lines', records, decoder);
      ln++;
      jsDocs.push(d);
      if (d) texts.push(d.text);
    } else {
      const text = decoder.decode(r.jsText.subarray(tx ? r.jsTextEnds[tx - 1] : 0, r.jsTextEnds[tx]));
      tx++;
      jsDocs.push(undefined);
      texts.push(text);
    }
  }
  const js: HashedRows | undefined = texts.length ? await hashTexts(texts, t.minTokens, t.bits) : undefined;

  // No entry left to JavaScript: the native arrays are the block's.
  const pure = r.jsTextEnds.length + r.jsLineStart.length === 0;
  let docs = 0;
  let kept = 0;
  const tokens = pure ? r.tokens : new Uint32Array(entries);
  const idKind = new Uint8Array(entries);
  const idA = new Uint32Array(entries);
  const idB = new Uint32Array(entries);
  const lines = new Float64Array(entries);
  const strings: string[] = [];
  // Row sources of the kept documents, in order: >= 0 native row, < 0 -(JS row + 1).
  const rowOf = pure ? undefined : new Int32Array(entries);
  for (let e = 0, j = 0, jd = 0, nr = 0, jr = 0; e < entries; e++) {
    let n: number;
    let id = r.idKind[e];
    let a = id === ID_LINE ? r.line[e] : r.idA[e];
    if (r.kind[e] === NATIVE) {
      n = r.tokens[e];
      if (rowOf && n >= t.minTokens) rowOf[kept] = nr++;
    } else {
      const d = jsDocs[j++];
      if (r.kind[e] === JS_LINE) {
        if (!d) continue;
        id = ID_JS;
        a = strings.length;
        strings.push(d.id);
      }
      n = js!.tokens[jd++];
      if (n >= t.minTokens) rowOf![kept] = -(jr++ + 1);
    }
    tokens[docs++] = n;
    if (n < t.minTokens) continue;
    idKind[kept] = id;
    idA[kept] = a;
    idB[kept] = r.idB[e];
    lines[kept] = r.kind[e] === JS_LINE && t.table ? jsDocs[j - 1]!.line! : t.firstLine + r.line[e] + 1;
    kept++;
  }
  const ids = new NativeIds(
    kept,
    idKind.slice(0, kept),
    idA.slice(0, kept),
    idB.slice(0, kept),
    r.idBytes,
    r.nums,
    strings,
    t.firstLine,
    records,
  );
  const result = { task: t.task, ids, lines: lines.slice(0, kept), documents: docs, tooSmall: docs - kept };
  if (pure) return { ...result, rows: { tokens: r.tokens, indptr: r.rowPtr, indices: r.cols, values: r.values } };

  const nnz = r.cols.length + (js?.indices.length ?? 0);
  const indptr = new Uint32Array(kept + 1);
  const indices = new Uint32Array(nnz);
  const values = r.values && new Float32Array(nnz);
  // Copied run by run (rows consecutive in one source), not row by row.
  let at = 0;
  for (let row = 0; row < kept;) {
    const src = rowOf![row];
    const native = src >= 0;
    const step = native ? 1 : -1;
    let end = row + 1;
    while (end < kept && rowOf![end] === src + step * (end - row)) end++;
    const [ptr, cols, vals, s] = native ? [r.rowPtr, r.cols, r.values, src] : [js!.indptr, js!.indices, js!.values, -src - 1];
    const lo = ptr[s];
    const hi = ptr[s + end - row];
    indices.set(cols.subarray(lo, hi), at);
    if (values) values.set(vals!.subarray(lo, hi), at);
    for (let i = 1; i <= end - row; i++) indptr[row + i] = at + ptr[s + i] - lo;
    at += hi - lo;
    row = end;
  }
  return { ...result, rows: { tokens: tokens.subarray(0, docs), indptr, indices, ...(values ? { values } : {}) } };
}
