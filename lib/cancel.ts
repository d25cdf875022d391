// AbortSignal support: the signal flips a shared Int32Array flag that native
// workers poll between chunks (no callback into JS from worker threads).
import { abortError, type CodedError } from './errors.js';

export async function withCancel<T>(signal: AbortSignal | undefined, run: (flag: Int32Array | undefined) => Promise<T>): Promise<T> {
  if (signal === undefined) return run(undefined);
  if (!(signal instanceof AbortSignal)) throw new TypeError('signal must be an AbortSignal');
  if (signal.aborted) throw abortError(signal.reason);
  const flag = new Int32Array(1);
  const onAbort = () => Atomics.store(flag, 0, 1);
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    return await run(flag);
  } catch (e) {
    if ((e as CodedError)?.code === 'ABORT_ERR') throw abortError(signal.reason);
    throw e;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}
