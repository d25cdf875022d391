// Progress on stderr while a stage runs: a bar with rate and ETA where the
// total is known, counts and rate where it is not (stdin). Silent unless
// stderr is a terminal, and never with --quiet or --no-progress, so logs and
// --json consumers see no control characters.
import cliProgress from 'cli-progress';
import type { OnProgress } from '../progress.js';
import { formatBytes, grouped } from './sources.js';

export interface Progress {
  readonly enabled: boolean;
  /** Starts a stage (ending the one before); `total` undefined: unknown. */
  stage(label: string, total?: number, unit?: string): void;
  update(done: number, total?: number): void;
  tick(n?: number): void;
  /** Ends the current stage and clears its line. */
  stop(): void;
  /** A library onProgress driving the bar; `labels` names the library's stages. */
  listener(labels: Record<string, string>, unit?: Record<string, string>): OnProgress | undefined;
}

const silent: Progress = {
  enabled: false,
  stage() {},
  update() {},
  tick() {},
  stop() {},
  listener: () => undefined,
};

function count(n: number, unit: string): string {
  if (unit === 'bytes') return formatBytes(n);
  return `${grouped(n)}${unit ? ' ' + unit : ''}`;
}

function rate(n: number, seconds: number, unit: string): string {
  const r = n / Math.max(seconds, 1e-3);
  return unit === 'bytes' ? `${formatBytes(r)}/s` : `${grouped(r)}/s`;
}

export function progress(enabled: boolean, stream: NodeJS.WritableStream): Progress {
  if (!enabled || !(stream as { isTTY?: boolean }).isTTY) return silent;
  let bar: cliProgress.SingleBar | undefined;
  let label = '';
  let unit = '';
  let total: number | undefined;
  let done = 0;
  let t0 = 0;
  let last = 0;
  const payload = (): Record<string, unknown> => {
    const s = (performance.now() - t0) / 1000;
    // Our own ETA: cli-progress's is undefined until its buffer fills ("NULL").
    const left = total !== undefined && done > 0 ? ((total - done) * s) / done : undefined;
    return {
      remaining: left === undefined ? '…' : left < 60 ? `${Math.ceil(left)} s` : `${Math.floor(left / 60)} min ${Math.ceil(left % 60)} s`,
      done: total === undefined ? count(done, unit) : `${count(done, unit === 'bytes' ? unit : '')} / ${count(total, unit)}`,
      rate: rate(done, s, unit),
      elapsed: `${s.toFixed(0)} s`,
    };
  };
  const start = (): void => {
    const known = total !== undefined && total > 0;
    bar = new cliProgress.SingleBar(
      {
        // A stage that counts nothing (unit '') shows only its elapsed time.
        format: known
          ? `${label} |{bar}| {percentage}% | {done} | {rate} | ETA {remaining}`
          : unit
            ? `${label} | {done} | {rate} | {elapsed}`
            : `${label} | {elapsed}`,
        stream,
        hideCursor: true,
        clearOnComplete: true,
        fps: 10,
      },
      cliProgress.Presets.shades_classic,
    );
    bar.start(known ? total! : 1, Math.min(done, known ? total! : 0), payload());
  };
  const p: Progress = {
    enabled: true,
    stage(l, t, u = '') {
      p.stop();
      label = l;
      unit = u;
      total = t;
      done = 0;
      t0 = performance.now();
      last = 0;
      start();
    },
    update(d, t) {
      done = d;
      if (t !== undefined && t !== total) {
        // A total learnt mid-stage (or changed): redraw with a bar.
        const was = total;
        total = t;
        if (was === undefined || was === 0) {
          bar?.stop();
          start();
        } else bar?.setTotal(t);
      }
      const now = performance.now();
      if (now - last < 50) return;
      last = now;
      bar?.update(total !== undefined && total > 0 ? Math.min(done, total) : 0, payload());
    },
    tick(n = 1) {
      p.update(done + n);
    },
    stop() {
      if (!bar) return;
      bar.update(total !== undefined && total > 0 ? Math.min(done, total) : 0, payload());
      bar.stop();
      bar = undefined;
    },
    listener(labels, units = {}) {
      let current = '';
      return (e) => {
        if (e.stage !== current) {
          current = e.stage;
          p.stage(labels[e.stage] ?? e.stage, e.total, units[e.stage] ?? '');
        }
        p.update(e.done, e.total);
      };
    },
  };
  return p;
}
