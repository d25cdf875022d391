// Reading and re-sealing cusim container files (docs/persistence.md) in tests:
// crafted files whose checksums hold reach the loaders' value checks, and the
// corruption fuzz shared by every loader.
import { expect } from 'vitest';
import { native } from '../lib/addon.js';
import { rng } from './helpers.js';

const DATA_START = 64 + 16 * 32;
const BLOCK = 1 << 20;

export interface SectionInfo {
  tag: string;
  offset: number;
  bytes: number;
}

function tagNumber(tag: string): number {
  return (tag.charCodeAt(0) | (tag.charCodeAt(1) << 8) | (tag.charCodeAt(2) << 16) | (tag.charCodeAt(3) << 24)) >>> 0;
}

const xxh64 = (b: Uint8Array, seed: number): bigint => BigInt('0x' + (native().persistXxh64(b, seed) as string));

/** The header fields and section table of a container file. */
export function parseContainer(buf: Buffer): { kind: string; version: number; sections: SectionInfo[] } {
  const count = buf.readUInt32LE(36);
  const sections: SectionInfo[] = [];
  for (let i = 0; i < count; i++) {
    const at = 64 + i * 32;
    sections.push({
      tag: buf.toString('latin1', at, at + 4),
      offset: Number(buf.readBigUInt64LE(at + 8)),
      bytes: Number(buf.readBigUInt64LE(at + 16)),
    });
  }
  return { kind: buf.toString('latin1', 16, 32).replace(/\0+$/, ''), version: buf.readUInt32LE(32), sections };
}

/** The bytes of one section. */
export function sectionBytes(buf: Buffer, tag: string): Buffer {
  const s = parseContainer(buf).sections.find((x) => x.tag === tag);
  if (!s) throw new Error(`no section ${tag}`);
  return buf.subarray(s.offset, s.offset + s.bytes);
}

/** A copy of `buf` with section `tag` replaced by `data` and every checksum and offset made valid again. */
export function resealed(buf: Buffer, tag: string, data: Uint8Array): Buffer {
  const { sections } = parseContainer(buf);
  const parts = sections.map((s) => (s.tag === tag ? Buffer.from(data) : buf.subarray(s.offset, s.offset + s.bytes)));
  const head = Buffer.from(buf.subarray(0, DATA_START));
  let offset = DATA_START;
  parts.forEach((p, i) => {
    const at = 64 + i * 32;
    const blocks = Buffer.alloc(8 * Math.ceil(p.length / BLOCK));
    for (let b = 0; b * BLOCK < p.length; b++) blocks.writeBigUInt64LE(xxh64(p.subarray(b * BLOCK, (b + 1) * BLOCK), 0), 8 * b);
    head.writeBigUInt64LE(BigInt(offset), at + 8);
    head.writeBigUInt64LE(BigInt(p.length), at + 16);
    head.writeBigUInt64LE(xxh64(blocks, tagNumber(sections[i].tag)), at + 24);
    offset += p.length;
  });
  head.writeBigUInt64LE(BigInt(offset), 40);
  head.writeBigUInt64LE(xxh64(Buffer.concat([head.subarray(0, 56), head.subarray(64)]), 0), 56);
  return Buffer.concat([head, ...parts]);
}

/**
 * Random truncations and single-byte flips of `good` (fixed seed), each
 * loaded through `load`: every one must reject with a coded error, and no
 * load may hang (each runs under a deadline). Returns the codes seen.
 */
export async function corruptionFuzz(
  good: Buffer,
  load: (bytes: Buffer) => Promise<unknown>,
  { seed = 7, flips = 120, truncations = 60 }: { seed?: number; flips?: number; truncations?: number } = {},
): Promise<Map<string, number>> {
  const r = rng(seed);
  const seen = new Map<string, number>();
  const cases: Buffer[] = [];
  for (let i = 0; i < truncations; i++) cases.push(good.subarray(0, Math.floor(r() * good.length)));
  cases.push(Buffer.concat([good, Buffer.from([0])]));
  for (let i = 0; i < flips; i++) {
    const b = Buffer.from(good);
    const at = Math.floor(r() * b.length);
    b[at] ^= 1 + Math.floor(r() * 255);
    cases.push(b);
  }
  for (const c of cases) {
    let err: unknown;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([load(c), new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('load hung')), 10_000)))]);
    } catch (e) {
      err = e;
    } finally {
      clearTimeout(timer);
    }
    expect(err, `a damaged file (${c.length} of ${good.length} bytes) loaded`).toBeInstanceOf(Error);
    const code = (err as { code?: string }).code;
    expect(code, String(err)).toBe('CUSIM_BAD_FILE');
    seen.set(code!, (seen.get(code!) ?? 0) + 1);
  }
  return seen;
}
