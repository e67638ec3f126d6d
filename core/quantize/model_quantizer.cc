#include "core/quantize/model_quantizer.h"

#include <map>

#include <ATen/core/grad_mode.h>

#include "core/base/strings.h"
#include "core/config/validation.h"
#include "core/quantize/child_replacement.h"
#include "core/quantize/quantized_module_factory.h"
#include "core/runtime/layer_streamer.h"

namespace quark::quantize {
namespace {

using torch::nn::Module;

// A recognized module of the tree: its plan entry's ModuleInfo plus where it hangs.
struct Found {
  std::shared_ptr<Module> module;
  std::shared_ptr<Module> parent;  // nullptr for the root
  std::string child_name;          // the last component of the path
};

std::pair<std::string, std::string> SplitPath(const std::string& path) {
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos) return {"", path};
  return {path.substr(0, dot), path.substr(dot + 1)};
}

// Walks the tree: every recognized module (ModuleInfo for the plan, and its parent), in named_modules() order.
absl::Status FindModules(const std::shared_ptr<Module>& root, std::vector<ModuleInfo>& infos,
                         std::map<std::string, Found>& found) {
  std::map<std::string, std::shared_ptr<Module>> by_path;
  std::map<const Module*, std::string> seen;
  for (const auto& item : root->named_modules(/*name_prefix=*/"", /*include_self=*/true)) {
    by_path[item.key()] = item.value();
    const std::string type = QuantizableModuleType(*item.value());
    if (type.empty()) continue;
    if (auto [it, fresh] = seen.emplace(item.value().get(), item.key()); !fresh) {
      return absl::FailedPreconditionError(StrCat(item.key(), ": the same ", type, " object is also registered as ",
                                                  it->second, "; one in-place replacement cannot serve both"));
    }
    infos.push_back({item.key(), type, QuantizableModuleWeight(*item.value()).sizes().vec()});
    const auto [parent_path, child] = SplitPath(item.key());
    found[item.key()] = {item.value(), item.key().empty() ? nullptr : by_path.at(parent_path), child};
  }
  return absl::OkStatus();
}

absl::Status WithSource(const absl::Status& status, const LayerAssignment& a) {
  return absl::Status(status.code(), StrCat(std::string(status.message()), " (", a.module_type, ", config from ",
                                            a.SourceLabel(), ")"));
}

}  // namespace

std::string ModuleReport::ToString() const {
  std::string line = StrCat(name, " ", type, " ", source);
  if (!ignored_fields.empty()) line += StrCat(" (ignored: ", StrJoin(ignored_fields, ", "), ")");
  return line;
}

absl::StatusOr<std::unique_ptr<ModelQuantizer>> ModelQuantizer::Quantize(const std::shared_ptr<Module>& root,
                                                                         const Config& config) {
  if (root == nullptr) return absl::InvalidArgumentError("ModelQuantizer: no model (root module is null)");
  if (auto s = ValidationStatus(ValidateConfig(config)); !s.ok()) return s;
  std::vector<ModuleInfo> infos;
  std::map<std::string, Found> found;
  if (auto s = FindModules(root, infos, found); !s.ok()) return s;
  std::unique_ptr<ModelQuantizer> q(new ModelQuantizer());
  q->plan_ = BuildLayerPlan(config, infos);
  // Build every quantized module and check every parent before touching the model: all or nothing.
  std::vector<torch::nn::AnyModule> replacements;
  for (const LayerAssignment& a : q->plan_.layers) {
    if (a.source == ConfigSource::kExcluded || a.config.Empty()) continue;
    const Found& f = found.at(a.module);
    if (f.parent == nullptr) {
      return absl::FailedPreconditionError(StrCat("the root module is a ", a.module_type, " and cannot be replaced in ",
                                                  "place: wrap it in a Sequential"));
    }
    if (auto s = CanReplaceChildOf(*f.parent, a.module); !s.ok()) return s;
    auto handle = MakeQuantizedModule(a.module, a.module_type, a.config, *f.module);
    if (!handle.ok()) return WithSource(handle.status(), a);
    q->modules_.push_back({a.module, a.module_type, a.SourceLabel(), handle->module.ptr(), handle->quantizers});
    replacements.push_back(std::move(handle->module));
  }
  for (size_t i = 0; i < replacements.size(); ++i) {
    const Found& f = found.at(q->modules_[i].name);
    absl::Status replaced = ReplaceChildInPlace(*f.parent, f.child_name, q->modules_[i].name, replacements[i]);
    if (replaced.ok()) continue;
    // Only a user's ReplaceableParent can fail here (the containers were checked above): put the float modules
    // that were already swapped back, so that a refused model is left as it was.
    for (size_t j = i; j-- > 0;) {
      const Found& done = found.at(q->modules_[j].name);
      const absl::Status restored = ReplaceChildInPlace(*done.parent, done.child_name, q->modules_[j].name,
                                                        AnyOfFloatModule(done.module));
      if (!restored.ok()) {
        return absl::Status(replaced.code(), StrCat(std::string(replaced.message()), "; restoring the float module ",
                                                    q->modules_[j].name, " failed too: ",
                                                    std::string(restored.message())));
      }
    }
    return replaced;
  }
  return q;
}

bool ModelQuantizer::NeedsCalibration() const {
  for (const QuantizedModule& m : modules_) {
    if (m.quantizers->NeedsCalibration()) return true;
  }
  return false;
}

absl::Status ModelQuantizer::CalibrateBatches(size_t count, const std::function<void(size_t)>& run_batch) {
  if (frozen_) return absl::FailedPreconditionError("ModelQuantizer: calibration after Freeze");
  if (!NeedsCalibration()) return absl::OkStatus();  // weight-only / dynamic: nothing to observe
  if (count == 0) {
    return absl::FailedPreconditionError("ModelQuantizer: static activations need at least one calibration batch");
  }
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < count; ++i) {
    try {
      run_batch(i);
    } catch (const std::exception& error) {
      return runtime::TorchErrorToStatus(error, StrCat("calibration batch ", i));
    }
  }
  return absl::OkStatus();
}

absl::Status ModelQuantizer::Freeze() {
  at::NoGradGuard no_grad;
  for (const QuantizedModule& m : modules_) {
    if (auto s = m.quantizers->Freeze(); !s.ok()) return s;
  }
  frozen_ = true;
  return absl::OkStatus();
}

const QuantizedModule* ModelQuantizer::Find(const std::string& name) const {
  for (const QuantizedModule& m : modules_) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

absl::StatusOr<RealQuantized> ModelQuantizer::ExportWeight(const std::string& name) const {
  const QuantizedModule* m = Find(name);
  if (m == nullptr) return absl::NotFoundError(StrCat(name, ": not a quantized module of this model"));
  return m->quantizers->ExportWeight();
}

std::vector<ModuleReport> ModelQuantizer::Report() const {
  std::vector<ModuleReport> report;
  for (const LayerAssignment& a : plan_.layers) {
    ModuleReport line{a.module, a.module_type, a.SourceLabel(), false, {}};
    if (const QuantizedModule* m = Find(a.module)) {
      line.quantized = true;
      line.ignored_fields = m->quantizers->ignored_fields();
    }
    report.push_back(std::move(line));
  }
  return report;
}

}  // namespace quark::quantize
