// N-API glue for weighted MinHash: a native object owning the parameter tables
// (host and, on CUDA, per device), hash as a Promise, and batched estimates.
#include <unistd.h>
#if defined(__linux__)
#endif

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <new>

#include "gpu.h"
#include "host_buffer.h"
#include "minhash.h"
#include "napi_util.h"

namespace cusim {
namespace {

struct Engine {
  uint32_t dim = 0, samples = 0;
  uint64_t seed = 1;
  Backend backend = Backend::Cpu;
  std::vector<int> devices;
  // Host tables, [dim][samples]. Generated lazily (inside the first async call
  // or parameters()), so constructing an object never blocks the event loop.
  std::mutex hostMutex;
  bool hostReady = false;
  bool injected = false;  // tables came from fromParameters, not the seed
  std::vector<float> rs, lnCs, betas;
#ifdef CUSIM_WITH_CUDA
  std::mutex gpuMutex;
  std::shared_ptr<minhash::CudaEngine> gpu;
#endif

  void EnsureHost() {
    std::lock_guard<std::mutex> lock(hostMutex);
    if (hostReady) return;
    const size_t n = size_t(dim) * samples;
    // dim × samples can reach 2^48 floats; say so instead of letting the
    // allocator (or the OOM killer, under overcommit) answer.
    const uint64_t need = 3 * uint64_t(n) * sizeof(float);
    const uint64_t physical = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGE_SIZE));
    if (need > physical)
      ThrowOutOfMemory("weighted MinHash parameter tables on the host (3 x dim x samples floats)", need, physical);
    rs.resize(n), lnCs.resize(n), betas.resize(n);
    minhash::GenerateParamsCpu(seed, dim, samples, rs.data(), lnCs.data(), betas.data());
    hostReady = true;
  }

#ifdef CUSIM_WITH_CUDA
  minhash::CudaEngine& EnsureGpu() {
    std::lock_guard<std::mutex> lock(gpuMutex);
    if (!gpu) {
      // Injected tables are uploaded; seeded ones are generated on each device.
      gpu = minhash::CreateCudaEngine(devices, seed, dim, samples, injected ? rs.data() : nullptr,
                                      injected ? lnCs.data() : nullptr, injected ? betas.data() : nullptr);
    }
    return *gpu;
  }
#endif
};

// [samples][dim] <-> [dim][samples]
void Transpose(const float* src, uint64_t rows, uint64_t cols, float* dst) {
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
}

Napi::Object TablesToJs(Napi::Env env, const Engine& e, const float* rs, const float* lnCs, const float* betas) {
  auto o = Napi::Object::New(env);
  const uint64_t n = uint64_t(e.dim) * e.samples;
  const char* names[3] = {"rs", "lnCs", "betas"};
  const float* src[3] = {rs, lnCs, betas};
  for (int i = 0; i < 3; ++i) {
    std::vector<float> v(n);
    Transpose(src[i], e.dim, e.samples, v.data());
    o.Set(names[i], ToTyped(env, std::move(v)));
  }
  return o;
}

// Output of one hash call, handed to JavaScript without a copy, in
// uninitialized host memory (host_buffer.h): a 1M-row result is 1 GB that the
// kernels or the CPU overwrite entirely.
struct Signatures {
  uint32_t* data = nullptr;
  uint64_t size = 0;
  uint32_t* external = nullptr;  // the caller's `out` array, written in place
  ~Signatures() { std::free(data); }
  uint32_t* target() const { return external ? external : data; }
  void allocate(uint64_t n) {
    size = n;
    if (!n || external) return;
    data = static_cast<uint32_t*>(AllocHostResult(n * 4));
  }
  Napi::Value ToJs(Napi::Env env) {
    if (external) return env.Undefined();  // the caller already holds the array
    if (size == 0) return Napi::Uint32Array::New(env, 0);
    uint32_t* p = data;
    data = nullptr;
    auto buf = Napi::ArrayBuffer::New(env, p, size * 4, [](Napi::Env, void* q) { std::free(q); });
    return Napi::Uint32Array::New(env, size, buf, 0);
  }
};

class MinHashWrap : public ResourceWrap<MinHashWrap, Engine> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "WeightedMinHashNative",
                       {InstanceMethod("hash", &MinHashWrap::Hash), InstanceMethod("parameters", &MinHashWrap::Parameters),
                        InstanceMethod("deviceParameters", &MinHashWrap::DeviceParameters),
                        InstanceMethod("devices", &MinHashWrap::Devices),
                        InstanceMethod("dispose", &MinHashWrap::DisposeJs)});
  }

  // new (options: { dim, samples, seed, backend, devices?, rs?, lnCs?, betas? })
  // Injected tables arrive in [samples][dim] layout.
  explicit MinHashWrap(const Napi::CallbackInfo& info) : ResourceWrap(info) {
    try {
      Args args(info);
      Napi::Object o = args.Obj(0, "options");
      auto e = std::make_shared<Engine>();
      double dim = NumProp(o, "dim", "options"), samples = NumProp(o, "samples", "options");
      if (!(dim >= 1 && dim <= 4294967295.0) || dim != double(uint64_t(dim))) ThrowInvalid("dim must be an integer >= 1");
      if (!(samples >= 1 && samples <= 65536) || samples != double(uint64_t(samples)))
        ThrowInvalid("samples must be an integer in [1, 65536]");
      e->dim = uint32_t(dim), e->samples = uint32_t(samples), e->seed = SeedProp(o, NAN);
      e->backend = BackendProp(o);
      if (e->backend == Backend::Cuda) e->devices = ResolveDevices(DevicesProp(o));
      Napi::Value rs = o.Get("rs");
      if (!rs.IsUndefined()) {
        const uint64_t n = uint64_t(e->dim) * e->samples;
        const char* names[3] = {"rs", "lnCs", "betas"};
        std::vector<float>* dst[3] = {&e->rs, &e->lnCs, &e->betas};
        for (int i = 0; i < 3; ++i) {
          auto a = TypedProp<float>(o, names[i]);
          if (a.length != n)
            ThrowInvalid(std::string(names[i]) + " has length " + std::to_string(a.length) + " but samples * dim = " + std::to_string(n));
          dst[i]->resize(n);
          Transpose(a.data, e->samples, e->dim, dst[i]->data());
        }
        e->hostReady = true;
        e->injected = true;
      }
      impl_ = e;
    } catch (const Error& err) {
      throw MakeJsError(info.Env(), err);
    }
  }

 private:
  // hash(matrix, { rowStart, rowEnd, cancel }) -> Promise<{ signatures, kernelMs, transferMs }>
  Napi::Value Hash(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto e = Get("WeightedMinHash");
      Args args(info);
      CsrView m = CsrArg(info[0], "matrix");
      Napi::Object opts = args.Obj(1, "options");
      if (m.cols != e->dim)
        ThrowInvalid("matrix.cols is " + std::to_string(m.cols) + " but this WeightedMinHash was built for dim=" + std::to_string(e->dim));
      const double rs = NumPropOr(opts, "rowStart", 0), re = NumPropOr(opts, "rowEnd", double(m.rows));
      if (!(rs >= 0 && rs <= re && re <= double(m.rows)) || rs != double(uint64_t(rs)) || re != double(uint64_t(re)))
        ThrowInvalid("rowStart/rowEnd must satisfy 0 <= rowStart <= rowEnd <= matrix.rows");
      const uint64_t rowStart = uint64_t(rs), rowEnd = uint64_t(re);
      CancelToken cancel = CancelArg(opts);
      auto out = std::make_shared<Signatures>();
      auto timing = std::make_shared<minhash::Timing>();
      std::vector<Napi::Value> keep{info[0], info.This()};
      if (opts.Has("out") && !opts.Get("out").IsUndefined()) {
        Napi::Value o = opts.Get("out");
        if (!o.IsTypedArray() || o.As<Napi::TypedArray>().TypedArrayType() != napi_uint32_array)
          ThrowInvalid("out must be a Uint32Array", "TypeError");
        auto arr = o.As<Napi::Uint32Array>();
        const uint64_t need = (rowEnd - rowStart) * uint64_t(e->samples) * 2;
        if (arr.ElementLength() < need)
          ThrowInvalid("out has length " + std::to_string(arr.ElementLength()) + " but the rows need " + std::to_string(need));
        // Signatures written over the matrix being read would change columns
        // and row bounds under the kernels (reads far out of range).
        const auto overlaps = [&](const void* p, uint64_t bytes) {
          const uintptr_t a = uintptr_t(arr.Data()), b = uintptr_t(p);
          return need > 0 && bytes > 0 && a < b + bytes && b < a + need * 4;
        };
        const uint64_t nz = m.indptr[m.rows];
        if (overlaps(m.indptr, (m.rows + 1) * 4) || overlaps(m.indices, nz * 4) || (m.values && overlaps(m.values, nz * 4)))
          ThrowInvalid("out must not share memory with matrix.indptr, matrix.indices or matrix.values");
        out->external = arr.Data();
        keep.push_back(o);
      }
      if (opts.Has("cancel")) keep.push_back(opts.Get("cancel"));
      if (opts.Has("progress")) keep.push_back(opts.Get("progress"));
      return RunAsync(
          info.Env(),
          [=] {
            const auto t0 = std::chrono::steady_clock::now();
            // Only the rows this call reads; indices are reported at their absolute position.
            CsrView part = m;
            part.rows = rowEnd - rowStart;
            part.indptr = m.indptr + rowStart;
            if (e->backend == Backend::Cuda) {
              ValidateIndptr(part, "matrix");  // columns and weights are checked as they are staged
            } else {
              ValidateCsr(part, "matrix");
              RejectInfiniteWeights(part, "matrix");
            }
            out->allocate((rowEnd - rowStart) * uint64_t(e->samples) * 2);
            if (e->backend == Backend::Cpu) {
              e->EnsureHost();
              minhash::HashCpu(m, rowStart, rowEnd, e->samples, e->rs.data(), e->lnCs.data(), e->betas.data(),
                               out->target(), cancel);
            } else {
#ifdef CUSIM_WITH_CUDA
              minhash::HashCuda(e->EnsureGpu(), m, rowStart, rowEnd, out->target(), timing.get(), cancel);
#endif
            }
            timing->nativeMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
          },
          [=](Napi::Env env) -> Napi::Value {
            auto r = Napi::Object::New(env);
            r.Set("signatures", out->ToJs(env));
            r.Set("kernelMs", timing->kernelMs);
            r.Set("transferMs", timing->transferMs);
            auto host = Napi::Object::New(env);
            host.Set("stageInMs", timing->stageInMs);
            host.Set("waitMs", timing->waitMs);
            host.Set("stageOutMs", timing->stageOutMs);
            host.Set("nativeMs", timing->nativeMs);
            r.Set("host", host);
            return r;
          },
          keep);
    });
  }

  // parameters() -> { rs, lnCs, betas } in [samples][dim]; the host tables
  // (equal to the GPU's by the seed contract, within 1 ulp on rs and lnCs).
  Napi::Value Parameters(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto e = Get("WeightedMinHash");
      e->EnsureHost();
      return TablesToJs(info.Env(), *e, e->rs.data(), e->lnCs.data(), e->betas.data());
    });
  }

  // deviceParameters(slot) -> the tables held by the slot-th device, [samples][dim].
  Napi::Value DeviceParameters(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto e = Get("WeightedMinHash");
      Args args(info);
      const double slot = args.Num(0, "slot");
      if (e->backend != Backend::Cuda) ThrowInvalid("deviceParameters needs the cuda backend");
      if (!(slot >= 0 && slot < double(e->devices.size()))) ThrowInvalid("slot is out of range");
#ifdef CUSIM_WITH_CUDA
      const size_t n = size_t(e->dim) * e->samples;
      std::vector<float> rs(n), lnCs(n), betas(n);
      minhash::DeviceParamsCuda(e->EnsureGpu(), size_t(slot), rs.data(), lnCs.data(), betas.data());
      return TablesToJs(info.Env(), *e, rs.data(), lnCs.data(), betas.data());
#else
      return info.Env().Undefined();
#endif
    });
  }

  Napi::Value Devices(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto e = Get("WeightedMinHash");
      auto a = Napi::Array::New(info.Env(), e->devices.size());
      for (size_t i = 0; i < e->devices.size(); ++i) a.Set(uint32_t(i), e->devices[i]);
      return a;
    });
  }

  Napi::Value DisposeJs(const Napi::CallbackInfo& info) { return Dispose(info); }
};

// jaccardPairs(signatures, samples, left, right) -> Float32Array
Napi::Value JaccardPairs(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Args args(info);
    auto sigs = TypedArg<uint32_t>(info[0], "signatures");
    const double samples = args.Num(1, "samples");
    auto left = TypedArg<uint32_t>(info[2], "left");
    auto right = TypedArg<uint32_t>(info[3], "right");
    if (!(samples >= 1 && samples <= 65536) || samples != double(uint64_t(samples)))
      ThrowInvalid("samples must be an integer in [1, 65536]");
    const uint64_t stride = uint64_t(samples) * 2;
    if (sigs.length % stride) ThrowInvalid("signatures.length must be a multiple of samples * 2");
    if (left.length != right.length) ThrowInvalid("left and right must have the same length");
    const uint64_t rows = sigs.length / stride;
    for (size_t i = 0; i < left.length; ++i) {
      if (left.data[i] >= rows) ThrowInvalid("left[" + std::to_string(i) + "]=" + std::to_string(left.data[i]) + " is out of range for " + std::to_string(rows) + " rows");
      if (right.data[i] >= rows) ThrowInvalid("right[" + std::to_string(i) + "]=" + std::to_string(right.data[i]) + " is out of range for " + std::to_string(rows) + " rows");
    }
    std::vector<float> out(left.length);
    minhash::JaccardPairsCpu(sigs.data, uint32_t(samples), left.data, right.data, left.length, out.data());
    return ToTyped(info.Env(), std::move(out));
  });
}

// minhashSplitRows(matrix, rowStart, rowEnd, parts) -> Float64Array of boundaries.
// The multi-GPU row split, exposed so tests check it for any device count.
Napi::Value SplitRows(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Args args(info);
    CsrView m = CsrArg(info[0], "matrix", false);
    const double a = args.Num(1, "rowStart"), b = args.Num(2, "rowEnd"), parts = args.Num(3, "parts");
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
