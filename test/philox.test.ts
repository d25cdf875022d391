import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { native } from '../lib/addon.js';

// cuRAND's own outputs on an H100 (CUDA 13.0), copied from ../shared/kat.
interface Case {
  seed: string;
  subsequence: string;
  offset: string;
  curand: number[];
  curand_uniform_bits: number[];
}
const cases = JSON.parse(readFileSync(new URL('./fixtures/curand_philox4x32_10.json', import.meta.url), 'utf8')) as Case[];

describe('Philox4x32-10 (host) reproduces cuRAND', () => {
  it(`matches all ${cases.length} known-answer cases for curand() and curand_uniform()`, () => {
    expect(cases.length).toBe(125);
    for (const c of cases) {
      const args = [BigInt(c.seed), BigInt(c.subsequence), BigInt(c.offset)] as const;
      const words = native().philoxStream(...args, c.curand.length, false) as Uint32Array;
      expect([...words], `curand ${c.seed}/${c.subsequence}/${c.offset}`).toEqual(c.curand);
      const uni = native().philoxStream(...args, c.curand_uniform_bits.length, true) as Uint32Array;
      expect([...uni], `curand_uniform ${c.seed}/${c.subsequence}/${c.offset}`).toEqual(c.curand_uniform_bits);
    }
  });
});
