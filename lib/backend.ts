// Backend choice and device discovery, shared by every engine.
import { native } from './addon.js';
import { cudaError, rangeError, typeError } from './errors.js';
import { checkInt, describe } from './validate.js';

export type BackendOption = 'auto' | 'cpu' | 'cuda';
export type Backend = 'cpu' | 'cuda';

export interface GpuInfo {
  index: number;
  name: string;
  memoryBytes: number;
  computeCapability: string;
  multiprocessors: number;
  /**
   * Whether the tensor-core kernel families run here (compute capability 8.0
   * or newer: mma.sync on int8 and 1-bit fragments, cp.async). Older GPUs
   * (Turing) run the CUDA-core families, which give the same results.
   */
  tensorCores: boolean;
  /**
   * The kernel families this GPU runs where an engine has a choice, in the
   * order `auto` prefers them (shapes decide among them): FlyHash ('mma-u8',
   * 'mma-q8' with tensor cores, then 'tile-large', 'fused', 'two-pass') and
   * the Hamming exact scan ('mma2' with tensor cores, 'popc').
   */
  kernels: { flyhash: string[]; hamming: string[] };
}

export interface DeviceInfo {
  /** True when the addon has CUDA kernels and at least one usable GPU. */
  cuda: boolean;
  /**
   * Why `cuda` is false: 'not compiled: …', 'no driver: …', 'driver too old:
   * …' (naming the driver's and the runtime's CUDA versions and the fix),
   * 'no device: …' or 'no supported GPU: …'.
   */
  reason?: string;
  /** Usable GPUs (one whose architecture this binary has no kernels for is left out). */
  gpus: GpuInfo[];
  /** Whether this addon binary contains CUDA kernels at all. */
  compiledWithCuda: boolean;
  /** CUDA builds: the GPU architectures compiled in (CMake's list, e.g. '75-real,…,90-real,100-real,120'). */
  cudaArchitectures?: string;
  /** CUDA builds: the CUDA runtime version linked in ('13.0'). */
  runtimeVersion?: string;
  /** CUDA builds with a driver: the CUDA version the driver supports ('13.0'). */
  driverVersion?: string;
  /** The NVIDIA driver's own version ('580.159.04'), where the host reports it. */
  driverRelease?: string;
  /**
   * The parser of the native JSONL/line record reader compiled in
   * ('simdjson 3.0.1'); absent where the addon was built without simdjson,
   * and the CLI reads records in JavaScript.
   */
  recordReader?: string;
}

let cachedDevices: DeviceInfo | undefined;

/** What this host offers. Probed once per process. */
export function devices(): DeviceInfo {
  if (!cachedDevices) {
    const n = native();
    cachedDevices = n.devices();
    if (n.recordReader) cachedDevices.recordReader = n.recordReader;
  }
  return cachedDevices;
}

/**
 * Resolves `backend` ('auto' picks CUDA when a GPU is usable). The
 * CUSIM_BACKEND environment variable forces a choice over the argument.
 */
export function resolveBackend(requested: unknown = 'auto', name = 'backend'): Backend {
  const forced = process.env.CUSIM_BACKEND;
  let choice = requested;
  if (forced !== undefined && forced !== '') {
    if (forced !== 'auto' && forced !== 'cpu' && forced !== 'cuda') {
      throw typeError(`CUSIM_BACKEND must be 'auto', 'cpu' or 'cuda', got '${forced}'`);
    }
    choice = forced;
  }
  if (choice === undefined) choice = 'auto';
  if (choice !== 'auto' && choice !== 'cpu' && choice !== 'cuda') {
    throw typeError(`${name} must be 'auto', 'cpu' or 'cuda', got ${describe(choice)}`);
  }
  if (choice === 'cpu') return 'cpu';
  const d = devices();
  if (choice === 'cuda' && !d.cuda) throw cudaError(`${name} 'cuda' was requested but CUDA is unavailable: ${d.reason}`);
  return d.cuda ? 'cuda' : 'cpu';
}

/** `'all'` or a list of GPU indices, checked against this host. */
export function resolveDevices(requested: unknown, name = 'devices'): number[] | undefined {
  if (requested === undefined || requested === 'all') return undefined;
  if (!Array.isArray(requested) || requested.length === 0) {
    throw typeError(`${name} must be 'all' or a non-empty array of GPU indices`);
  }
  const gpus = devices().gpus.length;
  const seen = new Set<number>();
  requested.forEach((d, i) => {
    if (!Number.isInteger(d)) throw typeError(`${name}[${i}] must be an integer GPU index`);
    if (d < 0 || (gpus > 0 && d >= gpus)) throw rangeError(`${name}[${i}]=${d} is out of range: this host has ${gpus} GPU(s)`);
    if (seen.has(d)) throw rangeError(`${name}[${i}]=${d} is listed twice`);
    seen.add(d);
  });
  return requested as number[];
}

/**
 * The GPU option of an engine that runs on one GPU: `devices` as every engine
 * takes it ('all' or GPU indices; here at most one index, 'all' meaning the
 * default GPU 0), or its older spelling `device: n` (the same as `devices: [n]`).
 */
export function resolveOneDevice(options: { devices?: unknown; device?: unknown }, what: string): number[] | undefined {
  if (options.devices !== undefined && options.device !== undefined) {
    throw typeError('give devices or device, not both (device: n is devices: [n])');
  }
  if (options.device !== undefined) return resolveDevices([checkInt(options.device, 'device', 0, 1023)], 'device');
  // The count is checked before the indices: on a host with fewer GPUs, "runs on one" is the real fix.
  const requested = options.devices;
  if (Array.isArray(requested) && requested.length > 1) {
    throw rangeError(`devices lists ${requested.length} GPUs, but ${what} runs on one: pass one index`);
  }
  return resolveDevices(requested);
}

/** Reads or sets the CPU backends' thread count (0 restores the default). */
export function threads(n?: number): number {
  if (n !== undefined) checkInt(n, 'threads', 0, 4096);
  return native().threads(n);
}
