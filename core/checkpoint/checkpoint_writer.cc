#include "core/checkpoint/checkpoint_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/base/strings.h"
#include "core/base/write_error.h"
#include <fmt/format.h>
#include "core/checkpoint/safetensors_header.h"

namespace quark::checkpoint {
namespace fs = std::filesystem;

struct CheckpointWriter::Shard {
  std::string file_name;
  std::vector<TensorInfo> tensors;
  uint64_t data_bytes = 0;
  uint64_t data_offset = 0;  // file offset of the data section
  int fd = -1;
};

struct CheckpointWriter::Slot {
  Shard* shard = nullptr;
  TensorInfo info;
  uint64_t bytes_written = 0;
  bool written() const { return bytes_written == info.NumBytes(); }
};

CheckpointWriter::~CheckpointWriter() {
  for (auto& shard : shards_) {
    if (shard->fd >= 0) ::close(shard->fd);
    if (!finished_) {
      std::error_code ec;
      fs::remove(fs::path(out_dir_) / (shard->file_name + ".partial"), ec);
    }
  }
}

absl::Status CheckpointWriter::Plan(std::vector<PlannedTensor> plan) {
  shards_.push_back(std::make_unique<Shard>());
  for (PlannedTensor& t : plan) {
    if (t.name.empty()) return absl::InvalidArgumentError("tensor with an empty name in the checkpoint plan");
    uint64_t bytes = static_cast<uint64_t>(StDTypeSize(t.dtype));
    for (int64_t d : t.shape) {
      if (d < 0) return absl::InvalidArgumentError(quark::StrCat("tensor \"", t.name, "\": negative dimension ", d));
      if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) {
        return absl::InvalidArgumentError(quark::StrCat("tensor \"", t.name, "\": size overflows 64 bits"));
      }
    }
    Shard* shard = shards_.back().get();
    if (!shard->tensors.empty() && shard->data_bytes + bytes > options_.max_shard_bytes) {
      shards_.push_back(std::make_unique<Shard>());
      shard = shards_.back().get();
    }
    TensorInfo info{t.name, t.dtype, t.shape, shard->data_bytes, shard->data_bytes + bytes};
    shard->data_bytes += bytes;
    shard->tensors.push_back(info);
    auto slot = std::make_unique<Slot>(Slot{shard, info, 0});
    if (!slots_.emplace(t.name, std::move(slot)).second) {
      return absl::InvalidArgumentError(quark::StrCat("tensor \"", t.name, "\" appears twice in the checkpoint plan"));
    }
  }
  const size_t n = shards_.size();
  for (size_t i = 0; i < n; ++i) {
    shards_[i]->file_name = n == 1 ? "model.safetensors" : fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, n);
  }
  return absl::OkStatus();
}

absl::Status CheckpointWriter::OpenShards() {
  for (auto& shard : shards_) {
    const std::string path = (fs::path(out_dir_) / (shard->file_name + ".partial")).string();
    shard->fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (shard->fd < 0) return absl::InternalError(quark::StrCat("cannot create ", path, ": ", std::strerror(errno)));
    const std::string header = SerializeSafetensorsHeader(shard->tensors, options_.metadata);
    shard->data_offset = header.size();
    if (::pwrite(shard->fd, header.data(), header.size(), 0) != static_cast<ssize_t>(header.size()) ||
        ::ftruncate(shard->fd, static_cast<off_t>(header.size() + shard->data_bytes)) != 0) {
      return WriteError(quark::StrCat("cannot write the header of ", path), errno);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CheckpointWriter>> CheckpointWriter::Create(const std::string& out_dir,
                                                                           std::vector<PlannedTensor> plan,
                                                                           CheckpointWriterOptions options) {
  std::unique_ptr<CheckpointWriter> writer(new CheckpointWriter());
  writer->out_dir_ = out_dir;
  writer->options_ = std::move(options);
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return absl::InternalError(quark::StrCat("cannot create folder ", out_dir, ": ", ec.message()));
  if (auto status = writer->Plan(std::move(plan)); !status.ok()) return status;
  if (auto status = writer->OpenShards(); !status.ok()) return status;
  return writer;
}

absl::Status CheckpointWriter::Write(std::string_view name, std::string_view bytes) {
  auto it = slots_.find(name);
  if (it != slots_.end() && bytes.size() != it->second->info.NumBytes()) {
    return absl::InvalidArgumentError(quark::StrCat("tensor \"", name, "\": ", bytes.size(), " bytes given, ",
                                                    it->second->info.NumBytes(), " expected"));
  }
  return WritePart(name, 0, bytes);
}

absl::Status CheckpointWriter::WritePart(std::string_view name, uint64_t byte_offset, std::string_view bytes) {
  auto it = slots_.find(name);
  if (it == slots_.end()) return absl::InvalidArgumentError(quark::StrCat("tensor \"", name, "\" is not in the checkpoint plan"));
  Slot& slot = *it->second;
  if (slot.written() && slot.info.NumBytes() > 0) {
    return absl::InvalidArgumentError(quark::StrCat("tensor \"", name, "\" written twice"));
  }
  if (byte_offset > slot.info.NumBytes() || bytes.size() > slot.info.NumBytes() - byte_offset ||
      bytes.size() > slot.info.NumBytes() - slot.bytes_written) {
    return absl::InvalidArgumentError(quark::StrCat("tensor \"", name, "\": ", bytes.size(), " bytes at offset ", byte_offset,
                                                    " do not fit its ", slot.info.NumBytes(), " bytes"));
  }
  const uint64_t base = slot.shard->data_offset + slot.info.begin + byte_offset;
  uint64_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pwrite(slot.shard->fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(base + done));
    if (n <= 0) {
      return WriteError(quark::StrCat("writing tensor \"", name, "\" to ", slot.shard->file_name, " at byte ", base + done),
                        n == 0 ? ENOSPC : errno);
    }
    done += static_cast<uint64_t>(n);
  }
  slot.bytes_written += bytes.size();
  return absl::OkStatus();
}

absl::Status CheckpointWriter::Finish() {
  if (finished_) return absl::FailedPreconditionError("checkpoint writer already finished");
  for (const auto& [name, slot] : slots_) {
    if (!slot->written()) return absl::FailedPreconditionError(quark::StrCat("tensor \"", name, "\" was never written"));
  }
  nlohmann::json weight_map = nlohmann::json::object();
  uint64_t total = 0;
  for (auto& shard : shards_) {
    if (::fsync(shard->fd) != 0 || ::close(shard->fd) != 0) {
      shard->fd = -1;
      return WriteError(quark::StrCat("cannot flush ", shard->file_name), errno);
    }
    shard->fd = -1;
    const fs::path final_path = fs::path(out_dir_) / shard->file_name;
    std::error_code ec;
    fs::rename(fs::path(out_dir_) / (shard->file_name + ".partial"), final_path, ec);
    if (ec) return absl::InternalError(quark::StrCat("cannot rename into ", final_path.string(), ": ", ec.message()));
    for (const TensorInfo& t : shard->tensors) weight_map[t.name] = shard->file_name;
    total += shard->data_bytes;
  }
  finished_ = true;
  if (shards_.size() == 1) return absl::OkStatus();
  nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  const fs::path index_path = fs::path(out_dir_) / "model.safetensors.index.json";
  std::ofstream out(index_path, std::ios::binary | std::ios::trunc);
  out << index.dump(2) << "\n";
  if (!out) return absl::InternalError(quark::StrCat("cannot write ", index_path.string()));
  return absl::OkStatus();
}

std::vector<std::string> CheckpointWriter::ShardFileNames() const {
  std::vector<std::string> names;
  for (const auto& shard : shards_) names.push_back(shard->file_name);
  return names;
}

}  // namespace quark::checkpoint
