// BlockQueue bounds what a reader holds ahead of the pipeline: push() resolves
// only while at most `limit` blocks wait, and a consumer that stops frees a
// reader waiting for room (no hang on a failed pipeline).
import { describe, expect, it } from 'vitest';
import { BlockQueue } from '../lib/cli/block-queue.js';

/** Whether `p` has settled after the microtasks queued so far have run. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(() => (done = true));
  for (let i = 0; i < 5; i++) await Promise.resolve();
  return done;
}

describe('BlockQueue backpressure', () => {
  it('a push beyond the limit waits until the consumer takes a block, and blocks come out in order', async () => {
    const q = new BlockQueue<number>(2);
    expect(await settled(q.push(0))).toBe(true);
    expect(await settled(q.push(1))).toBe(true);
    const third = q.push(2);
    expect(await settled(third)).toBe(false);
    const it = q[Symbol.asyncIterator]();
    expect((await it.next()).value).toBe(0);
    expect(await settled(third)).toBe(true);
    q.close();
    const rest: number[] = [];
    for (let r = await it.next(); !r.done; r = await it.next()) rest.push(r.value);
    expect(rest).toEqual([1, 2]);
  });

  it('abandon() (a pipeline that failed before pulling) frees every waiting reader and sets stopped', async () => {
    const q = new BlockQueue<number>(1);
    await q.push(0);
    const waiting = [q.push(1), q.push(2)];
    expect(await settled(Promise.all(waiting))).toBe(false);
    q.abandon();
    expect(await settled(Promise.all(waiting))).toBe(true);
    expect(q.stopped.signal.aborted).toBe(true);
    expect(await settled(q.push(3))).toBe(true);
  });

  it('a consumer that leaves early frees a reader waiting for room', async () => {
    const q = new BlockQueue<number>(1);
    await q.push(0);
    const waiting = q.push(1);
    for await (const b of q) {
      expect(b).toBe(0);
      break;
    }
    expect(await settled(waiting)).toBe(true);
    expect(q.stopped.signal.aborted).toBe(true);
  });
});
