// A redis-server for the fuzz run's Redis family: Debian's redis-server on a
// free loopback port, no persistence, its directory removed when stopped.
// Absent redis-server, the family runs its cases that need no server.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function answersPing(port) {
  return new Promise((resolve) => {
    const c = createConnection({ host: '127.0.0.1', port }, () => c.write('PING\r\n'));
    c.setTimeout(500, () => (c.destroy(), resolve(false)));
    c.on('data', (d) => (c.destroy(), resolve(String(d).startsWith('+PONG'))));
    c.on('error', () => resolve(false));
  });
}

/** redis-server's arguments for a throwaway server: loopback only, no persistence, files in `dir`. */
export function serverArgs(port, dir) {
  return ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--protected-mode', 'no'];
}

/** { url, pid, stop() }, or undefined when redis-server (or the binary `bin`, a path or a name on PATH) is not installed. */
export async function startRedisServer(bin = 'redis-server') {
  if (spawnSync('sh', ['-c', 'command -v "$0"', bin]).status !== 0) return undefined;
  const dir = mkdtempSync(path.join(tmpdir(), 'cusim-fuzz-redis-'));
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    const args = serverArgs(port, dir);
    const p = spawn(bin, args, { stdio: 'ignore' });
    const exited = new Promise((r) => p.once('exit', r));
    for (let t = 0; t < 200 && p.exitCode === null; t++) {
      if (await answersPing(port)) {
        return {
          url: `redis://127.0.0.1:${port}`,
          pid: p.pid,
          async stop() {
            if (p.exitCode === null && p.signalCode === null) {
              p.kill('SIGKILL');
              await exited;
            }
            rmSync(dir, { recursive: true, force: true });
          },
        };
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    p.kill('SIGKILL');
    await exited;
  }
  rmSync(dir, { recursive: true, force: true });
  throw new Error('redis-server did not start on a free loopback port');
}
