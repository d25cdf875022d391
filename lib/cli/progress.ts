// A progress bar with rate and ETA on a TTY; silent when stderr is a pipe or
// a file, so logs and --json consumers see no control characters.
import cliProgress from 'cli-progress';

export interface Progress {
  start(total: number, label: string): void;
  tick(n?: number): void;
  stop(): void;
}

const silent: Progress = { start() {}, tick() {}, stop() {} };

export function progress(enabled: boolean): Progress {
  if (!enabled || !process.stderr.isTTY) return silent;
  let bar: cliProgress.SingleBar | undefined;
  let value = 0;
  let t0 = 0;
  let last = 0;
  return {
    start(total, label) {
      bar = new cliProgress.SingleBar(
        {
          format: `${label} |{bar}| {percentage}% | {value}/{total} | {rate}/s | ETA {eta_formatted}`,
          stream: process.stderr,
          hideCursor: true,
          clearOnComplete: true,
          fps: 10,
        },
        cliProgress.Presets.shades_classic,
      );
      value = 0;
      t0 = performance.now();
      bar.start(total, 0, { rate: '0' });
    },
    tick(n = 1) {
      value += n;
      const now = performance.now();
      if (now - last < 50) return;
      last = now;
      bar?.update(value, { rate: Math.round(value / Math.max(1e-3, (now - t0) / 1000)).toLocaleString('en-US') });
    },
    stop() {
      bar?.update(value);
      bar?.stop();
      bar = undefined;
    },
  };
}
