// MinHashLSH's Redis storage under faults: servers that are not Redis (every
// call ends with a coded error saying what answered), a database the server
// does not have, inputs overwritten while an insert runs, and an index whose
// keys were tampered with (reads fail instead of returning other groups).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MinHashLSH, type CsrMatrix } from '../lib/index.js';
import { connectRedis } from '../lib/lsh-redis.js';
import { rng } from './helpers.js';
import { lshCorpus, type LshCorpus } from './lsh-corpus.js';
import { describeRedis, startRedis, useRedis, type RedisHandle } from './redis-helpers.js';

let corpus: LshCorpus;
beforeAll(async () => {
  corpus = await lshCorpus(11, 120);
});

// Command starts in a RESP stream (arrays of bulk strings, as clients send them).
function commandsIn(buf: string): number {
  const lines = buf.split('\r\n');
  let n = 0;
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].startsWith('*')) n++;
    else if (lines[i].startsWith('$')) i++;
  }
  return n;
}

type Fake = 'errors' | 'silent' | 'drip';

/** A TCP server on a free loopback port that is not Redis: it answers every command with an error, never answers, or drips a reply that never ends. */
async function fakeServer(kind: Fake): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const server: Server = createServer((s) => {
    sockets.add(s);
    s.on('error', () => undefined);
    s.on('close', () => sockets.delete(s));
    if (kind === 'errors') s.on('data', (d) => s.write('-ERR this is not redis\r\n'.repeat(commandsIn(d.toString('latin1')))));
    if (kind === 'drip') {
      const reply = '$1000000000\r\n';
      let i = 0;
      const t = setInterval(() => s.write(i < reply.length ? reply[i++] : 'x'), 20);
      timers.add(t);
      s.on('close', () => clearInterval(t));
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `redis://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((r) => {
        for (const t of timers) clearInterval(t);
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

const SAMPLES = 16;
const sig = (n: number) => {
  const r = rng(n);
  return Uint32Array.from({ length: n * SAMPLES * 2 }, () => Math.floor(r() * 2 ** 32));
};

describe('MinHashLSH Redis storage against servers that are not Redis', () => {
  const fakes: Partial<Record<Fake, { url: string; close(): Promise<void> }>> = {};
  beforeAll(async () => {
    for (const k of ['errors', 'silent', 'drip'] as const) fakes[k] = await fakeServer(k);
  });
  afterAll(async () => {
    for (const f of Object.values(fakes)) await f.close();
  });
  const said: Record<Fake, RegExp> = {
    errors: /answered with an error: ERR this is not redis/,
    silent: /accepted the connection but did not answer within 300 ms/,
    drip: /accepted the connection but did not answer within 300 ms/,
  };
  for (const kind of ['errors', 'silent', 'drip'] as const) {
    it(`a server that ${kind === 'errors' ? 'answers every command with an error' : kind === 'silent' ? 'accepts and stays silent' : 'drips a byte at a time'}: insert, count, query, groups and remove end with a coded error saying what answered`, async () => {
      const lsh = new MinHashLSH({
        threshold: 0.5,
        samples: SAMPLES,
        backend: 'cpu',
        storage: { type: 'redis', url: fakes[kind]!.url, connectTimeout: 300, commandTimeout: 300, retryFor: 0 },
      });
      const calls: [string, () => Promise<unknown>][] = [
        ['insert', () => lsh.insert([1, 2], sig(2)) as Promise<void>],
        ['count', () => lsh.count()],
        ['query', () => lsh.query(sig(1))],
        ['groups', () => lsh.groups({ verify: 'none' })],
        ['remove', () => lsh.remove([1]) as Promise<number>],
      ];
      for (const [name, call] of calls) {
        const r = await call().then(
          () => undefined,
          (e: Error & { code?: string }) => e,
        );
        expect(r, name).toBeInstanceOf(Error);
        expect(r!.code, `${name}: ${r!.message}`).toBe('CUSIM_STORAGE_ERROR');
        expect(r!.message, name).toMatch(said[kind]);
      }
      await lsh.close();
    });
  }
});

function copyCsr(m: CsrMatrix): CsrMatrix & { values: Float32Array } {
  return { rows: m.rows, cols: m.cols, indptr: m.indptr.slice(), indices: m.indices.slice(), values: m.values!.slice() };
}

describeRedis('MinHashLSH Redis storage: database, ownership of inputs, tampering', () => {
  const handle = useRedis();
  let n = 0;
  const open = (prefix: string, extra: Record<string, unknown> = {}) =>
    new MinHashLSH({
      threshold: 0.7,
      samples: corpus.samples,
      backend: 'cpu',
      storage: { type: 'redis', url: handle().url, prefix, partitions: 8, signatures: true, retryFor: 0, ...extra },
    });
  const all = () => Uint32Array.from({ length: corpus.rows }, (_, i) => i);
  async function inMemory() {
    using mem = new MinHashLSH({ threshold: 0.7, samples: corpus.samples, backend: 'cpu' });
    mem.insert(all(), corpus.sigs);
    const g = await mem.groups({ verify: 'exact', matrix: corpus.matrix });
    return { ids: g.ids, group: g.group, count: g.count };
  }

  it('a URL naming a database the server does not have is a coded error', async () => {
    for (const db of [99, 16]) {
      const lsh = open(`db${n++}`, { url: `${handle().url}/${db}` });
      await expect(lsh.count()).rejects.toMatchObject({
        code: 'CUSIM_STORAGE_ERROR',
        message: expect.stringMatching(new RegExp(`the URL names database ${db}, which the server does not have`)),
      });
      await lsh.close();
    }
    // Database 3 exists (16 by default): the index lives there, not in database 0.
    const lsh = open(`db${n++}`, { url: `${handle().url}/3` });
    await lsh.insert([1, 2], corpus.sigs.subarray(0, 2 * corpus.samples * 2));
    expect(await lsh.count()).toBe(2);
    const c0 = await connectRedis(handle().url);
    const c3 = await connectRedis(`${handle().url}/3`);
    try {
      expect(await c0.exists(`${lsh.storagePrefix}:meta`)).toBe(0);
      expect(await c3.exists(`${lsh.storagePrefix}:meta`)).toBe(1);
    } finally {
      c0.disconnect();
      c3.disconnect();
    }
    await lsh.clear();
  });

  it('insert owns its inputs: ids, signatures and vectors overwritten right after the call change nothing stored', async () => {
    const want = await inMemory();
    const lsh = open(`own${n++}`);
    const ids = all();
    const sigs = corpus.sigs.slice();
    const vectors = copyCsr(corpus.matrix);
    const pending = lsh.insert(ids, sigs, { vectors }) as Promise<void>;
    const r = rng(5);
    ids.fill(0);
    for (let i = 0; i < sigs.length; i++) sigs[i] = Math.floor(r() * 2 ** 32);
    vectors.indices.fill(1);
    vectors.values.fill(0.5);
    vectors.indptr.fill(0);
    await pending;
    const got = await lsh.groups({ verify: 'exact' }); // from the stored vectors
    expect(got.ids).toEqual(want.ids);
    expect(got.group).toEqual(want.group);
    expect(got.count).toBe(want.count);
    expect(want.count).toBeGreaterThan(10);
    // The stored signatures are the original ones.
    const est = await lsh.groups({ verify: 'none' });
    using mem = new MinHashLSH({ threshold: 0.7, samples: corpus.samples, backend: 'cpu' });
    mem.insert(all(), corpus.sigs);
    expect(est.group).toEqual((await mem.groups({ verify: 'none' })).group);
    await lsh.clear();
  });

  // Each case: an intact index (equal to the in-memory one), then one tampering, then both reads.
  const tamper: [string, (c: Awaited<ReturnType<typeof connectRedis>>, prefix: string) => Promise<unknown>, RegExp, boolean][] = [
    [
      'band keys replaced by random entries',
      async (c, p) => {
        const r = rng(9);
        for (let part = 0; part < 8; part++) {
          const key = `${p}:b{0.${part}}`;
          const len = await c.strlen(key);
          await c.set(key, Buffer.from(Uint8Array.from({ length: len }, () => Math.floor(r() * 256))));
        }
      },
      /is inconsistent: (id \d+ has entries in \d+ of its \d+ bands|band key .* holds an entry of id \d+ that is not its own)/,
      false,
    ],
    [
      'a band key deleted',
      (c, p) => c.del(`${p}:b{1.3}`),
      /is inconsistent: (band 1 holds \d+ entries for \d+ rows|id \d+ has entries in)/,
      true,
    ],
    [
      'a removed list naming every id',
      (c, p) => c.set(`${p}:del`, Buffer.from(all().buffer)),
      /is inconsistent: the removed list names \d+ ids, its total says 0/,
      true,
    ],
    ['a record key deleted', (c, p) => c.del(`${p}:r{3}`), /is inconsistent: record partition 3 holds 0 rows, its total says \d+/, true],
    ['FLUSHALL', (c) => c.flushall(), /is inconsistent: its settings key .*:meta is gone/, true],
  ];
  for (const [what, fn, message, countToo] of tamper) {
    it(`${what}: groups${countToo ? ' and count' : ''} fail with a coded error naming what is missing`, async () => {
      const want = await inMemory();
      const lsh = open(`tamper${n++}`);
      await lsh.insert(all(), corpus.sigs, { vectors: corpus.matrix });
      const before = await lsh.groups({ verify: 'exact' });
      expect(before.group).toEqual(want.group);
      expect(await lsh.count()).toBe(corpus.rows);
      const c = await connectRedis(handle().url);
      try {
        await fn(c, lsh.storagePrefix!);
      } finally {
        c.disconnect();
      }
      const reads: [string, () => Promise<unknown>][] = [['groups', () => lsh.groups({ verify: 'exact' })]];
      if (countToo) reads.push(['count', () => lsh.count()]);
      for (const [name, read] of reads) {
        const e = await read().then(
          () => undefined,
          (x: Error & { code?: string }) => x,
        );
        expect(e, `${name} after ${what}`).toBeInstanceOf(Error);
        expect(e!.code, e!.message).toBe('CUSIM_STORAGE_ERROR');
        expect(e!.message).toMatch(message);
      }
      await lsh.close();
    });
  }

  it('a batch sent again, and ids removed twice or by two clients, keep the totals consistent', async () => {
    const lsh = open(`again${n++}`);
    const other = open(lsh.storagePrefix!);
    const ids = all();
    await lsh.insert(ids, corpus.sigs, { vectors: corpus.matrix });
    await other.insert(ids, corpus.sigs, { vectors: corpus.matrix });
    const [a, b] = await Promise.all([lsh.remove([3, 4, 5]), other.remove([4, 5, 6])]);
    expect(a + b).toBe(4); // each id counted by one of them
    expect(await lsh.remove([3, 6])).toBe(0);
    expect(await other.count()).toBe(corpus.rows - 4);
    const g = await lsh.groups({ verify: 'exact' });
    expect([...g.ids].filter((id) => id >= 3 && id <= 6)).toEqual([]);
    await other.close();
    await lsh.clear();
  });
});

const openssl = spawnSync('sh', ['-c', 'command -v openssl']).status === 0;

describeRedis('MinHashLSH Redis storage: passwords and TLS say what failed', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'cusim-tls-'));
  const file = (f: string) => path.join(dir, f);
  let tlsPort = 0;
  let redis: RedisHandle | undefined;
  beforeAll(async () => {
    if (!openssl) return;
    // A private CA and a server certificate for 127.0.0.1, signed by it.
    const sh = (cmd: string) => expect(spawnSync('sh', ['-c', cmd], { cwd: dir }).status, cmd).toBe(0);
    sh('openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=cusim-test-ca');
    sh('openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=127.0.0.1');
    sh(
      'printf "subjectAltName=IP:127.0.0.1\\n" > ext && openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out srv.crt -days 2 -extfile ext',
    );
    const s = createServer();
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    tlsPort = (s.address() as { port: number }).port;
    await new Promise<void>((r) => s.close(() => r()));
    redis = await startRedis({
      args: [
        '--requirepass',
        'sesame',
        '--tls-port',
        String(tlsPort),
        '--tls-cert-file',
        file('srv.crt'),
        '--tls-key-file',
        file('srv.key'),
        '--tls-ca-cert-file',
        file('ca.crt'),
        '--tls-auth-clients',
        'no',
      ],
    });
  });
  afterAll(async () => {
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const count = async (url: string, tls?: object) => {
    const lsh = new MinHashLSH({
      threshold: 0.5,
      samples: 8,
      storage: { type: 'redis', url, retryFor: 0, connectTimeout: 3000, ...(tls ? { tls } : {}) },
    });
    try {
      return await lsh.count();
    } finally {
      await lsh.close();
    }
  };
  it.skipIf(!openssl)(
    'wrong or missing password: authentication failed; an untrusted certificate: TLS; storage.tls.ca trusts a private CA',
    async () => {
      const plain = redis!.ports[0];
      await expect(count(`redis://:wrong@127.0.0.1:${plain}`)).rejects.toMatchObject({
        code: 'CUSIM_STORAGE_ERROR',
        message: expect.stringMatching(/^Redis at redis:\/\/127\.0\.0\.1:\d+: authentication failed \(WRONGPASS/),
      });
      await expect(count(`redis://127.0.0.1:${plain}`)).rejects.toMatchObject({
        code: 'CUSIM_STORAGE_ERROR',
        message: expect.stringMatching(/authentication failed \(NOAUTH/),
      });
      expect(await count(`redis://:sesame@127.0.0.1:${plain}`)).toBe(0);
      await expect(count(`rediss://:sesame@127.0.0.1:${tlsPort}`)).rejects.toMatchObject({
        code: 'CUSIM_STORAGE_ERROR',
        message: expect.stringMatching(/: TLS: self[- ]signed certificate/),
      });
      expect(await count(`rediss://:sesame@127.0.0.1:${tlsPort}`, { ca: readFileSync(file('ca.crt')) })).toBe(0);
      expect(
        () => new MinHashLSH({ threshold: 0.5, samples: 8, storage: { type: 'redis', url: 'rediss://x', tls: { ca: 5 } as never } }),
      ).toThrow(/storage.tls.ca must be a PEM string or Buffer/);
    },
  );
});
