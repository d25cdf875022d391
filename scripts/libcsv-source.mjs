// libcsv (LGPL-2.1+), compiled into the addon for the native CSV reader
// (native/records_table.cc), from Debian's source package `libcsv`
// (scripts/debian-source.mjs): its libcsv.c + csv.h and COPYING.LESSER (as
// LICENSE), in build-libcsv/ (git-ignored). The complete source of cusim and
// this script, which fetches libcsv's source, are what let a user relink the
// addon with a modified libcsv, as the LGPL asks.
//
// Never fatal: without apt-get, network or a Debian source for libcsv, it
// says why and exits 0, and the addon builds without the native CSV reader
// (CSV is read by csv-parse in JavaScript).
//
// Usage: node scripts/libcsv-source.mjs [--quiet]
import path from 'node:path';
import { fetchDebianSource, fetchMain, ROOT, sayer } from './debian-source.mjs';

export const LIBCSV_DIR = path.join(ROOT, 'build-libcsv');

/** build-libcsv/ with csv.h, libcsv.c and LICENSE, or throws saying why not. */
export function fetchLibcsv(dir = LIBCSV_DIR) {
  return fetchDebianSource({
    pkg: 'libcsv',
    dir,
    files: { 'csv.h': 'csv.h', 'libcsv.c': 'libcsv.c' },
    license: 'COPYING.LESSER',
    say: sayer('libcsv'),
  });
}

fetchMain(import.meta.url, 'libcsv', fetchLibcsv, 'the native CSV reader');
