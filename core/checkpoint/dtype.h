// Element types of the safetensors format and their sizes (one traits row per type).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace quark::checkpoint {

/// Every dtype string the safetensors format defines.
enum class StDType {
  kBool,
  kU8,
  kI8,
  kF8E4M3,
  kF8E5M2,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kI64,
  kU64,
  kF64,
  /// float8_e8m0fnu (OCP MX's E8M0 exponent byte; safetensors >= 0.6): vLLM's dtype of 128x128 FP8 block scales
  /// under kFp8Static128BlockE8M0Sym (#30). Last, so the values above keep their numbers.
  kF8E8M0,
};

struct StDTypeTraits {
  StDType dtype;
  std::string_view name;  // as written in the header: "BF16", "F8_E4M3", ...
  int64_t bytes;          // bytes per element
};

/// The traits of `dtype` (a row of the table below).
const StDTypeTraits& TraitsOf(StDType dtype);

/// Parses a header dtype string; nullopt when it is not one of the table's names.
std::optional<StDType> ParseStDType(std::string_view name);

/// "BF16", "F32", ...
std::string_view StDTypeName(StDType dtype);

/// Bytes per element.
int64_t StDTypeSize(StDType dtype);

/// The full table, in the order of the enum (for tests that loop over every dtype).
const StDTypeTraits* AllStDTypes(int* count);

}  // namespace quark::checkpoint
