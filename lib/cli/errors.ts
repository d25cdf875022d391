// CLI errors carry the fix: printed as one line, exit code attached.
import { escapeText } from './escape.js';

export class CliError extends Error {
  constructor(
    message: string,
    readonly fix?: string,
    readonly exitCode = 1,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** Turns an fs error on `path` into a one-line message with a fix. */
export function fsError(e: unknown, rawPath: string): CliError {
  const path = escapeText(rawPath);
  const code = (e as NodeJS.ErrnoException).code;
  if (code === 'ENOENT') return new CliError(`no such file or directory: ${path}`, 'check the path', 1);
  if (code === 'EACCES' || code === 'EPERM') {
    return new CliError(`permission denied: ${path}`, 'make it readable (chmod +r) or leave it out', 1);
  }
  if (code === 'ENOTDIR') return new CliError(`not a directory: ${path}`, 'check the path', 1);
  return new CliError(`cannot read ${path}: ${(e as Error).message}`, 'check the path', 1);
}
