// Hidden stand-ins for the glibc symbols newer than 2.28 that GCC 12/13's
// static libstdc++ and glibc 2.36-2.39's headers reach for. Compiled only into the
// shipped binaries, which link against glibc 2.28's symbol set
// (scripts/glibc-stubs.mjs): each definition here satisfies a reference that
// would otherwise need a newer glibc at load time, and stays local to the
// addon. Everything else binds to the versions glibc 2.28 already had.
#include <sys/random.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>

#define CUSIM_HIDDEN __attribute__((visibility("hidden"), used))

extern "C" {

// glibc 2.32. libstdc++ skips atomic reference counting while this is
// nonzero; 0 ("other threads may exist") is always correct, merely never the
// single-threaded shortcut.
CUSIM_HIDDEN char __libc_single_threaded = 0;

// glibc 2.36: std::random_device's default source in GCC 12's libstdc++. getrandom() is
// glibc 2.25 and blocks only until the kernel's pool is first seeded.
CUSIM_HIDDEN uint32_t cusim_arc4random() __asm__("arc4random");
uint32_t cusim_arc4random() {
  uint32_t v = 0;
  for (;;) {
    const ssize_t n = getrandom(&v, sizeof v, 0);
    if (n == ssize_t(sizeof v)) return v;
    if (n < 0 && errno != EINTR) std::abort();  // arc4random cannot fail either
  }
}

// glibc 2.33 (std::basic_file): fstat64 became a real function; before, the
// headers routed it to the versioned __fxstat64, which every later glibc keeps.
int __fxstat64(int ver, int fd, struct stat64* buf);
#if defined(__x86_64__)
constexpr int kStatVer = 1;  // _STAT_VER_LINUX
#elif defined(__aarch64__)
constexpr int kStatVer = 0;  // _STAT_VER (asm-generic layout)
#else
#error "glibc_floor.cc: unknown _STAT_VER for this architecture"
#endif
CUSIM_HIDDEN int cusim_fstat64(int fd, struct stat64* buf) __asm__("fstat64");
int cusim_fstat64(int fd, struct stat64* buf) { return __fxstat64(kStatVer, fd, buf); }

// glibc 2.33 likewise made stat, lstat and fstat real functions; with newer
// headers the references are unversioned and no 2.28 symbol would bind them.
int __xstat(int ver, const char* path, struct stat* buf);
int __lxstat(int ver, const char* path, struct stat* buf);
int __fxstat(int ver, int fd, struct stat* buf);
CUSIM_HIDDEN int cusim_stat(const char* path, struct stat* buf) __asm__("stat");
int cusim_stat(const char* path, struct stat* buf) { return __xstat(kStatVer, path, buf); }
CUSIM_HIDDEN int cusim_lstat(const char* path, struct stat* buf) __asm__("lstat");
int cusim_lstat(const char* path, struct stat* buf) { return __lxstat(kStatVer, path, buf); }
CUSIM_HIDDEN int cusim_fstat(int fd, struct stat* buf) __asm__("fstat");
int cusim_fstat(int fd, struct stat* buf) { return __fxstat(kStatVer, fd, buf); }

// glibc 2.38: with its headers, g++ (_GNU_SOURCE, so C2X_STRTOL) routes
// strtol and friends to C23 variants that also accept "0b" binary prefixes.
// Nothing here parses binary literals; the 2.28-era entry points (which the
// plain names would route back here) keep the pre-C23 behaviour.
long __strtol_internal(const char* s, char** end, int base, int group);
unsigned long __strtoul_internal(const char* s, char** end, int base, int group);
long long __strtoll_internal(const char* s, char** end, int base, int group);
unsigned long long __strtoull_internal(const char* s, char** end, int base, int group);
CUSIM_HIDDEN long cusim_strtol(const char* s, char** end, int base) __asm__("__isoc23_strtol");
long cusim_strtol(const char* s, char** end, int base) { return __strtol_internal(s, end, base, 0); }
CUSIM_HIDDEN unsigned long cusim_strtoul(const char* s, char** end, int base) __asm__("__isoc23_strtoul");
unsigned long cusim_strtoul(const char* s, char** end, int base) { return __strtoul_internal(s, end, base, 0); }
CUSIM_HIDDEN long long cusim_strtoll(const char* s, char** end, int base) __asm__("__isoc23_strtoll");
long long cusim_strtoll(const char* s, char** end, int base) { return __strtoll_internal(s, end, base, 0); }
CUSIM_HIDDEN unsigned long long cusim_strtoull(const char* s, char** end, int base) __asm__("__isoc23_strtoull");
unsigned long long cusim_strtoull(const char* s, char** end, int base) { return __strtoull_internal(s, end, base, 0); }

}  // extern "C"
