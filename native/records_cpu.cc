// The native record reader (records.h). A block is cut into chunks of whole
// lines; each chunk is parsed (simdjson's DOM parser, which validates the
// whole line, UTF-8 included, as JSON.parse does), its texts tokenized and
// hashed (text.h: the same Run + AssembleHashedRows that hashedRows() uses),
// all on the thread pool; the chunks are then joined in line order. With a
// token hasher (the GPU's), the parsed texts of the whole block are hashed
// in one call instead, and the rows built from the hashes.
#include "records.h"

#ifdef CUSIM_WITH_SIMDJSON

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "common.h"
#include "parallel.h"
#include "phase_log.h"
#include "simdjson.h"
#include "uninit_vector.h"

namespace cusim {
namespace records {
namespace {

// String.prototype.trim()'s ASCII whitespace (a line holds no '\n').
inline bool AsciiSpace(uint8_t c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// 0: only ASCII whitespace (blank); 1: some ASCII non-whitespace byte;
// 2: no ASCII non-whitespace byte but some byte >= 0x80 (blank or not as
// Unicode whitespace decides: left to JavaScript).
inline int Content(const uint8_t* p, size_t n) {
  bool high = false;
  for (size_t i = 0; i < n; ++i) {
    if (p[i] >= 0x80)
      high = true;
    else if (!AsciiSpace(p[i]))
      return 1;
  }
  return high ? 2 : 0;
}

inline bool HasHigh(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] >= 0x80) return true;
  return false;
}

// A chunk's documents for the tokenizer: their texts back to back, and the
// entry each one is.
struct Texts {
  std::vector<uint8_t> bytes;
  std::vector<uint32_t> offsets;
  std::vector<uint32_t> docEntry;
};

struct Part {
  uint64_t lines = 0;
  Block b;
  // With a token hasher: the chunk's texts, kept until the block's one hash call.
  Texts texts;
  uint64_t firstDoc = 0, firstByte = 0;
};

void Append(std::vector<uint8_t>& v, const void* p, size_t n) {
  const auto* c = static_cast<const uint8_t*>(p);
  v.insert(v.end(), c, c + n);
}

// Lines [begin, end) of the block (begin at a line start, end at one or at
// n) parsed: their entries into part->b, their documents' texts into *t.
void ParseChunk(const uint8_t* bytes, size_t begin, size_t end, const Options& o, Part* part, Texts* t) {
  Block& b = part->b;
  // Kept per thread across chunks and blocks: a fresh parser costs more in
  // page faults and zeroing than the parse itself.
  thread_local simdjson::dom::parser parser;
  std::vector<uint8_t>& texts = t->bytes;
  std::vector<uint32_t>& offsets = t->offsets;
  std::vector<uint32_t>& docEntry = t->docEntry;  // entry of each document given to the tokenizer
  texts.clear();
  offsets.assign(1, 0);
  docEntry.clear();
  // Upper bounds from the chunk's size: no regrowth copies while reading.
  texts.reserve(end - begin);
  const size_t guess = (end - begin) / 128 + 16;
  for (auto* v : {&b.line, &b.tokens, &b.idA, &b.idB}) v->reserve(guess);
  b.kind.reserve(guess);
  b.idKind.reserve(guess);
  uint32_t line = 0;
  auto entry = [&](uint8_t kind) {
    b.line.push_back(line);
    b.kind.push_back(kind);
    b.tokens.push_back(0);
    b.idKind.push_back(kIdLine);
    b.idA.push_back(0);
    b.idB.push_back(0);
  };
  auto jsLine = [&](size_t start, size_t nl) {
    entry(kJsLine);
    b.jsLineStart.push_back(uint32_t(start));
    b.jsLineEnd.push_back(uint32_t(nl));
  };
  auto doc = [&](const void* p, size_t n) {
    entry(kNative);
    docEntry.push_back(uint32_t(b.line.size() - 1));
    Append(texts, p, n);
    if (texts.size() >= (uint64_t(1) << 32)) ThrowInvalid("a block's texts exceed 4 GiB");
    offsets.push_back(uint32_t(texts.size()));
  };
  if (o.table) {
#ifdef CUSIM_WITH_LIBCSV
    // Tables: records_table.cc splits and reads the records.
    struct Sink : TableSink {
      Block& blk;
      uint32_t& at;
      decltype(jsLine)& jsFn;
      decltype(doc)& docFn;
      Sink(Block& b_, uint32_t& l, decltype(jsLine)& j, decltype(doc)& d) : blk(b_), at(l), jsFn(j), docFn(d) {}
      void Doc(uint32_t l, const uint8_t* text, size_t textLen, const uint8_t* id, size_t idLen, bool hasId) override {
        at = l;
        docFn(text, textLen);
        if (hasId) {
          blk.idKind.back() = kIdString;
          blk.idA.back() = uint32_t(blk.idBytes.size());
          Append(blk.idBytes, id, idLen);
          blk.idB.back() = uint32_t(blk.idBytes.size());
        }
      }
      void Js(uint32_t l, size_t start, size_t stop) override {
        at = l;
        jsFn(start, stop);
      }
    } sink(b, line, jsLine, doc);
    part->lines = ParseTable(bytes, begin, end, o, &sink);
#else
    ThrowInvalid("the addon was built without libcsv (the native CSV reader)");
#endif
    return;
  }
  for (size_t start = begin; start < end; ++line) {
    const void* hit = std::memchr(bytes + start, '\n', end - start);
    const size_t nl = hit ? size_t(static_cast<const uint8_t*>(hit) - bytes) : end;
    const size_t next = nl + 1;
    size_t stop = nl;
    if (stop > start && bytes[stop - 1] == '\r') --stop;
    const uint8_t* p = bytes + start;
    const size_t len = stop - start;
    // TextDecoder drops a leading BOM, which the bytes here would keep.
    const bool bom = len >= 3 && p[0] == 0xef && p[1] == 0xbb && p[2] == 0xbf;
    const int content = Content(p, len);
    if (nl - start > o.maxRecordBytes || bom || content == 2) {
      jsLine(start, nl);
    } else if (content == 0) {
      // blank: no record
    } else if (!o.jsonl) {
      // Invalid UTF-8 decodes to U+FFFD in JavaScript, which these bytes are not.
      if (HasHigh(p, len) && !simdjson::validate_utf8(reinterpret_cast<const char*>(p), len))
        jsLine(start, nl);
      else
        doc(p, len);
    } else {
      simdjson::dom::element root;
      simdjson::dom::object obj;
      if (parser.parse(p, len, false).get(root) || root.get_object().get(obj)) {
        jsLine(start, nl);
        start = next;
        continue;
      }
      // JSON.parse keeps the last of repeated keys.
      simdjson::dom::element text, id;
      bool hasText = false, hasId = false;
      for (auto kv : obj) {
        if (kv.key == o.field) {
          text = kv.value;
          hasText = true;
        }
        if (kv.key == o.idField) {
          id = kv.value;
          hasId = true;
        }
      }
      std::string_view s;
      // A missing or non-string field is an error, which JavaScript words.
      if (!hasText || text.get_string().get(s)) {
        jsLine(start, nl);
        start = next;
        continue;
      }
      uint8_t idKind = kIdLine;
      uint32_t a = 0, z = 0;
      if (hasId) {
        std::string_view ids;
        switch (id.type()) {
          case simdjson::dom::element_type::NULL_VALUE: break;
          case simdjson::dom::element_type::STRING:
            if (id.get_string().get(ids)) ThrowInvalid("simdjson: a string element did not read as one");
            idKind = kIdString;
            a = uint32_t(b.idBytes.size());
            Append(b.idBytes, ids.data(), ids.size());
            z = uint32_t(b.idBytes.size());
            break;
          case simdjson::dom::element_type::INT64:
            idKind = kIdNumber;
            a = uint32_t(b.nums.size());
            b.nums.push_back(double(int64_t(id)));
            break;
          case simdjson::dom::element_type::UINT64:
            idKind = kIdNumber;
            a = uint32_t(b.nums.size());
            b.nums.push_back(double(uint64_t(id)));
            break;
          case simdjson::dom::element_type::DOUBLE:
            idKind = kIdNumber;
            a = uint32_t(b.nums.size());
            b.nums.push_back(double(id));
            break;
          case simdjson::dom::element_type::BOOL: idKind = bool(id) ? kIdTrue : kIdFalse; break;
          case simdjson::dom::element_type::OBJECT: idKind = kIdObject; break;
          default:
            // An array's String() joins its elements: JavaScript's to write.
            idKind = 0xff;
        }
      }
      if (idKind == 0xff) {
        jsLine(start, nl);
      } else {
        doc(s.data(), s.size());
        b.idKind.back() = idKind;
        b.idA.back() = a;
        b.idB.back() = z;
      }
    }
    start = next;
  }
  part->lines = line;
}

// A parsed chunk finished with its documents' token counts (tokens[d], or
// kFallback) and the rows of those with at least minTokens (in order).
void FinishChunk(const Texts& t, const uint32_t* tokens, text::Rows&& rows, const Options& o, Block* out) {
  Block& b = *out;
  const std::vector<uint8_t>& texts = t.bytes;
  const std::vector<uint32_t>& offsets = t.offsets;
  const std::vector<uint32_t>& docEntry = t.docEntry;
  const size_t docs = docEntry.size();
  const size_t kept = rows.rowPtr.empty() ? 0 : rows.rowPtr.size() - 1;
  b.keptIdKind.reserve(kept);
  b.keptIdA.reserve(kept);
  b.keptIdB.reserve(kept);
  b.keptLine.reserve(kept);
  for (size_t d = 0; d < docs; ++d) {
    const uint32_t e = docEntry[d];
    b.tokens[e] = tokens[d];
    if (tokens[d] == text::kFallback) {
      b.kind[e] = kJsTokens;
      b.tokens[e] = 0;
      Append(b.jsText, texts.data() + offsets[d], offsets[d + 1] - offsets[d]);
      b.jsTextEnds.push_back(uint32_t(b.jsText.size()));
    } else if (tokens[d] >= o.minTokens) {
      // A row (AssembleHashedRows keeps these, in this order).
      b.keptIdKind.push_back(b.idKind[e]);
      b.keptIdA.push_back(b.idKind[e] == kIdLine ? b.line[e] : b.idA[e]);
      b.keptIdB.push_back(b.idB[e]);
      b.keptLine.push_back(double(b.line[e]));
    }
  }
  if (b.keptIdKind.size() != kept) ThrowInvalid("records: kept documents and rows disagree");
  b.rowPtr = std::move(rows.rowPtr);
  b.cols = std::move(rows.cols);
  if (o.values) b.values = std::move(rows.values);
}

// A chunk read with the tokenizer: tokenized and hashed as hashedRows() does
// (the nested ParallelFor runs inline).
void ReadChunk(const text::Tokenizer& tok, const uint8_t* bytes, size_t begin, size_t end, const Options& o,
               Part* part) {
  // Kept per thread across chunks and blocks: fresh multi-MB buffers per
  // chunk cost more in page faults than the parse (perf: ~20% of a block).
  thread_local Texts texts;
  ParseChunk(bytes, begin, end, o, part, &texts);
  text::Batch batch;
  tok.Run(texts.bytes.data(), texts.offsets.data(), texts.docEntry.size(), o.minTokens, &batch);
  text::Rows rows;
  text::AssembleHashedRows(batch, o.minTokens, o.mask, &rows);
  FinishChunk(texts, batch.tokens.data(), std::move(rows), o, &part->b);
}

// The rows AssembleHashedRows gives, from each document's token hashes
// (h.hashes[h.indptr[first + d], ...), ascending when `sorted`): columns
// hash & mask, distinct and ascending, each valued by its count.
void HashedChunkRows(const text::TokenHashes& h, uint64_t first, size_t docs, bool sorted, const Options& o,
                     std::vector<uint32_t>* tokens, text::Rows* rows) {
  tokens->resize(docs);
  rows->rowPtr.assign(1, 0);
  std::vector<uint32_t> scratch;
  for (size_t d = 0; d < docs; ++d) {
    const uint64_t a = h.indptr[first + d], z = h.indptr[first + d + 1];
    if (z - a >= text::kFallback) ThrowInvalid("a document has 2^32 - 1 tokens or more");
    (*tokens)[d] = uint32_t(z - a);
    if (z - a < o.minTokens) continue;
    const uint32_t* v = h.hashes.data() + a;
    if (!sorted || o.mask != 0xffffffffu) {
      scratch.resize(z - a);
      for (uint64_t k = 0; k < z - a; ++k) scratch[k] = v[k] & o.mask;
      std::sort(scratch.begin(), scratch.end());
      v = scratch.data();
    }
    for (uint64_t k = 0; k < z - a;) {
      uint64_t r = k + 1;
      while (r < z - a && v[r] == v[k]) ++r;
      rows->cols.push_back(v[k]);
      if (o.values) rows->values.push_back(float(r - k));
      k = r;
    }
    rows->kept += z - a;
    rows->rowPtr.push_back(uint32_t(rows->cols.size()));
  }
}

// The chunks parsed on the pool, then every document's text hashed in one
// call (on the GPU: one upload, each document's hashes sorted there), then
// the rows assembled on the pool.
void HashBlock(text::TokenHasher& hasher, const uint8_t* bytes, const std::vector<size_t>& cut, const Options& o,
               std::vector<Part>* out, PhaseLog* log) {
  std::vector<Part>& parts = *out;
  ParallelFor(parts.size(), 1, [&](size_t lo, size_t hi) {
    for (size_t c = lo; c < hi; ++c) ParseChunk(bytes, cut[c], cut[c + 1], o, &parts[c], &parts[c].texts);
  });
  log->Mark("parse");
  uint64_t docs = 0, textBytes = 0;
  for (Part& p : parts) {
    p.firstDoc = docs;
    p.firstByte = textBytes;
    docs += p.texts.docEntry.size();
    textBytes += p.texts.bytes.size();
  }
  // The joined texts, their offsets and the hashes are kept per thread from
  // block to block: fresh buffers were faulted in anew for every block, and
  // with a few blocks in flight those faults, contended in the kernel, were
  // most of a GPU-hashed block's host time (the hasher's copy out: 3.6 ms of
  // 5.9 a chunk at 10M documents on an H200).
  // (References: the pool's threads below must read this thread's buffers,
  // not their own thread_local ones.)
  thread_local UninitVector<uint8_t> allKept;
  thread_local UninitVector<uint64_t> offsetsKept;
  thread_local text::TokenHashes hashesKept;
  UninitVector<uint8_t>& all = allKept;
  UninitVector<uint64_t>& offsets = offsetsKept;
  text::TokenHashes& h = hashesKept;
  all.resize(textBytes);
  offsets.resize(docs + 1);
  offsets[docs] = textBytes;
  ParallelFor(parts.size(), 1, [&](size_t lo, size_t hi) {
    for (size_t c = lo; c < hi; ++c) {
      const Texts& t = parts[c].texts;
      if (!t.bytes.empty()) std::memcpy(all.data() + parts[c].firstByte, t.bytes.data(), t.bytes.size());
      for (size_t d = 0; d < t.docEntry.size(); ++d) offsets[parts[c].firstDoc + d] = parts[c].firstByte + t.offsets[d];
    }
  });
  log->Mark("gather");
  const bool sorted = o.mask == 0xffffffffu;
  if (docs)
    hasher.Hash(all.data(), offsets.data(), docs, /*wtf8=*/false, sorted, &h, o.sketch.get());
  else
    h.indptr.assign(1, 0);
  if (h.indptr.size() != docs + 1) ThrowInvalid("records: the token hasher returned the wrong number of documents");
  const uint32_t bands = o.sketch ? o.sketch->bands : 0;
  if (o.sketch && docs && (h.keys.size() != docs * bands || h.empty.size() != docs))
    ThrowInvalid("records: the token hasher returned no band keys for the documents");
  log->Mark("hash");
  ParallelFor(parts.size(), 1, [&](size_t lo, size_t hi) {
    std::vector<uint32_t> tokens;
    for (size_t c = lo; c < hi; ++c) {
      Part& p = parts[c];
      text::Rows rows;
      HashedChunkRows(h, p.firstDoc, p.texts.docEntry.size(), sorted, o, &tokens, &rows);
      if (o.sketch) {
        // The kept rows' keys, as FinishChunk keeps their rows.
        for (size_t d = 0; d < tokens.size(); ++d) {
          if (tokens[d] < o.minTokens) continue;
          const uint64_t* k = h.keys.data() + (p.firstDoc + d) * bands;
          p.b.keys.insert(p.b.keys.end(), k, k + bands);
          p.b.empty.push_back(h.empty[p.firstDoc + d]);
        }
      }
      FinishChunk(p.texts, tokens.data(), std::move(rows), o, &p.b);
      p.texts = Texts();
    }
  });
  log->Mark("rows");
}

}  // namespace

size_t Padding() { return simdjson::SIMDJSON_PADDING; }

#define CUSIM_STR_(a) #a
#define CUSIM_STR(a) CUSIM_STR_(a)
const char* SimdjsonVersion() { return CUSIM_STR(SIMDJSON_VERSION); }

#if defined(__GLIBC__)
// A block's scratch (parser output, token batches, the chunks joined) is
// freed in every thread's malloc arena, between allocations that live on
// (staged rows, band keys); glibc keeps those freed pages resident (2
// threads: RSS after reading 200K documents 354 -> 265 MB). Handing them back
// walks every arena: 2.3 ms a block at 10M documents and 20 ms a trim at 100M
// on an H200 host, which sat in the latency of every 8th block while only a
// few blocks are in flight. So one thread of its own trims, once every 8
// blocks; asks while it trims fold into the next trim. Never joined: it
// sleeps between asks and ends with the process (its mutex and condition are
// never destroyed under it).
static void TrimSoon() {
  struct Trimmer {
    std::mutex m;
    std::condition_variable cv;
    bool asked = false;
  };
  static Trimmer* t = [] {
    auto* p = new Trimmer;
    std::thread([p] {
      std::unique_lock<std::mutex> lock(p->m);
      for (;;) {
        p->cv.wait(lock, [p] { return p->asked; });
        p->asked = false;
        lock.unlock();
        malloc_trim(0);
        lock.lock();
      }
    }).detach();
    return p;
  }();
  {
    std::lock_guard<std::mutex> lock(t->m);
    t->asked = true;
  }
  t->cv.notify_one();
}
#endif

void ReadBlock(const text::Tokenizer& tok, text::TokenHasher* hasher, const uint8_t* bytes, size_t n, const Options& o,
               Block* out) {
  if (n >= (uint64_t(1) << 32)) ThrowInvalid("a record block must be under 4 GiB");
  // Chunks of whole lines: several per thread so uneven lines balance, none
  // so small that the per-chunk cost shows.
  const size_t want = std::max<size_t>(1, std::min<size_t>(NumThreads() * 4, n / (64 << 10)));
  std::vector<size_t> cut{0};
#ifdef CUSIM_WITH_LIBCSV
  if (o.table) cut = TableCuts(bytes, n, want, o);
#endif
  for (size_t k = 1; k < want && !o.table; ++k) {
    size_t at = std::max(cut.back(), n * k / want);
    const void* hit = at < n ? std::memchr(bytes + at, '\n', n - at) : nullptr;
    at = hit ? size_t(static_cast<const uint8_t*>(hit) - bytes) + 1 : n;
    if (at > cut.back() && at < n) cut.push_back(at);
  }
  if (!o.table) cut.push_back(n);
  std::vector<Part> parts(cut.size() - 1);
  // CUSIM_PROFILE=1: one line per block on stderr.
  PhaseLog log(hasher ? "records block (token hasher)" : "records block");
  if (hasher) {
    HashBlock(*hasher, bytes, cut, o, &parts, &log);
  } else {
    ParallelFor(parts.size(), 1, [&](size_t lo, size_t hi) {
      for (size_t c = lo; c < hi; ++c) ReadChunk(tok, bytes, cut[c], cut[c + 1], o, &parts[c]);
    });
    log.Mark("parse + tokenize");
  }

  Block& b = *out;
  b = Block();
  // Each part's place in the joined arrays, then the parts copied there on
  // the pool (a serial join was ~4 ms of a block's latency with 16 threads).
  struct At {
    size_t entries = 0, rows = 0, nnz = 0, values = 0, nums = 0, idBytes = 0, jsText = 0, jsTexts = 0, jsLines = 0;
    uint64_t lines = 0;
  };
  std::vector<At> at(parts.size() + 1);
  for (size_t c = 0; c < parts.size(); ++c) {
    const Block& p = parts[c].b;
    At a = at[c];
    a.entries += p.kind.size();
    a.rows += p.rowPtr.empty() ? 0 : p.rowPtr.size() - 1;
    a.nnz += p.cols.size();
    a.values += p.values.size();
    a.nums += p.nums.size();
    a.idBytes += p.idBytes.size();
    a.jsText += p.jsText.size();
    a.jsTexts += p.jsTextEnds.size();
    a.jsLines += p.jsLineStart.size();
    a.lines += parts[c].lines;
    at[c + 1] = a;
  }
  const At& total = at.back();
  for (auto* v : {&b.line, &b.tokens, &b.idA, &b.idB}) v->resize(total.entries);
  for (auto* v : {&b.kind, &b.idKind}) v->resize(total.entries);
  for (auto* v : {&b.keptIdA, &b.keptIdB}) v->resize(total.rows);
  for (auto* v : {&b.jsLineStart, &b.jsLineEnd}) v->resize(total.jsLines);
  b.keptIdKind.resize(total.rows);
  b.keptLine.resize(total.rows);
  b.rowPtr.resize(total.rows + 1);
  b.rowPtr[0] = 0;
  b.cols.resize(total.nnz);
  b.values.resize(total.values);
  b.nums.resize(total.nums);
  b.idBytes.resize(total.idBytes);
  b.jsText.resize(total.jsText);
  b.jsTextEnds.resize(total.jsTexts);
  b.lines = total.lines;
  const size_t bands = o.sketch && hasher ? o.sketch->bands : 0;
  b.keys.resize(total.rows * bands);
  b.empty.resize(bands ? total.rows : 0);
  auto put = [](auto& dst, size_t off, const auto& src) {
    if (!src.empty()) std::memcpy(dst.data() + off, src.data(), src.size() * sizeof(src[0]));
  };
  ParallelFor(parts.size(), 1, [&](size_t lo, size_t hi) {
    for (size_t c = lo; c < hi; ++c) {
      const Block& p = parts[c].b;
      const At& a = at[c];
      const uint32_t lineBase = uint32_t(a.lines), idBase = uint32_t(a.idBytes), numBase = uint32_t(a.nums);
      for (size_t i = 0; i < p.line.size(); ++i) b.line[a.entries + i] = p.line[i] + lineBase;
      put(b.kind, a.entries, p.kind);
      put(b.tokens, a.entries, p.tokens);
      put(b.idKind, a.entries, p.idKind);
      for (size_t i = 0; i < p.idKind.size(); ++i) {
        const uint8_t k = p.idKind[i];
        b.idA[a.entries + i] = p.idA[i] + (k == kIdString ? idBase : k == kIdNumber ? numBase : 0);
        b.idB[a.entries + i] = p.idB[i] + (k == kIdString ? idBase : 0);
      }
      put(b.keptIdKind, a.rows, p.keptIdKind);
      for (size_t i = 0; i < p.keptIdKind.size(); ++i) {
        const uint8_t k = p.keptIdKind[i];
        const uint32_t base = k == kIdString ? idBase : k == kIdNumber ? numBase : k == kIdLine ? lineBase : 0;
        b.keptIdA[a.rows + i] = p.keptIdA[i] + base;
        b.keptIdB[a.rows + i] = p.keptIdB[i] + (k == kIdString ? idBase : 0);
        b.keptLine[a.rows + i] = o.firstLine + p.keptLine[i] + double(lineBase) + 1;
      }
      put(b.nums, a.nums, p.nums);
      put(b.idBytes, a.idBytes, p.idBytes);
      for (size_t r = 1; r < p.rowPtr.size(); ++r) b.rowPtr[a.rows + r] = p.rowPtr[r] + uint32_t(a.nnz);
      put(b.cols, a.nnz, p.cols);
      put(b.values, a.values, p.values);
      for (size_t i = 0; i < p.jsTextEnds.size(); ++i)
        b.jsTextEnds[a.jsTexts + i] = p.jsTextEnds[i] + uint32_t(a.jsText);
      put(b.jsText, a.jsText, p.jsText);
      put(b.jsLineStart, a.jsLines, p.jsLineStart);
      put(b.jsLineEnd, a.jsLines, p.jsLineEnd);
      if (bands) {
        put(b.keys, a.rows * bands, p.keys);
        put(b.empty, a.rows, p.empty);
      }
    }
  });
  parts.clear();
  log.Mark("join");
#if defined(__GLIBC__)
  static std::atomic<uint32_t> blocks{0};
  if (blocks.fetch_add(1, std::memory_order_relaxed) % 8 == 7) TrimSoon();
#endif
}

}  // namespace records
}  // namespace cusim

#endif  // CUSIM_WITH_SIMDJSON
