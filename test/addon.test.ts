// Loading the native addon: which binary is chosen, and what the error says
// when none loads (the loader runs on injected hosts and file systems), and
// the CUDA support decisions devices() makes, on injected driver versions
// and compute capabilities.
import { describe, expect, it } from 'vitest';
import { addonError, loadAddon, platformPackage, type Host, type LoaderEnv } from '../lib/addon.js';
import { native } from '../lib/addon.js';
import type { Addon } from '../lib/native-types.js';

const x64: Host = { platform: 'linux', arch: 'x64', libc: 'glibc', glibcVersion: '2.36' };
const root = '/app/node_modules/cusim';
const local = `${root}/build/Release/cusim.node`;
const pkgFile = '/app/node_modules/cusim-linux-x64-gnu/cusim.node';

function env(over: Partial<LoaderEnv> & { files?: Record<string, () => object> }): LoaderEnv {
  const files = over.files ?? {};
  return {
    host: x64,
    root,
    version: '1.2.3',
    exists: (f) => f in files,
    resolve: (r) => (r === 'cusim-linux-x64-gnu/cusim.node' && pkgFile in files ? pkgFile : undefined),
    check: () => undefined,
    load: (f) => {
      if (!(f in files)) throw new Error(`Cannot find module '${f}'`);
      return files[f]() as Addon;
    },
    ...over,
  };
}

function thrown(fn: () => unknown): Error & { code: string } {
  try {
    fn();
  } catch (e) {
    return e as Error & { code: string };
  }
  throw new Error('expected a throw');
}

describe('addon loader', () => {
  it('names the platform package for Linux glibc x64 and arm64 only', () => {
    expect(platformPackage(x64)).toBe('cusim-linux-x64-gnu');
    expect(platformPackage({ ...x64, arch: 'arm64' })).toBe('cusim-linux-arm64-gnu');
    expect(platformPackage({ ...x64, libc: 'musl', glibcVersion: null })).toBeUndefined();
    expect(platformPackage({ platform: 'darwin', arch: 'arm64', libc: null, glibcVersion: null })).toBeUndefined();
    expect(platformPackage({ ...x64, arch: 'ppc64' })).toBeUndefined();
  });

  it('prefers a local build, else the platform package', () => {
    const both = { [local]: () => ({ from: 'local' }), [pkgFile]: () => ({ from: 'package' }) };
    expect(loadAddon(env({ files: both }))).toEqual({ from: 'local' });
    expect(loadAddon(env({ files: { [pkgFile]: () => ({ from: 'package' }) } }))).toEqual({ from: 'package' });
    // A local build that fails to load does not hide a working platform package.
    const broken = {
      [local]: () => {
        throw new Error('invalid ELF header');
      },
      [pkgFile]: () => ({ from: 'package' }),
    };
    expect(loadAddon(env({ files: broken }))).toEqual({ from: 'package' });
  });

  it('no binary for this host: says so and lists the package to install and the source build', () => {
    const e = thrown(() => loadAddon(env({})));
    expect(e.code).toBe('CUSIM_ADDON_NOT_FOUND');
    expect(e.message).toMatch(/^No native addon for linux-x64 \(glibc 2\.36\): the platform package cusim-linux-x64-gnu is not installed/);
    expect(e.message).not.toMatch(/^cusim:/);
    expect(e.message).toContain(`(no ${local})`);
    expect(e.message).toContain('- Install the prebuilt binary: npm install cusim-linux-x64-gnu@1.2.3');
    expect(e.message).toContain('- Build from source');
    expect(e.message).toContain('npm install-scripts approve cusim && npm rebuild cusim');
  });

  it('a host with no published binary gets the source build only, and the hosts that have one', () => {
    const mac: Host = { platform: 'darwin', arch: 'arm64', libc: null, glibcVersion: null };
    const e = thrown(() => loadAddon(env({ host: mac })));
    expect(e.code).toBe('CUSIM_ADDON_NOT_FOUND');
    expect(e.message).toMatch(
      /^No native addon for darwin-arm64: cusim publishes binaries for linux-x64 and linux-arm64 with glibc >= 2\.28 only/,
    );
    expect(e.message).not.toContain('npm install cusim-linux');
    expect(e.message).toContain('npm install-scripts approve cusim && npm rebuild cusim');
    const musl = thrown(() => loadAddon(env({ host: { ...x64, libc: 'musl', glibcVersion: null } })));
    expect(musl.message).toMatch(/^No native addon for linux-x64 \(musl\)/);
  });

  it("a binary that matched but failed: the loader's message, the glibc floor when that is the cause, and fixes", () => {
    const old: Host = { ...x64, glibcVersion: '2.17' };
    const glibcError = "/lib64/libc.so.6: version `GLIBC_2.18' not found (required by /app/node_modules/cusim-linux-x64-gnu/cusim.node)";
    const e = thrown(() =>
      loadAddon(
        env({
          host: old,
          files: {
            [pkgFile]: () => {
              throw new Error(glibcError);
            },
          },
        }),
      ),
    );
    expect(e.code).toBe('CUSIM_ADDON_LOAD_FAILED');
    expect(e.message).toMatch(/^The native addon for linux-x64 \(glibc 2\.17\) was found but failed to load:/);
    expect(e.message).toContain(`- platform package cusim-linux-x64-gnu (${pkgFile}): ${glibcError}`);
    expect(e.message).toContain("This host's glibc 2.17 is older than 2.28");
    expect(e.message).toContain('npm install cusim-linux-x64-gnu@1.2.3');
    expect(e.message).toContain('npm install-scripts approve cusim && npm rebuild cusim');
    expect((e as Error).cause).toBeInstanceOf(Error);
  });

  it('a damaged platform binary is not loaded: CUSIM_ADDON_DAMAGED, with the commands that reinstall it', () => {
    const loaded: string[] = [];
    const files = {
      [pkgFile]: () => {
        loaded.push(pkgFile);
        return { from: 'package' };
      },
    };
    const check = (f: string): string | undefined => (f === pkgFile ? 'it is 4096 bytes, but the package recorded 12000000' : undefined);
    const e = thrown(() => loadAddon(env({ files, check })));
    expect(loaded).toEqual([]);
    expect(e.code).toBe('CUSIM_ADDON_DAMAGED');
    expect(e.message).toMatch(/^The native addon for linux-x64 \(glibc 2\.36\) is damaged, so it was not loaded:/);
    expect(e.message).toContain(`- platform package cusim-linux-x64-gnu (${pkgFile}): it is 4096 bytes, but the package recorded 12000000`);
    expect(e.message).toContain('- Reinstall cusim-linux-x64-gnu: cd /app && rm -rf node_modules/cusim-linux-x64-gnu && npm install');
    expect(e.message).not.toContain('npm rebuild');
    // A local build is not checked (it has no record) and still comes first.
    expect(loadAddon(env({ files: { ...files, [local]: () => ({ from: 'local' }) }, check: () => 'damaged' }))).toEqual({ from: 'local' });
    // Outside a node_modules folder of its own, the folder itself is named.
    const odd = '/store/cusim-linux-x64-gnu@1.2.3/cusim.node';
    const e2 = thrown(() => loadAddon(env({ resolve: () => odd, files: { [odd]: () => ({}) }, check: () => 'damaged' })));
    expect(e2.message).toContain(
      '- Reinstall cusim-linux-x64-gnu: rm -rf /store/cusim-linux-x64-gnu@1.2.3 && npm install (in your project)',
    );
  });

  it("in a checkout, the fix is the checkout's own build", () => {
    const e = thrown(() => loadAddon(env({ root: '/src/cusim' })));
    expect(e.message).toMatch(
      /^No native addon for linux-x64 \(glibc 2\.36\): this checkout has no build \(\/src\/cusim\/build\/Release\/cusim\.node\)/,
    );
    expect(e.message).toContain('- Build it: npm run build');
    expect(e.message).not.toContain('npm rebuild cusim');
    const failed = addonError(env({ root: '/src/cusim' }), [
      { what: 'local build', file: '/src/cusim/build/Release/cusim.node', error: new Error('bad') },
    ]);
    expect(failed.message).toContain('- Rebuild it: npm run build');
  });
});

describe('CUDA support decisions (injected versions)', () => {
  const support = (
    driver: number,
    runtime: number,
    cc: [number, number] = [9, 0],
    archs = '75-real,80-real,86-real,89-real,90-real,100-real,120',
    release = '',
  ) =>
    native().cudaSupport(driver, runtime, release, cc[0], cc[1], archs) as {
      reason?: string;
      archSupported: boolean;
      tensorCores: boolean;
    };

  it('a driver older than the runtime is named with both versions and the fix; same or newer major is fine', () => {
    const r = support(12080, 13000, [9, 0], '90', '570.124.06');
    expect(r.reason).toMatch(/^driver too old: /);
    expect(r.reason).toContain('570.124.06');
    expect(r.reason).toContain('CUDA 12.8');
    expect(r.reason).toContain('CUDA 13.0');
    expect(r.reason).toContain('R580');
    expect(r.reason).toMatch(/Update the driver/);
    expect(r.reason).toMatch(/runs on the CPU/);
    expect(support(0, 13000).reason).toMatch(/^no driver: .*R580/);
    expect(support(13000, 13000).reason).toBeUndefined();
    expect(support(13020, 13000).reason).toBeUndefined();
    // CUDA minor version compatibility: a 12.4 runtime on a 12.2 driver runs.
    expect(support(12020, 12040).reason).toBeUndefined();
    expect(support(11080, 12000).reason).toMatch(/R525/);
  });

  it('kernels run where SASS of the same major and an older minor, or older PTX, exists', () => {
    const cc = (major: number, minor: number, archs?: string): boolean => support(13000, 13000, [major, minor], archs).archSupported;
    expect(cc(7, 5)).toBe(true);
    expect(cc(7, 0)).toBe(false); // Volta: CUDA 13 builds nothing for it
    expect(cc(8, 7)).toBe(true); // Orin: sm_86 SASS
    expect(cc(10, 3)).toBe(true); // sm_100 SASS
    expect(cc(12, 1)).toBe(true);
    expect(cc(11, 0)).toBe(false); // SASS is per major; PTX 120 is newer
    expect(cc(13, 0)).toBe(true); // PTX 120, compiled by the driver
    expect(cc(8, 0, '86-real')).toBe(false);
    expect(cc(8, 9, '86-real')).toBe(true);
    expect(cc(9, 0, '90a-real')).toBe(true);
    expect(cc(10, 0, '90a-real;90a-virtual')).toBe(false);
    expect(cc(10, 0, '90')).toBe(true);
    expect(cc(9, 0, '')).toBe(false);
  });

  it('tensor-core kernel families from compute capability 8.0', () => {
    expect(support(13000, 13000, [7, 5]).tensorCores).toBe(false);
    expect(support(13000, 13000, [8, 0]).tensorCores).toBe(true);
    expect(support(13000, 13000, [12, 0]).tensorCores).toBe(true);
  });
});
