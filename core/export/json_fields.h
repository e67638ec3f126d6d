#pragma once

#include <cstdint>
#include <string>

namespace quark::exporter {

// Optional fields of a parsed JSON document (nlohmann::json or ordered_json) as the checkers read them: a missing
// key, a value of another type and a document that is not an object all read as absent.

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

}  // namespace quark::exporter
