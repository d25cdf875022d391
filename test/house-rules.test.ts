// The layering rules of CONTRIBUTING.md and docs/ARCHITECTURE.md, read from
// the sources: the ones a compiler cannot enforce and a review can miss.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function files(dir: string, ext: RegExp): string[] {
  const out: string[] = [];
  for (const e of readdirSync(path.join(root, dir), { withFileTypes: true })) {
    const rel = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...files(rel, ext));
    else if (ext.test(e.name)) out.push(rel);
  }
  return out.sort();
}

const read = (rel: string) => readFileSync(path.join(root, rel), 'utf8');
// Code only: a rule named in a comment is not a breach of it.
const code = (text: string) => text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');

/** Every match of `re` in the code of `list`, as 'file:line: text'. */
function hits(list: string[], re: RegExp): string[] {
  const out: string[] = [];
  for (const f of list) {
    code(read(f))
      .split('\n')
      .forEach((line, i) => {
        if (re.test(line)) out.push(`${f}:${i + 1}: ${line.trim()}`);
      });
  }
  return out;
}

const nativeSources = files('native', /\.(cc|h)$/);
const cudaSources = files('cuda', /\.(cu|cuh)$/);
const libSources = files('lib', /\.ts$/);

describe('house rules', () => {
  it('the kernels never see N-API: no napi.h or node_api.h in cuda/', () => {
    expect(cudaSources.length).toBeGreaterThan(10);
    expect(hits(cudaSources, /#\s*include\s*[<"](napi|node_api)\.h[>"]/)).toEqual([]);
  });

  it('one backend pattern: the glue and the interfaces have no #ifdef CUSIM_WITH_CUDA (the CUDA side is linked in, or native/cpu_only/no_cuda.cc)', () => {
    expect(nativeSources.length).toBeGreaterThan(20);
    expect(hits(nativeSources, /CUSIM_WITH_CUDA/)).toEqual([]);
    // Every MakeCuda… factory a header declares has its CPU-only stand-in
    // (two engines may share a name in their own namespaces: count them).
    const count = (text: string) => {
      const n = new Map<string, number>();
      for (const m of code(text).matchAll(/\b(MakeCuda\w*)\s*\(/g)) n.set(m[1], (n.get(m[1]) ?? 0) + 1);
      return n;
    };
    const declared = count(
      nativeSources
        .filter((f) => f.endsWith('.h'))
        .map(read)
        .join('\n'),
    );
    const stand = count(read('native/cpu_only/no_cuda.cc'));
    expect([...declared.values()].reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(8);
    for (const [name, n] of declared) expect(stand.get(name) ?? 0, name).toBe(n);
  });

  it('glue files are named <engine>_napi.cc, and only they include napi.h among the engines', () => {
    const engines = ['minhash', 'classic_minhash', 'lsh', 'join', 'hamming', 'flyhash', 'cluster', 'ops'];
    for (const e of engines) {
      expect(nativeSources, e).toContain(path.join('native', `${e}_napi.cc`));
      expect(nativeSources, e).not.toContain(path.join('native', `${e}.cc`));
      const backend = path.join('native', `${e}_cpu.cc`);
      if (nativeSources.includes(backend))
        expect(hits([backend, path.join('native', `${e}.h`)], /#\s*include\s*[<"]napi\.h[>"]/), e).toEqual([]);
    }
  });

  it('kernel choices come from shapes and tuning: the only environment variables are CUSIM_BACKEND, CUSIM_THREADS and CUSIM_PROFILE', () => {
    // JOB_COMPLETION_INDEX is read only where the user names it (`cusim dedup --shard JOB_COMPLETION_INDEX/N`, Kubernetes Indexed Jobs).
    const allowed = new Set(['CUSIM_BACKEND', 'CUSIM_THREADS', 'CUSIM_PROFILE', 'JOB_COMPLETION_INDEX']);
    const names = [
      ...hits([...nativeSources, ...cudaSources], /getenv\s*\(/).map((h) => /getenv\s*\(\s*"([^"]*)"/.exec(h)?.[1] ?? h),
      ...hits(libSources, /process\.env\b/).map(
        (h) => /process\.env\.(\w+)|process\.env\[['"](\w+)['"]\]/.exec(h)?.slice(1).find(Boolean) ?? h,
      ),
    ];
    expect(names.length).toBeGreaterThan(0);
    expect(names.filter((v) => !allowed.has(v))).toEqual([]);
  });

  it('kernel files stay readable: no cuda/ file over 900 lines', () => {
    const long = cudaSources.map((f) => [f, read(f).split('\n').length] as const).filter(([, n]) => n > 900);
    expect(long).toEqual([]);
  });
});
