// `cusim dedup` end to end, as a child process: planted near-duplicates are
// found exactly (checked against a brute-force weighted Jaccard oracle), the
// JSON schema holds still, and every bad input is one line and a non-zero exit.
import { beforeAll, describe, expect, it } from 'vitest';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, cpSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { devices } from '../lib/index.js';
import { bin, cusim, ensureDist, fixture, fixtureDocs, oracleGroups, root, shape } from './cli-helpers.js';

const hasScript = spawnSync('script', ['--version'], { encoding: 'utf8' }).status === 0;

const PLANTED = [
  ['app/server.py', 'backup/server_old.py'],
  ['lib/util.js', 'vendor/lib/util.js', 'vendor/util-fork.js'],
];

beforeAll(() => ensureDist());

/** A stderr of one line per message and no stack frames. */
function oneLineError(stderr: string, re: RegExp): void {
  const lines = stderr
    .trim()
    .split('\n')
    .filter((l) => !l.startsWith('cusim: backend'));
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(re);
  expect(stderr).not.toMatch(/\n\s+at /);
}

describe('cusim dedup on a fixture with planted near-duplicates', async () => {
  const run = await cusim(['dedup', '.', '--json', '--threshold', '0.8'], { cwd: fixture });
  const report = run.status === 0 ? JSON.parse(run.stdout) : undefined;

  it('exits 0 and finds exactly the planted groups, as the brute-force oracle does', () => {
    expect(run.stderr).not.toMatch(/error/i);
    expect(run.status).toBe(0);
    const groups = report.groups.map((g: { members: { id: string }[] }) => g.members.map((m) => m.id));
    const oracle = oracleGroups(fixtureDocs(), 0.8, 'code');
    expect(oracle.groups).toEqual(PLANTED);
    expect(groups).toEqual(PLANTED);
    // Nothing else is anywhere near the threshold: the planted groups are not luck.
    for (const [k, s] of oracle.sim) {
      const [a, b] = k.split('|');
      const together = PLANTED.some((g) => g.includes(a) && g.includes(b));
      if (!together) expect(s, k).toBeLessThan(0.5);
      else expect(s, k).toBeGreaterThanOrEqual(0.9);
    }
  });

  it('pair similarities are the exact Jaccard of the token sets (classic MinHash, the default), members carry their best pair', () => {
    const oracle = oracleGroups(fixtureDocs(), 0.8, 'code');
    let pairs = 0;
    for (const g of report.groups) {
      for (const p of g.pairs) {
        expect(p.similarity).toBeCloseTo(oracle.sim.get(`${p.left}|${p.right}`)!, 5);
        pairs++;
      }
      for (const m of g.members) {
        const best = Math.max(
          ...g.members.filter((o: { id: string }) => o.id !== m.id).map((o: { id: string }) => oracle.sim.get(`${m.id}|${o.id}`)!),
        );
        expect(m.similarity).toBeCloseTo(best, 5);
      }
      expect(g.size).toBe(g.members.length);
    }
    expect(pairs).toBeGreaterThanOrEqual(3);
  });

  it('reports the binary file as skipped and the empty file as too small', () => {
    expect(report.input.skipped).toEqual([{ id: 'assets/logo.png', reason: 'binary', detail: 'a NUL byte in the first 8000 bytes' }]);
    expect(report.input.documents).toBe(12);
    expect(report.input.tooSmall).toBe(1);
    expect(report.input.featurized).toBe(11);
    expect(run.stderr).toMatch(/skipped 1 file\(s\): 1 binary/);
  });

  it('stays quiet on pipes: no progress bar or control characters', () => {
    // eslint-disable-next-line no-control-regex -- ESC of a terminal control sequence
    expect(run.stderr).not.toMatch(/\x1b|featurizing/);
  });

  it.skipIf(!hasScript)('shows a progress bar with rate and ETA on a terminal', () => {
    // util-linux `script` gives the child a pseudo-terminal.
    const cmd = `${JSON.stringify(process.execPath)} ${JSON.stringify(bin)} dedup . -t 0.8`;
    const r = spawnSync('script', ['-qec', cmd, '/dev/null'], { cwd: fixture, encoding: 'utf8' });
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/featurizing \(bag of names\) \|.*\| \d+% \| 13 \/ 13 files \| [\d,]+\/s \| ETA/);
  });

  it('names the backend (and GPU) on stderr', () => {
    expect(report.backend).toBe(devices().cuda ? 'cuda' : 'cpu');
    expect(run.stderr).toMatch(devices().cuda ? /cusim: backend cuda on 0: / : /cusim: backend cpu \(GPU: /);
    expect(report.gpus).toEqual(devices().cuda ? devices().gpus.map((g) => g.name) : []);
  });

  it('keeps the documented JSON schema cusim.dedup/1', () => {
    expect(report.schema).toBe('cusim.dedup/1');
    expect(shape(report)).toEqual({
      schema: 'string',
      backend: 'string',
      gpus: report.gpus.length ? ['string'] : [],
      options: { threshold: 'number', samples: 'number', seed: 'number', mode: 'string', weighting: 'string', method: 'string' },
      input: {
        source: 'string',
        documents: 'number',
        featurized: 'number',
        tooSmall: 'number',
        skipped: [{ id: 'string', reason: 'string', detail: 'string' }],
      },
      lsh: { bands: 'number', rows: 'number', samples: 'number', recall: [{ similarity: 'number', probability: 'number' }] },
      groups: [
        {
          id: 'number',
          size: 'number',
          members: [{ id: 'string', similarity: 'number' }],
          pairs: [{ left: 'string', right: 'string', similarity: 'number' }],
        },
      ],
      packages: [],
      stages: [{ stage: 'string', ms: 'number' }],
      elapsedMs: 'number',
    });
    // The recall target's choice within 128 samples, hashing only the samples it reads.
    expect(report.lsh).toMatchObject({ bands: 12, rows: 9, samples: 108 });
    expect(report.options).toEqual({ threshold: 0.8, samples: 108, seed: 1, mode: 'code', weighting: 'binary', method: 'classic' });
    expect(report.groups.map((g: { id: number }) => g.id)).toEqual([0, 1]);
  });

  it('prints the same groups as a table and as CSV', async () => {
    const table = await cusim(['dedup', '.', '-t', '0.8', '--quiet'], { cwd: fixture });
    expect(table.status).toBe(0);
    expect(table.stderr).toBe('');
    // The table lists the largest group first (JSON and CSV keep input order).
    expect(table.stdout).toMatch(/group 1: 3 near-duplicates/);
    expect(table.stdout).toMatch(/group 2: 2 near-duplicates/);
    for (const id of PLANTED.flat()) expect(table.stdout).toContain(id);
    const csv = await cusim(['dedup', '.', '-t', '0.8', '--csv'], { cwd: fixture });
    expect(csv.status).toBe(0);
    const rows = csv.stdout.trim().split('\n');
    expect(rows[0]).toBe('group,size,id,similarity');
    expect(rows.slice(1).map((r) => r.split(',').slice(0, 3).join(','))).toEqual([
      '0,2,app/server.py',
      '0,2,backup/server_old.py',
      '1,3,lib/util.js',
      '1,3,vendor/lib/util.js',
      '1,3,vendor/util-fork.js',
    ]);
  });
});

describe('cusim dedup with worker threads', () => {
  // 13 files > 4 × 3 threads: the worker path runs (dedup.ts picks it above that).
  it('--threads 3 (parallel featurization) gives the same report as --threads 1', async () => {
    const strip = (out: string): unknown => {
      const r = JSON.parse(out);
      delete r.elapsedMs;
      delete r.stages;
      return r;
    };
    const one = await cusim(['dedup', '.', '--json', '-t', '0.8', '--threads', '1'], { cwd: fixture });
    const three = await cusim(['dedup', '.', '--json', '-t', '0.8', '--threads', '3'], { cwd: fixture });
    expect(one.status).toBe(0);
    expect(three.status, three.stderr).toBe(0);
    expect(strip(three.stdout)).toEqual(strip(one.stdout));
    expect((strip(three.stdout) as { groups: unknown[] }).groups).toHaveLength(2);
  });
});

describe('cusim dedup on stdin records', () => {
  const base = 'the quick brown fox jumps over the lazy dog while seven wizards quietly judge boxing matches';
  it('JSONL: groups near-duplicate records by id (words mode)', async () => {
    const input = [
      { id: 'a', text: base },
      { id: 'b', text: 'completely different words about gpu kernels and memory bandwidth on hopper' },
      { id: 'c', text: base + ' today' },
      { id: 'd', text: 'another unrelated sentence concerning orchards, pears and autumn weather' },
    ]
      .map((r) => JSON.stringify(r))
      .join('\n');
    const r = await cusim(['dedup', '-', '--json', '-t', '0.8'], { input });
    expect(r.status).toBe(0);
    const rep = JSON.parse(r.stdout);
    expect(rep.options.mode).toBe('words');
    expect(rep.groups.map((g: { members: { id: string }[] }) => g.members.map((m) => m.id))).toEqual([['a', 'c']]);
    const oracle = oracleGroups(JSON.parse(`[${input.split('\n').join(',')}]`), 0.8, 'words');
    expect(rep.groups[0].pairs[0].similarity).toBeCloseTo(oracle.sim.get('a|c')!, 5);
  });

  it('--weighted (and --weighting count) hash token counts with weighted MinHash; the default hashes token sets', async () => {
    const input = [
      { id: 'a', text: `${base} ${base}` },
      { id: 'b', text: 'completely different words about gpu kernels and memory bandwidth on hopper' },
      { id: 'c', text: `${base} ${base} today` },
    ]
      .map((r) => JSON.stringify(r))
      .join('\n');
    const docs = JSON.parse(`[${input.split('\n').join(',')}]`);
    for (const [args, method] of [
      [['--weighted'], 'weighted'],
      [['--weighting', 'count'], 'weighted'],
      [[], 'classic'],
      [['--weighting', 'binary'], 'classic'],
    ] as const) {
      const r = await cusim(['dedup', '-', '--json', '-t', '0.8', ...args], { input });
      expect(r.status).toBe(0);
      const rep = JSON.parse(r.stdout);
      expect(rep.options.method).toBe(method);
      expect(rep.options.weighting).toBe(method === 'classic' ? 'binary' : 'count');
      const oracle = oracleGroups(docs, 0.8, 'words', method);
      expect(rep.groups[0].pairs[0].similarity).toBeCloseTo(oracle.sim.get('a|c')!, 5);
    }
  });

  it('CSV with a named text column', async () => {
    const input = `key,body\nx,"${base}"\ny,unrelated words here entirely\nz,"${base}"\n`;
    const r = await cusim(['dedup', '-', '--format', 'csv', '--field', 'body', '--id-field', 'key', '--json'], { input });
    expect(r.status).toBe(0);
    expect(JSON.parse(r.stdout).groups.map((g: { members: { id: string }[] }) => g.members.map((m) => m.id))).toEqual([['x', 'z']]);
  });
});

describe('cusim dedup with no path scans node_modules', () => {
  it('reports near-duplicate files and the packages that share them', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cusim-nm-'));
    const nm = path.join(dir, 'node_modules');
    const put = (rel: string, text: string): void => {
      mkdirSync(path.dirname(path.join(nm, rel)), { recursive: true });
      writeFileSync(path.join(nm, rel), text);
    };
    const util = fixtureDocs().find((d) => d.id === 'lib/util.js')!.text;
    const server = fixtureDocs().find((d) => d.id === 'other/alpha.js')!.text;
    put('left-pad/package.json', '{"name":"left-pad","version":"1.0.0"}');
    put('left-pad/index.js', util);
    put('@scope/tool/package.json', '{"name":"@scope/tool","version":"2.1.0"}');
    put('@scope/tool/node_modules/left-pad/package.json', '{"name":"left-pad","version":"1.0.1"}');
    put('@scope/tool/node_modules/left-pad/index.js', util);
    put('@scope/tool/lib/main.js', server);
    put('@scope/tool/lib/tiny.js', 'module.exports = 1;');
    const r = await cusim(['dedup', '--json'], { cwd: dir });
    expect(r.status).toBe(0);
    expect(r.stderr).toMatch(/no path given; scanning node_modules/);
    const rep = JSON.parse(r.stdout);
    expect(rep.groups.map((g: { members: { id: string }[] }) => g.members.map((m) => m.id))).toEqual([
      ['node_modules/@scope/tool/node_modules/left-pad/index.js', 'node_modules/left-pad/index.js'],
    ]);
    expect(rep.input.tooSmall).toBe(1); // tiny.js is under the 10-token floor
    expect(rep.packages).toEqual([
      {
        left: '@scope/tool/node_modules/left-pad',
        right: 'left-pad',
        leftName: 'left-pad@1.0.1',
        rightName: 'left-pad@1.0.0',
        sharedGroups: 1,
        leftFiles: 1,
        rightFiles: 1,
      },
    ]);
  });
});

describe('cusim errors: one line with the fix, non-zero exit', () => {
  it('a path that does not exist', async () => {
    const r = await cusim(['dedup', 'no/such/dir']);
    expect(r.status).toBe(1);
    oneLineError(r.stderr, /^cusim: no such file or directory: no\/such\/dir \(check the path\)$/);
  });

  it('an unreadable file', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cusim-perm-'));
    chmodSync(dir, 0o755);
    const f = path.join(dir, 'secret.js');
    writeFileSync(f, 'const a = 1;');
    chmodSync(f, 0o000);
    // Root reads anything: drop to nobody for this run, as a user would be.
    const asUser = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {};
    const r = await cusim(['dedup', f], asUser);
    expect(r.status).toBe(1);
    oneLineError(r.stderr, /^cusim: permission denied: .*secret\.js \(make it readable/);
  });

  it('unreadable files inside a directory are skipped and reported, not fatal', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cusim-perm2-'));
    cpSync(path.join(fixture, 'lib'), path.join(dir, 'lib'), { recursive: true });
    cpSync(path.join(fixture, 'vendor'), path.join(dir, 'vendor'), { recursive: true });
    writeFileSync(path.join(dir, 'locked.js'), 'const a = 1;');
    chmodSync(path.join(dir, 'locked.js'), 0o000);
    chmodSync(dir, 0o755);
    const asUser = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {};
    const r = await cusim(['dedup', dir, '--json', '-t', '0.8'], { ...asUser, cwd: dir });
    expect(r.status).toBe(0);
    const rep = JSON.parse(r.stdout);
    expect(rep.input.skipped).toEqual([{ id: 'locked.js', reason: 'unreadable', detail: 'EACCES' }]);
    expect(rep.groups).toHaveLength(1);
  });

  it.each([
    [['--threshold', '1.5'], /threshold must be a number in \(0, 1\)/],
    [['--threshold', 'abc'], /threshold must be a number/],
    [['--threshold', '1'], /threshold must be a number in \(0, 1\)/],
    [['--samples', '0'], /samples must be an integer in \[1, 65536\]/],
    [['--mode', 'chars'], /Allowed choices are code, words, qgrams/],
    [['--backend', 'tpu'], /Allowed choices are auto, cpu, cuda/],
    [['--devices', 'x'], /devices must be 'all' or GPU indices/],
    [['--bogus'], /unknown option '--bogus'/],
    [['--json', '--csv'], /--json and --csv cannot be combined \(pick one output format\)/],
  ])('bad option %j exits 2', async (args, re) => {
    const r = await cusim(['dedup', fixture, ...args]);
    expect(r.status).toBe(2);
    oneLineError(r.stderr, re);
  });

  it('an unknown command', async () => {
    const r = await cusim(['frobnicate']);
    expect(r.status).toBe(2);
    oneLineError(r.stderr, /unknown command 'frobnicate'/);
  });

  it.skipIf(devices().cuda)('--backend cuda without a GPU says so and how to proceed', async () => {
    const r = await cusim(['dedup', fixture, '--backend', 'cuda']);
    expect(r.status).toBe(1);
    oneLineError(r.stderr, /CUDA is unavailable.*\(retry with --backend cpu\)/);
  });

  it('--verbose adds the stack trace', async () => {
    const r = await cusim(['dedup', 'no/such/dir', '--verbose']);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/no such file or directory/);
    expect(r.stderr).toMatch(/\n\s+at /);
  });

  it('bad stdin records name the line', async () => {
    const r = await cusim(['dedup', '-', '--format', 'jsonl'], { input: '{"text":"ok"}\nnot json\n' });
    expect(r.status).toBe(1);
    oneLineError(r.stderr, /stdin line 2 is not valid JSON/);
  });
});

describe('npx cusim inside the checkout', () => {
  // The README's first command. --no and --offline forbid any download, so a
  // success means npm ran this checkout's own bin (npm >= 10.8.1 looks in the
  // local package's "bin" first).
  const npm = spawnSync('npm', ['--version'], { encoding: 'utf8' });
  const [major, minor] = (npm.stdout ?? '').trim().split('.').map(Number);
  const why = npm.status !== 0 ? 'npm is not on PATH' : major * 100 + minor < 1008 ? `npm ${npm.stdout.trim()} < 10.8` : undefined;
  it.skipIf(!!why)(`runs this checkout's bin/cusim, never a registry package${why ? ` (skipped: ${why})` : ''}`, () => {
    ensureDist();
    // A private npm cache: npx keeps one folder per package spec there, and a
    // stale or half-written folder from an earlier run would fail this run.
    const cache = mkdtempSync(path.join(tmpdir(), 'cusim-npx-cache-'));
    const r = spawnSync('npx', ['--no', '--offline', 'cusim', '--version'], {
      cwd: root,
      encoding: 'utf8',
      timeout: 120_000,
      env: { ...process.env, npm_config_cache: cache },
    });
    rmSync(cache, { recursive: true, force: true });
    expect(r.status, r.stderr).toBe(0);
    const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string };
    expect(r.stdout.trim()).toBe(pkg.version);
  });
});
