#!/usr/bin/env node
// Bench runner: node bench/run.js [engine…] [--quick] [--out DIR]
// Each engine's module (bench/<engine>.js) exports run(ctx) and returns
// { sections: [{ title, rows, columns, notes? }] }. Every backend and peer of
// an engine runs in the same invocation, so ratios compare like with like.
//
// Results: one pair of files per engine, <out>/<host>/<engine>.md and .json,
// replaced by every run of that engine (git keeps their history). <host> is
// the GPU's slug with -xN for N GPUs (h100-80gb-hbm3, h200-x2), or cpu-only
// where the addon has no usable GPU. <out> is bench/results for full runs and
// bench/results/quick (git-ignored) for --quick runs, so a quick run never
// replaces committed numbers; --out overrides either.
import { parseArgs } from 'node:util';
import { mkdirSync, writeFileSync, existsSync, readdirSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { hostInfo, slug, table, time, runPeer } from './harness.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..');
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    quick: { type: 'boolean', default: false },
    out: { type: 'string' },
  },
});
const outRoot = path.resolve(values.out ?? path.join(here, 'results', ...(values.quick ? ['quick'] : [])));

if (!existsSync(path.join(root, 'dist', 'index.js'))) {
  console.error('bench: dist/ is missing; run `npm run build:ts` first');
  process.exit(1);
}
const cusim = await import(path.join(root, 'dist', 'index.js'));
const known = readdirSync(here)
  .filter((f) => f.endsWith('.js') && !['run.js', 'harness.js'].includes(f))
  .map((f) => f.replace(/\.js$/, ''));
const engines = positionals.length ? positionals : known;
for (const e of engines) {
  if (!known.includes(e)) {
    console.error(`bench: unknown engine '${e}' (have: ${known.join(', ')})`);
    process.exit(2);
  }
}

const host = hostInfo();
const dev = cusim.devices();
// Real data: ../shared/data beside a checkout, or a folder named by
// CUSIM_BENCH_DATA (hosts where ../shared is absent get a copy carried in).
const dataCandidates = [process.env.CUSIM_BENCH_DATA, path.resolve(root, '..', 'shared', 'data'), path.join(root, '.bench-data')];
const shared = dataCandidates.find((d) => d && existsSync(d));
const ctx = {
  cusim,
  quick: values.quick,
  host,
  devices: dev,
  backends: dev.cuda ? ['cpu', 'cuda'] : ['cpu'],
  dataDir: shared,
  peersDir: path.join(here, 'peers'),
  time,
  runPeer,
  log: (...a) => console.error('[bench]', ...a),
};

// The GPUs the addon uses (CUDA_VISIBLE_DEVICES applies), not every GPU nvidia-smi lists.
const gpus = dev.cuda ? dev.gpus.map((g) => g.name) : [];
const gpuLabel = gpus.length ? `${gpus[0]}${gpus.length > 1 ? ` ×${gpus.length}` : ''}` : 'CPU only';
const hostDir = gpus.length ? `${slug(gpus[0])}${gpus.length > 1 ? `-x${gpus.length}` : ''}` : 'cpu-only';
const date = new Date().toISOString().slice(0, 10);
const command = commandLine();
const code = codeVersion();

function shellQuote(s) {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replaceAll("'", "'\\''")}'`;
}

// The exact command, with the environment variables that steer cusim or the benches.
function commandLine() {
  const env = Object.keys(process.env)
    .filter((k) => k.startsWith('CUSIM_') || k === 'CUDA_VISIBLE_DEVICES')
    .sort()
    .map((k) => `${k}=${shellQuote(process.env[k])}`);
  return [...env, 'node', 'bench/run.js', ...process.argv.slice(2).map(shellQuote)].join(' ');
}

// The commit measured, where the checkout has git metadata; "modified" when
// tracked files outside bench/results differ from it.
function codeVersion() {
  try {
    const git = (...args) => execFileSync('git', args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const commit = git('rev-parse', '--short=12', 'HEAD');
    const dirty = git('status', '--porcelain', '--untracked-files=no', '--', '.', ':(exclude)bench/results') !== '';
    return dirty ? `${commit} with uncommitted changes` : commit;
  } catch {
    return null;
  }
}

function header(engine) {
  let md = `# cusim bench: ${engine}, ${gpuLabel}\n\n`;
  md += `- GPU: ${gpus.join(', ') || 'none (CPU backend only)'}${gpus.length ? `; driver ${host.driver ?? 'n/a'}` : ''}\n`;
  md += `- CPU: ${host.cpu}, ${host.cores} cores; Node ${host.node}\n`;
  md += `- Date: ${date}\n`;
  md += `- Command: \`${command}\`${values.quick ? ' (quick sizes)' : ''}\n`;
  if (code) md += `- Code: commit ${code}\n`;
  return md + '\n';
}

const dir = path.join(outRoot, hostDir);
mkdirSync(dir, { recursive: true });
let failed = false;
for (const e of engines) {
  ctx.log(`engine ${e}`);
  const mod = await import(path.join(here, `${e}.js`));
  let md = header(e);
  let result;
  try {
    result = await mod.run(ctx);
    for (const s of result.sections) {
      md += `## ${s.title}\n\n${table(s.rows, s.columns)}\n`;
      if (s.notes) md += `${s.notes.map((n) => `- ${n}`).join('\n')}\n\n`;
    }
  } catch (err) {
    failed = true;
    console.error(`bench ${e} failed:`, err);
    result = { error: String(err?.stack ?? err) };
    md += `FAILED: ${String(err?.message ?? err)}\n`;
  }
  const json = { engine: e, date, quick: values.quick, command, code, host, devices: dev, result };
  const base = path.join(dir, e);
  writeFileSync(`${base}.json`, JSON.stringify(json, null, 2) + '\n');
  writeFileSync(`${base}.md`, md.trimEnd() + '\n');
  console.log(md);
  console.error(`bench: wrote ${base}.{md,json}`);
}
process.exitCode = failed ? 1 : 0;
