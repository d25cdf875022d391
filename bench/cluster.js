// Streaming document clustering on a PubMed-shaped stream: vocabulary 140K,
// Zipf terms, median 55 terms per document, TF-IDF-like weights, K = 35,
// T = 0.6. The cluster matrix is grown to each target size with micro-batch
// adds of fresh documents (nearly all create clusters), then a stream of
// further documents is timed in sequential and micro-batch mode. The CPU
// backend loads the same state (save/load) so both score the same clusters.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { rng as mulberry } from '../test/rng.mjs';

const V = 140_000;
const K = 35;
const T = 0.6;

// n documents: lengths log-normal around 55, Zipf(1.07) terms, weight =
// tf * idf with idf falling with the term's popularity (as TF-IDF does).
function stream(n, seed) {
  const r = mulberry(seed);
  const s = 1.07;
  const c = 1 - Math.pow(V, 1 - s);
  const indptr = new Uint32Array(n + 1);
  const lens = new Uint32Array(n);
  for (let i = 0; i < n; i++) {
    const g = Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
    lens[i] = Math.max(5, Math.min(300, Math.round(55 * Math.exp(0.45 * g))));
    indptr[i + 1] = indptr[i] + lens[i];
  }
  const indices = new Uint32Array(indptr[n]);
  const values = new Float32Array(indptr[n]);
  const seen = new Set();
  for (let i = 0; i < n; i++) {
    seen.clear();
    let p = indptr[i];
    while (seen.size < lens[i]) {
      const t = Math.min(V - 1, Math.floor(Math.pow(1 - r() * c, 1 / (1 - s))) - 1);
      if (seen.has(t)) continue;
      seen.add(t);
      indices[p] = t;
      values[p++] = (1 + Math.floor(r() * r() * 4)) * Math.log(2 + (t + 1) / 10);
    }
  }
  return { rows: n, cols: V, indptr, indices, values };
}

function slice(m, b, e) {
  const base = m.indptr[b];
  const indptr = m.indptr.slice(b, e + 1).map((x) => x - base);
  return {
    rows: e - b,
    cols: m.cols,
    indptr,
    indices: m.indices.subarray(base, m.indptr[e]),
    values: m.values.subarray(base, m.indptr[e]),
  };
}

async function grow(c, target, seed, log) {
  const chunk = 65_536;
  let s = seed;
  while (c.size < target) {
    const need = Math.min(chunk, Math.ceil((target - c.size) * 1.02) + 16);
    await c.add(stream(need, s++), { mode: 'batch' });
  }
  log(`grown to ${c.size} clusters`);
  return s;
}

async function measure(c, docs, mode) {
  const t0 = process.hrtime.bigint();
  const r = await c.add(docs, { mode });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  return { ms, r };
}

export async function run({ cusim, quick, backends, log, runPeer, peersDir }) {
  const { StreamClusterer } = cusim;
  const targets = quick ? [2_000, 8_000] : [100_000, 400_000, 1_600_000];
  const seqDocs = quick ? 100 : 2_000;
  const batchDocs = quick ? 1_000 : 50_000;
  const cpuSeqDocs = quick ? 50 : 200;
  const cpuBatchDocs = quick ? 500 : 4_000;
  const dir = mkdtempSync(path.join(tmpdir(), 'cusim-bench-cluster-'));
  const rows = [];
  const variantRows = [];
  const gpu = backends.includes('cuda');
  const builder = new StreamClusterer({ threshold: T, maxTerms: K, capacity: 1024, backend: gpu ? 'cuda' : 'cpu' });
  let seed = 1000;
  try {
    for (const target of targets) {
      let defaults;
      seed = await grow(builder, target, seed, log);
      const file = path.join(dir, `state-${target}.bin`);
      await builder.save(file);
      const seq = stream(seqDocs, 7);
      const bat = stream(batchDocs, 8);
      for (const backend of backends) {
        const n = backend === 'cpu' ? cpuSeqDocs : seqDocs;
        const nb = backend === 'cpu' ? cpuBatchDocs : batchDocs;
        // Fresh copies of the same state, so every measurement starts equal.
        const a = await StreamClusterer.load(file, { backend });
        const s = await measure(a, slice(seq, 0, n), 'sequential');
        a.dispose();
        const b = await StreamClusterer.load(file, { backend });
        // With CUSIM_PROFILE=1 the native side prints its host/device split of this add to stderr.
        const m = await measure(b, slice(bat, 0, nb), 'batch');
        b.dispose();
        // Sequential and micro-batch must agree (checked on the first state only: loads are slow at 1.6M).
        let agree;
        if (target === targets[0]) {
          const check = await StreamClusterer.load(file, { backend });
          const same = await check.add(slice(bat, 0, Math.min(nb, 2048)), { mode: 'sequential' });
          check.dispose();
          agree = same.cluster.every((x, i) => x === m.r.cluster[i]) ? 'yes' : 'NO';
        }
        rows.push({
          backend,
          clusters: target,
          'seq docs': n,
          'seq ms/doc': s.ms / n,
          'seq kernel ms/doc': backend === 'cuda' ? s.r.kernelMs / n : undefined,
          'seq docs/s': (n / s.ms) * 1e3,
          'batch docs': nb,
          'batch docs/s': (nb / m.ms) * 1e3,
          'batch kernel ms': backend === 'cuda' ? m.r.kernelMs : undefined,
          rescored: m.r.rescored,
          joined: m.r.created.reduce((x, v) => x + (v ? 0 : 1), 0),
          'batch = seq': agree,
        });
        log(JSON.stringify(rows[rows.length - 1]));
        if (backend === 'cuda') defaults = { s, m, n, nb };
      }
      // Micro-batch sizes side by side (tuning.batchSize); each must
      // reproduce the default's clusters.
      if (gpu && defaults) {
        const { s: ds, m: dm, n, nb } = defaults;
        variantRows.push(
          {
            clusters: target,
            variant: 'sequential, plain 32-bit scan (default)',
            docs: n,
            'ms/doc': ds.ms / n,
            'kernel ms/doc': ds.r.kernelMs / n,
            'docs/s': (n / ds.ms) * 1e3,
            'same clusters': 'yes',
          },
          {
            clusters: target,
            variant: 'batch B=512, flat postings walk (default)',
            docs: nb,
            'ms/doc': dm.ms / nb,
            'kernel ms/doc': dm.r.kernelMs / nb,
            'docs/s': (nb / dm.ms) * 1e3,
            'same clusters': 'yes',
          },
        );
        for (const [label, tuning, mode, docs, ref] of [
          ['batch B=256', { batchSize: 256 }, 'batch', slice(bat, 0, nb), dm],
          ['batch B=1024', { batchSize: 1024 }, 'batch', slice(bat, 0, nb), dm],
        ]) {
          const v = await StreamClusterer.load(file, { backend: 'cuda', tuning });
          const x = await measure(v, docs, mode);
          v.dispose();
          const same = x.r.cluster.every((c, i) => c === ref.r.cluster[i]) ? 'yes' : 'NO';
          variantRows.push({
            clusters: target,
            variant: label,
            docs: docs.rows,
            'ms/doc': x.ms / docs.rows,
            'kernel ms/doc': x.r.kernelMs / docs.rows,
            'docs/s': (docs.rows / x.ms) * 1e3,
            'same clusters': same,
          });
          log(JSON.stringify(variantRows[variantRows.length - 1]));
        }
      }
      rmSync(file, { force: true });
    }
  } finally {
    builder.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
  const last = targets[targets.length - 1];
  const cu = rows.find((r) => r.backend === 'cuda' && r.clusters === last);
  const cp = rows.find((r) => r.backend === 'cpu' && r.clusters === last);
  const notes = [
    `stream: V=${V}, Zipf(1.07) terms, log-normal lengths (median 55), tf*idf weights, K=${K}, T=${T}`,
    'each row starts from the same saved state; wall times include host preparation and copies',
    'paper (GTX 480): 0.01 s/doc at 1.6M clusters (100 docs/s); targets on H100: >= 5,000 docs/s sequential, >= 50,000 docs/s micro-batch',
  ];
  if (cu && cp) {
    const best = (r) => Math.max(r['seq docs/s'], r['batch docs/s']);
    notes.push(
      `cuda/cpu at ${last} clusters: sequential ${(cu['seq docs/s'] / cp['seq docs/s']).toFixed(1)}x, batch ${(cu['batch docs/s'] / cp['batch docs/s']).toFixed(1)}x, ` +
        `each backend's best mode ${(best(cu) / best(cp)).toFixed(1)}x (target >= 40x)`,
    );
  }
  const sections = [
    {
      title: `streaming clustering (K=${K}, T=${T}, vocabulary ${V})`,
      columns: [
        'backend',
        'clusters',
        'seq docs',
        'seq ms/doc',
        'seq kernel ms/doc',
        'seq docs/s',
        'batch docs',
        'batch docs/s',
        'batch kernel ms',
        'rescored',
        'joined',
        'batch = seq',
      ],
      rows,
      notes,
    },
  ];
  if (variantRows.length) {
    sections.push({
      title: 'micro-batch sizes (tuning.batchSize), each from the same saved state',
      columns: ['clusters', 'variant', 'docs', 'ms/doc', 'kernel ms/doc', 'docs/s', 'same clusters'],
      rows: variantRows,
      notes: [
        'docs/perf/cluster.md says why B=512 is the default',
        '"same clusters": identical cluster ids to the default variant on the same documents',
      ],
    });
  }
  if (gpu) {
    const peer = runPeer(path.join(peersDir, 'cluster_cupy.py'), [last, K, V, 256]);
    const prow = peer.skipped
      ? [{ peer: 'CuPy/cuSPARSE', note: peer.skipped }]
      : [
          {
            peer: 'CuPy csr SpMV + argmax (1 doc)',
            'ms/doc': peer.spmv_ms,
            'docs/s': 1e3 / peer.spmv_ms,
            'ours docs/s': cu?.['seq docs/s'],
            ratio: cu ? cu['seq docs/s'] / (1e3 / peer.spmv_ms) : undefined,
          },
          {
            peer: 'CuPy csr SpMM + argmax (256 docs)',
            'ms/doc': peer.spmm_ms / 256,
            'docs/s': (256 * 1e3) / peer.spmm_ms,
            'ours docs/s': cu?.['batch docs/s'],
            ratio: cu ? cu['batch docs/s'] / ((256 * 1e3) / peer.spmm_ms) : undefined,
          },
        ];
    sections.push({
      title: `peer: cuSPARSE through CuPy, ${last} x ${K} random centroids`,
      columns: ['peer', 'ms/doc', 'docs/s', 'ours docs/s', 'ratio', 'note'],
      rows: prow,
      notes: ['the peer scores only (no updates, no threshold/decay); ours includes centroid maintenance'],
    });
  }
  return { sections };
}
