// Enumerations of the quantization Config, with their Quark spellings.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace quark {

/// Element data type of a quantized tensor (Quark's Dtype).
enum class DType {
  kInt8,
  kUInt8,
  kInt4,
  kUInt4,
  kInt3,
  kInt2,
  kFp8E4M3,
  kFp8E5M2,
  kFp6E3M2,
  kFp6E2M3,
  kFp4,
  kMx,  // legacy OCP MX spelling: the element type is in mx_element_dtype
  kBFloat16,
  kFloat16,
};

/// kPerBlock: 2-D tiles of a weight (block_size [rows, cols], e.g. FP8 128x128 blocks).
enum class QScheme { kPerTensor, kPerChannel, kPerGroup, kPerBlock };
/// kImatrixMse (#35): llm-compressor's `imatrix_mse` weight observer, a per-channel / per-group range search weighted
/// by the layer's importance matrix from calibration (core/numerics/imatrix_mse_observer.h); weights only.
enum class ObserverKind { kMinMax, kPercentile, kMse, kMxBlock, kImatrixMse };
enum class ScaleType { kFloat, kFloat32, kFloat16, kBFloat16, kPof2 };
enum class RoundMethod { kHalfEven, kRound, kFloor };
/// kE4M3: NVFP4's two-level scale (fp4 groups of 16, float8_e4m3fn block scales under one float32 global scale
/// per tensor: Quark's `nvfp4` scheme and its one-spec `scale_format: "e4m3"` spelling).
enum class ScaleFormat { kFloat, kE8M0, kE4M3 };
enum class ScaleCalculationMode { kEven, kFloor, kCeil };
enum class ZeroPointType { kInt32, kFloat32 };
enum class QuantMode { kEager, kFxGraph };
enum class PackMethod { kReorder, kOrder };

// Quark's spelling of each value ("int8", "per_group", "half_even", ...).
std::string_view Name(DType v);
std::string_view Name(QScheme v);
std::string_view Name(ObserverKind v);
std::string_view Name(ScaleType v);
std::string_view Name(RoundMethod v);
std::string_view Name(ScaleFormat v);
std::string_view Name(ScaleCalculationMode v);
std::string_view Name(ZeroPointType v);
std::string_view Name(QuantMode v);
std::string_view Name(PackMethod v);

// Parsers of Quark's spelling; std::nullopt for an unknown name.
std::optional<DType> ParseDType(std::string_view s);
std::optional<QScheme> ParseQScheme(std::string_view s);
std::optional<ObserverKind> ParseObserverKind(std::string_view s);
std::optional<ScaleType> ParseScaleType(std::string_view s);
std::optional<RoundMethod> ParseRoundMethod(std::string_view s);
std::optional<ScaleFormat> ParseScaleFormat(std::string_view s);
std::optional<ScaleCalculationMode> ParseScaleCalculationMode(std::string_view s);
std::optional<ZeroPointType> ParseZeroPointType(std::string_view s);
std::optional<QuantMode> ParseQuantMode(std::string_view s);
std::optional<PackMethod> ParsePackMethod(std::string_view s);

/// Every accepted spelling of an enum, for error messages ("one of: int8, uint8, ...").
template <typename Enum>
std::vector<std::string_view> AllNames();

// Facts about a dtype that validation and the numerics share.
bool IsIntegerType(DType v);                 // int8 .. int2, uint8, uint4
bool IsFloatFormat(DType v);                 // fp8 / fp6 / fp4
bool IsCastType(DType v);                    // bfloat16, float16
int IntegerBits(DType v);                    // 8, 4, 3, 2; 0 for non-integers
bool IsUnsigned(DType v);                    // uint8, uint4
/// Range [qmin, qmax] of an integer type (numerics.md, "Data types").
std::pair<int, int> IntegerRange(DType v);

}  // namespace quark
