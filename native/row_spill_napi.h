// The RowSpill object (row_spill_napi.cc) as calls that read rows take it.
#pragma once

#include <napi.h>

#include <memory>

#include "row_file.h"

namespace cusim {

// The file of a RowSpill object (null: not one, or disposed).
std::shared_ptr<const RowFile> RowSpillOf(const Napi::Value& v);

}  // namespace cusim
