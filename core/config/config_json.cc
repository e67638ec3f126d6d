#include "core/config/config_json.h"

#include <fstream>
#include <sstream>

#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>

#include "core/base/strings.h"
#include "core/config/proto_convert.h"
#include "core/config/quark_json.h"

namespace quark {
namespace {

using OrderedJson = nlohmann::ordered_json;

bool HasProtoEnumValue(const OrderedJson& j) {
  if (j.is_string()) return j.get<std::string>().rfind("DATA_TYPE_", 0) == 0;
  if (j.is_object() || j.is_array()) {
    for (const auto& child : j) {
      if (HasProtoEnumValue(child)) return true;
    }
  }
  return false;
}

// Proto JSON spells fields in lowerCamelCase (or as declared), keeps layer_quant_config as a list of
// {pattern, config}, and writes enums as DATA_TYPE_*; Quark's dict has none of these.
bool LooksLikeProtoJson(const OrderedJson& j) {
  for (const char* key : {"globalQuantConfig", "layerQuantConfig", "layerTypeQuantConfig", "kvCacheQuantConfig",
                          "algoConfig", "quantMode", "exportOptions", "export_options"}) {
    if (j.contains(key)) return true;
  }
  if (auto it = j.find("layer_quant_config"); it != j.end() && it->is_array()) return true;
  return HasProtoEnumValue(j);
}

}  // namespace

absl::StatusOr<std::string> ConfigToProtoJson(const Config& config) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  auto status = google::protobuf::util::MessageToJsonString(ToProto(config), &out, options);
  if (!status.ok()) return absl::InternalError(StrCat("config: ", status.ToString()));
  return out;
}

absl::StatusOr<Config> ConfigFromProtoJson(std::string_view json) {
  quark::v1::Config message;
  auto status = google::protobuf::util::JsonStringToMessage(std::string(json), &message);
  if (!status.ok()) return absl::InvalidArgumentError(StrCat("config: ", std::string(status.message())));
  return FromProto(message);
}

absl::StatusOr<Config> ConfigFromAnyJson(std::string_view text) {
  OrderedJson j;
  try {
    j = OrderedJson::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    return absl::InvalidArgumentError(StrCat("config: invalid JSON at byte ", e.byte, ": ", e.what()));
  } catch (const nlohmann::json::out_of_range& e) {
    // A number no double holds ("1e400") is out_of_range, not a parse_error (found by config_json_fuzz).
    return absl::InvalidArgumentError(StrCat("config: invalid JSON: ", e.what()));
  }
  if (!j.is_object()) return absl::InvalidArgumentError("config: expected a JSON object");
  if (auto it = j.find("quantization_config"); it != j.end()) return ConfigFromQuarkJson(*it);  // an HF config.json
  if (LooksLikeProtoJson(j)) return ConfigFromProtoJson(text);
  return ConfigFromQuarkJson(j);
}

absl::StatusOr<Config> LoadConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(StrCat("config file ", path, ": cannot be opened"));
  std::ostringstream text;
  text << in.rdbuf();
  auto config = ConfigFromAnyJson(text.str());
  if (!config.ok()) return absl::Status(config.status().code(), StrCat(path, ": ", std::string(config.status().message())));
  return config;
}

}  // namespace quark
