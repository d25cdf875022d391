// Small utility kernels. popcountRows is also the bench harness's smoke test.
import { native } from './addon.js';
import { resolveBackend, resolveOneDevice, type BackendOption, type Backend } from './backend.js';
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
  options: {
    backend?: BackendOption;
    /** The GPU: 'all' (GPU 0) or one index in a list. */
    devices?: 'all' | number[];
    signal?: AbortSignal;
  } = {},
): Promise<PopcountResult> {
  const c = toBits(codes, 'codes');
  checkOptions(options);
  const devices = resolveOneDevice(options, 'popcountRows');
  const backend = resolveBackend(options.backend);
  return withCancel(options.signal, async (cancel) => {
    const r = await native().popcountRows(c, {
      backend,
      devices,
      cancel,
    });
    return { ...r, backend };
  });
}
