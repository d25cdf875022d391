// Line-based records read in blocks and featurized on worker threads
// (lib/cli/record-blocks.ts) against the sequential reader on the main thread
// and against brute force (hashToken of each document's words): the same
// rows, ids and counts, and the first error in input order.
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { beforeAll, describe, expect, it } from 'vitest';
import { cusim, ensureDist, fromDist } from './cli-helpers.js';
import { rng, randInt } from './helpers.js';

type Dist = {
  blocks: typeof import('../lib/cli/record-blocks.js');
  records: typeof import('../lib/cli/records.js');
  pipeline: typeof import('../lib/cli/pipeline.js');
  text: typeof import('../lib/text/index.js');
};
let d: Dist;

beforeAll(async () => {
  // Workers load the compiled worker module, so everything comes from dist/.
  ensureDist();
  const load = fromDist;
  d = {
    blocks: await load('cli/record-blocks.js'),
    records: await load('cli/records.js'),
    pipeline: await load('cli/pipeline.js'),
    text: await load('text/index.js'),
  };
});

const WORDS = ['alpha', 'beta', 'gamma', 'delta', 'Überall', '東京', 'naïve', 'x', 'parse', 'json', 'node', 'gpu'];

/** JSONL (ids on some records), blank lines, CRLF, a BOM, non-ASCII words, empty texts. */
function corpus(seed: number, docs: number): string {
  const r = rng(seed);
  let s = '\uFEFF';
  for (let i = 0; i < docs; i++) {
    const n = randInt(r, 12);
    const text = Array.from({ length: n }, () => WORDS[randInt(r, WORDS.length)]).join(' ');
    const rec = randInt(r, 3) === 0 ? { id: `doc-${i}`, text } : { text };
    s += JSON.stringify(rec) + (randInt(r, 5) === 0 ? '\r\n' : '\n');
    if (randInt(r, 10) === 0) s += '\n';
  }
  return s;
}

/** `s` as a stream of chunks of random sizes (lines and UTF-8 sequences split anywhere). */
function chunked(s: string, seed: number): Readable {
  const buf = Buffer.from(s);
  const r = rng(seed);
  const parts: Buffer[] = [];
  for (let at = 0; at < buf.length;) {
    const n = 1 + randInt(r, 3000);
    parts.push(buf.subarray(at, at + n));
    at += n;
  }
  return Readable.from(parts);
}

const recordOptions = (maxRecordBytes = 1 << 20) => ({
  format: 'auto' as const,
  field: 'text',
  idField: 'id',
  source: 'stdin',
  maxRecordBytes,
});

async function sequential(s: string, minTokens: number, maxRecordBytes?: number) {
  const feat = new d.text.TextFeaturizer({ mode: 'words' });
  const stream = new d.pipeline.StreamFeaturizer(feat, minTokens, 1 << 12, undefined, undefined, { bits: 32, values: false });
  for await (const doc of d.records.readRecords(chunked(s, 1), recordOptions(maxRecordBytes))) await stream.add(doc);
  await stream.finish();
  return { m: stream.matrix(), ids: stream.ids, documents: stream.documents, tooSmall: stream.tooSmall };
}

/** `s` written to a file of its own: read straight into the blocks, not as a stream. */
function asFile(s: string): { file: string } {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'cusim-blocks-')), 'records.jsonl');
  writeFileSync(file, s);
  return { file };
}

async function inBlocks(
  s: string,
  minTokens: number,
  blockBytes: number,
  maxRecordBytes?: number,
  input: Readable | { file: string } = chunked(s, 2),
) {
  const feat = new d.text.TextFeaturizer({ mode: 'words' });
  const stream = new d.pipeline.StreamFeaturizer(feat, minTokens, 1 << 12, undefined, undefined, { bits: 32, values: false });
  let blocks = 0;
  await d.blocks.readRecordBlocks(input, {
    records: recordOptions(maxRecordBytes),
    features: { mode: 'words' },
    minTokens,
    bits: 32,
    threads: 3,
    blockBytes,
    onBlock: (r) => {
      blocks++;
      stream.addRows(r.rows, r.ids, r.documents, r.tooSmall);
    },
  });
  return { m: stream.matrix(), ids: stream.ids, documents: stream.documents, tooSmall: stream.tooSmall, blocks };
}

describe('records read in blocks on worker threads', () => {
  it('equal a sequential pass and brute force: rows, ids, counts (many blocks, and one block on this thread)', async () => {
    const s = corpus(7, 4000);
    const want = await sequential(s, 1);
    expect(want.tooSmall).toBeGreaterThan(100); // empty texts
    // Brute force: each kept document's row is the sorted set of its words' hashes.
    const docs = s
      .replace(/^\uFEFF/, '')
      .split('\n')
      .map((l, i) => [l.replace(/\r$/, ''), i + 1] as const)
      .filter(([l]) => l.trim() !== '')
      .map(([l, line]) => {
        const rec = JSON.parse(l) as { id?: string; text: string };
        return { id: rec.id ?? String(line), set: [...new Set(d.text.wordTokens(rec.text).map(d.text.hashToken))].sort((a, b) => a - b) };
      })
      .filter((x) => x.set.length > 0);
    expect(want.ids).toEqual(docs.map((x) => x.id));
    docs.forEach((x, i) => expect([...want.m.indices.subarray(want.m.indptr[i], want.m.indptr[i + 1])]).toEqual(x.set));
    for (const [blockBytes, file] of [1 << 12, 1 << 13, 1 << 24].flatMap((b) => [[b, false] as const, [b, true] as const])) {
      const got = await inBlocks(s, 1, blockBytes, undefined, file ? asFile(s) : chunked(s, 2));
      if (blockBytes === 1 << 24) expect(got.blocks).toBe(1);
      else expect(got.blocks).toBeGreaterThan(20);
      expect(got.ids).toEqual(want.ids);
      expect(got.documents).toBe(want.documents);
      expect(got.tooSmall).toBe(want.tooSmall);
      expect(got.m.rows).toBe(want.m.rows);
      expect(got.m.indptr).toEqual(want.m.indptr);
      expect(got.m.indices).toEqual(want.m.indices);
    }
  });

  it('are cut from chunks of any size: lines longer than a block, one chunk of many blocks, block buffers reused', async () => {
    const lines = corpus(11, 1500).split('\n');
    // About 5 KB each: longer than a 4 KB block, so the block grows to hold them.
    const long = Array.from({ length: 1200 }, (_, k) => `w${k % 300}`).join(' ');
    for (let i = 10; i < lines.length; i += 60) lines[i] = JSON.stringify({ id: `long${i}`, text: `${long} x${i}` });
    const s = lines.join('\n');
    const want = await sequential(s, 1);
    expect(want.ids).toContain('long70');
    for (const input of [chunked(s, 3), Readable.from([Buffer.from(s)]), asFile(s)]) {
      const got = await inBlocks(s, 1, 1 << 12, undefined, input);
      expect(got.blocks).toBeGreaterThan(20);
      expect(got.ids).toEqual(want.ids);
      expect(got.documents).toBe(want.documents);
      expect(got.tooSmall).toBe(want.tooSmall);
      expect(got.m.indptr).toEqual(want.m.indptr);
      expect(got.m.indices).toEqual(want.m.indices);
    }
  });

  it('report the first error in input order with its line number, as the sequential reader does', async () => {
    const good = corpus(3, 3000).split('\n');
    // Two bad lines in different blocks: the earlier one is reported.
    const bad = [...good];
    bad[1700] = '{"text": oops}';
    bad[2600] = 'not json either';
    const s = bad.join('\n');
    const seq = await sequential(s, 1).catch((e: Error) => e);
    expect(seq).toBeInstanceOf(Error);
    expect((seq as Error).message).toMatch(/^stdin line 1701 is not valid JSON$/);
    for (const blockBytes of [1 << 12, 1 << 24]) {
      await expect(inBlocks(s, 1, blockBytes)).rejects.toMatchObject({ message: (seq as Error).message, exitCode: 1 });
      await expect(inBlocks(s, 1, blockBytes, undefined, asFile(s))).rejects.toMatchObject({
        message: (seq as Error).message,
        exitCode: 1,
      });
    }
    // A line longer than the record limit, inside a block and across blocks.
    const long = [...good];
    long[900] = JSON.stringify({ text: 'w '.repeat(6000) });
    const s2 = long.join('\n');
    const seq2 = (await sequential(s2, 1, 10_000).catch((e: Error) => e)) as Error;
    expect(seq2.message).toMatch(/^stdin line 901 is longer than 10000 bytes$/);
    for (const blockBytes of [1 << 12, 1 << 24]) {
      await expect(inBlocks(s2, 1, blockBytes, 10_000)).rejects.toMatchObject({ message: seq2.message });
      await expect(inBlocks(s2, 1, blockBytes, 10_000, asFile(s2))).rejects.toMatchObject({ message: seq2.message });
    }
  });

  it('cusim dedup gives the same report with worker threads as with the main thread only', async () => {
    // Over 8 MiB, so the reader splits it into blocks for the workers.
    const dir = mkdtempSync(path.join(tmpdir(), 'cusim-blocks-'));
    const file = path.join(dir, 'docs.jsonl');
    const r = rng(11);
    const lines: string[] = [];
    let prev = '';
    for (let i = 0; i < 40_000; i++) {
      // Random documents, every 100th a copy of the one before with one word changed.
      const text = i % 100 === 99 ? prev.replace(/^\S+/, 'changed') : Array.from({ length: 50 }, () => `w${randInt(r, 5000)}`).join(' ');
      lines.push(JSON.stringify({ text }));
      prev = text;
    }
    writeFileSync(file, lines.join('\n') + '\n');
    const run = async (threads: string) => {
      const out = await cusim(
        ['dedup', file, '--field', 'text', '--json', '--backend', 'cpu', '--threads', threads, '-t', '0.8', '--quiet'],
        {
          maxBuffer: 1 << 28,
        },
      );
      expect(out.status, out.stderr).toBe(0);
      const j = JSON.parse(out.stdout) as { groups: unknown[]; input: unknown };
      return { groups: j.groups, input: j.input };
    };
    const one = await run('1');
    expect(one.groups.length).toBeGreaterThan(10);
    expect(await run('3')).toEqual(one);
  });
});
