// What the two MinHash wraps (weighted: minhash.cc, classic: classic_minhash.cc)
// share at the N-API boundary: hash()'s arguments, its output buffer and its
// Promise of { signatures, kernelMs, transferMs, host }.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "minhash.h"
#include "napi_util.h"

namespace cusim {

// Output of one hash call, handed to JavaScript without a copy, in
// uninitialized host memory (host_buffer.h): a 1M-row result is 1 GB that the
// kernels or the CPU overwrite entirely.
struct Signatures {
  uint32_t* data = nullptr;
  uint64_t size = 0;
  uint32_t* external = nullptr;  // the caller's `out` array, written in place
  ~Signatures();
  uint32_t* target() const { return external ? external : data; }
  void allocate(uint64_t n);
  Napi::Value ToJs(Napi::Env env);
};

// One checked hash(matrix, { rowStart, rowEnd, cancel, out }) call.
struct HashCall {
  CsrView m;
  uint64_t rowStart = 0, rowEnd = 0;
  uint32_t wordsPerRow = 0;
  CancelToken cancel;
  std::shared_ptr<Signatures> out = std::make_shared<Signatures>();
  std::shared_ptr<minhash::Timing> timing = std::make_shared<minhash::Timing>();
  std::vector<Napi::Value> keep;  // inputs the work reads, referenced until it ends
  // Only the rows the call reads; indices stay at their absolute positions.
  CsrView Part() const {
    CsrView p = m;
    p.rows = rowEnd - rowStart;
    p.indptr = m.indptr + rowStart;
    return p;
  }
};

// Reads and checks the arguments; `values` says whether matrix.values is read.
HashCall ParseHashCall(const Napi::CallbackInfo& info, uint32_t wordsPerRow, bool values);

// Runs work(call) off the event loop after allocating the output, timing the
// whole native call.
Napi::Value RunHashCall(Napi::Env env, const HashCall& call, std::function<void(const HashCall&)> work);

}  // namespace cusim
