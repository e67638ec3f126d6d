#include "core/checkpoint/safetensors_header.h"

#include <algorithm>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "core/base/strings.h"

namespace quark::checkpoint {
namespace {

using nlohmann::json;

uint64_t ReadLe64(std::string_view bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

// Parses JSON, refusing duplicate keys at any depth (nlohmann would silently keep the last one).
absl::StatusOr<json> ParseJsonNoDuplicates(std::string_view text, const std::string& file_label) {
  std::vector<std::set<std::string>> keys_per_object;
  std::string duplicate;
  auto callback = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      keys_per_object.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!keys_per_object.empty()) keys_per_object.pop_back();
    } else if (event == json::parse_event_t::key && !keys_per_object.empty() && parsed.is_string()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!keys_per_object.back().insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  json parsed = json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return absl::InvalidArgumentError(
        quark::StrCat(file_label, ": header (bytes 8..", 8 + text.size(), ") is not valid JSON"));
  }
  if (!duplicate.empty()) {
    return absl::InvalidArgumentError(quark::StrCat(file_label, ": header has duplicate key \"", duplicate, "\""));
  }
  return parsed;
}

absl::Status Bad(const std::string& file_label, const std::string& tensor, const std::string& what) {
  return absl::InvalidArgumentError(quark::StrCat(file_label, ": tensor \"", tensor, "\": ", what));
}

absl::StatusOr<TensorInfo> ParseEntry(const std::string& name, const json& entry, const std::string& file_label) {
  if (!entry.is_object()) return Bad(file_label, name, "entry is not a JSON object");
  TensorInfo info;
  info.name = name;
  auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end() || !dtype_it->is_string()) return Bad(file_label, name, "missing string \"dtype\"");
  auto dtype = ParseStDType(dtype_it->get_ref<const std::string&>());
  if (!dtype) return Bad(file_label, name, quark::StrCat("unknown dtype \"", dtype_it->get<std::string>(), "\""));
  info.dtype = *dtype;
  auto shape_it = entry.find("shape");
  if (shape_it == entry.end() || !shape_it->is_array()) return Bad(file_label, name, "missing array \"shape\"");
  for (const json& dim : *shape_it) {
    if (!dim.is_number_unsigned()) return Bad(file_label, name, quark::StrCat("shape entry ", dim.dump(), " is not a non-negative integer"));
    const uint64_t d = dim.get<uint64_t>();
    if (d > static_cast<uint64_t>(INT64_MAX)) return Bad(file_label, name, quark::StrCat("shape entry ", d, " too large"));
    info.shape.push_back(static_cast<int64_t>(d));
  }
  auto offsets_it = entry.find("data_offsets");
  if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
      !(*offsets_it)[0].is_number_unsigned() || !(*offsets_it)[1].is_number_unsigned()) {
    return Bad(file_label, name, "\"data_offsets\" must be [begin, end] of non-negative integers");
  }
  info.begin = (*offsets_it)[0].get<uint64_t>();
  info.end = (*offsets_it)[1].get<uint64_t>();
  if (info.end < info.begin) {
    return Bad(file_label, name, quark::StrCat("data_offsets [", info.begin, ", ", info.end, "] are reversed"));
  }
  uint64_t bytes = static_cast<uint64_t>(StDTypeSize(info.dtype));
  for (int64_t d : info.shape) {
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) {
      return Bad(file_label, name, "shape size overflows 64 bits");
    }
  }
  if (bytes != info.end - info.begin) {
    return Bad(file_label, name,
               quark::StrCat("dtype ", StDTypeName(info.dtype), " and shape need ", bytes, " bytes but data_offsets [",
                            info.begin, ", ", info.end, "] span ", info.end - info.begin));
  }
  return info;
}

absl::Status ParseMetadata(const json& value, const std::string& file_label, SafetensorsHeader& header) {
  if (!value.is_object()) return absl::InvalidArgumentError(quark::StrCat(file_label, ": \"__metadata__\" is not an object"));
  for (auto it = value.begin(); it != value.end(); ++it) {
    if (!it->is_string()) {
      return absl::InvalidArgumentError(
          quark::StrCat(file_label, ": \"__metadata__\" value of \"", it.key(), "\" is not a string"));
    }
    header.metadata[it.key()] = it->get<std::string>();
  }
  return absl::OkStatus();
}

// The tensors must tile [0, data_bytes) exactly: no overlap, no gap, nothing past the end.
absl::Status CheckTiling(SafetensorsHeader& header, const std::string& file_label) {
  auto& tensors = header.tensors;
  std::sort(tensors.begin(), tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t cursor = 0;
  const TensorInfo* previous = nullptr;
  for (const TensorInfo& t : tensors) {
    if (t.end > header.data_bytes) {
      return Bad(file_label, t.name, quark::StrCat("data ends at file byte ", header.data_offset + t.end,
                                                  ", past the end of the file (", header.data_offset + header.data_bytes, " bytes)"));
    }
    if (t.begin < cursor) {
      return Bad(file_label, t.name, quark::StrCat("data at file byte ", header.data_offset + t.begin, " overlaps tensor \"",
                                                  previous->name, "\" (ends at file byte ", header.data_offset + cursor, ")"));
    }
    if (t.begin > cursor) {
      return Bad(file_label, t.name, quark::StrCat("gap of ", t.begin - cursor, " bytes before its data at file byte ",
                                                  header.data_offset + t.begin));
    }
    cursor = t.end;
    previous = &t;
  }
  if (cursor != header.data_bytes) {
    return absl::InvalidArgumentError(quark::StrCat(file_label, ": ", header.data_bytes - cursor,
                                                   " bytes after the last tensor, from file byte ", header.data_offset + cursor));
  }
  return absl::OkStatus();
}

}  // namespace

int64_t TensorInfo::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int SafetensorsHeader::Find(std::string_view name) const {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(std::string_view prefix, uint64_t file_size,
                                                          const std::string& file_label) {
  if (file_size < 8 || prefix.size() < 8) {
    return absl::InvalidArgumentError(quark::StrCat(file_label, ": ", file_size, " bytes, too short for the 8-byte header length"));
  }
  SafetensorsHeader header;
  header.header_bytes = ReadLe64(prefix);
  if (header.header_bytes > kMaxHeaderBytes) {
    return absl::InvalidArgumentError(quark::StrCat(file_label, ": header length ", header.header_bytes,
                                                   " (at byte 0) exceeds the limit of ", kMaxHeaderBytes));
  }
  if (header.header_bytes > file_size - 8 || header.header_bytes > prefix.size() - 8) {
    return absl::InvalidArgumentError(quark::StrCat(file_label, ": header length ", header.header_bytes,
                                                   " (at byte 0) runs past the end of the file (", file_size, " bytes)"));
  }
  header.data_offset = 8 + header.header_bytes;
  header.data_bytes = file_size - header.data_offset;
  auto parsed = ParseJsonNoDuplicates(prefix.substr(8, header.header_bytes), file_label);
  if (!parsed.ok()) return parsed.status();
  if (!parsed->is_object()) return absl::InvalidArgumentError(quark::StrCat(file_label, ": header is not a JSON object"));
  for (auto it = parsed->begin(); it != parsed->end(); ++it) {
    if (it.key() == "__metadata__") {
      if (auto status = ParseMetadata(*it, file_label, header); !status.ok()) return status;
      continue;
    }
    auto info = ParseEntry(it.key(), *it, file_label);
    if (!info.ok()) return info.status();
    header.tensors.push_back(*std::move(info));
  }
  if (auto status = CheckTiling(header, file_label); !status.ok()) return status;
  return header;
}

std::string SerializeSafetensorsHeader(const std::vector<TensorInfo>& tensors,
                                       const std::map<std::string, std::string>& metadata) {
  json root = json::object();
  if (!metadata.empty()) root["__metadata__"] = metadata;
  for (const TensorInfo& t : tensors) {
    root[t.name] = {{"dtype", std::string(StDTypeName(t.dtype))}, {"shape", t.shape}, {"data_offsets", {t.begin, t.end}}};
  }
  std::string text = root.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  std::string out(8, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out + text;
}

}  // namespace quark::checkpoint
