// Shared by the tests that run a Python peer on an export inside the Debian trixie chroot (compressed-tensors'
// decompressors, AMD Quark's importer): starting the peer's run_peer.sh, reading the weights it wrote, and comparing
// them with ours element by element in the peer's dtype.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/base/strings.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/export/hf_quark_layout.h"

namespace quark::testing {

struct PeerRun {
  int exit_code = -1;  // run_peer.sh's status: 77 = a peer part is missing
  std::string output;  // stdout (the peer's JSON report), with stderr too when asked
};

/// Runs `tests/peers/<peer>/run_peer.sh EXPORT_DIR OUT` from the source tree (QUARK_SOURCE_DIR, else the working
/// directory); stderr goes to the test log unless `merge_stderr` (a refusal's message is then in `output`).
inline PeerRun RunPeer(const std::string& peer, const std::string& export_dir, const std::string& out,
                       bool merge_stderr = false) {
  const char* source_dir = std::getenv("QUARK_SOURCE_DIR");
  const std::string cmd = StrCat("bash ", source_dir ? source_dir : ".", "/tests/peers/", peer, "/run_peer.sh ",
                                 export_dir, " ", out, merge_stderr ? " 2>&1" : "");
  PeerRun run;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return run;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) run.output.append(buffer, n);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

/// The tensor `name` of a safetensors file a peer wrote, in its own float dtype.
inline absl::StatusOr<at::Tensor> PeerTensor(const checkpoint::CheckpointReader& peer, const std::string& name) {
  auto ref = peer.Get(name);
  if (!ref.ok()) return ref.status();
  auto dtype = exporter::AtenFloatOf(ref->info->dtype);
  if (!dtype.ok()) return dtype.status();
  const std::string_view bytes = ref->bytes();
  return at::from_blob(const_cast<char*>(bytes.data()), ref->info->shape, *dtype).clone();
}

/// Elements whose bytes differ between the peer's tensor and ours in the peer's dtype (-1: other shape or dtype).
inline int64_t DifferingElements(const at::Tensor& peer, const at::Tensor& ours) {
  if (peer.sizes() != ours.sizes() || peer.scalar_type() != ours.scalar_type()) return -1;
  const at::ScalarType bits = peer.element_size() == 4 ? at::kInt : at::kShort;
  return (peer.contiguous().view(bits) != ours.contiguous().view(bits)).sum().item<int64_t>();
}

}  // namespace quark::testing
