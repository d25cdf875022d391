// What the two MinHash wraps (weighted: minhash_napi.cc, classic:
// classic_minhash_napi.cc) share at the N-API boundary: hash()'s arguments
// (staged, owned.h), its output buffer, the backend's Hasher run off the
// event loop and its Promise of { signatures, kernelMs, transferMs, host }.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "minhash.h"
#include "napi_util.h"
#include "owned.h"

namespace cusim {

// Output of one hash call, handed to JavaScript without a copy, in
// uninitialized host memory (host_buffer.h): a 1M-row result is 1 GB that the
// kernels or the CPU overwrite entirely. Or the caller's `out` (owned.h),
// written when the call ends.
struct Signatures {
  uint32_t* data = nullptr;
  uint64_t size = 0;
  std::unique_ptr<OutputArray> out;
  ~Signatures();
  uint32_t* target() const { return out ? static_cast<uint32_t*>(out->target()) : data; }
  void allocate(uint64_t n);
  Napi::Value ToJs(Napi::Env env);
};

// The engine's options.tuning: { kernel: 'auto' | 'prune', overlap }.
minhash::Tuning ParseTuning(const Napi::Object& options);

// `samples` of either MinHash as a checked count: it sizes the parameter tables
// and every signature the wraps allocate (lib/ checks the same range first).
uint32_t SamplesArg(double samples);

// One checked hash(matrix, { rowStart, rowEnd, cancel, out }) call. `m` holds
// the owned rows [rowStart, rowEnd) of the caller's matrix as rows 0..
struct HashCall {
  CsrView m;
  uint32_t wordsPerRow = 0;
  CancelToken cancel;
  double copyInMs = 0;
  std::shared_ptr<Inputs> in;
  std::shared_ptr<Signatures> out = std::make_shared<Signatures>();
  std::shared_ptr<minhash::Timing> timing = std::make_shared<minhash::Timing>();
};

// Reads and checks the arguments (every property before any array is staged,
// since getters may run); `values` says whether matrix.values is read, `gpu`
// whether the copy goes to page-locked staging, and `check` sees the matrix's
// shape before anything is copied.
HashCall ParseHashCall(const Napi::CallbackInfo& info, uint32_t wordsPerRow, bool values, bool gpu,
                       const std::function<void(const CsrSource&)>& check);

// Runs the hasher over the call's rows off the event loop after allocating
// the output, timing the whole native call; `done` runs on the JavaScript
// thread before the result is built (memory accounting). `self` and `matrix`
// (the caller's matrix object, read in place when handed over) are kept alive
// until the call ends.
Napi::Value RunHashCall(Napi::Env env, const HashCall& call, std::shared_ptr<minhash::Hasher> hasher,
                        std::function<void()> done, Napi::Value self, Napi::Value matrix);

}  // namespace cusim
