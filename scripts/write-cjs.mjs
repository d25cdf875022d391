// The CommonJS entry re-exports the ESM build (require(esm) works on Node >=
// 20.19). Its types are the ESM declarations copied under dist/cjs/, where a
// package.json marks them CommonJS, so that TypeScript projects compiled as
// CommonJS (module: node16) see CommonJS types (no TS1479, no "masquerading
// as ESM").
import { copyFileSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const dist = fileURLToPath(new URL('../dist/', import.meta.url));
const cjs = path.join(dist, 'cjs');
mkdirSync(cjs, { recursive: true });
writeFileSync(path.join(cjs, 'package.json'), '{ "type": "commonjs" }\n');
writeFileSync(path.join(cjs, 'index.cjs'), "module.exports = require('../index.js');\n");
// The library's declarations (not the CLI's).
for (const e of readdirSync(dist, { recursive: true, withFileTypes: true })) {
  const rel = path.relative(dist, path.join(e.parentPath ?? e.path, e.name));
  if (!e.isFile() || !rel.endsWith('.d.ts') || /^(cjs|cli)[\\/]/.test(rel)) continue;
  mkdirSync(path.dirname(path.join(cjs, rel)), { recursive: true });
  copyFileSync(path.join(dist, rel), path.join(cjs, rel));
}
