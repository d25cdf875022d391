// The kernel families by GPU architecture. Tensor-core kernels (sm_80:
// int8 and 1-bit mma.sync, cp.async) run only where devices() says the GPU
// has them; `tuning: { tensorCores: false }` forces the CUDA-core families
// that Turing runs, and on any GPU those must equal the CPU backend: here on
// random inputs and edge cases (one row, ragged row counts, duplicate rows,
// all-zero rows full of ties, no rows).
import { describe, expect, it } from 'vitest';
import { devices, FlyHash, HammingIndex, type DenseMatrix } from '../lib/index.js';
import { describeGpu, expectInvalid, randomBits, rng } from './helpers.js';

function bytes(r: () => number, rows: number, cols: number): DenseMatrix {
  return { rows, cols, data: Float32Array.from({ length: rows * cols }, () => Math.floor(r() * 256)) };
}

function floats(r: () => number, rows: number, cols: number): DenseMatrix {
  return { rows, cols, data: Float32Array.from({ length: rows * cols }, () => r() * 3 - 1) };
}

/** Rows 0..n-1 of X, then every row again in reverse order, then zeros. */
function withEdges(X: DenseMatrix): DenseMatrix {
  const data = new Float32Array(X.data.length * 2 + X.cols * 3);
  data.set(X.data);
  for (let i = 0; i < X.rows; i++) data.set(X.data.subarray((X.rows - 1 - i) * X.cols, (X.rows - i) * X.cols), (X.rows + i) * X.cols);
  return { rows: X.rows * 2 + 3, cols: X.cols, data };
}

describe('tuning option', () => {
  it('is checked: an object with a boolean tensorCores', () => {
    const fly = { inputDim: 8, hashLength: 32, connections: 2, winners: 4 };
    expectInvalid(() => new FlyHash({ ...fly, tuning: 5 as never }), TypeError, /tuning must be an object/);
    expectInvalid(
      () => new FlyHash({ ...fly, tuning: { tensorCores: 'no' } as never }),
      TypeError,
      /tuning\.tensorCores must be a boolean/,
    );
    expectInvalid(
      () => new FlyHash({ ...fly, tuning: { tensorcores: false } as never }),
      TypeError,
      /tuning\.tensorcores is not a tuning option/,
    );
    expectInvalid(() => new HammingIndex({ bits: 64, tuning: [] as never }), TypeError, /tuning must be an object/);
    using f = new FlyHash({ ...fly, tuning: { tensorCores: false } });
    expect(f.tuning).toEqual({ tensorCores: false });
  });

  it('FlyHash: the kernel-family keys are checked; the CPU codes do not depend on them', async () => {
    const fly = { inputDim: 8, hashLength: 32, connections: 2, winners: 4 };
    expectInvalid(
      () => new FlyHash({ ...fly, tuning: { kernel: 'fast' } as never }),
      TypeError,
      /tuning\.kernel must be one of 'auto', 'mma', 'fused', 'tile-large'/,
    );
    expectInvalid(
      () => new FlyHash({ ...fly, tuning: { maxRowsPerBlock: 3 } as never }),
      TypeError,
      /tuning\.maxRowsPerBlock must be one of 1, 2, 4/,
    );
    expectInvalid(
      () => new FlyHash({ ...fly, tuning: { exactRows: 16 } as never }),
      TypeError,
      /tuning\.exactRows must be one of 0, 1, 2, 4, 8/,
    );
    expectInvalid(() => new FlyHash({ ...fly, tuning: { batchRows: 0 } }), RangeError, /tuning\.batchRows must be an integer/);
    expectInvalid(
      () => new FlyHash({ ...fly, tuning: { forceFallback: 1 } as never }),
      TypeError,
      /tuning\.forceFallback must be a boolean/,
    );
    const tuning = {
      kernel: 'tile-large',
      maxRowsPerBlock: 2,
      stageProjection: false,
      exactRows: 0,
      batchRows: 64,
      forceFallback: true,
    } as const;
    using a = new FlyHash({ ...fly, tuning, backend: 'cpu' });
    using b = new FlyHash({ ...fly, backend: 'cpu' });
    expect(a.tuning).toEqual({ tensorCores: true, ...tuning });
    const X = { data: Float32Array.from({ length: 80 }, (_, i) => (i * 7919) % 13), rows: 10, cols: 8 };
    expect((await a.hash(X)).data).toEqual((await b.hash(X)).data);
  });

  it('Hamming: a tensor-core exactKernel contradicts tensorCores: false', async () => {
    expect(() => new HammingIndex({ bits: 64, tuning: { tensorCores: false, exactKernel: 'mma2' } })).toThrow(/tensorCores = false/);
    using index = new HammingIndex({ bits: 64, tuning: { tensorCores: false, exactKernel: 'popc' } });
    expect(index.tuning).toEqual({ tensorCores: false, exactKernel: 'popc' });
    index.add(randomBits(rng(1), 10, 64));
    const r = await index.search(randomBits(rng(2), 1, 64), { k: 2 });
    expect(r.ids).toHaveLength(2);
  });
});

describeGpu('kernel families by architecture', () => {
  it('devices() lists tensor-core families exactly on GPUs of compute capability 8.0 or newer', () => {
    const d = devices();
    expect(d.compiledWithCuda).toBe(true);
    expect(d.runtimeVersion).toMatch(/^\d+\.\d+$/);
    expect(d.cudaArchitectures).toBeTruthy();
    for (const g of d.gpus) {
      const major = Number(g.computeCapability.split('.')[0]);
      expect(g.tensorCores).toBe(major >= 8);
      expect(g.kernels.flyhash.includes('mma-u8')).toBe(major >= 8);
      expect(g.kernels.hamming.includes('mma2')).toBe(major >= 8);
      expect(g.kernels.flyhash).toEqual(expect.arrayContaining(['tile-large', 'fused', 'two-pass']));
      expect(g.kernels.hamming).toContain('popc');
    }
  });

  const flyShapes = [
    { inputDim: 128, hashLength: 640, connections: 13, winners: 32, seed: 1 },
    { inputDim: 784, hashLength: 3136, connections: 39, winners: 160, seed: 2 },
    { inputDim: 40, hashLength: 300, connections: 9, winners: 20, seed: 3 },
  ];

  for (const sh of flyShapes) {
    it(`FlyHash d=${sh.inputDim} m=${sh.hashLength}: CUDA-core families only, equal to the CPU`, async () => {
      using tc = new FlyHash({ ...sh, backend: 'cuda' });
      using plain = new FlyHash({ ...sh, backend: 'cuda', tuning: { tensorCores: false } });
      using cpuFly = new FlyHash({ ...sh, backend: 'cpu' });
      const tensorCores = devices().gpus[0].tensorCores;
      let seed = sh.seed * 100;
      for (const rows of [1, 65, 131, 700]) {
        for (const make of [bytes, floats]) {
          const X = withEdges(make(rng(seed++), rows, sh.inputDim));
          for (const output of ['bits', 'indices'] as const) {
            const cpu = await cpuFly.hash(X, { output });
            const gpu = await plain.hash(X, { output });
            expect(gpu.kernel, `${make.name} ${rows} rows`).not.toMatch(/mma/);
            expect(gpu.data, `${make.name} ${rows} rows ${output} on ${gpu.kernel}`).toEqual(cpu.data);
            if (make === bytes) {
              const u8 = await plain.hash({ rows: X.rows, cols: X.cols, data: Uint8Array.from(X.data) }, { output });
              expect(u8.kernel).not.toMatch(/mma/);
              expect(u8.data).toEqual(cpu.data);
            }
            // Left to itself the same GPU takes tensor cores for bytes where it has them, so the option is what kept them off.
            const auto = await tc.hash(X, { output });
            expect(auto.data).toEqual(cpu.data);
            if (make === bytes && tensorCores && sh.inputDim >= 128) expect(auto.kernel).toMatch(/^mma/);
          }
        }
      }
      const empty = await plain.hash({ rows: 0, cols: sh.inputDim, data: new Float32Array(0) });
      expect(empty.data).toHaveLength(0);
    }, 300_000);
  }

  for (const bits of [64, 256, 512]) {
    it(`Hamming exact scan, ${bits}-bit codes: popcount only, equal to the CPU`, async () => {
      const r = rng(bits);
      const db = randomBits(r, 3000, bits);
      const w = bits / 32;
      // Duplicates of the first rows, so that ties at the k-th distance are broken by id.
      const codes = new Uint32Array(db.length + 20 * w);
      codes.set(db);
      codes.set(db.subarray(0, 20 * w), db.length);
      const queries = randomBits(r, 97, bits);
      queries.set(db.subarray(0, w), 0);
      using cpu = new HammingIndex({ bits, backend: 'cpu' });
      using plain = new HammingIndex({ bits, backend: 'cuda', tuning: { tensorCores: false } });
      using tc = new HammingIndex({ bits, backend: 'cuda' });
      for (const ix of [cpu, plain, tc]) ix.add(codes);
      for (const k of [1, 10, 64]) {
        const want = await cpu.search(queries, { k });
        const got = await plain.search(queries, { k });
        expect(got.ids).toEqual(want.ids);
        expect(got.distances).toEqual(want.distances);
        const auto = await tc.search(queries, { k });
        expect(auto.ids).toEqual(want.ids);
      }
      using tiny = new HammingIndex({ bits, backend: 'cuda', tuning: { tensorCores: false } });
      tiny.add(codes.subarray(0, w));
      const one = await tiny.search(queries.subarray(0, 2 * w), { k: 3 });
      expect(Array.from(one.ids)).toEqual([0, 0xffffffff, 0xffffffff, 0, 0xffffffff, 0xffffffff]);
    }, 120_000);
  }
});

describeGpu('driver report', () => {
  it("driverRelease is the kernel module's version from /proc/driver/nvidia/version", async () => {
    const { readFileSync, existsSync } = await import('node:fs');
    const file = '/proc/driver/nvidia/version';
    const want = existsSync(file) ? /Kernel Module\b.*?\s(\d+(?:\.\d+)+)\s/.exec(readFileSync(file, 'utf8'))?.[1] : undefined;
    const got = (devices() as { driverRelease?: string }).driverRelease;
    expect(got).toBe(want);
  });
});
