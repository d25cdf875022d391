// RowFile (row_file.h): rows appended and read back at their offsets (fd_io.h).
#include "row_file.h"

#include "fd_io.h"
#include "lsh.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace cusim {
namespace {

[[noreturn]] void Fail(const std::string& what) { ThrowInvalid(what + ": " + std::strerror(errno), "Error"); }

void WriteAll(int fd, const void* p, size_t n, uint64_t at) {
  if (const int e = PwriteAll(fd, at, p, n)) {
    errno = e;
    Fail("cannot write the spilled token sets");
  }
}

void ReadAll(int fd, void* p, size_t n, uint64_t at) {
  if (const int e = PreadAll(fd, at, p, n)) {
    errno = e > 0 ? e : EIO;  // -1: the file ended first
    Fail("cannot read the spilled token sets back");
  }
}

}  // namespace

RowFile::RowFile(const std::string& dir, bool values) : values_(values) {
#ifdef O_TMPFILE
  fd_ = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
  if (fd_ < 0) {
    // No O_TMPFILE (older kernels, some file systems): a unique name, unlinked at once.
    std::string path = dir + "/cusim-rows-XXXXXX";
    fd_ = ::mkostemp(path.data(), O_CLOEXEC);
    if (fd_ < 0)
      ThrowInvalid(
          "cannot make a file for spilled token sets in " + dir + " (" + std::strerror(errno) +
              "): point spill.dir (--spill-dir, default TMPDIR) at a writable directory, or raise spill.afterBytes "
              "(--spill-after)",
          "Error");
    ::unlink(path.c_str());
  }
}

RowFile::~RowFile() {
  if (fd_ >= 0) ::close(fd_);
}

void RowFile::Append(const CsrView& m) {
  std::lock_guard<std::mutex> lock(mu_);
  Block b;
  b.firstRow = rows_;
  b.offset = end_;
  const uint32_t base = m.rows ? m.indptr[0] : 0;
  b.indptr.resize(m.rows + 1);
  for (uint64_t i = 0; i <= m.rows; ++i) b.indptr[i] = m.rows ? m.indptr[i] - base : 0;
  const uint64_t nnz = b.indptr.back();
  WriteAll(fd_, m.indices + base, nnz * 4, end_);
  end_ += nnz * 4;
  if (values_) {
    if (m.values) {
      WriteAll(fd_, m.values + base, nnz * 4, end_);
    } else {
      const std::vector<float> ones(nnz, 1.0f);
      WriteAll(fd_, ones.data(), nnz * 4, end_);
    }
    end_ += nnz * 4;
  }
  rows_ += m.rows;
  firstRows_.push_back(b.firstRow);
  blocks_.push_back(std::move(b));
}

uint64_t RowFile::rows() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rows_;
}

uint64_t RowFile::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return end_;
}

// Reads run after every append (a call given the file reads it once writing is done): no lock.
const RowFile::Block& RowFile::BlockOf(uint64_t r) const {
  const size_t k = size_t(std::upper_bound(firstRows_.begin(), firstRows_.end(), r) - firstRows_.begin()) - 1;
  return blocks_[k];
}

uint32_t RowFile::Length(uint64_t r) const {
  const Block& b = BlockOf(r);
  const uint64_t i = r - b.firstRow;
  return b.indptr[i + 1] - b.indptr[i];
}

void RowFile::Read(uint64_t r, std::vector<uint32_t>* idx, std::vector<float>* val) const {
  const Block& b = BlockOf(r);
  const uint64_t i = r - b.firstRow;
  const uint32_t len = b.indptr[i + 1] - b.indptr[i];
  idx->resize(len);
  if (len) ReadAll(fd_, idx->data(), size_t(len) * 4, b.offset + uint64_t(b.indptr[i]) * 4);
  if (values_ && val) {
    val->resize(len);
    const uint64_t nnz = b.indptr.back();
    if (len) ReadAll(fd_, val->data(), size_t(len) * 4, b.offset + nnz * 4 + uint64_t(b.indptr[i]) * 4);
  }
}

namespace lsh {

void RowBlocks::AddFile(std::shared_ptr<const RowFile> f) {
  CsrView none;
  none.rows = f->rows();
  parts_.push_back(none);
  first_.push_back(rows_);
  rows_ += none.rows;
  files_.push_back(std::move(f));
}

uint32_t RowBlocks::Length(uint64_t r) const {
  const size_t k = PartOf(r);
  const uint64_t i = r - first_[k];
  if (files_[k]) return files_[k]->Length(i);
  return parts_[k].indptr[i + 1] - parts_[k].indptr[i];
}

RowBlocks::Row RowBlocks::Fetch(uint64_t r, std::vector<uint32_t>* idx, std::vector<float>* val) const {
  const size_t k = PartOf(r);
  const uint64_t i = r - first_[k];
  if (files_[k]) {
    files_[k]->Read(i, idx, val);
    return {idx->data(), files_[k]->values() && val ? val->data() : nullptr, uint32_t(idx->size())};
  }
  const CsrView& m = parts_[k];
  const uint32_t b = m.indptr[i], e = m.indptr[i + 1];
  return {m.indices + b, m.values ? m.values + b : nullptr, e - b};
}

}  // namespace lsh
}  // namespace cusim
