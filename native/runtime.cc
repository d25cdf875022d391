// devices(), thread control, and the answers a CPU-only build gives.
#include <thread>

#include "gpu.h"
#include "napi_util.h"
#include "owned.h"
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
void* HostPinnedAlloc(uint64_t, bool) { return nullptr; }
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
    if (info.Length() > 0 && info[0].IsNumber()) {
      const double n = info[0].As<Napi::Number>().DoubleValue();
      if (!(n >= 0 && n <= 4096) || n != double(uint32_t(n))) ThrowInvalid("threads must be an integer in [0, 4096]");
      SetNumThreads(size_t(n));
    }
    return Napi::Number::New(info.Env(), double(NumThreads()));
  });
}

// allocPinned(bytes) -> { buffer: ArrayBuffer, pinned: boolean }: page-locked
// (and refcounted, owned.h) when a GPU is present, else an ordinary zero-filled buffer.
Napi::Value AllocPinned(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    const double n = info.Length() > 0 && info[0].IsNumber() ? info[0].As<Napi::Number>().DoubleValue() : -1;
    if (!(n >= 0 && n <= 9007199254740991.0 && n == double(uint64_t(n)))) ThrowInvalid("bytes must be a non-negative integer");
    return NewLentBuffer(info.Env(), uint64_t(n));
  });
}

// deviceMemory(device) -> { free, total } bytes (tests watch GPU memory with it).
Napi::Value DeviceMemoryJs(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    const double d = Args(info).Num(0, "device");
    const auto devs = ResolveDevices({});
    if (!(d >= 0 && d < double(devs.size())) || d != double(int(d))) ThrowInvalid("device is out of range");
    uint64_t freeB = 0, totalB = 0;
    DeviceMemory(int(d), &freeB, &totalB);
    auto o = Napi::Object::New(info.Env());
    o.Set("free", double(freeB));
    o.Set("total", double(totalB));
    return o;
  });
}

void Init(Napi::Env env, Napi::Object exports) {
  exports.Set("deviceMemory", Napi::Function::New(env, DeviceMemoryJs, "deviceMemory"));
  exports.Set("allocPinned", Napi::Function::New(env, AllocPinned, "allocPinned"));
  exports.Set("devices", Napi::Function::New(env, Devices, "devices"));
  exports.Set("threads", Napi::Function::New(env, Threads, "threads"));
  exports.Set("hardwareConcurrency", Napi::Number::New(env, std::thread::hardware_concurrency()));
}

}  // namespace

CUSIM_REGISTER(runtime, Init);

}  // namespace cusim
