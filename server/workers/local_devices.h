// How many local workers quarkd starts by default: one per visible GPU, else one CPU worker.
#pragma once

#include <string>
#include <vector>

namespace quark::server {

/// Visible GPU indices: CUDA_VISIBLE_DEVICES when set (comma list; "" or "-1" = none), else the
/// /dev/nvidiaN devices, else the AMD render nodes under /dev/dri (HIP). Empty on a CPU-only machine.
std::vector<std::string> VisibleGpus();

}  // namespace quark::server
