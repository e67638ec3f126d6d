// What the memory estimate of a quantize run needs of its options (#32 item 5: the routed-expert group a run streams
// with, estimate/expert_group_choice.h), shared by `quark quantize --expert-group-size auto` and quark-worker.
#pragma once

#include "core/estimate/expert_group_choice.h"
#include "core/quantize/quantize_model.h"

namespace quark {

inline estimate::RunMemoryInputs RunMemoryInputsOf(const QuantizeModelOptions& options) {
  estimate::RunMemoryInputs run;
  run.config = options.config;
  run.calibration_samples = options.num_calibration_samples;
  run.calibration_seq_len = options.seq_len;
  run.evaluates = !options.eval_text_file.empty();
  run.evaluation_seq_len = options.eval_seq_len;
  return run;
}

}  // namespace quark
