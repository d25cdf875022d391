// Weighted MinHash on a GitHub-shaped workload (bag-of-names of repositories):
// dim = 2,422,260 columns with Zipf(1.1) popularity, log-normal row lengths
// with mean 340, 128 samples. Sections, in one run: the host's copy ceiling
// (bench/peers/copy_bandwidth.py), 1, 2, 4 … GPUs on a 1M-row call and a
// 9.6M-row stream from pageable and pinned arrays, the stream's staging copy
// chunk by chunk (page-locking and copy rate), one GPU (kernel and wall,
// kernel variants, PyTorch peers), the first-wave figures against their
// targets, and the CPU backend on all cores. About 3 minutes on a 4-GPU host.
const DIM = 2_422_260;
const MEAN_LEN = 340;
const SIGMA = 1.0; // log-normal shape; mu is set so the mean is MEAN_LEN

/** xorshift32 kept in int32 (no heap numbers): floats in [0, 1). */
function prng(seed) {
  let s = seed | 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 4294967296;
  };
}

/**
 * Generates rows × (log-normal lengths) of Zipf(1.1) columns with integer
 * count weights, using typed arrays only. Each row is drawn already sorted:
 * sorted uniforms come from normalized cumulative random spacings, the
 * tabulated Zipf inverse CDF (2^16 bins, linear interpolation) is monotone,
 * and a column equal to its predecessor moves up by one, so rows hold
 * distinct sorted columns with exactly the drawn length.
 */
export function githubWorkload(rows, { dim = DIM, seed = 7 } = {}) {
  const r = prng(seed);
  const s = 1.1;
  const bins = 1 << 16; // 512 KB: the table stays in cache
  const q = new Float64Array(bins + 1);
  const k = 1 - Math.pow(dim, 1 - s);
  for (let i = 0; i <= bins; i++) q[i] = Math.pow(1 - (Math.min(i, bins - 1) / bins) * k, 1 / (1 - s)) - 1;
  q[bins] = dim - 1;
  const mu = Math.log(MEAN_LEN) - (SIGMA * SIGMA) / 2;
  const indptr = new Uint32Array(rows + 1);
  let maxLen = 0;
  for (let i = 0; i < rows; i++) {
    const z = Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
    const len = Math.max(1, Math.min(dim, Math.round(Math.exp(mu + SIGMA * z))));
    indptr[i + 1] = indptr[i] + len;
    maxLen = Math.max(maxLen, len);
  }
  const nnz = indptr[rows];
  const indices = new Uint32Array(nnz);
  const acc = new Float64Array(maxLen + 1);
  for (let i = 0; i < rows; i++) {
    const b = indptr[i];
    const len = indptr[i + 1] - b;
    let sum = 0;
    // Uniform spacings with mean 1 (a stratified stand-in for exponential
    // spacings; no log per element).
    for (let j = 0; j <= len; j++) acc[j] = sum += 2 * r();
    const scale = bins / sum;
    let prev = -1;
    for (let j = 0; j < len; j++) {
      const u = acc[j] * scale;
      const lo = u | 0;
      let c = (q[lo] + (u - lo) * (q[lo + 1] - q[lo])) | 0;
      if (c <= prev) c = prev + 1;
      const top = dim - (len - j); // room for the columns still to come
      if (c > top) c = top;
      indices[b + j] = prev = c;
    }
  }
  const values = new Float32Array(nnz);
  for (let j = 0; j < nnz; j++) values[j] = 1 + ((r() * 8) | 0);
  return { rows, cols: dim, indptr, indices, values };
}

/** Column ids mapped through c -> (c * 1000003 + 12345) mod dim, a bijection when gcd(1000003, dim) = 1. */
function permuteColumns(indices, dim) {
  const out = new Uint32Array(indices.length);
  const a = 1000003 % dim;
  for (let i = 0; i < indices.length; i++) out[i] = (indices[i] * a + 12345) % dim; // < 2^53: exact
  return out;
}

/** The first n rows of m, sharing its arrays (no copy). */
function headRows(m, n) {
  return { rows: n, cols: m.cols, indptr: m.indptr.subarray(0, n + 1), indices: m.indices, values: m.values };
}

const fmt = (x) => (x === undefined ? undefined : Number(x.toPrecision(3)));

export async function run({ cusim, quick, backends, devices, time, log, runPeer, peersDir }) {
  const { WeightedMinHash, threads } = cusim;
  const samples = 128;
  const sections = [];
  const hasCuda = backends.includes('cuda');
  const gpuRows = quick ? 20_000 : 1_000_000;
  const dim = quick && !hasCuda ? 200_000 : DIM;

  log(`minhash: generating ${gpuRows} GitHub-shaped rows (dim ${dim})`);
  let t0 = performance.now();
  const work = githubWorkload(gpuRows, { dim });
  const nnz = work.indptr[work.rows];
  const genMs = performance.now() - t0;
  log(`minhash: ${nnz} nnz (mean ${(nnz / gpuRows).toFixed(1)} per row) in ${genMs.toFixed(0)} ms`);

  // The copy ceiling first, then 1, 2, 4 … GPUs against it (on one GPU too,
  // so every host's file has the call and the stream, pinned and pageable).
  // CUSIM_BENCH_MINHASH_ONLY=scaling stops after these.
  let ceiling;
  if (hasCuda) {
    log('minhash: copy ceiling (bench/peers/copy_bandwidth.py)');
    ceiling = copyCeiling(runPeer, peersDir, quick);
    sections.push(ceiling.section);
    const n = devices.gpus.length;
    // One GPU and all of them, each section on engines of its own.
    const make = (label) => new WeightedMinHash({ dim, samples, seed: 1, backend: 'cuda', devices: label === 'cuda ×1' ? [0] : 'all' });
    const labels = n > 1 ? ['cuda ×1', `cuda ×${n}`] : ['cuda ×1'];
    // Before anything has page-locked staging, so its first chunks show what
    // that costs; it leaves the pool as the scaling section's first call would.
    log('minhash: staging copy per chunk');
    const staging = await stagingSection(make, labels, work, quick ? 3 : 6, true);
    sections.push(
      await scalingSection({ WeightedMinHash, pinnedArray: cusim.pinnedArray, work, dim, samples, devices, time, log, quick, ceiling }),
    );
    sections.push(await transferSection(make, labels, work, quick ? 2 : 3, samples));
    sections.push(staging);
  }
  if (process.env.CUSIM_BENCH_MINHASH_ONLY === 'scaling') return { sections };

  // ---- one GPU -------------------------------------------------------------
  let copyGBs;
  let hostNote;
  if (hasCuda) {
    const rowsOut = [];
    t0 = performance.now();
    const wmh = new WeightedMinHash({ dim, samples, seed: 1, backend: 'cuda', devices: [0] });
    await wmh.hash(headRows(work, 1)); // builds the device tables
    const setupMs = performance.now() - t0;
    const { tk, serial } = await kernelTime(
      (tuning) => new WeightedMinHash({ dim, samples, seed: 1, backend: 'cuda', devices: [0], tuning }),
      work,
      time,
      quick,
    );
    // Wall: the default pipeline (three batches in flight per GPU).
    let last;
    const t = await time(
      async () => {
        last = await wmh.hashTimed(work);
        return { deviceMs: last.kernelMs };
      },
      { warmup: 1, repeats: quick ? 3 : 5 },
    );
    const bytes = nnz * 8 + gpuRows * samples * 8;
    // Copy bandwidth from the one-batch-in-flight run, where no copy queues behind another.
    copyGBs = bytes / 1e6 / serial.transferMs;
    rowsOut.push({
      backend: 'cuda ×1',
      rows: gpuRows,
      nnz,
      'kernel ms (median)': fmt(tk.deviceMs.median),
      'kernel elem·samples/s': fmt((nnz * samples) / (tk.deviceMs.median / 1e3)),
      'transfer ms': fmt(serial.transferMs),
      'copy GB/s': fmt(copyGBs),
      'wall ms (median)': fmt(t.wallMs.median),
      'wall elem·samples/s': fmt((nnz * samples) / (t.wallMs.median / 1e3)),
      'rows/s (wall)': fmt(gpuRows / (t.wallMs.median / 1e3)),
      'setup ms (tables)': fmt(setupMs),
    });
    {
      // The same call with the CSR and the output in page-locked arrays: no host staging copies.
      const pw = pinnedWorkload(work, samples, cusim.pinnedArray);
      const tp = await time(async () => void (await wmh.hash(pw.m, { out: pw.out })), { warmup: 1, repeats: quick ? 3 : 5 });
      rowsOut.push({
        backend: 'cuda ×1, pinnedArray in/out',
        rows: gpuRows,
        nnz,
        'wall ms (median)': fmt(tp.wallMs.median),
        'wall elem·samples/s': fmt((nnz * samples) / (tp.wallMs.median / 1e3)),
        'rows/s (wall)': fmt(gpuRows / (tp.wallMs.median / 1e3)),
      });
    }
    // ---- classic MinHash on the same rows (columns as token hashes, values ignored)
    const weightedRate = (nnz * samples) / (tk.deviceMs.median / 1e3);
    rowsOut.push(...(await classicGpuRows({ cusim, work, nnz, samples, time, quick, weightedRate, runPeer, peersDir, dim })));
    if (process.env.CUSIM_BENCH_MINHASH_ONLY === 'classic') {
      return {
        sections: [
          {
            title: `MinHash kernels, ${gpuRows} GitHub-shaped rows, ${samples} samples (cuda ×1)`,
            columns: Object.keys(rowsOut[0]).concat(['classic ÷ weighted kernel', 'cusim kernel ÷ peer']),
            rows: rowsOut,
          },
        ],
      };
    }
    if (last.host) {
      const h = last.host;
      hostNote = `host phases of the last wall call (ms; staging and waits summed over the 3 feeding threads): native call ${fmt(h.nativeMs)}, staging in ${fmt(h.stageInMs)}, waiting on the GPU ${fmt(h.waitMs)}, copying out ${fmt(h.stageOutMs)}; outside native (JS checks, allocation, Promise) ${fmt(t.wallMs.median - h.nativeMs)}`;
    }
    // ---- the kernel on two column orders ----
    // Kernel time alone (one batch in flight), on the workload as generated and
    // with column ids scrambled by a fixed permutation: same popularity, but the
    // hot columns are no longer the lowest ids, so the kernel cannot lean on
    // table locality that real corpora would not have. (The engine has one
    // kernel, prune; the segment kernel it was once timed against left the
    // shipped options.)
    const variantRows = [];
    const permuted = { ...work, indices: permuteColumns(work.indices, dim) };
    for (const [label, m] of [
      ['as generated', work],
      ['column ids permuted', permuted],
    ]) {
      for (const kernel of ['prune']) {
        const k = new WeightedMinHash({ dim, samples, seed: 1, backend: 'cuda', devices: [0], tuning: { kernel, overlap: false } });
        let res;
        const tv = await time(
          async () => {
            res = await k.hashTimed(m);
            return { deviceMs: res.kernelMs };
          },
          { warmup: 1, repeats: quick ? 3 : 5 },
        );
        k.dispose();
        variantRows.push({
          workload: label,
          kernel,
          'kernel ms (median)': fmt(tv.deviceMs.median),
          'kernel ms (min)': fmt(tv.deviceMs.min),
          'kernel elem·samples/s': fmt((nnz * samples) / (tv.deviceMs.median / 1e3)),
          'equivalent table GB/s (12 B per elem·sample)': fmt((nnz * samples * 12) / 1e6 / tv.deviceMs.median),
        });
      }
    }
    sections.push({
      title: `weighted MinHash kernel on two column orders, ${gpuRows} GitHub-shaped rows, ${samples} samples (cuda ×1)`,
      columns: [
        'workload',
        'kernel',
        'kernel ms (median)',
        'kernel ms (min)',
        'kernel elem·samples/s',
        'equivalent table GB/s (12 B per elem·sample)',
      ],
      rows: variantRows,
      notes: [
        'prune = a 2-byte lower bound (ln c - r, a half rounded down) minus ln w rejects most element·samples, survivors computed exactly 32 at a time from a per-warp queue (auto = prune)',
        'kernel = CUDA events, one batch in flight (tuning.overlap = false); target ≥ 8e11 elem·samples/s; design in docs/perf/minhash.md',
      ],
    });
    wmh.dispose();
    // Kernel variants alone (CUSIM_BENCH_MINHASH_ONLY=kernels): a short device call while tuning.
    if (process.env.CUSIM_BENCH_MINHASH_ONLY === 'kernels') return { sections };

    // ---- PyTorch peer on the same GPU, same shape (fewer rows: its temporaries are large)
    const peerRows = quick ? 20_000 : 200_000;
    const peer = runPeer(`${peersDir}/minhash_torch.py`, [peerRows, dim, samples], { timeoutMs: 600_000 });
    const cusimRate = (nnz * samples) / (tk.deviceMs.median / 1e3);
    if (peer.skipped) {
      rowsOut.push({ backend: `torch peer: skipped (${peer.skipped})` });
    } else {
      rowsOut.push({
        backend: `${peer.peer} (peer)`,
        rows: peer.rows,
        nnz: peer.nnz,
        'kernel ms (median)': fmt(peer.ms),
        'kernel elem·samples/s': fmt(peer.elem_samples_per_s),
        'cusim kernel ÷ peer': fmt(cusimRate / peer.elem_samples_per_s),
      });
    }

    // 1 vs 2, 4 … GPUs: scalingSection, run first.
    sections.push({
      title: `weighted MinHash, ${gpuRows} GitHub-shaped rows, ${samples} samples (GPU)`,
      columns: [
        'backend',
        'rows',
        'nnz',
        'kernel ms (median)',
        'kernel elem·samples/s',
        'transfer ms',
        'copy GB/s',
        'wall ms (median)',
        'wall elem·samples/s',
        'rows/s (wall)',
        'setup ms (tables)',
        'speedup vs ×1 (wall)',
        'classic ÷ weighted kernel',
        'cusim kernel ÷ peer',
      ],
      rows: rowsOut,
      notes: [
        'kernel = CUDA events around the hash + finalize kernels, summed over batches, measured with one batch in flight (tuning.overlap = false) so no other kernel shares the GPU',
        'wall = Node, from the call to the resolved Promise with signatures in a JS Uint32Array (staging into pinned memory, H2D, kernels, D2H, copy out)',
        'kernel elem·samples/s = nnz × samples / kernel time; targets: ≥ 8e11 on one H100, 2 GPUs ≥ 1.8× one',
        `workload generated in ${genMs.toFixed(0)} ms (typed arrays)`,
        'peer: bench/peers/minhash_torch.py, the same hash in PyTorch (gather + scatter_reduce amin), GPU time by CUDA events, inputs resident on the GPU',
        "classic = MinHash (datasketch formula over each row's column ids, no tables) on the same rows; target: classic kernel ≥ 2× the weighted kernel's elem·samples/s; its peer is bench/peers/minhash_classic_torch.py (int64 broadcast + Mersenne fold + scatter_reduce amin, self-checked against exact integers)",
        "setup ms (tables) = constructor + first call on one row: weighted parameters are generated per column as calls meet them (the warm-up call generates the workload's columns), so it no longer covers all of dim",
        ...(hostNote ? [hostNote] : []),
      ],
    });
    const classicRow = rowsOut.find((r) => String(r.backend).startsWith('cuda ×1, classic'));
    sections.push(
      firstWave([
        ['weighted MinHash kernel, elem·samples/s', (nnz * samples) / (tk.deviceMs.median / 1e3), 8e11, '≥'],
        ['classic MinHash kernel, elem·samples/s', classicRow?.['kernel elem·samples/s'], 2e12, '≥'],
      ]),
    );
  }

  // ---- CPU, all cores ---------------------------------------------------------
  {
    const cpuRows = quick ? 3000 : 50_000;
    const m = headRows(work, Math.min(cpuRows, work.rows));
    const cpuNnz = m.indptr[m.rows];
    t0 = performance.now();
    const wmh = new WeightedMinHash({ dim, samples, seed: 1, backend: 'cpu' });
    await wmh.hash(headRows(work, 1)); // generates the host tables
    const setupMs = performance.now() - t0;
    const t = await time(() => wmh.hash(m), { warmup: 1, repeats: quick ? 3 : 5 });
    const cores = threads();
    const classic = new cusim.MinHash({ samples, seed: 1, backend: 'cpu' });
    const tc = await time(() => classic.hash(m), { warmup: 1, repeats: quick ? 3 : 5 });
    classic.dispose();
    sections.push({
      title: `weighted and classic MinHash, CPU backend (${cores} threads), ${m.rows} rows`,
      columns: ['backend', 'threads', 'rows', 'nnz', 'wall ms (median)', 'elem·samples/s', 'per core', 'rows/s', 'setup ms (tables)'],
      rows: [
        cpuRow('cpu, classic MinHash', tc.wallMs.median, { threads: cores, rows: m.rows, nnz: cpuNnz, samples }),
        { ...cpuRow('cpu', t.wallMs.median, { threads: cores, rows: m.rows, nnz: cpuNnz, samples }), 'setup ms (tables)': fmt(setupMs) },
      ],
      notes: ['target ≥ 1e8 elem·samples/s per core (SSE2 over samples on [dim][samples] tables)', `dim ${dim}`],
    });
    if (!hasCuda) {
      // No GPU here: still exercise the streaming path on the CPU, small.
      sections.push(await streamSection(wmh, headRows(work, Math.min(2000, work.rows)), 4, samples, 'cpu', undefined));
      const small = headRows(work, Math.min(2000, work.rows));
      const part = {
        ...small,
        indices: small.indices.subarray(0, small.indptr[small.rows]),
        values: small.values.subarray(0, small.indptr[small.rows]),
      };
      sections.push(await transferSection(() => new WeightedMinHash({ dim, samples, seed: 1, backend: 'cpu' }), ['cpu'], part, 3, samples));
      sections.push(await stagingSection(() => new WeightedMinHash({ dim, samples, seed: 1, backend: 'cpu' }), ['cpu'], part, 4, false));
    }
    wmh.dispose();
  }

  // The 9.6M-row stream on 1, 2, 4 … GPUs is in scalingSection.
  return { sections };
}

/**
 * 1, 2, 4, … GPUs on the same rows: wall time of one 1M-row call and of the
 * 9.6M-row stream, and whether every count returns byte-identical signatures.
 */
async function scalingSection({ WeightedMinHash, pinnedArray, work, dim, samples, devices, time, log, quick, ceiling }) {
  const counts = [];
  for (let c = 1; c <= devices.gpus.length; c *= 2) counts.push(c);
  if (counts[counts.length - 1] !== devices.gpus.length) counts.push(devices.gpus.length);
  const nnz = work.indptr[work.rows];
  const rows = [];
  let reference;
  const pinned = pinnedWorkload(work, samples, pinnedArray);
  for (const [path, m, out] of [
    ['pageable arrays (staged)', work, undefined],
    ['pinnedArray inputs and out', pinned.m, pinned.out],
  ]) {
    let base1;
    let baseStream;
    for (const c of counts) {
      const ids = Array.from({ length: c }, (_, i) => i);
      const wmh = new WeightedMinHash({ dim, samples, seed: 1, backend: 'cuda', devices: ids });
      await wmh.hash(headRows(work, 1));
      let sig;
      const t = await time(async () => void (sig = await wmh.hash(m, { out })), { warmup: 1, repeats: quick ? 2 : 3 });
      sig = sig.slice();
      let identical = 'reference';
      if (!reference) reference = sig;
      else
        identical =
          Buffer.compare(
            Buffer.from(sig.buffer, sig.byteOffset, sig.byteLength),
            Buffer.from(reference.buffer, reference.byteOffset, reference.byteLength),
          ) === 0
            ? 'yes'
            : 'NO';
      const chunks = quick ? 2 : 9.6;
      const st = await streamSection(wmh, m, chunks, samples, `cuda ×${c}`);
      const streamS = st.rows[0]['wall s'];
      base1 ??= t.wallMs.median;
      baseStream ??= streamS;
      log(
        `minhash scaling ${path} ×${c}: ${t.wallMs.median.toFixed(1)} ms per ${work.rows} rows, stream ${streamS} s, identical ${identical}`,
      );
      const moved = st.bytesMoved / (streamS * 1e9);
      const roof = ceiling?.both(c, path.startsWith('pinned') ? 'pinned' : 'pageable');
      rows.push({
        'host arrays': path,
        GPUs: c,
        [`${work.rows} rows wall ms`]: t.wallMs.median,
        'elem·samples/s (1M call)': (nnz * samples) / (t.wallMs.median / 1e3),
        'speedup (1M call)': base1 / t.wallMs.median,
        [`stream ${st.rows[0].rows} rows wall s`]: streamS,
        'elem·samples/s (stream)': st.rows[0]['elem·samples/s (wall)'],
        'speedup (stream)': baseStream / streamS,
        'per GPU efficiency (stream)': baseStream / streamS / c,
        'stream GB/s moved': moved,
        'of copy ceiling (both ways)': roof ? `${((100 * moved) / roof).toFixed(0)}% of ${roof.toFixed(1)}` : undefined,
        'signatures identical to ×1': identical,
      });
      wmh.dispose();
    }
  }
  return {
    title: `weighted MinHash multi-GPU scaling, ${samples} samples (${devices.gpus[0].name} ×${devices.gpus.length})`,
    columns: Object.keys(rows[0]),
    rows,
    notes: [
      'rows are split across GPUs by nnz; each GPU generates its own tables from the seed; three host threads per GPU feed its batches (upload, kernels and download of three batches overlap)',
      "pageable: the CSR slice is copied into pinned staging and the signatures out of it by the host (its memory bandwidth is shared by all GPUs); pinnedArray: the 1M-row CSR and the output live in page-locked arrays (cusim.pinnedArray), DMA in place, the host copies nothing (the stream's per-chunk outputs are still fresh pageable arrays)",
      'speedup is against ×1 with the same host arrays',
      'wall = Node, call to resolved Promise, every transfer included; stream = hashStream over the 1M-row chunk repeated 9.6 times',
      "stream GB/s moved = (indices + values in, signatures out) / stream wall; copy ceiling = the peer's both-ways rate for as many GPUs from the same kind of host memory (the stream's outputs are pageable either way)",
      'targets (issue 29): call and stream ≥ 1.8× one GPU on 2 GPUs, ≥ 3.4× on 4, or ≥ 85% of the copy ceiling',
    ],
  };
}

/**
 * hashStream over `chunks` fresh copies of `work` with transfer: true (no
 * staging copy) against the same number of chunks copied at each call, on
 * each engine `make(label)` returns. Copies are made before the clock starts.
 */
async function transferSection(make, labels, work, chunks, samples) {
  const copy = () => ({ ...work, indptr: work.indptr.slice(), indices: work.indices.slice(), values: work.values.slice() });
  const wall = async (wmh, source, options) => {
    const t0 = performance.now();
    let n = 0;
    for await (const sig of wmh.hashStream(source, options)) n += sig.length / (samples * 2);
    if (n !== chunks * work.rows) throw new Error(`stream returned ${n} rows, expected ${chunks * work.rows}`);
    return (performance.now() - t0) / 1e3;
  };
  const rows = [];
  for (const label of labels) {
    const wmh = make(label);
    await wmh.hash(work); // every column's tables made, so neither stream pays for them
    const copied = await wall(
      wmh,
      Array.from({ length: chunks }, () => work),
    );
    const fresh = Array.from({ length: chunks }, copy);
    const handed = await wall(wmh, fresh, { transfer: true });
    if (fresh.some((m) => m.indices.byteLength !== 0)) throw new Error('transfer: true left a chunk attached');
    wmh.dispose();
    rows.push({
      engine: label,
      chunks,
      rows: chunks * work.rows,
      'copied at each call, wall s': fmt(copied),
      'transfer: true, wall s': fmt(handed),
      'copied ÷ transfer': fmt(copied / handed),
    });
  }
  return {
    title: `hashStream, ${chunks} chunks of ${work.rows} pageable rows: staging copy vs transfer: true`,
    columns: Object.keys(rows[0]),
    rows,
    notes: [
      "copied = the default: hashStream copies each chunk on a worker, over all cores (into page-locked staging on CUDA, DMAed in place), before it asks the source for the next; transfer: true = each chunk's buffers are detached and read in place (on CUDA the engine stages batches into its own pinned slots, overlapped with the kernels)",
    ],
  };
}

/**
 * hashStream's staging copy, chunk by chunk: the steps hashStream takes (each
 * chunk copied by stageCsrAsync into the stream's StagingSet while the chunk
 * before it is hashed, then hashed from the copy), with what each copy cost
 * (Staged.stats): the bytes, those in blocks made for it and the time that
 * took (page-locking, on CUDA), and the copy rate of the rest of the
 * worker's time. The same chunk each time, as in the stream sections.
 */
async function stagingSection(make, labels, work, chunks, gpu) {
  const { native } = await import('../dist/addon.js');
  const n = native();
  const rows = [];
  const notes = [];
  for (const label of labels) {
    const wmh = make(label);
    // Every column's tables made, by a handed-over copy: no staging block taken.
    await wmh.hash(
      { ...work, indptr: work.indptr.slice(), indices: work.indices.slice(), values: work.values.slice() },
      { transfer: true },
    );
    const set = new n.StagingSet();
    const steady = [];
    let pending;
    const t0 = performance.now();
    for (let k = 0; k < chunks; k++) {
      const c0 = performance.now();
      const staged = await n.stageCsrAsync(work, true, gpu, set);
      const waitMs = performance.now() - c0;
      const st = staged.stats;
      const next = wmh.hashStaged(staged, work);
      staged.dispose(); // the call holds the copy
      next.catch(() => {});
      if (pending) await pending;
      pending = next;
      const copyMs = st.stageMs - st.allocMs;
      const copyGBs = st.bulkBytes / 1e6 / copyMs;
      if (k >= 2) steady.push(copyGBs);
      rows.push({
        engine: label,
        chunk: k,
        'MB copied': fmt(st.bulkBytes / 1e6),
        'MB in new blocks': fmt(st.freshBytes / 1e6),
        'making them ms': fmt(st.allocMs),
        'making them GB/s': st.freshBytes ? fmt(st.freshBytes / 1e6 / st.allocMs) : undefined,
        'copy ms': fmt(copyMs),
        'copy GB/s': fmt(copyGBs),
        'staging wall ms': fmt(waitMs),
        'page-locked': st.pinned ? 'yes' : 'no',
      });
    }
    await pending;
    const wallS = (performance.now() - t0) / 1e3;
    set.dispose();
    wmh.dispose();
    if (gpu && label === labels[0]) {
      // The page-locking the first chunks paid, two ways, on a block of one array's size.
      const bytes = work.indices.byteLength;
      const p = await n.probePageLocking(bytes);
      const rate = (ms) => (ms > 0 ? `${fmt(bytes / 1e6 / ms)} GB/s` : 'failed');
      notes.push(
        `page-locking one ${fmt(bytes / 1e6)} MB block (native probePageLocking, device 0): cudaHostAlloc ${fmt(p.hostAllocMs)} ms (${rate(p.hostAllocMs)}), cudaFreeHost ${fmt(p.hostFreeMs)} ms, H2D from it ${fmt(p.hostAllocH2dGBs)} GB/s; huge-page memory faulted in on all cores ${fmt(p.touchMs)} ms then cudaHostRegister ${fmt(p.registerMs)} ms (${rate(p.registerMs < 0 ? -1 : p.touchMs + p.registerMs)} together), cudaHostUnregister ${fmt(p.unregisterMs)} ms, H2D from it ${fmt(p.registeredH2dGBs)} GB/s`,
      );
    }
    steady.sort((a, b) => a - b);
    const median = steady.length ? steady[steady.length >> 1] : undefined;
    notes.push(
      `${label}: ${chunks} chunks in ${fmt(wallS)} s; copy GB/s from the third chunk on (blocks reused), median ${fmt(median)} (target, issue 29: ≥ 20)`,
    );
  }
  return {
    title: `hashStream's staging copy per chunk, ${work.rows} pageable rows a chunk`,
    columns: Object.keys(rows[0]),
    rows,
    notes: [
      ...notes,
      "MB copied = indices + values (indptr, 4 bytes a row, is copied beside them); new blocks = those the stream's StagingSet had to take from the process's pools fresh (the first two chunks: a chunk's blocks come back when its call ends, so chunk k reuses chunk k - 2's); making them = cudaHostAlloc on CUDA (the page-locking), malloc on the CPU; copy ms = the stageCsrAsync worker's time less that (the copies over the CPU pool, with the indptr checks), while the previous chunk's call runs; staging wall = the stream's wait for the copy, on the event loop",
    ],
  };
}

/**
 * The host's copy ceiling from bench/peers/copy_bandwidth.py, as a section and
 * as a lookup of the both-ways rate for `gpus` GPUs from `host` memory.
 */
function copyCeiling(runPeer, peersDir, quick) {
  const peer = runPeer(`${peersDir}/copy_bandwidth.py`, quick ? [64, 2] : [256, 4], { timeoutMs: 180_000 });
  const title = 'host ↔ GPU copy ceiling (bench/peers/copy_bandwidth.py, same run)';
  if (peer.skipped) return { section: { title, columns: ['skipped'], rows: [{ skipped: peer.skipped }] }, both: () => undefined };
  const counts = [...new Set(peer.rows.map((r) => r.gpus))];
  const rows = [];
  for (const host of ['pinned', 'pageable'])
    for (const direction of ['H2D', 'D2H', 'both']) {
      const row = { 'host memory': host, direction };
      for (const c of counts) {
        const r = peer.rows.find((x) => x.host === host && x.direction === direction && x.gpus === c);
        row[`${c} GPU${c > 1 ? 's' : ''} GB/s`] = r && fmt(r.GBps);
      }
      rows.push(row);
    }
  return {
    section: {
      title,
      columns: Object.keys(rows[0]),
      rows,
      notes: [
        `${peer.peer} on ${peer.devices.join(', ')}; ${peer.bytes_per_copy / 2 ** 20} MiB per copy × ${peer.reps} per GPU and direction; both = H2D and D2H on two streams per GPU at once, summed`,
        'pinned copies issued from one thread; pageable ones from one thread per GPU (the driver stages them through its own pinned buffers on the calling thread)',
      ],
    },
    both: (gpus, host) => peer.rows.find((r) => r.host === host && r.direction === 'both' && r.gpus === gpus)?.GBps,
  };
}

/** The first-wave figures of issue 29 item 6, measured in this run, against their targets. */
function firstWave(figures) {
  return {
    title: 'first-wave figures (issue 29 item 6), this run',
    columns: ['figure', 'measured', 'target', 'met'],
    rows: figures.map(([figure, measured, target, op]) => ({
      figure,
      measured: fmt(measured),
      target: `${op} ${target.toExponential(0)}`,
      met: measured === undefined ? 'not measured' : (op === '≥' ? measured >= target : measured <= target) ? 'yes' : 'NO',
    })),
  };
}

/** One CPU table row: rates from the median wall time. */
function cpuRow(backend, wallMs, { threads, rows, nnz, samples }) {
  const rate = (nnz * samples) / (wallMs / 1e3);
  return {
    backend,
    threads,
    rows,
    nnz,
    'wall ms (median)': fmt(wallMs),
    'elem·samples/s': fmt(rate),
    'per core': fmt(rate / threads),
    'rows/s': fmt(rows / (wallMs / 1e3)),
  };
}

/**
 * Kernel time with one batch in flight (tuning.overlap = false), so each
 * kernel's events time it alone; `make(tuning)` builds the engine to time.
 */
async function kernelTime(make, work, time, quick) {
  const hasher = make({ overlap: false });
  let serial;
  try {
    const tk = await time(
      async () => {
        serial = await hasher.hashTimed(work);
        return { deviceMs: serial.kernelMs };
      },
      { warmup: 1, repeats: quick ? 3 : 5 },
    );
    return { tk, serial };
  } finally {
    hasher.dispose();
  }
}

/**
 * Classic MinHash on the weighted bench's rows: kernel rate (one batch in
 * flight), wall, and the PyTorch peer of the same formula, in the same run.
 */
async function classicGpuRows({ cusim, work, nnz, samples, time, quick, weightedRate, runPeer, peersDir, dim }) {
  const rows = [];
  const mh = new cusim.MinHash({ samples, seed: 1, backend: 'cuda', devices: [0] });
  const { tk, serial } = await kernelTime(
    (tuning) => new cusim.MinHash({ samples, seed: 1, backend: 'cuda', devices: [0], tuning }),
    work,
    time,
    quick,
  );
  const tw = await time(() => mh.hash(work), { warmup: 1, repeats: quick ? 3 : 5 });
  // Same signatures on the CPU for a slice of rows: the bench's own check that the kernel is exact.
  const check = { rows: 2000, cols: work.cols, indptr: work.indptr.subarray(0, 2001), indices: work.indices };
  const cpu = new cusim.MinHash({ samples, seed: 1, backend: 'cpu' });
  const [g, c] = [await mh.hash(check), await cpu.hash(check)];
  cpu.dispose();
  mh.dispose();
  const identical = g.length === c.length && g.every((x, i) => x === c[i]);
  const rate = (nnz * samples) / (tk.deviceMs.median / 1e3);
  rows.push({
    backend: `cuda ×1, classic MinHash${identical ? '' : ' (NOT equal to cpu)'}`,
    rows: work.rows,
    nnz,
    'kernel ms (median)': fmt(tk.deviceMs.median),
    'kernel elem·samples/s': fmt(rate),
    'transfer ms': fmt(serial.transferMs),
    'wall ms (median)': fmt(tw.wallMs.median),
    'wall elem·samples/s': fmt((nnz * samples) / (tw.wallMs.median / 1e3)),
    'rows/s (wall)': fmt(work.rows / (tw.wallMs.median / 1e3)),
    'classic ÷ weighted kernel': fmt(rate / weightedRate),
  });
  const peerRows = quick ? 20_000 : 200_000;
  const peer = runPeer(`${peersDir}/minhash_classic_torch.py`, [peerRows, dim, samples], { timeoutMs: 600_000 });
  if (peer.skipped) {
    rows.push({ backend: `classic torch peer: skipped (${peer.skipped})` });
  } else {
    rows.push({
      backend: `${peer.peer} (classic peer)`,
      rows: peer.rows,
      nnz: peer.nnz,
      'kernel ms (median)': fmt(peer.ms),
      'kernel elem·samples/s': fmt(peer.elem_samples_per_s),
      'cusim kernel ÷ peer': fmt(rate / peer.elem_samples_per_s),
    });
  }
  return rows;
}

/** The workload's indices and values copied into page-locked arrays, and a page-locked output for it. */
function pinnedWorkload(work, samples, pinnedArray) {
  const indices = pinnedArray(Uint32Array, work.indices.length);
  indices.set(work.indices);
  const values = pinnedArray(Float32Array, work.values.length);
  values.set(work.values);
  return { m: { ...work, indices, values }, out: pinnedArray(Uint32Array, work.rows * samples * 2) };
}

/** Feeds `chunk` repeatedly (`count` chunks, a fractional last one) through hashStream. */
async function streamSection(wmh, chunk, count, samples, label, copyGBs) {
  const whole = Math.floor(count);
  const partRows = Math.round((count - whole) * chunk.rows);
  function* source() {
    for (let i = 0; i < whole; i++) yield chunk;
    if (partRows > 0) yield headRows(chunk, partRows);
  }
  let rows = 0;
  let nnz = 0;
  for (const c of source()) {
    rows += c.rows;
    nnz += c.indptr[c.rows];
  }
  const t0 = performance.now();
  let got = 0;
  for await (const sig of wmh.hashStream(source())) got += sig.length / (samples * 2);
  const wallMs = performance.now() - t0;
  if (got !== rows) throw new Error(`stream returned ${got} rows, expected ${rows}`);
  const h2d = nnz * 8;
  const d2h = rows * samples * 8;
  const notes = [
    'wall = Node, first chunk issued to last signature array received; every transfer included; chunks already in memory',
    `bytes moved: ${(h2d / 1e9).toFixed(2)} GB H2D (indices + values) + ${(d2h / 1e9).toFixed(2)} GB D2H (signatures)`,
  ];
  if (copyGBs) {
    notes.push(
      `copy bandwidth measured in the 1M-row call: ${copyGBs.toFixed(1)} GB/s → the bytes alone need ${((h2d + d2h) / 1e6 / copyGBs).toFixed(0)} ms; the rest is kernels (overlapped) and host staging copies`,
    );
  }
  notes.push('target (issue 29): 9.6M rows in ≤ 1.5 s on one H100');
  return {
    bytesMoved: h2d + d2h,
    title: `weighted MinHash, ${rows} rows streamed through hashStream (${label})`,
    columns: ['backend', 'chunks', 'rows', 'nnz', 'wall s', 'rows/s', 'elem·samples/s (wall)'],
    rows: [
      {
        backend: label,
        chunks: count,
        rows,
        nnz,
        'wall s': fmt(wallMs / 1e3),
        'rows/s': fmt(rows / (wallMs / 1e3)),
        'elem·samples/s (wall)': fmt((nnz * samples) / (wallMs / 1e3)),
      },
    ],
    notes,
  };
}
