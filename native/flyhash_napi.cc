// N-API glue for FlyHash: an object owning the projection table, with an
// async hash() that runs on the CPU pool or on one GPU.
#include <unistd.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "flyhash.h"
#include "gpu.h"
#include "host_buffer.h"
#include "napi_util.h"
#include "owned.h"
#include "phase_log.h"

namespace cusim {
namespace {

// options.tuning of the constructor (checked in lib/flyhash.ts; native keeps
// only what guards the kernels).
flyhash::Tuning ParseTuning(const Napi::Object& t) {
  flyhash::Tuning tuning;
  tuning.tensorCores = BoolPropOr(t, "tensorCores", true);
  tuning.kernel = StrPropOr(t, "kernel", "auto");
  const double rowsPerBlock = NumPropOr(t, "maxRowsPerBlock", 4);
  if (!(rowsPerBlock >= 1 && rowsPerBlock <= 4)) ThrowInvalid("options.tuning.maxRowsPerBlock must be 1, 2 or 4");
  tuning.maxRowsPerBlock = int(rowsPerBlock);
  const Napi::Value stage = t.Get("stageProjection");
  if (!stage.IsUndefined() && !stage.IsNull()) tuning.stageProjection = stage.ToBoolean().Value() ? 1 : 0;
  const double exactRows = NumPropOr(t, "exactRows", -1);
  if (!(exactRows >= -1 && exactRows <= 8)) ThrowInvalid("options.tuning.exactRows must be 0, 1, 2, 4 or 8");
  tuning.exactRows = int(exactRows);
  const double batchRows = NumPropOr(t, "batchRows", 0);
  if (!(batchRows >= 0 && batchRows <= 9007199254740991.0)) ThrowInvalid("options.tuning.batchRows is out of range");
  tuning.batchRows = uint64_t(batchRows);
  tuning.forceFallback = BoolPropOr(t, "forceFallback", false);
  return tuning;
}

struct FlyHashImpl {
  flyhash::Params params;
  // The backend, made once at construction from options.backend, devices and
  // tuning. The CUDA hasher keeps its GPU tables and staging between calls,
  // so its calls take gpuMu; the CPU hasher holds nothing between calls.
  Backend backend = Backend::Cpu;
  flyhash::Tuning tuning;
  std::unique_ptr<flyhash::Hasher> hasher;
  std::mutex gpuMu;
  std::atomic<uint64_t> bytes{0};       // for V8 (ResourceWrap)
  std::atomic<bool> gpuCounted{false};  // the GPU's tables are in `bytes` (about the projection's size)

  // m * s, built at first use (off the event loop in hash()), so the
  // constructor costs nothing that grows with its options. Both backends read it.
  const std::vector<uint32_t>& Projection() {
    std::lock_guard<std::mutex> lock(projMu);
    if (!projReady) {
      proj = flyhash::MakeProjection(params);
      projReady = true;
      bytes += proj.size() * 4;
    }
    return proj;
  }

 private:
  std::mutex projMu;
  bool projReady = false;
  std::vector<uint32_t> proj;
};

// The projection table's bound: 2^30 entries (4 GiB), and at most half the host's memory.
void CheckProjectionSize(const flyhash::Params& p) {
  const uint64_t entries = uint64_t(p.m) * p.s;
  const uint64_t physical = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGE_SIZE));
  if (entries > (uint64_t(1) << 30) || entries * 4 > physical / 2)
    ThrowInvalid("hashLength * connections = " + std::to_string(entries) + " exceeds the projection table's bound of " +
                 std::to_string(std::min<uint64_t>(uint64_t(1) << 30, physical / 8)) +
                 " entries (2^30, and at most half of this host's memory at 4 bytes each)");
}

class FlyHashWrap : public ResourceWrap<FlyHashWrap, FlyHashImpl> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(
        env, "FlyHash",
        {InstanceMethod("hash", &FlyHashWrap::Hash), InstanceMethod("projection", &FlyHashWrap::Projection),
         InstanceMethod("dispose", &FlyHashWrap::DisposeMethod)});
  }

  // new FlyHash({ inputDim, hashLength, connections, winners, seed, backend, devices, tuning })
  explicit FlyHashWrap(const Napi::CallbackInfo& info) : ResourceWrap(info) {
    try {
      Args args(info);
      Napi::Object o = args.Obj(0, "options");
      auto dim = [&](const char* key, double lo, double hi) {
        double v = NumProp(o, key, "options");
        if (!(v >= lo && v <= hi) || v != double(uint64_t(v)))
          ThrowInvalid(std::string(key) + " must be an integer in [" + std::to_string(uint64_t(lo)) + ", " +
                       std::to_string(uint64_t(hi)) + "]");
        return uint32_t(v);
      };
      flyhash::Params p;
      p.d = dim("inputDim", 1, 1u << 30);
      p.m = dim("hashLength", 1, 1u << 30);
      p.s = dim("connections", 1, p.d);
      p.k = dim("winners", 1, p.m);
      p.seed = SeedProp(o, 1);
      CheckProjectionSize(p);
      auto impl = std::make_shared<FlyHashImpl>();
      impl->params = p;
      impl->backend = BackendProp(o);
      const int device = DeviceFor(impl->backend, o);
      impl->tuning = ParseTuning(TuningProp(o));
      impl->hasher = impl->backend == Backend::Cpu ? flyhash::MakeCpuHasher(p) : flyhash::MakeCudaHasher(p, device);
      impl_ = std::move(impl);
    } catch (const Error& e) {
      throw MakeJsError(info.Env(), e);
    }
  }

 private:
  Napi::Value DisposeMethod(const Napi::CallbackInfo& info) { return Dispose(info); }

  Napi::Value Projection(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto impl = Get("FlyHash");
      std::vector<uint32_t> copy = impl->Projection();
      Account();
      return ToTyped(info.Env(), std::move(copy));
    });
  }

  // hash(x, { output: 'bits'|'indices', cancel }) ->
  //   Promise<{ data, kernelMs, transferMs, kernel }>
  Napi::Value Hash(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto impl = Get("FlyHash");
      Args args(info);
      Napi::Object opts = args.Obj(1, "options");
      const std::string out = StrPropOr(opts, "output", "bits");
      if (out != "bits" && out != "indices") ThrowInvalid("output must be 'bits' or 'indices'", "TypeError");
      const flyhash::Output o = out == "bits" ? flyhash::Output::Bits : flyhash::Output::Indices;
      const Backend backend = impl->backend;
      // Pageable staging on both backends: the GPU path converts X into its
      // own page-locked batches (bytes or checked floats) as it goes.
      auto in = std::make_shared<Inputs>(Inputs::Use::Async);
      CancelToken cancel = in->Cancel(opts);
      // Float32 data, or bytes (Uint8Array: pixels), staged (owned.h) last:
      // reading the options above may run getters.
      DenseView x;
      const uint8_t* xBytes = nullptr;
      if (HasByteData(info[0])) {
        const DenseBytesView b = in->DenseBytes(info[0], "X");
        x.rows = b.rows;
        x.cols = b.cols;
        xBytes = b.data;
      } else {
        x = in->Dense(info[0], "X");
      }
      const flyhash::Params p = impl->params;
      if (x.cols != p.d)
        ThrowInvalid("X.cols is " + std::to_string(x.cols) + " but this FlyHash was built for inputDim " +
                     std::to_string(p.d));
      // Uninitialized and first touched on all cores in the worker: a
      // zero-filled vector would cost a serial pass on the event loop. Both
      // backends write every word.
      uint64_t words = 0;
      if (__builtin_mul_overflow(x.rows, uint64_t(flyhash::OutStride(p, o)), &words) || words > (uint64_t(1) << 61))
        ThrowInvalid("X.rows * words per code overflows");
      CheckTypedLength(words, "the FlyHash codes (X.rows x words per row)", "hash fewer rows per call");
      auto result = std::make_shared<HostBlock>();
      auto timing = std::make_shared<flyhash::Timing>();
      auto memory = memory_;
      return RunAsync(
          info.Env(),
          [=] {
            PhaseLog log("flyhash hash");
            const uint32_t* proj = impl->Projection().data();
            log.Mark("projection");
            // The GPU path checks float X while staging it.
            if (backend == Backend::Cpu && !xBytes) flyhash::CheckFinite(x, "X");
            log.Mark("check");
            result->allocate(words * 4);
            FirstTouch(result->data(), words * 4);
            log.Mark("result alloc");
            auto* out = static_cast<uint32_t*>(result->data());
            if (backend == Backend::Cpu) {
              impl->hasher->Hash(proj, x, xBytes, o, out, impl->tuning, cancel, timing.get());
            } else if (x.rows) {  // no rows: no GPU state made
              std::lock_guard<std::mutex> lock(impl->gpuMu);
              impl->hasher->Hash(proj, x, xBytes, o, out, impl->tuning, cancel, timing.get());
              if (!impl->gpuCounted.exchange(true)) impl->bytes += uint64_t(p.m) * p.s * 4;
            }
            log.Mark("hash");
          },
          [=](Napi::Env env) -> Napi::Value {
            Account(memory, *impl);
            auto r = Napi::Object::New(env);
            if (words == 0) {
              r.Set("data", Napi::Uint32Array::New(env, 0));
            } else {
              CheckTypedLength(words, "the FlyHash codes", "hash fewer rows per call");
              auto buf =
                  ArrayBufferOver(env, result->release(), words * 4, [](void* q, void*) { std::free(q); }, nullptr);
              r.Set("data", Napi::Uint32Array::New(env, words, buf, 0));
            }
            r.Set("kernelMs", timing->kernelMs);
            r.Set("transferMs", timing->transferMs);
            r.Set("kernel", timing->kernel);
            return r;
          },
          {info.This()}, in);
    });
  }

 public:
  static uint64_t Bytes(const FlyHashImpl& impl) { return impl.bytes.load(); }
};

void Init(Napi::Env env, Napi::Object exports) { exports.Set("FlyHash", FlyHashWrap::Define(env)); }

}  // namespace

CUSIM_REGISTER(flyhash, Init);

}  // namespace cusim
