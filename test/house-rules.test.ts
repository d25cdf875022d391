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
// Code only: a rule named in a comment is not a breach of it. One pass, so
// a '/*' inside a line comment opens nothing; newlines stay for line numbers.
const code = (text: string) => text.replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, (c) => c.replace(/[^\n]/g, ''));

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

/** lib/ file -> the lib/ files it imports or re-exports from (type-only imports too: a cycle of types is still a cycle). */
function libImports(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const f of libSources) {
    const to = new Set<string>();
    for (const m of code(read(f)).matchAll(/\b(?:import|export)\b[^;'"]*?(?:\bfrom\s*)?['"](\.{1,2}\/[^'"]+)['"]/g)) {
      const target = path.join(path.dirname(f), m[1]).replace(/\.js$/, '.ts');
      if (libSources.includes(target)) to.add(target);
    }
    graph.set(f, [...to].sort());
  }
  return graph;
}

/** The import cycles: each strongly connected component of more than one file (or a file importing itself), sorted. */
function importCycles(graph: Map<string, string[]>): string[][] {
  // Tarjan's algorithm.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const scc: string[] = [];
    for (let w = ''; w !== v;) {
      w = stack.pop()!;
      onStack.delete(w);
      scc.push(w);
    }
    if (scc.length > 1 || graph.get(v)?.includes(v)) out.push(scc.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return out.sort((a, b) => (a[0] < b[0] ? -1 : 1));
}

describe('house rules', () => {
  it('the kernels never see N-API: no napi.h or node_api.h in cuda/', () => {
    expect(cudaSources.length).toBeGreaterThan(10);
    expect(hits(cudaSources, /#\s*include\s*[<"](napi|node_api)\.h[>"]/)).toEqual([]);
  });

  it('one backend pattern: the glue and the interfaces have no #ifdef CUSIM_WITH_CUDA (the CUDA side is linked in, or native/cpu_only/no_cuda.cc)', () => {
    expect(nativeSources.length).toBeGreaterThan(20);
    expect(hits([...nativeSources, ...cudaSources], /CUSIM_WITH_CUDA/)).toEqual([]);
    // Nor does the build define it (a macro nothing reads invites an #ifdef).
    expect(hits(['CMakeLists.txt', 'binding.gyp', path.join('scripts', 'check-cuda.sh')], /CUSIM_WITH_CUDA=/)).toEqual([]);
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

  // The engines, from the sources: each native/<engine>.h that declares a MakeCuda… factory.
  const engines = nativeSources
    .filter((f) => f.endsWith('.h') && /\bMakeCuda\w*\s*\(/.test(code(read(f))))
    .map((f) => path.basename(f, '.h'));

  it('the engine list comes from the sources: every header with a MakeCuda… factory', () => {
    expect(engines).toEqual(expect.arrayContaining(['minhash', 'classic_minhash', 'lsh', 'join', 'hamming', 'flyhash', 'cluster', 'ops']));
  });

  it('cuda/ is a star: shared device code in cuda/common/, each engine in cuda/<engine>.cu with its families in cuda/<engine>/', () => {
    const top = readdirSync(path.join(root, 'cuda'), { withFileTypes: true });
    const dirs = top.filter((e) => e.isDirectory()).map((e) => e.name);
    expect(dirs).toContain('common');
    // Every folder is common/ or an engine's.
    expect(dirs.filter((d) => d !== 'common' && !engines.includes(d))).toEqual([]);
    // Every engine has its backend file; a top-level file belongs to an engine by its name.
    for (const e of engines) expect(cudaSources, e).toContain(path.join('cuda', `${e}.cu`));
    const owner = (f: string) => engines.some((e) => f === `${e}.cu` || f.startsWith(`${e}_`));
    expect(top.filter((e) => e.isFile() && !owner(e.name)).map((e) => e.name)).toEqual([]);
    // Only cuda/common/ is included across engines: an engine folder's header is its engine's alone.
    for (const f of cudaSources) {
      for (const m of code(read(f)).matchAll(/#\s*include\s*"([^"]+)"/g)) {
        const target = path.normalize(path.join(path.dirname(f), m[1]));
        const dir = path.relative('cuda', path.dirname(target)).split(path.sep)[0];
        if (!target.startsWith(`cuda${path.sep}`) || dir === '' || dir === 'common') continue;
        expect(f.startsWith(path.join('cuda', dir)), `${f} includes ${target}`).toBe(true);
      }
    }
  });

  // The cuda/ files a file includes (quoted includes that resolve inside cuda/).
  const cudaIncludes = (f: string) =>
    [...code(read(f)).matchAll(/#\s*include\s*"([^"]+)"/g)]
      .map((m) => path.normalize(path.join(path.dirname(f), m[1])))
      .filter((t) => t.startsWith(`cuda${path.sep}`));
  const isCommon = (t: string) => t.startsWith(path.join('cuda', 'common') + path.sep) || path.basename(t) === 'common.cuh';

  it("each engine folder is a star: a family header includes only cuda/common/ and its engine's common.cuh; the plan (or the engine's .cu) includes the families", () => {
    const folders = engines.filter((e) => cudaSources.some((f) => f.startsWith(path.join('cuda', e) + path.sep)));
    expect(folders).toEqual(expect.arrayContaining(['flyhash', 'hamming']));
    for (const e of folders) {
      const dir = path.join('cuda', e);
      const own = cudaSources.filter((f) => path.dirname(f) === dir);
      const ownCommon = path.join(dir, 'common.cuh');
      expect(own, e).toContain(ownCommon);
      for (const t of cudaIncludes(ownCommon))
        expect(t.startsWith(path.join('cuda', 'common') + path.sep), `${ownCommon} includes ${t}`).toBe(true);
      const families = own.filter((f) => !['common.cuh', 'plan.cuh'].includes(path.basename(f)));
      expect(families.length, e).toBeGreaterThan(1);
      for (const f of families) {
        const bad = cudaIncludes(f).filter((t) => t !== ownCommon && !t.startsWith(path.join('cuda', 'common') + path.sep));
        expect(bad, `${f} includes another family`).toEqual([]);
      }
      // Every family is reached from the engine's plan, or from cuda/<engine>.cu where it has none.
      const plan = own.includes(path.join(dir, 'plan.cuh')) ? path.join(dir, 'plan.cuh') : path.join('cuda', `${e}.cu`);
      expect(cudaIncludes(plan).sort(), plan).toEqual(expect.arrayContaining(families));
    }
  });

  it("no cuda/ file outside cuda/common/ (or an engine folder's common.cuh) is included by two files", () => {
    const includers = new Map<string, string[]>();
    for (const f of cudaSources) for (const t of cudaIncludes(f)) includers.set(t, [...(includers.get(t) ?? []), f]);
    expect(includers.size).toBeGreaterThan(5);
    const shared = [...includers].filter(([t, by]) => !isCommon(t) && by.length > 1).map(([t, by]) => `${t} <- ${by.join(', ')}`);
    expect(shared).toEqual([]);
  });

  it('glue files are named <engine>_napi.cc, and only they include napi.h among the engines', () => {
    for (const e of engines) {
      expect(nativeSources, e).toContain(path.join('native', `${e}_napi.cc`));
      expect(nativeSources, e).not.toContain(path.join('native', `${e}.cc`));
      const backend = path.join('native', `${e}_cpu.cc`);
      if (nativeSources.includes(backend))
        expect(hits([backend, path.join('native', `${e}.h`)], /#\s*include\s*[<"]napi\.h[>"]/), e).toEqual([]);
    }
  });

  it('every native file that speaks N-API is named <thing>_napi.cc (beside addon.cc, the module entry, and napi_util.cc, its helpers)', () => {
    const napiHeader = /#\s*include\s*[<"](napi\.h|napi_util\.h|owned\.h|\w*_napi\w*\.h)[>"]/;
    const glue = nativeSources.filter(
      (f) => f.endsWith('.cc') && (hits([f], napiHeader).length > 0 || hits([f], /CUSIM_REGISTER\s*\(/).length > 0),
    );
    expect(glue.length).toBeGreaterThanOrEqual(15);
    const allowed = (f: string) => /_napi(_\w+)?\.cc$/.test(f) || ['addon.cc', 'napi_util.cc'].includes(path.basename(f));
    expect(glue.filter((f) => !allowed(f))).toEqual([]);
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

  it('lib/ has no import cycle: native-types.ts names only the leaf types.ts, and engines import from both', () => {
    const graph = libImports();
    // The checker sees real edges: addon.ts -> native-types.ts -> types.ts.
    expect(graph.get(path.join('lib', 'addon.ts'))).toContain(path.join('lib', 'native-types.ts'));
    expect(graph.get(path.join('lib', 'native-types.ts'))).toEqual([path.join('lib', 'types.ts')]);
    expect(graph.get(path.join('lib', 'types.ts'))).toEqual([]);
    // It finds a cycle where there is one.
    expect(
      importCycles(
        new Map([
          ['a', ['b']],
          ['b', ['c']],
          ['c', ['a']],
          ['d', ['a']],
        ]),
      ),
    ).toEqual([['a', 'b', 'c']]);
    expect(importCycles(graph)).toEqual([]);
  });

  it('kernel files stay readable: no cuda/ file over 900 lines', () => {
    const long = cudaSources.map((f) => [f, read(f).split('\n').length] as const).filter(([, n]) => n > 900);
    expect(long).toEqual([]);
  });
});
