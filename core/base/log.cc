#include "core/base/log.h"

#include <mutex>

#include <spdlog/sinks/stdout_sinks.h>

namespace quark::log {
namespace {

std::mutex& InitMutex() {
  static std::mutex mu;
  return mu;
}

// JSON lines keep the message last and escaped by spdlog's own formatting of the payload:
// callers pass job ids as "job=<id>" tokens in the message, which stay greppable either way.
constexpr const char* kJsonPattern =
    R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","component":"%n","msg":"%v"})";
constexpr const char* kTextPattern = "%Y-%m-%d %H:%M:%S.%e %^%-5l%$ [%n] %v";

Format& CurrentFormat() {
  static Format format = Format::kText;
  return format;
}

}  // namespace

void Init(Format format, std::string_view level) {
  std::lock_guard<std::mutex> lock(InitMutex());
  CurrentFormat() = format;
  spdlog::set_pattern(format == Format::kJson ? kJsonPattern : kTextPattern, spdlog::pattern_time_type::utc);
  spdlog::set_level(spdlog::level::from_str(std::string(level)));
}

std::shared_ptr<spdlog::logger> Get(const std::string& component) {
  std::lock_guard<std::mutex> lock(InitMutex());
  if (auto existing = spdlog::get(component)) return existing;
  auto logger = std::make_shared<spdlog::logger>(component, std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern(CurrentFormat() == Format::kJson ? kJsonPattern : kTextPattern,
                      spdlog::pattern_time_type::utc);
  logger->set_level(spdlog::get_level());
  spdlog::register_logger(logger);
  return logger;
}

}  // namespace quark::log
