// The CommonJS entry re-exports the ESM build (require(esm) works on Node >= 20.19).
import { mkdirSync, writeFileSync } from 'node:fs';
mkdirSync(new URL('../dist/cjs/', import.meta.url), { recursive: true });
writeFileSync(new URL('../dist/cjs/index.cjs', import.meta.url), "module.exports = require('../index.js');\n");
