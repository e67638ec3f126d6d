// The `rotation` algo_config entry in JSON (#35 item 4 adds Quark's `trainable`): Quark 0.13's RotationConfig keys,
// read at the values this engine implements, plus the training arguments of Quark's rotation script.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "core/config/quant_spec.h"

namespace quark {

/// Reads every key of a rotation entry but `scaling_layers` (quark_json.cc reads those, as for the other algorithms)
/// into `out`. Quark 0.13's keys are accepted at the values this engine implements: r1 true; r3 false (true is
/// UNIMPLEMENTED with vLLM's reason); r4 true or false (RotationAlgo::r4);
/// online_r1_rotation false or null; rotation_size, online_config null; train_smooth false or null; smooth_positions
/// null or empty; random_r1 equal to random_r2 (they become `random`); backbone, model_decoder_layers, v_proj, o_proj,
/// self_attn, mlp at the Llama layout's names. Another value is UNIMPLEMENTED naming `path.key`; an unknown key or a
/// value of the wrong type is INVALID_ARGUMENT naming `path.key`. Ranges are checked by ValidateConfig.
absl::Status RotationFieldsFromJson(const nlohmann::ordered_json& j, const std::string& path, RotationAlgo& out);

/// `random`, `r2` when off, `r4` when on, and `trainable` with the training arguments when on (scaling_layers: quark_json.cc).
void RotationFieldsToJson(const RotationAlgo& a, nlohmann::ordered_json& j);

/// The training arguments' ranges, for a trainable entry: INVALID_ARGUMENT naming `path.field` (learning_rate in
/// (0, 10], max_steps in [1, 100000], train_batch_size in [1, 4096], max_memory_bytes positive). For an entry that
/// is not trainable, INVALID_ARGUMENT naming a training argument set away from its default (it would do nothing).
absl::Status CheckRotationTrainingRanges(const RotationAlgo& a, const std::string& path);

}  // namespace quark
