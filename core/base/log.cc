#include "core/base/log.h"

#include <mutex>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace quark::log {
namespace {

std::mutex& InitMutex() {
  static std::mutex mu;
  return mu;
}

// %Q: the message as the body of a JSON string (quotes, backslashes and control characters escaped), so that
// every line of --log-format json parses whatever a message holds.
class JsonEscapedMessage : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    static constexpr char kHex[] = "0123456789abcdef";
    for (char c : std::string_view(msg.payload.data(), msg.payload.size())) {
      switch (c) {
        case '"': dest.append(std::string_view("\\\"")); break;
        case '\\': dest.append(std::string_view("\\\\")); break;
        case '\n': dest.append(std::string_view("\\n")); break;
        case '\r': dest.append(std::string_view("\\r")); break;
        case '\t': dest.append(std::string_view("\\t")); break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            const char escaped[] = {'\\', 'u', '0', '0', kHex[(c >> 4) & 0xF], kHex[c & 0xF]};
            dest.append(escaped, escaped + sizeof(escaped));
          } else {
            dest.push_back(c);
          }
      }
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<JsonEscapedMessage>(); }
};

constexpr const char* kJsonPattern =
    R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","component":"%n","msg":"%Q"})";
constexpr const char* kTextPattern = "%Y-%m-%d %H:%M:%S.%e %^%-5l%$ [%n] %v";

Format& CurrentFormat() {
  static Format format = Format::kText;
  return format;
}

std::unique_ptr<spdlog::formatter> MakeFormatter(Format format) {
  auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  formatter->add_flag<JsonEscapedMessage>('Q');
  formatter->set_pattern(format == Format::kJson ? kJsonPattern : kTextPattern);
  return formatter;
}

}  // namespace

void Init(Format format, std::string_view level) {
  std::lock_guard<std::mutex> lock(InitMutex());
  CurrentFormat() = format;
  spdlog::set_formatter(MakeFormatter(format));
  spdlog::set_level(spdlog::level::from_str(std::string(level)));
}

std::shared_ptr<spdlog::logger> Get(const std::string& component) {
  std::lock_guard<std::mutex> lock(InitMutex());
  if (auto existing = spdlog::get(component)) return existing;
  auto logger = std::make_shared<spdlog::logger>(component, std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_formatter(MakeFormatter(CurrentFormat()));
  logger->set_level(spdlog::get_level());
  spdlog::register_logger(logger);
  return logger;
}

}  // namespace quark::log
