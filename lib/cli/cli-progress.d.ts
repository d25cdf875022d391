// The slice of cli-progress (which ships no types) that the CLI uses.
declare module 'cli-progress' {
  interface BarOptions {
    format?: string;
    stream?: NodeJS.WritableStream;
    hideCursor?: boolean;
    clearOnComplete?: boolean;
    etaBuffer?: number;
    fps?: number;
  }
  export class SingleBar {
    constructor(options: BarOptions, preset?: unknown);
    start(total: number, value: number, payload?: Record<string, unknown>): void;
    update(value: number, payload?: Record<string, unknown>): void;
    setTotal(total: number): void;
    stop(): void;
  }
  export const Presets: { shades_classic: unknown; legacy: unknown; rect: unknown };
}
