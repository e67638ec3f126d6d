// Parsing and strict validation of a safetensors header: pure functions over bytes, no I/O
// (the fuzz target drives them directly).
//
// File layout: u64 little-endian N, N bytes of JSON header, then the data section. Every tensor's
// data_offsets are relative to the data section; together they must tile it exactly.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/dtype.h"

namespace quark::checkpoint {

/// One tensor entry of a header.
struct TensorInfo {
  std::string name;
  StDType dtype = StDType::kF32;
  std::vector<int64_t> shape;  // empty = scalar
  uint64_t begin = 0;          // byte offset in the data section
  uint64_t end = 0;            // one past the last byte, in the data section
  int64_t NumElements() const;
  uint64_t NumBytes() const { return end - begin; }
};

/// A validated header.
struct SafetensorsHeader {
  uint64_t header_bytes = 0;  // N (the JSON length)
  uint64_t data_offset = 0;   // 8 + N: where the data section starts in the file
  uint64_t data_bytes = 0;    // size of the data section
  std::vector<TensorInfo> tensors;               // in data order (by begin offset)
  std::map<std::string, std::string> metadata;   // "__metadata__" (string to string)
  /// Index into `tensors`, or -1.
  int Find(std::string_view name) const;
};

/// Largest header accepted (the safetensors reference implementation's limit).
inline constexpr uint64_t kMaxHeaderBytes = 100u << 20;

/// Parses and validates the header of a file of `file_size` bytes whose first bytes are `prefix`
/// (`prefix` must hold at least the 8-byte length and the JSON header when the file is that long).
/// Errors (InvalidArgument / DataLoss), each naming `file_label`, the tensor and byte offset: file shorter
/// than 8 bytes, header length beyond the file or above kMaxHeaderBytes, JSON that does not parse or is not
/// an object, duplicate keys, entries missing dtype/shape/data_offsets or with wrong types, unknown dtypes,
/// negative or overflowing shapes, shape*dtype size != byte span, offsets reversed, overlapping, leaving a gap
/// or running past the end of the file, a data section longer than the tensors.
absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(std::string_view prefix, uint64_t file_size,
                                                          const std::string& file_label);

/// Serialises a header for the writer: JSON text padded with spaces so that the data section starts at a
/// multiple of 8 bytes. Returns the 8-byte length followed by the JSON.
std::string SerializeSafetensorsHeader(const std::vector<TensorInfo>& tensors,
                                       const std::map<std::string, std::string>& metadata);

}  // namespace quark::checkpoint
