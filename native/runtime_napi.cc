// devices(), thread control and device checks; what only a CUDA build knows
// comes from QueryDevices (gpu.h).
#include <thread>

#include "cuda_support.h"
#include "gpu.h"
#include "napi_util.h"
#include "owned.h"
#include "parallel.h"

namespace cusim {

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
      if (requested[j] == d)
        ThrowInvalid("devices[" + std::to_string(i) + "]=" + std::to_string(d) + " is listed twice");
    out.push_back(r.gpus[size_t(d)].index);
  }
  return out;
}

bool DeviceTensorCores(int device) {
  for (const GpuInfo& g : QueryDevices().gpus)
    if (g.index == device) return g.tensorCores;
  return false;
}

namespace {

Napi::Array Strings(Napi::Env env, const std::vector<std::string>& v) {
  auto a = Napi::Array::New(env, v.size());
  for (size_t i = 0; i < v.size(); ++i) a.Set(uint32_t(i), v[i]);
  return a;
}

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
      o.Set("tensorCores", g.tensorCores);
      auto kernels = Napi::Object::New(env);
      for (const auto& k : g.kernels) kernels.Set(k.first, Strings(env, k.second));
      o.Set("kernels", kernels);
      gpus.Set(uint32_t(i), o);
    }
    out.Set("gpus", gpus);
    out.Set("compiledWithCuda", r.compiled);
    if (r.compiled) {
      out.Set("cudaArchitectures", r.architectures);
      out.Set("runtimeVersion", CudaVersion(r.runtimeVersion));
      if (r.driverVersion > 0) out.Set("driverVersion", CudaVersion(r.driverVersion));
      if (!r.driverRelease.empty()) out.Set("driverRelease", r.driverRelease);
    }
    return out;
  });
}

// cudaSupport(driverVersion, runtimeVersion, release, ccMajor, ccMinor, archs)
// -> { reason?, archSupported, tensorCores }: the decisions devices() makes,
// on injected versions (tests).
Napi::Value CudaSupport(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Napi::Env env = info.Env();
    Args args(info);
    const int driver = int(args.Num(0, "driverVersion")), runtime = int(args.Num(1, "runtimeVersion"));
    const std::string release = info.Length() > 2 && info[2].IsString() ? info[2].As<Napi::String>().Utf8Value() : "";
    const int major = int(args.Num(3, "ccMajor")), minor = int(args.Num(4, "ccMinor"));
    const std::string archs = info.Length() > 5 && info[5].IsString() ? info[5].As<Napi::String>().Utf8Value() : "";
    auto out = Napi::Object::New(env);
    const std::string reason = DriverTooOld(driver, runtime, release);
    if (!reason.empty()) out.Set("reason", reason);
    out.Set("archSupported", ArchSupported(major, minor, archs));
    out.Set("tensorCores", TensorCoreKernels(major));
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
    if (!(n >= 0 && n <= 9007199254740991.0 && n == double(uint64_t(n))))
      ThrowInvalid("bytes must be a non-negative integer");
    return NewLentBuffer(info.Env(), uint64_t(n));
  });
}

// probePageLocking(bytes) -> Promise<PageLockProbe fields> (gpu.h), on a worker.
Napi::Value ProbePageLockingJs(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    const double n = info.Length() > 0 && info[0].IsNumber() ? info[0].As<Napi::Number>().DoubleValue() : -1;
    if (!(n >= 1 && n <= 9007199254740991.0 && n == double(uint64_t(n))))
      ThrowInvalid("bytes must be a positive integer");
    auto r = std::make_shared<PageLockProbe>();
    return RunAsync(
        info.Env(), [r, n] { *r = ProbePageLocking(uint64_t(n)); },
        [r](Napi::Env env) -> Napi::Value {
          auto o = Napi::Object::New(env);
          o.Set("hostAllocMs", r->hostAllocMs);
          o.Set("hostFreeMs", r->hostFreeMs);
          o.Set("hostAllocH2dGBs", r->hostAllocH2dGBs);
          o.Set("touchMs", r->touchMs);
          o.Set("registerMs", r->registerMs);
          o.Set("unregisterMs", r->unregisterMs);
          o.Set("registeredH2dGBs", r->registeredH2dGBs);
          return o;
        },
        {});
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

// setMaxTypedLength(n): buffer.constants.MAX_LENGTH of this Node, set by the loader.
Napi::Value SetMaxTyped(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Args args(info);
    const double n = args.Num(0, "maxLength");
    if (!(n >= 1 && n <= 9007199254740991.0) || n != double(uint64_t(n)))
      ThrowInvalid("maxLength must be a positive safe integer");
    SetMaxTypedLength(uint64_t(n));
    return info.Env().Undefined();
  });
}

// holdDeviceMemory(device, bytes) -> { release() }: for tests that need a
// full GPU (the out-of-memory paths); the memory also goes with the object.
Napi::Value HoldDeviceMemoryJs(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Args args(info);
    const double d = args.Num(0, "device"), b = args.Num(1, "bytes");
    const auto devs = ResolveDevices({});
    if (!(d >= 0 && d < double(devs.size())) || d != double(int(d))) ThrowInvalid("device is out of range");
    if (!(b >= 1 && b <= 9007199254740991.0) || b != double(uint64_t(b)))
      ThrowInvalid("bytes must be a positive integer");
    auto held = std::make_shared<std::shared_ptr<void>>(HoldDeviceMemory(int(d), uint64_t(b)));
    auto o = Napi::Object::New(info.Env());
    o.Set("release", Napi::Function::New(info.Env(), [held](const Napi::CallbackInfo& i) {
            held->reset();
            return i.Env().Undefined();
          }));
    return o;
  });
}

void Init(Napi::Env env, Napi::Object exports) {
  exports.Set("holdDeviceMemory", Napi::Function::New(env, HoldDeviceMemoryJs, "holdDeviceMemory"));
  exports.Set("deviceMemory", Napi::Function::New(env, DeviceMemoryJs, "deviceMemory"));
  exports.Set("probePageLocking", Napi::Function::New(env, ProbePageLockingJs, "probePageLocking"));
  exports.Set("setMaxTypedLength", Napi::Function::New(env, SetMaxTyped, "setMaxTypedLength"));
  exports.Set("allocPinned", Napi::Function::New(env, AllocPinned, "allocPinned"));
  exports.Set("devices", Napi::Function::New(env, Devices, "devices"));
  exports.Set("cudaSupport", Napi::Function::New(env, CudaSupport, "cudaSupport"));
  exports.Set("threads", Napi::Function::New(env, Threads, "threads"));
  exports.Set("hardwareConcurrency", Napi::Number::New(env, std::thread::hardware_concurrency()));
}

}  // namespace

CUSIM_REGISTER(runtime, Init);

}  // namespace cusim
