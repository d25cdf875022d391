// The worker of prefetchUnicodeTables (unicode-tables.ts): builds this
// engine's Unicode tables off the main thread and hands them over.
import { parentPort } from 'node:worker_threads';
import { buildUnicodeTables } from './unicode-tables.js';

const t = buildUnicodeTables();
parentPort?.postMessage(t, [t.stage1.buffer as ArrayBuffer, t.blocks.buffer as ArrayBuffer, t.extra.buffer as ArrayBuffer]);
