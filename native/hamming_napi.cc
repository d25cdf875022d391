// N-API glue for the Hamming k-NN index. One mutex per index serializes adds,
// lazy builds and searches, since the async work reads the shared codes.
#include <atomic>
#include <mutex>

#include "gpu.h"
#include "hamming.h"
#include "napi_util.h"
#include "owned.h"
#include "persist_napi.h"
#include "uninit_vector.h"

namespace cusim {
namespace {

struct State {
  std::mutex mu;
  hamming::HostIndex index;
  // Made once, at construction, for the index's backend, device and exact
  // kernel, so every search, scores and build call uses the same one (under mu).
  std::unique_ptr<hamming::Searcher> searcher;
  // Mirrors for the JavaScript thread, which must not wait on `mu` while a
  // search holds it: the code count and the bytes held (for V8).
  std::atomic<uint64_t> rows{0}, bytes{0};
  // Under mu, after anything that may change what the index holds.
  void Measure() {
    const auto& ix = index;
    uint64_t b = (ix.codes.capacity() + ix.offsets.capacity() + ix.ids.capacity() + ix.positions.capacity() +
                  ix.rowIds.capacity()) *
                     4 +
                 ix.dead.capacity() * 8;
    if (ix.device) b += (ix.codes.size() + ix.offsets.size() + ix.ids.size()) * 4;  // about the GPU's copy
    bytes = b;
    rows = hamming::LiveRows(ix);
  }
};

// Offsets of the EWH buckets: tables * (2^keyBits + 1) entries, bounded to 2^28 (1 GiB).
constexpr uint64_t kMaxBucketOffsets = uint64_t(1) << 28;
// scores(): queries * codes entries, bounded to 2^30 (a 4 GiB result).
constexpr uint64_t kMaxScores = uint64_t(1) << 30;

uint32_t U32Prop(const Napi::Object& o, const char* key, uint32_t lo, uint32_t hi, double fallback) {
  double v = NumPropOr(o, key, fallback);
  if (!(v >= lo && v <= hi) || v != double(uint64_t(v)))
    ThrowInvalid(std::string(key) + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return uint32_t(v);
}

// The index's searcher, from its options { backend, devices, exactKernel }.
std::unique_ptr<hamming::Searcher> MakeSearcher(const Napi::Object& o) {
  const Backend backend = BackendProp(o);
  const std::string ek = StrPropOr(o, "exactKernel", "auto");
  if (ek != "auto" && ek != "popc" && ek != "mma2")
    ThrowInvalid("tuning.exactKernel must be 'auto', 'popc' or 'mma2'", "TypeError");
  const hamming::ExactKernel kernel = ek == "popc"   ? hamming::ExactKernel::Popc
                                      : ek == "mma2" ? hamming::ExactKernel::Mma2
                                                     : hamming::ExactKernel::Auto;
  const int device = DeviceFor(backend, o);
  return backend == Backend::Cpu ? hamming::MakeCpuSearcher() : hamming::MakeCudaSearcher(device, kernel);
}

class HammingWrap : public ResourceWrap<HammingWrap, State> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(
        env, "HammingIndex",
        {InstanceMethod("add", &HammingWrap::Add), InstanceMethod("search", &HammingWrap::Search),
         InstanceMethod("scores", &HammingWrap::Scores), InstanceMethod("build", &HammingWrap::Build),
         InstanceMethod("positions", &HammingWrap::Positions), InstanceMethod("remove", &HammingWrap::Remove),
         InstanceMethod("ids", &HammingWrap::Ids), InstanceMethod("save", &HammingWrap::Save),
         InstanceMethod("load", &HammingWrap::Load), InstanceMethod("size", &HammingWrap::Size),
         InstanceMethod("dispose", &HammingWrap::DisposeJs)});
  }

  explicit HammingWrap(const Napi::CallbackInfo& info) : ResourceWrap(info) {
    try {
      Args args(info);
      Napi::Object o = args.Obj(0, "options");
      auto st = std::make_shared<State>();
      auto& ix = st->index;
      ix.bits = U32Prop(o, "bits", 32, hamming::kMaxBits, 0);
      if (ix.bits % 32) ThrowInvalid("bits must be a multiple of 32");
      const std::string method = StrPropOr(o, "method", "exact");
      if (method != "exact" && method != "ewh") ThrowInvalid("method must be 'exact' or 'ewh'", "TypeError");
      ix.ewh = method == "ewh";
      auto& p = ix.params;
      p.tables = U32Prop(o, "tables", 1, 64, 4);
      p.keyBits = U32Prop(o, "keyBits", 1, std::min<uint32_t>(24, ix.bits), 5);
      p.maxErrors = U32Prop(o, "maxErrors", 0, std::min<uint32_t>(3, p.keyBits), 2);
      p.shortlist = U32Prop(o, "shortlist", 0, 0xFFFFFFFFu, 0);
      double ms = NumPropOr(o, "minScore", 20);
      if (!(ms >= -1e9 && ms <= 1e9) || ms != double(int64_t(ms))) ThrowInvalid("minScore must be an integer");
      p.minScore = int32_t(ms);
      p.seed = SeedProp(o, 1);
      p.weights.assign(p.maxErrors + 1, 0);
      if (ix.ewh && uint64_t(p.tables) * ((uint64_t(1) << p.keyBits) + 1) > kMaxBucketOffsets)
        ThrowInvalid("tables * 2^keyBits must be at most 2^28 (the EWH bucket tables' bound, 1 GiB); got " +
                     std::to_string(p.tables) + " * 2^" + std::to_string(p.keyBits));
      Inputs in(Inputs::Use::Sync);
      auto w = in.Prop<int32_t>(o, "weights");
      if (w.length != p.weights.size()) ThrowInvalid("weights must have maxErrors + 1 entries");
      int32_t maxW = 0;
      for (size_t i = 0; i < w.length; ++i) {
        if (w.data[i] < 0) ThrowInvalid("weights must be non-negative");
        p.weights[i] = w.data[i];
        maxW = std::max(maxW, w.data[i]);
      }
      if (uint64_t(maxW) * p.tables > hamming::kMaxScore) ThrowInvalid("tables * max(weights) must be <= 8191");
      if (ix.ewh) ix.positions = hamming::DrawPositions(ix.bits, p.tables, p.keyBits, p.seed);
      st->searcher = MakeSearcher(o);
      st->Measure();
      impl_ = st;
      Account();
    } catch (const Error& e) {
      MakeJsError(info.Env(), e).ThrowAsJavaScriptException();
    }
  }

 private:
  Napi::Value Add(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto st = Get("HammingIndex");
      Inputs in(Inputs::Use::Sync);
      auto a = in.Array<uint32_t>(info[0], "codes");
      uint64_t rows = 0;
      {
        std::lock_guard<std::mutex> lock(st->mu);
        const uint32_t w = st->index.wordsPerRow();
        if (a.length % w) ThrowInvalid("codes length must be a multiple of bits / 32");
        if (st->index.nextId + a.length / w > 0xFFFFFFFEull) ThrowInvalid("an index gives out at most 2^32 - 2 ids");
        hamming::AddCodes(st->index, a.data, a.length / w);
        st->Measure();
        rows = st->rows.load();
      }
      Account();
      return Napi::Number::New(info.Env(), double(rows));
    });
  }

  Napi::Value Size(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto st = Get("HammingIndex");
      return Napi::Number::New(info.Env(), double(st->rows.load()));
    });
  }

  // remove(ids: Uint32Array) -> number removed
  Napi::Value Remove(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto st = Get("HammingIndex");
      Inputs in(Inputs::Use::Sync);
      auto a = in.Array<uint32_t>(info[0], "ids");
      uint64_t removed = 0;
      {
        std::lock_guard<std::mutex> lock(st->mu);
        removed = hamming::RemoveIds(st->index, a.data, a.length);
        st->Measure();
      }
      Account();
      return Napi::Number::New(info.Env(), double(removed));
    });
  }

  // ids() -> Uint32Array: the live ids, ascending (the column order of scores()).
  Napi::Value Ids(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto st = Get("HammingIndex");
      std::lock_guard<std::mutex> lock(st->mu);
      const auto& ix = st->index;
      std::vector<uint32_t> out;
      out.reserve(hamming::LiveRows(ix));
      for (uint64_t r = 0; r < ix.rows; ++r) {
        if (r / 64 < ix.dead.size() && (ix.dead[r / 64] >> (r % 64)) & 1) continue;
        out.push_back(ix.rowIds.empty() ? uint32_t(r) : ix.rowIds[r]);
      }
      return ToTyped(info.Env(), std::move(out));
    });
  }

  // save(path) -> Promise<void>
  Napi::Value Save(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto st = Get("HammingIndex");
      return SaveTask(info, "hamming", 1, std::shared_ptr<std::mutex>(st, &st->mu),
                      [st](persist::Writer& w) { hamming::SaveIndex(st->index, w); });
    });
  }

  // load(path) -> Promise<options>: replaces the state with the file's.
  Napi::Value Load(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto st = Get("HammingIndex");
      return LoadTask(
          info, "hamming", 1, std::shared_ptr<std::mutex>(st, &st->mu),
          [st](persist::Reader& r) -> std::function<void()> {
            auto loaded = std::make_shared<hamming::HostIndex>(hamming::LoadIndex(r));
            return [st, loaded] { st->index = std::move(*loaded); };
          },
          [=, memory = memory_](Napi::Env env) -> Napi::Value {
            std::lock_guard<std::mutex> lock(st->mu);
            st->Measure();
            Account(memory, *st);
            const auto& ix = st->index;
            auto o = Napi::Object::New(env);
            o.Set("bits", double(ix.bits));
            o.Set("method", ix.ewh ? "ewh" : "exact");
            o.Set("tables", double(ix.params.tables));
            o.Set("keyBits", double(ix.params.keyBits));
            o.Set("maxErrors", double(ix.params.maxErrors));
            auto w = Napi::Array::New(env, ix.params.weights.size());
            for (uint32_t i = 0; i < ix.params.weights.size(); ++i) w.Set(i, double(ix.params.weights[i]));
            o.Set("weights", w);
            o.Set("minScore", double(ix.params.minScore));
            o.Set("shortlist", double(ix.params.shortlist));
            o.Set("seed", double(ix.params.seed));
            return o;
          });
    });
  }

  Napi::Value Positions(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto st = Get("HammingIndex");
      std::vector<uint32_t> pos = st->index.positions;
      return ToTyped(info.Env(), std::move(pos));
    });
  }

  // search(queries, { k, cancel })
  Napi::Value Search(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto st = Get("HammingIndex");
      Args args(info);
      Napi::Object o = args.Obj(1, "options");
      const uint32_t k = U32Prop(o, "k", 1, hamming::kMaxK, 0);
      auto in = std::make_shared<Inputs>(Inputs::Use::Async);
      CancelToken cancel = in->Cancel(o);
      const BitsView q = in->Bits(info[0], "queries");
      if (q.bits != st->index.bits) ThrowInvalid("queries.bits does not match the index");
      CheckTypedLength(q.rows * uint64_t(k), "the k-NN results (queries.rows * k)", "search fewer queries per call");
      // Filled by the search in the worker (a zero fill here would block the event loop).
      auto ids = std::make_shared<UninitVector<uint32_t>>();
      auto dist = std::make_shared<UninitVector<uint16_t>>();
      auto timing = std::make_shared<hamming::Timing>();
      auto memory = memory_;
      return RunAsync(
          info.Env(),
          [=] {
            std::lock_guard<std::mutex> lock(st->mu);
            auto& ix = st->index;
            hamming::Compact(ix);
            if (ix.rows == 0) ThrowInvalid("search on an empty index: add codes first");
            ids->resize(q.rows * k);
            dist->resize(q.rows * k);
            st->searcher->Search(ix, q, k, ids->data(), dist->data(), timing.get(), cancel);
            hamming::MapToIds(ix, ids->data(), ids->size());
            st->Measure();
          },
          [=](Napi::Env env) -> Napi::Value {
            Account(memory, *st);
            auto r = Napi::Object::New(env);
            r.Set("ids", ToTyped(env, std::move(*ids)));
            r.Set("distances", ToTyped(env, std::move(*dist)));
            r.Set("kernelMs", timing->kernelMs);
            r.Set("transferMs", timing->transferMs);
            r.Set("buildMs", timing->buildMs);
            r.Set("scored", double(timing->scored));
            r.Set("shortlisted", double(timing->shortlisted));
            r.Set("exactSampleMs", timing->exactSampleMs);
            r.Set("exactScanMs", timing->exactScanMs);
            r.Set("exactSortMs", timing->exactSortMs);
            r.Set("exactRedoMs", timing->exactRedoMs);
            r.Set("exactRedoQueries", double(timing->exactRedoQueries));
            return r;
          },
          {Value()}, in);
    });
  }

  // scores(queries) -> Uint32Array(q * size)
  Napi::Value Scores(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto st = Get("HammingIndex");
      if (!st->index.ewh) ThrowInvalid("scores needs method 'ewh'");
      auto in = std::make_shared<Inputs>(Inputs::Use::Async);
      const BitsView q = in->Bits(info[0], "queries");
      if (q.bits != st->index.bits) ThrowInvalid("queries.bits does not match the index");
      const auto bound = [q](uint64_t rows) {
        if (rows && q.rows > kMaxScores / rows)
          ThrowInvalid("scores of " + std::to_string(q.rows) + " queries against " + std::to_string(rows) +
                       " codes exceed 2^30 entries (a 4 GiB result); score fewer queries per call");
      };
      bound(st->rows.load());
      auto out = std::make_shared<std::vector<uint32_t>>();
      auto memory = memory_;
      return RunAsync(
          info.Env(),
          [=] {
            std::lock_guard<std::mutex> lock(st->mu);
            auto& ix = st->index;
            hamming::Compact(ix);
            bound(ix.rows);  // codes added since the call
            out->assign(q.rows * ix.rows, 0);
            st->searcher->Scores(ix, q, out->data());
            st->Measure();
          },
          [=](Napi::Env env) -> Napi::Value {
            Account(memory, *st);
            return ToTyped(env, std::move(*out));
          },
          {Value()}, in);
    });
  }

  // build() -> { buildMs, transferMs }: builds EWH buckets now (search builds lazily).
  Napi::Value Build(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto st = Get("HammingIndex");
      auto timing = std::make_shared<hamming::Timing>();
      auto memory = memory_;
      return RunAsync(
          info.Env(),
          [=] {
            std::lock_guard<std::mutex> lock(st->mu);
            auto& ix = st->index;
            hamming::Compact(ix);
            if (!ix.ewh) return;
            st->searcher->Build(ix, timing.get());
            st->Measure();
          },
          [=](Napi::Env env) -> Napi::Value {
            Account(memory, *st);
            auto r = Napi::Object::New(env);
            r.Set("buildMs", timing->buildMs);
            r.Set("transferMs", timing->transferMs);
            return r;
          },
          {Value()});
    });
  }

  Napi::Value DisposeJs(const Napi::CallbackInfo& info) { return Dispose(info); }

 public:
  static uint64_t Bytes(const State& st) { return st.bytes.load(); }
};

void Init(Napi::Env env, Napi::Object exports) { exports.Set("HammingIndex", HammingWrap::Define(env)); }

}  // namespace

CUSIM_REGISTER(hamming, Init);

}  // namespace cusim
