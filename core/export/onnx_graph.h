// A small builder over onnx::GraphProto for the exporter: nodes appended in the order they are made (so a graph built
// front to back is topologically sorted), unique value names, constants, initializers whose bytes above a threshold go
// to ONNX external data (`<model>.onnx.data`, written as they arrive so a big model streams), and the few operators
// whose signature changed across the opsets this exporter emits (Reduce* take `axes` as an input from opset 18).
// Internal to core/export: it includes the heavy onnx headers, which public engine headers keep out.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <onnx/onnx_pb.h>

#include "absl/status/statusor.h"

namespace quark::exporter::onnx_export {

/// TensorProto.DataType numbers. onnx 1.12's enum stops at BFLOAT16; the later types are plain numbers of the same
/// int32 field, as the ONNX spec (1.14+: float8, 1.16+: int4) defines them.
enum OnnxType : int32_t {
  kOnnxFloat = 1,
  kOnnxUInt8 = 2,
  kOnnxInt8 = 3,
  kOnnxInt32 = 6,
  kOnnxInt64 = 7,
  kOnnxBool = 9,
  kOnnxFloat16 = 10,
  kOnnxBFloat16 = 16,
  kOnnxFloat8E4M3FN = 17,
  kOnnxFloat8E5M2 = 19,
  kOnnxUInt4 = 21,
  kOnnxInt4 = 22,
};

/// The IR version that goes with an opset (17 -> 8, 19 -> 9, 21 -> 10).
int64_t IrVersionFor(int opset);

/// Appends tensor bytes to the external data file, each tensor at a 64-byte aligned offset.
class ExternalDataFile {
 public:
  /// Creates (truncates) `path`; `location` is the name written into the model (relative to it).
  static absl::StatusOr<std::unique_ptr<ExternalDataFile>> Create(const std::string& path, std::string location);
  ~ExternalDataFile();
  /// Writes `size` bytes and points `tensor` at them (data_location EXTERNAL, location / offset / length).
  absl::Status Append(const void* bytes, uint64_t size, onnx::TensorProto& tensor);
  absl::Status Close();
  uint64_t size() const { return offset_; }

 private:
  ExternalDataFile() = default;
  std::string path_, location_;
  std::FILE* file_ = nullptr;
  uint64_t offset_ = 0;
};

class OnnxGraph {
 public:
  /// `data` (may be null: everything inline) receives initializers of at least `external_threshold` bytes.
  OnnxGraph(int opset, ExternalDataFile* data, uint64_t external_threshold);

  int opset() const { return opset_; }
  onnx::GraphProto& proto() { return graph_; }

  struct Attr {
    std::string name;
    enum Kind { kInt, kFloat, kInts } kind;
    int64_t i = 0;
    float f = 0;
    std::vector<int64_t> ints;
  };
  static Attr Int(std::string name, int64_t v) { return {std::move(name), Attr::kInt, v, 0, {}}; }
  static Attr Float(std::string name, float v) { return {std::move(name), Attr::kFloat, 0, v, {}}; }
  static Attr Ints(std::string name, std::vector<int64_t> v) { return {std::move(name), Attr::kInts, 0, 0, std::move(v)}; }

  /// Appends a node with one output named after `hint` (made unique); returns the output's name. An empty input
  /// name is an omitted optional input.
  std::string Op(const std::string& op, std::vector<std::string> inputs, const std::string& hint,
                 std::vector<Attr> attrs = {});
  /// As Op, writing to the given output names.
  void OpTo(const std::string& op, std::vector<std::string> inputs, std::vector<std::string> outputs,
            std::vector<Attr> attrs = {});

  /// An initializer of `onnx_type` with `dims` whose little-endian bytes are `data` (contiguous CPU tensor holding
  /// exactly those bytes, e.g. uint8 for packed 4-bit). Returns `name` (which must be unique).
  absl::StatusOr<std::string> Initializer(const std::string& name, int32_t onnx_type, const std::vector<int64_t>& dims,
                                          const at::Tensor& data);
  /// A float32 tensor initializer in its own shape.
  absl::StatusOr<std::string> FloatInitializer(const std::string& name, const at::Tensor& data);
  /// Small inline constants (deduplicated by value).
  std::string ConstI64(const std::vector<int64_t>& values, bool scalar = false);
  std::string ConstF32(float value);

  /// ReduceMax / ReduceMin / ReduceMean over `axes` (empty = all), in the opset's spelling.
  std::string Reduce(const std::string& op, const std::string& x, const std::vector<int64_t>& axes, bool keepdims,
                     const std::string& hint);

  void AddInput(const std::string& name, int32_t elem_type, const std::vector<std::string>& dims);
  void AddOutput(const std::string& name, int32_t elem_type, const std::vector<std::string>& dims);
  /// Bytes of initializers written inline and to external data.
  uint64_t inline_bytes() const { return inline_bytes_; }

 private:
  std::string Unique(const std::string& hint);

  int opset_;
  ExternalDataFile* data_;
  uint64_t threshold_;
  onnx::GraphProto graph_;
  std::map<std::string, std::string> constants_;  // value key -> name
  int64_t counter_ = 0;
  uint64_t inline_bytes_ = 0;
};

}  // namespace quark::exporter::onnx_export
