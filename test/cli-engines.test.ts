// `cusim join`, `cusim knn` and `cusim cluster` as child processes, each
// checked against a brute-force oracle written here.
import { beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { cusim, ensureDist } from './cli-helpers.js';
import { rng, randInt } from './helpers.js';

beforeAll(() => ensureDist());
const dir = mkdtempSync(path.join(tmpdir(), 'cusim-cli-eng-'));

describe('cusim join', () => {
  const names = [
    'Jonathan Smith',
    'Jonathon Smith',
    'Maria Garcia',
    'María García',
    'Wei Zhang',
    'Olga Petrova',
    'Olga Petrowa',
    'Zhang Wei',
    'Jon Smith',
    'Jonathan Smith Jr',
  ];
  const file = path.join(dir, 'names.txt');
  writeFileSync(file, names.join('\n') + '\n');

  /** Independent q-gram sets: lowercase, code points, no padding. */
  const grams = (s: string, q: number): Set<string> => {
    const cps = [...s.toLowerCase()];
    const out = new Set<string>();
    if (cps.length < q) out.add(cps.join(''));
    for (let i = 0; i + q <= cps.length; i++) out.add(cps.slice(i, i + q).join(''));
    return out;
  };
  const jaccard = (a: Set<string>, b: Set<string>): number => {
    let inter = 0;
    for (const x of a) if (b.has(x)) inter++;
    return inter / (a.size + b.size - inter);
  };

  it.each([0.3, 0.5, 0.8])('--threshold %f over 3-grams gives exactly the brute-force pairs', async (t) => {
    const r = await cusim(['join', file, '--threshold', String(t), '--measure', 'jaccard', '--qgram', '3', '--json']);
    expect(r.status, r.stderr).toBe(0);
    const rep = JSON.parse(r.stdout);
    expect(rep.schema).toBe('cusim.join/1');
    expect(rep.records).toBe(names.length);
    const want: { left: string; right: string; similarity: number }[] = [];
    for (let i = 0; i < names.length; i++) {
      for (let j = i + 1; j < names.length; j++) {
        const s = jaccard(grams(names[i], 3), grams(names[j], 3));
        if (s >= t - 1e-6) want.push({ left: String(i + 1), right: String(j + 1), similarity: s });
      }
    }
    expect(want.length).toBeGreaterThan(0);
    expect(rep.pairs.map((p: { left: string; right: string }) => `${p.left}-${p.right}`)).toEqual(want.map((p) => `${p.left}-${p.right}`));
    rep.pairs.forEach((p: { similarity: number }, i: number) => expect(p.similarity).toBeCloseTo(want[i].similarity, 5));
  });

  it('streams pairs chunk by chunk (--chunk-pairs below the pair count): every brute-force pair once; --sort orders them all', async () => {
    const r = rng(5);
    const recs = Array.from(
      { length: 150 },
      () => `jonathan smith ${String.fromCharCode(97 + randInt(r, 4))}${String.fromCharCode(97 + randInt(r, 4))}`,
    );
    const many = path.join(dir, 'many.txt');
    writeFileSync(many, recs.join('\n') + '\n');
    const t = 0.7;
    const want: string[] = [];
    const sim = new Map<string, number>();
    for (let i = 0; i < recs.length; i++) {
      for (let j = i + 1; j < recs.length; j++) {
        const s = jaccard(grams(recs[i], 3), grams(recs[j], 3));
        if (s >= t - 1e-6) {
          want.push(`${i + 1},${j + 1}`);
          sim.set(`${i + 1},${j + 1}`, s);
        }
      }
    }
    expect(want.length).toBeGreaterThan(1000); // many chunks of 64 pairs
    const parse = (out: string) => {
      const rows = out.trim().split('\n');
      expect(rows[0]).toBe('left,right,overlap,similarity');
      return rows.slice(1).map((l) => l.split(','));
    };
    const streamed = await cusim(['join', many, '-t', String(t), '--csv', '--chunk-pairs', '64', '--backend', 'cpu', '--quiet']);
    expect(streamed.status, streamed.stderr).toBe(0);
    const got = parse(streamed.stdout);
    const keys = got.map((x) => `${x[0]},${x[1]}`);
    expect(new Set(keys).size).toBe(keys.length);
    expect([...keys].sort()).toEqual([...want].sort());
    for (const x of got) expect(Number(x[3])).toBeCloseTo(sim.get(`${x[0]},${x[1]}`)!, 5);
    const sorted = await cusim(['join', many, '-t', String(t), '--csv', '--chunk-pairs', '64', '--backend', 'cpu', '--quiet', '--sort']);
    expect(sorted.status, sorted.stderr).toBe(0);
    expect(parse(sorted.stdout).map((x) => `${x[0]},${x[1]}`)).toEqual(want); // want is in (left, right) order
    // JSON and the table count the same pairs across chunks.
    const json = JSON.parse(
      (await cusim(['join', many, '-t', String(t), '--json', '--chunk-pairs', '64', '--backend', 'cpu', '--quiet'])).stdout,
    );
    expect(json.pairs).toHaveLength(want.length);
    const table = (await cusim(['join', many, '-t', String(t), '--chunk-pairs', '64', '--backend', 'cpu', '--quiet'])).stdout;
    expect(table).toContain(`… ${want.length - 50} more pairs`);
    expect(table).toContain(`150 records, ${want.length} pairs with jaccard ≥ ${t}`);
  });

  it('a missing --threshold and a bad one are one-line usage errors', async () => {
    const a = await cusim(['join', file]);
    expect(a.status).toBe(2);
    expect(a.stderr.trim().split('\n')).toHaveLength(1);
    expect(a.stderr).toMatch(/required option '-t, --threshold <x>' not specified/);
    const b = await cusim(['join', file, '--threshold', '1.5']);
    expect(b.status).toBe(2);
    expect(b.stderr).toMatch(/--threshold for --measure jaccard must be a number in \(0, 1\], got 1\.5/);
    const c = await cusim(['join', path.join(dir, 'nope.txt'), '-t', '0.5']);
    expect(c.status).toBe(1);
    expect(c.stderr).toMatch(/no such file or directory: .*nope\.txt \(check the path\)/);
  });
});

describe('cusim knn', () => {
  const bits = 64;
  const r = rng(42);
  const n = 300;
  const nq = 7;
  const words = (rows: number): Uint32Array => {
    const w = new Uint32Array((rows * bits) / 32);
    for (let i = 0; i < w.length; i++) w[i] = randInt(r, 2 ** 32);
    return w;
  };
  const base = words(n);
  const queries = words(nq);
  // Plant exact and 1-bit neighbours.
  base.set(queries.subarray(0, 2), 10 * 2);
  base.set(queries.subarray(2, 4), 20 * 2);
  base[20 * 2] ^= 1;
  const bf = path.join(dir, 'base.bin');
  const qf = path.join(dir, 'q.bin');
  writeFileSync(bf, Buffer.from(base.buffer));
  writeFileSync(qf, Buffer.from(queries.buffer));
  const pop = (x: number): number => {
    let c = 0;
    for (; x; x &= x - 1) c++;
    return c;
  };

  it('returns the brute-force k nearest by (distance, id)', async () => {
    const k = 5;
    const res = await cusim(['knn', '--index', bf, '--queries', qf, '-k', String(k), '--bits', String(bits), '--json']);
    expect(res.status, res.stderr).toBe(0);
    const rep = JSON.parse(res.stdout);
    expect(rep.schema).toBe('cusim.knn/1');
    expect(rep.results).toHaveLength(nq);
    for (let q = 0; q < nq; q++) {
      const d = Array.from({ length: n }, (_, i) => ({
        id: i,
        dist: pop(base[2 * i] ^ queries[2 * q]) + pop(base[2 * i + 1] ^ queries[2 * q + 1]),
      })).sort((a, b) => a.dist - b.dist || a.id - b.id);
      expect(rep.results[q].ids).toEqual(d.slice(0, k).map((x) => x.id));
      expect(rep.results[q].distances).toEqual(d.slice(0, k).map((x) => x.dist));
    }
    expect(rep.results[0].ids[0]).toBe(10);
    expect(rep.results[1].distances[0]).toBe(1);
  });

  it('a file that is not a whole number of codes is a one-line error', async () => {
    const odd = path.join(dir, 'odd.bin');
    writeFileSync(odd, Buffer.alloc(13));
    const res = await cusim(['knn', '--index', odd, '--queries', qf, '--bits', '64']);
    expect(res.status).toBe(1);
    expect(res.stderr).toMatch(/--index .*odd\.bin has 13 bytes, not a multiple of 8 \(64-bit codes\) \(check --bits\)/);
    expect(res.stderr).not.toMatch(/\n\s+at /);
  });
});

describe('cusim cluster', () => {
  it('writes one {id, cluster, similarity, created} line per document as it is assigned', async () => {
    const docs = [
      'gpu kernels hash signatures on the device quickly',
      'the river flooded the valley after heavy autumn rain',
      'gpu kernels hash signatures on the device quickly',
      '',
      'heavy autumn rain flooded the river valley',
      'completely unrelated words about baking sourdough bread',
    ];
    const res = await cusim(['cluster', '--threshold', '0.3', '--batch', '2'], { input: docs.join('\n') + '\n' });
    expect(res.status, res.stderr).toBe(0);
    const lines = res.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    // Blank lines are not documents; ids are line numbers.
    expect(lines.map((l) => l.id)).toEqual(['1', '2', '3', '5', '6']);
    for (const l of lines) expect(Object.keys(l)).toEqual(['id', 'cluster', 'similarity', 'created']);
    expect(lines[0]).toMatchObject({ cluster: 0, created: true });
    expect(lines[1]).toMatchObject({ cluster: 1, created: true });
    // The repeated document joins the first cluster with a cosine far above the threshold.
    expect(lines[2]).toMatchObject({ cluster: 0, created: false });
    expect(lines[2].similarity).toBeGreaterThan(0.8);
    expect(lines[3]).toMatchObject({ cluster: 1, created: false });
    expect(lines[4]).toMatchObject({ cluster: 2, created: true });
    expect(res.stderr).toMatch(/5 documents, 3 clusters/);
  });

  it('JSONL input keeps the record ids; a bad line is a one-line error', async () => {
    const ok = await cusim(['cluster', '--quiet'], { input: '{"id":"a","text":"one two three"}\n{"id":"b","text":"one two three"}\n' });
    expect(ok.status, ok.stderr).toBe(0);
    expect(
      ok.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).id),
    ).toEqual(['a', 'b']);
    const bad = await cusim(['cluster', '--quiet', '--format', 'jsonl'], { input: '{"text":"x"}\n{oops\n' });
    expect(bad.status).toBe(1);
    expect(bad.stderr.trim()).toMatch(/^cusim: stdin line 2 is not valid JSON \(fix the line or use --format lines\)$/);
  });
});
