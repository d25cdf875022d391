// N-API glue for MinHash LSH: stateless calls over the signatures and ids the
// TypeScript object holds.
#include "gpu.h"
#include "lsh.h"
#include "napi_util.h"

namespace cusim {
namespace {

struct Common {
  lsh::SigView sig;
  std::shared_ptr<lsh::SigChunks> chunks;  // owns what sig.chunks points to
  const uint32_t* ids = nullptr;
  lsh::Params params;
  lsh::Engine engine;
};

uint32_t U32Prop(const Napi::Object& o, const char* key, uint32_t lo, uint32_t hi) {
  double v = NumProp(o, key, "options");
  if (!(v >= lo && v <= hi) || v != double(uint64_t(v)))
    ThrowInvalid(std::string(key) + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return uint32_t(v);
}

// Signatures as one Uint32Array or an array of them (rows kept in the arrays
// they were inserted in), n rows of samples x width words in all.
lsh::SigView SigArg(const Napi::Value& v, uint32_t samples, uint32_t width, uint64_t n, const char* name,
                    std::shared_ptr<lsh::SigChunks>* chunks) {
  lsh::SigView s;
  s.n = n, s.samples = samples, s.width = width;
  const uint64_t words = s.words();
  if (!v.IsArray()) {
    auto a = TypedArg<uint32_t>(v, name);
    if (a.length != n * words)
      ThrowInvalid(std::string(name) + " has length " + std::to_string(a.length) + " but rows * samples * " +
                   std::to_string(width) + " = " + std::to_string(n * words));
    s.data = a.data;
    return s;
  }
  auto list = v.As<Napi::Array>();
  auto c = std::make_shared<lsh::SigChunks>();
  uint64_t rows = 0;
  for (uint32_t i = 0; i < list.Length(); ++i) {
    auto a = TypedArg<uint32_t>(list.Get(i), name);
    if (a.length % words)
      ThrowInvalid(std::string(name) + "[" + std::to_string(i) + "] has length " + std::to_string(a.length) +
                   ", not a multiple of samples * " + std::to_string(width) + " = " + std::to_string(words));
    c->data.push_back(a.data);
    c->first.push_back(rows);
    rows += a.length / words;
  }
  c->first.push_back(rows);
  if (rows != n) ThrowInvalid(std::string(name) + " holds " + std::to_string(rows) + " rows but ids has " + std::to_string(n));
  c->rows.resize(n);
  for (size_t k = 0; k + 1 < c->first.size(); ++k)
    for (uint64_t r = c->first[k]; r < c->first[k + 1]; ++r) c->rows[r] = c->data[k] + (r - c->first[k]) * words;
  s.chunks = c.get();
  *chunks = std::move(c);
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

Common CommonArgs(const Napi::CallbackInfo& info, const Napi::Object& opts) {
  Common c;
  const uint32_t samples = U32Prop(opts, "samples", 1, 1u << 20);
  auto ids = TypedArg<uint32_t>(info[1], "ids");
  c.ids = ids.data;
  c.sig = SigArg(info[0], samples, WidthProp(opts), ids.length, "signatures", &c.chunks);
  c.params = ParamsArg(opts, samples);
  Backend backend = BackendProp(opts);
  if (backend == Backend::Cpu) {
    c.engine.repPairs = lsh::RepPairsCpu;
  } else {
#ifdef CUSIM_WITH_CUDA
    const int device = ResolveDevices(DevicesProp(opts)).at(0);
    c.engine.repPairs = [device](const lsh::SigView& s, const std::vector<uint32_t>& reps, const lsh::Params& p,
                                 std::vector<float>* est, lsh::Timing* t) { return lsh::RepPairsCuda(s, reps, p, est, device, t); };
#else
    ResolveDevices(DevicesProp(opts));  // throws: this build has no CUDA
#endif
  }
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

// lshCandidatePairs(signatures, ids, { samples, bands, rows, backend, devices, cancel })
Napi::Value CandidatePairs(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Args args(info);
    Napi::Object opts = args.Obj(2, "options");
    Common c = CommonArgs(info, opts);
    CancelToken cancel = CancelArg(opts);
    auto out = std::make_shared<lsh::PairList>();
    auto timing = std::make_shared<lsh::Timing>();
    return RunAsync(
        info.Env(), [=] { *out = lsh::CandidatePairs(c.sig, c.ids, c.params, c.engine, cancel, timing.get()); },
        [=](Napi::Env env) -> Napi::Value { return PairsResult(env, std::move(*out), false, *timing); },
        {info[0], info[1], opts});
  });
}

// lshGroups(signatures, ids, { samples, bands, rows, verify, threshold, matrix?, backend, devices, cancel })
Napi::Value Groups(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Args args(info);
    Napi::Object opts = args.Obj(2, "options");
    Common c = CommonArgs(info, opts);
    CancelToken cancel = CancelArg(opts);
    const std::string v = StrPropOr(opts, "verify", "estimate");
    lsh::Verify verify = v == "none" ? lsh::Verify::None : v == "exact" ? lsh::Verify::Exact : lsh::Verify::Estimate;
    if (v != "none" && v != "exact" && v != "estimate") ThrowInvalid("verify must be 'none', 'estimate' or 'exact'", "TypeError");
    const double threshold = NumPropOr(opts, "threshold", 0.5);
    if (!(threshold > 0 && threshold <= 1)) ThrowInvalid("threshold must be in (0, 1]");
    bool hasMatrix = false;
    CsrView matrix;
    Napi::Value mv = opts.Get("matrix");
    if (!mv.IsUndefined() && !mv.IsNull()) {
      matrix = CsrArg(mv, "matrix");
      hasMatrix = true;
    }
    if (verify == lsh::Verify::Exact && !hasMatrix) ThrowInvalid("matrix is required for verify 'exact'", "TypeError");
    auto out = std::make_shared<lsh::GroupsResult>();
    auto timing = std::make_shared<lsh::Timing>();
    return RunAsync(
        info.Env(),
        [=] {
          if (hasMatrix) ValidateCsr(matrix, "matrix");
          // Classic signatures stand for sets: exact verification ignores weights.
          *out = lsh::Groups(c.sig, c.ids, c.params, verify, threshold, hasMatrix ? &matrix : nullptr, c.sig.width == 1,
                             c.engine, cancel, timing.get());
        },
        [=](Napi::Env env) -> Napi::Value {
          auto r = PairsResult(env, std::move(out->pairs), true, *timing);
          r.Set("group", ToTyped(env, std::move(out->group)));
          r.Set("count", out->count);
          return r;
        },
        {info[0], info[1], opts});
  });
}

// lshQuery(stored, ids, queries, { samples, bands, rows }) -> { indptr, ids }
Napi::Value Query(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Args args(info);
    Napi::Object opts = args.Obj(3, "options");
    const uint32_t samples = U32Prop(opts, "samples", 1, 1u << 20);
    auto ids = TypedArg<uint32_t>(info[1], "ids");
    const uint32_t width = WidthProp(opts);
    std::shared_ptr<lsh::SigChunks> owned;
    lsh::SigView stored = SigArg(info[0], samples, width, ids.length, "stored", &owned);
    auto q = TypedArg<uint32_t>(info[2], "signatures");
    const uint64_t per = uint64_t(samples) * width;
    if (q.length % per != 0)
      ThrowInvalid("signatures has length " + std::to_string(q.length) + ", not a multiple of samples * " +
                   std::to_string(width) + " = " + std::to_string(per));
    lsh::SigView queries;
    queries.data = q.data, queries.n = q.length / per, queries.samples = samples, queries.width = width;
    lsh::Params p = ParamsArg(opts, samples);
    const uint32_t* idp = ids.data;
    auto indptr = std::make_shared<std::vector<uint32_t>>();
    auto hits = std::make_shared<std::vector<uint32_t>>();
    return RunAsync(
        info.Env(), [=] { (void)owned; lsh::Query(stored, idp, queries, p, indptr.get(), hits.get()); },
        [=](Napi::Env env) -> Napi::Value {
          auto r = Napi::Object::New(env);
          r.Set("indptr", ToTyped(env, std::move(*indptr)));
          r.Set("ids", ToTyped(env, std::move(*hits)));
          return r;
        },
        {info[0], info[1], info[2]});
  });
}

void Init(Napi::Env env, Napi::Object exports) {
  exports.Set("lshCandidatePairs", Napi::Function::New(env, CandidatePairs, "lshCandidatePairs"));
  exports.Set("lshGroups", Napi::Function::New(env, Groups, "lshGroups"));
  exports.Set("lshQuery", Napi::Function::New(env, Query, "lshQuery"));
}

}  // namespace

CUSIM_REGISTER(lsh, Init);

}  // namespace cusim
