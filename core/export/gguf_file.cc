#include "core/export/gguf_file.h"

#include <cstring>

#include "core/base/status_macros.h"
#include "core/base/strings.h"

namespace quark::exporter::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
// A GGUF of this project holds at most a few hundred tensors and a vocabulary of some 100k tokens: far larger
// counts in a file are damage, refused before any allocation is sized by them.
constexpr uint64_t kMaxCount = uint64_t{1} << 24;
constexpr uint32_t kMaxDims = 4;

uint64_t AlignUp(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

size_t ScalarBytes(ValueType type) {
  switch (type) {
    case ValueType::kUint8: case ValueType::kInt8: case ValueType::kBool: return 1;
    case ValueType::kUint16: case ValueType::kInt16: return 2;
    case ValueType::kUint32: case ValueType::kInt32: case ValueType::kFloat32: return 4;
    case ValueType::kUint64: case ValueType::kInt64: case ValueType::kFloat64: return 8;
    default: return 0;
  }
}

// ---- writing ----

template <typename T>
void Put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

void PutString(std::string& out, const std::string& s) {
  Put<uint64_t>(out, s.size());
  out += s;
}

void PutNumber(std::string& out, ValueType type, double v) {
  switch (type) {
    case ValueType::kUint8: Put<uint8_t>(out, static_cast<uint8_t>(v)); break;
    case ValueType::kInt8: Put<int8_t>(out, static_cast<int8_t>(v)); break;
    case ValueType::kBool: Put<uint8_t>(out, v != 0 ? 1 : 0); break;
    case ValueType::kUint16: Put<uint16_t>(out, static_cast<uint16_t>(v)); break;
    case ValueType::kInt16: Put<int16_t>(out, static_cast<int16_t>(v)); break;
    case ValueType::kUint32: Put<uint32_t>(out, static_cast<uint32_t>(v)); break;
    case ValueType::kInt32: Put<int32_t>(out, static_cast<int32_t>(v)); break;
    case ValueType::kFloat32: Put<float>(out, static_cast<float>(v)); break;
    case ValueType::kUint64: Put<uint64_t>(out, static_cast<uint64_t>(v)); break;
    case ValueType::kInt64: Put<int64_t>(out, static_cast<int64_t>(v)); break;
    case ValueType::kFloat64: Put<double>(out, v); break;
    default: break;
  }
}

void PutValue(std::string& out, const Value& v) {
  Put<uint32_t>(out, static_cast<uint32_t>(v.type));
  if (v.type == ValueType::kString) {
    PutString(out, v.text);
  } else if (v.type == ValueType::kArray) {
    Put<uint32_t>(out, static_cast<uint32_t>(v.element_type));
    if (v.element_type == ValueType::kString) {
      Put<uint64_t>(out, v.texts.size());
      for (const auto& s : v.texts) PutString(out, s);
    } else {
      Put<uint64_t>(out, v.numbers.size());
      for (double n : v.numbers) PutNumber(out, v.element_type, n);
    }
  } else {
    PutNumber(out, v.type, v.number);
  }
}

// ---- reading ----

// A bounds-checked cursor over the mapping; every error names the byte offset.
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}
  uint64_t pos() const { return pos_; }

  template <typename T>
  absl::StatusOr<T> Get(const char* what) {
    if (size_ - pos_ < sizeof(T)) return Truncated(what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  absl::StatusOr<std::string> GetString(const char* what) {
    QUARK_ASSIGN_OR_RETURN(const uint64_t n, Get<uint64_t>(what));
    if (size_ - pos_ < n) return Truncated(what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  absl::StatusOr<double> GetNumber(ValueType type, const char* what) {
    switch (type) {
      case ValueType::kUint8: return Num<uint8_t>(what);
      case ValueType::kInt8: return Num<int8_t>(what);
      case ValueType::kBool: return Num<uint8_t>(what);
      case ValueType::kUint16: return Num<uint16_t>(what);
      case ValueType::kInt16: return Num<int16_t>(what);
      case ValueType::kUint32: return Num<uint32_t>(what);
      case ValueType::kInt32: return Num<int32_t>(what);
      case ValueType::kFloat32: return Num<float>(what);
      case ValueType::kUint64: return Num<uint64_t>(what);
      case ValueType::kInt64: return Num<int64_t>(what);
      case ValueType::kFloat64: return Num<double>(what);
      default:
        return absl::InvalidArgumentError(StrCat("gguf: byte ", pos_, ": ", what, ": value type ",
                                                 static_cast<uint32_t>(type), " is not a number type"));
    }
  }

 private:
  template <typename T>
  absl::StatusOr<double> Num(const char* what) {
    QUARK_ASSIGN_OR_RETURN(const T v, Get<T>(what));
    return static_cast<double>(v);
  }
  absl::Status Truncated(const char* what) const {
    return absl::InvalidArgumentError(StrCat("gguf: byte ", pos_, ": ", what, " runs past the end of the file (",
                                             size_, " bytes)"));
  }
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

absl::StatusOr<Value> ReadValue(Cursor& c, const std::string& key) {
  Value v;
  QUARK_ASSIGN_OR_RETURN(const uint32_t type, c.Get<uint32_t>("value type"));
  v.type = static_cast<ValueType>(type);
  if (v.type == ValueType::kString) {
    QUARK_ASSIGN_OR_RETURN(v.text, c.GetString("string value"));
  } else if (v.type == ValueType::kArray) {
    QUARK_ASSIGN_OR_RETURN(const uint32_t element, c.Get<uint32_t>("array element type"));
    v.element_type = static_cast<ValueType>(element);
    const uint64_t at = c.pos();
    QUARK_ASSIGN_OR_RETURN(const uint64_t count, c.Get<uint64_t>("array length"));
    if (count > kMaxCount) {
      return absl::InvalidArgumentError(StrCat("gguf: byte ", at, ": ", key, ": array length ", count, " is too large"));
    }
    for (uint64_t i = 0; i < count; ++i) {
      if (v.element_type == ValueType::kString) {
        QUARK_ASSIGN_OR_RETURN(std::string s, c.GetString("array string"));
        v.texts.push_back(std::move(s));
      } else {
        QUARK_ASSIGN_OR_RETURN(const double n, c.GetNumber(v.element_type, key.c_str()));
        v.numbers.push_back(n);
      }
    }
  } else {
    QUARK_ASSIGN_OR_RETURN(v.number, c.GetNumber(v.type, key.c_str()));
  }
  return v;
}

}  // namespace

Value Value::Strs(std::vector<std::string> v) {
  Value x;
  x.type = ValueType::kArray;
  x.element_type = ValueType::kString;
  x.texts = std::move(v);
  return x;
}

Value Value::Numbers(ValueType element_type, std::vector<double> v) {
  Value x;
  x.type = ValueType::kArray;
  x.element_type = element_type;
  x.numbers = std::move(v);
  return x;
}

int64_t TensorInfo::Rows() const {
  int64_t rows = 1;
  for (size_t i = 1; i < ne.size(); ++i) rows *= ne[i];
  return rows;
}

uint64_t TensorBytes(GgmlType type, const std::vector<int64_t>& ne) {
  TensorInfo t;
  t.ne = ne;
  return static_cast<uint64_t>(RowBytes(type, t.RowLength())) * static_cast<uint64_t>(t.Rows());
}

uint64_t AssignOffsets(std::vector<TensorInfo>& tensors, uint64_t alignment) {
  uint64_t offset = 0;
  for (TensorInfo& t : tensors) {
    t.offset = offset;
    t.nbytes = TensorBytes(t.type, t.ne);
    offset = AlignUp(offset + t.nbytes, alignment);
  }
  return offset;
}

std::string SerializeHeader(const Metadata& metadata, const std::vector<TensorInfo>& tensors, uint64_t alignment) {
  std::string out;
  Put<uint32_t>(out, kMagic);
  Put<uint32_t>(out, kGgufVersion);
  Put<uint64_t>(out, tensors.size());
  Put<uint64_t>(out, metadata.size());
  for (const auto& [key, value] : metadata) {
    PutString(out, key);
    PutValue(out, value);
  }
  for (const TensorInfo& t : tensors) {
    PutString(out, t.name);
    Put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) Put<uint64_t>(out, static_cast<uint64_t>(n));
    Put<uint32_t>(out, static_cast<uint32_t>(t.type));
    Put<uint64_t>(out, t.offset);
  }
  out.resize(AlignUp(out.size(), alignment), '\0');
  return out;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  QUARK_ASSIGN_OR_RETURN(f->file_, checkpoint::MappedFile::Open(path));
  if (auto s = f->Parse(); !s.ok()) {
    return absl::Status(s.code(), StrCat(path, ": ", std::string(s.message())));
  }
  return f;
}

absl::Status GgufFile::Parse() {
  Cursor c(file_->data(), file_->size());
  QUARK_ASSIGN_OR_RETURN(const uint32_t magic, c.Get<uint32_t>("magic"));
  if (magic != kMagic) return absl::InvalidArgumentError("gguf: byte 0: magic is not \"GGUF\"");
  QUARK_ASSIGN_OR_RETURN(version_, c.Get<uint32_t>("version"));
  if (version_ != 2 && version_ != 3) {
    return absl::InvalidArgumentError(StrCat("gguf: byte 4: version ", version_, " is not 2 or 3"));
  }
  QUARK_ASSIGN_OR_RETURN(const uint64_t n_tensors, c.Get<uint64_t>("tensor count"));
  QUARK_ASSIGN_OR_RETURN(const uint64_t n_kv, c.Get<uint64_t>("metadata count"));
  if (n_tensors > kMaxCount || n_kv > kMaxCount) {
    return absl::InvalidArgumentError(StrCat("gguf: byte 8: counts ", n_tensors, " / ", n_kv, " are too large"));
  }
  for (uint64_t i = 0; i < n_kv; ++i) {
    QUARK_ASSIGN_OR_RETURN(std::string key, c.GetString("metadata key"));
    QUARK_ASSIGN_OR_RETURN(Value value, ReadValue(c, key));
    metadata_[key] = std::move(value);
  }
  uint64_t alignment = kGgufAlignment;
  if (const Value* a = Find("general.alignment")) {
    // Range-checked before the conversion: a float64 1e300 here was undefined behaviour (found by gguf_fuzz).
    if (!(a->number >= 1 && a->number <= static_cast<double>(uint64_t{1} << 32))) {
      return absl::InvalidArgumentError(StrCat("gguf: general.alignment ", a->number, " is not a power of two"));
    }
    alignment = static_cast<uint64_t>(a->number);
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
      return absl::InvalidArgumentError(StrCat("gguf: general.alignment ", alignment, " is not a power of two"));
    }
  }
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t;
    const uint64_t at = c.pos();
    QUARK_ASSIGN_OR_RETURN(t.name, c.GetString("tensor name"));
    QUARK_ASSIGN_OR_RETURN(const uint32_t n_dims, c.Get<uint32_t>("tensor n_dims"));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return absl::InvalidArgumentError(StrCat("gguf: byte ", at, ": tensor ", t.name, ": n_dims ", n_dims));
    }
    for (uint32_t d = 0; d < n_dims; ++d) {
      QUARK_ASSIGN_OR_RETURN(const uint64_t n, c.Get<uint64_t>("tensor dimension"));
      if (n == 0 || n > (uint64_t{1} << 40)) {
        return absl::InvalidArgumentError(StrCat("gguf: byte ", at, ": tensor ", t.name, ": dimension ", n));
      }
      t.ne.push_back(static_cast<int64_t>(n));
    }
    uint64_t elements = 1;  // bounded so that byte counts and offsets below cannot overflow
    for (int64_t n : t.ne) {
      if (static_cast<uint64_t>(n) > (uint64_t{1} << 48) / elements) {
        return absl::InvalidArgumentError(StrCat("gguf: byte ", at, ": tensor ", t.name, ": too many elements"));
      }
      elements *= static_cast<uint64_t>(n);
    }
    QUARK_ASSIGN_OR_RETURN(const uint32_t type, c.Get<uint32_t>("tensor type"));
    t.type = static_cast<GgmlType>(type);
    const TypeTraits* traits = FindType(t.type);
    if (traits == nullptr) {
      return absl::InvalidArgumentError(StrCat("gguf: tensor ", t.name, ": ggml type ", type,
                                               " is not one of F32, F16, BF16, Q8_0, Q4_0, Q4_1"));
    }
    if (t.RowLength() % traits->block_size != 0) {
      return absl::InvalidArgumentError(StrCat("gguf: tensor ", t.name, ": row of ", t.RowLength(),
                                               " is not a multiple of ", traits->name, "'s block of ",
                                               traits->block_size));
    }
    QUARK_ASSIGN_OR_RETURN(t.offset, c.Get<uint64_t>("tensor offset"));
    t.nbytes = TensorBytes(t.type, t.ne);
    if (t.offset % alignment != 0) {
      return absl::InvalidArgumentError(StrCat("gguf: tensor ", t.name, ": offset ", t.offset, " is not aligned to ",
                                               alignment));
    }
    if (tensor_index_.count(t.name)) return absl::InvalidArgumentError(StrCat("gguf: tensor ", t.name, " twice"));
    tensor_index_[t.name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }
  data_offset_ = AlignUp(c.pos(), alignment);
  for (const TensorInfo& t : tensors_) {
    if (t.offset > file_->size() || t.nbytes > file_->size() || data_offset_ + t.offset + t.nbytes > file_->size()) {
      return absl::InvalidArgumentError(StrCat("gguf: tensor ", t.name, ": bytes ", data_offset_ + t.offset, "+",
                                               t.nbytes, " run past the end of the file (", file_->size(), ")"));
    }
  }
  return absl::OkStatus();
}

const Value* GgufFile::Find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const TensorInfo* GgufFile::FindTensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

absl::StatusOr<int64_t> GgufFile::GetInt(const std::string& key) const {
  const Value* v = Find(key);
  if (v == nullptr) return absl::InvalidArgumentError(StrCat("gguf: metadata ", key, " is missing"));
  if (v->type == ValueType::kString || v->type == ValueType::kArray || v->type == ValueType::kFloat32 ||
      v->type == ValueType::kFloat64) {
    return absl::InvalidArgumentError(StrCat("gguf: metadata ", key, " is not an integer"));
  }
  // A u64 past int64's range (2^64 - 1) made the conversion undefined behaviour (found by gguf_fuzz).
  if (!(v->number >= -0x1p63 && v->number < 0x1p63)) {
    return absl::InvalidArgumentError(StrCat("gguf: metadata ", key, " = ", v->number, " is out of range"));
  }
  return static_cast<int64_t>(v->number);
}

absl::StatusOr<double> GgufFile::GetFloat(const std::string& key) const {
  const Value* v = Find(key);
  if (v == nullptr) return absl::InvalidArgumentError(StrCat("gguf: metadata ", key, " is missing"));
  if (v->type == ValueType::kString || v->type == ValueType::kArray) {
    return absl::InvalidArgumentError(StrCat("gguf: metadata ", key, " is not a number"));
  }
  return v->number;
}

absl::StatusOr<std::string> GgufFile::GetString(const std::string& key) const {
  const Value* v = Find(key);
  if (v == nullptr) return absl::InvalidArgumentError(StrCat("gguf: metadata ", key, " is missing"));
  if (v->type != ValueType::kString) return absl::InvalidArgumentError(StrCat("gguf: metadata ", key, " is not a string"));
  return v->text;
}

}  // namespace quark::exporter::gguf
