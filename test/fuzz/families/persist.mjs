// Saved files: save then load round trips (HammingIndex with removals,
// MinHashLSH of either signature kind, StreamClusterer), and loads of damaged,
// foreign or odd paths (truncated, a flipped byte, appended bytes, random
// bytes, another engine's file, a directory, a missing file, NUL and empty
// paths): a round trip answers as the index saved; a bad file is a coded
// error, never a crash or a silently different index.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { diff } from '../gen.mjs';

export const name = 'persist';
const BAD_FILE_CODES = ['CUSIM_BAD_FILE', 'CUSIM_IO_ERROR', 'CUSIM_INVALID_ARGUMENT'];

function scratch() {
  const dir = mkdtempSync(path.join(tmpdir(), 'cusim-fuzz-persist-'));
  return { dir, file: path.join(dir, 'x.idx'), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

function codes(g, rows, w) {
  return Uint32Array.from({ length: rows * w }, () => (g.bool(0.3) ? 0 : (g.r() * 4294967296) >>> 0));
}

function randomSigs(g, rows, per) {
  // Few distinct values per sample so bands collide and groups form.
  return Uint32Array.from({ length: rows * per }, (_, i) => (g.bool(0.1) ? 0xffffffff : (i % per) * 7 + g.int(3)));
}

/** An index of some engine, saved to `file`; returns what load() should reproduce and how to ask. */
async function savedIndex(g, lib, file) {
  const engine = g.pick(['hamming', 'lsh', 'cluster']);
  if (engine === 'hamming') {
    const bits = 32 * g.range(1, 4);
    const keyBits = g.range(1, 8);
    const ix = new lib.HammingIndex({
      bits,
      method: g.pick(['exact', 'ewh']),
      backend: 'cpu',
      keyBits,
      maxErrors: Math.min(2, keyBits),
      tables: g.range(1, 4),
    });
    ix.add(codes(g, g.range(1, 50), bits / 32));
    if (g.bool(0.5)) ix.remove(Uint32Array.from({ length: g.range(0, 10) }, () => g.int(60)));
    await ix.save(file);
    const q = codes(g, g.range(1, 5), bits / 32);
    const k = g.range(1, 8);
    const ask = async (x) => {
      const r = await x.search(q, { k, backend: 'cpu' });
      return { ids: r.ids, distances: r.distances, live: x.ids() };
    };
    const want = ix.size > 0 ? await ask(ix) : null;
    ix.dispose();
    return { engine, load: (f) => lib.HammingIndex.load(f, { backend: 'cpu' }), ask: (x) => (want ? ask(x) : Promise.resolve(null)), want };
  }
  if (engine === 'lsh') {
    const samples = g.range(2, 24);
    const kind = g.pick(['weighted', 'classic']);
    const rows = g.range(0, 40);
    const lsh = new lib.MinHashLSH({
      bands: g.range(1, Math.max(1, samples >> 1)),
      rows: 2,
      samples: Math.max(samples, 2 * samples),
      kind,
      backend: 'cpu',
    });
    const width = kind === 'weighted' ? 2 : 1;
    const sigs = randomSigs(g, rows, lsh.samples * width);
    lsh.insert(
      Uint32Array.from({ length: rows }, (_, i) => i * 3 + 1),
      sigs,
    );
    if (rows && g.bool(0.4)) lsh.remove([1, 4, 7]);
    await lsh.save(file);
    const ask = async (x) => {
      const r = await x.groups({ verify: 'estimate' });
      return { group: r.group, count: r.count, left: r.pairs.left, right: r.pairs.right, kind: x.kind ?? null };
    };
    const want = await ask(lsh);
    lsh.dispose();
    return { engine, load: (f) => lib.MinHashLSH.load(f, { backend: 'cpu' }), ask, want };
  }
  const c = new lib.StreamClusterer({ threshold: 0.3 + g.r() * 0.5, maxTerms: g.range(1, 8), capacity: 64, backend: 'cpu' });
  const rows = g.range(1, 30);
  const indptr = new Uint32Array(rows + 1);
  const idx = [];
  const val = [];
  for (let i = 0; i < rows; i++) {
    const n = g.range(1, 6);
    const seen = new Set();
    for (let t = 0; t < n; t++) seen.add(g.int(20));
    for (const s of [...seen].sort((a, b) => a - b)) {
      idx.push(s);
      val.push(0.1 + g.r());
    }
    indptr[i + 1] = idx.length;
  }
  const m = { rows, cols: 20, indptr, indices: Uint32Array.from(idx), values: Float32Array.from(val) };
  await c.add(m);
  await c.save(file);
  const probe = { ...m, indptr: m.indptr.slice(), indices: m.indices.slice(), values: m.values.slice() };
  const ask = async (x) => {
    const r = await x.add(probe, { mode: 'sequential' });
    return { cluster: r.cluster, created: r.created };
  };
  const want = await ask(c);
  c.dispose();
  return {
    engine,
    load: (f) => lib.StreamClusterer.load(f, { backend: 'cpu' }),
    ask,
    want,
  };
}

export const generators = [
  {
    entry: 'save + load round trip',
    weight: 3,
    async make(g, { lib }) {
      const s = scratch();
      const saved = await savedIndex(g, lib, s.file);
      return {
        entry: this.entry,
        kind: 'valid',
        what: saved.engine,
        run: async () => {
          const x = await saved.load(s.file);
          try {
            return await saved.ask(x);
          } finally {
            x.dispose();
          }
        },
        // The cluster probe adds to the loaded clusterer as it did to the saved one.
        check: (got) => (saved.want === null ? null : diff(got, saved.want)),
        cleanup: s.cleanup,
      };
    },
  },
  {
    entry: 'load of a damaged or foreign file',
    weight: 4,
    async make(g, { lib }) {
      const s = scratch();
      const saved = await savedIndex(g, lib, s.file);
      const bytes = readFileSync(s.file);
      const how = g.pick(['truncate', 'flip', 'append', 'random', 'empty', 'foreign', 'directory', 'missing', 'nul', 'blank']);
      let target = s.file;
      if (how === 'truncate') writeFileSync(s.file, bytes.subarray(0, g.int(bytes.length)));
      else if (how === 'flip') {
        const b = Buffer.from(bytes);
        b[g.int(b.length)] ^= 1 << g.int(8);
        writeFileSync(s.file, b);
      } else if (how === 'append') writeFileSync(s.file, Buffer.concat([bytes, Buffer.from([g.int(256), g.int(256)])]));
      else if (how === 'random') writeFileSync(s.file, Buffer.from(Array.from({ length: g.range(0, 200) }, () => g.int(256))));
      else if (how === 'empty') writeFileSync(s.file, Buffer.alloc(0));
      else if (how === 'foreign') {
        // A valid file of another engine under this engine's loader.
        const other = await savedIndex(g, lib, s.file);
        if (other.engine === saved.engine) writeFileSync(s.file, Buffer.concat([readFileSync(s.file), Buffer.from([1])]));
      } else if (how === 'directory') target = s.dir;
      else if (how === 'missing') target = path.join(s.dir, 'none.idx');
      else if (how === 'nul') target = s.file + '\0x';
      else target = '';
      return {
        entry: this.entry,
        kind: 'invalid',
        what: `${saved.engine} ${how}`,
        run: async () => {
          const x = await saved.load(target);
          x.dispose();
          return null;
        },
        check: () => null,
        allow: BAD_FILE_CODES,
        cleanup: s.cleanup,
      };
    },
  },
];
