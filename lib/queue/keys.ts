// Every key of a job, found by SCAN over each master (a Redis Cluster's keys
// live on several nodes): to drop a finished job, and to say how much memory
// it holds. Keys are named `P:…` for job prefix P (job.ts), so the pattern
// `P:*` is the whole job; a job whose prefix starts with `P:` matches too,
// which is why prefixes should not nest.
import type { Cluster, Redis } from 'ioredis';

async function* scan(c: Redis | Cluster, prefix: string): AsyncGenerator<{ node: Redis; keys: string[] }> {
  const nodes: Redis[] = (c as Cluster).isCluster ? (c as Cluster).nodes('master') : [c as Redis];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length) yield { node, keys };
    } while (cursor !== '0');
  }
}

/** Deletes every key of job `prefix`; returns how many there were. One key per command: a cluster cannot delete keys of several slots at once. */
export async function dropJob(c: Redis | Cluster, prefix: string): Promise<number> {
  let n = 0;
  for await (const { keys } of scan(c, prefix)) {
    const gone = await Promise.all(keys.map((k) => c.unlink(k)));
    n += gone.reduce((s, x) => s + x, 0);
  }
  return n;
}

/**
 * Keys of job `prefix` and the bytes Redis holds for them: the sum of MEMORY
 * USAGE over every key, with Redis's default sampling (exact for strings, such
 * as the band and record keys; hashes and lists estimated from 5 of their
 * elements).
 */
export async function jobMemory(c: Redis | Cluster, prefix: string): Promise<{ keys: number; bytes: number }> {
  let keys = 0;
  let bytes = 0;
  for await (const { node, keys: batch } of scan(c, prefix)) {
    // Asked of the node that holds the key (a cluster client cannot route MEMORY USAGE by its key).
    const sizes = await Promise.all(batch.map((k) => node.call('MEMORY', 'USAGE', k) as Promise<number | null>));
    keys += batch.length;
    for (const s of sizes) bytes += s ?? 0;
  }
  return { keys, bytes };
}
