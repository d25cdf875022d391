// N-API glue of the persistence container for state held in JavaScript (the
// in-memory MinHashLSH): save typed arrays as sections, or open a file, look
// at its section sizes, and read the sections the caller's checks accept.
#include <cstdio>

#include "owned.h"
#include "persist_napi.h"

namespace cusim {

std::string PathArg(const Napi::Value& v) {
  if (!v.IsString()) ThrowInvalid("path must be a string", "TypeError");
  std::string p = v.As<Napi::String>().Utf8Value();
  persist::CheckPath(p);
  return p;
}

Napi::Value SaveTask(const Napi::CallbackInfo& info, const char* kind, uint32_t version, std::shared_ptr<std::mutex> mu,
                     std::function<void(persist::Writer&)> write) {
  const std::string path = PathArg(info[0]);
  const std::string k = kind;
  return RunAsync(
      info.Env(),
      [=] {
        persist::Writer w(path, k.c_str(), version);
        {
          std::lock_guard<std::mutex> lock(*mu);
          write(w);
        }
        w.Commit();
      },
      [](Napi::Env env) -> Napi::Value { return env.Undefined(); }, {info.This()});
}

Napi::Value LoadTask(const Napi::CallbackInfo& info, const char* kind, uint32_t version, std::shared_ptr<std::mutex> mu,
                     std::function<std::function<void()>(persist::Reader&)> read, Task::Done done) {
  const std::string path = PathArg(info[0]);
  const std::string k = kind;
  return RunAsync(info.Env(),
                  [=] {
                    persist::Reader r(path, k.c_str(), version);
                    std::function<void()> install = read(r);
                    std::lock_guard<std::mutex> lock(*mu);
                    install();
                  },
                  std::move(done), {info.This()});
}

namespace {

std::string KindArg(const Napi::Value& v) {
  if (!v.IsString()) ThrowInvalid("kind must be a string", "TypeError");
  std::string k = v.As<Napi::String>().Utf8Value();
  if (k.empty() || k.size() >= 16) ThrowInvalid("kind must have 1 to 15 characters");
  return k;
}

uint32_t TagArg(const Napi::Value& v) {
  if (!v.IsString()) ThrowInvalid("section tag must be a 4-character string", "TypeError");
  const std::string s = v.As<Napi::String>().Utf8Value();
  if (s.size() != 4) ThrowInvalid("section tag must be a 4-character string");
  return uint32_t(uint8_t(s[0])) | uint32_t(uint8_t(s[1])) << 8 | uint32_t(uint8_t(s[2])) << 16 |
         uint32_t(uint8_t(s[3])) << 24;
}

uint32_t VersionArg(const Napi::Value& v) {
  if (!v.IsNumber()) ThrowInvalid("version must be a number", "TypeError");
  const double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 1 && d <= 65535) || d != double(uint32_t(d))) ThrowInvalid("version must be an integer in [1, 65535]");
  return uint32_t(d);
}

// persistSave(path, kind, version, [[tag, typedArray], ...]) -> Promise<void>
Napi::Value Save(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    const std::string path = PathArg(info[0]);
    const std::string kind = KindArg(info[1]);
    const uint32_t version = VersionArg(info[2]);
    if (!info[3].IsArray()) ThrowInvalid("sections must be an array", "TypeError");
    auto arr = info[3].As<Napi::Array>();
    if (arr.Length() == 0 || arr.Length() > persist::kMaxSections) ThrowInvalid("sections must hold 1 to 16 entries");
    struct Part {
      uint32_t tag;
      const uint8_t* data;
      uint64_t bytes;
    };
    std::vector<Part> parts;
    std::vector<std::pair<uint32_t, Napi::Value>> given;
    for (uint32_t i = 0; i < arr.Length(); ++i) {
      Napi::Value e = arr.Get(i);
      if (!e.IsArray() || e.As<Napi::Array>().Length() != 2)
        ThrowInvalid("sections[i] must be [tag, typedArray]", "TypeError");
      auto pair = e.As<Napi::Array>();
      given.emplace_back(TagArg(pair.Get(0u)), pair.Get(1u));
    }
    // Copied (or, for staged arrays, held) now: the caller may reuse or
    // transfer its arrays while the file is written.
    auto in = std::make_shared<Inputs>(Inputs::Use::Async);
    for (size_t i = 0; i < given.size(); ++i) {
      const auto b = in->Bytes(given[i].second, "sections[" + std::to_string(i) + "][1]");
      parts.push_back({given[i].first, b.first, b.second});
    }
    return RunAsync(
        info.Env(),
        [=] {
          persist::Writer w(path, kind.c_str(), version);
          for (const Part& p : parts) w.Section(p.tag, p.data, p.bytes);
          w.Commit();
        },
        [](Napi::Env env) -> Napi::Value { return env.Undefined(); }, {}, in);
  });
}

// persistOpen(path, kind, maxVersion) -> Promise<{ version, sections: { TAG: bytes }, read(tag, bytes), close() }>
Napi::Value Open(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    const std::string path = PathArg(info[0]);
    const std::string kind = KindArg(info[1]);
    const uint32_t maxVersion = VersionArg(info[2]);
    auto reader = std::make_shared<std::shared_ptr<persist::Reader>>();
    return RunAsync(
        info.Env(), [=] { *reader = std::make_shared<persist::Reader>(path, kind.c_str(), maxVersion); },
        [=](Napi::Env env) -> Napi::Value {
          std::shared_ptr<persist::Reader> r = *reader;
          auto out = Napi::Object::New(env);
          out.Set("version", double(r->version()));
          auto sizes = Napi::Object::New(env);
          for (uint32_t tag : r->Tags()) sizes.Set(persist::TagName(tag), double(r->Bytes(tag)));
          out.Set("sections", sizes);
          out.Set("read", Napi::Function::New(env, [r](const Napi::CallbackInfo& ci) -> Napi::Value {
                    return Guard(ci, [&]() -> Napi::Value {
                      const uint32_t tag = TagArg(ci[0]);
                      if (!ci[1].IsNumber()) ThrowInvalid("bytes must be a number", "TypeError");
                      const double b = ci[1].As<Napi::Number>().DoubleValue();
                      if (!(b >= 0 && b <= 9007199254740991.0) || b != double(uint64_t(b)))
                        ThrowInvalid("bytes must be a non-negative integer");
                      const uint64_t bytes = uint64_t(b);
                      // Sizes are compared before anything is allocated.
                      if (r->Bytes(tag) != bytes) r->Read(tag, nullptr, bytes);
                      auto data = std::make_shared<std::vector<uint8_t>>();
                      return RunAsync(
                          ci.Env(),
                          [=] {
                            data->resize(bytes);
                            r->Read(tag, data->data(), bytes);
                          },
                          [=](Napi::Env e) -> Napi::Value { return ToTyped(e, std::move(*data)); }, {});
                    });
                  }));
          out.Set("close", Napi::Function::New(env, [r](const Napi::CallbackInfo& ci) -> Napi::Value {
                    r->Close();
                    return ci.Env().Undefined();
                  }));
          return out;
        },
        {});
  });
}

// persistXxh64(bytes, seed) -> hex string: the checksum the container uses.
Napi::Value Xxh64(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Inputs in(Inputs::Use::Sync);
    auto a = in.Array<uint8_t>(info[0], "bytes");
    const double seed = Args(info).Num(1, "seed");
    if (!(seed >= 0 && seed <= 9007199254740991.0)) ThrowInvalid("seed must be a non-negative safe integer");
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)persist::Xxh64(a.data, a.length, uint64_t(seed)));
    return Napi::String::New(info.Env(), hex);
  });
}

void Init(Napi::Env env, Napi::Object exports) {
  exports.Set("persistSave", Napi::Function::New(env, Save, "persistSave"));
  exports.Set("persistOpen", Napi::Function::New(env, Open, "persistOpen"));
  exports.Set("persistXxh64", Napi::Function::New(env, Xxh64, "persistXxh64"));
}

}  // namespace

CUSIM_REGISTER(persist, Init);

}  // namespace cusim
