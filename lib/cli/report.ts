// The dedup report: groups with members and pair similarities, packages
// sharing near-duplicate files, and the three renderings (table, JSON, CSV).
// The JSON shape is the documented, versioned contract (schema
// 'cusim.dedup/1'); add fields only, never rename or remove them.
import { groupMembers } from '../lsh.js';
import path from 'node:path';
import type { Skip } from './sources.js';
import { grouped, packageLabel, packageOf } from './sources.js';
import { csvField, escapeText, safeJson } from './escape.js';

export interface DedupResultLike {
  group: Uint32Array;
  count: number;
  pairs: { left: Uint32Array; right: Uint32Array; similarity: Float32Array | Float64Array };
}

export interface ReportMember {
  id: string;
  /** Highest verified similarity between this member and another of its group. */
  similarity: number;
  /** node_modules scans: the installed package holding the file, as name@version. */
  package?: string;
  /** With --show-text N: the member's first N characters. */
  text?: string;
}

export interface ReportGroup {
  id: number;
  size: number;
  members: ReportMember[];
  pairs: { left: string; right: string; similarity: number }[];
}

export interface ReportPackagePair {
  left: string;
  right: string;
  leftName: string;
  rightName: string;
  /** Groups that hold a file of each package. */
  sharedGroups: number;
  leftFiles: number;
  rightFiles: number;
}

export interface DedupReport {
  schema: 'cusim.dedup/1';
  backend: string;
  gpus: string[];
  /** method: the signature family, 'classic' (binary features: set Jaccard) or 'weighted'. */
  options: { threshold: number; samples: number; seed: number; mode: string; weighting: string; method: string };
  input: { source: string; documents: number; featurized: number; tooSmall: number; skipped: Skip[] };
  /** The banding used and its expected recall: P(candidate) by similarity. */
  lsh: { bands: number; rows: number; samples: number; recall: { similarity: number; probability: number }[] };
  groups: ReportGroup[];
  packages: ReportPackagePair[];
  /** node_modules scans: groups left out because all their members lie in one package (--within-package keeps them). */
  withinPackageGroups?: number;
  /** Wall time per stage, in order (scale-out jobs: the workers' times summed over ranges, then the report's). */
  stages: { stage: string; ms: number }[];
  elapsedMs: number;
  /** Scale-out jobs over ranges: the workers that did them and their rate (documents per second of worker time). */
  workers?: { count: number; documents: number; docsPerSecond: number };
  /** Scale-out jobs over ranges: what the job holds in Redis. */
  redis?: { keys: number; bytes: number; measured: string };
}

const round = (x: number): number => Math.round(x * 1e6) / 1e6;

/** Groups in a stable order: by their first member's position in the input. */
export function buildGroups(ids: readonly string[] | ((row: number) => string), r: DedupResultLike): ReportGroup[] {
  const NONE = 0xffffffff;
  const members = groupMembers(r.group);
  // Grouped rows numbered in group order (slot), so that their names (each
  // looked up once: a reader may keep ids as byte offsets until now), best
  // similarities and groups sit in arrays of the grouped rows, not of all rows.
  const nameOf = typeof ids === 'function' ? ids : (row: number) => ids[row];
  const slotOf = new Int32Array(r.group.length); // slot + 1; 0: not grouped
  const start = new Int32Array(members.length + 1);
  for (let k = 0; k < members.length; k++) start[k + 1] = start[k] + members[k].length;
  const names: string[] = new Array<string>(start[members.length]);
  const groupOf = new Int32Array(start[members.length]);
  for (let k = 0; k < members.length; k++) {
    const m = members[k];
    for (let j = 0; j < m.length; j++) {
      slotOf[m[j]] = start[k] + j + 1;
      names[start[k] + j] = nameOf(m[j]);
      groupOf[start[k] + j] = k;
    }
  }
  const best = new Float64Array(start[members.length]);
  const pairsOf: { l: number; r: number; s: number }[][] = members.map(() => []);
  for (let i = 0; i < r.pairs.left.length; i++) {
    const l = r.pairs.left[i];
    const rr = r.pairs.right[i];
    const s = r.pairs.similarity[i];
    const g = r.group[l];
    const a = slotOf[l] - 1;
    const b = slotOf[rr] - 1;
    if (g === NONE || g !== r.group[rr] || a < 0 || b < 0) continue;
    best[a] = Math.max(best[a], s);
    best[b] = Math.max(best[b], s);
    pairsOf[groupOf[a]].push(l < rr ? { l: a, r: b, s } : { l: b, r: a, s });
  }
  // Slots follow rows within a group, so ordering by slot is ordering by row.
  return members.map((m, id) => ({
    id,
    size: m.length,
    members: Array.from(m, (_, j) => ({ id: names[start[id] + j], similarity: round(best[start[id] + j]) })),
    pairs: pairsOf[id].sort((a, b) => a.l - b.l || a.r - b.r).map((p) => ({ left: names[p.l], right: names[p.r], similarity: round(p.s) })),
  }));
}

/**
 * The size of the featurized input, in words: a vocabulary's columns are
 * features; hashed columns (token hashes, --hash-bits) are a hash space, not
 * a count of anything.
 */
export function featureLine(m: { rows: number; cols: number; nnz: number }, hashBits: number | undefined): string {
  const n = grouped;
  const cols =
    m.cols === 2 ** 32
      ? '32-bit token hashes'
      : hashBits !== undefined
        ? `features hashed into 2^${hashBits} columns`
        : `a vocabulary of ${n(m.cols)} features`;
  return `${n(m.rows)} documents, ${n(m.nnz)} nonzeros (${cols})`;
}

/** "name@version" of the package holding each file (node_modules scans), read once per package. */
function packageLabels(): (id: string) => string | undefined {
  const labels = new Map<string, string>();
  return (id) => {
    const dir = packageOf(path.resolve(id));
    if (!dir) return undefined;
    let l = labels.get(dir);
    if (l === undefined) labels.set(dir, (l = packageLabel(dir)));
    return l;
  };
}

/**
 * node_modules scans: each member named with its package, and, unless
 * `keepWithin`, the groups whose members all lie in one package (src and
 * dist, CJS and ESM builds, TypeScript's lib files) left out and counted;
 * the groups kept are numbered afresh.
 */
export function acrossPackages(groups: ReportGroup[], keepWithin: boolean): { groups: ReportGroup[]; within: number } {
  const label = packageLabels();
  const dirs = (g: ReportGroup): Set<string | undefined> => new Set(g.members.map((m) => packageOf(path.resolve(m.id))));
  const kept = keepWithin ? groups : groups.filter((g) => dirs(g).size > 1);
  return {
    groups: kept.map((g, id) => ({ ...g, id, members: g.members.map((m) => ({ ...m, package: label(m.id) })) })),
    within: groups.length - kept.length,
  };
}

/** Package pairs whose files fall into the same groups (node_modules scans). */
export function buildPackagePairs(groups: ReportGroup[], files: readonly string[], root: string): ReportPackagePair[] {
  const abs = (id: string): string => path.resolve(id);
  const fileCount = new Map<string, number>();
  for (const f of files) {
    const p = packageOf(abs(f));
    if (p) fileCount.set(p, (fileCount.get(p) ?? 0) + 1);
  }
  const shared = new Map<string, number>();
  for (const g of groups) {
    const pk = [...new Set(g.members.map((m) => packageOf(abs(m.id))).filter((p): p is string => !!p))].sort();
    for (let i = 0; i < pk.length; i++) {
      for (let j = i + 1; j < pk.length; j++) {
        const key = `${pk[i]}\n${pk[j]}`;
        shared.set(key, (shared.get(key) ?? 0) + 1);
      }
    }
  }
  const rel = (p: string): string => path.relative(root, p) || '.';
  return [...shared.entries()]
    .map(([key, n]) => {
      const [l, r] = key.split('\n');
      return {
        left: rel(l),
        right: rel(r),
        leftName: packageLabel(l),
        rightName: packageLabel(r),
        sharedGroups: n,
        leftFiles: fileCount.get(l) ?? 0,
        rightFiles: fileCount.get(r) ?? 0,
      };
    })
    .sort(
      (a, b) =>
        b.sharedGroups / Math.min(b.leftFiles, b.rightFiles) - a.sharedGroups / Math.min(a.leftFiles, a.rightFiles) ||
        b.sharedGroups - a.sharedGroups ||
        (a.left < b.left ? -1 : 1),
    );
}

/** One row per group member: group,size,id,similarity (ids escaped as for tables). */
export function* renderCsv(r: DedupReport): Generator<string> {
  yield 'group,size,id,similarity\n';
  for (const g of r.groups) {
    let out = '';
    for (const m of g.members) out += [g.id, g.size, m.id, m.similarity].map(csvField).join(',') + '\n';
    yield out;
  }
}

/**
 * The report as JSON, a group at a time (a large report is never one
 * string); parses to the same value as JSON.stringify(report).
 */
const JSON_SLICE = 512;
/** How JSON.stringify(x, null, 2) of a non-empty [[...]] begins and ends. */
const NESTED = '[\n  [\n';
const NESTED_END = '\n  ]\n]';

export function* renderJson(r: DedupReport): Generator<string> {
  const entries = Object.entries(r);
  yield '{\n';
  for (let i = 0; i < entries.length; i++) {
    const [k, v] = entries[i];
    const comma = i < entries.length - 1 ? ',' : '';
    if (Array.isArray(v) && v.length > 0) {
      yield `  ${JSON.stringify(k)}: [\n`;
      // Elements a slice at a time: the slice nested in one more array, less
      // the two brackets' lines each side, is its elements at the depth (and
      // so the indent) the whole report's JSON writes them, with no pass to
      // re-indent (one stringify per slice, not per element: 117K groups at
      // 10M documents).
      for (let j = 0; j < v.length; j += JSON_SLICE) {
        const e = Math.min(v.length, j + JSON_SLICE);
        yield safeJson([v.slice(j, e)], 2).slice(NESTED.length, -NESTED_END.length) + (e < v.length ? ',\n' : '\n');
      }
      yield `  ]${comma}\n`;
    } else {
      yield `  ${JSON.stringify(k)}: ${safeJson(v, 2).replace(/\n/g, '\n  ')}${comma}\n`;
    }
  }
  yield '}\n';
}

/** The lowest verified similarity of a group's pairs. */
function lowest(g: ReportGroup): number {
  return g.pairs.length ? g.pairs.reduce((a, p) => Math.min(a, p.similarity), Infinity) : 0;
}

/** The table's order: the largest groups first, then the closest; ties in input order. */
export function tableOrder(groups: readonly ReportGroup[]): ReportGroup[] {
  return [...groups].sort((a, b) => b.size - a.size || lowest(b) - lowest(a) || a.id - b.id);
}

/** One line of a member's text: whitespace runs as one space, control characters escaped. */
function textLine(text: string): string {
  return escapeText(text.replace(/\s+/g, ' ').trim());
}

/** "a and b share 3 near-duplicate files", with the files each holds and where they are. */
function packageSentence(p: ReportPackagePair): string {
  const files = p.sharedGroups === 1 ? 'a near-duplicate file' : `${p.sharedGroups} near-duplicate files`;
  return (
    `${escapeText(p.leftName)} and ${escapeText(p.rightName)} share ${files} ` +
    `(of ${p.leftFiles} and ${p.rightFiles} scanned; ${escapeText(p.left)}, ${escapeText(p.right)})`
  );
}

/**
 * The members a table row shows: all, or, collapsing copies inside one
 * package, the first of each package with how many more it holds.
 */
function shownMembers(g: ReportGroup, collapse: boolean): { m: ReportMember; more: number }[] {
  if (!collapse) return g.members.map((m) => ({ m, more: 0 }));
  const byPackage = new Map<string | undefined, { m: ReportMember; more: number }>();
  const rows: { m: ReportMember; more: number }[] = [];
  for (const m of g.members) {
    const row = m.package === undefined ? undefined : byPackage.get(m.package);
    if (row) row.more++;
    else {
      const r = { m, more: 0 };
      rows.push(r);
      if (m.package !== undefined) byPackage.set(m.package, r);
    }
  }
  return rows;
}

/**
 * The report as a table. `collapse` (node_modules scans without
 * --within-package): a group's members inside one package are one row.
 */
export function* renderTable(r: DedupReport, limit: number, o: { collapse?: boolean } = {}): Generator<string> {
  const ordered = tableOrder(r.groups);
  const shown = ordered.slice(0, limit);
  for (let i = 0; i < shown.length; i++) {
    const g = shown[i];
    let out = `group ${i + 1}: ${g.size} near-duplicates (similarity ≥ ${lowest(g).toFixed(3)})\n`;
    for (const { m, more } of shownMembers(g, !!o.collapse)) {
      const others = more > 0 ? ` (and ${more} more in this package)` : '';
      out += `  ${m.similarity.toFixed(3)}  ${m.package ? `${escapeText(m.package)}  ` : ''}${escapeText(m.id)}${others}\n`;
      if (m.text !== undefined) out += `         ${textLine(m.text)}\n`;
    }
    yield out;
  }
  const lines: string[] = [];
  if (r.groups.length > shown.length) {
    lines.push(`… ${r.groups.length - shown.length} more groups (use --limit 0 for all, or --json)`);
  }
  if (r.withinPackageGroups) {
    lines.push(
      `${r.withinPackageGroups} more group(s) lie inside single packages (copies such as src and dist builds; --within-package shows them)`,
    );
  }
  // Packages that are largely copies of each other; a pair that shares one
  // boilerplate file among many (a licence header, a polyfill) is noise here.
  const copies = r.packages.filter((p) => 2 * p.sharedGroups >= Math.min(p.leftFiles, p.rightFiles));
  if (copies.length) {
    lines.push('', 'packages sharing near-duplicate files:');
    for (const p of copies.slice(0, limit)) lines.push(`  ${packageSentence(p)}`);
    if (copies.length > limit) lines.push(`  … ${copies.length - limit} more package pairs`);
  }
  if (r.packages.length > copies.length) {
    lines.push(`${r.packages.length - copies.length} package pair(s) share less than half their files (--json lists them)`);
  }
  const dups = r.groups.reduce((s, g) => s + g.size, 0);
  lines.push(
    '',
    `${r.input.featurized} documents, ${r.groups.length} groups holding ${dups} near-duplicates ` +
      `(threshold ${r.options.threshold}, ${r.options.samples} samples, mode ${r.options.mode}) in ${(r.elapsedMs / 1000).toFixed(2)} s`,
  );
  yield lines.join('\n') + '\n';
}
