// The save/load Promise of engines whose state is native (Hamming,
// clustering): the file is created, opened and renamed outside the engine's
// lock, so an odd path or a slow disk never holds it; only writing the
// sections (save) or installing the state read (load) takes it.
#pragma once

#include <functional>
#include <mutex>

#include "napi_util.h"
#include "persist.h"

namespace cusim {

// info[0] as a save/load path (a string, non-empty, no NUL).
std::string PathArg(const Napi::Value& v);

// save(path): `write` runs under `mu` with the temporary file open.
Napi::Value SaveTask(const Napi::CallbackInfo& info, const char* kind, uint32_t version, std::shared_ptr<std::mutex> mu,
                     std::function<void(persist::Writer&)> write);

// load(path): `read` runs without the lock and returns a function that
// installs the state, run under `mu`; `done` builds the result.
Napi::Value LoadTask(const Napi::CallbackInfo& info, const char* kind, uint32_t version, std::shared_ptr<std::mutex> mu,
                     std::function<std::function<void()>(persist::Reader&)> read, Task::Done done);

}  // namespace cusim
