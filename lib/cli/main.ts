// `cusim` command line. Every failure ends as one line on stderr naming the
// fix and a non-zero exit (2: usage, 1: input or runtime); --verbose adds
// the stack.
import { Command, CommanderError } from 'commander';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../addon.js';
import { registerCluster } from './cluster.js';
import { registerDedup } from './dedup.js';
import { CliError } from './errors.js';
import { escapeText } from './escape.js';
import { registerJoin } from './join.js';
import { registerKnn } from './knn.js';
import { registerWorker } from './worker.js';
import { defaultIo } from './options.js';
import type { Io } from './options.js';

function version(): string {
  try {
    return (JSON.parse(readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

/** Runs the CLI; resolves to the exit code. */
export async function main(argv: string[], baseIo: Io = defaultIo): Promise<number> {
  const verbose = argv.includes('--verbose');
  let exitCode = 0;
  // One signal ends a command early: SIGINT (Ctrl-C, exit 130) or SIGTERM
  // (exit 143), or stdout closed by its reader (`| head`: nothing more can be
  // shown, so exit 0 quietly). On a signal the command stops reading (stdin
  // is destroyed, so a pipe left open cannot hold it), writes what it has
  // already assigned and ends; a second signal ends the process at once.
  const ac = new AbortController();
  const state = { ac, closed: false };
  guardStdout(baseIo.stdout, baseIo.stderr);
  current = state;
  let signalled: number | undefined;
  const onSignal = (sig: NodeJS.Signals): void => {
    const code = sig === 'SIGTERM' ? 143 : 130;
    if (signalled !== undefined) process.exit(code);
    signalled = code;
    ac.abort();
    (baseIo.stdin as { destroy?: () => void }).destroy?.();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const io: Io = { ...baseIo, signal: ac.signal, stdoutClosed: () => state.closed };
  try {
    const code = await run(
      argv,
      io,
      verbose,
      (c) => (exitCode = c),
      () => exitCode,
      () => state.closed,
      () => signalled,
    );
    if (signalled !== undefined && !state.closed) {
      if (code !== signalled) baseIo.stderr.write('cusim: interrupted\n');
      return signalled;
    }
    return code;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

// The run a late stdout error belongs to: write errors are emitted after the
// write (for a pipe, when it completes), possibly after main() returned.
let current: { ac: AbortController; closed: boolean } | undefined;
const guarded = new WeakSet<object>();

function guardStdout(stdout: NodeJS.WritableStream, stderr: NodeJS.WritableStream): void {
  if (guarded.has(stdout)) return;
  guarded.add(stdout);
  stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE' || e.code === 'ERR_STREAM_DESTROYED') {
      if (current) {
        current.closed = true;
        current.ac.abort();
      }
      return;
    }
    stderr.write(`cusim: cannot write the output: ${e.message}\n`);
    process.exitCode = 1;
  });
}

async function run(
  argv: string[],
  io: Io,
  verbose: boolean,
  setExit: (code: number) => void,
  exitCode: () => number,
  stdoutClosed: () => boolean,
  signalled: () => number | undefined,
): Promise<number> {
  // Errors point to the help of the subcommand that was run, where there is one.
  const help = (): string => {
    const sub = program.commands.find((c) => c.name() === argv[2]);
    return sub ? `cusim ${sub.name()} --help` : 'cusim --help';
  };
  const program: Command = new Command('cusim')
    .description('GPU similarity search and near-duplicate detection')
    .version(version())
    .exitOverride()
    .configureOutput({
      writeOut: (s) => io.stdout.write(s),
      writeErr: (s) => io.stderr.write(s),
      outputError: (s, write) => write(`cusim: ${s.replace(/^error: /, '').trim()} (see ${help()})\n`),
    });

  const done = (code: number): void => setExit(code);
  registerDedup(program, io, done);
  registerJoin(program, io, done);
  registerKnn(program, io, done);
  registerCluster(program, io, done);
  registerWorker(program, io, done);

  try {
    await program.parseAsync(argv);
    return stdoutClosed() ? 0 : exitCode();
  } catch (e) {
    if (stdoutClosed()) return 0;
    // Whatever a signal cut short (a read of a destroyed stdin, an aborted call).
    const sig = signalled();
    if (sig !== undefined) {
      io.stderr.write('cusim: interrupted\n');
      return sig;
    }
    if (e instanceof CommanderError) {
      // Help and version exit 0; parse errors were already printed as one line.
      return e.exitCode === 0 ? 0 : 2;
    }
    const err = e as Error & { code?: string };
    if (e instanceof CliError) {
      io.stderr.write(`cusim: ${e.message}${e.fix ? ` (${e.fix})` : ''}\n`);
    } else if (err.code === 'ABORT_ERR') {
      io.stderr.write('cusim: interrupted\n');
      return 130;
    } else if (err.code === 'CUSIM_INVALID_ARGUMENT') {
      io.stderr.write(`cusim: ${err.message} (see ${help()})\n`);
    } else if (err.code === 'CUSIM_CUDA_ERROR' || err.code === 'CUSIM_OUT_OF_MEMORY') {
      io.stderr.write(`cusim: ${err.message.split('\n')[0]} (retry with --backend cpu)\n`);
    } else if (err.code === 'CUSIM_ADDON_NOT_FOUND' || err.code === 'CUSIM_ADDON_LOAD_FAILED' || err.code === 'CUSIM_ADDON_DAMAGED') {
      // The whole diagnosis: what was tried, why it failed, the fixes.
      io.stderr.write(`cusim: ${err.message}\n`);
    } else {
      io.stderr.write(`cusim: ${escapeText(String(err.message ?? e).split('\n')[0])} (rerun with --verbose for details)\n`);
    }
    if (verbose && err.stack) io.stderr.write(err.stack + '\n');
    return e instanceof CliError ? e.exitCode : 1;
  }
}
