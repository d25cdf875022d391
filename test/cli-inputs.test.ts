// Streamed CLI inputs: JSONL, CSV and TSV files read as records, stdin and
// files read in bounded memory, and directory walks that honour .gitignore
// files and --exclude globs. Oracles: brute-force groups over the same
// records, csv-parse-independent expectations written out by hand, and
// process RSS.
import { spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cusim, ensureDist, oracleGroups, root } from './cli-helpers.js';
import { rng, randInt } from './helpers.js';

beforeAll(() => ensureDist());
const dir = mkdtempSync(path.join(tmpdir(), 'cusim-cli-inputs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// Records with planted near-duplicates: one word of 30 changed (J ≈ 0.935, found at
// t = 0.8 with probability 1 - (1 - 0.935^9)^12 > 0.9999).
function plantedRecords(seed: number, n: number): { id: string; text: string }[] {
  const r = rng(seed);
  const words =
    'alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon phi chi psi omega'.split(
      ' ',
    );
  const out: { id: string; text: string }[] = [];
  for (let i = 0; i < n; i++) {
    const t = Array.from({ length: 30 }, () => words[randInt(r, words.length)] + randInt(r, 50)).join(' ');
    out.push({ id: `r${i}`, text: t });
    if (i % 5 === 0) {
      const w = t.split(' ');
      w[randInt(r, w.length)] = 'changed';
      out.push({ id: `r${i}-copy`, text: w.join(' ') });
    }
  }
  return out;
}

// Groups as sorted member lists, in the oracle's order (by first member).
const groupsOf = (stdout: string): string[][] =>
  (JSON.parse(stdout) as { groups: { members: { id: string }[] }[] }).groups
    .map((g) => g.members.map((m) => m.id).sort())
    .sort((a, b) => (a[0] < b[0] ? -1 : 1));

const csvQuote = (s: string): string => (/[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s);

describe('record files given as arguments', () => {
  const recs = plantedRecords(7, 60);
  const oracle = oracleGroups(recs, 0.8, 'words').groups.map((g) => [...g].sort());

  it('a .jsonl file is read as records (--field, --id-field), not as one document', async () => {
    const file = path.join(dir, 'recs.jsonl');
    writeFileSync(file, recs.map((d) => JSON.stringify({ key: d.id, body: d.text, other: 1 })).join('\n') + '\n');
    const r = await cusim(['dedup', file, '--field', 'body', '--id-field', 'key', '-t', '0.8', '--json']);
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).input.documents).toBe(recs.length);
    expect(groupsOf(r.stdout)).toEqual(oracle);
  });

  it('CSV: quoted fields with commas, quotes and newlines; ids from a column', async () => {
    const file = path.join(dir, 'recs.csv');
    // Text with a comma and a quoted word in every record; one field holds a newline.
    const rows = recs.map((d, i) => [d.id, `${d.text}, "q"${i === 3 ? '\nsecond line' : ''}`]);
    writeFileSync(file, 'id,text\r\n' + rows.map((f) => f.map(csvQuote).join(',')).join('\r\n') + '\r\n');
    const r = await cusim(['dedup', file, '-t', '0.8', '--json']);
    expect(r.status, r.stderr).toBe(0);
    const expected = oracleGroups(
      rows.map(([id, text]) => ({ id, text })),
      0.8,
      'words',
    ).groups.map((g) => [...g].sort());
    expect(groupsOf(r.stdout)).toEqual(expected);
  });

  it('TSV (unquoted, tab-separated) and --delimiter for other separators', async () => {
    const tsv = path.join(dir, 'recs.tsv');
    writeFileSync(tsv, 'name\tbody\n' + recs.map((d) => `${d.id}\t${d.text} "as is`).join('\n') + '\n');
    const a = await cusim(['dedup', tsv, '--field', 'body', '--id-field', 'name', '-t', '0.8', '--json']);
    expect(a.status, a.stderr).toBe(0);
    expect(groupsOf(a.stdout)).toEqual(
      oracleGroups(
        recs.map((d) => ({ id: d.id, text: `${d.text} "as is` })),
        0.8,
        'words',
      ).groups.map((g) => [...g].sort()),
    );
    const semi = path.join(dir, 'recs.txt');
    writeFileSync(semi, 'id;text\n' + recs.map((d) => `${d.id};${d.text}`).join('\n') + '\n');
    const b = await cusim(['dedup', semi, '--format', 'csv', '--delimiter', ';', '-t', '0.8', '--json']);
    expect(b.status, b.stderr).toBe(0);
    expect(groupsOf(b.stdout)).toEqual(oracle);
  });

  it('--format lines reads any file as one record per line (ids: line numbers)', async () => {
    const file = path.join(dir, 'recs.lst');
    writeFileSync(file, recs.map((d) => d.text).join('\n') + '\n');
    const r = await cusim(['dedup', file, '--format', 'lines', '-t', '0.8', '--json']);
    expect(r.status, r.stderr).toBe(0);
    const byLine = recs.map((d, i) => ({ id: String(i + 1), text: d.text }));
    expect(groupsOf(r.stdout)).toEqual(oracleGroups(byLine, 0.8, 'words').groups.map((g) => [...g].sort()));
    // Without --format the same file is one document.
    const one = await cusim(['dedup', file, '--json']);
    expect(JSON.parse(one.stdout).input.documents).toBe(1);
  });

  it('several record files: line-number ids carry the file name; stdin joins in order', async () => {
    const a = path.join(dir, 'a.jsonl');
    const b = path.join(dir, 'b.jsonl');
    const text = 'one two three four five six seven eight nine ten';
    writeFileSync(a, JSON.stringify({ text }) + '\n');
    writeFileSync(b, '\n' + JSON.stringify({ text }) + '\n');
    const r = await cusim(['dedup', a, '-', b, '--json'], { cwd: dir, input: JSON.stringify({ id: 's', text }) + '\n' });
    expect(r.status, r.stderr).toBe(0);
    expect(groupsOf(r.stdout)).toEqual([['a.jsonl:1', 'b.jsonl:2', 's']]);
  });

  it('bad records name the file and line; a missing column lists the header', async () => {
    const bad = path.join(dir, 'bad.jsonl');
    writeFileSync(bad, '{"text":"ok"}\n{"text": 5}\n');
    const r = await cusim(['dedup', bad]);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/bad\.jsonl line 2 has no string field 'text'/);
    const csv = path.join(dir, 'cols.csv');
    writeFileSync(csv, 'a,b\n1,2\n');
    const c = await cusim(['dedup', csv]);
    expect(c.status).toBe(1);
    expect(c.stderr).toMatch(/the header has no column 'text' \(columns: a, b\)/);
    const open = path.join(dir, 'open.csv');
    writeFileSync(open, 'id,text\n1,"never closed\n');
    const o = await cusim(['dedup', open]);
    expect(o.status).toBe(1);
    expect(o.stderr).toMatch(/open\.csv: .*quote/i);
    expect(o.stderr).not.toMatch(/\n\s+at /);
  });

  it('a record longer than --max-size is an error naming its line, not an allocation', async () => {
    const file = path.join(dir, 'long.jsonl');
    writeFileSync(file, '{"text":"short"}\n' + JSON.stringify({ text: 'x'.repeat(5000) }) + '\n');
    const r = await cusim(['dedup', file, '--max-size', '1000']);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/long\.jsonl line 2 is longer than 1000 bytes/);
  });
});

describe('bounded memory', () => {
  // A ~160 MB input read through the record reader with 16 KiB chunks in a
  // child process: its peak RSS must stay far below the input's size (the
  // whole-input read this replaced held the bytes, the string and every line).
  const big = path.join(dir, 'big.jsonl');
  const bigCsv = path.join(dir, 'big.csv');
  let bytes = 0;
  let lines = 0;
  beforeAll(() => {
    const fd = openSync(big, 'w');
    const fdc = openSync(bigCsv, 'w');
    const r = rng(3);
    writeSync(fdc, 'id,text\n');
    for (let b = 0; b < 160; b++) {
      let s = '';
      let c = '';
      for (let i = 0; i < 5000; i++) {
        const text = `record ${lines} ${'lorem ipsum dolor sit amet '.repeat(1 + randInt(r, 12))}`;
        s += JSON.stringify({ id: lines, text }) + '\n';
        c += `${lines},"${text}"\n`;
        lines++;
      }
      bytes += Buffer.byteLength(s);
      writeSync(fd, s);
      writeSync(fdc, c);
    }
    closeSync(fd);
    closeSync(fdc);
  });

  const reader = (format: string, file: string | undefined) => `
    import { createReadStream } from 'node:fs';
    import { readRecords } from ${JSON.stringify(path.join(root, 'dist', 'cli', 'records.js'))};
    const input = ${file ? `createReadStream(${JSON.stringify(file)}, { highWaterMark: 16384 })` : 'process.stdin'};
    let n = 0, chars = 0;
    for await (const d of readRecords(input, { format: '${format}', field: 'text', idField: 'id', source: 'x', maxRecordBytes: 1 << 20 })) { n++; chars += d.text.length; }
    console.log(n + ' ' + chars + ' ' + process.resourceUsage().maxRSS);`;

  const run = (format: string, file: string | undefined, stdinFile?: string) => {
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', reader(format, file)], {
      encoding: 'utf8',
      stdio: [stdinFile ? openSync(stdinFile, 'r') : 'ignore', 'pipe', 'pipe'],
      timeout: 120_000,
    });
    expect(r.status, r.stderr).toBe(0);
    const [n, , rssKb] = r.stdout.trim().split(' ').map(Number);
    return { n, rssMb: rssKb / 1024 };
  };

  it('JSONL from a file and from stdin: every record, peak RSS well under the input size', () => {
    expect(bytes).toBeGreaterThan(150e6);
    for (const [file, stdin] of [
      [big, undefined],
      [undefined, big],
    ] as const) {
      const { n, rssMb } = run('jsonl', file, stdin);
      expect(n).toBe(lines);
      expect(rssMb).toBeLessThan(120);
    }
  }, 120_000);

  it('CSV through csv-parse: every record, same bound', () => {
    const { n, rssMb } = run('csv', bigCsv);
    expect(n).toBe(lines);
    expect(rssMb).toBeLessThan(120);
  }, 120_000);
});

describe('directory walks', () => {
  const tree = path.join(dir, 'tree');
  const doc = 'function load(config) { return parse(config.path, config.options); } // shared helper body';
  beforeAll(() => {
    const put = (p: string, s: string): void => {
      mkdirSync(path.dirname(path.join(tree, p)), { recursive: true });
      writeFileSync(path.join(tree, p), s);
    };
    put('.gitignore', 'build/\n*.log\n!keep.log\n');
    put('src/a.js', doc);
    put('src/b.js', doc);
    put('build/c.js', doc);
    put('x.log', doc);
    put('keep.log', doc);
    put('sub/.gitignore', 'gen-*.js\n');
    put('sub/gen-1.js', doc);
    put('sub/d.js', doc);
    put('other/gen-2.js', doc);
    put('test/fixtures/e.js', doc);
  });
  const members = async (args: string[]): Promise<string[]> => {
    const r = await cusim(['dedup', '.', '--json', ...args], { cwd: tree });
    expect(r.status, r.stderr).toBe(0);
    return groupsOf(r.stdout).flat().sort();
  };

  it('honours .gitignore files, nested ones only below their directory, and negations', async () => {
    expect(await members([])).toEqual(['keep.log', 'other/gen-2.js', 'src/a.js', 'src/b.js', 'sub/d.js', 'test/fixtures/e.js']);
  });

  it('--no-gitignore walks everything; --exclude drops paths and names matching its globs', async () => {
    expect(await members(['--no-gitignore'])).toEqual(
      [
        'build/c.js',
        'keep.log',
        'other/gen-2.js',
        'src/a.js',
        'src/b.js',
        'sub/d.js',
        'sub/gen-1.js',
        'test/fixtures/e.js',
        'x.log',
      ].sort(),
    );
    expect(await members(['--exclude', 'test/**', '--exclude', '*.log'])).toEqual(['other/gen-2.js', 'src/a.js', 'src/b.js', 'sub/d.js']);
    expect(await members(['--exclude', 'src'])).toEqual(['keep.log', 'other/gen-2.js', 'sub/d.js', 'test/fixtures/e.js']);
  });
});

describe('skip reasons say what happened', () => {
  const tree = path.join(dir, 'skips');
  beforeAll(() => {
    mkdirSync(tree, { recursive: true });
    const text = 'export function shared(a, b) { return a + b; } // the same in both files';
    writeFileSync(path.join(tree, 'a.js'), text);
    writeFileSync(path.join(tree, 'b.js'), text);
    writeFileSync(path.join(tree, 'latin1.txt'), Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x20, 0x6f, 0x6b]));
    // 600 MB of holes: past V8's longest string, and costs no disk.
    const fd = openSync(path.join(tree, 'huge.txt'), 'w');
    spawnSync('truncate', ['-s', '600M', path.join(tree, 'huge.txt')]);
    closeSync(fd);
  });

  it('too-large names the limit passed (--max-size, or the longest string a document can be); not-utf8 only for bad UTF-8', async () => {
    const skips = async (args: string[]): Promise<Record<string, { reason: string; detail: string }>> => {
      const r = await cusim(['dedup', '.', '--json', '--quiet', ...args], { cwd: tree });
      expect(r.status, r.stderr).toBe(0);
      const rep = JSON.parse(r.stdout);
      expect(rep.groups).toHaveLength(1);
      return Object.fromEntries(rep.input.skipped.map((s: { id: string; reason: string; detail: string }) => [s.id, s]));
    };
    const dflt = await skips([]);
    expect(dflt['huge.txt']).toEqual({ id: 'huge.txt', reason: 'too-large', detail: '600 MiB > --max-size 4.0 MiB' });
    expect(dflt['latin1.txt']).toEqual({ id: 'latin1.txt', reason: 'not-utf8', detail: 'invalid UTF-8' });
    const big = await skips(['--max-size', String(2 ** 31)]);
    expect(big['huge.txt'].reason).toBe('too-large');
    expect(big['huge.txt'].detail).toMatch(
      /^600 MiB > 512 MiB, the longest text one document can hold \(read it as records with --format\)$/,
    );
  });
});
