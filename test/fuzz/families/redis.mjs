// MinHashLSH with Redis storage: against a real redis-server that the runner
// starts (run.mjs, on a free loopback port), inserts in random batches
// (shuffled, sent twice, through two clients, with the caller's arrays
// overwritten right after each call) and removals must answer as the
// in-memory index does for the same rows; an index whose keys were tampered
// with must fail with CUSIM_STORAGE_ERROR or, where the tampering touched
// nothing the answer depends on, answer as before; servers that are not Redis
// (errors, silence, a drip, garbage, a closed socket) must end every call with
// CUSIM_STORAGE_ERROR within the deadlines.
import { createServer } from 'node:net';
import { diff } from '../gen.mjs';

const { connectRedis } = await import(new URL('../../../dist/redis-connect.js', import.meta.url).href);

export const name = 'redis';
const S = 0xffffffff;
const SAMPLES = [4, 8, 12];

function sigs(g, rows, samples) {
  const per = samples * 2;
  const out = new Uint32Array(rows * per);
  for (let r = 0; r < rows; r++) {
    const empty = g.bool(0.08);
    const copyOf = r > 0 && g.bool(0.2) ? g.int(r) : -1;
    for (let i = 0; i < per; i++) out[r * per + i] = empty ? S : copyOf >= 0 ? out[copyOf * per + i] : g.int(3);
  }
  return out;
}

function rowsOf(s, per, idx) {
  const out = new Uint32Array(idx.length * per);
  idx.forEach((r, i) => out.set(s.subarray(r * per, (r + 1) * per), i * per));
  return out;
}

let prefixes = 0;
const prefixFor = (g) => `fz${process.pid}-${g.seed}-${prefixes++}`;

async function answers(lsh, probe) {
  const g = await lsh.groups({ verify: 'estimate' });
  const p = await lsh.candidatePairs();
  return {
    count: await lsh.count(),
    query: await lsh.query(probe),
    left: p.left,
    right: p.right,
    ids: g.ids,
    group: g.group,
    groups: g.count,
    simLeft: g.pairs.left,
    simRight: g.pairs.right,
  };
}

/** A random index: the Redis one, built batch by batch, and what the in-memory index answers for the same rows. */
async function built(g, lib, url) {
  const samples = g.pick(SAMPLES);
  const per = samples * 2;
  const bands = g.range(1, samples);
  const rows = g.range(1, Math.floor(samples / bands));
  const threshold = 0.3 + g.r() * 0.6;
  const n = g.range(0, 60);
  const s = sigs(g, n, samples);
  const ids = Array.from({ length: n }, (_, i) => i * g.range(1, 3) + g.int(2) * i);
  const uniq = [...new Set(ids)].sort((a, b) => a - b);
  const rowOf = new Map(ids.map((id, r) => [id, r]));
  const prefix = prefixFor(g);
  const storage = { type: 'redis', url, prefix, partitions: g.pick([1, 2, 3, 8]), signatures: true, retryFor: 0 };
  const open = () => new lib.MinHashLSH({ bands, rows, threshold, samples, backend: 'cpu', storage });
  const a = open();
  const b = g.bool(0.4) ? open() : a;
  // Batches in a shuffled order; some sent twice; the caller's arrays overwritten at once.
  const order = uniq.slice();
  for (let i = order.length - 1; i > 0; i--) {
    const j = g.int(i + 1);
    [order[i], order[j]] = [order[j], order[i]];
  }
  for (let at = 0; at < order.length;) {
    const part = order.slice(at, (at += g.range(1, 20)));
    const idArr = Uint32Array.from(part);
    const sigArr = rowsOf(
      s,
      per,
      part.map((id) => rowOf.get(id)),
    );
    const times = g.bool(0.15) ? 2 : 1;
    for (let t = 0; t < times; t++) {
      const ia = idArr.slice();
      const sa = sigArr.slice();
      const pending = (g.bool() ? a : b).insert(ia, sa);
      if (g.bool(0.5)) {
        ia.fill(g.int(5));
        sa.fill(g.int(3));
      }
      await pending;
    }
  }
  const removed = g.bool(0.3) ? uniq.filter(() => g.bool(0.2)) : [];
  if (removed.length) await (g.bool() ? a : b).remove(removed);
  const mem = new lib.MinHashLSH({ bands, rows, threshold, samples, backend: 'cpu' });
  const live = uniq.filter((id) => !removed.includes(id));
  if (live.length) {
    mem.insert(
      Uint32Array.from(live),
      rowsOf(
        s,
        per,
        live.map((id) => rowOf.get(id)),
      ),
    );
  }
  const probe = sigs(g, g.range(1, 4), samples);
  const want = await answers(mem, probe);
  mem.dispose();
  const close = async () => {
    if (b !== a) await b.close();
    await a.clear().catch(() => a.close());
  };
  return { lsh: a, other: b, want, probe, prefix, samples, bands, partitions: storage.partitions, uniq, close };
}

// Not Redis: a loopback server that answers with errors, stays silent, drips a reply that never ends,
// sends garbage, or closes each connection at once.
async function fakeServer(kind) {
  const sockets = new Set();
  const server = createServer((s) => {
    sockets.add(s);
    s.on('error', () => {});
    s.on('close', () => sockets.delete(s));
    if (kind === 'errors') s.on('data', (d) => s.write('-ERR not redis\r\n'.repeat(Math.max(1, (String(d).match(/^\*/gm) ?? []).length))));
    else if (kind === 'garbage') s.on('data', () => s.write('HTTP/1.1 400 Bad Request\r\n\r\n'));
    else if (kind === 'close') s.destroy();
    else if (kind === 'drip') {
      const reply = '$100000000\r\n';
      let i = 0;
      const t = setInterval(() => s.write(i < reply.length ? reply[i++] : 'x'), 10);
      s.on('close', () => clearInterval(t));
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `redis://127.0.0.1:${server.address().port}`,
    close: () =>
      new Promise((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

export const generators = [
  {
    entry: 'redis index vs in-memory index',
    weight: 4,
    async make(g, { lib, redisUrl }) {
      if (!redisUrl) return notRedisCase(g, lib, this.entry);
      const x = await built(g, lib, redisUrl);
      return {
        entry: this.entry,
        kind: 'valid',
        what: `samples ${x.samples}, bands ${x.bands}, partitions ${x.partitions}, ${x.uniq.length} rows`,
        run: () => answers(x.other, x.probe),
        check: (got) => diff(got, x.want),
        cleanup: x.close,
      };
    },
  },
  {
    entry: 'redis index with tampered keys',
    weight: 3,
    async make(g, { lib, redisUrl }) {
      if (!redisUrl) return notRedisCase(g, lib, this.entry);
      const x = await built(g, lib, redisUrl);
      const c = await connectRedis(redisUrl);
      const how = g.pick(['del band', 'random band', 'del record', 'del totals', 'del list', 'del meta', 'del vectors']);
      try {
        const P = x.partitions;
        if (how === 'del band') await c.del(`${x.prefix}:b{${g.int(x.bands)}.${g.int(P)}}`);
        else if (how === 'random band') {
          const key = `${x.prefix}:b{${g.int(x.bands)}.${g.int(P)}}`;
          const len = await c.strlen(key);
          await c.set(key, Buffer.from(Array.from({ length: len }, () => g.int(256))));
        } else if (how === 'del record') await c.del(`${x.prefix}:r{${g.int(P)}}`);
        else if (how === 'del totals') await c.del(`${x.prefix}:n{${g.int(P)}}`);
        else if (how === 'del list') await c.set(`${x.prefix}:del`, Buffer.from(Uint32Array.from(x.uniq).buffer));
        else if (how === 'del meta') await c.del(`${x.prefix}:meta`);
        else await c.del(`${x.prefix}:s{${g.int(P)}}`);
      } finally {
        c.disconnect();
      }
      return {
        entry: this.entry,
        kind: 'valid',
        what: how,
        run: () => answers(x.other, x.probe),
        // Either CUSIM_STORAGE_ERROR, or (the tampering touched nothing read) the untampered answer.
        check: (got) => diff(got, x.want),
        allow: ['CUSIM_STORAGE_ERROR'],
        cleanup: x.close,
      };
    },
  },
  {
    entry: 'redis storage on a server that is not Redis',
    weight: 2,
    make(g, { lib }) {
      return notRedisCase(g, lib, this.entry);
    },
  },
];

async function notRedisCase(g, lib, entry) {
  const kind = g.pick(['errors', 'silent', 'drip', 'garbage', 'close']);
  const fake = await fakeServer(kind);
  const samples = g.pick(SAMPLES);
  const lsh = new lib.MinHashLSH({
    threshold: 0.5,
    samples,
    backend: 'cpu',
    storage: { type: 'redis', url: fake.url, connectTimeout: 150, commandTimeout: 150, retryFor: g.pick([0, 200]) },
  });
  const call = g.pick(['insert', 'count', 'query', 'groups', 'remove', 'candidatePairs']);
  const s = sigs(g, 2, samples);
  return {
    entry,
    kind: 'invalid',
    what: `${kind} server, ${call}`,
    run: async () => {
      if (call === 'insert') return lsh.insert([1, 2], s);
      if (call === 'count') return lsh.count();
      if (call === 'query') return lsh.query(s);
      if (call === 'groups') return lsh.groups({ verify: 'none' });
      if (call === 'remove') return lsh.remove([1]);
      return lsh.candidatePairs();
    },
    errorCode: 'CUSIM_STORAGE_ERROR',
    cleanup: async () => {
      await lsh.close();
      await fake.close();
    },
  };
}
