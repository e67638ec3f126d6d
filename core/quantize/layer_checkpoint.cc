#include "core/quantize/layer_checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/checkpoint_writer.h"
#include "core/runtime/tensor_view.h"

namespace quark::quantize {
namespace {

namespace fs = std::filesystem;
using checkpoint::StDType;

constexpr const char* kTensorPrefix = "tensor/";
constexpr const char* kParamPrefix = "param/";
constexpr const char* kGridPrefix = "grid/";

// The float dtypes a grid weight can be restored in, by their names in the layer's JSON.
const std::map<std::string, at::ScalarType>& GridDtypes() {
  static const auto* dtypes = new std::map<std::string, at::ScalarType>{
      {"float32", at::kFloat}, {"bfloat16", at::kBFloat16}, {"float16", at::kHalf}};
  return *dtypes;
}

std::string GridDtypeName(at::ScalarType dtype) {
  for (const auto& [name, type] : GridDtypes()) {
    if (type == dtype) return name;
  }
  return "";
}

absl::StatusOr<StDType> StoredTypeOf(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return StDType::kF32;
    case at::kHalf: return StDType::kF16;
    case at::kBFloat16: return StDType::kBF16;
    case at::kDouble: return StDType::kF64;
    case at::kInt: return StDType::kI32;
    case at::kLong: return StDType::kI64;
    case at::kChar: return StDType::kI8;
    case at::kByte: return StDType::kU8;
    default: return absl::InvalidArgumentError(StrCat("dtype ", c10::toString(dtype), " cannot be checkpointed"));
  }
}

// Data that must survive the machine, not only the process: flushed before the state that names it.
absl::Status SyncPath(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return absl::InternalError(StrCat(path.string(), ": cannot open to sync"));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return absl::InternalError(StrCat(path.string(), ": fsync failed"));
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const fs::path& path, const std::string& text) {
  const fs::path partial = path.string() + ".partial";
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) return absl::InternalError(StrCat(partial.string(), ": write failed (disk full?)"));
  }
  QUARK_RETURN_IF_ERROR(SyncPath(partial));
  std::error_code ec;
  fs::rename(partial, path, ec);
  if (ec) return absl::InternalError(StrCat(path.string(), ": ", ec.message()));
  return SyncPath(path.parent_path());
}

absl::StatusOr<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(StrCat(path.string(), ": cannot open"));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

struct NamedTensor {
  std::string name;
  at::Tensor tensor;
};

void AddParams(const std::string& module, const char* role, const std::optional<QuantParams>& params,
               std::vector<NamedTensor>& out) {
  if (!params) return;
  const std::string base = StrCat(kParamPrefix, module, "/", role, "/");
  if (params->scale.defined()) out.push_back({base + "scale", params->scale});
  if (params->zero_point.defined()) out.push_back({base + "zero_point", params->zero_point});
  if (params->global_scale.defined()) out.push_back({base + "global_scale", params->global_scale});
}

// Splits "param/<module>/<role>/<field>" (the module name holds dots, never slashes).
bool ParseParamName(const std::string& name, std::string& module, std::string& role, std::string& field) {
  const std::string rest = name.substr(std::string(kParamPrefix).size());
  const size_t last = rest.rfind('/');
  if (last == std::string::npos || last == 0) return false;
  const size_t middle = rest.rfind('/', last - 1);
  if (middle == std::string::npos || middle == 0) return false;
  module = rest.substr(0, middle);
  role = rest.substr(middle + 1, last - middle - 1);
  field = rest.substr(last + 1);
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LayerCheckpoint>> LayerCheckpoint::Open(const std::string& dir, std::string fingerprint) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(StrCat("checkpoint_dir: ", dir, ": ", ec.message()));
  std::unique_ptr<LayerCheckpoint> checkpoint(new LayerCheckpoint(dir, std::move(fingerprint)));
  if (absl::Status loaded = checkpoint->Load(); !loaded.ok()) {
    // Anything unusable is a fresh start, never a failed job: the checkpoint only saves time.
    checkpoint->discarded_reason_ = std::string(loaded.message());
    checkpoint->finished_layers_ = 0;
    for (const auto& entry : fs::directory_iterator(dir, ec)) fs::remove_all(entry.path(), ec);
  }
  return checkpoint;
}

absl::Status LayerCheckpoint::Load() {
  const fs::path state_path = fs::path(dir_) / "state.json";
  std::error_code ec;
  if (!fs::exists(state_path, ec)) {
    if (!fs::is_empty(dir_, ec)) return absl::DataLossError("files without a state.json");
    return absl::OkStatus();
  }
  QUARK_ASSIGN_OR_RETURN(std::string text, ReadFile(state_path));
  const nlohmann::json state = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!state.is_object() || !state.contains("fingerprint") || !state["fingerprint"].is_string() ||
      !state.contains("finished_layers") || !state["finished_layers"].is_number_integer()) {
    return absl::DataLossError(StrCat(state_path.string(), ": not a checkpoint state"));
  }
  if (state["fingerprint"].get<std::string>() != fingerprint_) {
    return absl::FailedPreconditionError("left by a run with other inputs (model, config, calibration or exports)");
  }
  const int64_t finished = state["finished_layers"].get<int64_t>();
  if (finished < 0) return absl::DataLossError(StrCat(state_path.string(), ": finished_layers < 0"));
  for (int64_t i = 0; i < finished; ++i) {
    // Opening validates the header against the file size: a damaged layer is found here, not halfway through.
    const std::string file = (fs::path(LayerDir(i)) / "model.safetensors").string();
    if (auto reader = checkpoint::CheckpointReader::OpenFile(file); !reader.ok()) {
      return absl::DataLossError(StrCat("layer ", i, ": ", std::string(reader.status().message())));
    }
    if (!fs::exists(LayerDir(i) + ".json", ec)) return absl::DataLossError(StrCat("layer ", i, ": no ", LayerDir(i), ".json"));
  }
  finished_layers_ = finished;
  return absl::OkStatus();
}

std::string LayerCheckpoint::LayerDir(int64_t index) const {
  return (fs::path(dir_) / absl::StrFormat("layer-%05d", index)).string();
}

absl::Status LayerCheckpoint::WriteState(int64_t finished_layers) const {
  const nlohmann::json state = {{"fingerprint", fingerprint_}, {"finished_layers", finished_layers}};
  return WriteFileAtomically(fs::path(dir_) / "state.json", state.dump(1));
}

absl::Status LayerCheckpoint::Write(int64_t index, const LayerCheckpointData& data) {
  if (index != finished_layers_) {
    return absl::InternalError(StrCat("checkpoint: layer ", index, " finished after ", finished_layers_, " layers"));
  }
  std::vector<NamedTensor> tensors;
  for (const auto& [name, tensor] : data.tensors) tensors.push_back({kTensorPrefix + name, tensor});
  nlohmann::json grid = nlohmann::json::object();
  for (const auto& [name, weight] : data.grid_weights) {
    const std::string base = StrCat(kGridPrefix, name, "/");
    tensors.push_back({base + "codes", weight.real.codes});
    if (weight.real.scale.defined()) tensors.push_back({base + "scale", weight.real.scale});
    if (weight.real.zero_point.defined()) tensors.push_back({base + "zero_point", weight.real.zero_point});
    if (weight.real.global_scale.defined()) tensors.push_back({base + "global_scale", weight.real.global_scale});
    const std::string dtype = GridDtypeName(weight.dtype);
    if (dtype.empty()) return absl::InternalError(StrCat("checkpoint: ", name, ": grid weights restore to float types only"));
    grid[name] = dtype;
  }
  for (const auto& [module, params] : data.params) {
    AddParams(module, "input", params.input, tensors);
    AddParams(module, "output", params.output, tensors);
    AddParams(module, "weight", params.weight, tensors);
  }
  std::vector<checkpoint::PlannedTensor> plan;
  std::vector<at::Tensor> contiguous;
  for (const NamedTensor& t : tensors) {
    auto dtype = StoredTypeOf(t.tensor.scalar_type());
    if (!dtype.ok()) return absl::InternalError(StrCat("checkpoint: ", t.name, ": ", std::string(dtype.status().message())));
    contiguous.push_back(t.tensor.cpu().contiguous());
    plan.push_back({t.name, *dtype, t.tensor.sizes().vec()});
  }
  const std::string layer_dir = LayerDir(index);
  std::error_code ec;
  fs::remove_all(layer_dir, ec);  // a half-written layer of a killed run
  QUARK_ASSIGN_OR_RETURN(auto writer, checkpoint::CheckpointWriter::Create(layer_dir, plan));
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& c = contiguous[i];
    QUARK_RETURN_IF_ERROR(writer->Write(tensors[i].name, {static_cast<const char*>(c.data_ptr()), c.nbytes()}));
  }
  QUARK_RETURN_IF_ERROR(writer->Finish());
  QUARK_RETURN_IF_ERROR(SyncPath(fs::path(layer_dir) / "model.safetensors"));
  QUARK_RETURN_IF_ERROR(WriteFileAtomically(layer_dir + ".json", nlohmann::json({{"log", data.log}, {"grid", grid}}).dump(1)));
  QUARK_RETURN_IF_ERROR(WriteState(index + 1));
  finished_layers_ = index + 1;
  return absl::OkStatus();
}

absl::StatusOr<LayerCheckpointData> LayerCheckpoint::Read(int64_t index) const {
  if (index < 0 || index >= finished_layers_) {
    return absl::InternalError(StrCat("checkpoint: layer ", index, " is not among the ", finished_layers_, " finished"));
  }
  const std::string layer_dir = LayerDir(index);
  const auto damaged = [&](const absl::Status& s) {
    return absl::DataLossError(StrCat("checkpoint ", layer_dir, ": ", std::string(s.message())));
  };
  auto reader = checkpoint::CheckpointReader::OpenFile((fs::path(layer_dir) / "model.safetensors").string());
  if (!reader.ok()) return damaged(reader.status());
  LayerCheckpointData data;
  for (const std::string& name : (*reader)->Names()) {
    auto ref = (*reader)->Get(name);
    if (!ref.ok()) return damaged(ref.status());
    auto view = runtime::ViewTensor(*ref);
    if (!view.ok()) return damaged(view.status());
    at::Tensor tensor = view->clone();  // owned: the mapping goes with the reader
    if (name.rfind(kTensorPrefix, 0) == 0) {
      data.tensors[name.substr(std::string(kTensorPrefix).size())] = std::move(tensor);
      continue;
    }
    if (name.rfind(kGridPrefix, 0) == 0) {
      // "grid/<HF name>/<field>": HF names hold dots, never slashes.
      const std::string rest = name.substr(std::string(kGridPrefix).size());
      const size_t slash = rest.rfind('/');
      const std::string field = slash == std::string::npos ? "" : rest.substr(slash + 1);
      RealQuantized& real = data.grid_weights[rest.substr(0, slash == std::string::npos ? 0 : slash)].real;
      if (field == "codes") real.codes = std::move(tensor);
      else if (field == "scale") real.scale = std::move(tensor);
      else if (field == "zero_point") real.zero_point = std::move(tensor);
      else if (field == "global_scale") real.global_scale = std::move(tensor);
      else return damaged(absl::DataLossError(StrCat("unexpected tensor \"", name, "\"")));
      continue;
    }
    std::string module, role, field;
    if (name.rfind(kParamPrefix, 0) != 0 || !ParseParamName(name, module, role, field) ||
        (field != "scale" && field != "zero_point" && field != "global_scale")) {
      return damaged(absl::DataLossError(StrCat("unexpected tensor \"", name, "\"")));
    }
    ModuleParams& params = data.params[module];
    std::optional<QuantParams>* slot = role == "input" ? &params.input : role == "output" ? &params.output
                                       : role == "weight" ? &params.weight : nullptr;
    if (slot == nullptr) return damaged(absl::DataLossError(StrCat("unexpected tensor \"", name, "\"")));
    if (!*slot) slot->emplace();
    (field == "scale" ? (*slot)->scale : field == "zero_point" ? (*slot)->zero_point : (*slot)->global_scale) =
        std::move(tensor);
  }
  auto log_text = ReadFile(layer_dir + ".json");
  if (!log_text.ok()) return damaged(log_text.status());
  const nlohmann::json log = nlohmann::json::parse(*log_text, nullptr, /*allow_exceptions=*/false);
  if (!log.is_object() || !log.contains("log") || !log["log"].is_array()) {
    return damaged(absl::DataLossError(StrCat(layer_dir, ".json: no \"log\" list")));
  }
  for (const auto& line : log["log"]) {
    if (!line.is_string()) return damaged(absl::DataLossError(StrCat(layer_dir, ".json: a log line is not a string")));
    data.log.push_back(line.get<std::string>());
  }
  const nlohmann::json grid = log.contains("grid") ? log["grid"] : nlohmann::json::object();
  for (auto& [name, weight] : data.grid_weights) {
    const auto dtype = grid.is_object() && grid.contains(name) && grid[name].is_string()
                           ? GridDtypes().find(grid[name].get<std::string>())
                           : GridDtypes().end();
    if (dtype == GridDtypes().end() || !weight.real.codes.defined()) {
      return damaged(absl::DataLossError(StrCat(name, ": codes without a float dtype in ", layer_dir, ".json")));
    }
    weight.dtype = dtype->second;
  }
  return data;
}

void RemoveLayerCheckpoint(const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace quark::quantize
