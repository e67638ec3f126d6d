#include "core/config/quant_types.h"

#include <array>
#include <utility>

namespace quark {
namespace {

template <typename Enum, size_t N>
using NameTable = std::array<std::pair<Enum, std::string_view>, N>;

constexpr NameTable<DType, 14> kDTypeNames{{
    {DType::kInt8, "int8"},         {DType::kUInt8, "uint8"},       {DType::kInt4, "int4"},
    {DType::kUInt4, "uint4"},       {DType::kInt3, "int3"},         {DType::kInt2, "int2"},
    {DType::kFp8E4M3, "fp8_e4m3"},  {DType::kFp8E5M2, "fp8_e5m2"},  {DType::kFp6E3M2, "fp6_e3m2"},
    {DType::kFp6E2M3, "fp6_e2m3"},  {DType::kFp4, "fp4"},           {DType::kMx, "mx"},
    {DType::kBFloat16, "bfloat16"}, {DType::kFloat16, "float16"},
}};
constexpr NameTable<QScheme, 4> kQSchemeNames{{
    {QScheme::kPerTensor, "per_tensor"}, {QScheme::kPerChannel, "per_channel"}, {QScheme::kPerGroup, "per_group"},
    {QScheme::kPerBlock, "per_block"},
}};
// Quark writes observer class names; ours are the short forms, the class names parse too (see below).
constexpr NameTable<ObserverKind, 5> kObserverNames{{
    {ObserverKind::kMinMax, "min_max"}, {ObserverKind::kPercentile, "percentile"},
    {ObserverKind::kMse, "mse"},        {ObserverKind::kMxBlock, "mx_block"},
    {ObserverKind::kImatrixMse, "imatrix_mse"},
}};
constexpr NameTable<ScaleType, 5> kScaleTypeNames{{
    {ScaleType::kFloat, "float"},       {ScaleType::kFloat32, "float32"}, {ScaleType::kFloat16, "float16"},
    {ScaleType::kBFloat16, "bfloat16"}, {ScaleType::kPof2, "pof2"},
}};
constexpr NameTable<RoundMethod, 3> kRoundNames{{
    {RoundMethod::kHalfEven, "half_even"}, {RoundMethod::kRound, "round"}, {RoundMethod::kFloor, "floor"},
}};
constexpr NameTable<ScaleFormat, 3> kScaleFormatNames{
    {{ScaleFormat::kFloat, "float"}, {ScaleFormat::kE8M0, "e8m0"}, {ScaleFormat::kE4M3, "e4m3"}}};
constexpr NameTable<ScaleCalculationMode, 3> kScaleCalcNames{{
    {ScaleCalculationMode::kEven, "even"}, {ScaleCalculationMode::kFloor, "floor"}, {ScaleCalculationMode::kCeil, "ceil"},
}};
constexpr NameTable<ZeroPointType, 2> kZeroPointNames{{
    {ZeroPointType::kInt32, "int32"}, {ZeroPointType::kFloat32, "float32"},
}};
constexpr NameTable<QuantMode, 2> kQuantModeNames{{
    {QuantMode::kEager, "eager_mode"}, {QuantMode::kFxGraph, "fx_graph_mode"},
}};
constexpr NameTable<PackMethod, 2> kPackNames{{{PackMethod::kReorder, "reorder"}, {PackMethod::kOrder, "order"}}};

template <typename Enum, size_t N>
std::string_view Lookup(const NameTable<Enum, N>& table, Enum v) {
  for (const auto& [value, name] : table) {
    if (value == v) return name;
  }
  return "?";
}

template <typename Enum, size_t N>
std::optional<Enum> Parse(const NameTable<Enum, N>& table, std::string_view s) {
  for (const auto& [value, name] : table) {
    if (name == s) return value;
  }
  return std::nullopt;
}

template <typename Enum, size_t N>
std::vector<std::string_view> Names(const NameTable<Enum, N>& table) {
  std::vector<std::string_view> out;
  for (const auto& entry : table) out.push_back(entry.second);
  return out;
}

}  // namespace

std::string_view Name(DType v) { return Lookup(kDTypeNames, v); }
std::string_view Name(QScheme v) { return Lookup(kQSchemeNames, v); }
std::string_view Name(ObserverKind v) { return Lookup(kObserverNames, v); }
std::string_view Name(ScaleType v) { return Lookup(kScaleTypeNames, v); }
std::string_view Name(RoundMethod v) { return Lookup(kRoundNames, v); }
std::string_view Name(ScaleFormat v) { return Lookup(kScaleFormatNames, v); }
std::string_view Name(ScaleCalculationMode v) { return Lookup(kScaleCalcNames, v); }
std::string_view Name(ZeroPointType v) { return Lookup(kZeroPointNames, v); }
std::string_view Name(QuantMode v) { return Lookup(kQuantModeNames, v); }
std::string_view Name(PackMethod v) { return Lookup(kPackNames, v); }

std::optional<DType> ParseDType(std::string_view s) { return Parse(kDTypeNames, s); }
std::optional<QScheme> ParseQScheme(std::string_view s) { return Parse(kQSchemeNames, s); }
std::optional<ObserverKind> ParseObserverKind(std::string_view s) {
  if (auto v = Parse(kObserverNames, s)) return v;
  // Quark's observer class names, as they appear in an exported config.json.
  if (s == "PerTensorMinMaxObserver" || s == "PerChannelMinMaxObserver" || s == "PerGroupMinMaxObserver" ||
      s == "PerTokenMinMaxObserver" || s == "PerBlock2DMinMaxObserver" || s == "PlaceholderObserver") {
    return ObserverKind::kMinMax;
  }
  if (s == "PerTensorPercentileObserver") return ObserverKind::kPercentile;
  if (s == "PerTensorMSEObserver") return ObserverKind::kMse;
  if (s == "PerBlockMXObserver" || s == "PerBlockMXDiffsObserver") return ObserverKind::kMxBlock;
  return std::nullopt;
}
std::optional<ScaleType> ParseScaleType(std::string_view s) { return Parse(kScaleTypeNames, s); }
std::optional<RoundMethod> ParseRoundMethod(std::string_view s) {
  if (auto v = Parse(kRoundNames, s)) return v;
  if (s == "half_to_even") return RoundMethod::kHalfEven;  // older Quark spelling
  return std::nullopt;
}
std::optional<ScaleFormat> ParseScaleFormat(std::string_view s) { return Parse(kScaleFormatNames, s); }
std::optional<ScaleCalculationMode> ParseScaleCalculationMode(std::string_view s) {
  return Parse(kScaleCalcNames, s);
}
std::optional<ZeroPointType> ParseZeroPointType(std::string_view s) { return Parse(kZeroPointNames, s); }
std::optional<QuantMode> ParseQuantMode(std::string_view s) { return Parse(kQuantModeNames, s); }
std::optional<PackMethod> ParsePackMethod(std::string_view s) { return Parse(kPackNames, s); }

template <> std::vector<std::string_view> AllNames<DType>() { return Names(kDTypeNames); }
template <> std::vector<std::string_view> AllNames<QScheme>() { return Names(kQSchemeNames); }
template <> std::vector<std::string_view> AllNames<ObserverKind>() { return Names(kObserverNames); }
template <> std::vector<std::string_view> AllNames<ScaleType>() { return Names(kScaleTypeNames); }
template <> std::vector<std::string_view> AllNames<RoundMethod>() { return Names(kRoundNames); }
template <> std::vector<std::string_view> AllNames<ScaleFormat>() { return Names(kScaleFormatNames); }
template <> std::vector<std::string_view> AllNames<ScaleCalculationMode>() { return Names(kScaleCalcNames); }
template <> std::vector<std::string_view> AllNames<ZeroPointType>() { return Names(kZeroPointNames); }
template <> std::vector<std::string_view> AllNames<QuantMode>() { return Names(kQuantModeNames); }
template <> std::vector<std::string_view> AllNames<PackMethod>() { return Names(kPackNames); }

bool IsIntegerType(DType v) {
  switch (v) {
    case DType::kInt8: case DType::kUInt8: case DType::kInt4: case DType::kUInt4: case DType::kInt3: case DType::kInt2:
      return true;
    default:
      return false;
  }
}

bool IsFloatFormat(DType v) {
  switch (v) {
    case DType::kFp8E4M3: case DType::kFp8E5M2: case DType::kFp6E3M2: case DType::kFp6E2M3: case DType::kFp4:
      return true;
    default:
      return false;
  }
}

bool IsCastType(DType v) { return v == DType::kBFloat16 || v == DType::kFloat16; }

int IntegerBits(DType v) {
  switch (v) {
    case DType::kInt8: case DType::kUInt8: return 8;
    case DType::kInt4: case DType::kUInt4: return 4;
    case DType::kInt3: return 3;
    case DType::kInt2: return 2;
    default: return 0;
  }
}

bool IsUnsigned(DType v) { return v == DType::kUInt8 || v == DType::kUInt4; }

std::pair<int, int> IntegerRange(DType v) {
  const int bits = IntegerBits(v);
  if (bits == 0) return {0, 0};
  if (IsUnsigned(v)) return {0, (1 << bits) - 1};
  return {-(1 << (bits - 1)), (1 << (bits - 1)) - 1};
}

}  // namespace quark
