#include "core/checkpoint/checkpoint_reader.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "core/base/strings.h"

namespace quark::checkpoint {
namespace fs = std::filesystem;

SafetensorsFile::SafetensorsFile(std::shared_ptr<MappedFile> mapping, SafetensorsHeader header)
    : mapping_(std::move(mapping)), header_(std::move(header)) {
  for (size_t i = 0; i < header_.tensors.size(); ++i) by_name_[header_.tensors[i].name] = static_cast<int>(i);
}

absl::StatusOr<std::shared_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  auto mapping = MappedFile::Open(path);
  if (!mapping.ok()) return mapping.status();
  auto header = Validate((*mapping)->bytes(), path);
  if (!header.ok()) return header.status();
  return std::shared_ptr<SafetensorsFile>(new SafetensorsFile(*std::move(mapping), *std::move(header)));
}

absl::StatusOr<SafetensorsHeader> SafetensorsFile::Validate(std::string_view image, const std::string& label) {
  return ParseSafetensorsHeader(image, image.size(), label);
}

const TensorInfo* SafetensorsFile::Find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &header_.tensors[it->second];
}

std::string_view SafetensorsFile::Bytes(const TensorInfo& info) const {
  return mapping_->bytes().substr(header_.data_offset + info.begin, info.NumBytes());
}

absl::Status CheckpointReader::AddFile(std::shared_ptr<SafetensorsFile> file) {
  for (const TensorInfo& info : file->header().tensors) {
    auto [it, inserted] = tensors_.emplace(info.name, TensorRef{&info, file});
    if (!inserted) {
      return absl::InvalidArgumentError(quark::StrCat("tensor \"", info.name, "\" is in both ", it->second.file->path(),
                                                     " and ", file->path()));
    }
  }
  files_.push_back(std::move(file));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CheckpointReader>> CheckpointReader::OpenFile(const std::string& path) {
  auto file = SafetensorsFile::Open(path);
  if (!file.ok()) return file.status();
  std::unique_ptr<CheckpointReader> reader(new CheckpointReader());
  reader->location_ = path;
  if (auto status = reader->AddFile(*std::move(file)); !status.ok()) return status;
  return reader;
}

namespace {

absl::StatusOr<nlohmann::json> ReadIndex(const fs::path& index_path) {
  std::ifstream in(index_path, std::ios::binary);
  if (!in) return absl::NotFoundError(quark::StrCat("cannot read ", index_path.string()));
  std::stringstream text;
  text << in.rdbuf();
  auto index = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (index.is_discarded() || !index.is_object()) {
    return absl::InvalidArgumentError(quark::StrCat(index_path.string(), ": not a JSON object"));
  }
  auto map = index.find("weight_map");
  if (map == index.end() || !map->is_object()) {
    return absl::InvalidArgumentError(quark::StrCat(index_path.string(), ": missing object \"weight_map\""));
  }
  for (auto it = map->begin(); it != map->end(); ++it) {
    const bool plain = it->is_string() && !it->get_ref<const std::string&>().empty() &&
                       it->get_ref<const std::string&>().find('/') == std::string::npos &&
                       it->get_ref<const std::string&>() != "..";
    if (!plain) {
      return absl::InvalidArgumentError(quark::StrCat(index_path.string(), ": weight_map[\"", it.key(),
                                                     "\"] = ", it->dump(), " is not a file name in the folder"));
    }
  }
  return *map;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CheckpointReader>> CheckpointReader::Open(const std::string& model_dir) {
  const fs::path dir(model_dir);
  const fs::path index_path = dir / "model.safetensors.index.json";
  std::error_code ec;
  if (!fs::exists(index_path, ec)) {
    const fs::path single = dir / "model.safetensors";
    if (!fs::exists(single, ec)) {
      return absl::NotFoundError(quark::StrCat(model_dir, " has neither model.safetensors nor model.safetensors.index.json"));
    }
    auto reader = OpenFile(single.string());
    if (reader.ok()) (*reader)->location_ = model_dir;
    return reader;
  }
  auto weight_map = ReadIndex(index_path);
  if (!weight_map.ok()) return weight_map.status();
  std::set<std::string> shard_names;
  for (auto it = weight_map->begin(); it != weight_map->end(); ++it) shard_names.insert(it->get<std::string>());
  std::unique_ptr<CheckpointReader> reader(new CheckpointReader());
  reader->location_ = model_dir;
  for (const std::string& shard : shard_names) {
    auto file = SafetensorsFile::Open((dir / shard).string());
    if (!file.ok()) return file.status();
    if (auto status = reader->AddFile(*std::move(file)); !status.ok()) return status;
  }
  for (auto it = weight_map->begin(); it != weight_map->end(); ++it) {
    auto found = reader->tensors_.find(it.key());
    if (found == reader->tensors_.end() ||
        fs::path(found->second.file->path()).filename() != it->get<std::string>()) {
      return absl::InvalidArgumentError(quark::StrCat(index_path.string(), ": weight_map says tensor \"", it.key(),
                                                     "\" is in ", it->get<std::string>(), " but it is not there"));
    }
  }
  return reader;
}

absl::StatusOr<TensorRef> CheckpointReader::Get(std::string_view name) const {
  auto it = tensors_.find(std::string(name));
  if (it == tensors_.end()) return absl::NotFoundError(quark::StrCat("tensor \"", name, "\" not found in ", location_));
  return it->second;
}

std::vector<std::string> CheckpointReader::Names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& [name, ref] : tensors_) names.push_back(name);
  return names;
}

uint64_t CheckpointReader::TotalBytes() const {
  uint64_t total = 0;
  for (const auto& file : files_) total += file->header().data_bytes;
  return total;
}

}  // namespace quark::checkpoint
