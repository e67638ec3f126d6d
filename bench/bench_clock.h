// The benches' one clock.
#pragma once

#include <chrono>

namespace quark::bench {

using Clock = std::chrono::steady_clock;

/// Seconds from `since` to now.
inline double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

}  // namespace quark::bench
