// SIGINT and SIGTERM for every CLI subcommand that reads a pipe that stays
// open (dedup, join and cluster over stdin, in each line format): the command
// must stop reading, leave its output as whole lines and exit 130 or 143.
// Each case is one `cusim` process, signalled once it has shown it runs (its
// banner on stderr, or cluster's first assigned line); a command that ignores
// the signal is a hang, one killed by it (no handler) or exiting otherwise is
// a wrong result.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const name = 'signals';

const bin = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'bin', 'cusim');

const WORDS = ['alpha', 'beta', 'gamma', 'delta', 'naïve', '東京', 'x', 'a"b', 'c,d', 'tab\tbed', '\u202e', ''];

function records(g, format, n) {
  const lines = [];
  if (format === 'csv') lines.push('id,text');
  for (let i = 0; i < n; i++) {
    const words = Array.from({ length: 1 + g.int(12) }, () => g.pick(WORDS)).join(' ');
    if (format === 'jsonl') lines.push(JSON.stringify({ id: `r${i}`, text: words }));
    else if (format === 'csv') lines.push(`r${i},"${words.replaceAll('"', '""')}"`);
    else lines.push(words.replaceAll('\n', ' '));
  }
  return lines.join('\n') + '\n';
}

/**
 * Runs `cusim args` with `input` written to a stdin pipe that is never closed,
 * sends `sig` once `ready(stdout, stderr)` holds, and resolves with
 * { code, signal, stdout, stderr, sent } when the command exits. With
 * `guardMs`, a command still running then is killed and the promise rejects.
 */
export function interrupt(args, input, sig, ready, guardMs) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let sent = false;
    const check = () => {
      if (!sent && ready(stdout, stderr)) {
        sent = true;
        child.kill(sig);
      }
    };
    child.stdout.on('data', (d) => ((stdout += d), check()));
    child.stderr.on('data', (d) => ((stderr += d), check()));
    child.stdin.on('error', () => {});
    child.stdin.write(input);
    // The pipe is never ended: only the signal can end the command.
    const guard =
      guardMs === undefined
        ? undefined
        : setTimeout(
            () => (child.kill('SIGKILL'), reject(new Error(`no exit ${guardMs} ms after the command started: ${stderr}`))),
            guardMs,
          );
    child.on('exit', (code, signal) => {
      clearTimeout(guard);
      child.stdin.destroy();
      resolve({ code, signal, stdout, stderr, sent });
    });
  });
}

const banner = (_out, err) => err.includes('cusim: backend');

export const generators = [
  {
    entry: 'a subcommand reading an open pipe, signalled',
    weight: 1,
    make: (g) => {
      const sub = g.pick(['dedup', 'join', 'cluster']);
      const format = g.pick(['lines', 'jsonl', 'csv']);
      const sig = g.pick(['SIGINT', 'SIGTERM']);
      const input = records(g, format, 1 + g.int(300));
      const args =
        sub === 'cluster'
          ? ['cluster', '--format', format, '--batch', String(1 + g.int(64)), '--quiet']
          : [sub, '-', '--format', format, ...(sub === 'join' ? ['--threshold', '0.5'] : [])];
      // cluster prints as it assigns; dedup and join print only at the end.
      const ready = sub === 'cluster' ? (out, err) => out.includes('\n') || banner(out, err) : banner;
      const want = sig === 'SIGINT' ? 130 : 143;
      return {
        entry: 'a subcommand reading an open pipe, signalled',
        kind: 'valid',
        what: `${args.join(' ')} ← ${sig}`,
        run: () => interrupt(args, input, sig, ready),
        check: (r) => {
          if (!r.sent) return `exited before it was signalled: ${r.code} ${r.stderr.slice(0, 200)}`;
          if (r.signal !== null || r.code !== want) return `${sig}: exit ${r.code} signal ${r.signal}, want exit ${want}`;
          if (r.stdout !== '' && !r.stdout.endsWith('\n')) return 'output ends inside a line';
          return null;
        },
      };
    },
  },
];
