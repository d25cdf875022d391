// SIGINT and SIGTERM end every subcommand, also one reading a pipe that stays
// open: the command stops reading, writes what it has already assigned (whole
// lines) and exits 130 or 143. `cusim cluster` used to ignore SIGINT while its
// stdin pipe stayed open. Each run signals only once the command has shown it
// is running (its first output), and asserts no timing beyond "it exited".
import { beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ensureDist } from './cli-helpers.js';
import { interrupt as interruptCli } from './fuzz/families/signals.mjs';
import { randomBits, rng } from './helpers.js';

beforeAll(() => ensureDist());

interface Ended {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

// The fuzz harness's signals family runs the same helper; here a command still
// running 90 s after it started fails the test.
const interrupt = (args: string[], input: string, sig: NodeJS.Signals, ready: (out: string, err: string) => boolean): Promise<Ended> =>
  interruptCli(args, input, sig, ready, 90_000) as Promise<Ended>;

const docs = Array.from({ length: 400 }, (_, i) => `document ${i} on topic ${i % 9} with words w${i % 13} w${i % 17}`).join('\n') + '\n';
const banner = (_: string, err: string): boolean => err.includes('cusim: backend');

describe('signals end every subcommand reading an open pipe', () => {
  for (const [sig, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const) {
    it(`cluster: ${sig} after the first lines, the lines so far are whole, exit ${code}`, async () => {
      const r = await interrupt(['cluster', '--batch', '50', '--quiet'], docs, sig, (out) => out.includes('\n'));
      expect({ code: r.code, signal: r.signal }).toEqual({ code, signal: null });
      expect(r.stdout.endsWith('\n')).toBe(true);
      const lines = r.stdout.trimEnd().split('\n');
      lines.forEach((l, i) => expect(JSON.parse(l)).toMatchObject({ id: String(i + 1) }));
    });

    for (const cmd of [
      ['dedup', '-', '--format', 'lines'],
      ['join', '-', '--format', 'lines', '--threshold', '0.5'],
      // CSV goes through csv-parse, whose pipe never ended when stdin was destroyed (Node exited 13).
      ['dedup', '-', '--format', 'csv'],
    ]) {
      it(`${cmd.join(' ')}: ${sig} while it reads stdin, exit ${code}`, async () => {
        const input = cmd.includes('csv')
          ? 'id,text\n' +
            docs
              .trimEnd()
              .split('\n')
              .map((l, i) => `${i},"${l}"`)
              .join('\n') +
            '\n'
          : docs;
        const r = await interrupt(cmd, input, sig, banner);
        expect({ code: r.code, signal: r.signal }).toEqual({ code, signal: null });
        expect(r.stdout === '' || r.stdout.endsWith('\n')).toBe(true);
      });
    }
  }

  it('knn: SIGINT during a long search, exit 130', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cusim-signals-'));
    const R = rng(9);
    writeFileSync(path.join(dir, 'index.bin'), new Uint8Array(randomBits(R, 200_000, 256).buffer));
    writeFileSync(path.join(dir, 'queries.bin'), new Uint8Array(randomBits(R, 20_000, 256).buffer));
    const r = await interrupt(
      ['knn', '--index', path.join(dir, 'index.bin'), '--queries', path.join(dir, 'queries.bin'), '--bits', '256', '--backend', 'cpu'],
      '',
      'SIGINT',
      banner,
    );
    expect({ code: r.code, signal: r.signal }).toEqual({ code: 130, signal: null });
    expect(r.stdout).toBe('');
  });
});
