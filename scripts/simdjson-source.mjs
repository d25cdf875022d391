// simdjson (Apache-2.0), compiled into the addon for the native JSONL reader
// (native/records_cpu.cc), from Debian's source package (scripts/debian-source.mjs):
// its amalgamated singleheader/simdjson.h + simdjson.cpp and LICENSE, in
// build-simdjson/ (git-ignored).
//
// Never fatal: without apt-get, network or a Debian source for simdjson, it
// says why and exits 0, and the addon builds without the native reader (the
// JavaScript reader is used).
//
// Usage: node scripts/simdjson-source.mjs [--quiet]
import path from 'node:path';
import { fetchDebianSource, fetchMain, ROOT, sayer } from './debian-source.mjs';

export const SIMDJSON_DIR = path.join(ROOT, 'build-simdjson');

/** build-simdjson/ with simdjson.h, simdjson.cpp and LICENSE, or throws saying why not. */
export function fetchSimdjson(dir = SIMDJSON_DIR) {
  return fetchDebianSource({
    pkg: 'simdjson',
    dir,
    files: { 'simdjson.h': 'singleheader/simdjson.h', 'simdjson.cpp': 'singleheader/simdjson.cpp' },
    license: 'LICENSE',
    say: sayer('simdjson'),
  });
}

fetchMain(import.meta.url, 'simdjson', fetchSimdjson, 'the native JSONL reader');
