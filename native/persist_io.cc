// The container of docs/persistence.md: XXH64, the atomic Writer and the
// validating Reader.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <random>

#include "fd_io.h"
#include "parallel.h"
#include "persist.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the file format is little-endian and read in place");

namespace cusim {
namespace persist {
namespace {

constexpr uint8_t kMagic[8] = {0x89, 'C', 'U', 'S', 'I', 'M', '\r', '\n'};

constexpr uint64_t kP1 = 11400714785074694791ull, kP2 = 14029467366897019727ull, kP3 = 1609587929392839161ull,
                   kP4 = 9650029242287828579ull, kP5 = 2870177450012600261ull;

inline uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t Read64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint32_t Read32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t Round(uint64_t acc, uint64_t input) { return Rotl(acc + input * kP2, 31) * kP1; }
inline uint64_t Merge(uint64_t acc, uint64_t v) { return (acc ^ Round(0, v)) * kP1 + kP4; }

std::string ErrnoName(int e) {
  switch (e) {
    case ENOENT: return "ENOENT";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case ENOSPC: return "ENOSPC";
    case EDQUOT: return "EDQUOT";
    case EFBIG: return "EFBIG";
    case EISDIR: return "EISDIR";
    case ENOTDIR: return "ENOTDIR";
    case EROFS: return "EROFS";
    case EIO: return "EIO";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case ELOOP: return "ELOOP";
    case EMFILE: return "EMFILE";
    case ENFILE: return "ENFILE";
    case EXDEV: return "EXDEV";
    case EBUSY: return "EBUSY";
    default: return "errno " + std::to_string(e);
  }
}

std::string ErrnoText(int e) { return ErrnoName(e) + " (" + std::strerror(e) + ")"; }

[[noreturn]] void IoError(const std::string& what, int e) { throw Error(kIoError, what + ": " + ErrnoText(e)); }

const char* FileKind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

[[noreturn]] void NotRegular(const std::string& path, mode_t m) {
  throw Error(kInvalidArgument, "'" + path + "' is " + FileKind(m) + ", not a regular file", "Error");
}

uint64_t RandomWord() {
  static thread_local std::mt19937_64 gen{(uint64_t(std::random_device{}()) << 32) ^ std::random_device{}() ^
                                          uint64_t(getpid())};
  return gen();
}

void PreadFull(int fd, uint64_t offset, uint8_t* dst, uint64_t bytes, const std::string& path, bool* shortRead) {
  const int e = PreadAll(fd, offset, dst, bytes);
  if (e > 0) IoError("reading '" + path + "' failed", e);
  if (e < 0) *shortRead = true;
}

uint64_t TableChecksum(const uint8_t* head) {
  uint8_t buf[56 + kTableBytes];
  std::memcpy(buf, head, 56);
  std::memcpy(buf + 56, head + kHeaderBytes, kTableBytes);
  return Xxh64(buf, sizeof(buf), 0);
}

}  // namespace

uint64_t Xxh64(const void* data, size_t n, uint64_t seed) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  const uint8_t* end = p + n;
  uint64_t h;
  if (n >= 32) {
    uint64_t v1 = seed + kP1 + kP2, v2 = seed + kP2, v3 = seed, v4 = seed - kP1;
    for (const uint8_t* limit = end - 32; p <= limit; p += 32) {
      v1 = Round(v1, Read64(p));
      v2 = Round(v2, Read64(p + 8));
      v3 = Round(v3, Read64(p + 16));
      v4 = Round(v4, Read64(p + 24));
    }
    h = Rotl(v1, 1) + Rotl(v2, 7) + Rotl(v3, 12) + Rotl(v4, 18);
    h = Merge(h, v1);
    h = Merge(h, v2);
    h = Merge(h, v3);
    h = Merge(h, v4);
  } else {
    h = seed + kP5;
  }
  h += uint64_t(n);
  for (; p + 8 <= end; p += 8) h = Rotl(h ^ Round(0, Read64(p)), 27) * kP1 + kP4;
  if (p + 4 <= end) {
    h = Rotl(h ^ (uint64_t(Read32(p)) * kP1), 23) * kP2 + kP3;
    p += 4;
  }
  for (; p < end; ++p) h = Rotl(h ^ (uint64_t(*p) * kP5), 11) * kP1;
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

std::string TagName(uint32_t tag) {
  std::string s;
  for (int i = 0; i < 4; ++i) {
    const char c = char((tag >> (8 * i)) & 0xFF);
    s += (c >= 0x20 && c < 0x7F) ? c : '?';
  }
  return s;
}

void CheckPath(const std::string& path) {
  if (path.empty()) ThrowInvalid("path must be a non-empty string", "TypeError");
  if (path.find('\0') != std::string::npos) ThrowInvalid("path must not contain a NUL character", "TypeError");
}

// ---- Writer ------------------------------------------------------------------------

Writer::Writer(const std::string& path, const char* kind, uint32_t version)
    : target_(path), kind_(kind), version_(version) {
  CheckPath(path);
  if (kind_.size() >= 16) throw Error(kInternal, "persist kind too long");
  struct stat st;
  bool exists = false;
  mode_t mode = 0;
  if (lstat(path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) {
      // Replace the file the link names, not the link.
      char* real = realpath(path.c_str(), nullptr);
      if (!real) IoError("cannot save to '" + path + "' (a symlink that does not resolve)", errno);
      target_ = real;
      std::free(real);
      if (stat(target_.c_str(), &st) != 0) IoError("cannot save to '" + path + "'", errno);
    }
    if (!S_ISREG(st.st_mode)) NotRegular(path, st.st_mode);
    exists = true;
    mode = st.st_mode & 07777;
  } else if (errno != ENOENT) {
    IoError("cannot save to '" + path + "'", errno);
  }
  const size_t slash = target_.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : target_.substr(0, slash);
  const std::string base = slash == std::string::npos ? target_ : target_.substr(slash + 1);
  if (base.empty() || base == "." || base == "..") ThrowInvalid("path '" + path + "' names a directory, not a file");
  char suffix[64];
  std::snprintf(suffix, sizeof(suffix), ".tmp-%d-%016llx", int(getpid()), (unsigned long long)RandomWord());
  // Names stay under NAME_MAX however long the target's is.
  tmp_ = dir + "/." + base.substr(0, 200) + suffix;
  fd_ = open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd_ < 0) IoError("cannot save to '" + path + "': creating a temporary file in '" + dir + "' failed", errno);
  if (exists) (void)fchmod(fd_, mode);
  pending_.reserve(kBlockBytes);
}

Writer::~Writer() {
  if (fd_ >= 0) close(fd_);
  if (!committed_ && !tmp_.empty()) unlink(tmp_.c_str());
}

void Writer::Fail(const std::string& what, int err) {
  throw Error(kIoError, "saving '" + target_ + "' failed while " + what + ": " + ErrnoText(err) +
                            "; the existing file (if any) is unchanged");
}

void Writer::WriteAt(uint64_t offset, const void* data, uint64_t bytes) {
  if (const int e = PwriteAll(fd_, offset, data, bytes)) Fail("writing", e);
}

void Writer::Begin(uint32_t tag) {
  if (open_ || sections_.size() >= kMaxSections) throw Error(kInternal, "persist: bad section sequence");
  for (const auto& s : sections_)
    if (s.tag == tag) throw Error(kInternal, "persist: section written twice");
  open_ = true;
  Entry e;
  e.tag = tag;
  e.offset = offset_;
  sections_.push_back(e);
  blockHashes_.clear();
  pending_.clear();
}

void Writer::FlushPending() {
  blockHashes_.push_back(Xxh64(pending_.data(), pending_.size(), 0));
  WriteAt(offset_, pending_.data(), pending_.size());
  offset_ += pending_.size();
  pending_.clear();
}

void Writer::Append(const void* data, uint64_t bytes) {
  if (!open_) throw Error(kInternal, "persist: Append outside a section");
  const uint8_t* p = static_cast<const uint8_t*>(data);
  if (!pending_.empty()) {
    const uint64_t take = std::min<uint64_t>(bytes, kBlockBytes - pending_.size());
    pending_.insert(pending_.end(), p, p + take);
    p += take;
    bytes -= take;
    if (pending_.size() == kBlockBytes) FlushPending();
  }
  if (bytes >= kBlockBytes) {
    // Whole blocks straight from the caller's memory: hashed and written in parallel.
    const uint64_t nb = bytes / kBlockBytes, base = blockHashes_.size(), off0 = offset_;
    blockHashes_.resize(base + nb);
    ParallelFor(nb, 1, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) {
        blockHashes_[base + i] = Xxh64(p + i * kBlockBytes, kBlockBytes, 0);
        WriteAt(off0 + i * kBlockBytes, p + i * kBlockBytes, kBlockBytes);
      }
    });
    offset_ += nb * kBlockBytes;
    p += nb * kBlockBytes;
    bytes -= nb * kBlockBytes;
  }
  if (bytes > 0) pending_.insert(pending_.end(), p, p + bytes);
}

void Writer::End() {
  if (!open_) throw Error(kInternal, "persist: End outside a section");
  if (!pending_.empty()) FlushPending();
  Entry& e = sections_.back();
  e.bytes = offset_ - e.offset;
  e.checksum = Xxh64(blockHashes_.data(), blockHashes_.size() * 8, e.tag);
  open_ = false;
}

void Writer::Commit() {
  if (open_ || sections_.empty()) throw Error(kInternal, "persist: commit with an open or no section");
  uint8_t head[kDataStart] = {};
  auto put32 = [&](size_t at, uint32_t v) { std::memcpy(head + at, &v, 4); };
  auto put64 = [&](size_t at, uint64_t v) { std::memcpy(head + at, &v, 8); };
  std::memcpy(head, kMagic, 8);
  put32(8, kContainerVersion);
  put32(12, uint32_t(kHeaderBytes));
  std::memcpy(head + 16, kind_.data(), kind_.size());
  put32(32, version_);
  put32(36, uint32_t(sections_.size()));
  put64(40, offset_);
  put32(48, uint32_t(kBlockBytes));
  for (size_t i = 0; i < sections_.size(); ++i) {
    const size_t at = kHeaderBytes + i * 32;
    put32(at, sections_[i].tag);
    put64(at + 8, sections_[i].offset);
    put64(at + 16, sections_[i].bytes);
    put64(at + 24, sections_[i].checksum);
  }
  put64(56, TableChecksum(head));
  WriteAt(0, head, kDataStart);
  if (fsync(fd_) != 0) Fail("flushing to disk", errno);
  const int fd = fd_;
  fd_ = -1;
  if (close(fd) != 0) Fail("closing", errno);
  if (rename(tmp_.c_str(), target_.c_str()) != 0) Fail("renaming the temporary file over it", errno);
  committed_ = true;
  // The rename itself reaches the disk with the directory.
  const size_t slash = target_.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : target_.substr(0, slash);
  const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)fsync(dfd);
    close(dfd);
  }
}

// ---- Reader ------------------------------------------------------------------------

Reader::Reader(const std::string& path, const char* kind, uint32_t maxVersion) : path_(path), kind_(kind) {
  CheckPath(path);
  // stat first: opening a FIFO or a device could block or act on it.
  struct stat st;
  if (stat(path.c_str(), &st) != 0) IoError("cannot open '" + path + "' for reading", errno);
  if (!S_ISREG(st.st_mode)) NotRegular(path, st.st_mode);
  fd_ = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) IoError("cannot open '" + path + "' for reading", errno);
  if (fstat(fd_, &st) != 0) IoError("cannot read '" + path + "'", errno);
  if (!S_ISREG(st.st_mode)) NotRegular(path, st.st_mode);  // replaced between stat and open
  const uint64_t size = uint64_t(st.st_size);
  uint8_t head[kDataStart] = {};
  bool shortRead = false;
  PreadFull(fd_, 0, head, std::min<uint64_t>(size, kDataStart), path, &shortRead);
  if (size < 8 || std::memcmp(head, kMagic, 8) != 0) Bad("not a cusim file (no cusim header)");
  if (size < kDataStart || shortRead)
    Bad("truncated (" + std::to_string(size) + " bytes; the header alone is " + std::to_string(kDataStart) + ")");
  auto get32 = [&](size_t at) { return Read32(head + at); };
  auto get64 = [&](size_t at) { return Read64(head + at); };
  if (get64(56) != TableChecksum(head)) Bad("header checksum mismatch (corrupted)");
  const uint32_t container = get32(8);
  if (container != kContainerVersion)
    Bad("container version " + std::to_string(container) + " is not supported (this cusim reads version " +
        std::to_string(kContainerVersion) + ")");
  if (get32(12) != kHeaderBytes || get32(48) != kBlockBytes || get32(52) != 0) Bad("unsupported header layout");
  char k[17] = {};
  std::memcpy(k, head + 16, 16);
  const std::string fileKind(k);
  for (size_t i = fileKind.size(); i < 16; ++i)
    if (head[16 + i] != 0) Bad("corrupted engine kind");
  if (fileKind != kind_) Bad("it holds a '" + fileKind + "' state, not a '" + kind_ + "'");
  version_ = get32(32);
  if (version_ < 1 || version_ > maxVersion)
    Bad("format version " + std::to_string(version_) + " is not supported (this cusim reads 1 to " +
        std::to_string(maxVersion) + ")");
  const uint32_t count = get32(36);
  if (count < 1 || count > kMaxSections) Bad("bad section count " + std::to_string(count));
  const uint64_t fileBytes = get64(40);
  if (fileBytes > size) Bad("truncated (" + std::to_string(size) + " of " + std::to_string(fileBytes) + " bytes)");
  if (fileBytes < size) Bad(std::to_string(size - fileBytes) + " unexpected bytes after the end of the data");
  uint64_t at = kDataStart;
  for (uint32_t i = 0; i < kMaxSections; ++i) {
    const uint8_t* e = head + kHeaderBytes + i * 32;
    if (i >= count) {
      for (int b = 0; b < 32; ++b)
        if (e[b] != 0) Bad("corrupted section table");
      continue;
    }
    Entry s;
    s.tag = Read32(e);
    s.offset = Read64(e + 8);
    s.bytes = Read64(e + 16);
    s.checksum = Read64(e + 24);
    if (s.tag == 0 || Read32(e + 4) != 0 || s.offset != at || s.bytes > fileBytes - at) Bad("corrupted section table");
    for (const auto& o : sections_)
      if (o.tag == s.tag) Bad("section " + TagName(s.tag) + " listed twice");
    at += s.bytes;
    sections_.push_back(s);
  }
  if (at != fileBytes) Bad("sections do not span the file");
}

Reader::~Reader() { Close(); }

void Reader::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

void Reader::Bad(const std::string& why) const {
  throw Error(kBadFile, "'" + path_ + "' is not a valid cusim " + kind_ + " file: " + why);
}

bool Reader::Has(uint32_t tag) const {
  for (const auto& s : sections_)
    if (s.tag == tag) return true;
  return false;
}

std::vector<uint32_t> Reader::Tags() const {
  std::vector<uint32_t> out;
  for (const auto& s : sections_) out.push_back(s.tag);
  return out;
}

const Reader::Entry& Reader::Find(uint32_t tag) const {
  for (const auto& s : sections_)
    if (s.tag == tag) return s;
  Bad("section " + TagName(tag) + " is missing");
}

uint64_t Reader::Bytes(uint32_t tag) const { return Find(tag).bytes; }

void Reader::Read(uint32_t tag, void* dst, uint64_t bytes) const {
  const Entry& e = Find(tag);
  if (e.bytes != bytes)
    Bad("section " + TagName(tag) + " has " + std::to_string(e.bytes) + " bytes where its parameters give " +
        std::to_string(bytes));
  if (fd_ < 0) throw Error(kInternal, "persist: read after close");
  uint8_t* out = static_cast<uint8_t*>(dst);
  const uint64_t nb = (bytes + kBlockBytes - 1) / kBlockBytes;
  std::vector<uint64_t> hashes(nb);
  std::atomic<bool> shortRead{false};
  ParallelFor(nb, 1, [&](size_t b, size_t end) {
    for (size_t i = b; i < end; ++i) {
      const uint64_t len = std::min<uint64_t>(kBlockBytes, bytes - i * kBlockBytes);
      bool s = false;
      PreadFull(fd_, e.offset + i * kBlockBytes, out + i * kBlockBytes, len, path_, &s);
      if (s)
        shortRead = true;
      else
        hashes[i] = Xxh64(out + i * kBlockBytes, len, 0);
    }
  });
  if (shortRead) Bad("truncated while it was read");
  if (Xxh64(hashes.data(), hashes.size() * 8, tag) != e.checksum)
    Bad("section " + TagName(tag) + " checksum mismatch (corrupted)");
}

std::vector<uint8_t> Reader::ReadSmall(uint32_t tag, uint64_t maxBytes) const {
  const uint64_t n = Bytes(tag);
  if (n > maxBytes)
    Bad("section " + TagName(tag) + " has " + std::to_string(n) + " bytes, more than " + std::to_string(maxBytes));
  std::vector<uint8_t> out(n);
  Read(tag, out.data(), n);
  return out;
}

}  // namespace persist
}  // namespace cusim
