// N-API glue for the utility kernels.
#include <map>
#include <memory>
#include <mutex>

#include "gpu.h"
#include "napi_util.h"
#include "owned.h"
#include "ops.h"

namespace cusim {
namespace {

// The utility functions have no object to own a backend, so each backend
// (the CPU, or one GPU) is made once per process, at its first call, and
// shared by every later call: the backends hold no per-call state.
std::shared_ptr<const ops::Ops> OpsFor(Backend backend, int device) {
  static const std::shared_ptr<const ops::Ops> cpu = ops::MakeCpuOps();
  if (backend == Backend::Cpu) return cpu;
  static std::mutex mu;
  static std::map<int, std::shared_ptr<const ops::Ops>> gpus;
  std::lock_guard<std::mutex> lock(mu);
  auto& g = gpus[device];
  if (!g) g = ops::MakeCudaOps(device);
  return g;
}

// popcountRows(codes, { backend, devices, cancel }) -> Promise<{ counts, kernelMs, transferMs }>
Napi::Value PopcountRows(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Args args(info);
    Napi::Object opts = args.Obj(1, "options");
    Backend backend = BackendProp(opts);
    std::shared_ptr<const ops::Ops> impl = OpsFor(backend, backend == Backend::Cpu ? 0 : DeviceFor(backend, opts));
    auto in = std::make_shared<Inputs>(Inputs::Use::Async);
    in->ForGpu(backend == Backend::Cuda);
    const BitsView codes = in->Bits(info[0], "codes");
    auto out = std::make_shared<std::vector<uint32_t>>(codes.rows);
    auto timing = std::make_shared<ops::Timing>();
    return RunAsync(
        info.Env(), [=] { impl->PopcountRows(codes, out->data(), timing.get()); },
        [=](Napi::Env env) -> Napi::Value {
          auto r = Napi::Object::New(env);
          r.Set("counts", ToTyped(env, std::move(*out)));
          r.Set("kernelMs", timing->kernelMs);
          r.Set("transferMs", timing->transferMs);
          return r;
        },
        {}, in);
  });
}

void Init(Napi::Env env, Napi::Object exports) {
  exports.Set("popcountRows", Napi::Function::New(env, PopcountRows, "popcountRows"));
}

}  // namespace

CUSIM_REGISTER(ops, Init);

}  // namespace cusim
