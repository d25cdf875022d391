// Names and texts come from file names and records: anything the terminal or
// a line-based reader would act on (C0/C1 controls, DEL, line and paragraph
// separators, bidirectional overrides) is written as a visible escape, so no
// name can move the cursor, recolour the screen or forge a report line.

// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\\]/g;

const SHORT: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t', '\\': '\\\\' };

function hex(c: string): string {
  const n = c.charCodeAt(0);
  return n < 0x100 ? `\\x${n.toString(16).padStart(2, '0')}` : `\\u${n.toString(16).padStart(4, '0')}`;
}

/**
 * For tables, CSV and messages: C-style escapes (\n, \t, \x1b, \u202e) and a
 * doubled backslash, so the original is recoverable and the output is one line.
 */
export function escapeText(s: string): string {
  return s.replace(UNSAFE, (c) => SHORT[c] ?? hex(c));
}

// JSON.stringify escapes U+0000–U+001F itself; these it leaves raw.
const JSON_UNSAFE = /[\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/** JSON with every control and bidi character as a \u escape: parses back to the same strings. */
export function safeJson(value: unknown, indent?: number): string {
  const json = JSON.stringify(value, null, indent);
  // Every character to escape is U+007F or above: ASCII output (its UTF-8 as
  // long as it is, a native count) skips the regular expression's pass.
  if (Buffer.byteLength(json) === json.length && !json.includes('\u007f')) return json;
  return json.replace(JSON_UNSAFE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** One CSV field: escaped as for tables, then quoted where it holds a comma or quote. */
export function csvField(v: string | number): string {
  const t = typeof v === 'number' ? String(v) : escapeText(v);
  return /[",]/.test(t) ? `"${t.replace(/"/g, '""')}"` : t;
}
