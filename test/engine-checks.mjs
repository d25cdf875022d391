// Every engine once, on small seeded inputs, for a cusim that was installed
// rather than built here: the packed tarballs in a scratch project
// (test/pack.test.ts) and the arm64 binary under qemu (test/arm64.test.ts).
// Plain JavaScript, so that it runs wherever Node does, with `cusim` resolved
// from the project it is copied into.
//
// runWorkloads() checks what has a cheap brute-force oracle on the spot
// (Hamming k-NN, the set join, FlyHash, popcounts, the LSH groups' pair
// similarities) and returns every engine's output as plain arrays, which the
// caller compares with the checkout's own CPU backend on the same inputs.
//
// As a script: node engine-checks.mjs [cpu|gpu] prints { arch, glibc, results }
// (gpu: CUDA where the host has a usable GPU, else CPU).
import { rng } from './rng.mjs';

function fail(what, detail) {
  throw new Error(`engine check failed: ${what}: ${detail}`);
}

// Rows of distinct sorted columns; every fourth row repeats an earlier one
// with a column changed, so that the dedup and join engines find pairs.
function sparseRows(r, rows, cols, maxLen, weights) {
  const sets = [];
  for (let i = 0; i < rows; i++) {
    let s;
    if (i % 4 === 3) {
      s = new Set(sets[i - 2]);
      s.delete([...s][0]);
      s.add(Math.floor(r() * cols));
    } else {
      s = new Set();
      const want = 1 + Math.floor(r() * maxLen);
      while (s.size < want) s.add(Math.floor(r() * cols));
    }
    sets.push([...s].sort((a, b) => a - b));
  }
  sets.push([]); // an empty row
  const indptr = new Uint32Array(sets.length + 1);
  sets.forEach((s, i) => (indptr[i + 1] = indptr[i] + s.length));
  const indices = Uint32Array.from(sets.flat());
  const m = { rows: sets.length, cols, indptr, indices };
  if (weights) m.values = Float32Array.from(indices, () => 0.25 + Math.floor(r() * 4) / 4);
  return { m, sets };
}

const list = (a) => Array.from(a);
const popcount32 = (x) => {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return (((x + (x >>> 4)) & 0x0f0f0f0f) * 0x01010101) >>> 24;
};

/** Runs every engine on `backend` ('cpu' or 'cuda'); returns their outputs as plain arrays. */
export async function runWorkloads(cusim, backend) {
  const out = { backend };
  const r = rng(20);

  // Weighted MinHash, LSH groups with exact verification, dedup.
  const { m: weighted } = sparseRows(r, 60, 500, 30, true);
  const wmh = new cusim.WeightedMinHash({ dim: weighted.cols, samples: 64, seed: 7, backend });
  const sigs = await wmh.hash(weighted);
  wmh.dispose();
  out.minhash = list(sigs);
  const lsh = new cusim.MinHashLSH({ threshold: 0.5, samples: 64, backend });
  lsh.insert(
    Uint32Array.from({ length: weighted.rows }, (_, i) => i),
    sigs,
  );
  const g = await lsh.groups({ verify: 'exact', matrix: weighted });
  lsh.dispose();
  // Every verified edge must be a pair whose true weighted Jaccard clears the threshold.
  const row = (i) =>
    new Map(
      Array.from(weighted.indices.subarray(weighted.indptr[i], weighted.indptr[i + 1]), (c, j) => [
        c,
        weighted.values[weighted.indptr[i] + j],
      ]),
    );
  for (let e = 0; e < g.pairs.left.length; e++) {
    const a = row(g.pairs.left[e]);
    const b = row(g.pairs.right[e]);
    let num = 0;
    let den = 0;
    for (const c of new Set([...a.keys(), ...b.keys()])) {
      num += Math.min(a.get(c) ?? 0, b.get(c) ?? 0);
      den += Math.max(a.get(c) ?? 0, b.get(c) ?? 0);
    }
    if (num / den < 0.5 - 1e-6) fail('MinHashLSH.groups', `edge ${g.pairs.left[e]}-${g.pairs.right[e]} has weighted Jaccard ${num / den}`);
  }
  out.lsh = { group: list(g.group), count: g.count, left: list(g.pairs.left), right: list(g.pairs.right) };
  const d = await cusim.dedup(weighted, { threshold: 0.6, backend });
  out.dedup = { group: list(d.group), count: d.count };

  // Exact set similarity join against brute force.
  const { m: sets, sets: plain } = sparseRows(r, 80, 200, 12, false);
  const j = await cusim.similarityJoin(sets, { threshold: 0.5, measure: 'jaccard', backend });
  const got = list(j.left)
    .map((x, i) => `${x}-${j.right[i]}`)
    .sort();
  const want = [];
  for (let a = 0; a < plain.length; a++) {
    for (let b = a + 1; b < plain.length; b++) {
      const sb = new Set(plain[b]);
      const inter = plain[a].filter((x) => sb.has(x)).length;
      const union = plain[a].length + plain[b].length - inter;
      if (union > 0 && inter / union >= 0.5) want.push(`${a}-${b}`);
    }
  }
  want.sort();
  if (JSON.stringify(got) !== JSON.stringify(want)) fail('similarityJoin', `found ${got.length} pairs, brute force ${want.length}`);
  out.join = got;

  // Hamming k-NN, exact and EWH, exact against brute force.
  const bits = 64;
  const codes = Uint32Array.from({ length: 300 * 2 }, () => Math.floor(r() * 2 ** 32));
  const queries = Uint32Array.from({ length: 7 * 2 }, () => Math.floor(r() * 2 ** 32));
  for (const method of ['exact', 'ewh']) {
    const index = new cusim.HammingIndex({ bits, method, backend });
    index.add(codes);
    const res = await index.search(queries, { k: 5 });
    index.dispose();
    out[`hamming_${method}`] = { ids: list(res.ids), distances: list(res.distances) };
    if (method !== 'exact') continue;
    for (let q = 0; q < 7; q++) {
      const dist = Array.from(
        { length: 300 },
        (_, i) => popcount32(codes[2 * i] ^ queries[2 * q]) + popcount32(codes[2 * i + 1] ^ queries[2 * q + 1]),
      );
      const order = dist
        .map((x, i) => [x, i])
        .sort((a, b) => a[0] - b[0] || a[1] - b[1])
        .slice(0, 5);
      const ids = list(res.ids.subarray(q * 5, q * 5 + 5));
      if (JSON.stringify(ids) !== JSON.stringify(order.map((o) => o[1])))
        fail('HammingIndex exact', `query ${q}: ${ids} != ${order.map((o) => o[1])}`);
    }
  }

  // FlyHash: winners against sums over projection() in float order.
  const fly = new cusim.FlyHash({ inputDim: 24, hashLength: 96, connections: 5, winners: 6, seed: 3, backend });
  const X = { rows: 40, cols: 24, data: Float32Array.from({ length: 40 * 24 }, () => Math.floor(r() * 256)) };
  const fh = await fly.hash(X, { output: 'indices' });
  const proj = fly.projection();
  fly.dispose();
  for (let i = 0; i < X.rows; i++) {
    const act = Array.from({ length: 96 }, (_, o) => {
      let s = Math.fround(0);
      for (let c = 0; c < 5; c++) s = Math.fround(s + X.data[i * 24 + proj[o * 5 + c]]);
      return s;
    });
    const top = act
      .map((a, o) => [a, o])
      .sort((a, b) => b[0] - a[0] || a[1] - b[1])
      .slice(0, 6)
      .map((x) => x[1])
      .sort((a, b) => a - b);
    const mine = list(fh.data.subarray(i * 6, i * 6 + 6));
    if (JSON.stringify(mine) !== JSON.stringify(top)) fail('FlyHash', `row ${i}: ${mine} != ${top}`);
  }
  out.flyhash = list(fh.data);

  // Popcounts.
  const pc = await cusim.popcountRows({ data: codes, rows: 300, bits }, { backend });
  for (let i = 0; i < 300; i++) {
    if (pc.counts[i] !== popcount32(codes[2 * i]) + popcount32(codes[2 * i + 1])) fail('popcountRows', `row ${i}`);
  }

  // Streaming clustering of TF-IDF rows.
  const { m: counts } = sparseRows(r, 50, 80, 6, true);
  const c = new cusim.StreamClusterer({ threshold: 0.5, maxTerms: 8, capacity: 64, backend });
  const cl = await c.add(cusim.tfidf(counts));
  c.dispose();
  out.cluster = { cluster: list(cl.cluster), similarity: list(cl.similarity), created: list(cl.created) };

  // Text featurizing (native tokenizer).
  const f = new cusim.TextFeaturizer({ mode: 'code' });
  f.addAll(['class WebServer(ServerBase)', 'const parse_json = (text) => JSON.parse(text)', 'webServer.listen(8080)']);
  const tm = f.build();
  out.text = { indptr: list(tm.indptr), indices: list(tm.indices), values: list(tm.values), vocabulary: f.vocabulary.size };
  return out;
}

const { pathToFileURL } = await import('node:url');
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const cusim = await import('cusim');
  const backend = process.argv[2] === 'gpu' && cusim.devices().cuda ? 'cuda' : 'cpu';
  const results = await runWorkloads(cusim, backend);
  const glibc = process.report.getReport().header.glibcVersionRuntime ?? null;
  process.stdout.write(`${JSON.stringify({ arch: process.arch, glibc, results })}\n`);
}
