// The README's JavaScript examples run as written: each ```js block as an ES
// module on this Node, importing 'cusim', and each ```cjs block as CommonJS,
// requiring it (the package resolves itself by name through its exports, to
// dist/ and this checkout's build).
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ensureDist, root } from './cli-helpers.js';

const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
const blocks = [...readme.matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
const cjsBlocks = [...readme.matchAll(/^```cjs\n([\s\S]*?)^```$/gm)].map((m) => m[1]);

describe('README examples', () => {
  it('has JavaScript examples, none using `using` (a syntax error in plain JavaScript on Node 20)', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(3);
    for (const b of blocks) expect(b).not.toMatch(/^\s*using\s/m);
  });

  blocks.forEach((code, i) => {
    it(`example ${i + 1} (${code.split('\n')[0].slice(0, 60)}…) runs`, () => {
      ensureDist();
      const r = spawnSync(process.execPath, ['--input-type=module'], { cwd: root, input: code, encoding: 'utf8', timeout: 120_000 });
      expect(r.status, `${r.stdout}${r.stderr}`).toBe(0);
    }, 130_000);
  });

  it('has a CommonJS form, which runs as CommonJS', () => {
    expect(cjsBlocks.length).toBeGreaterThanOrEqual(1);
    ensureDist();
    for (const code of cjsBlocks) {
      expect(code).toMatch(/require\('cusim'\)/);
      const r = spawnSync(process.execPath, ['--input-type=commonjs'], { cwd: root, input: code, encoding: 'utf8', timeout: 120_000 });
      expect(r.status, `${r.stdout}${r.stderr}`).toBe(0);
      expect(r.stdout).toBe('1 group: rows 0, 0, 4294967295\n');
    }
  }, 130_000);
});
