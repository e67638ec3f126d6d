#include "worker/storage/s3_config.h"
#include "worker/storage/strings.h"

#include <cstdlib>
#include <fstream>
#include <sstream>


namespace quark::storage {
namespace {

using Ini = std::map<std::string, std::map<std::string, std::string>>;

std::optional<std::string> NonEmpty(const EnvLookup& env, const char* name) {
  std::optional<std::string> value = env(name);
  if (value && value->empty()) return std::nullopt;
  return value;
}

std::string HomeFile(const EnvLookup& env, const char* override_var, const char* relative) {
  if (auto path = NonEmpty(env, override_var)) return *path;
  if (auto home = NonEmpty(env, "HOME")) return str::Cat(*home, "/", relative);
  return "";
}

Ini ReadIni(const std::string& path) {
  if (path.empty()) return {};
  std::ifstream in(path);
  if (!in) return {};
  std::stringstream text;
  text << in.rdbuf();
  return ParseIni(text.str());
}

std::string Lookup(const Ini& ini, const std::string& section, const std::string& key) {
  auto s = ini.find(section);
  if (s == ini.end()) return "";
  auto k = s->second.find(key);
  return k == s->second.end() ? "" : k->second;
}

}  // namespace

std::string S3Config::EffectiveEndpoint() const {
  std::string_view out = endpoint;
  while (!out.empty() && out.back() == '/') out.remove_suffix(1);
  if (out.empty()) return str::Cat("https://s3.", region, ".amazonaws.com");
  return std::string(out);
}

EnvLookup ProcessEnvironment() {
  return [](const char* name) -> std::optional<std::string> {
    const char* value = std::getenv(name);
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

Ini ParseIni(std::string_view text) {
  Ini out;
  std::string section;
  for (std::string_view raw : str::Split(text, '\n')) {
    std::string_view line = str::Trim(raw);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      section = std::string(str::Trim(line.substr(1, line.size() - 2)));
      continue;
    }
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    out[section][str::ToLower(str::Trim(line.substr(0, eq)))] =
        std::string(str::Trim(line.substr(eq + 1)));
  }
  return out;
}

absl::StatusOr<S3Config> LoadS3Config(const EnvLookup& env) {
  S3Config config;
  std::string profile = NonEmpty(env, "AWS_PROFILE").value_or("default");
  std::optional<std::string> key = NonEmpty(env, "AWS_ACCESS_KEY_ID");
  std::optional<std::string> secret = NonEmpty(env, "AWS_SECRET_ACCESS_KEY");
  if (key.has_value() != secret.has_value()) {
    return absl::InvalidArgumentError(str::Cat(key ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID",
                                                   " is unset while its pair is set"));
  }
  if (key) {
    config.credentials = {*key, *secret, NonEmpty(env, "AWS_SESSION_TOKEN").value_or("")};
  } else {
    std::string path = HomeFile(env, "AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
    Ini ini = ReadIni(path);
    config.credentials = {Lookup(ini, profile, "aws_access_key_id"), Lookup(ini, profile, "aws_secret_access_key"),
                          Lookup(ini, profile, "aws_session_token")};
    if (config.credentials.access_key_id.empty() != config.credentials.secret_access_key.empty()) {
      return absl::InvalidArgumentError(
          str::Cat(path, ": profile [", profile, "] has only one of aws_access_key_id, aws_secret_access_key"));
    }
  }
  Ini settings = ReadIni(HomeFile(env, "AWS_CONFIG_FILE", ".aws/config"));
  std::string section = profile == "default" ? "default" : str::Cat("profile ", profile);
  std::string region = NonEmpty(env, "AWS_REGION").value_or(NonEmpty(env, "AWS_DEFAULT_REGION").value_or(""));
  if (region.empty()) region = Lookup(settings, section, "region");
  if (!region.empty()) config.region = region;
  config.endpoint =
      NonEmpty(env, "AWS_ENDPOINT_URL_S3").value_or(NonEmpty(env, "AWS_ENDPOINT_URL").value_or(""));
  if (config.endpoint.empty()) config.endpoint = Lookup(settings, section, "endpoint_url");
  if (!config.endpoint.empty() && !str::StartsWith(config.endpoint, "http://") &&
      !str::StartsWith(config.endpoint, "https://")) {
    return absl::InvalidArgumentError(
        str::Cat("AWS_ENDPOINT_URL: ", config.endpoint, ": must start with http:// or https://"));
  }
  return config;
}

}  // namespace quark::storage
