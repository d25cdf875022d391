// The fingerprint of a job's input: size and SHA-256 of every byte range (or
// every whole file) as the job was planned. A worker reads its share, hashes
// it and compares before parsing anything, so a worker that sees a different
// file (edited, truncated, another host's copy) is refused instead of mixing
// its records into the index.
import { createHash } from 'node:crypto';
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { CliError } from '../cli/errors.js';
import { escapeText } from '../cli/escape.js';

export interface Fingerprint {
  /** Bytes. */
  size: number;
  /** SHA-256, hex. */
  sha256: string;
}

export function newHash(): ReturnType<typeof createHash> {
  return createHash('sha256');
}

export function fingerprintOf(buf: Uint8Array): Fingerprint {
  return { size: buf.length, sha256: newHash().update(buf).digest('hex') };
}

function mismatch(what: string, detail: string): CliError {
  return new CliError(
    `the input differs from the job's: ${what} ${detail}`,
    'give every worker the same files (or the same object paths), or start a new job with another --prefix',
    2,
  );
}

/** The bytes [start, end) of a file (fewer where it ends first). */
export function readBytes(file: string, start: number, end: number): Buffer {
  const fd = openSync(file, 'r');
  try {
    const buf = Buffer.allocUnsafe(end - start);
    let at = 0;
    while (at < buf.length) {
      const n = readSync(fd, buf, at, buf.length - at, start + at);
      if (n === 0) break;
      at += n;
    }
    return buf.subarray(0, at);
  } finally {
    closeSync(fd);
  }
}

/**
 * The bytes [start, end) of `file`, read only if the file still has
 * `fileSize` bytes and checked against `want` before they are returned.
 */
export function readChecked(file: string, fileSize: number, start: number, end: number, want: Fingerprint, name: string): Buffer {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (e) {
    throw new CliError(
      `cannot open ${escapeText(name)}: ${(e as NodeJS.ErrnoException).code ?? e}`,
      'every worker must see the job input',
      1,
    );
  }
  try {
    const size = fstatSync(fd).size;
    if (size !== fileSize) throw mismatch(escapeText(name), `has ${size} bytes, the job's has ${fileSize}`);
    const buf = Buffer.allocUnsafe(end - start);
    for (let at = 0; at < buf.length;) {
      const n = readSync(fd, buf, at, buf.length - at, start + at);
      if (n === 0) throw mismatch(escapeText(name), `ended at byte ${start + at}`);
      at += n;
    }
    const got = fingerprintOf(buf);
    if (got.sha256 !== want.sha256)
      throw mismatch(
        escapeText(name),
        `bytes ${start}-${end} hash to ${got.sha256.slice(0, 16)}…, the job's to ${want.sha256.slice(0, 16)}…`,
      );
    return buf;
  } finally {
    closeSync(fd);
  }
}
