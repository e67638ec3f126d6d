// Resume of an interrupted quantization: after each finished decoder layer, what a later attempt needs to redo that
// layer without calibrating it or running its algorithms again, kept in a folder that survives the process (kill -9,
// node loss, preemption). A resumed run streams the model from layer 0 as before, but for the checkpointed layers
// it installs the recorded weights and parameters instead of computing them, so the quantized hidden states, the
// float hidden states of the scaling algorithms and every exporter's input come out bit for bit as in the first run;
// the artifact is then byte-identical to an uninterrupted run's.
//
//   <dir>/state.json                  {"fingerprint": ..., "finished_layers": k}  (replaced atomically, last)
//   <dir>/layer-<i>/model.safetensors the layer's edited tensors ("tensor/<HF name>") and the calibrated parameters
//                                     ("param/<module>/<input|output|weight>/<scale|zero_point>")
//   <dir>/layer-<i>.json              the algorithm log lines of the layer
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/numerics/real_quant.h"
#include "core/quantize/layer_quantizer.h"

namespace quark::quantize {

/// A weight kept as its codes (grid_weights.h): Dequantize(real) in `dtype` is the weight, bit for bit.
struct GridWeight {
  RealQuantized real;
  at::ScalarType dtype = at::kFloat;
};

/// What one finished layer leaves for a resumed run.
struct LayerCheckpointData {
  CalibratedParams params;                     // the layer's quantized modules, by full name
  std::map<std::string, at::Tensor> tensors;   // full HF name -> what the algorithms left (scaled, GPTQ'd), own dtype
  std::map<std::string, GridWeight> grid_weights;  // full HF name -> a weight on its grid, as codes
  std::vector<std::string> log;                // the layer's algorithm_log lines
};

class LayerCheckpoint {
 public:
  /// Opens `dir` (created when missing) for a run described by `fingerprint` (every input that decides the
  /// artifact, canonical text). A checkpoint left by a run with another fingerprint, or one that cannot be read, is
  /// discarded (discarded_reason() says why) and the run starts at layer 0. INTERNAL naming the path when the
  /// folder cannot be made.
  static absl::StatusOr<std::unique_ptr<LayerCheckpoint>> Open(const std::string& dir, std::string fingerprint);

  /// Layers 0 .. finished_layers() - 1 are checkpointed.
  int64_t finished_layers() const { return finished_layers_; }
  const std::string& discarded_reason() const { return discarded_reason_; }
  const std::string& dir() const { return dir_; }

  /// Records layer `index`, which must be finished_layers() (layers finish in order). The layer's files are
  /// complete before state.json names it, so a kill at any instant leaves either the old or the new state.
  /// INTERNAL naming the file on a disk error.
  absl::Status Write(int64_t index, const LayerCheckpointData& data);
  /// Reads back layer `index` < finished_layers(); tensors are owned copies in their recorded dtypes. DATA_LOSS
  /// naming the file when it is missing or damaged.
  absl::StatusOr<LayerCheckpointData> Read(int64_t index) const;

 private:
  LayerCheckpoint(std::string dir, std::string fingerprint) : dir_(std::move(dir)), fingerprint_(std::move(fingerprint)) {}
  absl::Status Load();
  absl::Status WriteState(int64_t finished_layers) const;
  std::string LayerDir(int64_t index) const;

  std::string dir_;
  std::string fingerprint_;
  int64_t finished_layers_ = 0;
  std::string discarded_reason_;
};

/// Removes a checkpoint folder (after the artifact is safe); a missing folder is fine.
void RemoveLayerCheckpoint(const std::string& dir);

}  // namespace quark::quantize
