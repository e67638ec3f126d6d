// The one logging facade: spdlog, every line tagged with its component (and job id where there is one).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

namespace quark::log {

enum class Format { kText, kJson };

/// Configures the default sink once per process: text on stderr, or one JSON object per line.
/// `level` is spdlog's name ("trace", "debug", "info", "warn", "error").
void Init(Format format, std::string_view level = "info");

/// The logger of one component ("server", "scheduler", "worker", ...), created on first use.
std::shared_ptr<spdlog::logger> Get(const std::string& component);

}  // namespace quark::log
