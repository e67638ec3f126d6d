// Pieces of the Prometheus text exposition format 0.0.4.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace quark::server::metrics {

/// The content type of the exposition.
inline constexpr const char* kTextContentType = "text/plain; version=0.0.4; charset=utf-8";

/// A sample value: shortest decimal that round-trips, "+Inf", "-Inf" or "NaN".
std::string FormatValue(double value);

/// `{a="x",b="y"}` (empty string when there are no labels); values escaped (\\, \", \n).
std::string FormatLabels(const std::vector<std::string>& names, const std::vector<std::string>& values);

/// HELP text escaping (\\ and \n).
std::string EscapeHelp(std::string_view help);

/// True for a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*) / label name ([a-zA-Z_][a-zA-Z0-9_]*, no "__" prefix).
bool IsValidMetricName(std::string_view name);
bool IsValidLabelName(std::string_view name);

}  // namespace quark::server::metrics
