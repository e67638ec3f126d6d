// Limits on everything a caller sizes in a request, checked before any work is done for it, and how errors quote
// what a caller sent. A request walks through protobuf reflection: every string (and map key) is bounded in
// bytes, every repeated field and map in entries, and the whole message in serialized bytes, each error naming the
// field path ("spec.config.layer_quant_config[3].pattern: 4096 bytes, more than 1024"). Without these a viewer's
// ValidateConfig with a 1 MB preset name cost ~0.9 s of CPU and echoed the megabyte back, and 9 MB job specs
// filled the store.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <google/protobuf/message.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace quark::server {

/// Bytes of a caller's value an error message quotes at most.
inline constexpr size_t kMaxQuotedBytes = 200;
/// A serialized request (SubmitJob's, ValidateConfig's): far above any real spec (a few KiB).
inline constexpr size_t kMaxRequestBytes = size_t{256} << 10;
/// Any string field of a request, unless named below (URIs: uri_policy.h's 4096).
inline constexpr size_t kMaxStringBytes = 1024;
/// Names chosen from a list: preset, kv_cache_dtype, gguf_type, compute_scale_loss, ...
inline constexpr size_t kMaxNameBytes = 128;
/// A worker's id, as the worker names itself and as DrainWorker / ResumeWorker name it.
inline constexpr size_t kMaxWorkerIdBytes = 256;
/// Entries of any repeated field or map of a request (exclude patterns, layer_quant_config, scaling_layers, ...).
inline constexpr int kMaxEntries = 1024;
/// spec.resources: far above any machine, and far from overflowing memory_mb << 20.
inline constexpr int64_t kMaxMemoryMb = int64_t{1} << 30;  // 1 PiB
inline constexpr int kMaxGpus = 1024;
inline constexpr int kMaxCpus = 1 << 16;

/// `value` itself when at most kMaxQuotedBytes long; else its first kMaxQuotedBytes bytes (cut at a UTF-8
/// boundary) and "... (N bytes)".
std::string Excerpt(absl::string_view value);

/// INVALID_ARGUMENT naming the field path (under `prefix`, "spec." or "") when `message` is over kMaxRequestBytes
/// serialized, or any of its strings or repeated fields is over its limit. URI fields ("*_uri", "uri") may hold
/// 4096 bytes; name fields (preset, kv_cache_dtype, gguf_type, and every string of an AlgoConfig but its layer
/// patterns) kMaxNameBytes; label values are checked by the caller.
absl::Status CheckRequestSizes(const google::protobuf::Message& message, const std::string& prefix);

}  // namespace quark::server
