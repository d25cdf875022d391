// Whole reads and writes at a file offset: pread/pwrite looped over EINTR and
// short counts, at most 1 GiB per call. Shared by the save files
// (persist_io.cc) and dedup's spilled rows (row_file.cc). POSIX.
#pragma once

#include <cstdint>

namespace cusim {

// 0 when all `bytes` were read; -1 when the file ended first; else errno.
int PreadAll(int fd, uint64_t offset, void* dst, uint64_t bytes);
// 0 when all `bytes` were written; else errno.
int PwriteAll(int fd, uint64_t offset, const void* src, uint64_t bytes);

}  // namespace cusim
