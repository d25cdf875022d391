// The native record reader's tables (records.h: CSV and TSV). A chunk is
// split into records by a sequential scan of quote parity (RFC 4180: a
// doubled quote inside quotes toggles twice, so the parity is exact for any
// input csv-parse accepts), counting lines as csv-parse's info.lines does;
// each CSV record's fields are then read by libcsv in strict mode, with no
// space trimming. TSV has no quoting: its fields are the bytes between
// delimiters. csv-parse (lib/cli/records.ts) stays the definition: a record
// libcsv rejects, one over the size limit, with invalid UTF-8 or with a
// byte-order mark (which a TextDecoder would drop) goes to JavaScript, which
// reads it, or words its error, with csv-parse.
#include "records.h"

#if defined(CUSIM_WITH_SIMDJSON) && defined(CUSIM_WITH_LIBCSV)

#include <string>

#include "common.h"
#include "csv.h"
#include "simdjson.h"

#define CUSIM_LIBCSV_STR_(a) #a
#define CUSIM_LIBCSV_STR(a) CUSIM_LIBCSV_STR_(a)

namespace cusim {
namespace records {
namespace {

inline bool IsEol(uint8_t c) { return c == '\n' || c == '\r'; }

// Where the record starting at `pos` ends (its terminator's first byte, or
// `end`), with the lines inside it added to *lines: csv-parse counts every
// \r and \n inside quotes, and \r\n outside them as one.
inline size_t RecordEnd(const uint8_t* bytes, size_t pos, size_t end, const Options& o, uint64_t* lines) {
  bool inQuotes = false;
  for (; pos < end; ++pos) {
    const uint8_t c = bytes[pos];
    if (o.quoted && c == '"') {
      inQuotes = !inQuotes;
    } else if (IsEol(c)) {
      if (!inQuotes) return pos;
      ++*lines;
    }
  }
  return end;
}

// The terminator's length at `at` (the record's end): 0 at `end`.
inline size_t TerminatorBytes(const uint8_t* bytes, size_t at, size_t end) {
  if (at >= end) return 0;
  return bytes[at] == '\r' && at + 1 < end && bytes[at + 1] == '\n' ? 2 : 1;
}

// Space and terminator tests for libcsv: nothing is trimmed (csv-parse's
// ltrim/rtrim are off); records come here without their terminators.
int NoSpace(unsigned char) { return 0; }

struct Fields {
  const Options* o;
  int64_t column = 0;
  std::string text, id;
  bool hasText = false, hasId = false;
  int rows = 0;
};

void OnField(void* p, size_t n, void* data) {
  auto* f = static_cast<Fields*>(data);
  const char* c = static_cast<const char*>(p);
  if (f->column == f->o->textColumn) {
    f->text.assign(c ? c : "", n);
    f->hasText = true;
  }
  if (f->column == f->o->idColumn) {
    f->id.assign(c ? c : "", n);
    f->hasId = true;
  }
  ++f->column;
}

void OnRow(int, void* data) { ++static_cast<Fields*>(data)->rows; }

// One parser per thread, reused across records and blocks.
struct Parser {
  csv_parser p;
  explicit Parser(const Options& o) {
    if (csv_init(&p, CSV_STRICT | CSV_STRICT_FINI) != 0) ThrowInvalid("libcsv: csv_init failed");
    csv_set_space_func(&p, NoSpace);
    csv_set_delim(&p, o.delimiter);
    csv_set_quote(&p, '"');
  }
  ~Parser() { csv_free(&p); }
};

// The record's fields read into *f; false where csv-parse is to read it.
bool ReadRecord(const uint8_t* r, size_t n, const Options& o, Fields* f) {
  f->column = 0;
  f->hasText = f->hasId = false;
  f->rows = 0;
  if (!o.quoted) {
    // TSV: the bytes between delimiters.
    for (size_t a = 0;;) {
      size_t z = a;
      while (z < n && r[z] != o.delimiter) ++z;
      OnField(const_cast<uint8_t*>(r + a), z - a, f);
      if (z == n) return true;
      a = z + 1;
    }
  }
  thread_local Parser parser(o);
  csv_parser* p = &parser.p;
  csv_set_delim(p, o.delimiter);
  const bool ok = csv_parse(p, r, n, OnField, OnRow, f) == n && csv_error(p) == CSV_SUCCESS;
  // csv_fini resets the parser for the next record, whatever the outcome.
  const bool fini = csv_fini(p, OnField, OnRow, f) == 0;
  return ok && fini && f->rows == 1;
}

inline bool HasBom(const uint8_t* p, size_t n) {
  for (size_t i = 0; i + 2 < n; ++i)
    if (p[i] == 0xef && p[i + 1] == 0xbb && p[i + 2] == 0xbf) return true;
  return false;
}

inline bool HasHighByte(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] >= 0x80) return true;
  return false;
}

}  // namespace

std::vector<size_t> TableCuts(const uint8_t* bytes, size_t n, size_t want, const Options& o) {
  std::vector<size_t> cut{0};
  uint64_t ignored = 0;
  size_t pos = 0;
  for (size_t k = 1; k < want && pos < n; ++k) {
    const size_t target = n * k / want;
    while (pos < n && pos < target) {
      const size_t at = RecordEnd(bytes, pos, n, o, &ignored);
      pos = at + TerminatorBytes(bytes, at, n);
    }
    if (pos > cut.back() && pos < n) cut.push_back(pos);
  }
  cut.push_back(n);
  return cut;
}

uint64_t ParseTable(const uint8_t* bytes, size_t begin, size_t end, const Options& o, TableSink* sink) {
  Fields f;
  f.o = &o;
  uint64_t line = 0;
  for (size_t pos = begin; pos < end;) {
    const uint64_t first = line;
    const size_t at = RecordEnd(bytes, pos, end, o, &line);
    const size_t term = TerminatorBytes(bytes, at, end);
    const uint8_t* r = bytes + pos;
    const size_t n = at - pos;
    if (line >= (uint64_t(1) << 32)) ThrowInvalid("a record block has 2^32 lines or more");
    if (n > 0) {
      if (n > o.maxRecordBytes || HasBom(r, n) ||
          (HasHighByte(r, n) && !simdjson::validate_utf8(reinterpret_cast<const char*>(r), n)) ||
          !ReadRecord(r, n, o, &f)) {
        sink->Js(uint32_t(first), pos, at);
      } else {
        const std::string& text = f.text;
        sink->Doc(uint32_t(line), reinterpret_cast<const uint8_t*>(text.data()), f.hasText ? text.size() : 0,
                  reinterpret_cast<const uint8_t*>(f.id.data()), f.hasId ? f.id.size() : 0, f.hasId);
      }
    }
    if (term) ++line;
    pos = at + term;
  }
  return line;
}

const char* TableParserVersion() {
  return "libcsv " CUSIM_LIBCSV_STR(CSV_MAJOR) "." CUSIM_LIBCSV_STR(CSV_MINOR) "." CUSIM_LIBCSV_STR(CSV_RELEASE);
}

}  // namespace records
}  // namespace cusim

#else

namespace cusim {
namespace records {
const char* TableParserVersion() { return ""; }
}  // namespace records
}  // namespace cusim

#endif
