// The dedup report: groups with members and pair similarities, packages
// sharing near-duplicate files, and the three renderings (table, JSON, CSV).
// The JSON shape is the documented, versioned contract (schema
// 'cusim.dedup/1'); add fields only, never rename or remove them.
import { groupMembers } from '../lsh.js';
import path from 'node:path';
import type { Skip } from './sources.js';
import { packageLabel, packageOf } from './sources.js';
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
export function buildGroups(ids: readonly string[], r: DedupResultLike): ReportGroup[] {
  const NONE = 0xffffffff;
  const best = new Float64Array(ids.length);
  const pairsOf = new Map<number, { l: number; r: number; s: number }[]>();
  for (let i = 0; i < r.pairs.left.length; i++) {
    const l = r.pairs.left[i];
    const rr = r.pairs.right[i];
    const s = r.pairs.similarity[i];
    const g = r.group[l];
    if (g === NONE || g !== r.group[rr]) continue;
    best[l] = Math.max(best[l], s);
    best[rr] = Math.max(best[rr], s);
    let p = pairsOf.get(g);
    if (!p) pairsOf.set(g, (p = []));
    p.push(l < rr ? { l, r: rr, s } : { l: rr, r: l, s });
  }
  return groupMembers(r.group).map((m, id) => {
    const rows = Array.from(m);
    const g = r.group[rows[0]];
    return {
      id,
      size: rows.length,
      members: rows.map((row) => ({ id: ids[row], similarity: round(best[row]) })),
      pairs: (pairsOf.get(g) ?? [])
        .sort((a, b) => a.l - b.l || a.r - b.r)
        .map((p) => ({ left: ids[p.l], right: ids[p.r], similarity: round(p.s) })),
    };
  });
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
export function* renderJson(r: DedupReport): Generator<string> {
  const entries = Object.entries(r);
  yield '{\n';
  for (let i = 0; i < entries.length; i++) {
    const [k, v] = entries[i];
    const comma = i < entries.length - 1 ? ',' : '';
    if (Array.isArray(v) && v.length > 0) {
      yield `  ${JSON.stringify(k)}: [\n`;
      for (let j = 0; j < v.length; j++) {
        yield '    ' + safeJson(v[j], 2).replace(/\n/g, '\n    ') + (j < v.length - 1 ? ',\n' : '\n');
      }
      yield `  ]${comma}\n`;
    } else {
      yield `  ${JSON.stringify(k)}: ${safeJson(v, 2).replace(/\n/g, '\n  ')}${comma}\n`;
    }
  }
  yield '}\n';
}

export function* renderTable(r: DedupReport, limit: number): Generator<string> {
  const shown = r.groups.slice(0, limit);
  for (const g of shown) {
    const min = g.pairs.length ? g.pairs.reduce((a, p) => Math.min(a, p.similarity), Infinity) : 0;
    let out = `group ${g.id + 1}: ${g.size} near-duplicates (similarity ≥ ${min.toFixed(3)})\n`;
    for (const m of g.members) out += `  ${m.similarity.toFixed(3)}  ${escapeText(m.id)}\n`;
    yield out;
  }
  const lines: string[] = [];
  if (r.groups.length > shown.length) {
    lines.push(`… ${r.groups.length - shown.length} more groups (use --limit 0 for all, or --json)`);
  }
  if (r.packages.length) {
    lines.push('', 'packages sharing near-duplicate files (shared groups / files):');
    for (const p of r.packages.slice(0, limit)) {
      lines.push(
        `  ${p.sharedGroups} / ${p.leftFiles}, ${p.rightFiles}  ${escapeText(p.leftName)} (${escapeText(p.left)})  ~  ${escapeText(p.rightName)} (${escapeText(p.right)})`,
      );
    }
    if (r.packages.length > limit) lines.push(`  … ${r.packages.length - limit} more package pairs`);
  }
  const dups = r.groups.reduce((s, g) => s + g.size, 0);
  lines.push(
    '',
    `${r.input.featurized} documents, ${r.groups.length} groups holding ${dups} near-duplicates ` +
      `(threshold ${r.options.threshold}, ${r.options.samples} samples, mode ${r.options.mode}) in ${(r.elapsedMs / 1000).toFixed(2)} s`,
  );
  yield lines.join('\n') + '\n';
}
