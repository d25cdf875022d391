// N-API plumbing shared by every engine's glue: module registration, argument
// views with validation, the Promise-returning task worker, and error mapping.
#pragma once

#include <napi.h>

#include <functional>
#include <memory>
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
Backend BackendProp(const Napi::Object& o);  // o.backend: 'cpu' | 'cuda'
std::vector<int> DevicesProp(const Napi::Object& o);  // o.devices: number[] or absent (all)
// The GPU a single-device call runs on: the first of o.devices (checked
// against this host) for the CUDA backend, 0 (unused) for the CPU.
int DeviceFor(Backend backend, const Napi::Object& o);

// Typed array access. `T` must match the array's element type.
template <typename T>
struct TypedArrayTraits;
template <> struct TypedArrayTraits<float> { static constexpr napi_typedarray_type type = napi_float32_array; static constexpr const char* name = "Float32Array"; };
template <> struct TypedArrayTraits<double> { static constexpr napi_typedarray_type type = napi_float64_array; static constexpr const char* name = "Float64Array"; };
template <> struct TypedArrayTraits<uint32_t> { static constexpr napi_typedarray_type type = napi_uint32_array; static constexpr const char* name = "Uint32Array"; };
template <> struct TypedArrayTraits<int32_t> { static constexpr napi_typedarray_type type = napi_int32_array; static constexpr const char* name = "Int32Array"; };
template <> struct TypedArrayTraits<uint16_t> { static constexpr napi_typedarray_type type = napi_uint16_array; static constexpr const char* name = "Uint16Array"; };
template <> struct TypedArrayTraits<uint64_t> { static constexpr napi_typedarray_type type = napi_biguint64_array; static constexpr const char* name = "BigUint64Array"; };
template <> struct TypedArrayTraits<uint8_t> { static constexpr napi_typedarray_type type = napi_uint8_array; static constexpr const char* name = "Uint8Array"; };

template <typename T>
struct ArrayArg {
  T* data = nullptr;
  size_t length = 0;
};

template <typename T>
ArrayArg<T> TypedArg(const Napi::Value& v, const char* name) {
  if (!v.IsTypedArray()) ThrowInvalid(std::string(name) + " must be a " + TypedArrayTraits<T>::name, "TypeError");
  auto ta = v.As<Napi::TypedArray>();
  if (ta.TypedArrayType() != TypedArrayTraits<T>::type)
    ThrowInvalid(std::string(name) + " must be a " + TypedArrayTraits<T>::name, "TypeError");
  auto buf = ta.ArrayBuffer();
  ArrayArg<T> out;
  out.data = reinterpret_cast<T*>(static_cast<uint8_t*>(buf.Data()) + ta.ByteOffset());
  out.length = ta.ElementLength();
  return out;
}

template <typename T>
ArrayArg<T> TypedProp(const Napi::Object& o, const char* key) {
  return TypedArg<T>(o.Get(key), key);
}

// Reads { rows, cols, indptr, indices, values? } and checks the structure the
// kernels rely on (lengths, monotone indptr, column range) so no native code
// ever reads out of bounds.
CsrView CsrArg(const Napi::Value& v, const char* name, bool wantValues = true);
DenseView DenseArg(const Napi::Value& v, const char* name);
// { rows, cols, data: Uint8Array }, with DenseArg's checks.
DenseBytesView DenseBytesArg(const Napi::Value& v, const char* name);
// Whether v is an object whose data is a Uint8Array.
bool HasByteData(const Napi::Value& v);
BitsView BitsArg(const Napi::Value& v, const char* name);
CancelToken CancelArg(const Napi::Object& options);

// ---- outputs ----------------------------------------------------------------
// Hands a vector's storage to JavaScript without a copy.
template <typename T>
Napi::TypedArrayOf<T> ToTyped(Napi::Env env, std::vector<T>&& v) {
  auto* owned = new std::vector<T>(std::move(v));
  if (owned->empty()) {
    delete owned;
    return Napi::TypedArrayOf<T>::New(env, 0);
  }
  auto buf = Napi::ArrayBuffer::New(env, owned->data(), owned->size() * sizeof(T),
                                    [](Napi::Env, void*, std::vector<T>* p) { delete p; }, owned);
  return Napi::TypedArrayOf<T>::New(env, owned->size(), buf, 0);
}

// ---- async work ---------------------------------------------------------------
// A Promise-returning worker. `work` runs off the event loop; `done` builds the
// result on the JS thread. Every value in `keep` (input arrays, the AbortSignal
// flag, the owning object) stays referenced until the worker finishes, so the
// garbage collector cannot free memory the work is reading.
class Task : public Napi::AsyncWorker {
 public:
  using Work = std::function<void()>;
  using Done = std::function<Napi::Value(Napi::Env)>;
  Task(Napi::Env env, Work work, Done done, const std::vector<Napi::Value>& keep);
  Napi::Promise Promise() { return deferred_.Promise(); }

 protected:
  void Execute() override;
  void OnOK() override;
  void OnError(const Napi::Error& e) override;

 private:
  Napi::Promise::Deferred deferred_;
  Work work_;
  Done done_;
  std::vector<Napi::Reference<Napi::Value>> keep_;
  std::string code_, kind_;
};

// Queues a Task and returns its Promise.
Napi::Value RunAsync(Napi::Env env, Task::Work work, Task::Done done, const std::vector<Napi::Value>& keep);

}  // namespace cusim

namespace cusim {

// Base for ObjectWraps that own engine state. The state sits behind a
// shared_ptr: async tasks capture a copy, so dispose() (or the GC finalizer)
// during a running call frees nothing the call still uses.
template <typename Derived, typename Impl>
class ResourceWrap : public Napi::ObjectWrap<Derived> {
 public:
  using Napi::ObjectWrap<Derived>::ObjectWrap;

 protected:
  std::shared_ptr<Impl> impl_;
  std::shared_ptr<Impl> Get(const char* what) const {
    if (!impl_) throw Error("CUSIM_DISPOSED", std::string(what) + " has been disposed");
    return impl_;
  }
  Napi::Value Dispose(const Napi::CallbackInfo& info) {
    impl_.reset();
    return info.Env().Undefined();
  }
};

}  // namespace cusim
