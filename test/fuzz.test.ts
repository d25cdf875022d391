// The fuzz harness (test/fuzz/): a fixed-seed slice in CI, and a check that
// the harness itself pins crashes, hangs, wrong results and untyped errors on
// the cases that caused them. Longer runs: `npm run fuzz -- --cases 20000`.
import { describe, expect, it } from 'vitest';
import { fuzz, formatSummary } from './fuzz/run.mjs';

interface Summary {
  totals: Record<string, number>;
  byEntry: Record<string, Record<string, number>>;
  failures: { id: number; entry: string; status: string; detail: string }[];
}

describe('fuzz harness', () => {
  it('attributes each deliberate failure to its case (canary family)', async () => {
    const s = (await fuzz({ cases: 36, seed: 7, jobs: 2, batch: 12, timeoutMs: 3000, families: ['canary'] })) as Summary;
    const e = s.byEntry;
    expect(s.totals.cases).toBe(36);
    for (const [entry, status] of [
      ['crash', 'crash'],
      ['hang', 'hang'],
      ['wrong', 'wrong'],
      ['untyped', 'untyped'],
      ['typed', 'typed'],
      ['ok', 'ok'],
    ]) {
      const row = e[`canary: canary ${entry}`];
      if (!row) continue; // not drawn with this seed
      expect(row[status], entry).toBe(row.cases);
    }
    expect(s.totals.crash).toBeGreaterThan(0);
    expect(s.totals.hang).toBeGreaterThan(0);
    expect(
      s.failures.every((f) =>
        f.entry.endsWith(
          f.status === 'crash'
            ? 'canary crash'
            : f.status === 'hang'
              ? 'canary hang'
              : f.status === 'wrong'
                ? 'canary wrong'
                : 'canary untyped',
        ),
      ),
    ).toBe(true);
  });

  it('CI slice: 3,000 fixed-seed cases over every entry point, no crash, hang, wrong result or untyped error', async () => {
    const s = (await fuzz({ cases: 3000, seed: 20260101, jobs: 2 })) as Summary;
    console.log(formatSummary(s));
    expect(s.totals.cases).toBe(3000);
    expect(s.failures.map((f) => `case ${f.id} ${f.status} ${f.entry}: ${f.detail}`)).toEqual([]);
    // Every family was exercised.
    for (const family of [
      'minhash',
      'flyhash',
      'join',
      'hamming',
      'cluster',
      'lsh',
      'text',
      'ops',
      'native',
      'redis',
      'hostile',
      'signals',
    ])
      expect(
        Object.keys(s.byEntry).some((k) => k.startsWith(`${family}:`)),
        family,
      ).toBe(true);
  });

  it('Redis family: 120 fixed-seed cases against a redis-server the harness starts, no hang or wrong result', async () => {
    const s = (await fuzz({ cases: 120, seed: 20260102, jobs: 2, batch: 60, families: ['redis'] })) as Summary;
    console.log(formatSummary(s));
    expect(s.totals.cases).toBe(120);
    expect(s.failures.map((f) => `case ${f.id} ${f.status} ${f.entry}: ${f.detail}`)).toEqual([]);
    for (const entry of ['redis index vs in-memory index', 'redis index with tampered keys', 'redis storage on a server that is not Redis'])
      expect(s.byEntry[`redis: ${entry}`]?.ok + s.byEntry[`redis: ${entry}`]?.typed, entry).toBeGreaterThan(5);
  });
});
