// What a new user reads: CSV/TSV without a header row (--no-header,
// --columns), the members' text (--show-text), the table's order, node_modules
// scans that name packages and leave out copies inside one package, and help
// and errors that point to the subcommand. Groups are checked against the
// brute-force oracle over an independent parse of the input.
import { beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { cusim, ensureDist, fixture, fixtureDocs, oracleGroups, root } from './cli-helpers.js';
import { sh } from './npm.js';
import { randInt, rng } from './helpers.js';

beforeAll(() => ensureDist());

const tsv = path.join(root, 'test', 'fixtures', 'npm-summaries-300.tsv');
// name TAB summary, no header row; the summaries hold no tabs.
const summaries = readFileSync(tsv, 'utf8')
  .split('\n')
  .filter((l) => l !== '')
  .map((l) => {
    const [id, text] = l.split('\t');
    return { id, text };
  });

interface Rep {
  input: { documents: number };
  groups: { members: { id: string; text?: string; package?: string }[] }[];
  packages: unknown[];
  withinPackageGroups?: number;
}
const memberIds = (r: Rep): string[][] => r.groups.map((g) => g.members.map((m) => m.id).sort()).sort();

describe('CSV/TSV without a header row', () => {
  it('--no-header with column numbers reads every row as a record, and the groups are the oracle groups', async () => {
    const r = await cusim(['dedup', tsv, '--no-header', '--field', '2', '--id-field', '1', '-t', '0.8', '--json']);
    expect(r.status, r.stderr).toBe(0);
    const rep = JSON.parse(r.stdout) as Rep;
    // The first row is a record too.
    expect(rep.input.documents).toBe(summaries.length);
    const oracle = oracleGroups(summaries, 0.8, 'words').groups.map((g) => [...g].sort());
    expect(oracle.length).toBeGreaterThan(3);
    expect(memberIds(rep)).toEqual(oracle.sort());
  });

  it('--columns names the columns of a headerless file: the same report', async () => {
    const byNumber = await cusim(['dedup', tsv, '--no-header', '--field', '2', '--id-field', '1', '-t', '0.8', '--json']);
    const byName = await cusim(['dedup', tsv, '--columns', 'name,text', '--id-field', 'name', '-t', '0.8', '--json']);
    expect(byName.status, byName.stderr).toBe(0);
    const strip = (s: string): unknown => {
      const { groups, input } = JSON.parse(s) as Rep;
      return { groups, input };
    };
    expect(strip(byName.stdout)).toEqual(strip(byNumber.stdout));
  });

  it('a header without the text column: the error suggests --no-header and --columns', async () => {
    const r = await cusim(['dedup', tsv, '--quiet']);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/the header has no column 'text' \(columns: 8004-solana, /);
    expect(r.stderr).toContain('--no-header with --field N, or --columns name,text');
    const bad = await cusim(['dedup', tsv, '--no-header', '--quiet']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/--no-header: --field 'text' is not a column number \(name the text column by number/);
  });

  it('with a header row, --field may also be a column number', async () => {
    const base = 'the quick brown fox jumps over the lazy dog while seven wizards quietly judge boxing matches';
    const input = `key,body\nx,"${base}"\ny,unrelated words here entirely\nz,"${base}"\n`;
    const r = await cusim(['dedup', '-', '--format', 'csv', '--field', '2', '--id-field', '1', '--json'], { input });
    expect(r.status, r.stderr).toBe(0);
    const rep = JSON.parse(r.stdout) as Rep;
    expect(rep.input.documents).toBe(3);
    expect(memberIds(rep)).toEqual([['x', 'z']]);
  });

  it('join reads the same headerless file', async () => {
    const r = await cusim(['join', tsv, '--no-header', '--field', '2', '--id-field', '1', '-t', '0.9', '--json', '--quiet']);
    expect(r.status, r.stderr).toBe(0);
    const ids = new Set(summaries.map((s) => s.id));
    const pairs = (JSON.parse(r.stdout) as { pairs: { left: string; right: string }[] }).pairs;
    expect(pairs.length).toBeGreaterThan(0);
    for (const p of pairs) expect(ids.has(p.left) && ids.has(p.right)).toBe(true);
  });
});

describe('--show-text', () => {
  it('files: each member with the first N characters of its file', async () => {
    const r = await cusim(['dedup', '.', '-t', '0.8', '--json', '--show-text', '40'], { cwd: fixture });
    expect(r.status, r.stderr).toBe(0);
    const texts = new Map(fixtureDocs().map((d) => [d.id, d.text]));
    const rep = JSON.parse(r.stdout) as Rep;
    expect(rep.groups.length).toBe(2);
    for (const m of rep.groups.flatMap((g) => g.members)) expect(m.text).toBe(texts.get(m.id)!.slice(0, 40));
    const table = await cusim(['dedup', '.', '-t', '0.8', '--show-text', '40', '--quiet'], { cwd: fixture });
    const first = texts.get('lib/util.js')!.slice(0, 40).replace(/\s+/g, ' ').trim();
    expect(table.stdout).toContain(`  lib/util.js\n         ${first}\n`);
  });

  it('records: each member with the start of its record, read again by id', async () => {
    const r = await cusim(['dedup', tsv, '--no-header', '--field', '2', '--id-field', '1', '-t', '0.8', '--json', '--show-text', '25']);
    expect(r.status, r.stderr).toBe(0);
    const byId = new Map(summaries.map((s) => [s.id, s.text]));
    const members = (JSON.parse(r.stdout) as Rep).groups.flatMap((g) => g.members);
    expect(members.length).toBeGreaterThan(0);
    for (const m of members) expect(m.text).toBe(byId.get(m.id)!.slice(0, 25));
    // Without the option no text is kept.
    const plain = await cusim(['dedup', tsv, '--no-header', '--field', '2', '--id-field', '1', '-t', '0.8', '--json']);
    expect((JSON.parse(plain.stdout) as Rep).groups[0].members[0].text).toBeUndefined();
  });

  it('stdin cannot be read again: refused up front', async () => {
    const r = await cusim(['dedup', '-', '--show-text', '10'], { input: 'a b c\n' });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--show-text reads the members again .* stdin can be read only once/);
  });
});

describe('the table', () => {
  it('orders groups by size, then similarity, and numbers them in that order', async () => {
    // In input order the pair comes first; the table puts the group of three first.
    const t = await cusim(['dedup', '.', '-t', '0.8', '--quiet'], { cwd: fixture });
    expect(t.status).toBe(0);
    expect(t.stdout.indexOf('group 1: 3 near-duplicates')).toBeGreaterThanOrEqual(0);
    expect(t.stdout.indexOf('group 2: 2 near-duplicates')).toBeGreaterThan(t.stdout.indexOf('group 1: 3'));
    // Equal sizes: the closer group first.
    const base = 'the quick brown fox jumps over the lazy dog while seven wizards quietly judge boxing matches';
    const other = 'completely different words about gpu kernels and memory bandwidth on hopper and blackwell chips';
    const input = [`a\t${base}`, `b\t${base} today`, `c\t${other}`, `d\t${other}`].join('\n');
    const r = await cusim(['dedup', '-', '--format', 'tsv', '--no-header', '--field', '2', '--id-field', '1', '-t', '0.8', '--quiet'], {
      input,
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^group 1: 2 near-duplicates \(similarity ≥ 1\.000\)\n {2}1\.000 {2}c\n {2}1\.000 {2}d\ngroup 2: 2 /);
  });

  it('names hashed columns as such, not as features', async () => {
    const r = await cusim(['dedup', '.', '-t', '0.8'], { cwd: fixture });
    expect(r.stderr).toMatch(/nonzeros \(32-bit token hashes\); classic MinHash/);
    expect(r.stderr).not.toMatch(/4,294,967,296 features/);
    const w = await cusim(['dedup', '.', '-t', '0.8', '--weighted'], { cwd: fixture });
    expect(w.stderr).toMatch(/nonzeros \(a vocabulary of [\d,]+ features\); weighted MinHash/);
  });
});

describe('node_modules scans', () => {
  const util = fixtureDocs().find((d) => d.id === 'lib/util.js')!.text;
  const server = fixtureDocs().find((d) => d.id === 'app/server.py')!.text;
  const dir = mkdtempSync(path.join(tmpdir(), 'cusim-nm-report-'));
  const put = (rel: string, text: string): void => {
    const f = path.join(dir, 'node_modules', rel);
    mkdirSync(path.dirname(f), { recursive: true });
    writeFileSync(f, text);
  };
  put('left-pad/package.json', '{"name":"left-pad","version":"1.0.0"}');
  put('left-pad/index.js', util);
  put('tool/package.json', '{"name":"tool","version":"2.1.0"}');
  put('tool/node_modules/left-pad/package.json', '{"name":"left-pad","version":"1.0.1"}');
  put('tool/node_modules/left-pad/index.js', util);
  put('tool/node_modules/left-pad/dist/index.js', util);
  // One package's own copies: a source and its build.
  put('tool/src/server.js', server);
  put('tool/dist/server.js', server);

  it('leaves out groups inside one package, counts them, and names members with package@version', async () => {
    const r = await cusim(['dedup', '--json'], { cwd: dir });
    expect(r.status, r.stderr).toBe(0);
    const rep = JSON.parse(r.stdout) as Rep;
    expect(rep.groups.map((g) => g.members.map((m) => [m.package, m.id]))).toEqual([
      [
        ['left-pad@1.0.0', 'node_modules/left-pad/index.js'],
        ['left-pad@1.0.1', 'node_modules/tool/node_modules/left-pad/dist/index.js'],
        ['left-pad@1.0.1', 'node_modules/tool/node_modules/left-pad/index.js'],
      ],
    ]);
    expect(rep.withinPackageGroups).toBe(1);
    const all = JSON.parse((await cusim(['dedup', '--json', '--within-package'], { cwd: dir })).stdout) as Rep;
    expect(memberIds(all)).toEqual([
      [
        'node_modules/left-pad/index.js',
        'node_modules/tool/node_modules/left-pad/dist/index.js',
        'node_modules/tool/node_modules/left-pad/index.js',
      ],
      ['node_modules/tool/dist/server.js', 'node_modules/tool/src/server.js'],
    ]);
    expect(all.withinPackageGroups).toBe(0);
  });

  it('the table says which packages share files, in a sentence', async () => {
    const r = await cusim(['dedup', '--quiet'], { cwd: dir });
    expect(r.status, r.stderr).toBe(0);
    // One row per package in a group: the copies inside one package are counted, not listed.
    expect(r.stdout).toContain(
      'group 1: 3 near-duplicates (similarity ≥ 1.000)\n' +
        '  1.000  left-pad@1.0.0  node_modules/left-pad/index.js\n' +
        '  1.000  left-pad@1.0.1  node_modules/tool/node_modules/left-pad/dist/index.js (and 1 more in this package)\n',
    );
    expect(r.stdout).toContain('1 more group(s) lie inside single packages');
    expect(r.stdout).toMatch(
      /^ {2}left-pad@1\.0\.\d and left-pad@1\.0\.\d share a near-duplicate file \(of (1 and 2|2 and 1) scanned; (tool\/node_modules\/)?left-pad, (tool\/node_modules\/)?left-pad\)$/m,
    );
    const all = await cusim(['dedup', '--quiet', '--within-package'], { cwd: dir });
    expect(all.stdout).toContain('  1.000  left-pad@1.0.1  node_modules/tool/node_modules/left-pad/index.js\n');
    expect(all.stdout).not.toContain('more in this package');
  });
});

describe('help and errors name the subcommand', () => {
  it.each(['dedup', 'join', 'cluster'])('cusim %s --help says what CSV/TSV headers need, and --id-field has one default', async (sub) => {
    const h = (await cusim([sub, '--help'])).stdout;
    expect(h).toContain('CSV/TSV: the first row names the columns');
    expect(h).toContain('--no-header');
    expect(h).toContain('--columns name,text');
    const idHelp = h.slice(h.indexOf('--id-field'), h.indexOf('--no-header'));
    expect(idHelp.match(/default/g)).toHaveLength(1);
  });

  it('join --help says -t is required; a missing -t points to join --help', async () => {
    expect((await cusim(['join', '--help'])).stdout).toMatch(/-t, --threshold <x> +similarity threshold \(required\)/);
    const r = await cusim(['join', 'x.txt']);
    expect(r.status).toBe(2);
    expect(r.stderr).toBe("cusim: required option '-t, --threshold <x>' not specified (see cusim join --help)\n");
    expect((await cusim(['dedup', '--bogus'])).stderr).toBe("cusim: unknown option '--bogus' (see cusim dedup --help)\n");
    expect((await cusim(['bogus'])).stderr).toMatch(/\(see cusim --help\)\n$/);
  });

  it('bench/corpus.js --help prints its usage; an unknown option is one line pointing to it', async () => {
    const corpus = path.join(root, 'bench', 'corpus.js');
    const h = await sh(process.execPath, [corpus, '--help'], root);
    expect(h.status, h.stderr).toBe(0);
    expect(h.stdout).toMatch(/^Usage: node bench\/corpus\.js \[--docs N\]/);
    expect(h.stdout).toContain('--planted FRACTION');
    const bad = await sh(process.execPath, [corpus, '--bogus'], root);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toBe("bench/corpus.js: Unknown option '--bogus' (see node bench/corpus.js --help)\n");
  });
});

describe('renderJson', () => {
  it('writes, a slice of groups at a time, exactly what JSON.stringify(report, null, 2) writes', async () => {
    const { renderJson } = (await import('../lib/cli/report.js')) as typeof import('../lib/cli/report.js');
    // More groups than one slice (512), members and pairs nested in each.
    const groups = Array.from({ length: 1300 }, (_, id) => ({
      id,
      size: 2,
      members: [
        { id: `d${id}`, similarity: 1 },
        { id: `d${id}-copy "q"`, similarity: 0.95 },
      ],
      pairs: [{ left: `d${id}`, right: `d${id}-copy "q"`, similarity: 0.95 }],
    }));
    const report = {
      schema: 'cusim.dedup/1' as const,
      backend: 'cpu',
      gpus: [],
      options: { threshold: 0.9, samples: 108, seed: 1, mode: 'words', weighting: 'binary', method: 'classic' },
      input: { source: 'x', documents: 2600, featurized: 2600, tooSmall: 0, skipped: [] },
      lsh: { bands: 6, rows: 18, samples: 108, recall: [{ similarity: 0.9, probability: 0.99 }] },
      groups,
      packages: [],
      stages: [{ stage: 'read', ms: 1 }],
      elapsedMs: 5,
    };
    for (const n of [1, 512, 513, 1300]) {
      const r = { ...report, groups: groups.slice(0, n) };
      expect([...renderJson(r)].join('')).toBe(JSON.stringify(r, null, 2) + '\n');
    }
  });
});

describe('safeJson (the JSON report writer)', () => {
  it('writes DEL, C1 controls and bidi characters as \\u escapes, ASCII-only or not, and parses back to the same strings', async () => {
    const { safeJson } = (await import(path.join(root, 'dist', 'cli', 'escape.js'))) as typeof import('../lib/cli/escape.js');
    for (const s of ['plain ascii', 'del \u007f only', 'c1 \u009b and é', 'bidi \u202e', 'sep \u2028', 'mixed \u007f é \u2066']) {
      const out = safeJson({ s, n: [1, 2] }, 2);
      expect(out).not.toMatch(/[\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/);
      expect(JSON.parse(out)).toEqual({ s, n: [1, 2] });
      if (s === 'plain ascii') expect(out).toBe(JSON.stringify({ s, n: [1, 2] }, null, 2));
      else if (s.includes('\u007f')) expect(out).toContain('\\u007f');
    }
  });
});

describe('counts in reports and progress', () => {
  it("group thousands as toLocaleString('en-US') does, for every integer size and sign", async () => {
    const { grouped } = await import('../lib/cli/sources.js');
    const r = rng(5);
    const xs = [0, 1, 9, 10, 999, 1000, 1001, 999_999, 1_000_000, 380_051_310, 2 ** 32, 2 ** 53 - 1];
    for (let i = 0; i < 2000; i++) xs.push(Math.floor(r() * 10 ** (1 + randInt(r, 15))) * (r() < 0.2 ? -1 : 1));
    // (-0 is '0' here, where toLocaleString writes '-0'.)
    for (const x of xs) expect(grouped(x), String(x)).toBe((x || 0).toLocaleString('en-US'));
    // Fractions round as the progress counts did (Math.round, then grouped).
    expect(grouped(1234.5)).toBe('1,235');
  });
});
