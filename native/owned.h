// Inputs a call owns for as long as it runs. An async call reads its inputs
// after control has gone back to JavaScript, which may then detach them
// (postMessage with a transfer list, structuredClone's transfer,
// ArrayBuffer.prototype.transfer), let a worker that holds them die, or write
// the next batch into them. So every input of an async call is copied into
// memory the call owns before its Promise is returned (in parallel over the
// CPU pool when large; for a call that DMAs the copy to a GPU, into
// page-locked staging that the engine then reads in place, so the copy is the
// only host copy). Inputs of synchronous calls are read in place, except
// SharedArrayBuffer-backed ones, which other threads may rewrite at any time.
//
// One copy runs after control has gone back: stageCsrAsync's, for a caller
// that guarantees no JavaScript reaches the arrays until its Promise settles
// (hashStream, which neither pulls its source nor yields meanwhile). The
// arrays are referenced for the copy, and one found detached when it ends
// rejects the Promise; a buffer freed during the copy (posted to a worker
// that is then terminated) is outside that guarantee.
//
// The zero-copy paths are memory the caller handed over explicitly:
// buffers a MinHash call was given with { transfer: true } (lib/ detaches the
// caller's ArrayBuffers, so only the call can reach them: Use::Handed), and
// pinnedArray buffers on the CUDA backend. Those blocks are refcounted (the
// ArrayBuffer's finalizer and each call using the block hold a reference), so
// a pinned buffer transferred, detached or collected during a call is freed
// only after the last call using it has finished; what the caller writes into
// it during a call is the caller's business (never a crash: the engines check
// what they read from it).
#pragma once

#include <napi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common.h"
#include "napi_util.h"

namespace cusim {

// ---- memory lent to JavaScript (pinnedArray) ----------------------------------
// { buffer: ArrayBuffer, pinned: boolean }: `bytes` of zeroed page-locked memory
// where a GPU is present (registered, refcounted), else an ordinary ArrayBuffer.
Napi::Object NewLentBuffer(Napi::Env env, uint64_t bytes);
// Keeps alive and returns the lent block holding [p, p + bytes); null if p is
// not in one.
std::shared_ptr<void> FindLent(const void* p, uint64_t bytes);

// ---- typed arrays as a call finds them ----------------------------------------
struct ArrayRef {
  void* data = nullptr;
  size_t length = 0;  // elements
  size_t elementBytes = 0;
  bool shared = false;  // backed by a SharedArrayBuffer
  // Set for a Staged array (see stageArray below): owned already; held, not copied.
  std::shared_ptr<void> owner;
  uint64_t bytes() const { return uint64_t(length) * elementBytes; }
};
// Resolves v as a typed array of `type` (Int32Array also where `alsoInt32`):
// a coded TypeError naming `name` otherwise, or when its buffer is detached.
// Runs no JavaScript. The pointer is valid until JavaScript runs again.
ArrayRef ResolveArray(const Napi::Value& v, napi_typedarray_type type, const std::string& name, bool alsoInt32 = false);

// A CSR matrix's parts as read from its object: numbers checked, arrays not
// yet resolved (getters may run while the properties are read). Or a Staged
// matrix (stageCsr), already owned.
struct StagedData;
struct CsrSource {
  std::string name;
  uint64_t rows = 0, cols = 0;
  Napi::Value indptr, indices, values;  // values: undefined when absent or unwanted
  std::shared_ptr<const StagedData> staged;
  bool wantValues = true;
};

// ---- inputs staged ahead of a call --------------------------------------------------
// native.stageCsr(matrix, wantValues) and native.stageArray([arrays...]) copy
// now, into an opaque object, for a call that starts later (a queued
// StreamClusterer.add) or for data an object keeps across calls (a
// MinHashLSH's signatures): nothing in JavaScript can write or detach it, so
// calls given one read it in place, wherever a CSR matrix or an array of the
// same type is expected.
CsrSource ReadCsr(const Napi::Value& v, const char* name, bool wantValues = true);
// A Staged array of `length` elements of `type` at `data`, memory that `owner`
// holds: a result that later calls read in place (lshBandKeys' band keys),
// with no typed array, copy or finalizer on the JavaScript thread.
Napi::Value NewStagedArray(Napi::Env env, std::shared_ptr<Inputs> owner, const void* data, uint64_t length,
                           napi_typedarray_type type);

// A CSR source's rows [rowStart, rowEnd) with its arrays resolved, their
// lengths checked; their contents not yet read.
struct CsrArrays {
  std::string name;
  uint64_t cols = 0, rowStart = 0, rowEnd = 0;
  ArrayRef indptr, indices, values;
  bool hasValues = false;
};

// ---- staging kept by a stream ----------------------------------------------------
// The bulk blocks (indices, values) of a stream's staged chunks (hashStream):
// a chunk's blocks come back to the set when the last call reading them ends,
// and the next chunk takes them again, so a stream page-locks (on the GPU
// path) or faults in its staging once, for its first chunks, never per chunk,
// whatever the process-wide pools keep idle (their caps are below two 1M-row
// chunks' blocks on many hosts). Closed (disposed or collected), it hands its
// blocks back to those pools; blocks still in use go there when their call ends.
class StagingSet;

// What one staging copy cost: for the bench's copy rate per chunk.
struct StageStats {
  uint64_t bulkBytes = 0;   // bytes copied into owned blocks of >= 1 MB
  uint64_t freshBytes = 0;  // of those, in blocks made for this copy (page-locked or faulted in now)
  double allocMs = 0;       // making those blocks (cudaHostAlloc on the GPU path)
  bool pinned = true;       // every bulk block page-locked (false when any fell back to pageable memory)
};

// ---- a call's inputs ------------------------------------------------------------
class Inputs {
 public:
  enum class Use {
    Sync,   // read only during this native call: in place unless SharedArrayBuffer-backed
    Async,  // read after the call returns: always copied (pinnedArray memory aside, see Lend)
    // Read after the call returns, in place: lib/ handed the arrays over (it
    // transferred their buffers, so no JavaScript can write or detach them) and
    // the call keeps them alive. SharedArrayBuffer-backed arrays are still copied.
    Handed,
  };
  explicit Inputs(Use use) : use_(use) {}
  Inputs(const Inputs&) = delete;
  Inputs& operator=(const Inputs&) = delete;

  // The call DMAs its bulk inputs to a GPU: copies of them go to page-locked
  // staging, and pinnedArray memory is read in place.
  void ForGpu(bool gpu) { gpu_ = gpu; }
  // Bulk copies take their blocks from `set` (a stream's) instead of the pools.
  void UseStaging(std::shared_ptr<StagingSet> set) { staging_ = std::move(set); }
  const StageStats& stats() const { return stats_; }

  // Each of these resolves and copies at once, with no JavaScript in between.
  template <typename T>
  ArrayArg<T> Array(const Napi::Value& v, const std::string& name, bool bulk = false);
  template <typename T>
  ArrayArg<T> Prop(const Napi::Object& o, const char* key) {
    return Array<T>(o.Get(key), key);
  }
  // Rows [rowStart, rowEnd) of src. indptr is checked here (non-decreasing,
  // within indices and values); column indices are left to ValidateCsr.
  CsrView Csr(const CsrSource& src, uint64_t rowStart, uint64_t rowEnd);
  // The same in two steps, for a copy made off the JavaScript thread
  // (stageCsrAsync): ResolveCsr reads the arrays (JavaScript thread), Csr
  // copies and checks their rows (any thread, while the caller leaves them be).
  static CsrArrays ResolveCsr(const CsrSource& src, uint64_t rowStart, uint64_t rowEnd);
  CsrView Csr(const CsrArrays& a);
  CsrView Csr(const Napi::Value& v, const char* name, bool wantValues = true);
  DenseView Dense(const Napi::Value& v, const char* name);
  DenseBytesView DenseBytes(const Napi::Value& v, const char* name);
  BitsView Bits(const Napi::Value& v, const char* name);
  // Any typed array (or staged array) as owned bytes.
  std::pair<const uint8_t*, uint64_t> Bytes(const Napi::Value& v, const std::string& name);
  // options.cancel: a CancelFlag (lib/cancel.ts), held for the call.
  CancelToken Cancel(const Napi::Object& options);

  // Keeps p alive for the call.
  void Hold(std::shared_ptr<void> p) { held_.push_back(std::move(p)); }
  // Owned memory of `bytes` (page-locked when bulk on the GPU path).
  void* Allocate(uint64_t bytes, bool bulk);

 private:
  const void* Own(const ArrayRef& a, uint64_t offset, uint64_t count, bool bulk);
  Use use_;
  bool gpu_ = false;
  std::shared_ptr<StagingSet> staging_;
  StageStats stats_;
  std::vector<std::shared_ptr<void>> held_;
};

template <typename T>
ArrayArg<T> Inputs::Array(const Napi::Value& v, const std::string& name, bool bulk) {
  const ArrayRef a = ResolveArray(v, TypedArrayTraits<T>::type, name);
  ArrayArg<T> out;
  out.length = a.length;
  out.data = static_cast<T*>(const_cast<void*>(Own(a, 0, a.length, bulk)));
  return out;
}

// ---- a caller's array that a call writes into -------------------------------------
// pinnedArray memory is written in place (held alive). Any other array gets
// its results in owned memory, copied in on the JavaScript thread when the
// work is done, provided the array is still attached and long enough then
// (else Deliver throws a coded error and nothing is written). A `handed`
// array is written in place too (held alive): lib/ gave it over, a buffer of
// its own that nothing reads, writes or detaches until the call settles (the
// dedup pipeline's reused signature buffer, whose copy-in was ~1 GB of
// memmove on the JavaScript thread per 3M rows).
class OutputArray {
 public:
  OutputArray(const Napi::Value& v, napi_typedarray_type type, uint64_t count, const std::string& name, Inputs& in,
              bool handed = false);
  void* target() const { return target_; }
  bool inPlace() const { return inPlace_; }
  // Throws the coded error Deliver would, writing nothing.
  void Check() const;
  void Deliver(Napi::Env env) const;

 private:
  std::shared_ptr<Napi::Reference<Napi::Value>> ref_;
  napi_typedarray_type type_;
  uint64_t count_, bytes_;
  std::string name_;
  void* target_ = nullptr;
  bool inPlace_ = false;
};

}  // namespace cusim
