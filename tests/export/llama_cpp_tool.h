// llama.cpp's command-line tools for the tests that compare with them (llama-imatrix): built from node-llama-cpp's
// source bundle (llama/gitRelease.bundle, the source its prebuilt libraries come from) against those libraries, as
// bench/export/gguf_kquant_bench.sh builds llama-quantize. A few seconds of g++; nothing of llama.cpp is copied.
#pragma once

#include <string>

namespace quark::testing {

/// Builds tools/<tool>/<tool>.cpp ("imatrix") as llama-<tool> in a fresh temporary folder where the prebuilt CPU
/// backends are linked too (ggml loads them from the executable's folder). Returns its path, or "" with `why` set
/// (the peer is not installed, git or g++ failed: the compiler's last lines).
std::string BuildLlamaCppTool(const std::string& tool, std::string* why);

/// Runs `command` (a shell line), its output into `log`; true on exit status 0, else `why` holds the log's end.
bool RunLogged(const std::string& command, const std::string& log, std::string* why);

}  // namespace quark::testing
