// devices(), thread control, and the answers a CPU-only build gives.
#include <thread>

#include "gpu.h"
#include "napi_util.h"
#include "parallel.h"

namespace cusim {

#ifndef CUSIM_WITH_CUDA
#ifndef CUSIM_NO_CUDA_REASON
#define CUSIM_NO_CUDA_REASON "built without CUDA"
#endif
const DeviceReport& QueryDevices() {
  static const DeviceReport report{false, std::string("not compiled: this addon was built without CUDA kernels (") + CUSIM_NO_CUDA_REASON + ")", {}};
  return report;
}
void DeviceMemory(int, uint64_t*, uint64_t*) { throw Error(kCudaError, "CUDA is not compiled into this addon"); }
void* HostPinnedAlloc(uint64_t) { return nullptr; }
void HostPinnedFree(void*) noexcept {}
#endif

std::vector<int> ResolveDevices(const std::vector<int>& requested) {
  const DeviceReport& r = QueryDevices();
  if (!r.cuda) throw Error(kCudaError, "backend 'cuda' is unavailable: " + r.reason);
  std::vector<int> out;
  if (requested.empty()) {
    for (const auto& g : r.gpus) out.push_back(g.index);
    return out;
  }
  for (size_t i = 0; i < requested.size(); ++i) {
    int d = requested[i];
    if (d < 0 || size_t(d) >= r.gpus.size())
      ThrowInvalid("devices[" + std::to_string(i) + "]=" + std::to_string(d) + " is out of range: this host has " +
                   std::to_string(r.gpus.size()) + " GPU(s)");
    for (size_t j = 0; j < i; ++j)
      if (requested[j] == d) ThrowInvalid("devices[" + std::to_string(i) + "]=" + std::to_string(d) + " is listed twice");
    out.push_back(d);
  }
  return out;
}

namespace {

Napi::Value Devices(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Napi::Env env = info.Env();
    const DeviceReport& r = QueryDevices();
    auto out = Napi::Object::New(env);
    out.Set("cuda", Napi::Boolean::New(env, r.cuda));
    if (!r.cuda) out.Set("reason", Napi::String::New(env, r.reason));
    auto gpus = Napi::Array::New(env, r.gpus.size());
    for (size_t i = 0; i < r.gpus.size(); ++i) {
      const GpuInfo& g = r.gpus[i];
      auto o = Napi::Object::New(env);
      o.Set("index", g.index);
      o.Set("name", g.name);
      o.Set("memoryBytes", Napi::Number::New(env, double(g.memoryBytes)));
      o.Set("computeCapability", Napi::String::New(env, std::to_string(g.ccMajor) + "." + std::to_string(g.ccMinor)));
      o.Set("multiprocessors", g.multiprocessors);
      gpus.Set(uint32_t(i), o);
    }
    out.Set("gpus", gpus);
    out.Set("compiledWithCuda",
#ifdef CUSIM_WITH_CUDA
            Napi::Boolean::New(env, true)
#else
            Napi::Boolean::New(env, false)
#endif
    );
    return out;
  });
}

Napi::Value Threads(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    if (info.Length() > 0 && info[0].IsNumber()) SetNumThreads(size_t(info[0].As<Napi::Number>().Uint32Value()));
    return Napi::Number::New(info.Env(), double(NumThreads()));
  });
}

// allocPinned(bytes) -> { buffer: ArrayBuffer, pinned: boolean }: page-locked
// when a GPU is present, else an ordinary zero-filled buffer.
Napi::Value AllocPinned(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Napi::Env env = info.Env();
    const double n = info.Length() > 0 && info[0].IsNumber() ? info[0].As<Napi::Number>().DoubleValue() : -1;
    if (!(n >= 0 && n == double(uint64_t(n)))) ThrowInvalid("bytes must be a non-negative integer");
    const uint64_t bytes = uint64_t(n);
    auto out = Napi::Object::New(env);
    // Node wraps external memory only up to MaxTypedLength() bytes; a larger
    // array is an ordinary one (isPinned() says so), never a copy of pinned memory.
    void* p = bytes && bytes <= MaxTypedLength() ? HostPinnedAlloc(bytes) : nullptr;
    out.Set("pinned", Napi::Boolean::New(env, p != nullptr));
    out.Set("buffer", p ? ArrayBufferOver(env, p, bytes, [](void* q, void*) { HostPinnedFree(q); }, nullptr)
                        : NewJsArrayBuffer(env, bytes));
    return out;
  });
}

// setMaxTypedLength(n): buffer.constants.MAX_LENGTH of this Node, set by the loader.
Napi::Value SetMaxTyped(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Args args(info);
    const double n = args.Num(0, "maxLength");
    if (!(n >= 1 && n <= 9007199254740991.0) || n != double(uint64_t(n))) ThrowInvalid("maxLength must be a positive safe integer");
    SetMaxTypedLength(uint64_t(n));
    return info.Env().Undefined();
  });
}

void Init(Napi::Env env, Napi::Object exports) {
  exports.Set("setMaxTypedLength", Napi::Function::New(env, SetMaxTyped, "setMaxTypedLength"));
  exports.Set("allocPinned", Napi::Function::New(env, AllocPinned, "allocPinned"));
  exports.Set("devices", Napi::Function::New(env, Devices, "devices"));
  exports.Set("threads", Napi::Function::New(env, Threads, "threads"));
  exports.Set("hardwareConcurrency", Napi::Number::New(env, std::thread::hardware_concurrency()));
}

}  // namespace

CUSIM_REGISTER(runtime, Init);

}  // namespace cusim
