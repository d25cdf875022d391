// What owning the inputs costs (native/owned.h): every async call copies its
// arrays before its Promise is returned, on all cores (pageable memory for
// CPU calls; page-locked, pooled staging for GPU calls, which the engines
// then DMA in place instead of staging batches themselves).
// Sections: the copy alone (GB/s by size), and its share of real calls:
// WeightedMinHash on a GitHub-shaped matrix (host.copyInMs of hashTimed) on
// each backend, cold (first call) and warm, and FlyHash / Hamming / popcount;
// and the event loop during a stream of chunks, copied per call on it or by
// hashStream on a worker.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { githubWorkload } from './minhash.js';

function gbs(bytes, ms) {
  return bytes / 1e6 / ms;
}

export async function run({ cusim, quick, backends, time, log }) {
  const { native } = await import('../dist/addon.js');
  const n = native();
  const sections = [];

  // ---- the copy alone --------------------------------------------------------
  {
    const rows = [];
    for (const mb of quick ? [16, 64] : [16, 64, 256, 1024]) {
      const a = new Uint32Array((mb << 20) / 4).map((_, i) => i);
      const t = await time(() => n.stageArray([a]).dispose(), { warmup: 1, repeats: quick ? 3 : 7 });
      rows.push({
        MB: mb,
        'copy ms (median)': t.wallMs.median,
        'copy ms (min)': t.wallMs.min,
        'GB/s (median)': gbs(a.byteLength, t.wallMs.median),
        'ms per GB': (t.wallMs.median * 1e9) / a.byteLength,
      });
    }
    sections.push({
      title: `staging copy of one array into fresh owned memory (${cusim.threads()} threads)`,
      columns: ['MB', 'copy ms (median)', 'copy ms (min)', 'GB/s (median)', 'ms per GB'],
      rows,
      notes: [
        'native stageArray: a block from the staging pool + ParallelCopy over the CPU pool, on the JavaScript thread; the same path as every async call that copies its inputs. Warm: the block is reused (the warm-up call faulted its pages in); the first call of a size pays the page faults (see cold copy below)',
      ],
    });
  }

  // ---- its share of real calls ----------------------------------------------
  {
    const rowsN = quick ? 20_000 : 200_000;
    const work = githubWorkload(rowsN);
    const inBytes = work.indices.byteLength + work.values.byteLength + work.indptr.byteLength;
    const out = [];
    for (const backend of backends) {
      const wmh = new cusim.WeightedMinHash({ dim: work.cols, samples: 128, seed: 1, backend });
      // First call: parameter tables, and on CUDA the staging pool's first page-locking.
      const cold = await wmh.hashTimed(work);
      let last;
      const t = await time(async () => void (last = await wmh.hashTimed(work)), { warmup: 1, repeats: quick ? 2 : 4 });
      out.push({
        call: `WeightedMinHash.hash ${backend}`,
        'input MB': inBytes / 1e6,
        'cold copy ms': cold.host?.copyInMs,
        'warm copy ms': last.host?.copyInMs,
        'copy GB/s (warm)': gbs(inBytes, last.host?.copyInMs ?? NaN),
        'call ms (median)': t.wallMs.median,
        'copy share of the call': (last.host?.copyInMs ?? NaN) / t.wallMs.median,
      });
      wmh.dispose();
      log(`staging: minhash ${backend} done`);
    }
    const X = {
      data: Float32Array.from({ length: (quick ? 5000 : 60_000) * 784 }, (_, i) => (i * 7) % 256),
      rows: quick ? 5000 : 60_000,
      cols: 784,
    };
    const codes = new Uint32Array(8 * (quick ? 200_000 : 2_000_000)).map((_, i) => Math.imul(i, 2654435761) >>> 0);
    for (const backend of backends) {
      const fly = new cusim.FlyHash({ inputDim: 784, hashLength: 2000, winners: 32, backend });
      await fly.hash(X);
      const tf = await time(() => fly.hash(X), { warmup: 1, repeats: 3 });
      const tc = await time(() => n.stageArray([X.data]).dispose(), { warmup: 1, repeats: 3 });
      out.push({
        call: `FlyHash.hash ${backend} (float X)`,
        'input MB': X.data.byteLength / 1e6,
        'warm copy ms': tc.wallMs.median,
        'copy GB/s (warm)': gbs(X.data.byteLength, tc.wallMs.median),
        'call ms (median)': tf.wallMs.median,
        'copy share of the call': tc.wallMs.median / tf.wallMs.median,
      });
      fly.dispose();
      const tp = await time(() => cusim.popcountRows({ data: codes, rows: codes.length / 8, bits: 256 }, { backend }), {
        warmup: 1,
        repeats: 3,
      });
      const tcp = await time(() => n.stageArray([codes]).dispose(), { warmup: 1, repeats: 3 });
      out.push({
        call: `popcountRows ${backend}`,
        'input MB': codes.byteLength / 1e6,
        'warm copy ms': tcp.wallMs.median,
        'copy GB/s (warm)': gbs(codes.byteLength, tcp.wallMs.median),
        'call ms (median)': tp.wallMs.median,
        'copy share of the call': tcp.wallMs.median / tp.wallMs.median,
      });
    }
    sections.push({
      title: `staging share of calls (${cusim.threads()} threads)`,
      columns: ['call', 'input MB', 'cold copy ms', 'warm copy ms', 'copy GB/s (warm)', 'call ms (median)', 'copy share of the call'],
      rows: out,
      notes: [
        `WeightedMinHash: ${rowsN} GitHub-shaped rows, 128 samples; copy ms = host.copyInMs of hashTimed (indptr, indices and values copied before the Promise returns); cold = the object's first call`,
        "on CUDA the copy lands in page-locked staging from a pool (kept up to min(8 GiB, RAM/16) idle), which the GPU path DMAs in place: the copy replaces the engine's own batch staging, so a call does one host copy of its input either way; the cold call pays the page-locking",
        'FlyHash and popcount: copy ms is stageArray of the same array (the copy those calls make), next to the whole call',
      ],
    });
  }
  // ---- hashStream: the event loop while chunks are copied --------------------
  {
    const rowsN = quick ? 20_000 : 100_000;
    const chunks = quick ? 3 : 6;
    const work = githubWorkload(rowsN);
    const out = [];
    for (const backend of backends) {
      const wmh = new cusim.WeightedMinHash({ dim: work.cols, samples: backend === 'cpu' ? 2 : 128, seed: 1, backend });
      await wmh.hash(work);
      const source = function* () {
        for (let i = 0; i < chunks; i++) yield work;
      };
      // As hashStream was before it staged on a worker: each hash() copies its
      // chunk on this thread before its Promise returns.
      const perCall = async () => {
        let pending;
        for (const c of source()) {
          const next = wmh.hash(c);
          next.catch(() => {});
          if (pending) await pending;
          pending = next;
        }
        await pending;
      };
      const stream = async () => {
        for await (const _ of wmh.hashStream(source()));
      };
      for (const [how, f] of [
        ['hash() per chunk (copy on the event loop)', perCall],
        ['hashStream (copy on a worker)', stream],
      ]) {
        await f(); // warm: staging blocks made (and page-locked on CUDA)
        const delay = monitorEventLoopDelay({ resolution: 1 });
        delay.enable();
        const t0 = performance.now();
        await f();
        const wall = performance.now() - t0;
        delay.disable();
        out.push({
          backend,
          feed: how,
          chunks,
          'chunk MB': (work.indices.byteLength + work.values.byteLength) / 1e6,
          'wall ms': wall,
          'longest event-loop delay ms': delay.max / 1e6,
          'event-loop delay p99 ms': delay.percentile(99) / 1e6,
        });
      }
      wmh.dispose();
      log(`staging: stream ${backend} done`);
    }
    sections.push({
      title: `hashStream: the event loop while chunks are copied (${cusim.threads()} threads)`,
      columns: Object.keys(out[0]),
      rows: out,
      notes: [
        `WeightedMinHash over ${chunks} chunks of ${rowsN} GitHub-shaped rows (the same arrays each time), ${backends.includes('cuda') ? '128 samples on CUDA, ' : ''}2 on the CPU (the copy, not the hashing, is what is measured), second of two runs`,
        'event-loop delay: perf_hooks.monitorEventLoopDelay at 1 ms resolution over the run; a copy made on the event loop holds it for the whole copy',
      ],
    });
  }
  return { sections };
}
