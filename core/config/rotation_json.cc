#include "core/config/rotation_json.h"

#include <cmath>
#include <cstdint>
#include <set>
#include <type_traits>

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/config/json_read.h"

namespace quark {
namespace {

using OrderedJson = nlohmann::ordered_json;

// Quark 0.13's RotationConfig keys whose only value here is the one this engine implements (the offline R1 + R2 of a
// Llama layout): another value names an online rotation, a block rotation, OSTQuant's smoothing or another layout.
bool Supported(const std::string& key, const OrderedJson& v) {
  static const std::set<std::string> kNullOrFalse = {"online_r1_rotation", "train_smooth"};
  if (key == "r1") return v == OrderedJson(true);
  if (key == "r3") return v == OrderedJson(false);
  if (key == "r4") return true;  // RotationAlgo::r4, read (and type-checked) with the engine's own fields
  if (kNullOrFalse.count(key)) return v.is_null() || v == OrderedJson(false);
  if (key == "rotation_size" || key == "online_config") return v.is_null();
  if (key == "smooth_positions") return v.is_null() || v == OrderedJson::array();
  if (key == "backbone") return v == OrderedJson("model");
  if (key == "model_decoder_layers") return v == OrderedJson("model.layers");
  if (key == "v_proj") return v == OrderedJson("self_attn.v_proj");
  if (key == "o_proj") return v == OrderedJson("self_attn.o_proj");
  if (key == "self_attn") return v == OrderedJson("self_attn");
  if (key == "mlp") return v == OrderedJson("mlp");
  return false;
}

const std::set<std::string>& FixedQuarkKeys() {
  static const std::set<std::string> kKeys = {"r1",          "r3",           "r4",     "online_r1_rotation",
                                              "train_smooth", "rotation_size", "online_config", "smooth_positions",
                                              "backbone",    "model_decoder_layers", "v_proj", "o_proj",
                                              "self_attn",   "mlp"};
  return kKeys;
}

template <typename T>
absl::Status ReadInteger(const OrderedJson& j, const char* key, const std::string& path, T& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  const bool fits = std::is_unsigned_v<T> ? it->is_number_unsigned() : it->is_number_integer();
  if (!fits) return absl::InvalidArgumentError(StrCat(path, ".", key, ": expected an integer, got ", it->dump()));
  out = it->get<T>();
  return absl::OkStatus();
}

}  // namespace

absl::Status RotationFieldsFromJson(const OrderedJson& j, const std::string& path, RotationAlgo& out) {
  static const std::set<std::string> kOwn = {"name",          "random",       "random_r1", "random_r2",
                                             "scaling_layers", "r2",          "trainable", "learning_rate",
                                             "max_steps",     "train_batch_size", "seed",  "max_memory_bytes"};
  for (const auto& [key, value] : j.items()) {
    if (FixedQuarkKeys().count(key)) {
      if (key == "r3" && value == OrderedJson(true)) {
        return absl::UnimplementedError(StrCat(path, ".r3: true is not implemented: R3 is an online Hadamard on the "
                                               "attention's queries and keys (compressed-tensors' q_attn / k_cache "
                                               "locations), which vLLM's compressed-tensors loader does not implement "
                                               "yet and its quark loader has no transform for"));
      }
      if (!Supported(key, value)) {
        return absl::UnimplementedError(StrCat(path, ".", key, ": ", value.dump(),
                                               " is not implemented (this engine's rotation is Quark's offline R1 with "
                                               "R2 on a Llama layout, and R4: r1 true, r3 false, no online R1, no "
                                               "rotation_size, no train_smooth)"));
      }
      continue;
    }
    if (kOwn.count(key) == 0) {
      return absl::InvalidArgumentError(StrCat(path, ".", key, ": not a field of Quark's rotation config (nor of its "
                                               "training arguments learning_rate, max_steps, train_batch_size; or "
                                               "seed, max_memory_bytes)"));
    }
  }
  QUARK_RETURN_IF_ERROR(ReadJsonBool(j, "random", path, out.random));
  // Quark 0.13 split `random` into random_r1 / random_r2; this engine draws both from one switch.
  bool random_r1 = out.random, random_r2 = out.random;
  QUARK_RETURN_IF_ERROR(ReadJsonBool(j, "random_r1", path, random_r1));
  QUARK_RETURN_IF_ERROR(ReadJsonBool(j, "random_r2", path, random_r2));
  if (random_r1 != random_r2) {
    return absl::UnimplementedError(StrCat(path, ".random_r2: ", random_r2, " differs from random_r1 (", random_r1,
                                           "): R1 and R2 are both Hadamard or both random here"));
  }
  out.random = random_r1;
  QUARK_RETURN_IF_ERROR(ReadJsonBool(j, "r2", path, out.r2));
  QUARK_RETURN_IF_ERROR(ReadJsonBool(j, "r4", path, out.r4));
  QUARK_RETURN_IF_ERROR(ReadJsonBool(j, "trainable", path, out.trainable));
  if (auto it = j.find("learning_rate"); it != j.end() && !it->is_null()) {
    if (!it->is_number() || !std::isfinite(it->get<double>())) {
      return absl::InvalidArgumentError(StrCat(path, ".learning_rate: expected a number, got ", it->dump()));
    }
    out.learning_rate = it->get<double>();
  }
  QUARK_RETURN_IF_ERROR(ReadInteger(j, "max_steps", path, out.max_steps));
  QUARK_RETURN_IF_ERROR(ReadInteger(j, "train_batch_size", path, out.train_batch_size));
  QUARK_RETURN_IF_ERROR(ReadInteger(j, "seed", path, out.seed));
  return ReadInteger(j, "max_memory_bytes", path, out.max_memory_bytes);
}

void RotationFieldsToJson(const RotationAlgo& a, OrderedJson& j) {
  j["random"] = a.random;
  // Written only away from the defaults, so a Hadamard entry reads as it always has.
  if (!a.r2) j["r2"] = false;
  if (a.r4) j["r4"] = true;
  if (!a.trainable) return;
  j["trainable"] = true;
  j["learning_rate"] = a.learning_rate;
  j["max_steps"] = a.max_steps;
  j["train_batch_size"] = a.train_batch_size;
  j["seed"] = a.seed;
  j["max_memory_bytes"] = a.max_memory_bytes;
}

absl::Status CheckRotationTrainingRanges(const RotationAlgo& a, const std::string& path) {
  if (!a.trainable) {
    const RotationAlgo defaults;
    for (const auto& [name, set] : {std::pair{"learning_rate", a.learning_rate != defaults.learning_rate},
                                    std::pair{"max_steps", a.max_steps != defaults.max_steps},
                                    std::pair{"train_batch_size", a.train_batch_size != defaults.train_batch_size},
                                    std::pair{"seed", a.seed != defaults.seed},
                                    std::pair{"max_memory_bytes", a.max_memory_bytes != defaults.max_memory_bytes}}) {
      if (set) return absl::InvalidArgumentError(StrCat(path, ".", name, ": set, but the rotation is not trainable"));
    }
    return absl::OkStatus();
  }
  // The ranges of learned_rotation.h's LearnedRotationOptions (ValidateLearnedRotationOptions calls this).
  if (!(a.learning_rate > 0 && a.learning_rate <= 10)) {
    return absl::InvalidArgumentError(StrCat(path, ".learning_rate: ", a.learning_rate, " is outside (0, 10]"));
  }
  if (a.max_steps < 1 || a.max_steps > 100000) {
    return absl::InvalidArgumentError(StrCat(path, ".max_steps: ", a.max_steps, " is outside [1, 100000]"));
  }
  if (a.train_batch_size < 1 || a.train_batch_size > 4096) {
    return absl::InvalidArgumentError(StrCat(path, ".train_batch_size: ", a.train_batch_size, " is outside [1, 4096]"));
  }
  if (a.max_memory_bytes <= 0) {
    return absl::InvalidArgumentError(StrCat(path, ".max_memory_bytes: ", a.max_memory_bytes, " is not positive"));
  }
  return absl::OkStatus();
}

}  // namespace quark
