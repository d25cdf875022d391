// Saving and loading through the native container (docs/persistence.md). The
// in-memory MinHashLSH keeps its state in JavaScript and goes through the
// generic calls here; engines whose state is native (Hamming, clustering)
// save and load in their own native code with the same container.
import { native } from './addon.js';
import { codedError, typeError } from './errors.js';
import { describe } from './validate.js';
import type { OpenedFile } from './native-types.js';

/** A save/load path: a non-empty string without NUL characters. */
export function checkPath(path: unknown, name = 'path'): string {
  if (typeof path !== 'string' || path === '') throw typeError(`${name} must be a non-empty string, got ${describe(path)}`);
  if (path.includes('\0')) throw typeError(`${name} must not contain a NUL character`);
  return path;
}

export type Section = [tag: string, data: ArrayBufferView];

/** Writes sections under a temporary name and renames it over `path`. */
export async function saveSections(path: string, kind: string, version: number, sections: Section[]): Promise<void> {
  await native().persistSave(path, kind, version, sections);
}

/** Opens and validates a file's header and section table. */
export async function openSections(path: string, kind: string, maxVersion: number): Promise<OpenedFile> {
  return await native().persistOpen(path, kind, maxVersion);
}

/** Throws CUSIM_BAD_FILE for `path`. */
export function badFile(path: string, kind: string, why: string): Error {
  return codedError(`'${path}' is not a valid cusim ${kind} file: ${why}`, 'CUSIM_BAD_FILE');
}

/** Views a verified section as 32-bit words (sections are read into fresh, aligned buffers). */
export function u32View(b: Uint8Array): Uint32Array {
  return new Uint32Array(b.buffer, b.byteOffset, b.byteLength / 4);
}
