#include "client/job_file.h"

#include <google/protobuf/util/json_util.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"


namespace quark::client {
namespace {

nlohmann::json ScalarToJson(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted: always a string
  if (text == "null" || text == "~" || text.empty()) return nullptr;
  if (text == "true" || text == "True") return true;
  if (text == "false" || text == "False") return false;
  int64_t integer = 0;
  // Whole-string integers only (SimpleAtoi alone would also take surrounding spaces).
  if (!absl::ascii_isspace(text.front()) && !absl::ascii_isspace(text.back()) && absl::SimpleAtoi(text, &integer)) {
    return integer;
  }
  try {
    size_t used = 0;
    double number = std::stod(text, &used);
    if (used == text.size()) return number;
  } catch (const std::exception&) {
    // not a number: a string
  }
  return text;
}

nlohmann::json NodeToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& item : node) out[item.first.as<std::string>()] = NodeToJson(item.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& item : node) out.push_back(NodeToJson(item));
      return out;
    }
    case YAML::NodeType::Scalar:
      return ScalarToJson(node);
    default:
      return nullptr;
  }
}

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

absl::StatusOr<std::string> YamlToJson(std::string_view yaml) {
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    return NodeToJson(root).dump();
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", e.mark.line + 1, ", column ", e.mark.column + 1, ": ", e.msg));
  } catch (const nlohmann::json::type_error& e) {
    // yaml-cpp passes any bytes through; JSON text must be UTF-8, and dump() throws on anything else (found by
    // job_file_fuzz: a stray byte in a key aborted quarkctl).
    return absl::InvalidArgumentError(absl::StrCat("not valid UTF-8 text: ", e.what()));
  }
}

absl::Status ParseMessageText(std::string_view text, std::string_view source, google::protobuf::Message& message) {
  absl::StatusOr<std::string> json = YamlToJson(text);
  // Debian's abseil has its own string_view: std::string_view goes into StrCat as a std::string.
  const std::string where(source);
  if (!json.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", json.status().message()));
  google::protobuf::util::JsonParseOptions options;
  auto status = google::protobuf::util::JsonStringToMessage(*json, &message, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": not a ", message.GetDescriptor()->full_name(), ": ", std::string(status.message())));
  }
  return absl::OkStatus();
}

absl::StatusOr<quark::v1::JobSpec> LoadJobSpecFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadText(path);
  if (!text.ok()) return text.status();
  quark::v1::JobSpec spec;
  if (absl::Status status = ParseMessageText(*text, path, spec); !status.ok()) return status;
  return spec;
}

absl::StatusOr<quark::v1::Config> LoadConfigFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadText(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<std::string> json = YamlToJson(*text);
  if (!json.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", json.status().message()));
  nlohmann::json doc = nlohmann::json::parse(*json);
  if (doc.is_object() && doc.contains("config") && doc.size() == 1) doc = doc["config"];
  quark::v1::Config config;
  if (absl::Status status = ParseMessageText(doc.dump(), path, config); !status.ok()) return status;
  return config;
}

absl::StatusOr<std::vector<quark::v1::AlgoConfig>> LoadQuarkAlgoConfigFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadText(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<std::string> json = YamlToJson(*text);
  if (!json.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", json.status().message()));
  const nlohmann::json root = nlohmann::json::parse(*json, nullptr, /*allow_exceptions=*/false);
  const bool list = root.is_array();
  std::vector<quark::v1::AlgoConfig> out;
  for (size_t i = 0; i < (list ? root.size() : 1); ++i) {
    const nlohmann::json& entry = list ? root[i] : root;
    const std::string source = list ? absl::StrCat(path, "[", i, "]") : path;
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": expected an object with a string \"name\""));
    }
    std::string name = entry["name"].get<std::string>();
    for (const char* unsupported : {"quarot", "svdquant"}) {
      if (name == unsupported) return absl::UnimplementedError(absl::StrCat(source, ": Quark's ", name, " is not implemented"));
    }
    if (name == "gptaq" || name == "qronos") {  // #35: the engine runs them (quark quantize); the API has no field yet
      return absl::UnimplementedError(
          absl::StrCat(source, ": ", name, " is not in the API's AlgoConfig yet (quark quantize --quant-algo ", name,
                       " runs it locally)"));
    }
    if (name == "smooth") name = "smoothquant";  // Quark's algo_config name for the proto's smoothquant
    nlohmann::json fields = entry;
    fields.erase("name");
    quark::v1::AlgoConfig algo;
    if (absl::Status status = ParseMessageText(nlohmann::json{{name, fields}}.dump(), source, algo); !status.ok()) {
      return status;
    }
    out.push_back(std::move(algo));
  }
  return out;
}

}  // namespace quark::client
