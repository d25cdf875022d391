#include "minhash_napi_common.h"

#include <chrono>
#include <cstdlib>
#include <string>
#include <utility>

#include "host_buffer.h"

namespace cusim {

Signatures::~Signatures() { std::free(data); }

void Signatures::allocate(uint64_t n) {
  size = n;
  if (!n || out) return;
  data = static_cast<uint32_t*>(AllocHostResult(n * 4));
}

Napi::Value Signatures::ToJs(Napi::Env env) {
  if (out) {
    out->Deliver(env);
    return env.Undefined();  // the caller already holds the array
  }
  if (size == 0) return Napi::Uint32Array::New(env, 0);
  CheckTypedLength(size, "the signatures", "hash fewer rows per call (rowStart/rowEnd, or hashStream)");
  uint32_t* p = std::exchange(data, nullptr);
  auto buf = ArrayBufferOver(env, p, size * 4, [](void* q, void*) { std::free(q); }, nullptr);
  return Napi::Uint32Array::New(env, size, buf, 0);
}

uint32_t SamplesArg(double samples) {
  if (!(samples >= 1 && samples <= 65536) || samples != double(uint64_t(samples)))
    ThrowInvalid("samples must be an integer in [1, 65536]");
  return uint32_t(samples);
}

minhash::Tuning ParseTuning(const Napi::Object& options) {
  const Napi::Object t = TuningProp(options);
  minhash::Tuning tuning;
  const std::string kernel = StrPropOr(t, "kernel", "auto");
  if (kernel != "auto" && kernel != "prune") ThrowInvalid("options.tuning.kernel must be 'auto' or 'prune'");
  tuning.overlap = BoolPropOr(t, "overlap", true);
  return tuning;
}

HashCall ParseHashCall(const Napi::CallbackInfo& info, uint32_t wordsPerRow, bool values, bool gpu,
                       const std::function<void(const CsrSource&)>& check) {
  Args args(info);
  HashCall c;
  c.wordsPerRow = wordsPerRow;
  const CsrSource src = ReadCsr(info[0], "matrix", values);
  Napi::Object opts = args.Obj(1, "options");
  check(src);
  const double rs = NumPropOr(opts, "rowStart", 0), re = NumPropOr(opts, "rowEnd", double(src.rows));
  if (!(rs >= 0 && rs <= re && re <= double(src.rows)) || rs != double(uint64_t(rs)) || re != double(uint64_t(re)))
    ThrowInvalid("rowStart/rowEnd must satisfy 0 <= rowStart <= rowEnd <= matrix.rows");
  const uint64_t rowStart = uint64_t(rs), rowEnd = uint64_t(re);
  const Napi::Value outArg = opts.Get("out");
  // options.handed: lib/ transferred the matrix's buffers ({ transfer: true }),
  // so they are read in place; RunHashCall keeps the matrix alive.
  c.in = std::make_shared<Inputs>(BoolPropOr(opts, "handed", false) ? Inputs::Use::Handed : Inputs::Use::Async);
  c.in->ForGpu(gpu);
  c.cancel = c.in->Cancel(opts);
  const auto t0 = std::chrono::steady_clock::now();
  c.m = c.in->Csr(src, rowStart, rowEnd);
  c.copyInMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t need = c.m.rows * uint64_t(wordsPerRow);
  if (!outArg.IsUndefined()) {
    // options.outHanded: lib/ gave `out` over until the call settles (OutputArray).
    c.out->out = std::make_unique<OutputArray>(outArg, napi_uint32_array, need, "out", *c.in,
                                               BoolPropOr(opts, "outHanded", false));
    // Signatures written over pinned input the GPU is still reading would
    // change it under the kernels.
    const auto overlaps = [&](const void* p, uint64_t bytes) {
      const uintptr_t a = uintptr_t(c.out->out->target()), b = uintptr_t(p);
      return c.out->out->inPlace() && need > 0 && bytes > 0 && a < b + bytes && b < a + need * 4;
    };
    const uint64_t nz = c.m.indptr[c.m.rows];
    if (overlaps(c.m.indices, nz * 4) || (c.m.values && overlaps(c.m.values, nz * 4)))
      ThrowInvalid("out must not share memory with matrix.indices or matrix.values");
  } else {
    CheckTypedLength(need, "the signatures", "hash fewer rows per call (rowStart/rowEnd, or hashStream)");
  }
  return c;
}

Napi::Value RunHashCall(Napi::Env env, const HashCall& call, std::shared_ptr<minhash::Hasher> hasher,
                        std::function<void()> done, Napi::Value self, Napi::Value matrix) {
  return RunAsync(
      env,
      [call, hasher] {
        const auto t0 = std::chrono::steady_clock::now();
        call.out->allocate(call.m.rows * uint64_t(call.wordsPerRow));
        hasher->Hash(call.m, call.out->target(), call.timing.get(), call.cancel);
        call.timing->nativeMs =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      },
      [out = call.out, timing = call.timing, copyInMs = call.copyInMs, done](Napi::Env env) -> Napi::Value {
        done();
        auto r = Napi::Object::New(env);
        r.Set("signatures", out->ToJs(env));
        r.Set("kernelMs", timing->kernelMs);
        r.Set("transferMs", timing->transferMs);
        auto host = Napi::Object::New(env);
        host.Set("stageInMs", timing->stageInMs);
        host.Set("waitMs", timing->waitMs);
        host.Set("stageOutMs", timing->stageOutMs);
        host.Set("nativeMs", timing->nativeMs);
        host.Set("copyInMs", copyInMs);
        r.Set("host", host);
        return r;
      },
      {self, matrix}, call.in);
}

}  // namespace cusim
