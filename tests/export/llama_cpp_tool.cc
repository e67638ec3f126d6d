#include "tests/export/llama_cpp_tool.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/export/gguf_llama_cpp.h"
#include "tests/quantize/test_model.h"

namespace quark::testing {
namespace {

namespace fs = std::filesystem;

std::string Tail(const std::string& path, size_t bytes = 1500) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  const std::string text = s.str();
  return text.size() > bytes ? text.substr(text.size() - bytes) : text;
}

std::string Quoted(const std::string& s) { return "'" + s + "'"; }

}  // namespace

bool RunLogged(const std::string& command, const std::string& log, std::string* why) {
  const int status = std::system((command + " >" + Quoted(log) + " 2>&1").c_str());
  if (status == 0) return true;
  *why = "`" + command + "` failed (status " + std::to_string(status) + "): " + Tail(log);
  return false;
}

std::string BuildLlamaCppTool(const std::string& tool, std::string* why) {
  const std::string libs = LlamaCppLibDir();
  const fs::path bundle = fs::path(libs) / "../../../../node-llama-cpp/llama/gitRelease.bundle";
  if (!fs::exists(fs::path(libs) / "libllama-common.so") || !fs::exists(bundle)) {
    *why = "node-llama-cpp's prebuilt llama.cpp or its source bundle is not installed (" + libs +
           "): run scripts/install-test-peers.sh";
    return "";
  }
  const fs::path dir = TempPath("quark_llama_" + tool);
  fs::create_directories(dir);
  const fs::path src = dir / "llama.cpp";
  const std::string binary = (dir / ("llama-" + tool)).string();
  const std::string log = (dir / "build.log").string();
  const std::string clone = "git -c advice.detachedHead=false clone -q " + Quoted(bundle.string()) + " " + Quoted(src.string());
  const std::string compile =
      "cd " + Quoted(src.string()) + " && g++ -O2 -std=c++17 tools/" + tool + "/" + tool +
      ".cpp -Iinclude -Iggml/include -Icommon -Ivendor -o " + Quoted(binary) + " " +
      Quoted(libs + "/libllama.v0.5.0.so") + " " + Quoted(libs + "/libllama-common.so") + " " +
      Quoted(libs + "/libggml-base.so") + " " + Quoted(libs + "/libggml.v0.5.0.so") + " -Wl,-rpath," + Quoted(libs);
  if (!RunLogged(clone, log, why) || !RunLogged(compile, log, why)) return "";
  for (const auto& entry : fs::directory_iterator(libs)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("libggml-cpu-", 0) == 0) fs::create_symlink(entry.path(), dir / name);
  }
  return binary;
}

}  // namespace quark::testing
