// N-API glue for the native tokenizers: an object holding the compiled
// options (keyword and stop-word sets), with a synchronous tokenize() for the
// synchronous TextFeaturizer API and a Promise-returning tokenizeAsync().
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "classic_minhash.h"
#include "napi_util.h"
#include "owned.h"
#include "records.h"
#include "gpu.h"
#include "text.h"
#include "text_unicode.h"

namespace cusim {
namespace {

std::vector<std::string> StringList(const Napi::Object& o, const char* key) {
  std::vector<std::string> out;
  Napi::Value v = o.Get(key);
  if (v.IsUndefined() || v.IsNull()) return out;
  if (!v.IsArray()) ThrowInvalid(std::string("options.") + key + " must be an array of strings", "TypeError");
  auto a = v.As<Napi::Array>();
  out.reserve(a.Length());
  for (uint32_t i = 0; i < a.Length(); ++i) {
    Napi::Value s = a.Get(i);
    if (!s.IsString())
      ThrowInvalid(std::string("options.") + key + "[" + std::to_string(i) + "] must be a string", "TypeError");
    out.push_back(s.As<Napi::String>().Utf8Value());
  }
  return out;
}

uint32_t UintProp(const Napi::Object& o, const char* key, double fallback, double lo, double hi) {
  double v = NumPropOr(o, key, fallback);
  if (!(v >= lo && v <= hi) || v != double(uint64_t(v)))
    ThrowInvalid(std::string("options.") + key + " must be an integer in [" + std::to_string(uint64_t(lo)) + ", " +
                 std::to_string(uint64_t(hi)) + "]");
  return uint32_t(v);
}

// Checked inputs of one call, read in place (sync) or owned by the task (async).
struct Input {
  const uint8_t* bytes;
  const uint32_t* offsets;
  size_t docs;
  uint32_t minTokens;
};

Input ReadInput(const Napi::CallbackInfo& info, Inputs& in) {
  auto bytes = in.Array<uint8_t>(info[0], "bytes");
  auto offsets = in.Array<uint32_t>(info[1], "offsets");
  if (offsets.length == 0) ThrowInvalid("offsets must have documents + 1 entries");
  if (offsets.data[0] != 0) ThrowInvalid("offsets[0] must be 0");
  for (size_t i = 1; i < offsets.length; ++i) {
    if (offsets.data[i] < offsets.data[i - 1])
      ThrowInvalid("offsets must be non-decreasing (offsets[" + std::to_string(i) +
                   "] is smaller than the one before)");
  }
  if (offsets.data[offsets.length - 1] > bytes.length)
    ThrowInvalid("offsets end at " + std::to_string(offsets.data[offsets.length - 1]) + " but bytes has length " +
                 std::to_string(bytes.length));
  double minTokens = info.Length() > 2 && info[2].IsNumber() ? info[2].As<Napi::Number>().DoubleValue() : 0;
  if (!(minTokens >= 0 && minTokens <= 4294967294.0) || minTokens != double(uint64_t(minTokens)))
    ThrowInvalid("minTokens must be an integer in [0, 2^32 - 2]");
  return Input{bytes.data, offsets.data, offsets.length - 1, uint32_t(minTokens)};
}

// Small results are copied into V8-owned buffers: an external buffer per
// array (ToTyped) costs a finalizer each, which dominated one-document calls.
template <typename T>
Napi::TypedArrayOf<T> Typed(Napi::Env env, std::vector<T>&& v) {
  if (v.size() * sizeof(T) > (1u << 16)) return ToTyped(env, std::move(v));
  auto a = Napi::TypedArrayOf<T>::New(env, v.size());
  if (!v.empty()) std::memcpy(a.Data(), v.data(), v.size() * sizeof(T));
  return a;
}

// { terms: string[], tokens, indptr, ids, counts }
Napi::Value BatchToJs(Napi::Env env, text::Batch&& b) {
  // V8 aborts the process (not a JavaScript exception) on an array longer than
  // its FixedArray limit, 2^27 - 3 elements; stay clear of it.
  constexpr size_t kMaxTerms = (size_t(1) << 27) - 1024;
  if (b.termEnds.size() > kMaxTerms)
    ThrowInvalid("a batch has " + std::to_string(b.termEnds.size()) +
                 " distinct tokens, more than a JavaScript array holds (" + std::to_string(kMaxTerms) +
                 "); tokenize fewer texts per call");
  auto r = Napi::Object::New(env);
  auto terms = Napi::Array::New(env, b.termEnds.size());
  uint32_t start = 0;
  std::u16string units;
  for (size_t i = 0; i < b.termEnds.size(); ++i) {
    napi_value s;
    const char* p = b.termBytes.data() + start;
    const size_t n = b.termEnds[i] - start;
    bool ascii = true;
    for (size_t k = 0; k < n && ascii; ++k) ascii = uint8_t(p[k]) < 0x80;
    if (ascii) {
      // latin1 creation skips UTF-8 decoding.
      NAPI_THROW_IF_FAILED(env, napi_create_string_latin1(env, p, n, &s), Napi::Value());
    } else {
      // UTF-16 written here: a term can hold a lone surrogate (text_unicode.h).
      units.clear();
      for (size_t k = 0; k < n;) {
        uint32_t len;
        const uint32_t c = text::NextCodePoint(reinterpret_cast<const uint8_t*>(p) + k, &len);
        k += len;
        if (c >= 0x10000) {
          units.push_back(char16_t(0xd800 + ((c - 0x10000) >> 10)));
          units.push_back(char16_t(0xdc00 + (c & 0x3ff)));
        } else {
          units.push_back(char16_t(c));
        }
      }
      NAPI_THROW_IF_FAILED(env, napi_create_string_utf16(env, units.data(), units.size(), &s), Napi::Value());
    }
    terms.Set(uint32_t(i), Napi::Value(env, s));
    start = b.termEnds[i];
  }
  r.Set("terms", terms);
  r.Set("tokens", Typed(env, std::move(b.tokens)));
  r.Set("indptr", Typed(env, std::move(b.indptr)));
  r.Set("ids", Typed(env, std::move(b.ids)));
  r.Set("counts", Typed(env, std::move(b.counts)));
  return r;
}

// { samples, seed, bands, rows }: classic MinHash band keys of the kept rows
// (text.h Sketch), under datasketch's permutations for the seed.
std::shared_ptr<const text::Sketch> SketchArg(const Napi::Value& v, const std::string& name) {
  if (!v.IsObject()) ThrowInvalid(name + " must be an object { samples, seed, bands, rows }", "TypeError");
  Napi::Object o = v.As<Napi::Object>();
  auto sk = std::make_shared<text::Sketch>();
  const uint32_t samples = UintProp(o, "samples", 0, 1, 1 << 20);
  const double seed = NumPropOr(o, "seed", -1);
  if (!(seed >= 0 && seed <= 4294967295.0) || seed != double(uint64_t(seed)))
    ThrowInvalid(name + ".seed must be an integer in [0, 2^32 - 1]");
  sk->bands = UintProp(o, "bands", 0, 1, samples);
  sk->rows = UintProp(o, "rows", 0, 1, samples);
  if (uint64_t(sk->bands) * sk->rows > samples) ThrowInvalid(name + ": bands × rows must be at most samples");
  sk->a.resize(samples);
  sk->b.resize(samples);
  minhash::SeedPermutations(uint32_t(seed), samples, sk->a.data(), sk->b.data());
  return sk;
}

// TextTokenizer / TokenHasher options: { mode, minLength, dropKeywords, keywords, stopWords, q, lowercase, pad }.
text::Options ParseOptions(const Napi::Object& o) {
  text::Options opt;
  const std::string mode = StrPropOr(o, "mode", "words");
  if (mode == "code")
    opt.mode = text::Mode::Code;
  else if (mode == "words")
    opt.mode = text::Mode::Words;
  else if (mode == "qgrams")
    opt.mode = text::Mode::Qgrams;
  else
    ThrowInvalid("options.mode must be 'code', 'words' or 'qgrams'");
  opt.minLength = UintProp(o, "minLength", 1, 1, 1 << 20);
  opt.q = UintProp(o, "q", 3, 1, 1024);
  opt.dropKeywords = BoolPropOr(o, "dropKeywords", true);
  opt.lowercase = BoolPropOr(o, "lowercase", true);
  opt.pad = BoolPropOr(o, "pad", false);
  opt.keywords = StringList(o, "keywords");
  opt.stopWords = StringList(o, "stopWords");
  return opt;
}

// The hasher of a TokenHasher object (null: not one, or disposed).
std::shared_ptr<text::TokenHasher> TokenHasherOf(const Napi::Value& v);

class TextTokenizerWrap : public ResourceWrap<TextTokenizerWrap, text::Tokenizer> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "TextTokenizer",
                       {InstanceMethod("tokenize", &TextTokenizerWrap::Tokenize),
                        InstanceMethod("tokenizeAsync", &TextTokenizerWrap::TokenizeAsync),
                        InstanceMethod("hashedRowsAsync", &TextTokenizerWrap::HashedRowsAsync),
#ifdef CUSIM_WITH_SIMDJSON
                        InstanceMethod("recordsAsync", &TextTokenizerWrap::RecordsAsync),
#endif
                        InstanceMethod("dispose", &TextTokenizerWrap::DisposeMethod)});
  }

  // new TextTokenizer({ mode, minLength, dropKeywords, keywords, stopWords, q, lowercase, pad })
  explicit TextTokenizerWrap(const Napi::CallbackInfo& info) : ResourceWrap(info) {
    try {
      Args args(info);
      text::Options opt = ParseOptions(args.Obj(0, "options"));
      impl_ = std::make_shared<text::Tokenizer>(opt);
    } catch (const Error& e) {
      throw MakeJsError(info.Env(), e);
    }
  }

 private:
  Napi::Value DisposeMethod(const Napi::CallbackInfo& info) { return Dispose(info); }

  // tokenize(bytes: Uint8Array, offsets: Uint32Array, minTokens) -> batch
  Napi::Value Tokenize(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto impl = Get("TextTokenizer");
      Inputs owned(Inputs::Use::Sync);
      Input in = ReadInput(info, owned);
      text::Batch b;
      impl->Run(in.bytes, in.offsets, in.docs, in.minTokens, &b, /*wtf8=*/true);
      return BatchToJs(info.Env(), std::move(b));
    });
  }

  // tokenizeAsync(bytes, offsets, minTokens) -> Promise<batch>
  Napi::Value TokenizeAsync(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto impl = Get("TextTokenizer");
      auto owned = std::make_shared<Inputs>(Inputs::Use::Async);
      Input in = ReadInput(info, *owned);
      auto b = std::make_shared<text::Batch>();
      return RunAsync(
          info.Env(), [=] { impl->Run(in.bytes, in.offsets, in.docs, in.minTokens, b.get(), /*wtf8=*/true); },
          [=](Napi::Env env) { return BatchToJs(env, std::move(*b)); }, {}, owned);
    });
  }

  // hashedRowsAsync(bytes, offsets, minTokens, bits) -> Promise<{ tokens, rowPtr, cols, values, kept }>:
  // the documents' rows over hashed columns (see AssembleHashedRows); tokens[d]
  // is 0xFFFFFFFF for documents the caller must tokenize itself.
  Napi::Value HashedRowsAsync(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto impl = Get("TextTokenizer");
      const double bits = info.Length() > 3 && info[3].IsNumber() ? info[3].As<Napi::Number>().DoubleValue() : -1;
      if (!(bits >= 1 && bits <= 32) || bits != double(uint32_t(bits)))
        ThrowInvalid("bits must be an integer in [1, 32]");
      const uint32_t mask = bits == 32 ? 0xffffffffu : (1u << uint32_t(bits)) - 1;
      auto owned = std::make_shared<Inputs>(Inputs::Use::Async);
      Input in = ReadInput(info, *owned);
      auto b = std::make_shared<text::Batch>();
      auto rows = std::make_shared<text::Rows>();
      return RunAsync(
          info.Env(),
          [=] {
            impl->Run(in.bytes, in.offsets, in.docs, in.minTokens, b.get(), /*wtf8=*/true);
            text::AssembleHashedRows(*b, in.minTokens, mask, rows.get());
          },
          [=](Napi::Env env) -> Napi::Value {
            auto r = Napi::Object::New(env);
            r.Set("tokens", Typed(env, std::move(b->tokens)));
            r.Set("rowPtr", Typed(env, std::move(rows->rowPtr)));
            r.Set("cols", Typed(env, std::move(rows->cols)));
            r.Set("values", Typed(env, std::move(rows->values)));
            r.Set("kept", double(rows->kept));
            return r;
          },
          {}, owned);
    });
  }

#ifdef CUSIM_WITH_SIMDJSON
  // recordsAsync(block, { jsonl, field, idField, maxRecordBytes, minTokens, bits, firstLine, handed })
  // -> Promise<records.h Block>: a block of whole lines read, tokenized and
  // hashed natively (records.h). With `handed`, lib/ gave the block's buffer
  // over (only this call reaches it) and left Padding() bytes of it past the
  // block: it is read in place, not copied. A block with no entry left to
  // JavaScript comes back without its per-entry arrays (the kept rows' are
  // all the caller needs).
  Napi::Value RecordsAsync(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto impl = Get("TextTokenizer");
      Args args(info);
      Napi::Object o = args.Obj(1, "options");
      records::Options opt;
      opt.jsonl = BoolPropOr(o, "jsonl", true);
      opt.field = StrPropOr(o, "field", "text");
      opt.idField = StrPropOr(o, "idField", "id");
      const double max = NumPropOr(o, "maxRecordBytes", 0);
      if (!(max >= 0 && max <= 9007199254740991.0))
        ThrowInvalid("options.maxRecordBytes must be a non-negative integer");
      opt.maxRecordBytes = uint64_t(max);
      opt.minTokens = UintProp(o, "minTokens", 0, 0, 4294967294.0);
      const uint32_t bits = UintProp(o, "bits", 32, 1, 32);
      opt.mask = bits == 32 ? 0xffffffffu : (1u << bits) - 1;
      opt.firstLine = NumPropOr(o, "firstLine", 0);
      if (!(opt.firstLine >= 0 && opt.firstLine <= 9007199254740991.0) ||
          opt.firstLine != double(uint64_t(opt.firstLine)))
        ThrowInvalid("options.firstLine must be a non-negative integer");
      // Tables (CSV, TSV): { delimiter (one byte), quoted, textColumn, idColumn }.
      Napi::Value table = o.Get("table");
      if (table.IsObject()) {
        Napi::Object t = table.As<Napi::Object>();
#ifndef CUSIM_WITH_LIBCSV
        ThrowInvalid("options.table: the addon was built without libcsv (the native CSV reader)");
#endif
        opt.table = true;
        const std::string delimiter = StrPropOr(t, "delimiter", ",");
        opt.quoted = BoolPropOr(t, "quoted", true);
        if (delimiter.size() != 1 || delimiter[0] == '\r' || delimiter[0] == '\n' ||
            (opt.quoted && delimiter[0] == '"'))
          ThrowInvalid("options.table.delimiter must be one byte other than a quote or a line break");
        opt.delimiter = uint8_t(delimiter[0]);
        opt.textColumn = int64_t(UintProp(t, "textColumn", 0, 0, 4294967294.0));
        const double id = NumPropOr(t, "idColumn", -1);
        if (!(id >= -1 && id <= 4294967294.0) || id != double(int64_t(id)))
          ThrowInvalid("options.table.idColumn must be -1 or a column index");
        opt.idColumn = int64_t(id);
      }
      const bool handed = BoolPropOr(o, "handed", false);
      opt.values = BoolPropOr(o, "values", true);
      // A TokenHasher (made with this tokenizer's options) splits and hashes instead.
      std::shared_ptr<text::TokenHasher> hasher;
      Napi::Value h = o.Get("hasher");
      if (!h.IsUndefined() && !(hasher = TokenHasherOf(h)))
        ThrowInvalid("options.hasher must be a TokenHasher", "TypeError");
      Napi::Value sk = o.Get("sketch");
      if (!sk.IsUndefined()) {
        if (!hasher) ThrowInvalid("options.sketch needs options.hasher");
        opt.sketch = SketchArg(sk, "options.sketch");
      }
      Inputs in(Inputs::Use::Sync);
      auto block = in.Array<uint8_t>(info[0], "block");
      const size_t n = block.length;
      std::shared_ptr<const uint8_t> bytes;
      std::vector<Napi::Value> keep;
      napi_value buffer = nullptr;
      size_t offset = 0, bufferBytes = 0;
      bool shared = false;
      if (handed && info[0].IsTypedArray()) {
        napi_typedarray_type t;
        size_t len;
        void* data;
        napi_get_typedarray_info(info.Env(), info[0], &t, &len, &data, &buffer, &offset);
        bool isAb = false;
        napi_is_arraybuffer(info.Env(), buffer, &isAb);
        shared = !isAb;
        if (isAb) napi_get_arraybuffer_info(info.Env(), buffer, nullptr, &bufferBytes);
      }
      if (handed && !shared && n && offset + n + records::Padding() <= bufferBytes) {
        // Read in place; the typed array (and so its buffer) lives as long as the call.
        bytes = std::shared_ptr<const uint8_t>(block.data, [](const uint8_t*) {});
        keep.push_back(info[0]);
      } else {
        // A padded copy: simdjson reads up to Padding() bytes past a line.
        // Not zero-filled first: only the padding needs zeros.
        std::shared_ptr<uint8_t[]> copy(new uint8_t[n + records::Padding()]);
        if (n) std::memcpy(copy.get(), block.data, n);
        std::memset(copy.get() + n, 0, records::Padding());
        bytes = std::shared_ptr<const uint8_t>(copy, copy.get());
      }
      auto out = std::make_shared<records::Block>();
      return RunAsync(
          info.Env(), [=] { records::ReadBlock(*impl, hasher.get(), bytes.get(), n, opt, out.get()); },
          [=](Napi::Env env) -> Napi::Value {
            records::Block& b = *out;
            auto r = Napi::Object::New(env);
            r.Set("lines", double(b.lines));
            r.Set("entries", double(b.kind.size()));
            if (!b.jsTextEnds.empty() || !b.jsLineStart.empty()) {
              r.Set("line", Typed(env, std::move(b.line)));
              r.Set("kind", Typed(env, std::move(b.kind)));
              r.Set("idKind", Typed(env, std::move(b.idKind)));
              r.Set("idA", Typed(env, std::move(b.idA)));
              r.Set("idB", Typed(env, std::move(b.idB)));
            }
            r.Set("tokens", Typed(env, std::move(b.tokens)));
            r.Set("nums", Typed(env, std::move(b.nums)));
            r.Set("idBytes", Typed(env, std::move(b.idBytes)));
            r.Set("rowPtr", Typed(env, std::move(b.rowPtr)));
            r.Set("cols", Typed(env, std::move(b.cols)));
            if (opt.values) r.Set("values", Typed(env, std::move(b.values)));
            r.Set("keptIdKind", Typed(env, std::move(b.keptIdKind)));
            r.Set("keptIdA", Typed(env, std::move(b.keptIdA)));
            r.Set("keptIdB", Typed(env, std::move(b.keptIdB)));
            r.Set("keptLine", Typed(env, std::move(b.keptLine)));
            r.Set("jsText", Typed(env, std::move(b.jsText)));
            r.Set("jsTextEnds", Typed(env, std::move(b.jsTextEnds)));
            r.Set("jsLineStart", Typed(env, std::move(b.jsLineStart)));
            r.Set("jsLineEnd", Typed(env, std::move(b.jsLineEnd)));
            if (opt.sketch) {
              // Staged, as lshBandKeys gives them: kept by a dedup as they are.
              auto keys = std::make_shared<std::vector<uint64_t>>(std::move(b.keys));
              auto empty = std::make_shared<std::vector<uint8_t>>(std::move(b.empty));
              auto own = std::make_shared<Inputs>(Inputs::Use::Async);
              own->Hold(keys);
              own->Hold(empty);
              r.Set("keys", NewStagedArray(env, own, keys->data(), keys->size(), napi_biguint64_array));
              r.Set("empty", NewStagedArray(env, own, empty->data(), empty->size(), napi_uint8_array));
            }
            return r;
          },
          keep);
    });
  }
#endif
};

// new TokenHasher(options, { device, chunkBytes }): per document, the hashToken()
// of every token (text.h), on the CPU (device -1, the default) or on one
// GPU, made once here. hashAsync(bytes, offsets, { sorted }?) -> Promise<{ indptr: BigUint64Array, hashes }>.
// recordsAsync's `hasher` option takes one (TokenHasherOf).
const napi_type_tag kHasherTag = {0x6375736968617368ull, 0x6572746f6b656e31ull};

class TokenHasherWrap : public ResourceWrap<TokenHasherWrap, text::TokenHasher> {
 public:
  std::shared_ptr<text::TokenHasher> hasher() const { return impl_; }

  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "TokenHasher",
                       {InstanceMethod("hashAsync", &TokenHasherWrap::HashAsync),
                        InstanceMethod("dispose", &TokenHasherWrap::DisposeMethod)});
  }

  explicit TokenHasherWrap(const Napi::CallbackInfo& info) : ResourceWrap(info) {
    napi_type_tag_object(info.Env(), info.This(), &kHasherTag);
    try {
      Args args(info);
      const text::Options opt = ParseOptions(args.Obj(0, "options"));
      Napi::Object b =
          info.Length() > 1 && info[1].IsObject() ? info[1].As<Napi::Object>() : Napi::Object::New(info.Env());
      const double device = NumPropOr(b, "device", -1);
      if (!(device >= -1 && device < 1024) || device != double(int64_t(device)))
        ThrowInvalid("backend.device must be -1 (the CPU) or a GPU index");
      const double chunk = NumPropOr(b, "chunkBytes", double(64 << 20));
      if (!(chunk >= 1 && chunk <= 9007199254740991.0)) ThrowInvalid("backend.chunkBytes must be a positive integer");
      if (device < 0)
        impl_ = std::shared_ptr<text::TokenHasher>(text::MakeCpuTokenHasher(opt));
      else
        impl_ = std::shared_ptr<text::TokenHasher>(
            text::MakeCudaTokenHasher(opt, ResolveDevices({int(device)}).at(0), uint64_t(chunk)));
    } catch (const Error& e) {
      throw MakeJsError(info.Env(), e);
    }
  }

 private:
  Napi::Value DisposeMethod(const Napi::CallbackInfo& info) { return Dispose(info); }

  Napi::Value HashAsync(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto impl = Get("TokenHasher");
      auto owned = std::make_shared<Inputs>(Inputs::Use::Async);
      Input in = ReadInput(info, *owned);
      const bool opts = info.Length() > 2 && info[2].IsObject();
      const bool sorted = opts && BoolPropOr(info[2].As<Napi::Object>(), "sorted", false);
      // { sketch }: each document's band keys and empty flag too (text.h Sketch).
      std::shared_ptr<const text::Sketch> sketch;
      if (opts && !info[2].As<Napi::Object>().Get("sketch").IsUndefined())
        sketch = SketchArg(info[2].As<Napi::Object>().Get("sketch"), "options.sketch");
      auto off = std::make_shared<std::vector<uint64_t>>(in.offsets, in.offsets + in.docs + 1);
      auto out = std::make_shared<text::TokenHashes>();
      return RunAsync(
          info.Env(),
          [=] { impl->Hash(in.bytes, off->data(), in.docs, /*wtf8=*/true, sorted, out.get(), sketch.get()); },
          [=](Napi::Env env) -> Napi::Value {
            auto r = Napi::Object::New(env);
            r.Set("indptr", Typed(env, std::move(out->indptr)));
            r.Set("hashes", Typed(env, std::move(out->hashes)));
            if (sketch) {
              r.Set("keys", Typed(env, std::move(out->keys)));
              r.Set("empty", Typed(env, std::move(out->empty)));
            }
            return r;
          },
          {}, owned);
    });
  }
};

std::shared_ptr<text::TokenHasher> TokenHasherOf(const Napi::Value& v) {
  bool tagged = false;
  if (!v.IsObject() || napi_check_object_type_tag(v.Env(), v, &kHasherTag, &tagged) != napi_ok || !tagged)
    return nullptr;
  return TokenHasherWrap::Unwrap(v.As<Napi::Object>())->hasher();
}

// assembleRows(indptr, tokens, minTokens, ids, counts, remap) -> { rowPtr, cols, values, kept }
Napi::Value AssembleRows(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    if (info.Length() < 3 || !info[2].IsNumber()) ThrowInvalid("minTokens must be a number", "TypeError");
    const double minTokens = info[2].As<Napi::Number>().DoubleValue();
    if (!(minTokens >= 0 && minTokens <= 4294967295.0)) ThrowInvalid("minTokens must be in [0, 2^32 - 1]");
    Inputs in(Inputs::Use::Sync);
    auto indptr = in.Array<uint32_t>(info[0], "indptr");
    auto tokens = in.Array<uint32_t>(info[1], "tokens");
    auto ids = in.Array<uint32_t>(info[3], "ids");
    auto counts = in.Array<uint32_t>(info[4], "counts");
    auto remap = in.Array<int32_t>(info[5], "remap");
    if (indptr.length != tokens.length + 1) ThrowInvalid("indptr must have tokens.length + 1 entries");
    if (counts.length != ids.length) ThrowInvalid("counts and ids must have the same length");
    text::Rows rows;
    text::AssembleRows(indptr.data, tokens.data, tokens.length, uint32_t(std::ceil(minTokens)), ids.data, counts.data,
                       ids.length, remap.data, remap.length, &rows);
    Napi::Env env = info.Env();
    auto r = Napi::Object::New(env);
    r.Set("rowPtr", Typed(env, std::move(rows.rowPtr)));
    r.Set("cols", Typed(env, std::move(rows.cols)));
    r.Set("values", Typed(env, std::move(rows.values)));
    r.Set("kept", double(rows.kept));
    return r;
  });
}

// setUnicodeTables(stage1: Uint16Array, blocks: Uint32Array, extra: Uint32Array):
// installs lib/text/unicode-tables.ts's tables (the first call wins).
Napi::Value SetUnicodeTables(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Inputs in(Inputs::Use::Sync);
    auto stage1 = in.Array<uint16_t>(info[0], "stage1");
    auto blocks = in.Array<uint32_t>(info[1], "blocks");
    auto extra = in.Array<uint32_t>(info[2], "extra");
    text::UnicodeTables t;
    t.stage1.assign(stage1.data, stage1.data + stage1.length);
    t.blocks.assign(blocks.data, blocks.data + blocks.length);
    t.extra.assign(extra.data, extra.data + extra.length);
    text::SetUnicodeTables(std::move(t));
    return info.Env().Undefined();
  });
}

void Init(Napi::Env env, Napi::Object exports) {
  exports.Set("setUnicodeTables", Napi::Function::New(env, SetUnicodeTables, "setUnicodeTables"));
  exports.Set("TextTokenizer", TextTokenizerWrap::Define(env));
  exports.Set("TokenHasher", TokenHasherWrap::Define(env));
#ifdef CUSIM_WITH_SIMDJSON
  // The native record reader's parser, for messages saying which reader runs.
  exports.Set("recordReader", Napi::String::New(env, std::string("simdjson ") + records::SimdjsonVersion()));
#ifdef CUSIM_WITH_LIBCSV
  // The native CSV reader's parser ('libcsv 3.0.3'); absent: CSV is read in JavaScript.
  exports.Set("tableReader", Napi::String::New(env, records::TableParserVersion()));
#endif
#endif
  exports.Set("assembleTextRows", Napi::Function::New(env, AssembleRows, "assembleTextRows"));
}

}  // namespace

CUSIM_REGISTER(text, Init);

}  // namespace cusim
