// AbortSignal support: the signal sets a native flag (a CancelFlag, shared by
// reference with the call, so no transfer or GC can pull it from under a
// worker) that native workers poll between chunks; no callback into JS from
// worker threads.
import { native } from './addon.js';
import { abortError, typeError, type CodedError } from './errors.js';
import type { CancelFlag } from './native-types.js';

/** Throws a coded TypeError unless `signal` is undefined or an AbortSignal. */
export function checkSignal(signal: unknown, name = 'signal'): AbortSignal | undefined {
  if (signal === undefined) return undefined;
  if (!(signal instanceof AbortSignal)) throw typeError(`${name} must be an AbortSignal`);
  return signal;
}

export async function withCancel<T>(signal: AbortSignal | undefined, run: (flag: CancelFlag | undefined) => Promise<T>): Promise<T> {
  if (checkSignal(signal) === undefined) return run(undefined);
  const s = signal as AbortSignal;
  if (s.aborted) throw abortError(s.reason);
  const flag = new (native().CancelFlag)();
  const onAbort = () => flag.abort();
  s.addEventListener('abort', onAbort, { once: true });
  try {
    return await run(flag);
  } catch (e) {
    if ((e as CodedError)?.code === 'ABORT_ERR') throw abortError(s.reason);
    throw e;
  } finally {
    s.removeEventListener('abort', onAbort);
  }
}
