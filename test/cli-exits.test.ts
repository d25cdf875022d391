// How every subcommand ends and what reaches the terminal: a closed stdout
// (`| head`) exits 0 without a stack; empty input says "no documents found";
// hostile names never reach the output raw; progress shows on a terminal and
// never on a pipe or with --quiet.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bin, cusim, ensureDist } from './cli-helpers.js';
import { rng, randInt } from './helpers.js';

beforeAll(() => ensureDist());
const dir = mkdtempSync(path.join(tmpdir(), 'cusim-cli-exits-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const node = JSON.stringify(process.execPath);
const cli = `${node} ${JSON.stringify(bin)}`;
const hasScript = spawnSync('script', ['--version']).status === 0;

// Inputs whose outputs are far larger than a pipe's buffer, so the writer
// really meets the closed pipe.
const lines = path.join(dir, 'lines.txt');
const dups = path.join(dir, 'dups.jsonl');
const codes = path.join(dir, 'codes.bin');
beforeAll(() => {
  writeFileSync(lines, Array.from({ length: 3000 }, (_, i) => `record number ${i}`).join('\n') + '\n');
  const r = rng(11);
  const recs: string[] = [];
  for (let i = 0; i < 3000; i++) {
    const text = Array.from({ length: 20 }, () => `w${randInt(r, 100000)}`).join(' ');
    recs.push(JSON.stringify({ id: `a${i}`, text }), JSON.stringify({ id: `b${i}`, text }));
  }
  writeFileSync(dups, recs.join('\n') + '\n');
  const bytes = new Uint8Array(20000 * 32);
  for (let i = 0; i < bytes.length; i++) bytes[i] = randInt(r, 256);
  writeFileSync(codes, bytes);
});

describe('a closed stdout ends every subcommand quietly with status 0', () => {
  const cases: [string, string][] = [
    ['dedup (table)', `dedup ${dups} --limit 0`],
    ['dedup --json', `dedup - --json < ${dups}`],
    ['dedup --csv', `dedup ${dups} --csv`],
    ['join (table)', `join ${lines} -t 0.8 --limit 0`],
    ['join --json', `join ${lines} -t 0.8 --json`],
    ['join --csv', `join - -t 0.8 --csv < ${lines}`],
    ['join --csv, streamed in chunks of 1000 pairs', `join ${lines} -t 0.8 --csv --chunk-pairs 1000`],
    ['knn (table)', `knn --index ${codes} --queries ${codes} -k 20`],
    ['knn --json', `knn --index ${codes} --queries ${codes} -k 20 --json`],
    ['cluster', `cluster < ${lines}`],
  ];
  for (const [name, args] of cases) {
    it(name, () => {
      const r = spawnSync(
        'bash',
        [
          '-c',
          `${cli} ${args} 2>${path.join(dir, 'err')} | head -c 100 > /dev/null; echo "\${PIPESTATUS[0]}"; cat ${path.join(dir, 'err')}`,
        ],
        {
          encoding: 'utf8',
          timeout: 120_000,
        },
      );
      const [status, ...stderr] = r.stdout.split('\n');
      expect(status).toBe('0');
      const err = stderr.join('\n');
      expect(err).not.toMatch(/EPIPE|Error|\n\s+at /);
    });
  }
});

it('cusim join … | head -1 prints one line and exits 0 quietly', () => {
  const err = path.join(dir, 'err-head');
  const r = spawnSync(
    'bash',
    ['-c', `${cli} join ${lines} -t 0.8 --csv --chunk-pairs 1000 2>${err} | head -1; echo "\${PIPESTATUS[0]}"; cat ${err}`],
    {
      encoding: 'utf8',
      timeout: 120_000,
    },
  );
  const [header, status, ...stderr] = r.stdout.split('\n');
  expect(header).toBe('left,right,overlap,similarity');
  expect(status).toBe('0');
  expect(stderr.join('\n')).not.toMatch(/EPIPE|Error|\n\s+at /);
});

describe('empty input: "no documents found in …", exit 1', () => {
  beforeAll(() => {
    writeFileSync(path.join(dir, 'empty.txt'), '');
    writeFileSync(path.join(dir, 'empty.jsonl'), '');
    writeFileSync(path.join(dir, 'blank.txt'), '\n  \n');
    mkdirSync(path.join(dir, 'binaries'), { recursive: true });
    writeFileSync(path.join(dir, 'binaries', 'a.bin'), Buffer.from([1, 0, 2, 3]));
    writeFileSync(path.join(dir, 'binaries', 'b.png'), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 0x0d]));
  });
  const cases: [string, string[], string | undefined, RegExp][] = [
    [
      'an empty file (one empty document)',
      ['dedup', 'empty.txt'],
      undefined,
      /^cusim: no documents found in empty\.txt: 1 read, none with at least 1 token/,
    ],
    ['an empty JSONL file', ['dedup', 'empty.jsonl'], undefined, /^cusim: no documents found in empty\.jsonl \(/],
    ['empty stdin', ['dedup', '-'], '', /^cusim: no documents found in stdin \(/],
    ['blank lines on stdin', ['dedup', '-'], '\n \n\n', /^cusim: no documents found in stdin \(/],
    [
      'a directory of binaries',
      ['dedup', 'binaries'],
      undefined,
      /^cusim: no documents found in binaries: 2 file\(s\) skipped \(2 binary\)/,
    ],
    ['join on an empty file', ['join', 'empty.txt', '-t', '0.5'], undefined, /^cusim: no records found in empty\.txt/],
    ['join on blank lines', ['join', '-', '-t', '0.5'], '\n\n', /^cusim: no records found in stdin/],
    ['cluster on empty stdin', ['cluster'], '', /^cusim: no documents found in stdin/],
    [
      'knn on an empty index',
      ['knn', '--index', 'empty.txt', '--queries', 'empty.txt'],
      undefined,
      /^cusim: no codes found in --index empty\.txt/,
    ],
  ];
  for (const [name, args, input, re] of cases) {
    it(name, async () => {
      const r = await cusim([...args, '--quiet'], { cwd: dir, input: input ?? '' });
      expect(r.status).toBe(1);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(re);
      expect(r.stderr).not.toMatch(/dim must be/);
    });
  }
});

describe('hostile names are escaped in every output format', () => {
  // Names with an escape sequence, a newline that would forge a report line, a
  // carriage return, a C1 control, a bidi override and a backslash.
  const names = [
    'a\x1b[31mred\x1b[0m.txt',
    'b\ngroup 99: 7 near-duplicates.txt',
    'c\rX.txt',
    'd\u009bq.txt',
    'e\u202egnp.txt',
    'f\\x1b.txt',
  ];
  const tree = path.join(dir, 'hostile');
  const body = 'const shared = compute(alpha, beta, gamma); export default shared; // the same body in every file';
  beforeAll(() => {
    mkdirSync(tree, { recursive: true });
    for (const n of names) writeFileSync(path.join(tree, n), body);
  });
  // eslint-disable-next-line no-control-regex -- the control characters a terminal must never receive raw
  const raw = /[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/;

  it('table and CSV: one line per member, no control or bidi characters, escapes recoverable', async () => {
    for (const fmt of [[], ['--csv']]) {
      const r = await cusim(['dedup', '.', '--quiet', ...fmt], { cwd: tree });
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).not.toMatch(raw);
      expect(r.stdout).not.toMatch(/^group 99/m);
      const members = fmt.length ? r.stdout.trim().split('\n').slice(1) : r.stdout.split('\n').filter((l) => /^ {2}\d\.\d{3} {2}/.test(l));
      expect(members).toHaveLength(names.length);
      const unescape = (s: string): string =>
        s.replace(/\\(x[0-9a-f]{2}|u[0-9a-f]{4}|n|r|t|\\)/g, (_, e: string) =>
          e === 'n' ? '\n' : e === 'r' ? '\r' : e === 't' ? '\t' : e === '\\' ? '\\' : String.fromCharCode(parseInt(e.slice(1), 16)),
        );
      const ids = members.map((l) => (fmt.length ? l.split(',')[2] : l.slice(9)));
      expect(ids.map(unescape).sort()).toEqual([...names].sort());
    }
  });

  it('JSON: every control and bidi character is a \\u escape and parses back to the exact names', async () => {
    const r = await cusim(['dedup', '.', '--json', '--quiet'], { cwd: tree });
    expect(r.status).toBe(0);
    expect(r.stdout).not.toMatch(raw);
    const ids = JSON.parse(r.stdout).groups[0].members.map((m: { id: string }) => m.id);
    expect(ids.sort()).toEqual([...names].sort());
  });

  it('join, cluster and error messages escape record ids and texts too', async () => {
    const recs = [
      { id: 'x\x1b]0;pwned\x07', text: 'identical text for both records here' },
      { id: 'y\nforged', text: 'identical text for both records here' },
    ];
    const input = recs.map((d) => JSON.stringify(d)).join('\n') + '\n';
    for (const args of [
      ['join', '-', '-t', '0.9'],
      ['join', '-', '-t', '0.9', '--csv'],
      ['join', '-', '-t', '0.9', '--json'],
      ['cluster'],
    ]) {
      const r = await cusim([...args, '--quiet'], { input });
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).not.toMatch(raw);
    }
    const missing = await cusim(['dedup', 'no\x1b[2Jsuch'], { cwd: dir });
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain('no\\x1b[2Jsuch');
    expect(missing.stderr).not.toMatch(raw);
  });
});

describe('progress: on a terminal only, never with --quiet or on a pipe', () => {
  const cases: [string, string, RegExp][] = [
    ['dedup (files)', `dedup ${dups}`, /reading .*\|.*%.*hashing \|.*docs/s],
    [
      'dedup (stdin: unknown total shows counts and rate)',
      `dedup - < ${dups}`,
      /reading stdin \| [\d.]+ (KiB|MiB|B) \| [\d.]+ (KiB|MiB|B)\/s/,
    ],
    ['join', `join ${lines} -t 0.8 --limit 1`, /reading .*\|.*%/],
    ['knn', `knn --index ${codes} --queries ${codes} -k 3`, /searching \|.*%.*queries/s],
    ['cluster (to a file)', `cluster < ${lines} > /dev/null`, /clustering \| [\d,]+ docs \| [\d,]+\/s/],
  ];
  for (const [name, args, re] of cases) {
    it.skipIf(!hasScript)(`${name}: shown on a TTY, silent with --quiet`, () => {
      // util-linux `script` gives the child a pseudo-terminal.
      const tty = spawnSync('script', ['-qec', `${cli} ${args}`, '/dev/null'], { encoding: 'utf8', timeout: 120_000 });
      expect(tty.status, tty.stdout).toBe(0);
      expect(tty.stdout).toMatch(re);
      expect(tty.stdout).not.toMatch(/0\/0|ETA LL|NULL|NaN|Infinity/);
      const quiet = spawnSync(
        'script',
        ['-qec', `${cli} ${args.replace(/ [<>] .*$/, '')} --quiet${args.match(/ [<>] .*$/)?.[0] ?? ''}`, '/dev/null'],
        {
          encoding: 'utf8',
          timeout: 120_000,
        },
      );
      expect(quiet.status, quiet.stdout).toBe(0);
      // eslint-disable-next-line no-control-regex -- ESC of a terminal control sequence
      expect(quiet.stdout).not.toMatch(/\x1b\[\?25l|\|.*%|docs \||ETA/);
    });
    it(`${name}: nothing but plain lines on stderr when piped`, () => {
      const r = spawnSync('bash', ['-c', `${cli} ${args} > /dev/null`], { encoding: 'utf8', timeout: 120_000 });
      expect(r.status).toBe(0);
      // eslint-disable-next-line no-control-regex -- ESC and CR of progress output
      expect(r.stderr).not.toMatch(/[\x1b\r]/);
      expect(r.stderr).not.toMatch(/\| *\d+%|\/s \||ETA/);
    });
  }
});
