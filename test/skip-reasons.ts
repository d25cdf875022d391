// A vitest reporter beside the default one: after the run, one line per group
// of skipped tests with the reason, which the default reporter shows only
// with --reporter=verbose. A test skipped at run time gives its reason to
// ctx.skip(note); a suite skipped at collection (describe.skipIf) carries it
// in its name, as "(skipped: why)". Groups: a file's tests with the same
// note, or the tests of one skipped suite.
import path from 'node:path';
import type { Reporter, TestModule, Vitest } from 'vitest/node';

/** The lines the reporter prints for these modules (exported for its test). */
export function skipLines(modules: readonly TestModule[], root: string): string[] {
  const groups = new Map<string, number>();
  for (const m of modules) {
    const file = path.relative(root, m.moduleId);
    for (const t of m.children.allTests('skipped')) {
      const r = t.result();
      const note = r.state === 'skipped' ? r.note : undefined;
      const key = note ? `${file}: ${note}` : `${file} > ${t.parent.type === 'suite' ? t.parent.fullName : t.fullName}`;
      groups.set(key, (groups.get(key) ?? 0) + 1);
    }
  }
  return [...groups].map(([key, n]) => `  ↓ ${key} (${n} test${n === 1 ? '' : 's'})`);
}

export default class SkipReasons implements Reporter {
  private ctx?: Vitest;

  onInit(ctx: Vitest): void {
    this.ctx = ctx;
  }

  onTestRunEnd(modules: readonly TestModule[]): void {
    if (!this.ctx) return;
    const lines = skipLines(modules, this.ctx.config.root);
    if (lines.length === 0) return;
    this.ctx.logger.log(`\nSkipped, and why:\n${lines.join('\n')}`);
  }
}
