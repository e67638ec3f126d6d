// The GGUF v3 container (llama.cpp's gguf.cpp / gguf-py): little-endian header, metadata key/values, the tensor
// table, padding to `general.alignment` (32 here), then each tensor's data at its aligned offset.
//
//   "GGUF" u32 version=3 | u64 n_tensors | u64 n_kv | kv* | tensor_info* | pad | data
//   kv          = string key, u32 value_type, value (arrays: u32 element type, u64 count, elements)
//   tensor_info = string name, u32 n_dims, u64 ne[n_dims] (ne[0] = row length), u32 ggml_type, u64 offset
//   string      = u64 length, bytes (no terminator)
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/mapped_file.h"
#include "core/export/gguf_blocks.h"

namespace quark::exporter::gguf {

inline constexpr uint32_t kGgufVersion = 3;
inline constexpr uint64_t kGgufAlignment = 32;

enum class ValueType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5, kFloat32 = 6, kBool = 7,
  kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12,
};

/// One metadata value: a scalar (number or string) or an array of them. Numbers are held as double (every integer
/// a GGUF of this project holds fits one exactly) and written in `type` / `element_type`.
struct Value {
  ValueType type = ValueType::kUint32;
  ValueType element_type = ValueType::kUint32;  // arrays only
  double number = 0;
  std::string text;
  std::vector<double> numbers;      // arrays of numbers / bools
  std::vector<std::string> texts;   // arrays of strings

  static Value U32(uint32_t v) { Value x; x.type = ValueType::kUint32; x.number = v; return x; }
  static Value I32(int32_t v) { Value x; x.type = ValueType::kInt32; x.number = v; return x; }
  static Value F32(float v) { Value x; x.type = ValueType::kFloat32; x.number = v; return x; }
  static Value Bool(bool v) { Value x; x.type = ValueType::kBool; x.number = v ? 1 : 0; return x; }
  static Value Str(std::string v) { Value x; x.type = ValueType::kString; x.text = std::move(v); return x; }
  static Value Strs(std::vector<std::string> v);
  static Value Numbers(ValueType element_type, std::vector<double> v);
};

/// Metadata in file order.
using Metadata = std::vector<std::pair<std::string, Value>>;

/// One entry of the tensor table.
struct TensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // ggml order: ne[0] = the row (an HF [out, in] weight is ne = {in, out})
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;      // from the start of the data section, a multiple of the alignment
  uint64_t nbytes = 0;

  int64_t RowLength() const { return ne.empty() ? 1 : ne[0]; }
  int64_t Rows() const;
};

/// Bytes of a tensor of this type and shape (ne[0] must be a multiple of the block size).
uint64_t TensorBytes(GgmlType type, const std::vector<int64_t>& ne);

/// Sets every tensor's offset (in order, each aligned) and nbytes; returns the data section's size.
uint64_t AssignOffsets(std::vector<TensorInfo>& tensors, uint64_t alignment = kGgufAlignment);

/// The bytes before the data section: header, metadata, tensor table and the padding up to the alignment.
std::string SerializeHeader(const Metadata& metadata, const std::vector<TensorInfo>& tensors,
                            uint64_t alignment = kGgufAlignment);

/// A GGUF file mapped read-only and parsed. Every length, count, type and offset is checked against the file: a
/// damaged or hostile file is an INVALID_ARGUMENT naming the byte offset and the field, never a crash.
class GgufFile {
 public:
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);

  const std::string& path() const { return file_->path(); }
  uint32_t version() const { return version_; }
  const std::map<std::string, Value>& metadata() const { return metadata_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  uint64_t data_offset() const { return data_offset_; }
  /// nullptr when absent.
  const Value* Find(const std::string& key) const;
  const TensorInfo* FindTensor(const std::string& name) const;
  /// The tensor's bytes in the mapping (valid while this object lives).
  const uint8_t* TensorData(const TensorInfo& info) const { return file_->data() + data_offset_ + info.offset; }
  void Release(const TensorInfo& info) const { file_->Release(data_offset_ + info.offset, info.nbytes); }

  /// Typed metadata access; INVALID_ARGUMENT naming the key when absent or of another kind.
  absl::StatusOr<int64_t> GetInt(const std::string& key) const;
  absl::StatusOr<double> GetFloat(const std::string& key) const;
  absl::StatusOr<std::string> GetString(const std::string& key) const;

 private:
  GgufFile() = default;
  absl::Status Parse();

  std::shared_ptr<checkpoint::MappedFile> file_;
  uint32_t version_ = 0;
  std::map<std::string, Value> metadata_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
  uint64_t data_offset_ = 0;
};

}  // namespace quark::exporter::gguf
