// The N-API glue of MinHashLSH's Redis storage: reads and checks the
// arguments, runs native/lsh_store.h's compute in a Task and converts the
// results (entry layouts: lsh_store.h).
#include <string>

#include "lsh.h"
#include "lsh_store.h"
#include "napi_util.h"
#include "owned.h"

namespace cusim {
namespace {

using lsh_store::Bytes;
using lsh_store::kBandEntry;
using lsh_store::kNone;

uint32_t U32(const Napi::Object& o, const char* key, uint32_t lo, uint32_t hi) {
  const double v = NumProp(o, key, "options");
  if (!(v >= lo && v <= hi) || v != double(uint32_t(v)))
    ThrowInvalid(std::string("options.") + key + " must be an integer in [" + std::to_string(lo) + ", " +
                 std::to_string(hi) + "]");
  return uint32_t(v);
}

template <class T>
Napi::Value Typed(Napi::Env env, std::vector<T>&& v) {
  return ToTyped(env, std::move(v));
}

Napi::Value BigU64(Napi::Env env, std::vector<uint64_t>&& v) { return ToTyped(env, std::move(v)); }

// Every element is read (getters may run) before any is copied into `in`.
std::vector<Bytes> BytesList(const Napi::Value& v, const char* name, Inputs& in) {
  if (!v.IsArray()) ThrowInvalid(std::string(name) + " must be an array of Uint8Array", "TypeError");
  auto a = v.As<Napi::Array>();
  std::vector<Napi::Value> items;
  for (uint32_t i = 0; i < a.Length(); ++i) items.push_back(a.Get(i));
  std::vector<Bytes> out;
  for (size_t i = 0; i < items.size(); ++i) {
    auto b = in.Array<uint8_t>(items[i], std::string(name) + "[" + std::to_string(i) + "]", true);
    out.push_back({b.data, b.length});
  }
  return out;
}

// lshStoreEntries(signatures, ids, { samples, bands, rows, partitions })
//   -> { band: Uint8Array, bandOffsets: Float64Array, rec: Uint8Array, recOffsets: Float64Array }
// Band entries grouped by key band * partitions + partition (empty rows have
// none); one record per row grouped by id partition.
Napi::Value Entries(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Napi::Object o = Args(info).Obj(2, "options");
    const uint32_t samples = U32(o, "samples", 1, 1u << 20), P = U32(o, "partitions", 1, 1u << 16);
    lsh::Params p;
    p.bands = U32(o, "bands", 1, samples);
    p.rows = U32(o, "rows", 1, samples);
    if (uint64_t(p.bands) * p.rows > samples) ThrowInvalid("bands * rows must be <= samples");
    const double wd = NumPropOr(o, "width", 2);
    if (wd != 1 && wd != 2) ThrowInvalid("options.width must be 1 (classic signatures) or 2 (weighted)");
    const uint32_t width = uint32_t(wd);
    auto in = std::make_shared<Inputs>(Inputs::Use::Async);
    auto ids = in->Array<uint32_t>(info[1], "ids");
    auto sig = in->Array<uint32_t>(info[0], "signatures", true);
    if (sig.length != uint64_t(ids.length) * samples * width)
      ThrowInvalid("signatures must hold ids.length rows of samples * " + std::to_string(width) + " words");
    const uint32_t* sd = sig.data;
    const uint32_t* idd = ids.data;
    const uint64_t n = ids.length;
    auto out = std::make_shared<lsh_store::Entries>();
    return RunAsync(
        info.Env(),
        [=] {
          lsh::SigView s;
          s.data = sd, s.n = n, s.samples = samples, s.width = width;
          *out = lsh_store::MakeEntries(s, idd, p, P);
        },
        [=](Napi::Env env) -> Napi::Value {
          auto r = Napi::Object::New(env);
          r.Set("band", Typed(env, std::move(out->band)));
          r.Set("bandOffsets", Typed(env, std::move(out->bandOffsets)));
          r.Set("rec", Typed(env, std::move(out->rec)));
          r.Set("recOffsets", Typed(env, std::move(out->recOffsets)));
          return r;
        },
        {}, in);
  });
}

// lshStoreQuery(stored: Uint8Array[], queries: Uint8Array[], queryCount, removed: Uint32Array)
//   -> { indptr, ids }: stored[k] and queries[k] are band entries of one key
// (query entries carry the query's index as id); hits deduplicated, ascending,
// removed ids dropped.
Napi::Value Query(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    const double qc = Args(info).Num(2, "queryCount");
    if (!(qc >= 0 && qc <= 4294967295.0) || qc != double(uint64_t(qc))) ThrowInvalid("queryCount must be a uint32");
    auto in = std::make_shared<Inputs>(Inputs::Use::Async);
    auto stored = BytesList(info[0], "stored", *in);
    auto queries = BytesList(info[1], "queries", *in);
    if (stored.size() != queries.size()) ThrowInvalid("stored and queries must have the same length");
    auto removed = in->Array<uint32_t>(info[3], "removed");
    const uint64_t nq = uint64_t(qc);
    const uint32_t* rm = removed.data;
    const uint64_t nrm = removed.length;
    auto out = std::make_shared<lsh_store::Hits>();
    return RunAsync(
        info.Env(), [=] { *out = lsh_store::Query(stored, queries, nq, rm, nrm); },
        [=](Napi::Env env) -> Napi::Value {
          auto r = Napi::Object::New(env);
          r.Set("indptr", Typed(env, std::move(out->indptr)));
          r.Set("ids", Typed(env, std::move(out->ids)));
          return r;
        },
        {}, in);
  });
}

// lshStoreRecords(records: Uint8Array[], removed: Uint32Array) -> { ids, fp: BigUint64Array, empty: Uint8Array }
// Live rows, ascending by id; repeated identical records (a batch inserted
// again after a restart) count once; one id with two signatures is an error.
Napi::Value Records(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto in = std::make_shared<Inputs>(Inputs::Use::Async);
    auto recs = BytesList(info[0], "records", *in);
    auto removed = in->Array<uint32_t>(info[1], "removed");
    const uint32_t* rm = removed.data;
    const uint64_t nrm = removed.length;
    auto out = std::make_shared<lsh_store::LiveRows>();
    return RunAsync(
        info.Env(), [=] { *out = lsh_store::Records(recs, rm, nrm); },
        [=](Napi::Env env) -> Napi::Value {
          auto r = Napi::Object::New(env);
          r.Set("ids", Typed(env, std::move(out->ids)));
          r.Set("fp", BigU64(env, std::move(out->fp)));
          r.Set("empty", Typed(env, std::move(out->empty)));
          return r;
        },
        {}, in);
  });
}

// lshStoreClasses(fp: BigUint64Array, empty: Uint8Array) -> { ptr, members }
// Runs of two or more non-empty rows with one fingerprint (members ascending,
// runs by first member): the only rows whose signatures can be identical.
Napi::Value Classes(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Inputs in(Inputs::Use::Sync);
    auto fp = in.Array<uint64_t>(info[0], "fp");
    auto empty = in.Array<uint8_t>(info[1], "empty");
    if (empty.length != fp.length) ThrowInvalid("fp and empty must have the same length");
    lsh_store::Classes c = lsh_store::FingerprintClasses(fp.data, empty.data, fp.length);
    auto r = Napi::Object::New(info.Env());
    r.Set("ptr", Typed(info.Env(), std::move(c.ptr)));
    r.Set("members", Typed(info.Env(), std::move(c.members)));
    return r;
  });
}

// lshStorePairs(entries: Uint8Array, live: Uint32Array, rep: Uint32Array) -> BigUint64Array
// Pairs (a << 32 | b, a < b) of representatives (rep[index of id]) sharing a
// bucket in one band key; ids not live are dropped.
Napi::Value Pairs(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto in = std::make_shared<Inputs>(Inputs::Use::Async);
    auto e = in->Array<uint8_t>(info[0], "entries", true);
    auto live = in->Array<uint32_t>(info[1], "live");
    auto rep = in->Array<uint32_t>(info[2], "rep");
    if (rep.length != live.length) ThrowInvalid("rep must have one entry per live id");
    for (size_t i = 0; i < rep.length; ++i)
      if (rep.data[i] != kNone && rep.data[i] >= rep.length) ThrowInvalid("rep out of range");
    if (e.length % kBandEntry)
      throw Error("CUSIM_STORAGE_ERROR", "a band key holds a partial entry: not a cusim LSH index, or damaged");
    const uint8_t* ed = e.data;
    const uint64_t ne = e.length / kBandEntry;
    const uint32_t* ld = live.data;
    const uint32_t* rd = rep.data;
    const uint64_t nl = live.length;
    auto out = std::make_shared<std::vector<uint64_t>>();
    return RunAsync(
        info.Env(), [=] { *out = lsh_store::Pairs(ed, ne, ld, rd, nl); },
        [=](Napi::Env env) -> Napi::Value { return BigU64(env, std::move(*out)); }, {}, in);
  });
}

// lshStoreMerge(chunks: BigUint64Array[]) -> BigUint64Array, sorted and unique.
Napi::Value Merge(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    if (!info[0].IsArray()) ThrowInvalid("chunks must be an array of BigUint64Array", "TypeError");
    auto a = info[0].As<Napi::Array>();
    std::vector<Napi::Value> items;
    for (uint32_t i = 0; i < a.Length(); ++i) items.push_back(a.Get(i));
    auto in = std::make_shared<Inputs>(Inputs::Use::Async);
    std::vector<ArrayArg<uint64_t>> parts;
    for (size_t i = 0; i < items.size(); ++i)
      parts.push_back(in->Array<uint64_t>(items[i], "chunks[" + std::to_string(i) + "]", true));
    auto out = std::make_shared<std::vector<uint64_t>>();
    return RunAsync(
        info.Env(),
        [=] {
          std::vector<std::pair<const uint64_t*, uint64_t>> chunks;
          for (auto& p : parts) chunks.emplace_back(p.data, p.length);
          *out = lsh_store::Merge(chunks);
        },
        [=](Napi::Env env) -> Napi::Value { return BigU64(env, std::move(*out)); }, {}, in);
  });
}

// lshStoreEstimate(signatures, samples, a, b) -> Float32Array: for local rows
// a[k], b[k], the fraction of equal samples, as the in-memory groups computes it.
Napi::Value Estimate(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    const double sd = Args(info).Num(1, "samples");
    if (!(sd >= 1 && sd <= (1u << 20)) || sd != double(uint32_t(sd)))
      ThrowInvalid("samples must be an integer in [1, 2^20]");
    const uint32_t samples = uint32_t(sd);
    const double wd = info.Length() > 4 && info[4].IsNumber() ? info[4].As<Napi::Number>().DoubleValue() : 2;
    if (wd != 1 && wd != 2) ThrowInvalid("width must be 1 (classic signatures) or 2 (weighted)");
    const uint32_t width = uint32_t(wd);
    Inputs in(Inputs::Use::Sync);
    auto sig = in.Array<uint32_t>(info[0], "signatures");
    auto a = in.Array<uint32_t>(info[2], "a");
    auto b = in.Array<uint32_t>(info[3], "b");
    if (a.length != b.length || sig.length % (uint64_t(samples) * width)) ThrowInvalid("bad estimate arguments");
    const uint64_t rows = sig.length / (uint64_t(samples) * width);
    std::vector<uint64_t> pairs(a.length);
    for (size_t k = 0; k < a.length; ++k) {
      if (a.data[k] >= rows || b.data[k] >= rows) ThrowInvalid("pair row out of range");
      pairs[k] = (uint64_t(a.data[k]) << 32) | b.data[k];
    }
    lsh::SigView view;
    view.data = sig.data, view.n = rows, view.samples = samples, view.width = width;
    return Typed(info.Env(), lsh::EstimatePairs(view, pairs));
  });
}

// lshStoreRowPairs(matrix, a, b, sets?) -> { jaccard: Float64Array, same: Uint8Array }: with
// `sets` (classic signatures) rows are sets of columns and weights are ignored, as lsh::Groups does.
Napi::Value RowPairs(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    const bool sets = info.Length() > 3 && info[3].ToBoolean().Value();
    auto in = std::make_shared<Inputs>(Inputs::Use::Async);
    const CsrView m = in->Csr(info[0], "matrix");
    auto a = in->Array<uint32_t>(info[1], "a");
    auto b = in->Array<uint32_t>(info[2], "b");
    if (a.length != b.length) ThrowInvalid("a and b must have the same length");
    const uint32_t* ad = a.data;
    const uint32_t* bd = b.data;
    const uint64_t n = a.length;
    for (uint64_t k = 0; k < n; ++k)
      if (ad[k] >= m.rows || bd[k] >= m.rows) ThrowInvalid("pair row out of range");
    auto j = std::make_shared<std::vector<double>>(n);
    auto same = std::make_shared<std::vector<uint8_t>>(n);
    return RunAsync(
        info.Env(),
        [=] {
          ValidateCsr(m, "matrix");
          lsh::RowPairs(m, ad, bd, n, sets, j->data(), same->data());
        },
        [=](Napi::Env env) -> Napi::Value {
          auto r = Napi::Object::New(env);
          r.Set("jaccard", Typed(env, std::move(*j)));
          r.Set("same", Typed(env, std::move(*same)));
          return r;
        },
        {}, in);
  });
}

// lshStoreFinish(live, rep, edges: BigUint64Array, similarity: Float32Array)
//   -> { group, count, left, right, similarity }
// edges are verified representative pairs (indices, a < b); lsh::Components
// adds the class members and labels groups, as lsh::Groups does.
Napi::Value Finish(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Inputs in(Inputs::Use::Sync);
    auto live = in.Array<uint32_t>(info[0], "live");
    auto rep = in.Array<uint32_t>(info[1], "rep");
    auto edges = in.Array<uint64_t>(info[2], "edges");
    auto sims = in.Array<float>(info[3], "similarity");
    const uint64_t n = live.length;
    if (rep.length != n || sims.length != edges.length) ThrowInvalid("bad finish arguments");
    for (uint64_t k = 0; k < edges.length; ++k)
      if ((edges.data[k] >> 32) >= n || uint32_t(edges.data[k]) >= n) ThrowInvalid("edge out of range");
    for (uint64_t i = 0; i < n; ++i)
      if (rep.data[i] != kNone && rep.data[i] >= n) ThrowInvalid("rep out of range");
    lsh::GroupsResult g = lsh::Components(std::vector<uint32_t>(rep.data, rep.data + n),
                                          std::vector<uint64_t>(edges.data, edges.data + edges.length),
                                          std::vector<float>(sims.data, sims.data + sims.length), live.data);
    auto r = Napi::Object::New(info.Env());
    r.Set("group", Typed(info.Env(), std::move(g.group)));
    r.Set("count", double(g.count));
    r.Set("left", Typed(info.Env(), std::move(g.pairs.left)));
    r.Set("right", Typed(info.Env(), std::move(g.pairs.right)));
    r.Set("similarity", Typed(info.Env(), std::move(g.pairs.similarity)));
    return r;
  });
}

void Init(Napi::Env env, Napi::Object exports) {
  exports.Set("lshStoreEntries", Napi::Function::New(env, Entries, "lshStoreEntries"));
  exports.Set("lshStoreQuery", Napi::Function::New(env, Query, "lshStoreQuery"));
  exports.Set("lshStoreRecords", Napi::Function::New(env, Records, "lshStoreRecords"));
  exports.Set("lshStoreClasses", Napi::Function::New(env, Classes, "lshStoreClasses"));
  exports.Set("lshStorePairs", Napi::Function::New(env, Pairs, "lshStorePairs"));
  exports.Set("lshStoreMerge", Napi::Function::New(env, Merge, "lshStoreMerge"));
  exports.Set("lshStoreEstimate", Napi::Function::New(env, Estimate, "lshStoreEstimate"));
  exports.Set("lshStoreRowPairs", Napi::Function::New(env, RowPairs, "lshStoreRowPairs"));
  exports.Set("lshStoreFinish", Napi::Function::New(env, Finish, "lshStoreFinish"));
}

}  // namespace

CUSIM_REGISTER(lsh_store, Init);

}  // namespace cusim
