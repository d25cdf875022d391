// Shared bench machinery: timing (warm-up, repeats, median/min), host facts,
// Python peers on the same GPU, and the results table.
import { execFileSync, spawnSync } from 'node:child_process';
import { cpus, hostname } from 'node:os';
import { existsSync } from 'node:fs';

export function hostInfo() {
  let gpus = [];
  let driver = null;
  try {
    const out = execFileSync('nvidia-smi', ['--query-gpu=name,driver_version,memory.total', '--format=csv,noheader'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    for (const line of out.trim().split('\n')) {
      const [name, drv, mem] = line.split(',').map((s) => s.trim());
      gpus.push({ name, memory: mem });
      driver = drv;
    }
  } catch {
    gpus = [];
  }
  const c = cpus();
  return {
    hostname: hostname(),
    cpu: c[0]?.model ?? 'unknown',
    cores: c.length,
    gpus,
    driver,
    node: process.version,
  };
}

export function slug(s) {
  return s
    .toLowerCase()
    .replace(/nvidia\s*/g, '')
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '');
}

function stats(samples) {
  const s = [...samples].sort((a, b) => a - b);
  const mid = s.length >> 1;
  const median = s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
  return { median, min: s[0], runs: s.length };
}

/**
 * Times `fn` (async) with warm-up and repeats. `fn` may return
 * `{ deviceMs }` (CUDA-event time of the GPU work alone); then that is
 * summarized too.
 */
export async function time(fn, { warmup = 1, repeats = 5 } = {}) {
  for (let i = 0; i < warmup; i++) await fn();
  const wall = [];
  const device = [];
  for (let i = 0; i < repeats; i++) {
    const t0 = process.hrtime.bigint();
    const r = await fn();
    wall.push(Number(process.hrtime.bigint() - t0) / 1e6);
    if (r && typeof r.deviceMs === 'number') device.push(r.deviceMs);
  }
  const out = { wallMs: stats(wall) };
  if (device.length) out.deviceMs = stats(device);
  return out;
}

/** Runs a Python peer script; it prints one JSON object as its last line. */
export function runPeer(script, args = [], { timeoutMs = 300_000 } = {}) {
  if (!existsSync(script)) return { skipped: `missing ${script}` };
  const r = spawnSync('python3', [script, ...args.map(String)], {
    encoding: 'utf8',
    timeout: timeoutMs,
    env: { ...process.env, PYTHONUNBUFFERED: '1' },
  });
  if (r.error) return { skipped: `python3 unavailable: ${r.error.message}` };
  if (r.status !== 0) return { skipped: `peer failed (${r.status}): ${(r.stderr || '').trim().split('\n').slice(-3).join(' | ')}` };
  const lines = r.stdout.trim().split('\n');
  try {
    return JSON.parse(lines[lines.length - 1]);
  } catch {
    return { skipped: `peer printed no JSON: ${lines.slice(-2).join(' | ')}` };
  }
}

export function fmt(n, digits = 3) {
  if (n === undefined || n === null) return '';
  if (typeof n !== 'number') return String(n);
  if (!Number.isFinite(n)) return String(n);
  const a = Math.abs(n);
  if (a !== 0 && (a >= 1e6 || a < 1e-3)) return n.toExponential(2);
  return Number(n.toPrecision(digits)).toString();
}

/** One Markdown table for rows that share a set of keys. */
export function table(rows, columns) {
  const head = `| ${columns.join(' | ')} |\n| ${columns.map(() => '---').join(' | ')} |\n`;
  return head + rows.map((r) => `| ${columns.map((c) => fmt(r[c])).join(' | ')} |`).join('\n') + '\n';
}
