#!/usr/bin/env node
// Runs fuzz cases in this process and prints what each did:
//   node test/fuzz/replay.mjs --seed 2 --id 3990 [--family ops]
import { parseArgs } from 'node:util';
import { generatorsOf } from './families/index.mjs';
import { makeContext, runCase } from './case.mjs';

const { values } = parseArgs({
  options: {
    seed: { type: 'string', default: '1' },
    id: { type: 'string' },
    family: { type: 'string' },
    backend: { type: 'string', default: 'cpu' },
  },
});
const ctx = await makeContext();
ctx.backend = values.backend;
const table = generatorsOf(values.family?.split(','));
for (const id of values.id.split(',').map(Number)) {
  const r = await runCase(table, Number(values.seed), id, ctx, (g) => console.log(`case ${id}: ${g.family}: ${g.entry}`));
  console.log(`  scenario ${r.what ?? '-'}: ${r.status} ${r.detail}`);
  if (r.error) console.log(r.error);
}
