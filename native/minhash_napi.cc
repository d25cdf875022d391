// N-API glue for weighted MinHash: a native object owning the parameter tables
// (host and, on CUDA, per device), hash as a Promise, and batched estimates.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <new>
#include <utility>

#include "gpu.h"
#include "minhash.h"
#include "minhash_napi_common.h"
#include "napi_util.h"
#include "owned.h"

namespace cusim {
namespace {

struct Engine {
  uint32_t dim = 0, samples = 0;
  Backend backend = Backend::Cpu;
  std::vector<int> devices;
  // Host parameters of the columns met so far (all of them when injected).
  std::shared_ptr<minhash::ColumnParams> params;
  std::shared_ptr<minhash::WeightedHasher> hasher;
};

// [samples][n] <-> [n][samples]
void Transpose(const float* src, uint64_t rows, uint64_t cols, float* dst) {
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
}

// [n][samples] tables of the given columns as { rs, lnCs, betas, columns } in [samples][n].
Napi::Object TablesToJs(Napi::Env env, uint32_t samples, std::vector<uint32_t>&& cols, const float* rs,
                        const float* lnCs, const float* betas) {
  auto o = Napi::Object::New(env);
  const uint64_t n = cols.size();
  const char* names[3] = {"rs", "lnCs", "betas"};
  const float* src[3] = {rs, lnCs, betas};
  for (int i = 0; i < 3; ++i) {
    std::vector<float> v(n * samples);
    Transpose(src[i], n, samples, v.data());
    o.Set(names[i], ToTyped(env, std::move(v), "the parameter tables"));
  }
  o.Set("columns", ToTyped(env, std::move(cols)));
  return o;
}

// The columns argument of parameters()/deviceParameters(): given, or every
// column < dim (when that fits one typed array per table).
std::vector<uint32_t> ColumnsArg(const Napi::Value& v, const Engine& e) {
  if (!v.IsUndefined() && !v.IsNull()) {
    Inputs in(Inputs::Use::Sync);
    auto a = in.Array<uint32_t>(v, "columns");
    for (size_t i = 0; i < a.length; ++i)
      if (a.data[i] >= e.dim)
        ThrowInvalid("columns[" + std::to_string(i) + "]=" + std::to_string(a.data[i]) +
                     " is out of range for dim=" + std::to_string(e.dim));
    CheckTypedLength(uint64_t(a.length) * e.samples, "the parameter tables");
    return std::vector<uint32_t>(a.data, a.data + a.length);
  }
  CheckTypedLength(uint64_t(e.dim) * e.samples, "the parameter tables of every column",
                   "pass the columns wanted (parameters({ columns }))");
  std::vector<uint32_t> all(e.dim);
  for (uint32_t d = 0; d < e.dim; ++d) all[d] = d;
  return all;
}

class MinHashWrap : public ResourceWrap<MinHashWrap, Engine> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(
        env, "WeightedMinHashNative",
        {InstanceMethod("hash", &MinHashWrap::Hash), InstanceMethod("parameters", &MinHashWrap::Parameters),
         InstanceMethod("deviceParameters", &MinHashWrap::DeviceParameters),
         InstanceMethod("devices", &MinHashWrap::Devices), InstanceMethod("dispose", &MinHashWrap::DisposeJs)});
  }

  // new (options: { dim, samples, seed, backend, devices?, rs?, lnCs?, betas?, columns? })
  // Injected tables arrive in [samples][n] layout, n = columns.length or dim.
  explicit MinHashWrap(const Napi::CallbackInfo& info) : ResourceWrap(info) {
    try {
      Args args(info);
      Napi::Object o = args.Obj(0, "options");
      auto e = std::make_shared<Engine>();
      const double dim = NumProp(o, "dim", "options"), samples = NumProp(o, "samples", "options");
      if (!(dim >= 1 && dim <= 4294967295.0) || dim != double(uint64_t(dim)))
        ThrowInvalid("dim must be an integer >= 1");
      e->dim = uint32_t(dim), e->samples = SamplesArg(samples);
      const uint64_t seed = SeedProp(o, NAN);
      e->backend = BackendProp(o);
      const minhash::Tuning tuning = ParseTuning(o);
      if (e->backend == Backend::Cuda) e->devices = ResolveDevices(DevicesProp(o));
      Napi::Value rs = o.Get("rs");
      Inputs in(Inputs::Use::Sync);
      if (rs.IsUndefined()) {
        e->params = std::make_shared<minhash::ColumnParams>(seed, e->samples);
      } else {
        std::vector<uint32_t> cols;
        Napi::Value cv = o.Get("columns");
        if (cv.IsUndefined() || cv.IsNull()) {
          cols.resize(e->dim);
          for (uint32_t d = 0; d < e->dim; ++d) cols[d] = d;
        } else {
          auto a = in.Array<uint32_t>(cv, "columns");
          cols.assign(a.data, a.data + a.length);
          std::vector<uint32_t> sorted(cols);
          std::sort(sorted.begin(), sorted.end());
          for (size_t i = 0; i < sorted.size(); ++i) {
            if (sorted[i] >= e->dim)
              ThrowInvalid("columns has " + std::to_string(sorted[i]) + ", out of range for dim");
            if (i && sorted[i] == sorted[i - 1]) ThrowInvalid("columns repeats " + std::to_string(sorted[i]));
          }
        }
        const uint64_t n = uint64_t(cols.size()) * e->samples;
        const char* names[3] = {"rs", "lnCs", "betas"};
        std::vector<float> t[3];
        for (int i = 0; i < 3; ++i) {
          auto a = in.Prop<float>(o, names[i]);
          if (a.length != n)
            ThrowInvalid(std::string(names[i]) + " has length " + std::to_string(a.length) +
                         " but samples * columns = " + std::to_string(n));
          t[i].resize(n);
          Transpose(a.data, e->samples, cols.size(), t[i].data());
        }
        e->params = std::make_shared<minhash::ColumnParams>(e->samples, cols.data(), cols.size(), t[0].data(),
                                                            t[1].data(), t[2].data());
      }
      e->hasher = e->backend == Backend::Cuda ? minhash::MakeCudaHasher(e->params, e->dim, e->devices, tuning)
                                              : minhash::MakeCpuHasher(e->params);
      impl_ = e;
      Account();
    } catch (const Error& err) {
      throw MakeJsError(info.Env(), err);
    }
  }

 private:
  // hash(matrix, { rowStart, rowEnd, cancel, out }) -> Promise<{ signatures, kernelMs, transferMs, host }>
  Napi::Value Hash(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto e = Get("WeightedMinHash");
      HashCall call = ParseHashCall(info, 2 * e->samples, true, e->backend == Backend::Cuda, [&](const CsrSource& src) {
        if (src.cols != e->dim)
          ThrowInvalid("matrix.cols is " + std::to_string(src.cols) +
                       " but this WeightedMinHash was built for dim=" + std::to_string(e->dim));
      });
      auto memory = memory_;
      return RunHashCall(info.Env(), call, e->hasher, [memory, e] { Account(memory, *e); }, info.This(), info[0]);
    });
  }

  // parameters(columns?) -> { rs, lnCs, betas, columns }, tables in [samples][n]:
  // the host's (equal to the GPU's by the seed contract, within 1 ulp on rs and lnCs).
  Napi::Value Parameters(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto e = Get("WeightedMinHash");
      std::vector<uint32_t> cols = ColumnsArg(info[0], *e);
      const size_t n = cols.size() * size_t(e->samples);
      std::vector<float> rs(n), lnCs(n), betas(n);
      e->params->Gather(cols.data(), cols.size(), rs.data(), lnCs.data(), betas.data());
      return TablesToJs(info.Env(), e->samples, std::move(cols), rs.data(), lnCs.data(), betas.data());
    });
  }

  // deviceParameters(slot, columns?) -> the tables held by the slot-th device, as parameters().
  Napi::Value DeviceParameters(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto e = Get("WeightedMinHash");
      Args args(info);
      const double slot = args.Num(0, "slot");
      if (e->backend != Backend::Cuda) ThrowInvalid("deviceParameters needs the cuda backend");
      if (!(slot >= 0 && slot < double(e->devices.size()))) ThrowInvalid("slot is out of range");
      std::vector<uint32_t> cols = ColumnsArg(info[1], *e);
      const size_t n = cols.size() * size_t(e->samples);
      std::vector<float> rs(n), lnCs(n), betas(n);
      e->hasher->DeviceParams(size_t(slot), cols.data(), cols.size(), rs.data(), lnCs.data(), betas.data());
      return TablesToJs(info.Env(), e->samples, std::move(cols), rs.data(), lnCs.data(), betas.data());
    });
  }

  Napi::Value Devices(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto e = Get("WeightedMinHash");
      return DeviceList(info.Env(), e->devices);
    });
  }

  Napi::Value DisposeJs(const Napi::CallbackInfo& info) { return Dispose(info); }

 public:
  // Host parameters of the columns met so far; GPU tables are not counted.
  static uint64_t Bytes(const Engine& e) { return e.params ? e.params->Bytes() : 0; }
};

// jaccardPairs(signatures, samples, left, right) -> Float32Array
Napi::Value JaccardPairs(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Args args(info);
    const double samplesArg = args.Num(1, "samples");
    Inputs in(Inputs::Use::Sync);
    auto sigs = in.Array<uint32_t>(info[0], "signatures");
    auto left = in.Array<uint32_t>(info[2], "left");
    auto right = in.Array<uint32_t>(info[3], "right");
    const uint32_t samples = SamplesArg(samplesArg);
    const uint64_t stride = uint64_t(samples) * 2;
    if (sigs.length % stride) ThrowInvalid("signatures.length must be a multiple of samples * 2");
    if (left.length != right.length) ThrowInvalid("left and right must have the same length");
    const uint64_t rows = sigs.length / stride;
    for (size_t i = 0; i < left.length; ++i) {
      if (left.data[i] >= rows)
        ThrowInvalid("left[" + std::to_string(i) + "]=" + std::to_string(left.data[i]) + " is out of range for " +
                     std::to_string(rows) + " rows");
      if (right.data[i] >= rows)
        ThrowInvalid("right[" + std::to_string(i) + "]=" + std::to_string(right.data[i]) + " is out of range for " +
                     std::to_string(rows) + " rows");
    }
    std::vector<float> out(left.length);
    minhash::JaccardPairsCpu(sigs.data, samples, left.data, right.data, left.length, out.data());
    return ToTyped(info.Env(), std::move(out));
  });
}

// minhashSplitRows(matrix, rowStart, rowEnd, parts) -> Float64Array of boundaries.
// The multi-GPU row split, exposed so tests check it for any device count.
Napi::Value SplitRows(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Args args(info);
    const double a = args.Num(1, "rowStart"), b = args.Num(2, "rowEnd"), parts = args.Num(3, "parts");
    Inputs in(Inputs::Use::Sync);
    const CsrView m = in.Csr(info[0], "matrix", false);
    if (!(a >= 0 && a <= b && b <= double(m.rows))) ThrowInvalid("rowStart/rowEnd out of range");
    if (!(parts >= 1 && parts <= 4096)) ThrowInvalid("parts must be in [1, 4096]");
    auto cut = minhash::SplitRowsByNnz(m, uint64_t(a), uint64_t(b), size_t(parts));
    auto out = Napi::Float64Array::New(info.Env(), cut.size());
    for (size_t i = 0; i < cut.size(); ++i) out[i] = double(cut[i]);
    return out;
  });
}

void Init(Napi::Env env, Napi::Object exports) {
  exports.Set("minhashSplitRows", Napi::Function::New(env, SplitRows, "minhashSplitRows"));
  exports.Set("WeightedMinHashNative", MinHashWrap::Define(env));
  exports.Set("minhashJaccardPairs", Napi::Function::New(env, JaccardPairs, "minhashJaccardPairs"));
}

}  // namespace

CUSIM_REGISTER(minhash, Init);

}  // namespace cusim
