// N-API glue for RowFile (row_file.h): new RowSpill(dir, values) makes the
// file; spillAsync(staged) appends a staged CSR block's rows on a worker (the
// caller may dispose the block once it settles); lshGroupsFromKeys takes the
// object in its list of row blocks, after the blocks kept in memory.
#include "row_spill_napi.h"

#include "napi_util.h"
#include "owned.h"

namespace cusim {
namespace {

const napi_type_tag kRowSpillTag = {0x6375736973706c69ull, 0x6c726f7766696c31ull};

class RowSpillWrap : public Napi::ObjectWrap<RowSpillWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(
        env, "RowSpill",
        {InstanceMethod("spillAsync", &RowSpillWrap::SpillAsync),
         InstanceAccessor("rows", &RowSpillWrap::Rows, nullptr),
         InstanceAccessor("bytes", &RowSpillWrap::Bytes, nullptr), InstanceMethod("dispose", &RowSpillWrap::Dispose)});
  }

  explicit RowSpillWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<RowSpillWrap>(info) {
    try {
      Args args(info);
      if (info.Length() < 1 || !info[0].IsString()) ThrowInvalid("dir must be a string", "TypeError");
      const bool values = info.Length() > 1 && info[1].ToBoolean().Value();
      file_ = std::make_shared<RowFile>(info[0].As<Napi::String>().Utf8Value(), values);
      napi_type_tag_object(info.Env(), info.This(), &kRowSpillTag);
    } catch (const Error& e) {
      throw MakeJsError(info.Env(), e);
    }
  }
  std::shared_ptr<const RowFile> file() const { return file_; }

 private:
  std::shared_ptr<RowFile> Get() const {
    if (!file_) throw Error("CUSIM_DISPOSED", "RowSpill has been disposed");
    return file_;
  }
  // spillAsync(staged) -> Promise<void>: the block's rows appended, on a worker.
  Napi::Value SpillAsync(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      auto file = Get();
      const CsrSource src = ReadCsr(info[0], "staged", file->values());
      if (!src.staged) ThrowInvalid("staged must be a Staged CSR block (stageCsr)", "TypeError");
      auto in = std::make_shared<Inputs>(Inputs::Use::Async);
      const CsrView m = in->Csr(src, 0, src.rows);
      return RunAsync(info.Env(), [=] { file->Append(m); }, [](Napi::Env env) { return env.Undefined(); }, {}, in);
    });
  }
  Napi::Value Rows(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), file_ ? double(file_->rows()) : 0);
  }
  Napi::Value Bytes(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), file_ ? double(file_->bytes()) : 0);
  }
  // Closes the file once no running call holds it.
  Napi::Value Dispose(const Napi::CallbackInfo& info) {
    file_.reset();
    return info.Env().Undefined();
  }
  std::shared_ptr<RowFile> file_;
};

void Init(Napi::Env env, Napi::Object exports) { exports.Set("RowSpill", RowSpillWrap::Define(env)); }

}  // namespace

std::shared_ptr<const RowFile> RowSpillOf(const Napi::Value& v) {
  bool tagged = false;
  if (!v.IsObject() || napi_check_object_type_tag(v.Env(), v, &kRowSpillTag, &tagged) != napi_ok || !tagged)
    return nullptr;
  return RowSpillWrap::Unwrap(v.As<Napi::Object>())->file();
}

CUSIM_REGISTER(rowspill, Init);

}  // namespace cusim
