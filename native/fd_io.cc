// fd_io.h.
#include "fd_io.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace cusim {

int PreadAll(int fd, uint64_t offset, void* dst, uint64_t bytes) {
  auto* p = static_cast<uint8_t*>(dst);
  while (bytes > 0) {
    const ssize_t n = pread(fd, p, size_t(std::min<uint64_t>(bytes, uint64_t(1) << 30)), off_t(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return -1;
    p += n, offset += uint64_t(n), bytes -= uint64_t(n);
  }
  return 0;
}

int PwriteAll(int fd, uint64_t offset, const void* src, uint64_t bytes) {
  const auto* p = static_cast<const uint8_t*>(src);
  while (bytes > 0) {
    const ssize_t n = pwrite(fd, p, size_t(std::min<uint64_t>(bytes, uint64_t(1) << 30)), off_t(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    p += n, offset += uint64_t(n), bytes -= uint64_t(n);
  }
  return 0;
}

}  // namespace cusim
