// Objects dropped without dispose() do not pile up: native sizes are
// reported to V8 (napi_adjust_external_memory), so the collector runs for
// objects that are small in JavaScript but hold megabytes natively. A mixed
// loop over every engine (test/soak/memory-loop.mjs; 60 s: `node --expose-gc
// test/soak/memory-loop.mjs --seconds 60`) must keep RSS, and on a GPU free
// device memory, flat after warm-up.
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { describeGpu, gpuCount } from './helpers.js';

const script = path.join(path.dirname(fileURLToPath(import.meta.url)), 'soak', 'memory-loop.mjs');

interface Run {
  iterations: number;
  samples: { t: number; rssMB: number; gpuFreeMB?: number }[];
}

// Asynchronous: a soak blocking this worker for its whole run would starve
// vitest's own messages (its RPC times out after a minute).
async function loop(args: string[], node: string[] = []): Promise<Run> {
  const { stdout } = await promisify(execFile)(process.execPath, [...node, script, ...args], { encoding: 'utf8', maxBuffer: 1 << 24 });
  return JSON.parse(stdout.trim().split('\n').pop()!) as Run;
}

// Peak in the last 40% of the run against the peak of the window after warm-up.
function growth(r: Run, seconds: number, key: 'rssMB' | 'gpuFreeMB'): { early: number; late: number } {
  const pick = (lo: number, hi: number) => r.samples.filter((s) => s.t > lo * seconds && s.t <= hi * seconds).map((s) => s[key] as number);
  const f = key === 'rssMB' ? Math.max : Math.min;
  return { early: f(...pick(0.2, 0.45)), late: f(...pick(0.6, 1.01)) };
}

describe('memory of objects dropped without dispose()', () => {
  for (const [name, args, node] of [
    ['every engine, yielding every iteration, gc() every 8', ['--burst', '1'], ['--expose-gc']],
    ['every engine, bursts of 12 iterations between yields, no explicit gc()', ['--burst', '12', '--gc', '1000000'], []],
    // Without the reported sizes this one grows past 1 GB before V8 collects.
    ['objects holding little JavaScript memory, no explicit gc()', ['--mix', 'native', '--gc', '1000000'], []],
  ] as const) {
    it(`RSS stays flat (${name})`, async () => {
      const seconds = 12;
      const r = await loop(['--seconds', String(seconds), ...args], [...node]);
      const { early, late } = growth(r, seconds, 'rssMB');
      expect(r.iterations).toBeGreaterThan(40);
      // Each iteration allocates 5-30 MB natively; a leak of one object per
      // iteration would add gigabytes.
      expect(late, JSON.stringify(r.samples.map((s) => s.rssMB))).toBeLessThan(early + 150);
      expect(Math.max(...r.samples.map((s) => s.rssMB))).toBeLessThan(900);
    });
  }
});

describeGpu('GPU memory of objects dropped without dispose()', () => {
  it('free device memory stays flat over the mixed loop (backend cuda)', async () => {
    const seconds = 30;
    const r = await loop(['--seconds', String(seconds), '--backend', 'cuda'], ['--expose-gc']);
    const gpu = growth(r, seconds, 'gpuFreeMB');
    // Free memory is summed over the GPUs: each may vary by up to 512 MB.
    expect(gpu.late, JSON.stringify(r.samples.map((s) => s.gpuFreeMB))).toBeGreaterThan(gpu.early - 512 * gpuCount);
    const rss = growth(r, seconds, 'rssMB');
    expect(rss.late).toBeLessThan(rss.early + 300);
  });
});
