// scripts/simdjson-source.mjs reads the system's apt sources to fetch
// simdjson's Debian source package from the same archives: every enabled
// `deb` entry, in deb822 (.sources) and one-line (.list) form, with its
// keyring, and nothing else (deb-src-only, disabled and commented entries).
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { debStanzas } from '../scripts/debian-source.mjs';

describe('simdjson-source: the deb stanzas of the apt configuration', () => {
  it('reads deb822 and one-line sources, keeps URIs/Suites/Components/Signed-By, skips what is not an enabled deb entry', () => {
    const etc = mkdtempSync(path.join(tmpdir(), 'cusim-apt-'));
    mkdirSync(path.join(etc, 'sources.list.d'));
    writeFileSync(
      path.join(etc, 'sources.list'),
      [
        '# a comment',
        'deb [arch=amd64 signed-by=/usr/share/keyrings/a.gpg] http://mirror.example/debian bookworm main contrib',
        'deb-src http://mirror.example/debian bookworm main',
        '# deb http://commented.example/debian bookworm main',
        'deb http://plain.example/debian bookworm-updates main # trailing comment',
      ].join('\n'),
    );
    writeFileSync(
      path.join(etc, 'sources.list.d', 'debian.sources'),
      [
        'Types: deb deb-src',
        '# http://snapshot.example/archive/debian/20250520T000000Z',
        'URIs: http://deb.example/debian',
        'Suites: bookworm bookworm-updates',
        'Components: main',
        'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg',
        '',
        'Types: deb',
        'URIs: http://off.example/debian',
        'Suites: bookworm',
        'Components: main',
        'Enabled: no',
        '',
        'Types: deb-src',
        'URIs: http://src-only.example/debian',
        'Suites: bookworm',
        'Components: main',
      ].join('\n'),
    );
    writeFileSync(path.join(etc, 'sources.list.d', 'other.list.disabled'), 'deb http://ignored.example/debian bookworm main\n');
    expect(debStanzas(etc)).toEqual([
      { uris: 'http://mirror.example/debian', suites: 'bookworm', components: 'main contrib', signedBy: '/usr/share/keyrings/a.gpg' },
      { uris: 'http://plain.example/debian', suites: 'bookworm-updates', components: 'main', signedBy: undefined },
      {
        uris: 'http://deb.example/debian',
        suites: 'bookworm bookworm-updates',
        components: 'main',
        signedBy: '/usr/share/keyrings/debian-archive-keyring.gpg',
      },
    ]);
  });
});
