// The one container every saved index uses (docs/persistence.md): a checksummed
// header naming the engine kind and its format version, a table of sections,
// and the sections' bytes, each checksummed per 1 MiB block (verified in
// parallel while it is read straight into its final buffer).
//
// Writer: the file is built under a temporary name unique to the writer, next
// to the target, fsync'ed and renamed over it, so a failed, interrupted or
// concurrent save leaves a complete file (the old one or one of the new ones).
// Reader: refuses anything but a regular file without waiting on it (FIFOs,
// devices), checks the header, table and sizes before the caller allocates,
// and verifies every byte it hands out.
// No napi.h here: engines' CPU code uses it directly.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common.h"

namespace cusim {
namespace persist {

// Error codes (err.code in JavaScript).
inline constexpr const char* kBadFile = "CUSIM_BAD_FILE";  // truncated, corrupted, foreign, wrong kind or version
inline constexpr const char* kIoError = "CUSIM_IO_ERROR";  // the operating system refused (ENOENT, ENOSPC, ...)

inline constexpr uint32_t kContainerVersion = 1;
inline constexpr uint32_t kMaxSections = 16;
inline constexpr uint64_t kBlockBytes = uint64_t(1) << 20;
inline constexpr uint64_t kHeaderBytes = 64;
inline constexpr uint64_t kTableBytes = kMaxSections * 32;
inline constexpr uint64_t kDataStart = kHeaderBytes + kTableBytes;

// XXH64 (Collet's published algorithm), one-shot.
uint64_t Xxh64(const void* data, size_t n, uint64_t seed);

// A section tag from four ASCII characters ("CODE").
constexpr uint32_t Tag(const char (&s)[5]) {
  return uint32_t(uint8_t(s[0])) | uint32_t(uint8_t(s[1])) << 8 | uint32_t(uint8_t(s[2])) << 16 |
         uint32_t(uint8_t(s[3])) << 24;
}
std::string TagName(uint32_t tag);

// Rejects an empty path or one holding a NUL byte (the OS would cut it there).
void CheckPath(const std::string& path);

class Writer {
 public:
  // Refuses a target that exists and is not a regular file (a symlink is
  // followed to its file), then creates the temporary file. Takes no engine
  // lock: callers lock their state only after this returns.
  Writer(const std::string& path, const char* kind, uint32_t version);
  ~Writer();  // removes the temporary file unless Commit() succeeded
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  void Begin(uint32_t tag);
  void Append(const void* data, uint64_t bytes);
  void End();
  void Section(uint32_t tag, const void* data, uint64_t bytes) {
    Begin(tag);
    Append(data, bytes);
    End();
  }
  // Header and table, fsync, rename over the target, fsync of the directory.
  void Commit();

 private:
  void WriteAt(uint64_t offset, const void* data, uint64_t bytes);
  void FlushPending();
  [[noreturn]] void Fail(const std::string& what, int err);

  std::string target_, tmp_, kind_;
  uint32_t version_;
  int fd_ = -1;
  bool committed_ = false;
  uint64_t offset_ = kDataStart;
  struct Entry {
    uint32_t tag = 0;
    uint64_t offset = 0, bytes = 0, checksum = 0;
  };
  std::vector<Entry> sections_;
  bool open_ = false;
  std::vector<uint64_t> blockHashes_;
  std::vector<uint8_t> pending_;  // the current partial block
};

class Reader {
 public:
  // Opens and validates the header and the section table: `kind` must match
  // and the engine version be in [1, maxVersion].
  Reader(const std::string& path, const char* kind, uint32_t maxVersion);
  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  uint32_t version() const { return version_; }
  const std::string& path() const { return path_; }
  const std::string& kind() const { return kind_; }
  bool Has(uint32_t tag) const;
  std::vector<uint32_t> Tags() const;
  // Size of a section; a missing one is a bad file.
  uint64_t Bytes(uint32_t tag) const;
  // Reads the whole section (exactly `bytes`, else a bad file) into dst, in
  // parallel, verifying its checksum.
  void Read(uint32_t tag, void* dst, uint64_t bytes) const;
  // A small section (at most maxBytes), verified.
  std::vector<uint8_t> ReadSmall(uint32_t tag, uint64_t maxBytes) const;
  [[noreturn]] void Bad(const std::string& why) const;
  void Close();

 private:
  struct Entry {
    uint32_t tag = 0;
    uint64_t offset = 0, bytes = 0, checksum = 0;
  };
  const Entry& Find(uint32_t tag) const;
  std::string path_, kind_;
  uint32_t version_ = 0;
  int fd_ = -1;
  std::vector<Entry> sections_;
};

// Little-endian fields of a parameter section, read in order with bounds checks.
class Fields {
 public:
  Fields(const std::vector<uint8_t>& bytes, const Reader& r) : b_(bytes), r_(r) {}
  template <class T>
  T Get() {
    T v;
    if (pos_ + sizeof(T) > b_.size()) r_.Bad("parameter section too short");
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  void End() const {
    if (pos_ != b_.size()) r_.Bad("parameter section has " + std::to_string(b_.size() - pos_) + " unexpected bytes");
  }

 private:
  const std::vector<uint8_t>& b_;
  const Reader& r_;
  size_t pos_ = 0;
};

// Builds a parameter section.
class FieldWriter {
 public:
  template <class T>
  FieldWriter& Put(T v) {
    const size_t at = b_.size();
    b_.resize(at + sizeof(T));
    std::memcpy(b_.data() + at, &v, sizeof(T));
    return *this;
  }
  const std::vector<uint8_t>& bytes() const { return b_; }

 private:
  std::vector<uint8_t> b_;
};

}  // namespace persist
}  // namespace cusim
