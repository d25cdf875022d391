// FlyHash throughput: the GPU paper's shapes (FashionMNIST, CIFAR10, uniform
// synthetic with a batch sweep) and 1M x 128, GPU and CPU (all cores) in the
// same run, against PyTorch fp32 (dense matmul with the binary projection,
// then torch.topk) on the same GPU. Two kinds of data: 8-bit (uniform
// integers in [0, 255], what FashionMNIST and CIFAR pixels and SIFT features
// are; the GPU runs them on int8 tensor cores) and float (uniform in [0, 1);
// the GPU quantizes each row to bytes, runs the same tensor-core kernels and
// settles the undecided outputs with exact float sums).
import path from 'node:path';

// The top 8 bits of the same generator (uniform()'s floats can round up to
// 1.0 in float32, which would make a 256).
function bytes(n, seed) {
  const a = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < a.length; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    a[i] = s >>> 24;
  }
  return a;
}

function uniform(n, seed) {
  const a = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < a.length; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    a[i] = s / 4294967296;
  }
  return a;
}

// CPU runs on large shapes would take minutes; past this many gather-adds
// (rows * m * s) the CPU is timed on a prefix of the rows and its vectors/s
// extrapolated (the table says so).
const CPU_WORK = 1.5e10;

export async function run({ cusim, quick, backends, time, runPeer, peersDir, log }) {
  const hasGpu = backends.includes('cuda');
  const shapes = quick
    ? [
        { name: 'FashionMNIST shape (quick: 200 rows)', n: 200, d: 784, m: 25088, s: 39, k: 1254 },
        { name: 'CIFAR10 shape (quick: 8 rows)', n: 8, d: 3072, m: 98304, s: 154, k: 4915 },
        { name: '1M x 128 (quick: 20k rows)', n: 20_000, d: 128, m: 1280, s: 13, k: 32 },
      ]
    : [
        { name: 'FashionMNIST shape', n: 60_000, d: 784, m: 25088, s: 39, k: 1254, torchMs: 70.1, targetMs: 10 },
        { name: 'CIFAR10 shape', n: 50_000, d: 3072, m: 98304, s: 154, k: 4915, torchMs: 681, targetMs: 100 },
        { name: '1M x 128', n: 1_000_000, d: 128, m: 1280, s: 13, k: 32, torchMs: 47.7, targetMs: 10 },
      ];
  const repeats = quick ? 2 : 5;

  async function measure(sh, X) {
    const shape = { inputDim: sh.d, hashLength: sh.m, connections: sh.s, winners: sh.k, seed: 1 };
    // The backend is fixed at construction: one object per backend.
    const fly = hasGpu ? new cusim.FlyHash({ ...shape, backend: 'cuda' }) : null;
    const cpuFly = new cusim.FlyHash({ ...shape, backend: 'cpu' });
    const row = { shape: sh.name, data: sh.data, n: sh.n, d: sh.d, m: sh.m, s: sh.s, k: sh.k };
    try {
      if (hasGpu) {
        let kernel = '';
        const t = await time(
          async () => {
            const r = await fly.hash(X);
            kernel = r.kernel;
            return { deviceMs: r.kernelMs };
          },
          { warmup: 1, repeats },
        );
        row['GPU kernel'] = kernel;
        row['GPU kernel ms'] = t.deviceMs.median;
        row['GPU wall ms'] = t.wallMs.median;
        row['GPU vectors/s (kernel)'] = sh.n / (t.deviceMs.median / 1e3);
        row['GPU vectors/s (wall)'] = sh.n / (t.wallMs.median / 1e3);
      }
      const cpuRows = Math.max(1, Math.min(sh.n, Math.floor(CPU_WORK / (sh.m * sh.s))));
      const Xc = cpuRows === sh.n ? X : { data: X.data.subarray(0, cpuRows * sh.d), rows: cpuRows, cols: sh.d };
      const tc = await time(() => cpuFly.hash(Xc), { warmup: 0, repeats: quick ? 1 : 2 });
      row['CPU rows timed'] = cpuRows;
      row['CPU vectors/s'] = cpuRows / (tc.wallMs.median / 1e3);
      if (hasGpu) row['GPU/CPU (wall)'] = row['GPU vectors/s (wall)'] / row['CPU vectors/s'];
    } finally {
      fly?.dispose();
      cpuFly.dispose();
    }
    return row;
  }

  // 'Uint8Array': the same 8-bit values handed over as bytes (no Float32 copy, a quarter of the host reads).
  const kinds = [
    { data: '8-bit', make: bytes },
    { data: 'Uint8Array', make: (n, seed) => Uint8Array.from(bytes(n, seed)) },
    { data: 'float', make: uniform },
  ];
  const paper = [];
  for (const sh of shapes) {
    // One torch run per shape: a dense fp32 matmul's time does not depend on the values.
    const peer =
      hasGpu && !quick
        ? runPeer(path.join(peersDir, 'flyhash_torch.py'), [sh.n, sh.d, sh.m, sh.s, sh.k, 'fp32', 'u8'], { timeoutMs: 600_000 })
        : null;
    // The strongest peer for 8-bit data: int8 tensor cores (torch._int_mm), exact for these shapes.
    const peer8 =
      hasGpu && !quick
        ? runPeer(path.join(peersDir, 'flyhash_torch.py'), [sh.n, sh.d, sh.m, sh.s, sh.k, 'int8', 'u8'], { timeoutMs: 600_000 })
        : null;
    for (const kind of kinds) {
      log(`flyhash ${sh.name} ${kind.data}`);
      const X = { data: kind.make(sh.n * sh.d, 7), rows: sh.n, cols: sh.d };
      const row = await measure({ ...sh, data: kind.data }, X);
      if (peer?.skipped) row['torch fp32 ms'] = `skipped: ${peer.skipped}`;
      else if (peer) {
        row['torch fp32 ms'] = peer.ms_median;
        row['GPU kernel vs torch'] = peer.ms_median / row['GPU kernel ms'];
        row['GPU wall vs torch'] = peer.ms_median / row['GPU wall ms'];
      }
      if (peer8?.skipped) row['torch int8 ms'] = `skipped: ${peer8.skipped}`;
      else if (peer8) {
        row['torch int8 ms'] = peer8.ms_median;
        row['GPU kernel vs torch int8'] = peer8.ms_median / row['GPU kernel ms'];
        row['GPU wall vs torch int8'] = peer8.ms_median / row['GPU wall ms'];
      }
      row['target ms'] = sh.targetMs;
      row['issue torch ms'] = sh.torchMs;
      paper.push(row);
    }
  }

  // Uniform synthetic, d = 1024, m = 128 d, s = 5% of d, k = 5% of m.
  const d = quick ? 64 : 1024;
  const sweep = [];
  const batches = quick ? [2, 32, 512] : [2, 8, 32, 128, 512, 2048, 8192, 32768];
  const Xall = { data: bytes(batches[batches.length - 1] * d, 9), rows: batches[batches.length - 1], cols: d };
  for (const n of batches) {
    const sh = { name: `uniform d=${d}`, data: '8-bit', n, d, m: 128 * d, s: Math.round(0.05 * d), k: Math.round(0.05 * 128 * d) };
    log(`flyhash uniform batch ${n}`);
    const X = { data: Xall.data.subarray(0, n * d), rows: n, cols: d };
    sweep.push(await measure(sh, X));
  }

  // GPU variants: every kernel family on every paper shape (a forced tile
  // variant that does not fit runs the fused family; the kernel column says
  // what ran), and the fused kernel's rows per block. Bits and indices.
  const tuning = [];
  if (hasGpu && !quick) {
    // The float kernels on 8-bit data time the same gathers as on float data.
    const variants = [
      { knob: 'auto', data: '8-bit' },
      { knob: 'tile-large', data: '8-bit' },
      { knob: 'fused', maxR: 4, data: '8-bit' },
      { knob: 'auto', data: 'float' },
      { knob: 'tile-large', data: 'float' },
    ];
    for (const sh of shapes) {
      const data = { '8-bit': bytes(sh.n * sh.d, 7), float: uniform(sh.n * sh.d, 7) };
      for (const v of variants) {
        const X = { data: data[v.data], rows: sh.n, cols: sh.d };
        const fly = new cusim.FlyHash({
          inputDim: sh.d,
          hashLength: sh.m,
          connections: sh.s,
          winners: sh.k,
          seed: 1,
          backend: 'cuda',
          tuning: { kernel: v.knob, ...(v.maxR ? { maxRowsPerBlock: v.maxR } : {}) },
        });
        try {
          for (const output of ['bits', 'indices']) {
            log(`flyhash variant ${v.knob}${v.maxR ? ` R<=${v.maxR}` : ''} ${output} ${sh.name}`);
            let kernel = '';
            let transfer = 0;
            const t = await time(
              async () => {
                const r = await fly.hash(X, { output });
                kernel = r.kernel;
                transfer = r.transferMs;
                return { deviceMs: r.kernelMs };
              },
              { warmup: 1, repeats: 3 },
            );
            tuning.push({
              shape: sh.name,
              data: v.data,
              variant: v.knob + (v.maxR ? ` (R <= ${v.maxR})` : ''),
              output,
              'kernel that ran': kernel,
              'GPU kernel ms': t.deviceMs.median,
              'GPU wall ms': t.wallMs.median,
              'transfer ms (events)': transfer,
              'GPU vectors/s (kernel)': sh.n / (t.deviceMs.median / 1e3),
            });
          }
        } finally {
          fly.dispose();
        }
      }
    }
  }

  const cols = ['shape', 'data', 'n', 'd', 'm', 's', 'k'];
  const gpuCols = hasGpu ? ['GPU kernel', 'GPU kernel ms', 'GPU wall ms', 'GPU vectors/s (kernel)', 'GPU vectors/s (wall)'] : [];
  const cpuCols = ['CPU rows timed', 'CPU vectors/s'];
  return {
    sections: [
      {
        title: 'paper shapes and 1M x 128 (uniform 8-bit and float data, packed-bit output)',
        columns: [
          ...cols,
          ...gpuCols,
          ...cpuCols,
          ...(hasGpu
            ? [
                'GPU/CPU (wall)',
                'torch fp32 ms',
                'GPU kernel vs torch',
                'GPU wall vs torch',
                'torch int8 ms',
                'GPU kernel vs torch int8',
                'GPU wall vs torch int8',
              ]
            : []),
          'target ms',
          'issue torch ms',
        ],
        rows: paper,
        notes: [
          "GPU kernel ms: CUDA events around each batch's FlyHash kernels, the union over the two streams (time overlapped by two batches counts once; before 2026-11-22 v5 the intervals were summed, which overstated it); wall ms adds host staging and PCIe copies of X and the codes (batches pipelined on 2 streams).",
          `CPU: all cores; above ${CPU_WORK.toExponential(0)} gather-adds the CPU is timed on the first "CPU rows timed" rows and vectors/s extrapolated.`,
          'torch int8: the 8-bit values shifted to int8 (x - 128) times the binary W on int8 tensor cores (torch._int_mm, cuBLASLt) + torch.topk; every output drops by the same 128 s, so its top-k is exact; one run per shape, data resident on the GPU, CUDA events. The float rows compare against it too, though torch would need another method for float data.',
          'torch fp32: dense X @ W (W the same-shape binary projection, s ones per column) + torch.topk, data resident on the GPU, CUDA events; bench/peers/flyhash_torch.py, one run per shape on 8-bit-valued data (a dense fp32 matmul takes the same time on any values).',
          "8-bit: uniform integers in [0, 255] as Float32 (the datasets' pixel and SIFT values): the GPU runs them exactly on int8 tensor cores (kernel mma-u8). Uint8Array: the same values passed as bytes. float: uniform in [0, 1): quantized per row on the GPU, int8 tensor cores, exact float sums where the bytes cannot decide (kernel mma-q8); the variants section also times the float gather kernels (tile-large).",
          'Targets (issue 6): >= 5x torch fp32; FashionMNIST <= 10 ms; CIFAR10 <= 100 ms; 1M x 128 >= 1e8 vectors/s; >= 30x CPU.',
        ],
      },
      {
        title: `uniform synthetic, d = ${d}, m = 128 d, batch sweep`,
        columns: [...cols, ...gpuCols, ...cpuCols, ...(hasGpu ? ['GPU/CPU (wall)'] : [])],
        rows: sweep,
        notes: ['s = 5% of d and k = 5% of m, as in the FashionMNIST configuration; 8-bit data.'],
      },
      ...(tuning.length
        ? [
            {
              title: 'GPU variants: kernel families and fused rows per block',
              columns: [
                'shape',
                'data',
                'variant',
                'output',
                'kernel that ran',
                'GPU kernel ms',
                'GPU wall ms',
                'transfer ms (events)',
                'GPU vectors/s (kernel)',
              ],
              rows: tuning,
              notes: [
                'tuning.kernel forces a family (auto, mma, tile-large, fused); a tile variant that does not fit in shared memory runs the fused family; auto takes mma-u8 for 8-bit data.',
                'tuning.maxRowsPerBlock caps R of the fused kernel; shared memory may force a smaller R (FashionMNIST fits R <= 2).',
                'docs/perf/flyhash.md explains the families.',
              ],
            },
          ]
        : []),
    ],
  };
}
