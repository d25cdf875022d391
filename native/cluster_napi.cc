// N-API glue for the streaming clusterer: one ObjectWrap owning an Engine.
// Every engine access holds the holder's mutex, so synchronous getters called
// while an add() runs wait for it instead of reading half-updated state.
#include <cmath>
#include <atomic>
#include <mutex>

#include "cluster.h"
#include "gpu.h"
#include "napi_util.h"
#include "owned.h"
#include "persist_napi.h"

namespace cusim {
namespace {

using cluster::Engine;

struct Holder {
  std::mutex mu;
  std::unique_ptr<Engine> engine;
  std::atomic<uint64_t> bytes{0};  // engine->bytes() after the last call, for V8
};

class ClustererWrap : public ResourceWrap<ClustererWrap, Holder> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(
        env, "StreamClusterer",
        {InstanceMethod("add", &ClustererWrap::Add), InstanceMethod("size", &ClustererWrap::Size),
         InstanceMethod("info", &ClustererWrap::Info), InstanceMethod("centroid", &ClustererWrap::Centroid),
         InstanceMethod("members", &ClustererWrap::Members), InstanceMethod("active", &ClustererWrap::Active),
         InstanceMethod("save", &ClustererWrap::Save), InstanceMethod("load", &ClustererWrap::Load),
         InstanceMethod("dispose", &ClustererWrap::DisposeJs)});
  }

  explicit ClustererWrap(const Napi::CallbackInfo& info) : ResourceWrap(info) {
    try {
      Args args(info);
      Napi::Object o = args.Obj(0, "options");
      cluster::Config cfg;
      cfg.threshold = NumProp(o, "threshold", "options");
      const double k = NumProp(o, "maxTerms", "options");
      const double cap = NumPropOr(o, "capacity", 1024);
      const double age = NumPropOr(o, "maxAge", -1);
      if (!(cfg.threshold >= 0 && cfg.threshold <= 1)) ThrowInvalid("threshold must be in [0, 1]");
      if (!(k >= 1 && k <= cluster::kMaxTerms)) ThrowInvalid("maxTerms must be in [1, 1024]");
      if (std::isnan(age)) ThrowInvalid("maxAge must be a number, not NaN");
      if (!(cap >= 1 && cap < 4294967295.0)) ThrowInvalid("capacity must be in [1, 2^32 - 2]");
      cfg.maxTerms = uint32_t(k);
      cfg.capacity = uint64_t(cap);
      cfg.maxAge = age < 0 ? cluster::kNoDecay : uint64_t(age);
      const Backend backend = BackendProp(o);
      const int device = DeviceFor(backend, o);
      impl_ = std::make_shared<Holder>();
      cluster::Tuning tuning;
      const double batch = NumPropOr(TuningProp(o), "batchSize", 0);
      if (!(batch == 0 || batch == 256 || batch == 512 || batch == 1024))
        ThrowInvalid("options.tuning.batchSize must be 256, 512 or 1024");
      tuning.batch = uint32_t(batch);
      impl_->engine = std::make_unique<Engine>(cfg, backend, device, tuning);
      impl_->bytes = impl_->engine->bytes();
      Account();
    } catch (const Error& e) {
      throw MakeJsError(info.Env(), e);
    } catch (const std::exception& e) {
      throw MakeJsError(info.Env(), kInternal, e.what());
    }
  }

 private:
  // add(docs, { mode, cancel }) -> Promise<{ cluster, similarity, created, batched, rescored, kernelMs, transferMs }>
  Napi::Value Add(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto h = Get("StreamClusterer");
      Args args(info);
      Napi::Object opts = args.Obj(1, "options");
      const std::string m = StrPropOr(opts, "mode", "auto");
      cluster::Mode mode = cluster::Mode::Auto;
      if (m == "sequential")
        mode = cluster::Mode::Sequential;
      else if (m == "batch")
        mode = cluster::Mode::Batch;
      else if (m != "auto")
        ThrowInvalid("mode must be 'auto', 'sequential' or 'batch'", "TypeError");
      auto in = std::make_shared<Inputs>(Inputs::Use::Async);
      CancelToken cancel = in->Cancel(opts);
      const CsrView docs = in->Csr(info[0], "docs");
      auto out = std::make_shared<cluster::AddOutput>();
      auto memory = memory_;
      return RunAsync(
          info.Env(),
          [=] {
            ValidateCsr(docs, "docs");
            std::lock_guard<std::mutex> lock(h->mu);
            h->engine->Add(docs, mode, cancel, out.get());  // all or nothing
            h->bytes = h->engine->bytes();
          },
          [=](Napi::Env env) -> Napi::Value {
            Account(memory, *h);
            auto r = Napi::Object::New(env);
            r.Set("cluster", ToTyped(env, std::move(out->cluster)));
            r.Set("similarity", ToTyped(env, std::move(out->similarity)));
            r.Set("created", ToTyped(env, std::move(out->created)));
            r.Set("batched", out->batched);
            r.Set("rescored", double(out->rescored));
            r.Set("kernelMs", out->timing.kernelMs);
            r.Set("transferMs", out->timing.transferMs);
            return r;
          },
          {info.This()}, in);
    });
  }

  Napi::Value Size(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto h = Get("StreamClusterer");
      std::lock_guard<std::mutex> lock(h->mu);
      return Napi::Number::New(info.Env(), double(h->engine->size()));
    });
  }

  Napi::Value Info(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto h = Get("StreamClusterer");
      std::lock_guard<std::mutex> lock(h->mu);
      const auto& c = h->engine->config();
      auto r = Napi::Object::New(info.Env());
      r.Set("threshold", c.threshold);
      r.Set("maxTerms", double(c.maxTerms));
      r.Set("maxAge", c.maxAge == cluster::kNoDecay ? -1.0 : double(c.maxAge));
      r.Set("time", double(h->engine->time()));
      return r;
    });
  }

  uint32_t ClusterId(const Napi::CallbackInfo& info, Holder& h) {
    const double id = Args(info).Num(0, "id");
    if (!(id >= 0 && id < double(h.engine->size()) && id == double(uint64_t(id))))
      ThrowInvalid("id must be an integer in [0, " + std::to_string(h.engine->size()) + ")");
    return uint32_t(id);
  }

  Napi::Value Centroid(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto h = Get("StreamClusterer");
      std::lock_guard<std::mutex> lock(h->mu);
      const uint32_t c = ClusterId(info, *h);
      const auto& rows = h->engine->rows();
      const uint64_t b = uint64_t(c) * rows.K;
      std::vector<uint32_t> t(rows.terms.begin() + b, rows.terms.begin() + b + rows.len[c]);
      std::vector<float> w(rows.weights.begin() + b, rows.weights.begin() + b + rows.len[c]);
      auto r = Napi::Object::New(info.Env());
      r.Set("terms", ToTyped(info.Env(), std::move(t)));
      r.Set("weights", ToTyped(info.Env(), std::move(w)));
      return r;
    });
  }

  Napi::Value Members(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto h = Get("StreamClusterer");
      std::lock_guard<std::mutex> lock(h->mu);
      return Napi::Number::New(info.Env(), h->engine->members(ClusterId(info, *h)));
    });
  }

  Napi::Value Active(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto h = Get("StreamClusterer");
      std::lock_guard<std::mutex> lock(h->mu);
      return Napi::Boolean::New(info.Env(), h->engine->active(ClusterId(info, *h), h->engine->time()));
    });
  }

  Napi::Value Save(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto h = Get("StreamClusterer");
      return SaveTask(info, "stream-cluster", 1, std::shared_ptr<std::mutex>(h, &h->mu),
                      [h](persist::Writer& w) { h->engine->Save(w); });
    });
  }

  // Reading and validating replace nothing; the engine is swapped only once the whole file checked out.
  Napi::Value Load(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto h = Get("StreamClusterer");
      return LoadTask(
          info, "stream-cluster", 1, std::shared_ptr<std::mutex>(h, &h->mu),
          [h](persist::Reader& r) -> std::function<void()> {
            return [h, &r] {
              h->engine->Load(r);
              h->bytes = h->engine->bytes();
            };
          },
          [h, memory = memory_](Napi::Env env) -> Napi::Value {
            Account(memory, *h);
            return env.Undefined();
          });
    });
  }
  Napi::Value DisposeJs(const Napi::CallbackInfo& info) { return Dispose(info); }

 public:
  static uint64_t Bytes(const Holder& h) { return h.bytes.load(); }
};

void Init(Napi::Env env, Napi::Object exports) { exports.Set("StreamClusterer", ClustererWrap::Define(env)); }

}  // namespace

CUSIM_REGISTER(cluster, Init);

}  // namespace cusim
