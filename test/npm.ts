// Child processes for the packaging tests: npm, node and qemu runs that take
// up to minutes.
import { spawn, spawnSync } from 'node:child_process';

export interface Ran {
  status: number | null;
  out: string;
  stdout: string;
  stderr: string;
}

// Asynchronous on purpose: a minute-long spawnSync would block the test
// worker's event loop and time out vitest's own RPC.
export function sh(cmd: string, args: string[], cwd: string, timeout = 540_000, env: NodeJS.ProcessEnv = {}): Promise<Ran> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, {
      cwd,
      timeout,
      env: { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false', ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', (e) => resolve({ status: null, out: String(e), stdout, stderr: String(e) }));
    child.on('close', (status) => resolve({ status, out: stdout + stderr, stdout, stderr }));
  });
}

export const npmWorks = spawnSync('npm', ['--version'], { timeout: 30_000 }).status === 0;

/** Why an npm install failed for want of the registry (offline, not in npm's cache), or undefined for any other failure. */
export function offline(r: Ran): string | undefined {
  const line = r.out.split('\n').find((l) => /ENOTCACHED|ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ECONNRESET/.test(l));
  return line ? `the npm registry is unreachable and npm's cache lacks a dependency (${line.trim()})` : undefined;
}
