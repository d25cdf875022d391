// The native record reader: a block of whole lines (JSONL or plain lines)
// parsed with simdjson and tokenized + hashed in the same pass, on every core,
// to the rows lib/cli/record-worker.ts builds with JSON.parse and the
// featurizer. JavaScript stays the definition: every line this reader cannot
// settle exactly (invalid JSON or UTF-8 as simdjson sees it, a value
// JSON.parse and String() would treat in a way not reproduced here, a missing
// or non-string field, a line over the size limit, Unicode-only whitespace)
// comes back as a JS line, which the caller reads with the JavaScript code,
// errors included; documents the tokenizer leaves to JavaScript (text.h
// kFallback) come back with their text. Built only with simdjson
// (CUSIM_WITH_SIMDJSON, see scripts/simdjson-source.mjs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "text.h"

namespace cusim {
namespace records {

struct Options {
  bool jsonl = true;
  std::string field;    // UTF-8
  std::string idField;  // UTF-8
  uint64_t maxRecordBytes = 0;
  uint32_t minTokens = 0;
  uint32_t mask = 0xffffffffu;
  // Lines before the block (the kept rows' line numbers count from it).
  double firstLine = 0;
  // Rows' values (token counts); classic MinHash reads column ids only, and
  // arrays not returned are not allocated in JavaScript (nor collected).
  bool values = true;
  // CSV or TSV (records_table.cc, with libcsv): records end at \r\n, \n or
  // \r outside quotes; each entry's text and id are columns textColumn and
  // idColumn (-1: none; a record without that column: '' and the line id).
  bool table = false;
  uint8_t delimiter = ',';
  bool quoted = true;  // CSV; TSV has no quoting
  int64_t textColumn = 0, idColumn = -1;
  // With a token hasher: the kept rows' band keys too (text.h Sketch), made
  // by the hasher where the hashes are. Unused without a hasher.
  std::shared_ptr<const text::Sketch> sketch;
};

// How an entry (a line that is not blank) is finished.
enum Kind : uint8_t {
  kNative = 0,    // tokens and, when kept, a row here
  kJsTokens = 1,  // parsed here; its text (jsText) is tokenized in JavaScript
  kJsLine = 2,    // read wholly in JavaScript (jsLineStart/End: the line, CR included)
};

// What String(record[idField]) gives, kept compact until it is asked for.
enum IdKind : uint8_t {
  kIdLine = 0,    // absent or null: the line number
  kIdString = 1,  // idBytes[idA, idB)
  kIdNumber = 2,  // String(nums[idA])
  kIdTrue = 3,
  kIdFalse = 4,
  kIdObject = 5,  // "[object Object]"
};

struct Block {
  uint64_t lines = 0;
  // Per entry, in line order.
  std::vector<uint32_t> line;  // 0-based line within the block
  std::vector<uint8_t> kind;
  std::vector<uint32_t> tokens;  // kNative: token count
  std::vector<uint8_t> idKind;
  std::vector<uint32_t> idA, idB;
  std::vector<double> nums;
  std::vector<uint8_t> idBytes;
  // Rows of the kNative entries with at least minTokens tokens, in order
  // (text.h AssembleHashedRows).
  std::vector<uint32_t> rowPtr;
  std::vector<uint32_t> cols;
  std::vector<float> values;
  // The same rows' ids and line numbers, in row order: what the caller keeps
  // of a block with no entry left to JavaScript, ready as they are. kIdLine:
  // keptIdA is the entry's 0-based line in the block. keptLine: firstLine +
  // that line + 1.
  std::vector<uint8_t> keptIdKind;
  std::vector<uint32_t> keptIdA, keptIdB;
  std::vector<double> keptLine;
  // kJsTokens entries' texts (UTF-8), in order: [jsTextEnds[i-1], jsTextEnds[i]).
  std::vector<uint8_t> jsText;
  std::vector<uint32_t> jsTextEnds;
  // kJsLine entries' lines: [jsLineStart[i], jsLineEnd[i]) of the block.
  std::vector<uint32_t> jsLineStart, jsLineEnd;
  // With Options::sketch: the kept rows' band keys (rows × bands) and empty
  // flags, in row order.
  std::vector<uint64_t> keys;
  std::vector<uint8_t> empty;
};

// `bytes` holds n bytes of whole lines followed by at least Padding() readable
// bytes. Multi-threaded (ParallelFor) over chunks of lines. With a `hasher`
// (made with tok's options; a GPU's), the documents' tokens are split and
// hashed by it, in one call for the block, instead of by `tok`: the rows are
// the same (the hasher's tables must be installed, so no kJsTokens entry).
void ReadBlock(const text::Tokenizer& tok, text::TokenHasher* hasher, const uint8_t* bytes, size_t n, const Options& o,
               Block* out);

// Tables (Options::table). A table block's chunk cuts: `want` - 1 places at
// or after n * k / want (k = 1..want-1) where a record ends outside quotes,
// ascending, with 0 first and n last.
std::vector<size_t> TableCuts(const uint8_t* bytes, size_t n, size_t want, const Options& o);

// The records of bytes[begin, end) (a record start, a record end or n)
// handed on in order: doc(line, text, textLen, id, idLen, hasId) for one read
// here (line: lines of the chunk before its terminator, as csv-parse's
// info.lines counts them), js(line, start, end) for one left to JavaScript
// (line: lines before it; csv-parse's to read, errors included). Empty
// records are skipped. Returns the chunk's line count.
struct TableSink {
  virtual void Doc(uint32_t line, const uint8_t* text, size_t textLen, const uint8_t* id, size_t idLen, bool hasId) = 0;
  virtual void Js(uint32_t line, size_t start, size_t end) = 0;
  virtual ~TableSink() = default;
};
uint64_t ParseTable(const uint8_t* bytes, size_t begin, size_t end, const Options& o, TableSink* sink);

// The libcsv version compiled in ("" without it).
const char* TableParserVersion();

// Bytes ReadBlock may read past the end of the block.
size_t Padding();

// The simdjson version compiled in.
const char* SimdjsonVersion();

}  // namespace records
}  // namespace cusim
