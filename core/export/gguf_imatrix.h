// llama.cpp's importance matrix files (tools/imatrix): per linear (GGUF tensor name), per slice (an expert of a
// stacked MoE tensor; 1 for a dense linear), the sum of squared input activations over the tokens seen and their
// count. Read from the GGUF format (general.type = "imatrix", <name>.in_sum2 F32 [ncols, n_mat], <name>.counts
// F32 [1, n_mat]) or the legacy .dat (values = mean · ncall), written as GGUF. QuantWeights turns an entry into the
// quant weights llama-quantize passes to quantize_<type> (load_imatrix in tools/quantize/quantize.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace quark::exporter::gguf {

struct ImatrixEntry {
  int64_t ncols = 0;          // values per slice
  std::vector<float> sum2;    // [n_mat][ncols]: Σx² (legacy .dat: mean · ncall)
  std::vector<float> counts;  // [n_mat] tokens per slice (legacy .dat: one value, ncall)
  bool legacy = false;
  int64_t Slices() const { return ncols > 0 ? static_cast<int64_t>(sum2.size()) / ncols : 0; }
};

struct ImatrixStats {
  std::map<std::string, ImatrixEntry> entries;  // by GGUF tensor name, e.g. "blk.0.attn_q.weight"
  std::vector<std::string> datasets;
  uint32_t chunk_count = 0;
  uint32_t chunk_size = 0;
};

/// GGUF (by its magic) or legacy .dat. INVALID_ARGUMENT naming the file and the bad field (truncated, negative or
/// inconsistent sizes, non-finite values, a GGUF that is no imatrix).
absl::StatusOr<ImatrixStats> ReadImatrix(const std::string& path);

/// llama-imatrix's GGUF layout, entries sorted by name. INTERNAL when the file cannot be written.
absl::Status WriteImatrixGguf(const ImatrixStats& stats, const std::string& path);

/// The quant weights of slice `slice`: Σx² / count (count 0: all 1), legacy: value / ncall (ncall 0: as stored).
std::vector<float> QuantWeights(const ImatrixEntry& entry, int64_t slice);

}  // namespace quark::exporter::gguf
