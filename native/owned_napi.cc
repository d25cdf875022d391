#include "owned.h"

#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "gpu.h"
#include "host_buffer.h"
#include "parallel.h"

namespace cusim {
namespace {

uint64_t PhysicalBytes() {
  static const uint64_t b = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGE_SIZE));
  return b;
}

// ---- lent blocks ------------------------------------------------------------------
struct LentBlock {
  void* p;
  uint64_t bytes;
  ~LentBlock() { HostPinnedFree(p); }
};

// Live lent blocks by address. An entry leaves when its ArrayBuffer's
// finalizer runs; calls holding the block keep its memory until they end, and
// no other allocation can take its addresses meanwhile.
class LentRegistry {
 public:
  void Add(const std::shared_ptr<LentBlock>& b) {
    std::lock_guard<std::mutex> lock(m_);
    blocks_[uintptr_t(b->p)] = b;
  }
  void Remove(const LentBlock* b) {
    std::lock_guard<std::mutex> lock(m_);
    auto it = blocks_.find(uintptr_t(b->p));
    if (it != blocks_.end()) blocks_.erase(it);
  }
  std::shared_ptr<LentBlock> Find(const void* p, uint64_t bytes) {
    if (!p || bytes == 0) return nullptr;
    std::lock_guard<std::mutex> lock(m_);
    auto it = blocks_.upper_bound(uintptr_t(p));
    if (it == blocks_.begin()) return nullptr;
    --it;
    auto b = it->second.lock();
    const uintptr_t a = uintptr_t(p), start = it->first;
    if (!b || a - start > b->bytes || bytes > b->bytes - (a - start)) return nullptr;
    return b;
  }

 private:
  std::mutex m_;
  std::map<uintptr_t, std::weak_ptr<LentBlock>> blocks_;
};

LentRegistry& Lent() {
  static LentRegistry* r = new LentRegistry;  // never destroyed: finalizers may run at exit
  return *r;
}

// ---- staging memory ---------------------------------------------------------------
// Staging copies go to blocks that are kept for reuse: fresh memory costs its
// page faults (and zeroing) on the first touch, which take longer than the
// copy itself (bench/staging.js measures both), and page-locking a block for
// a GPU call costs more again (cudaHostAlloc of a large block takes longer
// than the copy). Idle blocks are kept up to a cap per pool, least recently
// used freed first; best fit within twice the size asked. The caps bound what
// a process holds beyond its live data: page-locked blocks are dear to make
// again, pageable ones cost only their page faults.
class BlockPool {
 public:
  using Alloc = void* (*)(uint64_t);  // null when it cannot
  using Free = void (*)(void*);
  BlockPool(Alloc alloc, Free free, uint64_t maxInUse, uint64_t idleCap)
      : alloc_(alloc), free_(free), maxInUse_(maxInUse), idleCap_(idleCap) {}

  // Null when the allocator refuses or more than maxInUse would be out.
  // *fresh (when given) says whether the block was made now, not reused;
  // *capacity (when given) is its size, `bytes` or more.
  std::shared_ptr<void> Acquire(uint64_t bytes, bool* fresh = nullptr, uint64_t* capacity = nullptr) {
    if (fresh) *fresh = false;
    if (bytes == 0) return nullptr;
    const uint64_t want = Round(bytes);
    void* p = nullptr;
    uint64_t cap = 0;
    {
      std::lock_guard<std::mutex> lock(m_);
      size_t best = idle_.size();
      for (size_t i = 0; i < idle_.size(); ++i) {
        const uint64_t c = idle_[i].bytes;
        if (c >= want && c <= 2 * want && (best == idle_.size() || c < idle_[best].bytes)) best = i;
      }
      if (best != idle_.size()) {
        p = idle_[best].p, cap = idle_[best].bytes;
        idle_.erase(idle_.begin() + long(best));
        idleBytes_ -= cap;
      } else {
        if (usedBytes_ + want > maxInUse_) return nullptr;
        cap = want;
      }
      usedBytes_ += cap;
    }
    if (!p) {
      p = alloc_(cap);
      if (!p) {
        // Idle blocks may be what stands in the way; give them back and retry once.
        Trim(0);
        p = alloc_(cap);
      }
      if (!p) {
        std::lock_guard<std::mutex> lock(m_);
        usedBytes_ -= cap;
        return nullptr;
      }
      if (fresh) *fresh = true;
    }
    if (capacity) *capacity = cap;
    return std::shared_ptr<void>(p, [this, cap](void* q) { Return(q, cap); });
  }

  // Frees every idle block now, on this thread, and hands the freed pages
  // back (glibc keeps freed blocks of a few MB in its heaps): for a caller
  // that knows they will not be asked for again soon, a join that consumed
  // its parts. Not for page-locked pools (freeing those synchronizes the GPU).
  void TrimIdle() {
    if (Trim(0, /*now=*/true) == 0) return;
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
  }

 private:
  struct Block {
    void* p;
    uint64_t bytes, stamp;
  };
  // A 1/16 step of the next power of two (64 KB at least), so a stream of
  // slightly different sizes reuses blocks, and a block held for long (a
  // dedup's staged band keys and token sets, thousands of 3-5 MB blocks)
  // wastes at most 1/16 of its size: 2 MB granules made a 4.3 MB block 6 MB.
  static uint64_t Round(uint64_t b) {
    const uint64_t p2 = uint64_t(1) << (64 - __builtin_clzll(b - 1));
    const uint64_t g = std::max<uint64_t>(uint64_t(64) << 10, p2 / 16);
    return (b + g - 1) / g * g;
  }
  void Return(void* p, uint64_t cap) {
    {
      std::lock_guard<std::mutex> lock(m_);
      usedBytes_ -= cap;
      idle_.push_back({p, cap, ++clock_});
      idleBytes_ += cap;
    }
    Trim(idleCap_);
  }
  // Frees idle blocks, oldest first, until at most `keep` bytes stay idle,
  // in the background (cudaFreeHost synchronizes the device), or `now` on
  // this thread. Returns how many it freed.
  size_t Trim(uint64_t keep, bool now = false) {
    std::vector<void*> drop;
    {
      std::lock_guard<std::mutex> lock(m_);
      std::sort(idle_.begin(), idle_.end(), [](const Block& a, const Block& b) { return a.stamp < b.stamp; });
      size_t i = 0;
      while (idleBytes_ > keep && i < idle_.size()) idleBytes_ -= idle_[i].bytes, drop.push_back(idle_[i++].p);
      idle_.erase(idle_.begin(), idle_.begin() + long(i));
    }
    for (void* q : drop) {
      if (now)
        free_(q);
      else
        ReleaseInBackground([q, f = free_] { f(q); });
    }
    return drop.size();
  }

  Alloc alloc_;
  Free free_;
  uint64_t maxInUse_, idleCap_;
  std::mutex m_;
  std::vector<Block> idle_;
  uint64_t idleBytes_ = 0, usedBytes_ = 0, clock_ = 0;
};

// Page-locked staging for GPU calls: the engines DMA it in place. Beyond RAM / 4
// page-locked at once (or when cudaHostAlloc refuses) calls get pageable
// staging, from which the engines stage batches as from any array.
BlockPool& PinnedPool() {
  static BlockPool* p =
      new BlockPool([](uint64_t b) { return QueryDevices().cuda ? HostPinnedAlloc(b, false) : nullptr; },
                    [](void* q) { HostPinnedFree(q); }, PhysicalBytes() / 4,
                    std::min<uint64_t>(uint64_t(4) << 30, PhysicalBytes() / 16));
  return *p;  // never destroyed (see LentRegistry)
}

BlockPool& PageablePool() {
  static BlockPool* p = new BlockPool(
      [](uint64_t b) -> void* {
        try {
          return AllocHostResult(b);
        } catch (...) {
          return nullptr;
        }
      },
      [](void* q) { std::free(q); }, ~uint64_t(0), std::min<uint64_t>(uint64_t(1) << 30, PhysicalBytes() / 32));
  return *p;
}

// A block of `bytes` for a copy: page-locked when `pinned` is asked for and
// can be had, else pageable; what it cost is added to *stats (when given).
// *isPinned says which, *capacity its size (`bytes` or more). Null when neither can.
std::shared_ptr<void> PoolBlock(uint64_t bytes, bool pinned, StageStats* stats, bool* isPinned,
                                uint64_t* capacity = nullptr) {
  const auto t0 = std::chrono::steady_clock::now();
  bool fresh = false;
  std::shared_ptr<void> p;
  if (pinned) p = PinnedPool().Acquire(bytes, &fresh, capacity);
  *isPinned = p != nullptr;
  if (!p) {
    if (stats) stats->pinned = false;
    if (bytes <= PhysicalBytes()) p = PageablePool().Acquire(bytes, &fresh, capacity);
  }
  if (p && fresh && stats) {
    stats->freshBytes += bytes;
    stats->allocMs += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  return p;
}

}  // namespace

class StagingSet : public std::enable_shared_from_this<StagingSet> {
 public:
  // A block of at least `bytes`: the smallest one the set holds that fits,
  // else a new one from the pools (null when they have none). Free blocks
  // smaller than `bytes` go back to the pools then: the stream's chunks have
  // outgrown them.
  std::shared_ptr<void> Take(uint64_t bytes, bool pinned, StageStats* stats) {
    Block b;
    std::vector<Block> small;
    {
      std::lock_guard<std::mutex> lock(m_);
      size_t best = free_.size();
      for (size_t i = 0; i < free_.size(); ++i)
        if (free_[i].bytes >= bytes && (best == free_.size() || free_[i].bytes < free_[best].bytes)) best = i;
      if (best != free_.size()) {
        b = std::move(free_[best]);
        free_.erase(free_.begin() + long(best));
      } else {
        for (Block& f : free_) small.push_back(std::move(f));
        free_.clear();
      }
    }
    small.clear();  // back to the pools, outside the lock
    if (!b.p) {
      b.p = PoolBlock(bytes, pinned, stats, &b.pinned, &b.bytes);
      if (!b.p) return nullptr;
    } else if (!b.pinned) {
      stats->pinned = false;
    }
    // The call's reference: when it goes, the block comes back here (or, the
    // set closed or gone, to its pool).
    void* q = b.p.get();
    return std::shared_ptr<void>(q, [set = weak_from_this(), b](void*) mutable {
      if (auto s = set.lock()) s->Put(std::move(b));
    });
  }

  void Close() {
    std::vector<Block> drop;
    std::lock_guard<std::mutex> lock(m_);
    closed_ = true;
    drop.swap(free_);
  }
  bool open() {
    std::lock_guard<std::mutex> lock(m_);
    return !closed_;
  }

 private:
  struct Block {
    std::shared_ptr<void> p;  // the pool's block
    uint64_t bytes = 0;
    bool pinned = true;
  };
  void Put(Block&& b) {
    std::lock_guard<std::mutex> lock(m_);
    if (!closed_) free_.push_back(std::move(b));
  }
  std::mutex m_;
  std::vector<Block> free_;
  bool closed_ = false;
};

namespace {

// Never read (zero bytes), never null.
alignas(64) const uint8_t kEmpty[64] = {};

std::shared_ptr<const StagedData> StagedOf(const Napi::Value& v);

const char* TypeName(napi_typedarray_type t) {
  switch (t) {
    case napi_float32_array: return "Float32Array";
    case napi_float64_array: return "Float64Array";
    case napi_uint32_array: return "Uint32Array";
    case napi_int32_array: return "Int32Array";
    case napi_uint16_array: return "Uint16Array";
    case napi_uint8_array: return "Uint8Array";
    default: return "typed array";
  }
}

size_t ElementBytes(napi_typedarray_type t) {
  switch (t) {
    case napi_int8_array:
    case napi_uint8_array:
    case napi_uint8_clamped_array: return 1;
    case napi_int16_array:
    case napi_uint16_array: return 2;
    case napi_float64_array:
    case napi_bigint64_array:
    case napi_biguint64_array: return 8;
    default: return 4;
  }
}

uint64_t Dim(const Napi::Object& o, const char* key, const char* name) {
  Napi::Value v = o.Get(key);
  if (!v.IsNumber()) ThrowInvalid(std::string(name) + "." + key + " must be a non-negative integer", "TypeError");
  double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 0) || d != std::floor(d) || d > 9007199254740991.0)
    ThrowInvalid(std::string(name) + "." + key + " must be a non-negative integer");
  return uint64_t(d);
}

}  // namespace

struct StagedData {
  std::shared_ptr<Inputs> in;  // owns the memory
  bool csr = false;
  CsrView view;    // csr
  ArrayRef array;  // !csr
  napi_typedarray_type type = napi_uint32_array;
  double stageMs = 0;  // stageCsrAsync: the worker's time, blocks made and copies
};

namespace {

// ---- cancellation flags --------------------------------------------------------------
// An AbortSignal's flag (lib/cancel.ts): JavaScript sets it, workers poll it.
// Native memory shared by reference with every call given it, so neither GC
// nor a transfer can pull it from under a running call.
const napi_type_tag kCancelTag = {0x6375736963616e63ull, 0x656c666c61673031ull};

class CancelFlag : public Napi::ObjectWrap<CancelFlag> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(
        env, "CancelFlag",
        {InstanceMethod("abort", &CancelFlag::Abort), InstanceAccessor("aborted", &CancelFlag::Aborted, nullptr)});
  }
  explicit CancelFlag(const Napi::CallbackInfo& info)
      : Napi::ObjectWrap<CancelFlag>(info), flag_(std::make_shared<std::atomic<int32_t>>(0)) {
    napi_type_tag_object(info.Env(), info.This(), &kCancelTag);
  }
  const std::shared_ptr<std::atomic<int32_t>>& flag() const { return flag_; }

 private:
  Napi::Value Abort(const Napi::CallbackInfo& info) {
    flag_->store(1);
    return info.Env().Undefined();
  }
  Napi::Value Aborted(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), flag_->load() != 0); }
  std::shared_ptr<std::atomic<int32_t>> flag_;
};

// A long call's progress (lib/progress.ts): workers count into it, a timer on
// the JavaScript thread reads it. Native memory shared like CancelFlag's.
const napi_type_tag kProgressTag = {0x6375736970726f67ull, 0x7265737363747231ull};

struct ProgressSlots {
  std::atomic<uint64_t> v[3] = {{0}, {0}, {0}};  // done, total, stage (CancelToken's layout)
};

class ProgressCounter : public Napi::ObjectWrap<ProgressCounter> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "ProgressCounter", {InstanceMethod("read", &ProgressCounter::Read)});
  }
  explicit ProgressCounter(const Napi::CallbackInfo& info)
      : Napi::ObjectWrap<ProgressCounter>(info), slots_(std::make_shared<ProgressSlots>()) {
    napi_type_tag_object(info.Env(), info.This(), &kProgressTag);
  }
  const std::shared_ptr<ProgressSlots>& slots() const { return slots_; }

 private:
  // read() -> [done, total, stage]
  Napi::Value Read(const Napi::CallbackInfo& info) {
    auto a = Napi::Array::New(info.Env(), 3);
    for (uint32_t i = 0; i < 3; ++i) a.Set(i, double(slots_->v[i].load(std::memory_order_relaxed)));
    return a;
  }
  std::shared_ptr<ProgressSlots> slots_;
};

const napi_type_tag kStagedTag = {0x6375736973746167ull, 0x6564696e70757431ull};

class StagedWrap : public Napi::ObjectWrap<StagedWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(
        env, "Staged",
        {InstanceAccessor("length", &StagedWrap::Length, nullptr),
         InstanceAccessor("stats", &StagedWrap::Stats, nullptr), InstanceMethod("dispose", &StagedWrap::Dispose),
         InstanceMethod("toArray", &StagedWrap::ToArray)});
  }
  // Made only by stageCsr / stageArray, which pass the data as an External.
  explicit StagedWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<StagedWrap>(info) {
    if (info.Length() != 1 || !info[0].IsExternal()) {
      MakeJsError(info.Env(), kInvalidArgument, "Staged objects are made by stageCsr and stageArray", "TypeError")
          .ThrowAsJavaScriptException();
      return;
    }
    data_ = *info[0].As<Napi::External<std::shared_ptr<const StagedData>>>().Data();
    napi_type_tag_object(info.Env(), info.This(), &kStagedTag);
  }
  const std::shared_ptr<const StagedData>& data() const { return data_; }
  // As dispose(): the memory goes once no running call holds it.
  void Release() { data_.reset(); }

 private:
  // Lets the memory go now (calls still reading it keep it until they end).
  Napi::Value Dispose(const Napi::CallbackInfo& info) {
    data_.reset();
    return info.Env().Undefined();
  }
  // A staged array's elements, copied into a typed array of its type (what a
  // test or a caller inspecting kept results reads; calls read it in place).
  Napi::Value ToArray(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!data_ || data_->csr) {
      MakeJsError(env, kInvalidArgument, "toArray() reads a staged array that is not disposed", "TypeError")
          .ThrowAsJavaScriptException();
      return env.Undefined();
    }
    const ArrayRef& a = data_->array;
    const size_t bytes = size_t(a.length) * a.elementBytes;
    Napi::ArrayBuffer buf = Napi::ArrayBuffer::New(env, bytes);
    if (bytes) std::memcpy(buf.Data(), a.data, bytes);
    napi_value out;
    napi_create_typedarray(env, data_->type, size_t(a.length), buf, 0, &out);
    return Napi::Value(env, out);
  }
  Napi::Value Length(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), double(!data_ ? 0 : data_->csr ? data_->view.rows : data_->array.length));
  }
  // { bulkBytes, freshBytes, allocMs, stageMs, pinned } of the copy that made it
  // (stageMs: stageCsrAsync's worker only); undefined once disposed.
  Napi::Value Stats(const Napi::CallbackInfo& info) {
    if (!data_) return info.Env().Undefined();
    const StageStats& st = data_->in->stats();
    auto o = Napi::Object::New(info.Env());
    o.Set("bulkBytes", double(st.bulkBytes));
    o.Set("freshBytes", double(st.freshBytes));
    o.Set("allocMs", st.allocMs);
    o.Set("stageMs", data_->stageMs);
    o.Set("pinned", st.bulkBytes > 0 && st.pinned);
    return o;
  }
  std::shared_ptr<const StagedData> data_;
};

std::shared_ptr<const StagedData> StagedOf(const Napi::Value& v) {
  bool tagged = false;
  if (!v.IsObject() || napi_check_object_type_tag(v.Env(), v, &kStagedTag, &tagged) != napi_ok || !tagged)
    return nullptr;
  return StagedWrap::Unwrap(v.As<Napi::Object>())->data();
}

// One constructor per environment (each worker loads the addon anew).
Napi::Value NewStaged(Napi::Env env, std::shared_ptr<const StagedData> d) {
  auto* c = GetEnvData(env);
  if (!c || c->stagedCtor.IsEmpty()) throw Error(kInternal, "the Staged class is not registered in this environment");
  return c->stagedCtor.New({Napi::External<std::shared_ptr<const StagedData>>::New(env, &d)});
}

}  // namespace

Napi::Value NewStagedArray(Napi::Env env, std::shared_ptr<Inputs> owner, const void* data, uint64_t length,
                           napi_typedarray_type type) {
  auto d = std::make_shared<StagedData>();
  d->in = std::move(owner);
  d->type = type;
  d->array.elementBytes = ElementBytes(type);
  d->array.length = length;
  d->array.data = const_cast<void*>(data);
  return NewStaged(env, d);
}

namespace {

// stagingSet() -> StagingSet: a stream's staging blocks (owned.h), for
// stageCsrAsync; dispose() when the stream ends (its finalizer does otherwise).
const napi_type_tag kStagingSetTag = {0x6375736973657473ull, 0x7374616769736574ull};

class StagingSetWrap : public Napi::ObjectWrap<StagingSetWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "StagingSet", {InstanceMethod("dispose", &StagingSetWrap::Dispose)});
  }
  explicit StagingSetWrap(const Napi::CallbackInfo& info)
      : Napi::ObjectWrap<StagingSetWrap>(info), set_(std::make_shared<StagingSet>()) {
    napi_type_tag_object(info.Env(), info.This(), &kStagingSetTag);
  }
  ~StagingSetWrap() override { set_->Close(); }
  // Null once disposed: later copies then take blocks from the pools.
  std::shared_ptr<StagingSet> set() const { return set_->open() ? set_ : nullptr; }

 private:
  Napi::Value Dispose(const Napi::CallbackInfo& info) {
    set_->Close();
    return info.Env().Undefined();
  }
  std::shared_ptr<StagingSet> set_;
};

std::shared_ptr<StagingSet> StagingSetOf(const Napi::Value& v) {
  if (v.IsUndefined() || v.IsNull()) return nullptr;
  bool tagged = false;
  if (!v.IsObject() || napi_check_object_type_tag(v.Env(), v, &kStagingSetTag, &tagged) != napi_ok || !tagged)
    ThrowInvalid("staging must be a StagingSet", "TypeError");
  return StagingSetWrap::Unwrap(v.As<Napi::Object>())->set();
}

// stageCsr(matrix, wantValues = true) -> Staged
Napi::Value StageCsr(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    const bool values = info.Length() < 2 || info[1].ToBoolean().Value();
    auto d = std::make_shared<StagedData>();
    d->in = std::make_shared<Inputs>(Inputs::Use::Async);
    d->csr = true;
    d->view = d->in->Csr(info[0], "matrix", values);
    return NewStaged(info.Env(), d);
  });
}

// stageCsrAsync(matrix, wantValues = true, gpu = false, staging?) -> Promise<Staged>: as
// stageCsr, but the copy (and the page-locking of fresh staging, when `gpu`
// asks for page-locked staging that a GPU call then DMAs in place) runs on a
// worker over the CPU pool, not on the JavaScript thread. The caller must leave
// the matrix's arrays as they are until the Promise settles (hashStream asks
// its source for nothing meanwhile): what is written into them during the copy
// may or may not be seen. An array detached meanwhile rejects the Promise.
// With a StagingSet (a stream's), the indices and values go to its blocks.
Napi::Value StageCsrAsync(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    const bool values = info.Length() < 2 || info[1].ToBoolean().Value();
    const bool gpu = info.Length() > 2 && info[2].ToBoolean().Value();
    auto staging = StagingSetOf(info[3]);
    const CsrSource src = ReadCsr(info[0], "matrix", values);
    auto d = std::make_shared<StagedData>();
    d->in = std::make_shared<Inputs>(Inputs::Use::Async);
    d->in->ForGpu(gpu);
    d->in->UseStaging(std::move(staging));
    d->csr = true;
    if (src.staged) {
      d->view = d->in->Csr(src, 0, src.rows);
      return RunAsync(info.Env(), [] {}, [d](Napi::Env env) { return NewStaged(env, d); }, {});
    }
    auto arrays = std::make_shared<const CsrArrays>(Inputs::ResolveCsr(src, 0, src.rows));
    // Referenced until the copy ends, so the arrays are not collected under it.
    struct Held {
      napi_typedarray_type type;
      bool alsoInt32;
      const char* name;
    };
    auto refs = std::make_shared<std::vector<std::pair<Napi::Reference<Napi::Value>, Held>>>();
    const std::pair<Napi::Value, Held> given[] = {{src.indptr, {napi_uint32_array, true, "matrix.indptr"}},
                                                  {src.indices, {napi_uint32_array, false, "matrix.indices"}},
                                                  {src.values, {napi_float32_array, false, "matrix.values"}}};
    for (const auto& [v, h] : given)
      if (!v.IsUndefined()) refs->emplace_back(Napi::Persistent(v), h);
    return RunAsync(
        info.Env(),
        [d, arrays] {
          const auto t0 = std::chrono::steady_clock::now();
          d->view = d->in->Csr(*arrays);
          d->stageMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        },
        [d, refs](Napi::Env env) -> Napi::Value {
          // A buffer detached during the copy may have been freed under it:
          // what was read is refused (a coded TypeError naming the array).
          for (auto& [ref, h] : *refs) ResolveArray(ref.Value(), h.type, h.name, h.alsoInt32);
          return NewStaged(env, d);
        },
        {});
  });
}

// The parts of a stageArray call, resolved (no JavaScript runs after this).
struct ArrayParts {
  std::vector<Napi::Value> values;
  std::vector<ArrayRef> refs;
  napi_typedarray_type type = napi_uint32_array;
  uint64_t total = 0;
};

ArrayParts ResolveParts(const Napi::CallbackInfo& info, bool stagedOnly) {
  if (!info[0].IsArray()) ThrowInvalid("parts must be an array of typed arrays", "TypeError");
  auto list = info[0].As<Napi::Array>();
  ArrayParts p;
  for (uint32_t i = 0; i < list.Length(); ++i) p.values.push_back(list.Get(i));  // getters run here, not below
  for (size_t i = 0; i < p.values.size(); ++i) {
    napi_typedarray_type t;
    if (auto st = StagedOf(p.values[i])) {
      if (st->csr) ThrowInvalid("parts[" + std::to_string(i) + "] is a staged matrix", "TypeError");
      t = st->type;
    } else {
      bool typed = false;
      if (stagedOnly || napi_is_typedarray(info.Env(), p.values[i], &typed) != napi_ok || !typed)
        ThrowInvalid("parts[" + std::to_string(i) + "] must be a " + (stagedOnly ? "staged array" : "typed array"),
                     "TypeError");
      napi_get_typedarray_info(info.Env(), p.values[i], &t, nullptr, nullptr, nullptr, nullptr);
    }
    if (i == 0)
      p.type = t;
    else if (t != p.type)
      ThrowInvalid("parts must all have one element type", "TypeError");
    p.refs.push_back(ResolveArray(p.values[i], t, "parts[" + std::to_string(i) + "]"));
    p.total += p.refs.back().length;
  }
  return p;
}

// A staged array of `total` elements of `type`, its memory allocated, not yet filled.
std::shared_ptr<StagedData> NewArrayData(napi_typedarray_type type, uint64_t total) {
  auto d = std::make_shared<StagedData>();
  d->in = std::make_shared<Inputs>(Inputs::Use::Async);
  d->type = type;
  d->array.elementBytes = ElementBytes(type);
  d->array.length = total;
  d->array.data = d->in->Allocate(total * d->array.elementBytes, false);
  return d;
}

// stageArray(parts: (TypedArray | Staged)[], consume = false) -> Staged: the
// parts end to end, all of one element type. With consume, each Staged part is
// disposed once copied, so joining chunks needs little more than their total
// (the new block's pages are touched only as it fills).
Napi::Value StageArray(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    const bool consume = info.Length() > 1 && info[1].ToBoolean().Value();
    ArrayParts p = ResolveParts(info, false);
    auto d = NewArrayData(p.type, p.total);
    auto* dst = static_cast<uint8_t*>(d->array.data);
    for (size_t i = 0; i < p.refs.size(); ++i) {
      ParallelCopy(dst, p.refs[i].data, p.refs[i].bytes());
      dst += p.refs[i].bytes();
      if (consume && p.refs[i].owner) {
        p.refs[i].owner.reset();
        StagedWrap::Unwrap(p.values[i].As<Napi::Object>())->Release();
      }
    }
    return NewStaged(info.Env(), d);
  });
}

// stageArrayAsync(parts: Staged[], consume = false) -> Promise<Staged>: as
// stageArray, for staged parts, with the copy on a worker over the CPU pool,
// not on the JavaScript thread (joining a dedup's band-key chunks: hundreds of
// MB at 10M rows). With consume, the parts are disposed at once, and each one's
// memory goes as soon as it is copied.
Napi::Value StageArrayAsync(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    const bool consume = info.Length() > 1 && info[1].ToBoolean().Value();
    auto p = std::make_shared<ArrayParts>(ResolveParts(info, true));
    if (consume)
      for (const Napi::Value& v : p->values) StagedWrap::Unwrap(v.As<Napi::Object>())->Release();
    p->values.clear();  // JavaScript handles: only valid on this thread, during this call
    auto d = NewArrayData(p->type, p->total);
    return RunAsync(
        info.Env(),
        [p, d, consume] {
          auto* dst = static_cast<uint8_t*>(d->array.data);
          for (ArrayRef& r : p->refs) {
            ParallelCopy(dst, r.data, r.bytes());
            dst += r.bytes();
            r.owner.reset();  // the last holder of a consumed part frees it here
          }
          // The consumed parts' blocks went idle in the staging pool (up to
          // 1 GiB of them stay for reuse): a dedup's band-key chunks are not
          // asked for again, so they go now.
          if (consume) PageablePool().TrimIdle();
        },
        [d](Napi::Env env) { return NewStaged(env, d); }, {});
  });
}

// stageSelect(staged, rowLength, keep: Uint8Array) -> Staged: the rows of
// rowLength elements whose keep[i] is nonzero, in order (MinHashLSH.remove).
Napi::Value StageSelect(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto st = StagedOf(info[0]);
    if (!st || st->csr) ThrowInvalid("staged must be a staged array", "TypeError");
    const double per = Args(info).Num(1, "rowLength");
    if (!(per >= 1 && per <= 4294967295.0) || per != double(uint64_t(per)))
      ThrowInvalid("rowLength must be a positive integer");
    const uint64_t w = uint64_t(per);
    Inputs in(Inputs::Use::Sync);
    auto keep = in.Array<uint8_t>(info[2], "keep");
    if (st->array.length != keep.length * w)
      ThrowInvalid("keep has " + std::to_string(keep.length) + " rows but the staged array holds " +
                   std::to_string(st->array.length) + " elements, not rows of " + std::to_string(w));
    uint64_t kept = 0;
    for (size_t i = 0; i < keep.length; ++i) kept += keep.data[i] != 0;
    auto d = std::make_shared<StagedData>();
    d->in = std::make_shared<Inputs>(Inputs::Use::Async);
    d->type = st->type;
    d->array.elementBytes = st->array.elementBytes;
    d->array.length = kept * w;
    const uint64_t rowBytes = w * st->array.elementBytes;
    auto* dst = static_cast<uint8_t*>(d->in->Allocate(kept * rowBytes, false));
    d->array.data = dst;
    const auto* src = static_cast<const uint8_t*>(st->array.data);
    for (size_t i = 0; i < keep.length; ++i)
      if (keep.data[i]) std::memcpy(dst, src + i * rowBytes, rowBytes), dst += rowBytes;
    return NewStaged(info.Env(), d);
  });
}

void Init(Napi::Env env, Napi::Object exports) {
  exports.Set("stageSelect", Napi::Function::New(env, StageSelect, "stageSelect"));
  exports.Set("CancelFlag", CancelFlag::Define(env));
  exports.Set("ProgressCounter", ProgressCounter::Define(env));
  GetEnvData(env)->stagedCtor = Napi::Persistent(StagedWrap::Define(env));
  exports.Set("stageCsr", Napi::Function::New(env, StageCsr, "stageCsr"));
  exports.Set("stageCsrAsync", Napi::Function::New(env, StageCsrAsync, "stageCsrAsync"));
  exports.Set("StagingSet", StagingSetWrap::Define(env));
  exports.Set("stageArray", Napi::Function::New(env, StageArray, "stageArray"));
  exports.Set("stageArrayAsync", Napi::Function::New(env, StageArrayAsync, "stageArrayAsync"));
}

}  // namespace

CUSIM_REGISTER(owned, Init);

Napi::Object NewLentBuffer(Napi::Env env, uint64_t bytes) {
  auto out = Napi::Object::New(env);
  // Node wraps external memory only up to MaxTypedLength() bytes (napi_util.h);
  // a larger array is an ordinary one (isPinned() says so).
  void* p = bytes && bytes <= MaxTypedLength() ? HostPinnedAlloc(bytes) : nullptr;
  out.Set("pinned", Napi::Boolean::New(env, p != nullptr));
  if (p) {
    auto block = std::make_shared<LentBlock>();
    block->p = p, block->bytes = bytes;
    Lent().Add(block);
    // The buffer's own reference; its finalizer runs once no ArrayBuffer
    // (here or in a worker it was transferred to) uses the memory.
    auto* ref = new std::shared_ptr<LentBlock>(block);
    out.Set("buffer", ArrayBufferOver(
                          env, p, bytes,
                          [](void*, void* r) {
                            auto* b = static_cast<std::shared_ptr<LentBlock>*>(r);
                            Lent().Remove(b->get());
                            delete b;
                          },
                          ref));
  } else {
    out.Set("buffer", NewJsArrayBuffer(env, bytes));
  }
  return out;
}

std::shared_ptr<void> FindLent(const void* p, uint64_t bytes) { return Lent().Find(p, bytes); }

ArrayRef ResolveArray(const Napi::Value& v, napi_typedarray_type type, const std::string& name, bool alsoInt32) {
  napi_env env = v.Env();
  if (auto st = StagedOf(v)) {
    if (st->csr || (st->type != type && !(alsoInt32 && st->type == napi_int32_array)))
      ThrowInvalid(name + " must be a " + TypeName(type), "TypeError");
    ArrayRef a = st->array;
    a.owner = std::const_pointer_cast<StagedData>(st);
    return a;
  }
  bool isTyped = false;
  if (napi_is_typedarray(env, v, &isTyped) != napi_ok || !isTyped)
    ThrowInvalid(name + " must be a " + TypeName(type), "TypeError");
  napi_typedarray_type t;
  size_t length = 0, offset = 0;
  void* data = nullptr;
  napi_value ab;
  if (napi_get_typedarray_info(env, v, &t, &length, &data, &ab, &offset) != napi_ok)
    ThrowInvalid(name + " could not be read as a " + TypeName(type), "TypeError");
  if (t != type && !(alsoInt32 && t == napi_int32_array))
    ThrowInvalid(name + " must be a " + TypeName(type), "TypeError");
  ArrayRef a;
  bool isAb = false;
  napi_is_arraybuffer(env, ab, &isAb);
  a.shared = !isAb;
  if (isAb) {
    bool detached = false;
    if (napi_is_detached_arraybuffer(env, ab, &detached) == napi_ok && detached)
      ThrowInvalid(name + " is detached (its ArrayBuffer was transferred or detached)", "TypeError");
  }
  a.data = length ? data : const_cast<uint8_t*>(kEmpty);
  a.length = length;
  a.elementBytes = ElementBytes(t);
  return a;
}

CsrSource ReadCsr(const Napi::Value& v, const char* name, bool wantValues) {
  if (!v.IsObject()) ThrowInvalid(std::string(name) + " must be a CsrMatrix object", "TypeError");
  auto o = v.As<Napi::Object>();
  CsrSource s;
  s.name = name;
  s.wantValues = wantValues;
  if (auto st = StagedOf(v)) {
    if (!st->csr) ThrowInvalid(std::string(name) + " must be a CsrMatrix object", "TypeError");
    s.staged = st;
    s.rows = st->view.rows;
    s.cols = st->view.cols;
    return s;
  }
  s.rows = Dim(o, "rows", name);
  s.cols = Dim(o, "cols", name);
  s.indptr = o.Get("indptr");
  s.indices = o.Get("indices");
  s.values = wantValues ? o.Get("values") : o.Env().Undefined();
  if (s.values.IsNull()) s.values = o.Env().Undefined();
  return s;
}

void* Inputs::Allocate(uint64_t bytes, bool bulk) {
  if (bytes == 0) return const_cast<uint8_t*>(kEmpty);
  // Small copies gain nothing from page-locking; they go by the engines' own
  // staging. Below 1 MB, malloc's own free lists already reuse memory.
  std::shared_ptr<void> p;
  if (bytes >= (uint64_t(1) << 20)) {
    if (bulk) stats_.bulkBytes += bytes;
    bool pinned = false;
    if (staging_ && bulk)
      p = staging_->Take(bytes, gpu_, &stats_);
    else
      p = PoolBlock(bytes, gpu_ && bulk, bulk ? &stats_ : nullptr, &pinned);
    if (!p)
      ThrowOutOfMemory("host memory for a copy of the call's inputs", bytes,
                       uint64_t(sysconf(_SC_AVPHYS_PAGES)) * uint64_t(sysconf(_SC_PAGE_SIZE)));
  } else {
    void* q = std::malloc(bytes);
    if (!q) throw std::bad_alloc();
    p = std::shared_ptr<void>(q, [](void* r) { std::free(r); });
  }
  void* q = p.get();
  held_.push_back(std::move(p));
  return q;
}

const void* Inputs::Own(const ArrayRef& a, uint64_t offset, uint64_t count, bool bulk) {
  const uint64_t bytes = count * a.elementBytes;
  const void* src = static_cast<const uint8_t*>(a.data) + offset * a.elementBytes;
  if (bytes == 0) return kEmpty;
  if (a.owner) {
    held_.push_back(a.owner);
    return src;
  }
  if (use_ == Use::Sync && !a.shared) return src;
  if (((gpu_ && bulk) || use_ == Use::Handed) && !a.shared) {
    if (auto lent = FindLent(src, bytes)) {
      held_.push_back(std::move(lent));
      return src;
    }
  }
  if (use_ == Use::Handed && !a.shared) return src;
  void* dst = Allocate(bytes, bulk);
  ParallelCopy(dst, src, bytes);
  return dst;
}

CsrArrays Inputs::ResolveCsr(const CsrSource& src, uint64_t rowStart, uint64_t rowEnd) {
  const std::string& n = src.name;
  CsrArrays a;
  a.name = n;
  a.cols = src.cols;
  a.indptr = ResolveArray(src.indptr, napi_uint32_array, n + ".indptr", true);
  a.indices = ResolveArray(src.indices, napi_uint32_array, n + ".indices");
  a.hasValues = !src.values.IsUndefined();
  if (a.hasValues) a.values = ResolveArray(src.values, napi_float32_array, n + ".values");
  if (a.indptr.length != src.rows + 1)
    ThrowInvalid(n + ".indptr has length " + std::to_string(a.indptr.length) +
                 " but rows + 1 = " + std::to_string(src.rows + 1));
  if (!(rowStart <= rowEnd && rowEnd <= src.rows)) ThrowInvalid("rowStart/rowEnd out of range");
  a.rowStart = rowStart;
  a.rowEnd = rowEnd;
  return a;
}

CsrView Inputs::Csr(const CsrSource& src, uint64_t rowStart, uint64_t rowEnd) {
  if (src.staged) {
    if (!(rowStart <= rowEnd && rowEnd <= src.rows)) ThrowInvalid("rowStart/rowEnd out of range");
    held_.push_back(std::const_pointer_cast<StagedData>(src.staged));
    CsrView m = src.staged->view;  // checked when staged
    m.indptr += rowStart;
    m.rows = rowEnd - rowStart;
    if (!src.wantValues) m.values = nullptr;
    return m;
  }
  return Csr(ResolveCsr(src, rowStart, rowEnd));
}

CsrView Inputs::Csr(const CsrArrays& a) {
  const std::string& n = a.name;
  const ArrayRef &ip = a.indptr, &ix = a.indices, &va = a.values;
  const bool hasValues = a.hasValues;
  const uint64_t rowStart = a.rowStart, rowEnd = a.rowEnd;
  const uint64_t rows = rowEnd - rowStart;
  // Handed arrays are read in place, except shared ones (ip.shared etc.).
  const bool copy = use_ == Use::Async || ip.shared || ix.shared || va.shared;
  const uint32_t* p = static_cast<const uint32_t*>(ip.data) + rowStart;
  if (copy) {
    auto* own = static_cast<uint32_t*>(Allocate((rows + 1) * 4, false));
    ParallelCopy(own, p, (rows + 1) * 4);
    p = own;
  }
  // Non-decreasing, checked on the copy (a shared array may change under us).
  std::atomic<uint64_t> firstBad{UINT64_MAX};
  ParallelFor(rows, 1 << 16, [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r)
      if (p[r + 1] < p[r]) {
        uint64_t cur = firstBad.load();
        while (r < cur && !firstBad.compare_exchange_weak(cur, r)) {
        }
        return;
      }
  });
  if (firstBad.load() != UINT64_MAX) {
    const uint64_t r = rowStart + firstBad.load();
    ThrowInvalid(n + ".indptr must be non-decreasing (indptr[" + std::to_string(r + 1) + "] < indptr[" +
                 std::to_string(r) + "])");
  }
  const uint64_t nz0 = p[0], nz1 = p[rows];
  if (nz1 > ix.length)
    ThrowInvalid(n + ".indptr[" + std::to_string(rowEnd) + "]=" + std::to_string(nz1) +
                 " exceeds indices.length=" + std::to_string(ix.length));
  if (hasValues && va.length < nz1)
    ThrowInvalid(n + ".values has length " + std::to_string(va.length) + " but indptr[" + std::to_string(rowEnd) +
                 "]=" + std::to_string(nz1));
  CsrView m;
  m.rows = rows;
  m.cols = a.cols;
  if (!copy) {
    if (use_ == Use::Handed) {
      // Arrays lib/ did not transfer (pinnedArray memory) may still be detached
      // by the caller: hold their blocks for the call.
      const ArrayRef* arrays[] = {&ix, &va};
      for (const ArrayRef* r : arrays)
        if (r->data && r->bytes())
          if (auto lent = FindLent(r->data, r->bytes())) held_.push_back(std::move(lent));
    }
    m.indptr = p;
    m.indices = static_cast<const uint32_t*>(ix.data);
    m.values = hasValues ? static_cast<const float*>(va.data) : nullptr;
    return m;
  }
  // The owned slice starts at nz0: indptr is rebased, positions in messages are not.
  auto* own = const_cast<uint32_t*>(p);
  ParallelFor(rows + 1, 1 << 16, [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r) own[r] -= uint32_t(nz0);
  });
  m.indptr = own;
  m.base = nz0;
  m.indices = static_cast<const uint32_t*>(Own(ix, nz0, nz1 - nz0, true));
  m.values = hasValues ? static_cast<const float*>(Own(va, nz0, nz1 - nz0, true)) : nullptr;
  return m;
}

CsrView Inputs::Csr(const Napi::Value& v, const char* name, bool wantValues) {
  const CsrSource s = ReadCsr(v, name, wantValues);
  return Csr(s, 0, s.rows);
}

namespace {
// rows x cols elements of `type` in o.data, the element count checked.
template <typename View>
ArrayRef DenseData(const Napi::Value& v, const char* name, napi_typedarray_type type, View* d) {
  if (!v.IsObject()) ThrowInvalid(std::string(name) + " must be a dense matrix object", "TypeError");
  auto o = v.As<Napi::Object>();
  d->rows = Dim(o, "rows", name);
  d->cols = Dim(o, "cols", name);
  const Napi::Value data = o.Get("data");
  const ArrayRef a = ResolveArray(data, type, std::string(name) + ".data");
  // rows * cols can wrap 64 bits (2^34 x 2^30 is 0) and would then match an
  // empty array; the kernels would read rows x cols values from it.
  uint64_t elems = 0;
  if (__builtin_mul_overflow(d->rows, d->cols, &elems))
    ThrowInvalid(std::string(name) + ".rows * " + name + ".cols overflows 64 bits (rows=" + std::to_string(d->rows) +
                 ", cols=" + std::to_string(d->cols) + ")");
  if (a.length != elems)
    ThrowInvalid(std::string(name) + ".data has length " + std::to_string(a.length) +
                 " but rows * cols = " + std::to_string(elems));
  return a;
}
}  // namespace

DenseView Inputs::Dense(const Napi::Value& v, const char* name) {
  DenseView d;
  const ArrayRef a = DenseData(v, name, napi_float32_array, &d);
  d.data = static_cast<const float*>(Own(a, 0, a.length, true));
  return d;
}

DenseBytesView Inputs::DenseBytes(const Napi::Value& v, const char* name) {
  DenseBytesView d;
  const ArrayRef a = DenseData(v, name, napi_uint8_array, &d);
  d.data = static_cast<const uint8_t*>(Own(a, 0, a.length, true));
  return d;
}

BitsView Inputs::Bits(const Napi::Value& v, const char* name) {
  if (!v.IsObject()) ThrowInvalid(std::string(name) + " must be a bit-code matrix object", "TypeError");
  auto o = v.As<Napi::Object>();
  BitsView b;
  b.rows = Dim(o, "rows", name);
  const uint64_t bits = Dim(o, "bits", name);
  if (bits == 0 || bits % 32 != 0 || bits > 65536)
    ThrowInvalid(std::string(name) + ".bits must be a positive multiple of 32");
  b.bits = uint32_t(bits);
  const Napi::Value data = o.Get("data");
  const ArrayRef a = ResolveArray(data, napi_uint32_array, std::string(name) + ".data");
  uint64_t words = 0;
  if (__builtin_mul_overflow(b.rows, uint64_t(b.wordsPerRow()), &words) || a.length != words)
    ThrowInvalid(std::string(name) + ".data has " + std::to_string(a.length) + " words but rows * bits / 32 = " +
                 (words || !b.rows ? std::to_string(words) : std::string("more than 2^64")));
  b.words = static_cast<const uint32_t*>(Own(a, 0, a.length, true));
  return b;
}

std::pair<const uint8_t*, uint64_t> Inputs::Bytes(const Napi::Value& v, const std::string& name) {
  napi_typedarray_type t;
  if (auto st = StagedOf(v)) {
    if (st->csr) ThrowInvalid(name + " is a staged matrix, not an array", "TypeError");
    t = st->type;
  } else {
    bool typed = false;
    if (napi_is_typedarray(v.Env(), v, &typed) != napi_ok || !typed)
      ThrowInvalid(name + " must be a typed array", "TypeError");
    napi_get_typedarray_info(v.Env(), v, &t, nullptr, nullptr, nullptr, nullptr);
  }
  const ArrayRef a = ResolveArray(v, t, name);
  return {static_cast<const uint8_t*>(Own(a, 0, a.length, false)), a.bytes()};
}

CancelToken Inputs::Cancel(const Napi::Object& options) {
  CancelToken t;
  Napi::Value pr = options.Get("progress");
  if (!pr.IsUndefined() && !pr.IsNull()) {
    bool tagged = false;
    if (!pr.IsObject() || napi_check_object_type_tag(pr.Env(), pr, &kProgressTag, &tagged) != napi_ok || !tagged)
      ThrowInvalid("progress must be a ProgressCounter", "TypeError");
    auto slots = ProgressCounter::Unwrap(pr.As<Napi::Object>())->slots();
    static_assert(sizeof(ProgressSlots) == 3 * sizeof(uint64_t), "CancelToken reads three counters");
    t.progress = reinterpret_cast<uint64_t*>(slots.get());
    held_.push_back(slots);
  }
  Napi::Value f = options.Get("cancel");
  if (f.IsUndefined() || f.IsNull()) return t;
  bool tagged = false;
  if (!f.IsObject() || napi_check_object_type_tag(f.Env(), f, &kCancelTag, &tagged) != napi_ok || !tagged)
    ThrowInvalid("cancel must be a CancelFlag", "TypeError");
  auto flag = CancelFlag::Unwrap(f.As<Napi::Object>())->flag();
  t.flag = reinterpret_cast<const int32_t*>(flag.get());
  held_.push_back(flag);
  return t;
}

OutputArray::OutputArray(const Napi::Value& v, napi_typedarray_type type, uint64_t count, const std::string& name,
                         Inputs& in, bool handed)
    : type_(type), count_(count), name_(name) {
  const ArrayRef a = ResolveArray(v, type, name);
  if (a.length < count)
    ThrowInvalid(name + " has length " + std::to_string(a.length) + " but the call writes " + std::to_string(count));
  bytes_ = count * a.elementBytes;
  if (bytes_ == 0) return;
  if (!a.shared) {
    if (auto lent = FindLent(a.data, bytes_)) {
      in.Hold(std::move(lent));
      target_ = a.data;
      inPlace_ = true;
      return;
    }
    if (handed) {
      // The reference keeps the array (and so its memory) alive until the call's result is built.
      ref_ = std::make_shared<Napi::Reference<Napi::Value>>(Napi::Persistent(v));
      target_ = a.data;
      inPlace_ = true;
      return;
    }
  }
  target_ = in.Allocate(bytes_, true);
  ref_ = std::make_shared<Napi::Reference<Napi::Value>>(Napi::Persistent(v));
}

namespace {
ArrayRef ResolveOutput(const Napi::Reference<Napi::Value>& ref, napi_typedarray_type type, uint64_t count,
                       const std::string& name) {
  const ArrayRef a = ResolveArray(ref.Value(), type, name + " (written when the call ends)");
  if (a.length < count)
    ThrowInvalid(name + " was shrunk while the call ran (length " + std::to_string(a.length) + ", the call writes " +
                 std::to_string(count) + "); nothing was written");
  return a;
}
}  // namespace

void OutputArray::Check() const {
  if (!inPlace_ && bytes_) ResolveOutput(*ref_, type_, count_, name_);
}

void OutputArray::Deliver(Napi::Env) const {
  if (inPlace_ || bytes_ == 0) return;
  const ArrayRef a = ResolveOutput(*ref_, type_, count_, name_);
  ParallelCopy(a.data, target_, bytes_);
}

}  // namespace cusim
