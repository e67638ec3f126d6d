#include "core/checkpoint/dtype.h"

namespace quark::checkpoint {
namespace {

constexpr StDTypeTraits kTraits[] = {
    {StDType::kBool, "BOOL", 1},   {StDType::kU8, "U8", 1},       {StDType::kI8, "I8", 1},
    {StDType::kF8E4M3, "F8_E4M3", 1}, {StDType::kF8E5M2, "F8_E5M2", 1}, {StDType::kI16, "I16", 2},
    {StDType::kU16, "U16", 2},     {StDType::kF16, "F16", 2},     {StDType::kBF16, "BF16", 2},
    {StDType::kI32, "I32", 4},     {StDType::kU32, "U32", 4},     {StDType::kF32, "F32", 4},
    {StDType::kI64, "I64", 8},     {StDType::kU64, "U64", 8},     {StDType::kF64, "F64", 8},
    {StDType::kF8E8M0, "F8_E8M0", 1},
};
constexpr int kCount = sizeof(kTraits) / sizeof(kTraits[0]);

}  // namespace

const StDTypeTraits& TraitsOf(StDType dtype) { return kTraits[static_cast<int>(dtype)]; }

std::optional<StDType> ParseStDType(std::string_view name) {
  for (const auto& row : kTraits) {
    if (row.name == name) return row.dtype;
  }
  return std::nullopt;
}

std::string_view StDTypeName(StDType dtype) { return TraitsOf(dtype).name; }

int64_t StDTypeSize(StDType dtype) { return TraitsOf(dtype).bytes; }

const StDTypeTraits* AllStDTypes(int* count) {
  *count = kCount;
  return kTraits;
}

}  // namespace quark::checkpoint
