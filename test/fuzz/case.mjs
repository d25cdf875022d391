// One fuzz case: the context families build cases in, and how an outcome is
// judged. Shared by child.mjs (batches under the runner) and replay.mjs.
import { Worker } from 'node:worker_threads';
import { pathToFileURL, fileURLToPath } from 'node:url';
import path from 'node:path';
import { Gen, caseSeed, KNOWN_CODES } from './gen.mjs';
import { pickGenerator } from './families/index.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export async function makeContext() {
  const lib = await import(pathToFileURL(path.join(root, 'dist', 'index.js')).href);
  const { native } = await import(pathToFileURL(path.join(root, 'dist', 'addon.js')).href);
  return {
    lib,
    native: native(),
    backend: 'cpu',
    // A worker that takes buffers and drops them; terminating it frees them.
    sink() {
      return new Worker('require("node:worker_threads").parentPort.on("message", () => {})', { eval: true });
    },
    tick: () => new Promise((r) => setImmediate(r)),
    sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
  };
}

export function describeError(e) {
  if (e === null || typeof e !== 'object') return `thrown ${typeof e}: ${String(e)}`;
  return `${e.constructor?.name ?? 'Error'} ${e.code ?? '(no code)'}: ${String(e.message).slice(0, 300)}`;
}

/**
 * [status, detail] for a case's outcome: 'ok' (a correct result), 'typed' (a
 * coded error where one is acceptable), 'wrong' (a wrong result, invalid
 * input accepted, or valid input refused) or 'untyped' (an error without a
 * known code).
 */
export function judge(c, outcome) {
  if (outcome.ok) {
    if (c.kind === 'invalid') return ['wrong', `accepted invalid input (${c.what ?? 'see generator'})`];
    if (c.errorCode) return ['wrong', `expected ${c.errorCode}, got a result`];
    const why = c.check ? c.check(outcome.value) : null;
    return why ? ['wrong', why] : ['ok', ''];
  }
  const e = outcome.error;
  const coded = e instanceof Error && typeof e.code === 'string';
  if (!coded || !KNOWN_CODES.has(e.code)) return ['untyped', describeError(e)];
  if (c.errorCode && e.code !== c.errorCode) return ['wrong', `expected ${c.errorCode}, got ${describeError(e)}`];
  if (c.kind === 'valid' && !(c.allow ?? []).includes(e.code))
    return ['wrong', `rejected valid input (${c.what ?? ''}): ${describeError(e)}`];
  return ['typed', ''];
}

/** Builds and runs case `id` of run `seed`; `onStart` is told its entry first. */
export async function runCase(table, seed, id, ctx, onStart = () => {}) {
  const s = caseSeed(seed, id);
  const gen = pickGenerator(table, s);
  onStart(gen);
  let status;
  let detail;
  let error;
  let what;
  try {
    const c = await gen.make(new Gen(s), ctx);
    what = c.what;
    let outcome;
    try {
      outcome = { ok: true, value: await c.run() };
    } catch (e) {
      outcome = { ok: false, error: e };
      error = e;
    }
    [status, detail] = judge(c, outcome);
    if (c.cleanup) await c.cleanup();
  } catch (e) {
    [status, detail] = ['harness', `generator failed: ${e?.stack ?? e}`];
  }
  await ctx.tick();
  return { entry: gen.entry, family: gen.family, status, detail, error, what };
}
