#include "server/api/request_limits.h"

#include <set>

#include <google/protobuf/descriptor.pb.h>

#include "absl/strings/str_cat.h"

namespace quark::server {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

constexpr size_t kMaxUriFieldBytes = 4096;

size_t StringLimit(const FieldDescriptor& field) {
  const std::string& name = field.name();
  if (name == "uri" || (name.size() > 4 && name.compare(name.size() - 4, 4, "_uri") == 0)) return kMaxUriFieldBytes;
  static const std::set<std::string>* const kNames = new std::set<std::string>{
      "preset", "kv_cache_dtype", "gguf_type", "compute_scale_loss", "model_decoder_layers", "module2inspect",
      "prev_op", "inp", "request_id"};
  return kNames->count(name) > 0 ? kMaxNameBytes : kMaxStringBytes;
}

absl::Status TooLong(const std::string& path, size_t bytes, size_t limit) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", bytes, " bytes, more than ", limit));
}

absl::Status CheckString(const std::string& path, const FieldDescriptor& field, const std::string& value) {
  const size_t limit = StringLimit(field);
  return value.size() > limit ? TooLong(path, value.size(), limit) : absl::OkStatus();
}

absl::Status CheckMessage(const Message& message, const std::string& path);

absl::Status CheckField(const Message& message, const FieldDescriptor& field, const std::string& path) {
  const Reflection& reflection = *message.GetReflection();
  if (field.is_repeated()) {
    const int n = reflection.FieldSize(message, &field);
    if (n > kMaxEntries) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", n, " entries, more than ", kMaxEntries));
    }
    for (int i = 0; i < n; ++i) {
      const std::string item = field.is_map() ? path : absl::StrCat(path, "[", i, "]");
      if (field.cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
        absl::Status status = CheckString(item, field, reflection.GetRepeatedString(message, &field, i));
        if (!status.ok()) return status;
      } else if (field.cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        absl::Status status = CheckMessage(reflection.GetRepeatedMessage(message, &field, i), item);
        if (!status.ok()) return status;
      }
    }
    return absl::OkStatus();
  }
  if (!field.has_presence() && field.cpp_type() != FieldDescriptor::CPPTYPE_STRING) return absl::OkStatus();
  if (field.has_presence() && !reflection.HasField(message, &field)) return absl::OkStatus();
  if (field.cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
    std::string scratch;
    return CheckString(path, field, reflection.GetStringReference(message, &field, &scratch));
  }
  if (field.cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
    return CheckMessage(reflection.GetMessage(message, &field), path);
  }
  return absl::OkStatus();
}

// A map entry is a message of key and value: its key gets the map's path (the key itself may be the bad part).
absl::Status CheckMessage(const Message& message, const std::string& path) {
  const google::protobuf::Descriptor& descriptor = *message.GetDescriptor();
  const bool map_entry = descriptor.options().map_entry();
  for (int i = 0; i < descriptor.field_count(); ++i) {
    const FieldDescriptor& field = *descriptor.field(i);
    const std::string child = map_entry ? (field.name() == "key" ? absl::StrCat(path, " key") : path)
                              : path.empty() || path.back() == '.' ? absl::StrCat(path, field.name())
                                                                  : absl::StrCat(path, ".", field.name());
    absl::Status status = CheckField(message, field, child);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace

std::string Excerpt(absl::string_view value) {
  if (value.size() <= kMaxQuotedBytes) return std::string(value);
  size_t cut = kMaxQuotedBytes;
  // Back off continuation bytes (10xxxxxx) so that the excerpt ends on a whole UTF-8 character.
  while (cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(value.substr(0, cut), "... (", value.size(), " bytes)");
}

absl::Status CheckRequestSizes(const google::protobuf::Message& message, const std::string& prefix) {
  // Field by field first (the error names the field at fault), then the whole (linear in the message either way).
  if (absl::Status status = CheckMessage(message, prefix); !status.ok()) return status;
  const size_t bytes = message.ByteSizeLong();
  if (bytes > kMaxRequestBytes) {
    return absl::InvalidArgumentError(absl::StrCat(prefix.empty() ? "request" : prefix.substr(0, prefix.size() - 1),
                                                   ": ", bytes, " bytes serialized, more than ", kMaxRequestBytes));
  }
  return absl::OkStatus();
}

}  // namespace quark::server
