// Job files and config files for quarkctl: YAML or JSON, in the protobuf JSON mapping of quark.v1 messages.
#pragma once

#include <string>
#include <string_view>

#include <google/protobuf/message.h>

#include "absl/status/statusor.h"
#include "quark/v1/service.pb.h"

namespace quark::client {

/// Converts YAML (JSON is YAML too) to a JSON document. Unquoted scalars become numbers, booleans or null when
/// they read as such; quoted ones stay strings. INVALID_ARGUMENT with the line and column of a syntax error.
absl::StatusOr<std::string> YamlToJson(std::string_view yaml);

/// Parses `text` (YAML or JSON) into `message` (field names in snake_case or lowerCamelCase, enums by name).
/// Errors name `source` (the file) and the parser's message, e.g. unknown field names.
absl::Status ParseMessageText(std::string_view text, std::string_view source, google::protobuf::Message& message);

/// Reads a job file: a quark.v1.JobSpec ({model_uri, preset | config, calibration, output_uri, ...}).
absl::StatusOr<quark::v1::JobSpec> LoadJobSpecFile(const std::string& path);

/// Reads a config file: a quark.v1.Config, or a document with the Config under "config".
absl::StatusOr<quark::v1::Config> LoadConfigFile(const std::string& path);

/// A Quark algo_config file (YAML or JSON): one {"name": "gptq", "damp_percent": ...} object or a list of them, as
/// Quark's LLM example takes with --quant_algo_config_file. Each becomes a quark.v1.AlgoConfig (Quark's keys are the
/// proto's field names). INVALID_ARGUMENT naming the file and entry for a bad one; UNIMPLEMENTED for an algorithm
/// Quark has and the API does not (quarot, svdquant; gptaq and qronos, which only `quark quantize` runs so far).
absl::StatusOr<std::vector<quark::v1::AlgoConfig>> LoadQuarkAlgoConfigFile(const std::string& path);

}  // namespace quark::client
