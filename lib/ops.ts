// Small utility kernels. popcountRows is also the bench harness's smoke test.
import { native } from './addon.js';
import { resolveBackend, type BackendOption, type Backend } from './backend.js';
import { withCancel } from './cancel.js';
import { checkOptions, toBits, type BitCodes } from './validate.js';

export interface PopcountResult {
  counts: Uint32Array;
  backend: Backend;
  /** Device time of the kernel alone (CUDA events); 0 on CPU. */
  kernelMs: number;
  /** Host-device copy time (CUDA events); 0 on CPU. */
  transferMs: number;
}

/** Number of set bits in each packed code. */
export async function popcountRows(
  codes: BitCodes,
  options: { backend?: BackendOption; device?: number; signal?: AbortSignal } = {},
): Promise<PopcountResult> {
  const c = toBits(codes, 'codes');
  checkOptions(options);
  const backend = resolveBackend(options.backend);
  return withCancel(options.signal, async (cancel) => {
    const r = await native().popcountRows(c, {
      backend,
      devices: options.device === undefined ? undefined : [options.device],
      cancel,
    });
    return { ...r, backend } as PopcountResult;
  });
}
