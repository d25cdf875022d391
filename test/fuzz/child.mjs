// Runs a batch of fuzz cases in this process and reports each over IPC:
// { t: 'start', id, entry } before it runs, { t: 'end', id, entry, status,
// detail } after. A crash or hang is attributed by the parent to the case
// that started and never ended.
import { KNOWN_CODES } from './gen.mjs';
import { generatorsOf } from './families/index.mjs';
import { describeError, makeContext, runCase } from './case.mjs';

const ctx = await makeContext();
const strays = [];
process.on('unhandledRejection', (e) => strays.push(e));
process.on('uncaughtException', (e) => strays.push(e));

process.on('message', async (m) => {
  if (m.t !== 'run') return;
  const table = generatorsOf(m.families);
  ctx.backend = m.backend ?? 'cpu';
  ctx.redisUrl = m.redis;
  for (const id of m.ids) {
    const r = await runCase(table, m.seed, id, ctx, (gen) => process.send({ t: 'start', id, entry: gen.entry, family: gen.family }));
    for (const e of strays.splice(0)) {
      const coded = e instanceof Error && KNOWN_CODES.has(e.code);
      if (!coded && r.status !== 'harness') [r.status, r.detail] = ['untyped', `stray ${describeError(e)}`];
    }
    process.send({
      t: 'end',
      id,
      entry: r.entry,
      family: r.family,
      status: r.status,
      detail: r.detail ? `${r.detail} [${r.what ?? ''}]` : '',
    });
    if (globalThis.gc && id % 25 === 0) globalThis.gc();
  }
  process.send({ t: 'batch-done' });
});
process.send({ t: 'ready' });
