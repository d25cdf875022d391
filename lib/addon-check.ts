// A platform package's binary is checked before it is loaded: its package.json
// records the size and SHA-256 of cusim.node (scripts/packages.mjs writes the
// record). Loading a truncated .node file does not throw: the dynamic loader
// maps pages past the end of the file, and Node dies with a bare SIGBUS on the
// first touch, before any JavaScript can report it. The check reads the file
// once in 1 MiB chunks (tens of milliseconds for the CUDA binary).
import { createHash } from 'node:crypto';
import { closeSync, openSync, readFileSync, readSync, statSync } from 'node:fs';
import path from 'node:path';

/** The package.json field holding the record. */
export const BINARY_RECORD_FIELD = 'cusimBinary';

export interface BinaryRecord {
  /** The binary's name inside the package. */
  file: string;
  size: number;
  /** Lowercase hex. */
  sha256: string;
}

/** Size and SHA-256 of `file`, read in chunks (memory holds one chunk). */
export function binaryDigest(file: string): { size: number; sha256: string } {
  const fd = openSync(file, 'r');
  try {
    const hash = createHash('sha256');
    const chunk = Buffer.allocUnsafe(1 << 20);
    let size = 0;
    for (let n; (n = readSync(fd, chunk, 0, chunk.length, null)) > 0; size += n) hash.update(chunk.subarray(0, n));
    return { size, sha256: hash.digest('hex') };
  } finally {
    closeSync(fd);
  }
}

function recordOf(manifest: string): BinaryRecord | undefined {
  const r = (JSON.parse(readFileSync(manifest, 'utf8')) as Record<string, unknown>)[BINARY_RECORD_FIELD] as
    Partial<BinaryRecord> | undefined;
  if (!r || typeof r.file !== 'string' || typeof r.size !== 'number' || typeof r.sha256 !== 'string') return undefined;
  return { file: r.file, size: r.size, sha256: r.sha256.toLowerCase() };
}

/**
 * Why the binary `file` of a platform package must not be loaded, or
 * undefined when it matches the record in the package.json beside it. A
 * package without a record (hand-made, or damaged) is not loaded either.
 */
export function binaryDamage(file: string): string | undefined {
  const manifest = path.join(path.dirname(file), 'package.json');
  let record: BinaryRecord | undefined;
  try {
    record = recordOf(manifest);
  } catch (e) {
    return `its package.json cannot be read (${(e as Error).message.split('\n')[0]})`;
  }
  if (!record || record.file !== path.basename(file)) {
    return `its package.json (${manifest}) records no size and SHA-256 for ${path.basename(file)}`;
  }
  let size: number;
  try {
    size = statSync(file).size;
  } catch (e) {
    return `it cannot be read (${(e as Error).message})`;
  }
  if (size !== record.size) return `it is ${size} bytes, but the package recorded ${record.size} (a truncated or replaced file)`;
  const got = binaryDigest(file).sha256;
  if (got !== record.sha256) return `its SHA-256 is ${got}, but the package recorded ${record.sha256} (a corrupted or replaced file)`;
  return undefined;
}
