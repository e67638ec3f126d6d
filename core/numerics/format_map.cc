#include "core/numerics/format_map.h"

#include <tuple>

namespace quark {

std::optional<kernels::ElemFormat> ElemFormatOf(DType dtype) {
  using kernels::ElemFormat;
  switch (dtype) {
    case DType::kInt8:
      return ElemFormat::kInt8;
    case DType::kUInt8:
      return ElemFormat::kUInt8;
    case DType::kInt4:
      return ElemFormat::kInt4;
    case DType::kUInt4:
      return ElemFormat::kUInt4;
    case DType::kInt3:
      return ElemFormat::kInt3;
    case DType::kInt2:
      return ElemFormat::kInt2;
    case DType::kFp8E4M3:
      return ElemFormat::kFp8E4M3;
    case DType::kFp8E5M2:
      return ElemFormat::kFp8E5M2;
    case DType::kFp6E3M2:
      return ElemFormat::kFp6E3M2;
    case DType::kFp6E2M3:
      return ElemFormat::kFp6E2M3;
    case DType::kFp4:
      return ElemFormat::kFp4E2M1;
    case DType::kMx:
    case DType::kBFloat16:
    case DType::kFloat16:
      return std::nullopt;
  }
  return std::nullopt;
}

kernels::AffineArgs AffineArgsOf(const QuantSpec& spec, const at::Tensor& scale, const at::Tensor& zero_point,
                                 bool float_zero_point) {
  kernels::AffineArgs args;
  args.scale = scale.data_ptr<float>();
  args.zero_point = zero_point.data_ptr<float>();
  std::tie(args.qmin, args.qmax) = IntegerRange(spec.ElementType());
  args.round = RoundModeOf(spec.round_method);
  args.float_zero_point = float_zero_point;
  return args;
}

kernels::RoundMode RoundModeOf(RoundMethod method) {
  switch (method) {
    case RoundMethod::kHalfEven:
      return kernels::RoundMode::kHalfEven;
    case RoundMethod::kRound:
      return kernels::RoundMode::kHalfAway;
    case RoundMethod::kFloor:
      return kernels::RoundMode::kFloor;
  }
  return kernels::RoundMode::kHalfEven;
}

kernels::MxArgs MxArgsOf(const QuantSpec& spec) {
  kernels::MxArgs args;
  args.element = ElemFormatOf(spec.ElementType()).value_or(kernels::ElemFormat::kFp4E2M1);
  switch (spec.scale_calculation_mode) {
    case ScaleCalculationMode::kEven:
      args.mode = kernels::MxScaleMode::kEven;
      break;
    case ScaleCalculationMode::kFloor:
      args.mode = kernels::MxScaleMode::kFloor;
      break;
    case ScaleCalculationMode::kCeil:
      args.mode = kernels::MxScaleMode::kCeil;
      break;
  }
  args.round = RoundModeOf(spec.round_method);
  return args;
}

bool IsSupportedInputDtype(at::ScalarType t) { return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf; }

}  // namespace quark
