#include "napi_util.h"

#include "gpu.h"

#include <cmath>
#include <new>

namespace cusim {

std::vector<std::pair<const char*, InitFn>>& Registry() {
  static std::vector<std::pair<const char*, InitFn>> r;
  return r;
}

Registrar::Registrar(const char* name, InitFn fn) { Registry().emplace_back(name, fn); }

Napi::Error MakeJsError(Napi::Env env, const std::string& code, const std::string& msg, const std::string& kind) {
  Napi::Error err = kind == "TypeError"    ? Napi::Error(env, Napi::TypeError::New(env, msg).Value())
                    : kind == "RangeError" ? Napi::Error(env, Napi::RangeError::New(env, msg).Value())
                                           : Napi::Error::New(env, msg);
  err.Set("code", Napi::String::New(env, code));
  if (code == kAborted) err.Set("name", Napi::String::New(env, "AbortError"));
  return err;
}

Napi::Error MakeJsError(Napi::Env env, const Error& e) { return MakeJsError(env, e.code, e.what(), e.kind); }

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
  if (!(d >= 0 && d <= 9007199254740991.0) || d != std::floor(d)) ThrowInvalid("seed must be a non-negative safe integer");
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

int DeviceFor(Backend backend, const Napi::Object& o) {
  return backend == Backend::Cuda ? ResolveDevices(DevicesProp(o)).at(0) : 0;
}

static uint64_t Dim(const Napi::Object& o, const char* key, const char* name) {
  Napi::Value v = o.Get(key);
  if (!v.IsNumber()) ThrowInvalid(std::string(name) + "." + key + " must be a non-negative integer", "TypeError");
  double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 0) || d != std::floor(d) || d > 9007199254740991.0)
    ThrowInvalid(std::string(name) + "." + key + " must be a non-negative integer");
  return uint64_t(d);
}

CsrView CsrArg(const Napi::Value& v, const char* name, bool wantValues) {
  if (!v.IsObject()) ThrowInvalid(std::string(name) + " must be a CsrMatrix object", "TypeError");
  auto o = v.As<Napi::Object>();
  CsrView m;
  m.rows = Dim(o, "rows", name);
  m.cols = Dim(o, "cols", name);
  std::string n(name);
  Napi::Value ip = o.Get("indptr");
  ArrayArg<uint32_t> indptr;
  if (ip.IsTypedArray() && ip.As<Napi::TypedArray>().TypedArrayType() == napi_int32_array) {
    auto a = TypedArg<int32_t>(ip, (n + ".indptr").c_str());
    indptr.data = reinterpret_cast<uint32_t*>(a.data);
    indptr.length = a.length;
  } else {
    indptr = TypedArg<uint32_t>(ip, (n + ".indptr").c_str());
  }
  auto indices = TypedArg<uint32_t>(o.Get("indices"), (n + ".indices").c_str());
  if (indptr.length != m.rows + 1)
    ThrowInvalid(n + ".indptr has length " + std::to_string(indptr.length) + " but rows + 1 = " + std::to_string(m.rows + 1));
  m.indptr = indptr.data;
  m.indices = indices.data;
  if (indptr.data[m.rows] > indices.length)
    ThrowInvalid(n + ".indptr[" + std::to_string(m.rows) + "]=" + std::to_string(indptr.data[m.rows]) +
                 " exceeds indices.length=" + std::to_string(indices.length));
  if (wantValues) {
    Napi::Value vals = o.Get("values");
    if (!vals.IsUndefined() && !vals.IsNull()) {
      auto a = TypedArg<float>(vals, (n + ".values").c_str());
      if (a.length < indptr.data[m.rows])
        ThrowInvalid(n + ".values has length " + std::to_string(a.length) + " but indptr[rows]=" + std::to_string(indptr.data[m.rows]));
      m.values = a.data;
    }
  }
  return m;
}

namespace {
// Rows, cols and data of a dense matrix of T; the element count must match.
template <typename T>
void DenseParts(const Napi::Value& v, const char* name, uint64_t* rows, uint64_t* cols, const T** data) {
  if (!v.IsObject()) ThrowInvalid(std::string(name) + " must be a dense matrix object", "TypeError");
  auto o = v.As<Napi::Object>();
  *rows = Dim(o, "rows", name);
  *cols = Dim(o, "cols", name);
  auto a = TypedArg<T>(o.Get("data"), (std::string(name) + ".data").c_str());
  // rows * cols can wrap 64 bits (2^34 x 2^30 is 0) and would then match an
  // empty array; the kernels would read rows x cols values from it.
  uint64_t elems = 0;
  if (__builtin_mul_overflow(*rows, *cols, &elems))
    ThrowInvalid(std::string(name) + ".rows * " + name + ".cols overflows 64 bits (rows=" + std::to_string(*rows) +
                 ", cols=" + std::to_string(*cols) + ")");
  if (a.length != elems)
    ThrowInvalid(std::string(name) + ".data has length " + std::to_string(a.length) + " but rows * cols = " +
                 std::to_string(*rows * *cols));
  *data = a.data;
}
}  // namespace

DenseView DenseArg(const Napi::Value& v, const char* name) {
  DenseView d;
  DenseParts<float>(v, name, &d.rows, &d.cols, &d.data);
  return d;
}

DenseBytesView DenseBytesArg(const Napi::Value& v, const char* name) {
  DenseBytesView d;
  DenseParts<uint8_t>(v, name, &d.rows, &d.cols, &d.data);
  return d;
}

bool HasByteData(const Napi::Value& v) {
  if (!v.IsObject()) return false;
  const Napi::Value data = v.As<Napi::Object>().Get("data");
  return data.IsTypedArray() && data.As<Napi::TypedArray>().TypedArrayType() == napi_uint8_array;
}

BitsView BitsArg(const Napi::Value& v, const char* name) {
  if (!v.IsObject()) ThrowInvalid(std::string(name) + " must be a bit-code matrix object", "TypeError");
  auto o = v.As<Napi::Object>();
  BitsView b;
  b.rows = Dim(o, "rows", name);
  uint64_t bits = Dim(o, "bits", name);
  if (bits == 0 || bits % 32 != 0 || bits > 65536) ThrowInvalid(std::string(name) + ".bits must be a positive multiple of 32");
  b.bits = uint32_t(bits);
  auto a = TypedArg<uint32_t>(o.Get("data"), (std::string(name) + ".data").c_str());
  if (a.length != b.rows * b.wordsPerRow())
    ThrowInvalid(std::string(name) + ".data has " + std::to_string(a.length) + " words but rows * bits / 32 = " +
                 std::to_string(b.rows * b.wordsPerRow()));
  b.words = a.data;
  return b;
}

CancelToken CancelArg(const Napi::Object& options) {
  CancelToken t;
  Napi::Value pr = options.Get("progress");
  if (!pr.IsUndefined() && !pr.IsNull()) {
    auto a = TypedArg<uint64_t>(pr, "progress");
    if (a.length < 3) ThrowInvalid("progress must be a BigUint64Array of length >= 3");
    t.progress = a.data;
  }
  Napi::Value f = options.Get("cancel");
  if (f.IsUndefined() || f.IsNull()) return t;
  auto a = TypedArg<int32_t>(f, "cancel");
  if (a.length < 1) ThrowInvalid("cancel must be an Int32Array of length >= 1");
  t.flag = a.data;
  return t;
}

Task::Task(Napi::Env env, Work work, Done done, const std::vector<Napi::Value>& keep)
    : Napi::AsyncWorker(env, "cusim"), deferred_(Napi::Promise::Deferred::New(env)), work_(std::move(work)), done_(std::move(done)) {
  for (const auto& v : keep)
    if (!v.IsUndefined() && !v.IsNull()) keep_.push_back(Napi::Persistent(v));
}

void Task::Execute() {
  try {
    work_();
  } catch (const Error& e) {
    code_ = e.code;
    kind_ = e.kind;
    SetError(e.what());
  } catch (const std::bad_alloc&) {
    code_ = kOutOfMemory;
    SetError("host memory allocation failed");
  } catch (const std::exception& e) {
    code_ = kInternal;
    SetError(e.what());
  }
}

void Task::OnOK() {
  Napi::Env env = Env();
  try {
    deferred_.Resolve(done_(env));
  } catch (const Napi::Error& e) {
    deferred_.Reject(e.Value());
  } catch (const Error& e) {
    deferred_.Reject(MakeJsError(env, e).Value());
  } catch (const std::exception& e) {
    deferred_.Reject(MakeJsError(env, kInternal, e.what()).Value());
  }
  for (auto& r : keep_) r.Reset();
}

void Task::OnError(const Napi::Error& e) {
  deferred_.Reject(MakeJsError(Env(), code_.empty() ? kInternal : code_, e.Message(), kind_.empty() ? "Error" : kind_).Value());
  for (auto& r : keep_) r.Reset();
}

Napi::Value RunAsync(Napi::Env env, Task::Work work, Task::Done done, const std::vector<Napi::Value>& keep) {
  auto* t = new Task(env, std::move(work), std::move(done), keep);
  auto p = t->Promise();
  t->Queue();
  return p;
}

}  // namespace cusim
