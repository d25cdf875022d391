// Cases that fail on purpose, one of each kind, so the harness's own
// bookkeeping is tested (test/fuzz.test.ts): never part of a real run.
export const name = 'canary';

export const generators = [
  {
    entry: 'canary ok',
    weight: 1,
    make: () => ({ entry: 'canary ok', kind: 'valid', run: async () => 1, check: (v) => (v === 1 ? null : 'not 1') }),
  },
  {
    entry: 'canary typed',
    weight: 1,
    make: () => ({
      entry: 'canary typed',
      kind: 'invalid',
      run: async () => {
        throw Object.assign(new TypeError('bad'), { code: 'CUSIM_INVALID_ARGUMENT' });
      },
    }),
  },
  {
    entry: 'canary wrong',
    weight: 1,
    make: () => ({ entry: 'canary wrong', kind: 'valid', run: async () => 2, check: (v) => (v === 1 ? null : `got ${v}`) }),
  },
  {
    entry: 'canary untyped',
    weight: 1,
    make: () => ({
      entry: 'canary untyped',
      kind: 'either',
      run: async () => {
        throw new Error('no code');
      },
    }),
  },
  {
    entry: 'canary crash',
    weight: 1,
    make: () => ({ entry: 'canary crash', kind: 'either', run: async () => process.kill(process.pid, 'SIGSEGV') }),
  },
  {
    entry: 'canary hang',
    weight: 1,
    make: () => ({ entry: 'canary hang', kind: 'either', run: () => new Promise(() => setInterval(() => {}, 1000)) }),
  },
];
