import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { devices, resolveBackend, threads } from '../lib/index.js';
import { ensureDist } from './cli-helpers.js';
import { describeGpu, hasGpu } from './helpers.js';

describe('runtime', () => {
  it('loads the addon through the package entry in a fresh child process and reports devices', () => {
    const root = fileURLToPath(new URL('..', import.meta.url));
    ensureDist();
    const out = execFileSync(
      process.execPath,
      ['--input-type=module', '-e', "const m = await import('cusim'); console.log(JSON.stringify(m.devices()))"],
      { cwd: root, encoding: 'utf8' },
    );
    const d = JSON.parse(out);
    expect(typeof d.cuda).toBe('boolean');
    expect(Array.isArray(d.gpus)).toBe(true);
    if (!d.cuda) expect(d.reason).toMatch(/^(not compiled|no driver|driver too old|no device|no supported GPU): /);
    expect(d.cuda).toBe(devices().cuda);
  });

  it('devices() explains why CUDA is off, or lists real GPUs', () => {
    const d = devices();
    if (d.cuda) {
      expect(d.gpus.length).toBeGreaterThan(0);
      for (const g of d.gpus) {
        expect(g.memoryBytes).toBeGreaterThan(1 << 30);
        expect(g.multiprocessors).toBeGreaterThan(0);
        expect(g.computeCapability).toMatch(/^\d+\.\d+$/);
      }
    } else {
      expect(d.reason).toBeTruthy();
      expect(d.gpus).toEqual([]);
    }
  });

  it('auto picks cuda exactly when a GPU is usable; cuda without one throws a coded error', () => {
    expect(resolveBackend('auto')).toBe(hasGpu ? 'cuda' : 'cpu');
    expect(resolveBackend('cpu')).toBe('cpu');
    if (!hasGpu) {
      expect(() => resolveBackend('cuda')).toThrow(/CUDA is unavailable/);
      try {
        resolveBackend('cuda');
      } catch (e) {
        expect((e as { code: string }).code).toBe('CUSIM_CUDA_ERROR');
      }
    }
    expect(() => resolveBackend('gpu')).toThrow(TypeError);
  });

  it('CUSIM_BACKEND forces the choice', () => {
    const prev = process.env.CUSIM_BACKEND;
    try {
      process.env.CUSIM_BACKEND = 'cpu';
      expect(resolveBackend('auto')).toBe('cpu');
      process.env.CUSIM_BACKEND = 'bogus';
      expect(() => resolveBackend('auto')).toThrow(/CUSIM_BACKEND/);
    } finally {
      if (prev === undefined) delete process.env.CUSIM_BACKEND;
      else process.env.CUSIM_BACKEND = prev;
    }
  });

  it('threads() reads and sets the CPU pool size', () => {
    const before = threads();
    expect(before).toBeGreaterThanOrEqual(1);
    expect(threads(3)).toBe(3);
    expect(threads(0)).toBeGreaterThanOrEqual(1);
    expect(() => threads(-1)).toThrow(RangeError);
  });
});

describeGpu('runtime', () => {
  it('cuda backend resolves and every GPU reports a name', () => {
    expect(resolveBackend('cuda')).toBe('cuda');
    for (const g of devices().gpus) expect(g.name.length).toBeGreaterThan(0);
  });
});
