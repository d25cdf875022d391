// Loads the native addon once: a local build (build/Release) if present, else
// the prebuild for this platform, through node-gyp-build like sharp does.
import { constants } from 'node:buffer';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const require = createRequire(import.meta.url);

/** Package root: this file lives in lib/ (sources) or dist/ (compiled). */
export const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

// The addon's surface is untyped at the boundary; each engine module declares
// the slice it calls.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Native = Record<string, any>;

/** Elements one typed array can hold, and bytes Node wraps as external memory (2^32 on Node 20). */
export const MAX_TYPED_LENGTH: number = constants.MAX_LENGTH;

let cached: Native | undefined;
let loadError: Error | undefined;

export function native(): Native {
  if (cached) return cached;
  if (loadError) throw loadError;
  try {
    const load = require('node-gyp-build') as (dir: string) => Native;
    const n = load(process.env.CUSIM_ADDON_DIR ?? packageRoot);
    // Results above this many bytes cannot wrap native memory (see napi_util.h).
    n.setMaxTypedLength?.(MAX_TYPED_LENGTH);
    cached = n;
    return cached;
  } catch (e) {
    const err = new Error(
      `cusim: could not load the native addon (${(e as Error).message}). ` +
        'No prebuild matches this platform and no local build was found. ' +
        'Build from source with `npm install cusim --allow-scripts=cusim` (CPU + CUDA where the toolkit exists) ' +
        'or `npm run build` inside the package.',
      { cause: e },
    );
    (err as Error & { code: string }).code = 'CUSIM_ADDON_NOT_FOUND';
    loadError = err;
    throw err;
  }
}
