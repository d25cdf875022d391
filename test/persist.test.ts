// The persistence container's guarantees, through every engine that saves:
// the checksum's known answers, atomic saves (failed, interrupted and
// concurrent), non-regular files refused without waiting, odd paths.
import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { native } from '../lib/addon.js';
import { HammingIndex, MinHashLSH, StreamClusterer } from '../lib/index.js';
import { randomBits, rng } from './helpers.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dir = mkdtempSync(path.join(tmpdir(), 'cusim-persist-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function hamming(rows: number, seed: number): HammingIndex {
  const ix = new HammingIndex({ bits: 256, backend: 'cpu' });
  ix.add(randomBits(rng(seed), rows, 256));
  return ix;
}

const loaders: [string, (p: string) => Promise<{ dispose(): void }>, (p: string) => Promise<void>][] = [
  ['HammingIndex', (p) => HammingIndex.load(p), (p) => hamming(4, 1).save(p)],
  ['MinHashLSH', (p) => MinHashLSH.load(p), (p) => new MinHashLSH({ threshold: 0.5, samples: 8 }).save(p)],
  [
    'StreamClusterer',
    (p) => StreamClusterer.load(p, { backend: 'cpu' }),
    (p) => new StreamClusterer({ threshold: 0.5, backend: 'cpu' }).save(p),
  ],
];

describe('persistence container', () => {
  it('XXH64 known answers (xxhsum -H64)', () => {
    const x = (b: Uint8Array) => native().persistXxh64(b, 0) as string;
    expect(x(new Uint8Array(0))).toBe('ef46db3751d8e999');
    expect(x(Buffer.from('abc'))).toBe('44bc2cf5ad770999');
    expect(x(new Uint8Array(100))).toBe('17bb1103c92c502f');
    expect(x(Buffer.from('Nobody inspects the spammish repetition'))).toBe('fbcea83c8a378bf1');
    expect(x(Uint8Array.from({ length: 1000 }, (_, i) => (i * 7 + 3) % 251))).toBe('021f7a7424085ea4');
  });

  it.each(loaders)('%s: FIFOs, devices and directories are refused at once, and never tie up the threadpool', async (_, load, save) => {
    const fifo = path.join(dir, `fifo-${_}`);
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const t0 = performance.now();
    // More than libuv's 4 threads: a load that waited on the FIFO would starve the next one.
    const waits = await Promise.allSettled(Array.from({ length: 8 }, () => load(fifo)));
    for (const w of waits) {
      expect(w.status).toBe('rejected');
      expect((w as PromiseRejectedResult).reason).toMatchObject({
        code: 'CUSIM_INVALID_ARGUMENT',
        message: expect.stringMatching(/is a FIFO, not a regular file/),
      });
    }
    await expect(save(fifo)).rejects.toThrow(/is a FIFO, not a regular file/);
    expect(lstatSync(fifo).isFIFO()).toBe(true); // not replaced
    await expect(load('/dev/null')).rejects.toThrow(/is a character device/);
    await expect(load(dir)).rejects.toThrow(/is a directory/);
    await expect(save(dir)).rejects.toThrow(/is a directory/);
    await expect(save(dir + '/')).rejects.toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT' });
    await expect(load('x\0y')).rejects.toMatchObject({ code: 'CUSIM_INVALID_ARGUMENT', message: expect.stringMatching(/NUL/) });
    await expect(save('x\0y')).rejects.toThrow(TypeError);
    await expect(save(path.join(dir, 'no-such-dir', 'f.bin'))).rejects.toMatchObject({
      code: 'CUSIM_IO_ERROR',
      message: expect.stringMatching(/ENOENT/),
    });
    expect(performance.now() - t0).toBeLessThan(5000);
  });

  it('a save through a symlink replaces the file it names and keeps the mode; no temporary file is left', async () => {
    const sub = path.join(dir, 'links');
    mkdirSync(sub);
    const target = path.join(sub, 'real.bin');
    const link = path.join(sub, 'link.bin');
    using a = hamming(10, 2);
    await a.save(target);
    chmodSync(target, 0o600);
    symlinkSync(target, link);
    using b = hamming(20, 3);
    await b.save(link);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(statSync(target).mode & 0o777).toBe(0o600);
    using back = await HammingIndex.load(target);
    expect(back.size).toBe(20);
    expect(readdirSync(sub).sort()).toEqual(['link.bin', 'real.bin']);
  });

  it('concurrent saves to one path leave a file equal to one of them', async () => {
    const sub = path.join(dir, 'race');
    mkdirSync(sub);
    const file = path.join(sub, 'ix.bin');
    const xs = [hamming(3000, 4), hamming(5000, 5)];
    const q = randomBits(rng(6), 3, 256);
    const want = await Promise.all(xs.map((x) => x.search(q, { k: 5 })));
    for (let round = 0; round < 3; round++) {
      await Promise.all(Array.from({ length: 8 }, (_, i) => xs[i % 2].save(file)));
      using back = await HammingIndex.load(file);
      const got = await back.search(q, { k: 5 });
      expect([3000, 5000]).toContain(back.size);
      expect(got.ids).toEqual(want[back.size === 3000 ? 0 : 1].ids);
    }
    expect(readdirSync(sub)).toEqual(['ix.bin']);
  });

  // Children run the compiled package (dist/), as a user's process would.
  const child = (script: string, limitKb?: number) => {
    const js = `import { HammingIndex } from ${JSON.stringify(path.join(root, 'dist', 'index.js'))};\n${script}`;
    const cmd = limitKb ? `ulimit -f ${limitKb}; exec node --input-type=module -e "$0"` : 'exec node --input-type=module -e "$0"';
    return spawn('bash', ['-c', cmd, js], { stdio: ['ignore', 'pipe', 'pipe'] });
  };
  const output = (p: ReturnType<typeof child>) =>
    new Promise<{ code: number | null; signal: string | null; out: string }>((resolve) => {
      let out = '';
      p.stdout!.on('data', (d) => (out += d));
      p.stderr!.on('data', (d) => (out += d));
      p.on('close', (code, signal) => resolve({ code, signal, out }));
    });

  it('a failed save (file size limit: EFBIG) reports CUSIM_IO_ERROR and leaves the old file and no temporary file', async () => {
    const sub = path.join(dir, 'efbig');
    mkdirSync(sub);
    const file = path.join(sub, 'ix.bin');
    using small = hamming(100, 7);
    await small.save(file);
    const before = readFileSync(file);
    const r = await output(
      child(
        `const ix = new HammingIndex({ bits: 256, backend: 'cpu' }); ix.add(new Uint32Array(8 * 40000).fill(7));
         try { await ix.save(${JSON.stringify(file)}); console.log('saved'); } catch (e) { console.log(e.code, e.message); }`,
        256,
      ),
    );
    expect(r.out).toMatch(/^CUSIM_IO_ERROR saving .* failed while writing: EFBIG .*the existing file \(if any\) is unchanged/);
    expect(readFileSync(file).equals(before)).toBe(true);
    expect(readdirSync(sub)).toEqual(['ix.bin']);
  });

  it('a writer killed mid-save leaves a complete file (the old one or the new one)', async () => {
    const sub = path.join(dir, 'killed');
    mkdirSync(sub);
    const file = path.join(sub, 'ix.bin');
    using old = hamming(1000, 8);
    await old.save(file);
    for (const delay of [150, 400, 900]) {
      const p = child(
        `const ix = new HammingIndex({ bits: 256, backend: 'cpu' }); ix.add(new Uint32Array(8 * 300000).fill(9));
         console.log('start'); for (;;) await ix.save(${JSON.stringify(file)});`,
      );
      const done = output(p);
      await new Promise<void>((resolve) => p.stdout!.once('data', () => resolve()));
      await new Promise((resolve) => setTimeout(resolve, delay));
      p.kill('SIGKILL');
      expect((await done).signal).toBe('SIGKILL');
      using back = await HammingIndex.load(file);
      expect([1000, 300000]).toContain(back.size);
    }
    // What a killed writer can leave is its own uniquely named temporary file, never the target.
    for (const f of readdirSync(sub)) expect(f === 'ix.bin' || /^\.ix\.bin\.tmp-\d+-[0-9a-f]{16}$/.test(f)).toBe(true);
    expect(existsSync(file)).toBe(true);
  });
});
