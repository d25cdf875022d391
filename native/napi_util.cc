#include "napi_util.h"

#include <algorithm>
#include <atomic>

#include "gpu.h"

#include <cmath>
#include <cstring>
#include <mutex>
#include <new>

#include "parallel.h"

namespace cusim {

std::vector<std::pair<const char*, InitFn>>& Registry() {
  static std::vector<std::pair<const char*, InitFn>> r;
  return r;
}

Registrar::Registrar(const char* name, InitFn fn) { Registry().emplace_back(name, fn); }

namespace {
std::mutex gEnvMutex;
uint64_t gEnvs = 0;  // environments whose EnvData is alive

void EnvEnded(Napi::Env, EnvData* d) {
  delete d;
  std::lock_guard<std::mutex> lock(gEnvMutex);
  if (--gEnvs == 0) StopReleases();
}
}  // namespace

void EnvStarted(Napi::Env env) {
  {
    std::lock_guard<std::mutex> lock(gEnvMutex);
    ++gEnvs;
  }
  env.SetInstanceData<EnvData, EnvEnded>(new EnvData);
}

EnvData* GetEnvData(Napi::Env env) { return env.GetInstanceData<EnvData>(); }

Napi::Error MakeJsError(Napi::Env env, const std::string& code, const std::string& msg, const std::string& kind) {
  Napi::Error err = kind == "TypeError"    ? Napi::Error(env, Napi::TypeError::New(env, msg).Value())
                    : kind == "RangeError" ? Napi::Error(env, Napi::RangeError::New(env, msg).Value())
                                           : Napi::Error::New(env, msg);
  err.Set("code", Napi::String::New(env, code));
  if (code == kAborted) err.Set("name", Napi::String::New(env, "AbortError"));
  return err;
}

Napi::Error MakeJsError(Napi::Env env, const Error& e) {
  Napi::Error err = MakeJsError(env, e.code, e.what(), e.kind);
  if (e.hasBytes) {
    err.Set("bytesRequested", Napi::Number::New(env, double(e.bytesRequested)));
    err.Set("bytesFree", Napi::Number::New(env, double(e.bytesFree)));
  }
  return err;
}

Napi::Value Guard(const Napi::CallbackInfo& info, const std::function<Napi::Value()>& body) {
  Napi::Env env = info.Env();
  try {
    return body();
  } catch (const Napi::Error&) {
    throw;
  } catch (const Error& e) {
    throw MakeJsError(env, e);
  } catch (const std::bad_alloc&) {
    throw MakeJsError(env, kOutOfMemory, "host memory allocation failed");
  } catch (const std::exception& e) {
    throw MakeJsError(env, kInternal, e.what());
  }
}

Napi::Object Args::Obj(size_t i, const char* name) const {
  if (info_.Length() <= i || !info_[i].IsObject()) ThrowInvalid(std::string(name) + " must be an object", "TypeError");
  return info_[i].As<Napi::Object>();
}

double Args::Num(size_t i, const char* name) const {
  if (info_.Length() <= i || !info_[i].IsNumber()) ThrowInvalid(std::string(name) + " must be a number", "TypeError");
  return info_[i].As<Napi::Number>().DoubleValue();
}

Napi::Value Prop(const Napi::Object& o, const char* key) { return o.Get(key); }

double NumProp(const Napi::Object& o, const char* key, const char* what) {
  Napi::Value v = o.Get(key);
  if (!v.IsNumber()) ThrowInvalid(std::string(what) + "." + key + " must be a number", "TypeError");
  double d = v.As<Napi::Number>().DoubleValue();
  if (!std::isfinite(d)) ThrowInvalid(std::string(what) + "." + key + " must be finite");
  return d;
}

uint64_t SeedProp(const Napi::Object& o, double fallback) {
  Napi::Value v = o.Get("seed");
  double d = fallback;
  if (!v.IsUndefined() || std::isnan(fallback)) {
    if (!v.IsNumber()) ThrowInvalid("options.seed must be a number", "TypeError");
    d = v.As<Napi::Number>().DoubleValue();
  }
  if (!(d >= 0 && d <= 9007199254740991.0) || d != std::floor(d))
    ThrowInvalid("seed must be a non-negative safe integer");
  return uint64_t(d);
}

double NumPropOr(const Napi::Object& o, const char* key, double fallback) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined() || v.IsNull()) return fallback;
  if (!v.IsNumber()) ThrowInvalid(std::string(key) + " must be a number", "TypeError");
  return v.As<Napi::Number>().DoubleValue();
}

bool BoolPropOr(const Napi::Object& o, const char* key, bool fallback) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined() || v.IsNull()) return fallback;
  return v.ToBoolean().Value();
}

Napi::Object TuningProp(const Napi::Object& o) {
  Napi::Value v = o.Get("tuning");
  if (v.IsUndefined() || v.IsNull()) return Napi::Object::New(o.Env());
  if (!v.IsObject()) ThrowInvalid("options.tuning must be an object", "TypeError");
  return v.As<Napi::Object>();
}

std::string StrPropOr(const Napi::Object& o, const char* key, const std::string& fallback) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined() || v.IsNull()) return fallback;
  if (!v.IsString()) ThrowInvalid(std::string(key) + " must be a string", "TypeError");
  return v.As<Napi::String>().Utf8Value();
}

Backend BackendProp(const Napi::Object& o) {
  std::string b = StrPropOr(o, "backend", "cpu");
  if (b == "cpu") return Backend::Cpu;
  if (b == "cuda") return Backend::Cuda;
  ThrowInvalid("backend must be 'cpu' or 'cuda' at the native boundary (got '" + b + "')", "TypeError");
}

std::vector<int> DevicesProp(const Napi::Object& o) {
  std::vector<int> out;
  Napi::Value v = o.Get("devices");
  if (v.IsUndefined() || v.IsNull()) return out;
  if (!v.IsArray()) ThrowInvalid("devices must be an array of GPU indices", "TypeError");
  auto a = v.As<Napi::Array>();
  for (uint32_t i = 0; i < a.Length(); ++i) {
    Napi::Value e = a.Get(i);
    if (!e.IsNumber()) ThrowInvalid("devices[" + std::to_string(i) + "] must be a number", "TypeError");
    out.push_back(e.As<Napi::Number>().Int32Value());
  }
  return out;
}

Napi::Array DeviceList(Napi::Env env, const std::vector<int>& devices) {
  auto a = Napi::Array::New(env, devices.size());
  for (size_t i = 0; i < devices.size(); ++i) a.Set(uint32_t(i), devices[i]);
  return a;
}

int DeviceFor(Backend backend, const Napi::Object& o) {
  return backend == Backend::Cuda ? ResolveDevices(DevicesProp(o)).at(0) : 0;
}

bool HasByteData(const Napi::Value& v) {
  if (!v.IsObject()) return false;
  const Napi::Value data = v.As<Napi::Object>().Get("data");
  return data.IsTypedArray() && data.As<Napi::TypedArray>().TypedArrayType() == napi_uint8_array;
}

static std::atomic<uint64_t> gMaxTypedLength{uint64_t(1) << 32};

uint64_t MaxTypedLength() { return gMaxTypedLength.load(std::memory_order_relaxed); }
void SetMaxTypedLength(uint64_t n) { gMaxTypedLength.store(n, std::memory_order_relaxed); }

void CheckTypedLength(uint64_t elements, const std::string& what, const std::string& hint) {
  if (elements <= MaxTypedLength()) return;
  ThrowInvalid(what + " would hold " + std::to_string(elements) + " elements, more than one typed array holds (" +
               std::to_string(MaxTypedLength()) + ")" + (hint.empty() ? "" : "; " + hint));
}

namespace {
struct Release {
  void (*fn)(void*, void*);
  void* hint;
};
}  // namespace

Napi::ArrayBuffer NewJsArrayBuffer(Napi::Env env, uint64_t bytes) {
  // Not napi_create_arraybuffer: V8 aborts the process when that allocation
  // fails, where `new ArrayBuffer(bytes)` throws a RangeError.
  try {
    return env.Global()
        .Get("ArrayBuffer")
        .As<Napi::Function>()
        .New({Napi::Number::New(env, double(bytes))})
        .As<Napi::ArrayBuffer>();
  } catch (const Napi::Error&) {
    throw Error(kOutOfMemory, "could not allocate " + std::to_string(bytes) + " bytes (" + FormatBytes(bytes) +
                                  ") of host memory for a JavaScript array");
  }
}

Napi::ArrayBuffer ArrayBufferOver(Napi::Env env, void* p, uint64_t bytes, void (*release)(void*, void*), void* hint) {
  if (bytes <= MaxTypedLength()) {
    auto* r = new Release{release, hint};
    napi_value ab;
    const napi_status s = napi_create_external_arraybuffer(
        env, p, bytes,
        [](napi_env, void* data, void* h) {
          auto* rel = static_cast<Release*>(h);
          rel->fn(data, rel->hint);
          delete rel;
        },
        r, &ab);
    // On failure Node may already have run (or scheduled) the finalizer, so
    // nothing is freed here: a leak on an error path rather than a double free.
    if (s != napi_ok) throw Error(kOutOfMemory, "could not wrap a " + FormatBytes(bytes) + " result for JavaScript");
    return Napi::ArrayBuffer(env, ab);
  }
  Napi::ArrayBuffer ab;
  try {
    ab = NewJsArrayBuffer(env, bytes);
  } catch (...) {
    release(p, hint);
    throw;
  }
  void* data = ab.Data();
  constexpr uint64_t kChunk = 64ull << 20;
  ParallelFor((bytes + kChunk - 1) / kChunk, 1, [&](size_t b, size_t e) {
    const uint64_t lo = b * kChunk, hi = std::min<uint64_t>(bytes, e * kChunk);
    std::memcpy(static_cast<char*>(data) + lo, static_cast<const char*>(p) + lo, hi - lo);
  });
  release(p, hint);
  return ab;
}

Task::Task(Napi::Env env, Work work, Done done, const std::vector<Napi::Value>& keep, std::shared_ptr<Inputs> inputs)
    : Napi::AsyncWorker(env, "cusim"), work_(std::move(work)), done_(std::move(done)), inputs_(std::move(inputs)) {
  NAPI_THROW_IF_FAILED_VOID(env, napi_create_promise(env, &deferred_, &promise_));
  for (const auto& v : keep)
    if (!v.IsUndefined() && !v.IsNull()) keep_.push_back(Napi::Persistent(v));
}

void Task::Execute() {
  try {
    work_();
  } catch (const Error& e) {
    error_ = e;
  } catch (const std::bad_alloc&) {
    error_ = Error(kOutOfMemory, "host memory allocation failed");
  } catch (const std::exception& e) {
    error_ = Error(kInternal, e.what());
  } catch (...) {
    error_ = Error(kInternal, "unknown native exception");
  }
}

void Task::Settle(Napi::Env env, bool ok, napi_value v) noexcept {
  // Raw calls: the wrappers throw when the environment is going away.
  if (ok)
    napi_resolve_deferred(env, deferred_, v);
  else
    napi_reject_deferred(env, deferred_, v);
}

void Task::Complete(Napi::Env env) {
  napi_value result = nullptr, error = nullptr;
  try {
    if (error_)
      error = MakeJsError(env, *error_).Value();
    else
      result = done_(env);
  } catch (const Napi::Error& e) {
    error = e.Value();
  } catch (const Error& e) {
    try {
      error = MakeJsError(env, e).Value();
    } catch (...) {
    }
  } catch (const std::bad_alloc&) {
    try {
      error = MakeJsError(env, kOutOfMemory, "host memory allocation failed").Value();
    } catch (...) {
    }
  } catch (const std::exception& e) {
    try {
      error = MakeJsError(env, kInternal, e.what()).Value();
    } catch (...) {
    }
  } catch (...) {
  }
  // Neither: the environment is being torn down and the Promise cannot settle.
  if (result)
    Settle(env, true, result);
  else if (error)
    Settle(env, false, error);
}

// Replaces AsyncWorker's, which rethrows as a C++ exception what it cannot
// throw into JavaScript: during a worker's teardown that aborted the process.
void Task::OnWorkComplete(Napi::Env env, napi_status status) {
  if (status != napi_cancelled) {
    napi_handle_scope scope = nullptr;
    const bool scoped = napi_open_handle_scope(env, &scope) == napi_ok;
    try {
      Complete(env);
    } catch (...) {
    }
    if (scoped) napi_close_handle_scope(env, scope);
  }
  try {
    for (auto& r : keep_) r.Reset();
  } catch (...) {
  }
  inputs_.reset();
  Destroy();
}

Napi::Value RunAsync(Napi::Env env, Task::Work work, Task::Done done, const std::vector<Napi::Value>& keep,
                     std::shared_ptr<Inputs> inputs) {
  auto* t = new Task(env, std::move(work), std::move(done), keep, std::move(inputs));
  auto p = t->Promise();
  t->Queue();
  return p;
}

}  // namespace cusim
