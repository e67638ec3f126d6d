#include "core/export/gguf_imatrix.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/export/gguf_file.h"

namespace quark::exporter::gguf {
namespace {

constexpr char kSum2[] = ".in_sum2";
constexpr char kCounts[] = ".counts";

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

absl::Status CheckFinite(const std::string& path, const std::string& name, const std::vector<float>& v) {
  for (float f : v) {
    if (!std::isfinite(f)) return absl::InvalidArgumentError(StrCat("imatrix: ", path, ": ", name, " holds ", f));
  }
  return absl::OkStatus();
}

// Legacy .dat: int32 n_entries; per entry int32 len, name, int32 ncall, int32 nval, float[nval]; then optionally
// int32 chunk count, int32 len, dataset name.
absl::StatusOr<ImatrixStats> ReadLegacy(const std::string& path, const std::string& bytes) {
  size_t at = 0;
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(StrCat("imatrix: ", path, ": ", what, " at byte ", at));
  };
  auto i32 = [&](int32_t* v) {
    if (at + 4 > bytes.size()) return false;
    std::memcpy(v, bytes.data() + at, 4);
    at += 4;
    return true;
  };
  ImatrixStats stats;
  int32_t n_entries = 0;
  if (!i32(&n_entries) || n_entries < 1) return bad("no entries (neither GGUF nor a legacy .dat)");
  for (int32_t e = 0; e < n_entries; ++e) {
    int32_t len = 0, ncall = 0, nval = 0;
    if (!i32(&len) || len < 1 || at + static_cast<size_t>(len) > bytes.size()) return bad(StrCat("entry ", e, ": name length"));
    std::string name = bytes.substr(at, len);
    at += len;
    if (!i32(&ncall) || !i32(&nval) || nval < 1 || at + 4ull * nval > bytes.size()) {
      return bad(StrCat("entry ", e, " (", name, "): ncall / nval"));
    }
    ImatrixEntry entry;
    entry.legacy = true;
    entry.ncols = nval;
    entry.sum2.resize(nval);
    std::memcpy(entry.sum2.data(), bytes.data() + at, 4ull * nval);
    at += 4ull * nval;
    entry.counts = {static_cast<float>(ncall)};
    QUARK_RETURN_IF_ERROR(CheckFinite(path, name, entry.sum2));
    stats.entries[name] = std::move(entry);
  }
  int32_t chunks = 0, len = 0;
  if (i32(&chunks)) {
    stats.chunk_count = static_cast<uint32_t>(std::max(0, chunks));
    if (i32(&len) && len > 0 && at + static_cast<size_t>(len) <= bytes.size()) stats.datasets.push_back(bytes.substr(at, len));
  }
  return stats;
}

absl::StatusOr<ImatrixStats> ReadGguf(const std::string& path) {
  QUARK_ASSIGN_OR_RETURN(auto file, GgufFile::Open(path));
  if (auto type = file->GetString("general.type"); !type.ok() || *type != "imatrix") {
    return absl::InvalidArgumentError(StrCat("imatrix: ", path, ": general.type is not \"imatrix\""));
  }
  ImatrixStats stats;
  if (const Value* v = file->Find("imatrix.datasets")) stats.datasets = v->texts;
  if (auto n = file->GetInt("imatrix.chunk_count"); n.ok()) stats.chunk_count = static_cast<uint32_t>(*n);
  if (auto n = file->GetInt("imatrix.chunk_size"); n.ok()) stats.chunk_size = static_cast<uint32_t>(*n);
  auto floats = [&](const TensorInfo& t) {
    std::vector<float> v(t.nbytes / 4);
    std::memcpy(v.data(), file->TensorData(t), v.size() * 4);
    return v;
  };
  for (const TensorInfo& t : file->tensors()) {
    if (!EndsWith(t.name, kSum2)) continue;
    const std::string name = t.name.substr(0, t.name.size() - std::strlen(kSum2));
    const TensorInfo* counts = file->FindTensor(name + kCounts);
    if (counts == nullptr) return absl::InvalidArgumentError(StrCat("imatrix: ", path, ": ", name, " has no counts"));
    const int64_t n_mat = t.ne.size() > 1 ? t.ne[1] : 1;
    if (t.type != GgmlType::kF32 || counts->type != GgmlType::kF32 || counts->RowLength() * counts->Rows() != n_mat) {
      return absl::InvalidArgumentError(StrCat("imatrix: ", path, ": ", name, ": in_sum2 and counts must be F32, ",
                                               "one count per slice"));
    }
    ImatrixEntry entry;
    entry.ncols = t.ne[0];
    entry.sum2 = floats(t);
    entry.counts = floats(*counts);
    for (float& c : entry.counts) c = static_cast<float>(std::lround(c));  // common_imatrix_load rounds them
    QUARK_RETURN_IF_ERROR(CheckFinite(path, name, entry.sum2));
    stats.entries[name] = std::move(entry);
  }
  if (stats.entries.empty()) return absl::InvalidArgumentError(StrCat("imatrix: ", path, ": no entries"));
  return stats;
}

}  // namespace

absl::StatusOr<ImatrixStats> ReadImatrix(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(StrCat("imatrix: cannot open ", path));
  char magic[4] = {};
  in.read(magic, 4);
  if (in.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0) return ReadGguf(path);
  in.seekg(0);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return ReadLegacy(path, bytes);
}

absl::Status WriteImatrixGguf(const ImatrixStats& stats, const std::string& path) {
  Metadata md;
  md.emplace_back("general.type", Value::Str("imatrix"));
  md.emplace_back("imatrix.datasets", Value::Strs(stats.datasets));
  md.emplace_back("imatrix.chunk_count", Value::U32(stats.chunk_count));
  md.emplace_back("imatrix.chunk_size", Value::U32(stats.chunk_size));
  std::vector<TensorInfo> tensors;
  std::vector<const std::vector<float>*> data;
  for (const auto& [name, e] : stats.entries) {  // sorted by name, as llama-imatrix writes them
    if (e.ncols <= 0 || e.sum2.size() != static_cast<size_t>(e.ncols) * e.counts.size()) {
      return absl::InvalidArgumentError(StrCat("imatrix: ", name, ": ", e.sum2.size(), " sums for ", e.counts.size(),
                                               " slices of ", e.ncols));
    }
    const int64_t n_mat = static_cast<int64_t>(e.counts.size());
    tensors.push_back({name + kSum2, {e.ncols, n_mat}, GgmlType::kF32, 0, 0});
    data.push_back(&e.sum2);
    tensors.push_back({name + kCounts, {1, n_mat}, GgmlType::kF32, 0, 0});
    data.push_back(&e.counts);
  }
  const uint64_t data_bytes = AssignOffsets(tensors);
  std::string out = SerializeHeader(md, tensors);
  const size_t start = out.size();
  out.resize(start + data_bytes, '\0');
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::memcpy(out.data() + start + tensors[i].offset, data[i]->data(), data[i]->size() * sizeof(float));
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(out.data(), static_cast<std::streamsize>(out.size()));
  if (!f) return absl::InternalError(StrCat("imatrix: cannot write ", path));
  return absl::OkStatus();
}

std::vector<float> QuantWeights(const ImatrixEntry& e, int64_t slice) {
  std::vector<float> w(e.ncols);
  const float* sums = e.sum2.data() + slice * e.ncols;
  if (e.legacy) {
    const int64_t ncall = static_cast<int64_t>(e.counts.empty() ? 0 : e.counts[0]);
    for (int64_t i = 0; i < e.ncols; ++i) w[i] = ncall > 0 ? sums[i] / ncall : sums[i];
    return w;
  }
  const float count = e.counts[slice];
  for (int64_t i = 0; i < e.ncols; ++i) w[i] = count > 0.0f ? sums[i] / count : 1;
  return w;
}

}  // namespace quark::exporter::gguf
