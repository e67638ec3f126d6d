// Test helper: quarkctl's app run in-process (RunQuarkctl) with its output captured.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "client/quarkctl_app.h"

namespace quark::client {

struct CtlRun {
  int code = -1;
  std::string out;
  std::string err;
};

inline CtlRun RunCtl(const std::vector<std::string>& args) {
  std::vector<const char*> argv = {"quarkctl"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  CtlRun r;
  r.code = RunQuarkctl(static_cast<int>(argv.size()), argv.data(), out, err, false);
  r.out = out.str();
  r.err = err.str();
  return r;
}

}  // namespace quark::client
