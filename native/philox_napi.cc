// Exposes the host Philox stream so tests can hold it to cuRAND's known answers.
#include "napi_util.h"
#include "philox.h"

#include <cstring>

namespace cusim {
namespace {

uint64_t U64(const Napi::Value& v, const char* name) {
  if (!v.IsBigInt()) ThrowInvalid(std::string(name) + " must be a bigint", "TypeError");
  bool lossless = false;
  uint64_t x = v.As<Napi::BigInt>().Uint64Value(&lossless);
  if (!lossless) ThrowInvalid(std::string(name) + " must fit in 64 bits");
  return x;
}

// philoxStream(seed, subsequence, offset, count, uniform) -> Uint32Array
// (curand() words, or curand_uniform() float bits when uniform is true).
Napi::Value PhiloxStream(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Args args(info);
    Philox p(U64(info[0], "seed"), U64(info[1], "subsequence"), U64(info[2], "offset"));
    double count = args.Num(3, "count");
    if (!(count >= 0 && count <= (1 << 24))) ThrowInvalid("count must be in [0, 2^24]");
    bool uniform = info.Length() > 4 && info[4].ToBoolean().Value();
    std::vector<uint32_t> out(static_cast<size_t>(count));
    for (auto& o : out) {
      if (uniform) {
        float f = p.Uniform();
        std::memcpy(&o, &f, 4);
      } else {
        o = p.Next();
      }
    }
    return ToTyped(info.Env(), std::move(out));
  });
}

void Init(Napi::Env env, Napi::Object exports) {
  exports.Set("philoxStream", Napi::Function::New(env, PhiloxStream, "philoxStream"));
}

}  // namespace

CUSIM_REGISTER(philox, Init);

}  // namespace cusim
