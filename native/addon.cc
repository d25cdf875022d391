// The module entry: every engine registered itself with CUSIM_REGISTER.
#include "napi_util.h"

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  cusim::EnvStarted(env);
  for (auto& [name, fn] : cusim::Registry()) fn(env, exports);
  return exports;
}

NODE_API_MODULE(cusim, Init)
