// Read access to the weights of an HF model folder: one `model.safetensors`, or shards listed by
// `model.safetensors.index.json`. Every file is mmapped and validated on open; tensor bytes are zero-copy views.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/mapped_file.h"
#include "core/checkpoint/safetensors_header.h"

namespace quark::checkpoint {

/// One validated, mapped safetensors file.
class SafetensorsFile {
 public:
  /// Maps and validates `path` (see ParseSafetensorsHeader for the errors).
  static absl::StatusOr<std::shared_ptr<SafetensorsFile>> Open(const std::string& path);
  /// Validates an in-memory image (tests, fuzzing); `label` names it in errors.
  static absl::StatusOr<SafetensorsHeader> Validate(std::string_view image, const std::string& label);

  const std::string& path() const { return mapping_->path(); }
  const SafetensorsHeader& header() const { return header_; }
  const std::shared_ptr<MappedFile>& mapping() const { return mapping_; }
  /// nullptr when absent.
  const TensorInfo* Find(std::string_view name) const;
  /// The tensor's raw little-endian bytes inside the mapping (valid while the mapping lives).
  std::string_view Bytes(const TensorInfo& info) const;
  /// File offset of the tensor's first byte.
  uint64_t FileOffset(const TensorInfo& info) const { return header_.data_offset + info.begin; }

 private:
  SafetensorsFile(std::shared_ptr<MappedFile> mapping, SafetensorsHeader header);
  std::shared_ptr<MappedFile> mapping_;
  SafetensorsHeader header_;
  std::map<std::string, int, std::less<>> by_name_;
};

/// A tensor found in a checkpoint: its entry and the file that holds it (kept alive by the view).
struct TensorRef {
  const TensorInfo* info = nullptr;
  std::shared_ptr<SafetensorsFile> file;
  std::string_view bytes() const { return file->Bytes(*info); }
  /// Drops the tensor's pages from the resident set (see MappedFile::Release).
  void Release() const { file->mapping()->Release(file->FileOffset(*info), info->NumBytes()); }
};

class CheckpointReader {
 public:
  /// Opens `model_dir`: `model.safetensors.index.json` when present (every shard it names must exist, and
  /// every tensor of the weight_map must be in the shard it names), else `model.safetensors`.
  /// Errors name the file; duplicates across shards are refused.
  static absl::StatusOr<std::unique_ptr<CheckpointReader>> Open(const std::string& model_dir);
  /// A single safetensors file.
  static absl::StatusOr<std::unique_ptr<CheckpointReader>> OpenFile(const std::string& path);

  /// NotFound naming the tensor and the folder when absent.
  absl::StatusOr<TensorRef> Get(std::string_view name) const;
  bool Has(std::string_view name) const { return tensors_.count(std::string(name)) > 0; }
  /// Every tensor name, sorted.
  std::vector<std::string> Names() const;
  const std::vector<std::shared_ptr<SafetensorsFile>>& files() const { return files_; }
  /// Total bytes of tensor data over all shards.
  uint64_t TotalBytes() const;
  const std::string& location() const { return location_; }

 private:
  absl::Status AddFile(std::shared_ptr<SafetensorsFile> file);
  std::string location_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, TensorRef> tensors_;
};

}  // namespace quark::checkpoint
