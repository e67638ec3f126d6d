#include "core/cli/eval_model.h"

#include <iostream>

#include "core/cli/command_registry.h"
#include "core/runtime/compute_device.h"

namespace quark::cli {

absl::StatusOr<runtime::StreamerOptions> EvalStreamerOptions(const EvalArgs& args) {
  runtime::StreamerOptions options;
  absl::StatusOr<runtime::ComputeDevice> device = runtime::ComputeDevice::Open(args.device, "--device");
  if (!device.ok()) return absl::InvalidArgumentError(device.status().message());
  // Perplexity is the layer streamer and the head alone, which place everything on their device (docs/gpu.md); the
  // KLD and task scorers read logits in host memory.
  if (!device->is_cpu() && (args.kld || !args.tasks.empty())) {
    return absl::InvalidArgumentError("--device: --kld and --tasks run on the CPU in this build (perplexity runs on " +
                                      device->name() + ")");
  }
  options.device = *device;
  absl::StatusOr<at::ScalarType> dtype = runtime::ResolveComputeDtype(args.dtype, "--dtype");
  if (!dtype.ok()) return dtype.status();
  options.compute_dtype = *dtype;
  return options;
}

int EvalFailure(const absl::Status& status) {
  std::cerr << "quark eval: " << status.message() << "\n";
  return status.code() == absl::StatusCode::kInvalidArgument || status.code() == absl::StatusCode::kNotFound
             ? kExitBadInput
             : kExitFailure;
}

absl::StatusOr<std::vector<int64_t>> EvalInputIds(const std::string& text_file, const std::string& token_ids_file,
                                                  const EvalModel& model) {
  if (!token_ids_file.empty()) {
    auto sequences = runtime::ReadTokenIdFile(token_ids_file);
    if (!sequences.ok()) return sequences.status();
    std::vector<int64_t> ids;
    for (const auto& s : *sequences) ids.insert(ids.end(), s.begin(), s.end());
    return ids;  // pre-tokenized input is taken as is (BOS included by the producer)
  }
  auto tokenizer = OpenEvalTokenizer(model);
  if (!tokenizer.ok()) return tokenizer.status();
  auto text = runtime::ReadTextFile(text_file);
  if (!text.ok()) return text.status();
  return (*tokenizer)->EncodeWithBos(*text);
}

}  // namespace quark::cli
