// Smoke workload for the harness: row popcount, every backend.
export async function run({ cusim, quick, backends, time }) {
  const rows = quick ? 100_000 : 4_000_000;
  const bits = 256;
  const data = new Uint32Array((rows * bits) / 32);
  let s = 12345;
  for (let i = 0; i < data.length; i++) data[i] = s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
  const out = [];
  for (const backend of backends) {
    const t = await time(
      async () => {
        const r = await cusim.popcountRows({ data, rows, bits }, { backend });
        return backend === 'cuda' ? { deviceMs: r.kernelMs } : undefined;
      },
      { warmup: 1, repeats: quick ? 3 : 7 },
    );
    const bytes = data.byteLength + rows * 4;
    out.push({
      backend,
      rows,
      bits,
      'wall ms (median)': t.wallMs.median,
      'wall ms (min)': t.wallMs.min,
      'kernel ms (median)': t.deviceMs?.median,
      'kernel GB/s': t.deviceMs ? bytes / 1e6 / t.deviceMs.median : undefined,
      'rows/s (wall)': rows / (t.wallMs.median / 1e3),
    });
  }
  return {
    sections: [
      {
        title: `row popcount, ${rows} x ${bits} bits`,
        columns: ['backend', 'rows', 'bits', 'wall ms (median)', 'wall ms (min)', 'kernel ms (median)', 'kernel GB/s', 'rows/s (wall)'],
        rows: out,
        notes: ['wall time includes host-device copies; kernel time is CUDA events around the kernel alone'],
      },
    ],
  };
}
