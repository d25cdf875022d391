// N-API glue for the set similarity join: a JoinHandle object that prepares a
// join (token order, sorted collections, index or GPU upload) and then yields
// result chunks one async call at a time, plus an in-place pair sort.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "gpu.h"
#include "join.h"
#include "napi_util.h"
#include "phase_log.h"

namespace cusim {
namespace {

struct JoinState {
  std::unique_ptr<join::Joiner> joiner;
  std::atomic<bool> busy{false};  // cleared on the worker thread

  // One open()/next() at a time: claimed on the JS thread, released by the
  // worker (Release, even when the work throws).
  void Claim() {
    bool expected = false;
    if (!busy.compare_exchange_strong(expected, true)) ThrowInvalid("JoinHandle is busy", "Error");
  }
  struct Release {
    JoinState* s;
    ~Release() { s->busy = false; }
  };
};

class JoinHandle : public ResourceWrap<JoinHandle, JoinState> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "JoinHandle",
                       {InstanceMethod("open", &JoinHandle::Open), InstanceMethod("next", &JoinHandle::Next),
                        InstanceMethod("dispose", &JoinHandle::Release)});
  }
  explicit JoinHandle(const Napi::CallbackInfo& info) : ResourceWrap(info) { impl_ = std::make_shared<JoinState>(); }
  ~JoinHandle() override { ReleaseLater(); }

 private:
  // A finished join's GPU buffers go in the background (gpu.h): similarityJoin
  // disposes its handle before it returns, and the frees took 3-4 ms of it.
  // Never throws (it runs in a GC finalizer): if the task cannot be made,
  // the state is freed here.
  void ReleaseLater() noexcept {
    if (!impl_) return;
    try {
      ReleaseInBackground([s = std::move(impl_)]() mutable { s.reset(); });
    } catch (...) {
      impl_.reset();
    }
  }
  Napi::Value Release(const Napi::CallbackInfo& info) {
    ReleaseLater();
    return info.Env().Undefined();
  }

  // open(sets, against | undefined, { measure, threshold, backend, algorithm, blockSize, devices, cancel })
  Napi::Value Open(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      Args args(info);
      auto state = Get("JoinHandle");
      Napi::Object opts = args.Obj(2, "options");
      CsrView sets = CsrArg(info[0], "sets", false);
      const bool rs = !info[1].IsUndefined() && !info[1].IsNull();
      CsrView against;
      if (rs) against = CsrArg(info[1], "against", false);
      const double md = NumProp(opts, "measure", "options");
      if (!(md >= 0 && md <= 3) || md != std::floor(md)) ThrowInvalid("options.measure must be an integer 0..3");
      const int m = int(md);
      const double t = NumProp(opts, "threshold", "options");
      if (m == 3 ? !(t >= 1 && t == std::floor(t) && t <= 4294967295.0) : !(t > 0 && t <= 1))
        ThrowInvalid("options.threshold is out of range for this measure");
      const Backend backend = BackendProp(opts);
      const auto algo = StrPropOr(opts, "algorithm", "ppjoin") == "allpairs" ? join::Algorithm::AllPairs : join::Algorithm::PPJoin;
      const double bs = NumPropOr(opts, "blockSize", 0);
      if (!(bs >= 0 && bs <= 4294967295.0)) ThrowInvalid("options.blockSize is out of range");
      const int device = DeviceFor(backend, opts);
      CancelToken cancel = CancelArg(opts);
      state->Claim();
      return RunAsync(
          info.Env(),
          [=] {
            JoinState::Release release{state.get()};
            PhaseLog log("join open");
            ValidateCsr(sets, "sets");
            if (rs) ValidateCsr(against, "against");
            log.Mark("validate");
            cancel.check();
            auto p = join::Prepare(sets, rs ? &against : nullptr, join::Measure(m), t);
            log.Mark("prepare");
            cancel.check();
            if (backend == Backend::Cpu) {
              state->joiner = join::MakeCpuJoiner(p, algo);
            } else {
#ifdef CUSIM_WITH_CUDA
              state->joiner = join::MakeCudaJoiner(p, device, uint64_t(bs));
#else
              (void)device;
              throw Error(kCudaError, "this addon was built without CUDA");
#endif
            }
            log.Mark("joiner");
          },
          [](Napi::Env env) -> Napi::Value { return env.Undefined(); }, {info[0], info[1], opts.Get("cancel")});
    });
  }

  // next({ cancel, progress }) -> Promise<chunk | null>
  Napi::Value Next(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      Args args(info);
      auto state = Get("JoinHandle");
      Napi::Object opts = args.Obj(0, "options");
      CancelToken cancel = CancelArg(opts);
      if (!state->joiner) ThrowInvalid("JoinHandle.next() before open() finished", "Error");
      state->Claim();
      auto chunk = std::make_shared<join::Chunk>();
      auto more = std::make_shared<bool>(false);
      return RunAsync(
          info.Env(),
          [=] {
            JoinState::Release release{state.get()};
            *more = state->joiner->Next(chunk.get(), cancel);
          },
          [=](Napi::Env env) -> Napi::Value {
            if (!*more) return env.Null();
            auto r = Napi::Object::New(env);
            if (chunk->block.data()) {
              // Four views of one block; the last view's buffer frees it.
              const size_t n = chunk->count;
              auto buf = Napi::ArrayBuffer::New(env, chunk->block.release(), n * 16,
                                                [](Napi::Env, void* q) { std::free(q); });
              r.Set("left", Napi::Uint32Array::New(env, n, buf, 0));
              r.Set("right", Napi::Uint32Array::New(env, n, buf, n * 4));
              r.Set("overlap", Napi::Uint32Array::New(env, n, buf, n * 8));
              r.Set("similarity", Napi::Float32Array::New(env, n, buf, n * 12));
            } else {
              r.Set("left", ToTyped(env, std::move(chunk->left)));
              r.Set("right", ToTyped(env, std::move(chunk->right)));
              r.Set("overlap", ToTyped(env, std::move(chunk->overlap)));
              r.Set("similarity", ToTyped(env, std::move(chunk->similarity)));
            }
            r.Set("candidates", double(chunk->candidates));
            r.Set("kernelMs", chunk->kernelMs);
            return r;
          },
          {opts.Get("cancel"), opts.Get("progress")});
    });
  }
};

// sortPairs(left, right, overlap, similarity) -> Promise<void>: sorts the four
// parallel arrays in place by (left, right).
Napi::Value SortPairs(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto l = TypedArg<uint32_t>(info[0], "left");
    auto r = TypedArg<uint32_t>(info[1], "right");
    auto o = TypedArg<uint32_t>(info[2], "overlap");
    auto s = TypedArg<float>(info[3], "similarity");
    if (r.length != l.length || o.length != l.length || s.length != l.length) ThrowInvalid("sortPairs: arrays differ in length");
    return RunAsync(
        info.Env(),
        [=] {
          std::vector<uint32_t> L(l.data, l.data + l.length), R(r.data, r.data + r.length), O(o.data, o.data + o.length);
          std::vector<float> S(s.data, s.data + s.length);
          join::SortPairs(L, R, O, S);
          std::copy(L.begin(), L.end(), l.data);
          std::copy(R.begin(), R.end(), r.data);
          std::copy(O.begin(), O.end(), o.data);
          std::copy(S.begin(), S.end(), s.data);
        },
        [](Napi::Env env) -> Napi::Value { return env.Undefined(); }, {info[0], info[1], info[2], info[3]});
  });
}

void Init(Napi::Env env, Napi::Object exports) {
  exports.Set("JoinHandle", JoinHandle::Define(env));
  exports.Set("joinSortPairs", Napi::Function::New(env, SortPairs, "joinSortPairs"));
}

}  // namespace

CUSIM_REGISTER(join, Init);

}  // namespace cusim
