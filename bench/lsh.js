// LSH + groups stage alone, on synthetic weighted-MinHash signatures with
// planted near-duplicates (each sample of a copy kept with probability J, the
// MinHash collision model). The MinHash stage has its own bench.
export async function run({ cusim, quick, backends, time, log }) {
  const n = quick ? 20_000 : 1_000_000;
  const samples = 128;
  const threshold = 0.8;
  const planted = Math.round(n * 0.05);
  const sig = new Uint32Array(n * samples * 2);
  let s = 0x9e3779b9;
  const next = () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return s >>> 0;
  };
  for (let i = 0; i < sig.length; i++) sig[i] = next();
  // Rows [n - planted, n) are copies of random earlier rows with J in [0.7, 1).
  const per = samples * 2;
  for (let i = n - planted; i < n; i++) {
    const src = next() % (n - planted);
    const J = 0.7 + 0.3 * (next() / 4294967296);
    sig.copyWithin(i * per, src * per, (src + 1) * per);
    for (let k = 0; k < samples; k++) {
      if (next() / 4294967296 >= J) {
        sig[i * per + 2 * k] = next();
        sig[i * per + 2 * k + 1] = next();
      }
    }
  }
  const ids = new Uint32Array(n);
  for (let i = 0; i < n; i++) ids[i] = i;
  const repeats = quick ? 3 : 5;
  const out = [];
  for (const backend of backends) {
    log(`lsh ${backend}: ${n} rows`);
    let lsh;
    const ins = await time(
      async () => {
        lsh?.dispose();
        lsh = new cusim.MinHashLSH({ threshold, samples, backend });
        lsh.insert(ids, sig);
      },
      { warmup: 0, repeats: 1 },
    );
    let pairs = 0;
    const cp = await time(
      async () => {
        const r = await lsh.candidatePairs();
        pairs = r.left.length;
        return backend === 'cuda' ? { deviceMs: r.kernelMs } : undefined;
      },
      { warmup: 1, repeats },
    );
    let groups = 0;
    let edges = 0;
    let transferMs;
    const gr = await time(
      async () => {
        const r = await lsh.groups({ verify: 'estimate' });
        groups = r.count;
        edges = r.pairs.left.length;
        transferMs = r.transferMs;
        return backend === 'cuda' ? { deviceMs: r.kernelMs } : undefined;
      },
      { warmup: 1, repeats },
    );
    out.push({
      backend,
      rows: n,
      'bands x rows': `${lsh.bands} x ${lsh.rows}`,
      'insert ms': ins.wallMs.median,
      'candidatePairs ms': cp.wallMs.median,
      'candidatePairs kernel ms': cp.deviceMs?.median,
      'groups(estimate) ms': gr.wallMs.median,
      'groups kernel ms': gr.deviceMs?.median,
      'groups transfer ms': backend === 'cuda' ? transferMs : undefined,
      'rows/s (groups)': n / (gr.wallMs.median / 1e3),
      'candidate pairs': pairs,
      'verified edges': edges,
      groups,
    });
    lsh.dispose();
  }
  return {
    sections: [
      {
        title: `MinHash LSH, ${n} rows x ${samples} samples, ${planted} planted near-duplicates, threshold ${threshold}`,
        columns: [
          'backend',
          'rows',
          'bands x rows',
          'insert ms',
          'candidatePairs ms',
          'candidatePairs kernel ms',
          'groups(estimate) ms',
          'groups kernel ms',
          'groups transfer ms',
          'rows/s (groups)',
          'candidate pairs',
          'verified edges',
          'groups',
        ],
        rows: out,
        notes: [
          'insert copies the signatures into the index; candidatePairs and groups include duplicate collapsing, band hashing, bucketing, sort/unique and (groups) verification + union-find',
          'kernel ms: CUDA events from after the signature upload to before the result download (bucketing, sort/unique, estimate kernels, and the small per-band size readbacks)',
          'duplicate collapsing, pair expansion and union-find run on the host for both backends',
          'transfer ms: the full signature upload (rows x samples x 8 bytes) plus the pair/estimate download, CUDA events; the rest of wall time is host work',
        ],
      },
    ],
  };
}
