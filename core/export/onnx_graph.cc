#include "core/export/onnx_graph.h"

#include <cstring>

#include "core/base/strings.h"
#include "core/base/write_error.h"

namespace quark::exporter::onnx_export {
namespace {

constexpr uint64_t kAlignment = 64;

void SetAttr(onnx::NodeProto& node, const OnnxGraph::Attr& a) {
  onnx::AttributeProto* attr = node.add_attribute();
  attr->set_name(a.name);
  switch (a.kind) {
    case OnnxGraph::Attr::kInt:
      attr->set_type(onnx::AttributeProto::INT);
      attr->set_i(a.i);
      break;
    case OnnxGraph::Attr::kFloat:
      attr->set_type(onnx::AttributeProto::FLOAT);
      attr->set_f(a.f);
      break;
    case OnnxGraph::Attr::kInts:
      attr->set_type(onnx::AttributeProto::INTS);
      for (int64_t v : a.ints) attr->add_ints(v);
      break;
  }
}

void SetValueInfo(onnx::ValueInfoProto& info, const std::string& name, int32_t elem_type,
                  const std::vector<std::string>& dims) {
  info.set_name(name);
  auto* tensor = info.mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(elem_type);
  auto* shape = tensor->mutable_shape();
  for (const std::string& d : dims) {
    auto* dim = shape->add_dim();
    // A number is a fixed size, anything else a symbolic one ("batch", "sequence").
    if (!d.empty() && d.find_first_not_of("0123456789") == std::string::npos) {
      dim->set_dim_value(std::stoll(d));
    } else {
      dim->set_dim_param(d);
    }
  }
}

}  // namespace

int64_t IrVersionFor(int opset) {
  if (opset >= 21) return 10;
  if (opset >= 19) return 9;
  return 8;
}

absl::StatusOr<std::unique_ptr<ExternalDataFile>> ExternalDataFile::Create(const std::string& path,
                                                                           std::string location) {
  std::unique_ptr<ExternalDataFile> f(new ExternalDataFile());
  f->path_ = path;
  f->location_ = std::move(location);
  f->file_ = std::fopen(path.c_str(), "wb");
  if (f->file_ == nullptr) return WriteError(StrCat(path, ": cannot create"), errno);
  return f;
}

ExternalDataFile::~ExternalDataFile() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status ExternalDataFile::Append(const void* bytes, uint64_t size, onnx::TensorProto& tensor) {
  if (file_ == nullptr) return absl::FailedPreconditionError(StrCat(path_, ": already closed"));
  static const char kZeros[kAlignment] = {};
  const uint64_t pad = (kAlignment - offset_ % kAlignment) % kAlignment;
  if (pad > 0 && std::fwrite(kZeros, 1, pad, file_) != pad) {
    return WriteError(StrCat(path_, ": write failed"), errno);
  }
  offset_ += pad;
  if (size > 0 && std::fwrite(bytes, 1, size, file_) != size) {
    return WriteError(StrCat(path_, ": write failed"), errno);
  }
  tensor.set_data_location(onnx::TensorProto::EXTERNAL);
  for (const auto& [key, value] : {std::pair<const char*, std::string>{"location", location_},
                                   {"offset", std::to_string(offset_)},
                                   {"length", std::to_string(size)}}) {
    auto* entry = tensor.add_external_data();
    entry->set_key(key);
    entry->set_value(value);
  }
  offset_ += size;
  return absl::OkStatus();
}

absl::Status ExternalDataFile::Close() {
  if (file_ == nullptr) return absl::OkStatus();
  const bool ok = std::fflush(file_) == 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!ok || !closed) return WriteError(StrCat(path_, ": close failed"), errno);
  return absl::OkStatus();
}

OnnxGraph::OnnxGraph(int opset, ExternalDataFile* data, uint64_t external_threshold)
    : opset_(opset), data_(data), threshold_(external_threshold) {}

std::string OnnxGraph::Unique(const std::string& hint) { return StrCat(hint, "_", counter_++); }

std::string OnnxGraph::Op(const std::string& op, std::vector<std::string> inputs, const std::string& hint,
                          std::vector<Attr> attrs) {
  std::string out = Unique(hint);
  OpTo(op, std::move(inputs), {out}, std::move(attrs));
  return out;
}

void OnnxGraph::OpTo(const std::string& op, std::vector<std::string> inputs, std::vector<std::string> outputs,
                     std::vector<Attr> attrs) {
  onnx::NodeProto* node = graph_.add_node();
  node->set_op_type(op);
  node->set_name(StrCat(op, "_", counter_++));
  // Trailing omitted optional inputs are dropped; inner ones stay as "".
  while (!inputs.empty() && inputs.back().empty()) inputs.pop_back();
  for (auto& in : inputs) node->add_input(std::move(in));
  for (auto& out : outputs) node->add_output(std::move(out));
  for (const Attr& a : attrs) SetAttr(*node, a);
}

absl::StatusOr<std::string> OnnxGraph::Initializer(const std::string& name, int32_t onnx_type,
                                                   const std::vector<int64_t>& dims, const at::Tensor& data) {
  if (!data.defined() || !data.is_contiguous() || data.device().type() != at::kCPU) {
    return absl::InternalError(StrCat(name, ": initializer data must be a contiguous CPU tensor"));
  }
  onnx::TensorProto* t = graph_.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx_type);
  for (int64_t d : dims) t->add_dims(d);
  const uint64_t bytes = data.nbytes();
  if (data_ != nullptr && bytes >= threshold_) {
    if (auto s = data_->Append(data.data_ptr(), bytes, *t); !s.ok()) return s;
    return name;
  }
  t->set_raw_data(data.data_ptr(), bytes);
  inline_bytes_ += bytes;
  return name;
}

absl::StatusOr<std::string> OnnxGraph::FloatInitializer(const std::string& name, const at::Tensor& data) {
  const at::Tensor f = data.to(at::kFloat).contiguous();
  return Initializer(name, kOnnxFloat, f.sizes().vec(), f);
}

std::string OnnxGraph::ConstI64(const std::vector<int64_t>& values, bool scalar) {
  std::string key = scalar ? "i64s" : "i64v";
  for (int64_t v : values) key += StrCat(":", v);
  auto it = constants_.find(key);
  if (it != constants_.end()) return it->second;
  const std::string name = Unique("const_i64");
  onnx::TensorProto* t = graph_.add_initializer();
  t->set_name(name);
  t->set_data_type(kOnnxInt64);
  if (!scalar) t->add_dims(static_cast<int64_t>(values.size()));
  t->set_raw_data(values.data(), values.size() * sizeof(int64_t));
  constants_[key] = name;
  return name;
}

std::string OnnxGraph::ConstF32(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const std::string key = StrCat("f32:", bits);
  auto it = constants_.find(key);
  if (it != constants_.end()) return it->second;
  const std::string name = Unique("const_f32");
  onnx::TensorProto* t = graph_.add_initializer();
  t->set_name(name);
  t->set_data_type(kOnnxFloat);
  t->set_raw_data(&value, sizeof(value));
  constants_[key] = name;
  return name;
}

std::string OnnxGraph::Reduce(const std::string& op, const std::string& x, const std::vector<int64_t>& axes,
                              bool keepdims, const std::string& hint) {
  // ReduceMean/Max/Min moved `axes` from an attribute to an input in opset 18.
  if (opset_ >= 18) {
    return Op(op, {x, axes.empty() ? "" : ConstI64(axes)}, hint, {Int("keepdims", keepdims ? 1 : 0)});
  }
  std::vector<Attr> attrs = {Int("keepdims", keepdims ? 1 : 0)};
  if (!axes.empty()) attrs.push_back(Ints("axes", axes));
  return Op(op, {x}, hint, std::move(attrs));
}

void OnnxGraph::AddInput(const std::string& name, int32_t elem_type, const std::vector<std::string>& dims) {
  SetValueInfo(*graph_.add_input(), name, elem_type, dims);
}

void OnnxGraph::AddOutput(const std::string& name, int32_t elem_type, const std::vector<std::string>& dims) {
  SetValueInfo(*graph_.add_output(), name, elem_type, dims);
}

}  // namespace quark::exporter::onnx_export
