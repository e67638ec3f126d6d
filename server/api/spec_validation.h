// Request checks of the public API: sizes, URIs, and the Config (preset or inline) resolved and validated
// with the engine's own rules, every error naming its request field path.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "google/protobuf/repeated_field.h"
#include "quark/v1/service.pb.h"
#include "server/api/uri_policy.h"

namespace quark::server {

/// The Config a request asks for: the preset (INVALID_ARGUMENT "<prefix>preset: ..." when unknown) or the
/// inline Config converted with FromProto (INVALID_ARGUMENT "<prefix>config.<field path>: ..."), then
/// kv_cache_dtype applied and `exclude` appended. `prefix` is the request path of the fields ("spec.", "").
/// Does not run ValidateConfig.
absl::StatusOr<quark::Config> ResolveRequestConfig(const std::string& prefix, const quark::v1::Config* config,
                                                   const std::string* preset, const std::string& kv_cache_dtype,
                                                   const google::protobuf::RepeatedPtrField<std::string>& exclude);

/// INVALID_ARGUMENT "<prefix>calibration.num_samples: ..." when a calibration or evaluation size is negative or
/// above its limit (SubmitJob's spec, ValidateConfig's request).
absl::Status CheckJobShape(const std::string& prefix, const quark::v1::CalibrationSpec& calibration,
                           const quark::v1::EvaluationSpec& evaluation);

/// Every check of SubmitJob: field sizes; model_uri (required), output_uri (required), calibration and
/// evaluation URIs against `policy`; the Config resolved and validated on its own (the model is read by the
/// worker, which fails the job with a clear error when it is missing or does not fit the Config).
absl::Status ValidateSubmitRequest(const quark::v1::SubmitJobRequest& request, const UriPolicy& policy);

}  // namespace quark::server
