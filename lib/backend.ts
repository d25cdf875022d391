// Backend choice and device discovery, shared by every engine.
import { native } from './addon.js';
import { cudaError, rangeError, typeError } from './errors.js';
import { checkInt, describe } from './validate.js';
import type { Backend, DeviceInfo } from './types.js';
export type { Backend, GpuInfo, DeviceInfo } from './types.js';

export type BackendOption = 'auto' | 'cpu' | 'cuda';
let cachedDevices: DeviceInfo | undefined;

/** What this host offers. Probed once per process. */
export function devices(): DeviceInfo {
  if (!cachedDevices) {
    const n = native();
    cachedDevices = n.devices();
    if (n.recordReader) cachedDevices.recordReader = n.recordReader;
    if (n.tableReader) cachedDevices.tableReader = n.tableReader;
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

/** The GPU indices `requested` names ('all' or undefined: every GPU of this host). */
export function gpuIndices(requested: 'all' | number[] | undefined, name = 'devices'): number[] {
  return resolveDevices(requested ?? 'all', name) ?? devices().gpus.map((_, i) => i);
}

/**
 * The GPU option of an engine that runs on one GPU: `devices` as every engine
 * takes it ('all' or GPU indices; here at most one index, 'all' meaning the
 * default GPU 0). The removed spelling `device: n` is a coded error rather
 * than silently GPU 0.
 */
export function resolveOneDevice(options: { devices?: unknown; device?: unknown }, what: string): number[] | undefined {
  if (options.device !== undefined) throw typeError('device was removed: pass devices: [n]');
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
