#include "minhash_glue.h"

#include <chrono>
#include <cstdlib>
#include <string>
#include <utility>

#include "host_buffer.h"

namespace cusim {

Signatures::~Signatures() { std::free(data); }

void Signatures::allocate(uint64_t n) {
  size = n;
  if (!n || external) return;
  data = static_cast<uint32_t*>(AllocHostResult(n * 4));
}

Napi::Value Signatures::ToJs(Napi::Env env) {
  if (external) return env.Undefined();  // the caller already holds the array
  if (size == 0) return Napi::Uint32Array::New(env, 0);
  CheckTypedLength(size, "the signatures", "hash fewer rows per call (rowStart/rowEnd, or hashStream)");
  uint32_t* p = std::exchange(data, nullptr);
  auto buf = ArrayBufferOver(env, p, size * 4, [](void* q, void*) { std::free(q); }, nullptr);
  return Napi::Uint32Array::New(env, size, buf, 0);
}

HashCall ParseHashCall(const Napi::CallbackInfo& info, uint32_t wordsPerRow, bool values) {
  Args args(info);
  HashCall c;
  c.wordsPerRow = wordsPerRow;
  c.m = CsrArg(info[0], "matrix", values);
  const CsrView& m = c.m;
  Napi::Object opts = args.Obj(1, "options");
  const double rs = NumPropOr(opts, "rowStart", 0), re = NumPropOr(opts, "rowEnd", double(m.rows));
  if (!(rs >= 0 && rs <= re && re <= double(m.rows)) || rs != double(uint64_t(rs)) || re != double(uint64_t(re)))
    ThrowInvalid("rowStart/rowEnd must satisfy 0 <= rowStart <= rowEnd <= matrix.rows");
  c.rowStart = uint64_t(rs), c.rowEnd = uint64_t(re);
  c.cancel = CancelArg(opts);
  c.keep = {info[0], info.This()};
  const uint64_t need = (c.rowEnd - c.rowStart) * uint64_t(wordsPerRow);
  if (opts.Has("out") && !opts.Get("out").IsUndefined()) {
    Napi::Value o = opts.Get("out");
    if (!o.IsTypedArray() || o.As<Napi::TypedArray>().TypedArrayType() != napi_uint32_array)
      ThrowInvalid("out must be a Uint32Array", "TypeError");
    auto arr = o.As<Napi::Uint32Array>();
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
    c.out->external = arr.Data();
    c.keep.push_back(o);
  } else {
    CheckTypedLength(need, "the signatures", "hash fewer rows per call (rowStart/rowEnd, or hashStream)");
  }
  if (opts.Has("cancel")) c.keep.push_back(opts.Get("cancel"));
  return c;
}

Napi::Value RunHashCall(Napi::Env env, const HashCall& call, std::function<void(const HashCall&)> work) {
  return RunAsync(
      env,
      [call, work] {
        const auto t0 = std::chrono::steady_clock::now();
        call.out->allocate((call.rowEnd - call.rowStart) * uint64_t(call.wordsPerRow));
        work(call);
        call.timing->nativeMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      },
      [out = call.out, timing = call.timing](Napi::Env env) -> Napi::Value {
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
      call.keep);
}

}  // namespace cusim
