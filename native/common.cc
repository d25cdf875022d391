#include "common.h"

#include <cstdio>

namespace cusim {

std::string FormatBytes(uint64_t bytes) {
  char buf[64];
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

void ThrowInvalid(const std::string& msg, const char* kind) { throw Error(kInvalidArgument, msg, kind); }

void ThrowOutOfMemory(const std::string& what, uint64_t asked, uint64_t free_bytes) {
  Error e(kOutOfMemory, what + ": needs " + FormatBytes(asked) + " (" + std::to_string(asked) + " bytes) but only " +
                            FormatBytes(free_bytes) + " is free");
  e.hasBytes = true;
  e.bytesRequested = asked;
  e.bytesFree = free_bytes;
  throw e;
}

}  // namespace cusim
