// The importance matrix of the calibration pass (#37): what llama-imatrix (tools/imatrix, collect_imatrix) gathers,
// taken from the streamed forward that already runs each layer on the calibration samples. Per matrix llama.cpp
// multiplies inside a decoder layer (a GGUF tensor named "blk.*": every linear, the MoE router and qwen2_moe's
// shared-expert gate), per input column, the sum of the squared input activations over the rows it multiplied, and
// the number of those rows; for a stacked MoE tensor one slice per expert, counting only the tokens routed to it.
//
// Use: Attach(layer) before the layer's forwards, Detach(layer) after them (LayerHooks' before / after): the
// layer's entries are in stats() from then on, which the GGUF exporter of the same run reads when it writes the
// layer. Sums accumulate in float64 and are stored as float32 (llama-imatrix accumulates in float32, row by row).
// As llama-imatrix does, a forward of fewer than 16 rows does not count for a dense matrix or the router (it does
// for an expert's routed tokens), and a dense matrix no counted forward reached has no entry.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "core/checkpoint/model_config.h"
#include "core/export/gguf_imatrix.h"
#include "core/runtime/decoder_layer.h"

namespace quark::quantize {

class ImatrixCollector {
 public:
  explicit ImatrixCollector(checkpoint::ModelConfig model);
  ~ImatrixCollector();

  /// Wraps every linear of `layer` that llama.cpp names (observing its input, forwarding unchanged) and observes
  /// the input of its MoE block (router). INVALID_ARGUMENT when the layer is attached already.
  absl::Status Attach(runtime::DecoderLayer& layer);
  /// Puts the layer's own linears back and adds what the forwards since Attach saw to stats(). FAILED_PRECONDITION
  /// when `layer` is not the attached one.
  absl::Status Detach(runtime::DecoderLayer& layer);

  /// The entries so far (by GGUF tensor name). Shared: the exporter reads it while the run goes on.
  std::shared_ptr<exporter::gguf::ImatrixStats> stats() const { return stats_; }

  /// The GGUF name and expert slice of the HF weight `hf_weight` ("model.layers.0.mlp.down_proj.weight"); an empty
  /// name when llama.cpp has no such matrix.
  struct Slot {
    std::string name;
    int64_t expert = -1;
  };
  Slot GgufSlotOf(const std::string& hf_weight) const;

  struct Sink;  // one matrix's running sums (imatrix_collector.cc)

 private:
  void Add(const Slot& slot, const Sink& sink, int64_t ncols);

  checkpoint::ModelConfig model_;
  std::shared_ptr<exporter::gguf::ImatrixStats> stats_;
  runtime::DecoderLayer* attached_ = nullptr;
  struct Wrapped;
  std::map<std::string, std::unique_ptr<Wrapped>> wrapped_;  // by the layer's relative linear name
  std::map<std::string, std::shared_ptr<Sink>> routers_;    // by full HF weight name
};

}  // namespace quark::quantize
