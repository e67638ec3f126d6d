// Writes an HF safetensors checkpoint: one `model.safetensors`, or shards `model-0000k-of-0000n.safetensors`
// plus `model.safetensors.index.json` when the data exceeds the shard size.
//
// The tensor list (names, dtypes, shapes) is declared up front, so every header and offset is known before the
// first byte of data: tensors are then written in any order straight to their place (pwrite), never buffered,
// which lets a layer-streaming exporter or the synthetic-model maker write a 15 GB model in constant memory.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/checkpoint/dtype.h"

namespace quark::checkpoint {

struct PlannedTensor {
  std::string name;
  StDType dtype = StDType::kF32;
  std::vector<int64_t> shape;
};

struct CheckpointWriterOptions {
  /// A new shard starts when the next tensor would take the current one past this size (HF's rule; a single
  /// tensor larger than the limit gets a shard of its own).
  uint64_t max_shard_bytes = 5'000'000'000ull;
  /// Written as `__metadata__` of every shard ({"format": "pt"} is what HF writes).
  std::map<std::string, std::string> metadata = {{"format", "pt"}};
};

class CheckpointWriter {
 public:
  /// Creates `out_dir` if needed and the shard files (as `.partial` files until Finish()).
  /// Errors: InvalidArgument for duplicate or empty names, negative dims; Internal for I/O, naming the path.
  static absl::StatusOr<std::unique_ptr<CheckpointWriter>> Create(const std::string& out_dir,
                                                                  std::vector<PlannedTensor> plan,
                                                                  CheckpointWriterOptions options = {});
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  /// Writes one tensor's little-endian bytes (size must equal numel * dtype size). Any order, each once.
  absl::Status Write(std::string_view name, std::string_view bytes);
  /// Writes part of a tensor: `bytes` at `byte_offset` inside it (for tensors produced a slice at a time).
  /// The parts must not overlap; the tensor counts as written once they add up to its size.
  absl::Status WritePart(std::string_view name, uint64_t byte_offset, std::string_view bytes);
  /// Checks that every tensor was written, renames the shards into place and writes the index (sharded only).
  absl::Status Finish();
  /// Final file names of the shards, in order.
  std::vector<std::string> ShardFileNames() const;

 private:
  struct Slot;
  struct Shard;
  CheckpointWriter() = default;
  absl::Status Plan(std::vector<PlannedTensor> plan);
  absl::Status OpenShards();
  std::string out_dir_;
  CheckpointWriterOptions options_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::map<std::string, std::unique_ptr<Slot>, std::less<>> slots_;
  bool finished_ = false;
};

}  // namespace quark::checkpoint
