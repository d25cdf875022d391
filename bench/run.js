#!/usr/bin/env node
// Bench runner: node bench/run.js [engine…] [--quick] [--out DIR]
// Each engine's module (bench/<engine>.js) exports run(ctx) and returns
// { sections: [{ title, rows, columns, notes? }] }. Every backend and peer of
// an engine runs in the same invocation, so ratios compare like with like.
import { parseArgs } from 'node:util';
import { mkdirSync, writeFileSync, existsSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { hostInfo, slug, table, time, runPeer } from './harness.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..');
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    quick: { type: 'boolean', default: false },
    out: { type: 'string', default: path.join(here, 'results') },
    tag: { type: 'string' },
  },
});

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

const date = new Date().toISOString().slice(0, 10);
const gpuName = host.gpus[0]?.name ?? 'cpu-only';
const base = `${slug(gpuName)}${host.gpus.length > 1 ? `-x${host.gpus.length}` : ''}-${date}${values.tag ? '-' + values.tag : ''}`;
const results = { host, devices: dev, date, quick: values.quick, engines: {} };
let md = `# cusim bench: ${gpuName}${host.gpus.length > 1 ? ` ×${host.gpus.length}` : ''}, ${date}\n\n`;
md += `- GPU: ${host.gpus.map((g) => g.name).join(', ') || 'none'}; driver ${host.driver ?? 'n/a'}\n`;
md += `- CPU: ${host.cpu}, ${host.cores} cores; Node ${host.node}\n`;
md += `- Command: \`node bench/run.js ${process.argv.slice(2).join(' ')}\`${values.quick ? ' (quick sizes)' : ''}\n\n`;

let failed = false;
for (const e of engines) {
  ctx.log(`engine ${e}`);
  const mod = await import(path.join(here, `${e}.js`));
  try {
    const r = await mod.run(ctx);
    results.engines[e] = r;
    for (const s of r.sections) {
      md += `## ${e}: ${s.title}\n\n${table(s.rows, s.columns)}\n`;
      if (s.notes) md += `${s.notes.map((n) => `- ${n}`).join('\n')}\n\n`;
    }
  } catch (err) {
    failed = true;
    console.error(`bench ${e} failed:`, err);
    results.engines[e] = { error: String(err?.stack ?? err) };
    md += `## ${e}\n\nFAILED: ${String(err?.message ?? err)}\n\n`;
  }
}

mkdirSync(values.out, { recursive: true });
writeFileSync(path.join(values.out, `${base}.json`), JSON.stringify(results, null, 2));
writeFileSync(path.join(values.out, `${base}.md`), md);
console.log(md);
console.error(`bench: wrote ${path.join(values.out, base)}.{json,md}`);
process.exitCode = failed ? 1 : 0;
