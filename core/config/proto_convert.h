// The one place where the public proto Config (quark.v1.Config) and the engine's Config meet.
#pragma once

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "quark/v1/config.pb.h"

namespace quark {

quark::v1::QuantizationSpec ToProto(const QuantSpec& spec);
quark::v1::QuantizationConfig ToProto(const LayerQuantConfig& config);
quark::v1::Config ToProto(const Config& config);

/// INVALID_ARGUMENT naming the field path ("global_quant_config.weight.dtype: unspecified") on a bad message.
absl::StatusOr<QuantSpec> FromProto(const quark::v1::QuantizationSpec& spec, const std::string& path);
absl::StatusOr<LayerQuantConfig> FromProto(const quark::v1::QuantizationConfig& config, const std::string& path);
absl::StatusOr<Config> FromProto(const quark::v1::Config& config);
/// One algo_config entry; `path` names it in errors ("algo_config[0]").
absl::StatusOr<AlgoConfig> FromProto(const quark::v1::AlgoConfig& algo, const std::string& path);

}  // namespace quark
