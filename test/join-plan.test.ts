// The GPU join's probe-batch plan (native/join_plan.cc), computed on the host
// from prefix sums on all cores, against the serial greedy cut it replaced.
import { describe, expect, it } from 'vitest';
import { native } from '../lib/addon.js';
import { threads } from '../lib/index.js';
import { randInt, rng } from './helpers.js';

/** The serial greedy scan: a batch takes probes until the next would pass the slot budget or the probe cap. */
function greedy(lg: Uint8Array, cands: Float64Array, p0: number, budget: number, maxProbes: number) {
  const batches: { probes: number[]; tableOff: number[]; maxCands: number }[] = [];
  let cur: { probes: number[]; tableOff: number[]; maxCands: number } | undefined;
  let slots = 0;
  for (let j = 0; j < lg.length; j++) {
    if (lg[j] === 0) continue;
    const cap = 2 ** lg[j];
    if (!cur || slots + cap > budget || cur.probes.length >= maxProbes) {
      cur = { probes: [], tableOff: [0], maxCands: 0 };
      batches.push(cur);
      slots = 0;
    }
    slots += cap;
    cur.probes.push(p0 + j);
    cur.tableOff.push(slots);
    cur.maxCands += cands[j];
  }
  return batches;
}

/** The first difference between the native plan and the greedy one, or '' (plain loops: a million expect() calls would dominate). */
function planDiff(lg: Uint8Array, cands: Float64Array, p0: number, budget: number, maxProbes: number): string {
  const got = native().joinPlanBatches(lg, cands, p0, budget, maxProbes);
  const want = greedy(lg, cands, p0, budget, maxProbes);
  const nb = got.start.length - 1;
  if (nb !== want.length) return `${nb} batches, want ${want.length}`;
  if (got.tableOff.length !== got.probes.length + nb) return `${got.tableOff.length} table offsets for ${got.probes.length} probes`;
  if (got.start[nb] !== got.probes.length) return `batches end at ${got.start[nb]} of ${got.probes.length} probes`;
  for (let b = 0; b < nb; b++) {
    const s = got.start[b];
    const n = got.start[b + 1] - s;
    const w = want[b];
    if (n !== w.probes.length) return `batch ${b}: ${n} probes, want ${w.probes.length}`;
    if (got.maxCands[b] !== w.maxCands) return `batch ${b}: maxCands ${got.maxCands[b]}, want ${w.maxCands}`;
    for (let k = 0; k < n; k++)
      if (got.probes[s + k] !== w.probes[k]) return `batch ${b} probe ${k}: ${got.probes[s + k]}, want ${w.probes[k]}`;
    for (let k = 0; k <= n; k++)
      if (got.tableOff[s + b + k] !== w.tableOff[k])
        return `batch ${b} table offset ${k}: ${got.tableOff[s + b + k]}, want ${w.tableOff[k]}`;
  }
  return '';
}

function expectPlan(lg: Uint8Array, cands: Float64Array, p0: number, budget: number, maxProbes: number, what: string) {
  expect(planDiff(lg, cands, p0, budget, maxProbes), what).toBe('');
}

function randomInput(seed: number, np: number, emptyRate: number, maxLg: number) {
  const r = rng(seed);
  const lg = new Uint8Array(np);
  const cands = new Float64Array(np);
  for (let j = 0; j < np; j++) {
    if (r() < emptyRate) continue;
    lg[j] = 3 + randInt(r, maxLg - 2);
    cands[j] = 1 + randInt(r, 2 ** lg[j] / 2);
  }
  return { lg, cands };
}

describe('join batch plan (host, all cores) equals the serial greedy cut', () => {
  it('random probes over several slices, budgets from one table to all, probe caps, every thread count', () => {
    const before = threads();
    try {
      // 150,000 probes: three of the planner's 2^16-probe slices.
      const { lg, cands } = randomInput(7, 150_000, 0.4, 12);
      for (let t = 1; t <= 4; t++) {
        threads(t);
        for (const [budget, maxProbes] of [
          [2 ** 12, 2 ** 22],
          [2 ** 16, 2 ** 22],
          [2 ** 20, 1000],
          [2 ** 40, 2 ** 22],
          [2 ** 40, 1],
        ]) {
          expectPlan(lg, cands, 12345, budget, maxProbes, `${t} threads, budget ${budget}, cap ${maxProbes}`);
        }
      }
    } finally {
      threads(before);
    }
  });

  it('a probe whose table alone exceeds the budget gets a batch of its own', () => {
    const lg = Uint8Array.from([3, 20, 3, 3, 21, 0, 20]);
    const cands = Float64Array.from([1, 5, 2, 3, 4, 0, 6]);
    expectPlan(lg, cands, 0, 2 ** 10, 100, 'oversized tables');
    const got = native().joinPlanBatches(lg, cands, 0, 2 ** 10, 100);
    expect(Array.from(got.start)).toEqual([0, 1, 2, 4, 5, 6]);
  });

  it('no probes, or none with candidates, plan no batches', () => {
    for (const np of [0, 1, 70_000]) {
      const got = native().joinPlanBatches(new Uint8Array(np), new Float64Array(np), 5, 2 ** 20, 10);
      expect(Array.from(got.start)).toEqual([0]);
      expect(got.probes.length + got.tableOff.length + got.maxCands.length).toBe(0);
    }
  });

  it('dense runs: every probe with candidates, budget cuts at slice edges', () => {
    const { lg, cands } = randomInput(11, 2 ** 17 + 3, 0, 4);
    for (const budget of [8, 16, 2 ** 16, 2 ** 16 * 8]) expectPlan(lg, cands, 0, budget, 2 ** 22, `budget ${budget}`);
  });
});
