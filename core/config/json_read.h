// Reading one optional field of a JSON object: strictly, with an error naming the field, for the readers of Quark's
// config dict (quark_json.cc and the per-algorithm readers beside it); leniently, absent when it is not there as
// expected, for the checkers of written configs (core/export).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"

namespace quark {

/// `key` of `j` into `out` when present and not null (else `out` keeps its default); INVALID_ARGUMENT naming
/// `path.key` when the value is not true or false.
absl::Status ReadJsonBool(const nlohmann::ordered_json& j, const char* key, const std::string& path, bool& out);

// The lenient readers (nlohmann::json or ordered_json): a missing key, a value of another type and a document that is
// not an object all read as absent.

template <typename Json>
std::string JsonString(const Json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].template get<std::string>() : "";
}

template <typename Json>
bool JsonStringIs(const Json& j, const char* key, const char* value) {
  return j.is_object() && j.contains(key) && j[key].is_string() && j[key].template get<std::string>() == value;
}

template <typename Json>
int64_t JsonInt(const Json& j, const char* key, int64_t fallback = 0) {
  return j.is_object() && j.contains(key) && j[key].is_number_integer() ? j[key].template get<int64_t>() : fallback;
}

}  // namespace quark
