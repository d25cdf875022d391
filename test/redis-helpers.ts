// Real Redis servers for tests: Debian's redis-server on free loopback ports,
// one server or a 3-node cluster, stopped (and their files removed) after.
import { serverArgs } from './fuzz/redis-server.mjs';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe } from 'vitest';

function which(cmd: string): string | undefined {
  const r = spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : undefined;
}

export const redisServer = which('redis-server');
const redisCli = which('redis-cli');
export const redisMissing = !redisServer || !redisCli ? 'redis-server/redis-cli not found (apt-get install redis-server)' : undefined;

/** A describe block that skips, saying why, only when redis-server cannot be found. */
export function describeRedis(name: string, fn: () => void): void {
  describe.skipIf(!!redisMissing)(redisMissing ? `${name} (skipped: ${redisMissing})` : name, fn);
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/** A port p with p and p + 10000 (a cluster node's bus port) free. */
async function freePort(): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const p = 20000 + Math.floor(Math.random() * 20000);
    if ((await portFree(p)) && (await portFree(p + 10000))) return p;
  }
  throw new Error('no free loopback port');
}

function cli(port: number, ...args: string[]): string {
  const r = spawnSync(redisCli!, ['-h', '127.0.0.1', '-p', String(port), ...args], { encoding: 'utf8', timeout: 30_000 });
  return (r.stdout ?? '') + (r.stderr ?? '');
}

async function waitFor(what: string, ok: () => boolean, ms = 20_000): Promise<void> {
  const t0 = Date.now();
  while (!ok()) {
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface RedisHandle {
  url: string;
  ports: number[];
  stop(): Promise<void>;
  /** Stops every server (SIGTERM: a clean shutdown that writes its AOF or RDB) and starts it again on its port and files. */
  restart(): Promise<void>;
}

/** Starts one redis-server, or three forming a cluster; `args` are added to each server's command line. */
export async function startRedis({ cluster = false, args: extra = [] }: { cluster?: boolean; args?: string[] } = {}): Promise<RedisHandle> {
  const dir = mkdtempSync(path.join(tmpdir(), 'cusim-redis-'));
  const procs: ChildProcess[] = [];
  const ports: number[] = [];
  const shutdown = () =>
    Promise.all(
      procs.map(
        (p) =>
          new Promise<void>((resolve) => {
            if (p.exitCode !== null || p.signalCode !== null) return resolve();
            p.once('exit', () => resolve());
            p.kill('SIGTERM');
            setTimeout(() => p.kill('SIGKILL'), 5000).unref();
          }),
      ),
    );
  const stop = async () => {
    await shutdown();
    rmSync(dir, { recursive: true, force: true });
  };
  const launch = async (i: number, port: number) => {
    const args = serverArgs(port, dir);
    args.push(...extra);
    if (cluster) args.push('--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`, '--cluster-node-timeout', '5000');
    procs[i] = spawn(redisServer!, args, { stdio: 'ignore' });
    await waitFor(`redis-server on ${port}`, () => /PONG|NOAUTH/.test(cli(port, 'ping')));
  };
  const restart = async () => {
    await shutdown();
    for (let i = 0; i < ports.length; i++) await launch(i, ports[i]);
    if (cluster) await waitFor('cluster_state:ok', () => ports.every((p) => cli(p, 'cluster', 'info').includes('cluster_state:ok')));
  };
  try {
    for (let i = 0; i < (cluster ? 3 : 1); i++) {
      const port = await freePort();
      ports.push(port);
      await launch(i, port);
    }
    if (cluster) {
      const out = cli(ports[0], '--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes');
      if (!/All 16384 slots covered/.test(out)) throw new Error(`redis-cli --cluster create failed: ${out}`);
      await waitFor('cluster_state:ok', () => ports.every((p) => cli(p, 'cluster', 'info').includes('cluster_state:ok')));
    }
  } catch (e) {
    await stop();
    throw e;
  }
  return { url: `redis://127.0.0.1:${ports[0]}`, ports, stop, restart };
}

/** Starts a server (or cluster) before the enclosing block's tests and stops it after; call handle() inside tests. */
export function useRedis(options: { cluster?: boolean } = {}): () => RedisHandle {
  let redis: RedisHandle | undefined;
  beforeAll(async () => {
    redis = await startRedis(options);
  });
  afterAll(async () => {
    await redis?.stop();
  });
  return () => redis!;
}
