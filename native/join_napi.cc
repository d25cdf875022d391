// N-API glue for the set similarity join: a JoinHandle object that prepares a
// join (token order, sorted collections, index or GPU upload) and then yields
// result chunks one async call at a time, plus an in-place pair sort.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "gpu.h"
#include "join.h"
#include "join_plan.h"
#include "napi_util.h"
#include "owned.h"
#include "phase_log.h"

namespace cusim {
namespace {

struct JoinState {
  std::unique_ptr<join::Joiner> joiner;
  std::atomic<bool> busy{false};  // cleared on the worker thread
  uint64_t bytes = 0;             // about what the prepared join holds (for V8), set by open()
  join::StageClock opened;        // open()'s stages: staging, validation, Prepare

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
    return DefineClass(
        env, "JoinHandle",
        {InstanceMethod("open", &JoinHandle::Open), InstanceMethod("next", &JoinHandle::Next),
         InstanceMethod("stages", &JoinHandle::Stages), InstanceMethod("dispose", &JoinHandle::Release)});
  }
  explicit JoinHandle(const Napi::CallbackInfo& info) : ResourceWrap(info) { impl_ = std::make_shared<JoinState>(); }
  ~JoinHandle() override { ReleaseLater(); }
  static uint64_t Bytes(const JoinState& s) { return s.bytes; }

 private:
  // A finished join's GPU buffers go in the background (gpu.h): similarityJoin
  // disposes its handle before it returns, and the frees would wait on the device.
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
    memory_->Close();
    return info.Env().Undefined();
  }

  // open(sets, against | undefined, { measure, threshold, backend, algorithm, blockSize, devices, cancel })
  Napi::Value Open(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      Args args(info);
      auto state = Get("JoinHandle");
      Napi::Object opts = args.Obj(2, "options");
      const bool rs = !info[1].IsUndefined() && !info[1].IsNull();
      const double md = NumProp(opts, "measure", "options");
      if (!(md >= 0 && md <= 3) || md != std::floor(md)) ThrowInvalid("options.measure must be an integer 0..3");
      const int m = int(md);
      const double t = NumProp(opts, "threshold", "options");
      if (m == 3 ? !(t >= 1 && t == std::floor(t) && t <= 4294967295.0) : !(t > 0 && t <= 1))
        ThrowInvalid("options.threshold is out of range for this measure");
      const Backend backend = BackendProp(opts);
      const auto algo =
          StrPropOr(opts, "algorithm", "ppjoin") == "allpairs" ? join::Algorithm::AllPairs : join::Algorithm::PPJoin;
      const double bs = NumPropOr(opts, "blockSize", 0);
      if (!(bs >= 0 && bs <= 4294967295.0)) ThrowInvalid("options.blockSize is out of range");
      const double mc = NumPropOr(opts, "maxChunkPairs", double(1 << 26));
      if (!(mc >= 1 && mc <= 4294967295.0) || mc != std::floor(mc))
        ThrowInvalid("options.maxChunkPairs is out of range");
      const bool wideSlots = BoolPropOr(opts, "wideSlots", false);
      const int device = DeviceFor(backend, opts);
      join::StageClock clock;
      auto in = std::make_shared<Inputs>(Inputs::Use::Async);
      CancelToken cancel = in->Cancel(opts);
      // Properties first (getters may run), then the staging copies.
      const CsrSource setsSrc = ReadCsr(info[0], "sets", false);
      CsrSource againstSrc;
      if (rs) againstSrc = ReadCsr(info[1], "against", false);
      const CsrView sets = in->Csr(setsSrc, 0, setsSrc.rows);
      CsrView against;
      if (rs) against = in->Csr(againstSrc, 0, againstSrc.rows);
      state->Claim();
      clock.Mark(join::kNormalize);
      state->opened = clock;
      state->bytes = (sets.nnz() + against.nnz()) * 4 + (sets.rows + against.rows) * 16;
      Account();
      return RunAsync(
          info.Env(),
          [=] {
            JoinState::Release release{state.get()};
            PhaseLog log("join open");
            join::StageClock& clock = state->opened;
            clock.Skip();
            ValidateCsr(sets, "sets");
            if (rs) ValidateCsr(against, "against");
            log.Mark("validate");
            clock.Mark(join::kNormalize);
            cancel.check();
            auto p = join::Prepare(sets, rs ? &against : nullptr, join::Measure(m), t, &clock);
            log.Mark("prepare");
            cancel.check();
            if (backend == Backend::Cpu) {
              state->joiner = join::MakeCpuJoiner(p, algo, uint64_t(mc));
            } else {
              join::CudaTuning tuning;
              tuning.maxChunkPairs = uint64_t(mc);
              tuning.wideSlots = wideSlots;
              state->joiner = join::MakeCudaJoiner(p, device, uint64_t(bs), tuning);
            }
            log.Mark("joiner");
          },
          [](Napi::Env env) -> Napi::Value { return env.Undefined(); }, {info.This()}, in);
    });
  }

  // stages() -> { normalize, prepare, ... } ms (join.h's Stage) so far; not
  // while an open() or next() runs.
  Napi::Value Stages(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto state = Get("JoinHandle");
      if (state->busy) ThrowInvalid("JoinHandle is busy", "Error");
      join::StageClock total = state->opened;
      if (state->joiner) total.Add(state->joiner->stages);
      auto r = Napi::Object::New(info.Env());
      for (int s = 0; s < join::kStages; s++) r.Set(join::kStageNames[s], total.ms(join::Stage(s)));
      return r;
    });
  }

  // next({ cancel, progress }) -> Promise<chunk | null>
  Napi::Value Next(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      Args args(info);
      auto state = Get("JoinHandle");
      Napi::Object opts = args.Obj(0, "options");
      auto in = std::make_shared<Inputs>(Inputs::Use::Async);
      CancelToken cancel = in->Cancel(opts);
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
              CheckTypedLength(n, "a join chunk");
              auto buf =
                  ArrayBufferOver(env, chunk->block.release(), n * 16, [](void* q, void*) { std::free(q); }, nullptr);
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
          {info.This()}, in);
    });
  }
};

// sortPairs(left, right, overlap, similarity) -> Promise<void>: sorts the four
// parallel arrays by (left, right); they are written back when the sort is
// done, all four or (one detached or shrunk meanwhile) none.
Napi::Value SortPairs(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto in = std::make_shared<Inputs>(Inputs::Use::Async);
    auto l = in->Array<uint32_t>(info[0], "left");
    auto r = in->Array<uint32_t>(info[1], "right");
    auto o = in->Array<uint32_t>(info[2], "overlap");
    auto s = in->Array<float>(info[3], "similarity");
    if (r.length != l.length || o.length != l.length || s.length != l.length)
      ThrowInvalid("sortPairs: arrays differ in length");
    const uint64_t n = l.length;
    auto outs = std::make_shared<std::vector<std::unique_ptr<OutputArray>>>();
    const char* names[4] = {"left", "right", "overlap", "similarity"};
    for (int i = 0; i < 4; ++i)
      outs->push_back(
          std::make_unique<OutputArray>(info[i], i == 3 ? napi_float32_array : napi_uint32_array, n, names[i], *in));
    return RunAsync(
        info.Env(),
        [=] {
          std::vector<uint32_t> L(l.data, l.data + n), R(r.data, r.data + n), O(o.data, o.data + n);
          std::vector<float> S(s.data, s.data + n);
          join::SortPairs(L, R, O, S);
          if (n == 0) return;
          std::copy(L.begin(), L.end(), static_cast<uint32_t*>((*outs)[0]->target()));
          std::copy(R.begin(), R.end(), static_cast<uint32_t*>((*outs)[1]->target()));
          std::copy(O.begin(), O.end(), static_cast<uint32_t*>((*outs)[2]->target()));
          std::copy(S.begin(), S.end(), static_cast<float*>((*outs)[3]->target()));
        },
        [=](Napi::Env env) -> Napi::Value {
          for (auto& a : *outs) a->Check();
          for (auto& a : *outs) a->Deliver(env);
          return env.Undefined();
        },
        {}, in);
  });
}

// planBatches(lg: Uint8Array, cands: Float64Array, p0, budget, maxProbes) ->
// { probes, start, tableOff, maxCands }: the GPU joiner's batch plan
// (join_plan.h), run here so hosts without a GPU test it against a serial cut.
// Small inputs only (tests): synchronous; the counts come back as doubles.
Napi::Value PlanBatches(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Napi::Env env = info.Env();
    if (!info[0].IsTypedArray() || info[0].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array)
      ThrowInvalid("planBatches: lg must be a Uint8Array");
    if (!info[1].IsTypedArray() || info[1].As<Napi::TypedArray>().TypedArrayType() != napi_float64_array)
      ThrowInvalid("planBatches: cands must be a Float64Array");
    auto lg = info[0].As<Napi::Uint8Array>();
    auto cd = info[1].As<Napi::Float64Array>();
    const size_t n = lg.ElementLength();
    if (cd.ElementLength() != n) ThrowInvalid("planBatches: lg and cands differ in length");
    for (size_t j = 0; j < n; j++)
      if (lg[j] > 40) ThrowInvalid("planBatches: lg values must be at most 40");
    std::vector<uint64_t> cands(n);
    for (size_t j = 0; j < n; j++) cands[j] = uint64_t(cd[j]);
    const double p0 = info[2].As<Napi::Number>().DoubleValue(), budget = info[3].As<Napi::Number>().DoubleValue(),
                 maxProbes = info[4].As<Napi::Number>().DoubleValue();
    join::BatchPlan plan;
    join::PlanBatches(lg.Data(), cands.data(), n, uint64_t(p0), uint64_t(budget), uint64_t(maxProbes), &plan);
    auto doubles = [&](const std::vector<uint64_t>& v) {
      std::vector<double> d(v.begin(), v.end());
      return ToTyped(env, std::move(d));
    };
    auto r = Napi::Object::New(env);
    r.Set("probes", ToTyped(env, std::move(plan.probes)));
    r.Set("start", doubles(plan.start));
    r.Set("tableOff", doubles(plan.tableOff));
    r.Set("maxCands", doubles(plan.maxCands));
    return r;
  });
}

// orderByKey(keys: Uint32Array) -> Uint32Array: the indices of the nonzero
// keys by (key, index), the join's token order (join.h), for its test against
// a plain stable sort. Small inputs only (tests): synchronous.
Napi::Value OrderByKey(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    if (!info[0].IsTypedArray() || info[0].As<Napi::TypedArray>().TypedArrayType() != napi_uint32_array)
      ThrowInvalid("orderByKey: keys must be a Uint32Array");
    auto keys = info[0].As<Napi::Uint32Array>();
    const UninitVector<uint32_t> order = join::OrderByKey(keys.Data(), keys.ElementLength());
    return ToTyped(info.Env(), std::vector<uint32_t>(order.begin(), order.end()));
  });
}

void Init(Napi::Env env, Napi::Object exports) {
  exports.Set("joinOrderByKey", Napi::Function::New(env, OrderByKey, "joinOrderByKey"));
  exports.Set("joinPlanBatches", Napi::Function::New(env, PlanBatches, "joinPlanBatches"));
  exports.Set("JoinHandle", JoinHandle::Define(env));
  exports.Set("joinSortPairs", Napi::Function::New(env, SortPairs, "joinSortPairs"));
}

}  // namespace

CUSIM_REGISTER(join, Init);

}  // namespace cusim
