#include "server/scheduler/clock.h"

namespace quark::server {

SystemClock* SystemClock::Get() {
  static SystemClock* clock = new SystemClock();  // never destroyed: used by threads until exit
  return clock;
}

}  // namespace quark::server
