// Rows of a CSR matrix written to a file: what a dedup keeps of its token
// sets past its memory budget (lib/dedup/band-index.ts). Verification needs
// only the rows of candidate pairs, a small share, so the row offsets stay in
// memory and each needed row is read back with one pread; the file is
// unlinked as soon as it is made, so nothing outlives the process. Linux and
// other POSIX hosts only (the binaries ship for Linux).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "common.h"

namespace cusim {

class RowFile {
 public:
  // An unnamed file in `dir` (O_TMPFILE, or a unique name unlinked at once).
  RowFile(const std::string& dir, bool values);
  ~RowFile();
  RowFile(const RowFile&) = delete;
  RowFile& operator=(const RowFile&) = delete;

  // Appends m's rows (columns, and weights when the file keeps them; a
  // missing weight is 1). Calls are serialized.
  void Append(const CsrView& m);

  uint64_t rows() const;
  uint64_t bytes() const;
  bool values() const { return values_; }
  uint32_t Length(uint64_t r) const;
  // Row r's columns into *idx and, when kept, its weights into *val.
  void Read(uint64_t r, std::vector<uint32_t>* idx, std::vector<float>* val) const;

 private:
  struct Block {
    uint64_t firstRow = 0, offset = 0;  // byte offset of the block's columns (weights follow them)
    std::vector<uint32_t> indptr;       // rows + 1, from 0
  };
  const Block& BlockOf(uint64_t r) const;
  int fd_ = -1;
  bool values_;
  mutable std::mutex mu_;
  std::vector<Block> blocks_;
  std::vector<uint64_t> firstRows_;
  uint64_t rows_ = 0, end_ = 0;
};

}  // namespace cusim
