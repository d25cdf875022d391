// N-API glue for classic MinHash: a native object holding the permutations
// (and, on CUDA, their per-device copies), hash as a Promise.
#include <cmath>
#include <memory>

#include "classic_minhash.h"
#include "gpu.h"
#include "minhash_napi_common.h"
#include "napi_util.h"
#include "owned.h"

namespace cusim {
namespace {

struct ClassicEngine {
  uint32_t samples = 0;
  Backend backend = Backend::Cpu;
  std::vector<int> devices;
  std::vector<uint64_t> a, b;
  std::shared_ptr<minhash::Hasher> hasher;
};

class ClassicWrap : public ResourceWrap<ClassicWrap, ClassicEngine> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(
        env, "MinHashNative",
        {InstanceMethod("hash", &ClassicWrap::Hash), InstanceMethod("permutations", &ClassicWrap::Permutations),
         InstanceMethod("devices", &ClassicWrap::Devices), InstanceMethod("dispose", &ClassicWrap::DisposeJs)});
  }

  // new ({ samples, seed } | { samples, a, b }, backend, devices?): a and b are BigUint64Arrays.
  explicit ClassicWrap(const Napi::CallbackInfo& info) : ResourceWrap(info) {
    try {
      Args args(info);
      Napi::Object o = args.Obj(0, "options");
      auto e = std::make_shared<ClassicEngine>();
      e->samples = SamplesArg(NumProp(o, "samples", "options"));
      e->backend = BackendProp(o);
      const minhash::Tuning tuning = ParseTuning(o);
      if (e->backend == Backend::Cuda) e->devices = ResolveDevices(DevicesProp(o));
      e->a.resize(e->samples), e->b.resize(e->samples);
      if (o.Get("a").IsUndefined()) {
        const uint64_t seed = SeedProp(o, NAN);
        if (seed > 0xFFFFFFFFull) ThrowInvalid("seed must be an integer in [0, 2^32 - 1] (numpy RandomState's range)");
        minhash::SeedPermutations(uint32_t(seed), e->samples, e->a.data(), e->b.data());
      } else {
        Inputs in(Inputs::Use::Sync);
        auto a = in.Prop<uint64_t>(o, "a");
        auto b = in.Prop<uint64_t>(o, "b");
        if (a.length != e->samples || b.length != e->samples) ThrowInvalid("a and b must hold samples entries each");
        for (uint32_t s = 0; s < e->samples; ++s) {
          if (a.data[s] < 1 || a.data[s] >= minhash::kMersenne61)
            ThrowInvalid("a[" + std::to_string(s) + "] must be in [1, 2^61 - 1)");
          if (b.data[s] >= minhash::kMersenne61) ThrowInvalid("b[" + std::to_string(s) + "] must be in [0, 2^61 - 1)");
          e->a[s] = a.data[s], e->b[s] = b.data[s];
        }
      }
      e->hasher = e->backend == Backend::Cuda ? minhash::MakeCudaClassicHasher(e->a, e->b, e->devices, tuning)
                                              : minhash::MakeCpuClassicHasher(e->a, e->b);
      impl_ = e;
    } catch (const Error& err) {
      throw MakeJsError(info.Env(), err);
    }
  }

 private:
  // hash(matrix, { rowStart, rowEnd, cancel, out }) -> Promise<{ signatures, kernelMs, transferMs, host }>
  Napi::Value Hash(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto e = Get("MinHash");
      HashCall call = ParseHashCall(info, e->samples, false, e->backend == Backend::Cuda, [](const CsrSource& src) {
        if (src.cols > (uint64_t(1) << 32)) ThrowInvalid("matrix.cols must be at most 2^32 (token hashes are 32-bit)");
      });
      return RunHashCall(info.Env(), call, e->hasher, [] {}, info.This(), info[0]);
    });
  }

  // permutations() -> { a, b } as BigUint64Arrays.
  Napi::Value Permutations(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto e = Get("MinHash");
      auto r = Napi::Object::New(info.Env());
      r.Set("a", ToTyped(info.Env(), std::vector<uint64_t>(e->a)));
      r.Set("b", ToTyped(info.Env(), std::vector<uint64_t>(e->b)));
      return r;
    });
  }

  Napi::Value Devices(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto e = Get("MinHash");
      return DeviceList(info.Env(), e->devices);
    });
  }

  Napi::Value DisposeJs(const Napi::CallbackInfo& info) { return Dispose(info); }
};

void Init(Napi::Env env, Napi::Object exports) { exports.Set("MinHashNative", ClassicWrap::Define(env)); }

}  // namespace

CUSIM_REGISTER(classic_minhash, Init);

}  // namespace cusim
