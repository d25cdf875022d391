// N-API plumbing shared by every engine's glue: module registration, argument
// views with validation, the Promise-returning task worker, and error mapping.
#pragma once

#include <napi.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common.h"

namespace cusim {

// ---- module registration ---------------------------------------------------
// Each engine's glue file registers an init function with CUSIM_REGISTER, so
// adding an engine never touches addon.cc.
using InitFn = void (*)(Napi::Env, Napi::Object);
struct Registrar {
  Registrar(const char* name, InitFn fn);
};
std::vector<std::pair<const char*, InitFn>>& Registry();
#define CUSIM_REGISTER(name, fn) static ::cusim::Registrar cusim_registrar_##name(#name, fn)

// ---- environments -------------------------------------------------------------
// Per-environment state, the environment's napi instance data (each worker
// loads the addon anew), made by the module's Init through EnvStarted. Its
// finalizer is the environment's last, after every object's and call's
// (Node finalizes the instance data after the objects made since): when that
// environment was the last one using the addon, Node unloads the addon next,
// so a thread still running the addon's code (the background releases of
// gpu.h) is ended there, or the process would crash (a worker that loaded the
// addon, with the main thread never having done so, terminated or exiting).
struct EnvData {
  Napi::FunctionReference stagedCtor;  // owned.cc's Staged class
};
void EnvStarted(Napi::Env env);
EnvData* GetEnvData(Napi::Env env);

// ---- errors -----------------------------------------------------------------
Napi::Error MakeJsError(Napi::Env env, const Error& e);
Napi::Error MakeJsError(Napi::Env env, const std::string& code, const std::string& msg,
                        const std::string& kind = "Error");

// Runs body and converts cusim::Error / std::exception into JavaScript errors.
// Synchronous entry points wrap themselves in it so nothing escapes as a crash.
Napi::Value Guard(const Napi::CallbackInfo& info, const std::function<Napi::Value()>& body);

// ---- argument access ----------------------------------------------------------
// The TypeScript layer validates first and names arguments for users; these
// checks exist so that a direct call into the addon can never crash Node.
class Args {
 public:
  explicit Args(const Napi::CallbackInfo& info) : info_(info) {}
  Napi::Env env() const { return info_.Env(); }
  Napi::Object Obj(size_t i, const char* name) const;
  double Num(size_t i, const char* name) const;
  const Napi::CallbackInfo& info() const { return info_; }

 private:
  const Napi::CallbackInfo& info_;
};

Napi::Value Prop(const Napi::Object& o, const char* key);
// `what` names the object holding `key` ("options"), so messages read "options.k ...".
double NumProp(const Napi::Object& o, const char* key, const char* what);
// o.seed as a non-negative safe integer; `fallback` when absent (NaN: required).
uint64_t SeedProp(const Napi::Object& o, double fallback);
double NumPropOr(const Napi::Object& o, const char* key, double fallback);
bool BoolPropOr(const Napi::Object& o, const char* key, bool fallback);
std::string StrPropOr(const Napi::Object& o, const char* key, const std::string& fallback);
// o.tuning (an engine's kernel choices, checked by lib/), or an empty object when absent.
Napi::Object TuningProp(const Napi::Object& o);
Backend BackendProp(const Napi::Object& o);           // o.backend: 'cpu' | 'cuda'
std::vector<int> DevicesProp(const Napi::Object& o);  // o.devices: number[] or absent (all)
// devices as a JavaScript array of GPU indices.
Napi::Array DeviceList(Napi::Env env, const std::vector<int>& devices);
// The GPU a single-device call runs on: the first of o.devices (checked
// against this host) for the CUDA backend, 0 (unused) for the CPU.
int DeviceFor(Backend backend, const Napi::Object& o);

// Typed array element types. Arrays are read through Inputs (owned.h),
// which owns what async calls read.
template <typename T>
struct TypedArrayTraits;
template <>
struct TypedArrayTraits<float> {
  static constexpr napi_typedarray_type type = napi_float32_array;
  static constexpr const char* name = "Float32Array";
};
template <>
struct TypedArrayTraits<double> {
  static constexpr napi_typedarray_type type = napi_float64_array;
  static constexpr const char* name = "Float64Array";
};
template <>
struct TypedArrayTraits<uint32_t> {
  static constexpr napi_typedarray_type type = napi_uint32_array;
  static constexpr const char* name = "Uint32Array";
};
template <>
struct TypedArrayTraits<int32_t> {
  static constexpr napi_typedarray_type type = napi_int32_array;
  static constexpr const char* name = "Int32Array";
};
template <>
struct TypedArrayTraits<uint16_t> {
  static constexpr napi_typedarray_type type = napi_uint16_array;
  static constexpr const char* name = "Uint16Array";
};
template <>
struct TypedArrayTraits<uint64_t> {
  static constexpr napi_typedarray_type type = napi_biguint64_array;
  static constexpr const char* name = "BigUint64Array";
};
template <>
struct TypedArrayTraits<uint8_t> {
  static constexpr napi_typedarray_type type = napi_uint8_array;
  static constexpr const char* name = "Uint8Array";
};

template <typename T>
struct ArrayArg {
  T* data = nullptr;
  size_t length = 0;
};

// Whether v is an object whose data is a Uint8Array.
bool HasByteData(const Napi::Value& v);

// ---- outputs ----------------------------------------------------------------
// A typed array holds at most MaxTypedLength() elements (buffer.constants.
// MAX_LENGTH, 2^32 on Node 20; the loader sets it), and Node wraps external
// memory only up to that many bytes: past it Node frees the memory itself and
// node-addon-api's ArrayBuffer::New frees its record a second time (the
// "double free" abort of a 4.5 GB signature array). Every result goes through
// ArrayBufferOver, never ArrayBuffer::New on external memory.
void SetMaxTypedLength(uint64_t n);  // MaxTypedLength() is in common.h
// Coded RangeError when `elements` cannot be one typed array; `what` names the
// result and `hint` says how to ask for less.
void CheckTypedLength(uint64_t elements, const std::string& what, const std::string& hint = "");
// Gives `bytes` at p to JavaScript. Up to MaxTypedLength() bytes the buffer
// wraps p and release(p, hint) runs at garbage collection; larger blocks are
// copied (on all cores) into a V8-owned buffer and released at once. Owns p
// from the call on, also when it throws.
Napi::ArrayBuffer ArrayBufferOver(Napi::Env env, void* p, uint64_t bytes, void (*release)(void* p, void* hint),
                                  void* hint);

// A zero-filled ArrayBuffer owned by V8 (no size limit but memory); coded
// CUSIM_OUT_OF_MEMORY instead of V8's abort when it cannot be allocated.
Napi::ArrayBuffer NewJsArrayBuffer(Napi::Env env, uint64_t bytes);

// Hands a vector's storage to JavaScript without a copy (see ArrayBufferOver).
template <typename T, typename A>
Napi::TypedArrayOf<T> ToTyped(Napi::Env env, std::vector<T, A>&& v, const char* what = "a result") {
  CheckTypedLength(v.size(), what);
  if (v.empty()) return Napi::TypedArrayOf<T>::New(env, 0);
  auto* owned = new std::vector<T, A>(std::move(v));
  const size_t n = owned->size();
  auto buf = ArrayBufferOver(
      env, owned->data(), n * sizeof(T), [](void*, void* h) { delete static_cast<std::vector<T, A>*>(h); }, owned);
  return Napi::TypedArrayOf<T>::New(env, n, buf, 0);
}

// ---- async work ---------------------------------------------------------------
class Inputs;

// A Promise-returning worker. `work` runs off the event loop; `done` builds the
// result on the JS thread. `inputs` (owned.h) holds what the work reads until
// the worker finishes; every value in `keep` (the owning object, arrays `done`
// writes into) stays referenced as long.
//
// Completion never throws: when the environment is being torn down (a worker
// terminated during the call), settling the Promise fails and the result is
// dropped, where a C++ exception would abort the process.
class Task : public Napi::AsyncWorker {
 public:
  using Work = std::function<void()>;
  using Done = std::function<Napi::Value(Napi::Env)>;
  Task(Napi::Env env, Work work, Done done, const std::vector<Napi::Value>& keep, std::shared_ptr<Inputs> inputs);
  // Valid in the handle scope that made the task.
  Napi::Value Promise() { return Napi::Value(Env(), promise_); }

 protected:
  void Execute() override;
  void OnWorkComplete(Napi::Env env, napi_status status) override;

 private:
  void Complete(Napi::Env env);
  void Settle(Napi::Env env, bool ok, napi_value v) noexcept;
  napi_deferred deferred_ = nullptr;
  napi_value promise_ = nullptr;
  Work work_;
  Done done_;
  std::vector<Napi::Reference<Napi::Value>> keep_;
  std::shared_ptr<Inputs> inputs_;
  std::optional<Error> error_;  // set by a failed Execute
};

// Queues a Task and returns its Promise.
Napi::Value RunAsync(Napi::Env env, Task::Work work, Task::Done done, const std::vector<Napi::Value>& keep,
                     std::shared_ptr<Inputs> inputs = nullptr);

// Tells V8 how much native (host and GPU) memory a JavaScript object holds, so
// objects dropped without dispose() are collected before that memory piles up.
// Shared by an object and its calls (which update it when they finish); all
// use is on the JavaScript thread.
class ExternalMemory {
 public:
  explicit ExternalMemory(napi_env env) : env_(env) {}
  // The object now holds `bytes`.
  void Report(uint64_t bytes) noexcept {
    if (closed_) return;
    const int64_t delta = int64_t(bytes) - reported_;
    if (delta == 0) return;
    int64_t total = 0;
    if (napi_adjust_external_memory(env_, delta, &total) == napi_ok) reported_ += delta;
  }
  // Disposed or finalized: reports 0, and nothing after.
  void Close() noexcept {
    Report(0);
    closed_ = true;
  }

 private:
  napi_env env_;
  int64_t reported_ = 0;
  bool closed_ = false;
};

}  // namespace cusim

namespace cusim {

// Base for ObjectWraps that own engine state. The state sits behind a
// shared_ptr: async tasks capture a copy, so dispose() (or the GC finalizer)
// during a running call frees nothing the call still uses. Derived classes
// give `static uint64_t Bytes(const Impl&)`, the memory the state holds, and
// call Account() whenever it may have changed (construction, a call's end).
template <typename Derived, typename Impl>
class ResourceWrap : public Napi::ObjectWrap<Derived> {
 public:
  explicit ResourceWrap(const Napi::CallbackInfo& info)
      : Napi::ObjectWrap<Derived>(info), memory_(std::make_shared<ExternalMemory>(info.Env())) {}
  ~ResourceWrap() override { memory_->Close(); }

 protected:
  std::shared_ptr<Impl> impl_;
  std::shared_ptr<ExternalMemory> memory_;
  std::shared_ptr<Impl> Get(const char* what) const {
    if (!impl_) throw Error("CUSIM_DISPOSED", std::string(what) + " has been disposed");
    return impl_;
  }
  void Account() { memory_->Report(impl_ ? Derived::Bytes(*impl_) : 0); }
  // For a call's `done` (the object may be gone by then; its report is closed).
  static void Account(const std::shared_ptr<ExternalMemory>& memory, const Impl& state) {
    memory->Report(Derived::Bytes(state));
  }
  Napi::Value Dispose(const Napi::CallbackInfo& info) {
    impl_.reset();
    memory_->Close();
    return info.Env().Undefined();
  }
};

}  // namespace cusim
