// The ATen dtype a safetensors dtype is held in while an export is packed (float8 as its uint8 bytes).
#pragma once

#include <ATen/ATen.h>

#include "core/checkpoint/dtype.h"

namespace quark::exporter {

/// F32/F16/BF16, I8/I32/I64 as themselves; U8 and the F8 bit patterns as uint8.
at::ScalarType AtenStorageOf(checkpoint::StDType dtype);

}  // namespace quark::exporter
