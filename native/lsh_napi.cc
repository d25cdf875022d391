// N-API glue for MinHash LSH: stateless calls over the signatures and ids the
// TypeScript object holds.
#include "gpu.h"
#include "lsh.h"
#include "napi_util.h"
#include "owned.h"
#include "row_spill_napi.h"

namespace cusim {
namespace {

struct Common {
  lsh::SigView sig;
  const uint32_t* ids = nullptr;
  lsh::Params params;
  std::shared_ptr<const lsh::Bucketer> bucketer;
};

uint32_t U32Prop(const Napi::Object& o, const char* key, uint32_t lo, uint32_t hi) {
  double v = NumProp(o, key, "options");
  if (!(v >= lo && v <= hi) || v != double(uint64_t(v)))
    ThrowInvalid(std::string(key) + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return uint32_t(v);
}

// n rows of samples x width words (width 2: weighted (k, t); 1: classic).
lsh::SigView SigArg(Inputs& in, const Napi::Value& v, uint32_t samples, uint32_t width, uint64_t n, const char* name) {
  auto a = in.Array<uint32_t>(v, name, true);
  lsh::SigView s;
  s.n = n, s.samples = samples, s.width = width;
  if (a.length != n * s.words())
    ThrowInvalid(std::string(name) + " has length " + std::to_string(a.length) + " but rows * samples * " +
                 std::to_string(width) + " = " + std::to_string(n * s.words()));
  s.data = a.data;
  return s;
}

// Signatures of however many rows (a multiple of samples x width words).
lsh::SigView SigRowsArg(Inputs& in, const Napi::Value& v, uint32_t samples, uint32_t width, bool bulk) {
  auto a = in.Array<uint32_t>(v, "signatures", bulk);
  const uint64_t per = uint64_t(samples) * width;
  if (a.length % per != 0)
    ThrowInvalid("signatures has length " + std::to_string(a.length) + ", not a multiple of samples * " +
                 std::to_string(width) + " = " + std::to_string(per));
  lsh::SigView s;
  s.data = a.data, s.n = a.length / per, s.samples = samples, s.width = width;
  return s;
}

uint32_t WidthProp(const Napi::Object& o) {
  const double w = NumPropOr(o, "width", 2);
  if (w != 1 && w != 2) ThrowInvalid("width must be 1 (classic signatures) or 2 (weighted)");
  return uint32_t(w);
}

lsh::Params ParamsArg(const Napi::Object& o, uint32_t samples) {
  lsh::Params p;
  p.bands = U32Prop(o, "bands", 1, samples);
  p.rows = U32Prop(o, "rows", 1, samples);
  if (uint64_t(p.bands) * p.rows > samples) ThrowInvalid("bands * rows must be <= samples");
  return p;
}

// Options first (getters may run), then the arrays, staged into `in`.
Common CommonArgs(const Napi::CallbackInfo& info, const Napi::Object& opts, Inputs& in) {
  Common c;
  const uint32_t samples = U32Prop(opts, "samples", 1, 1u << 20);
  const uint32_t width = WidthProp(opts);
  c.params = ParamsArg(opts, samples);
  Backend backend = BackendProp(opts);
  c.bucketer =
      backend == Backend::Cpu ? lsh::MakeCpuBucketer() : lsh::MakeCudaBucketer(ResolveDevices(DevicesProp(opts)).at(0));
  in.ForGpu(backend == Backend::Cuda);
  auto ids = in.Array<uint32_t>(info[1], "ids");
  c.ids = ids.data;
  c.sig = SigArg(in, info[0], samples, width, ids.length, "signatures");
  return c;
}

// A result object carrying the pairs and the device timings.
Napi::Object PairsResult(Napi::Env env, lsh::PairList&& p, bool withSim, const lsh::Timing& t) {
  auto r = Napi::Object::New(env);
  r.Set("left", ToTyped(env, std::move(p.left)));
  r.Set("right", ToTyped(env, std::move(p.right)));
  if (withSim) r.Set("similarity", ToTyped(env, std::move(p.similarity)));
  r.Set("kernelMs", t.kernelMs);
  r.Set("transferMs", t.transferMs);
  return r;
}

// Groups, their pairs and the device timings.
Napi::Object GroupsValue(Napi::Env env, lsh::GroupsResult&& g, const lsh::Timing& t) {
  auto r = PairsResult(env, std::move(g.pairs), true, t);
  r.Set("group", ToTyped(env, std::move(g.group)));
  r.Set("count", g.count);
  return r;
}

// lshCandidatePairs(signatures, ids, { samples, bands, rows, backend, devices, cancel })
Napi::Value CandidatePairs(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Args args(info);
    Napi::Object opts = args.Obj(2, "options");
    auto in = std::make_shared<Inputs>(Inputs::Use::Async);
    CancelToken cancel = in->Cancel(opts);
    Common c = CommonArgs(info, opts, *in);
    auto out = std::make_shared<lsh::PairList>();
    auto timing = std::make_shared<lsh::Timing>();
    return RunAsync(
        info.Env(), [=] { *out = lsh::CandidatePairs(c.sig, c.ids, c.params, *c.bucketer, cancel, timing.get()); },
        [=](Napi::Env env) -> Napi::Value { return PairsResult(env, std::move(*out), false, *timing); }, {}, in);
  });
}

// lshGroups(signatures, ids, { samples, bands, rows, verify, threshold, matrix?, backend, devices, cancel })
Napi::Value Groups(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Args args(info);
    Napi::Object opts = args.Obj(2, "options");
    const std::string v = StrPropOr(opts, "verify", "estimate");
    lsh::Verify verify = v == "none" ? lsh::Verify::None : v == "exact" ? lsh::Verify::Exact : lsh::Verify::Estimate;
    if (v != "none" && v != "exact" && v != "estimate")
      ThrowInvalid("verify must be 'none', 'estimate' or 'exact'", "TypeError");
    const double threshold = NumPropOr(opts, "threshold", 0.5);
    if (!(threshold > 0 && threshold <= 1)) ThrowInvalid("threshold must be in (0, 1]");
    Napi::Value mv = opts.Get("matrix");
    const bool hasMatrix = !mv.IsUndefined() && !mv.IsNull();
    if (verify == lsh::Verify::Exact && !hasMatrix) ThrowInvalid("matrix is required for verify 'exact'", "TypeError");
    CsrSource msrc;
    if (hasMatrix) msrc = ReadCsr(mv, "matrix");
    auto in = std::make_shared<Inputs>(Inputs::Use::Async);
    CancelToken cancel = in->Cancel(opts);
    Common c = CommonArgs(info, opts, *in);
    CsrView matrix;
    if (hasMatrix) matrix = in->Csr(msrc, 0, msrc.rows);
    auto out = std::make_shared<lsh::GroupsResult>();
    auto timing = std::make_shared<lsh::Timing>();
    return RunAsync(
        info.Env(),
        [=] {
          if (hasMatrix) ValidateCsr(matrix, "matrix");
          // Classic signatures stand for sets: exact verification ignores weights.
          *out = lsh::Groups(c.sig, c.ids, c.params, verify, threshold, hasMatrix ? &matrix : nullptr, c.sig.width == 1,
                             *c.bucketer, cancel, timing.get());
        },
        [=](Napi::Env env) -> Napi::Value { return GroupsValue(env, std::move(*out), *timing); }, {}, in);
  });
}

// lshQuery(stored, ids, queries, { samples, bands, rows }) -> { indptr, ids }
Napi::Value Query(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Args args(info);
    Napi::Object opts = args.Obj(3, "options");
    const uint32_t samples = U32Prop(opts, "samples", 1, 1u << 20);
    const uint32_t width = WidthProp(opts);
    lsh::Params p = ParamsArg(opts, samples);
    auto in = std::make_shared<Inputs>(Inputs::Use::Async);
    auto ids = in->Array<uint32_t>(info[1], "ids");
    lsh::SigView stored = SigArg(*in, info[0], samples, width, ids.length, "stored");
    lsh::SigView queries = SigRowsArg(*in, info[2], samples, width, false);
    const uint32_t* idp = ids.data;
    auto indptr = std::make_shared<std::vector<uint32_t>>();
    auto hits = std::make_shared<std::vector<uint32_t>>();
    return RunAsync(
        info.Env(), [=] { lsh::Query(stored, idp, queries, p, indptr.get(), hits.get()); },
        [=](Napi::Env env) -> Napi::Value {
          auto r = Napi::Object::New(env);
          r.Set("indptr", ToTyped(env, std::move(*indptr)));
          r.Set("ids", ToTyped(env, std::move(*hits)));
          return r;
        },
        {}, in);
  });
}

// lshBandKeys(signatures, { samples, bands, rows, width, handed, staged }) -> { keys: BigUint64Array, empty:
// Uint8Array }: each row's band keys (row-major) and whether its signature is
// empty, what lshGroupsFromKeys reads in place of the signatures. With
// `handed`, lib/ gave the signatures over (a buffer of its own that nothing
// writes or detaches until the call settles): read in place, not copied. With
// `staged`, keys and empty come as Staged arrays in native memory (what a
// dedup keeps; no typed array or finalizer on the JavaScript thread).
Napi::Value BandKeys(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Args args(info);
    Napi::Object opts = args.Obj(1, "options");
    const uint32_t samples = U32Prop(opts, "samples", 1, 1u << 20);
    const uint32_t width = WidthProp(opts);
    const lsh::Params p = ParamsArg(opts, samples);
    const bool handed = BoolPropOr(opts, "handed", false);
    const bool staged = BoolPropOr(opts, "staged", false);
    auto in = std::make_shared<Inputs>(handed ? Inputs::Use::Handed : Inputs::Use::Async);
    const lsh::SigView sig = SigRowsArg(*in, info[0], samples, width, true);
    if (sig.n * p.bands > MaxTypedLength())
      ThrowInvalid("band keys of " + std::to_string(sig.n) + " rows exceed one typed array; pass fewer rows per call");
    auto keys = std::make_shared<std::vector<uint64_t>>();
    auto empty = std::make_shared<std::vector<uint8_t>>();
    return RunAsync(
        info.Env(),
        [=] {
          keys->resize(sig.n * p.bands);
          empty->resize(sig.n);
          lsh::BandKeys(sig, p, keys->data(), empty->data());
        },
        [=](Napi::Env env) -> Napi::Value {
          auto r = Napi::Object::New(env);
          if (staged) {
            auto own = std::make_shared<Inputs>(Inputs::Use::Async);
            own->Hold(keys);
            own->Hold(empty);
            r.Set("keys", NewStagedArray(env, own, keys->data(), keys->size(), napi_biguint64_array));
            r.Set("empty", NewStagedArray(env, own, empty->data(), empty->size(), napi_uint8_array));
            return r;
          }
          r.Set("keys", ToTyped(env, std::move(*keys)));
          r.Set("empty", ToTyped(env, std::move(*empty)));
          return r;
        },
        // Handed signatures live as long as the call.
        handed ? std::vector<Napi::Value>{info[0]} : std::vector<Napi::Value>{}, in);
  });
}

// lshGroupsFromKeys(keys, empty, matrix: (CsrMatrix | Staged)[], { bands, threshold, sets, backend, devices,
// cancel, progress }): lshGroups with verify 'exact' and ids 0..n-1, from band keys (lshBandKeys; one array, or
// an array of consecutive row blocks of them, read in place) and the rows' vectors as consecutive row blocks.
Napi::Value GroupsFromKeys(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Args args(info);
    Napi::Object opts = args.Obj(3, "options");
    const uint32_t bands = U32Prop(opts, "bands", 1, 1u << 20);
    const double threshold = NumPropOr(opts, "threshold", 0.5);
    if (!(threshold > 0 && threshold <= 1)) ThrowInvalid("threshold must be in (0, 1]");
    const bool sets = opts.Get("sets").ToBoolean().Value();
    Backend backend = BackendProp(opts);
    std::shared_ptr<const lsh::Bucketer> bucketer =
        backend == Backend::Cpu ? lsh::MakeCpuBucketer()
                                : lsh::MakeCudaBucketer(ResolveDevices(DevicesProp(opts)).at(0));
    if (!info[2].IsArray()) ThrowInvalid("matrix must be an array of CSR row blocks", "TypeError");
    auto list = info[2].As<Napi::Array>();
    // Each entry a CSR block (a Staged one) or a RowSpill (rows in a file).
    std::vector<CsrSource> sources;
    std::vector<std::shared_ptr<const RowFile>> files;
    for (uint32_t i = 0; i < list.Length(); ++i) {
      auto file = RowSpillOf(list.Get(i));
      files.push_back(file);
      sources.push_back(file ? CsrSource{} : ReadCsr(list.Get(i), "matrix", !sets));
    }
    auto in = std::make_shared<Inputs>(Inputs::Use::Async);
    CancelToken cancel = in->Cancel(opts);
    in->ForGpu(backend == Backend::Cuda);
    auto e = in->Array<uint8_t>(info[1], "empty");
    // The keys as one array or as consecutive row blocks, read in place.
    lsh::KeyView keys(bands);
    const bool parts = info[0].IsArray();
    const uint32_t count = parts ? info[0].As<Napi::Array>().Length() : 1;
    for (uint32_t i = 0; i < count; ++i) {
      const std::string name = parts ? "keys[" + std::to_string(i) + "]" : "keys";
      auto k = in->Array<uint64_t>(parts ? info[0].As<Napi::Array>().Get(i) : info[0], name, true);
      if (k.length % bands)
        ThrowInvalid(name + " has length " + std::to_string(k.length) + ", not whole rows of " + std::to_string(bands) +
                     " band keys");
      keys.Add(k.data, k.length / bands);
    }
    if (keys.n != e.length)
      ThrowInvalid("keys hold " + std::to_string(keys.n) + " rows of band keys but empty.length is " +
                   std::to_string(e.length));
    if (keys.n > 0xFFFFFFFFull) ThrowInvalid("more than 2^32 - 1 rows");
    auto rows = std::make_shared<lsh::RowBlocks>();
    for (size_t i = 0; i < sources.size(); ++i) {
      if (files[i])
        rows->AddFile(files[i]);
      else
        rows->Add(in->Csr(sources[i], 0, sources[i].rows));
    }
    const uint8_t* emptyData = e.data;
    auto out = std::make_shared<lsh::GroupsResult>();
    auto timing = std::make_shared<lsh::Timing>();
    return RunAsync(
        info.Env(),
        [=] {
          // Rows in a file were checked when they were staged.
          for (uint64_t i = 0; i < rows->parts(); ++i)
            if (!rows->inFile(i)) ValidateCsr(rows->part(i), "matrix");
          *out = lsh::GroupsFromKeys(keys, emptyData, threshold, *rows, sets, *bucketer, cancel, timing.get());
        },
        [=](Napi::Env env) -> Napi::Value { return GroupsValue(env, std::move(*out), *timing); }, {}, in);
  });
}

void Init(Napi::Env env, Napi::Object exports) {
  exports.Set("lshCandidatePairs", Napi::Function::New(env, CandidatePairs, "lshCandidatePairs"));
  exports.Set("lshGroups", Napi::Function::New(env, Groups, "lshGroups"));
  exports.Set("lshQuery", Napi::Function::New(env, Query, "lshQuery"));
  exports.Set("lshBandKeys", Napi::Function::New(env, BandKeys, "lshBandKeys"));
  exports.Set("lshGroupsFromKeys", Napi::Function::New(env, GroupsFromKeys, "lshGroupsFromKeys"));
}

}  // namespace

CUSIM_REGISTER(lsh, Init);

}  // namespace cusim
