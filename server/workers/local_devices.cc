#include "server/workers/local_devices.h"

#include <cstdlib>
#include <filesystem>
#include <regex>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace quark::server {

std::vector<std::string> VisibleGpus() {
  std::vector<std::string> gpus;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible != nullptr) {
    for (absl::string_view part : absl::StrSplit(visible, ',', absl::SkipWhitespace())) {
      std::string index(absl::StripAsciiWhitespace(part));
      if (index == "-1") break;  // CUDA's way of hiding every device
      gpus.push_back(index);
    }
    return gpus;
  }
  std::error_code error;
  const std::regex nvidia("nvidia([0-9]+)");
  for (const auto& entry : std::filesystem::directory_iterator("/dev", error)) {
    std::smatch match;
    std::string name = entry.path().filename().string();
    if (std::regex_match(name, match, nvidia)) gpus.push_back(match[1]);
  }
  std::sort(gpus.begin(), gpus.end(), [](const std::string& a, const std::string& b) { return std::stoi(a) < std::stoi(b); });
  return gpus;
}

}  // namespace quark::server
