// quarkctl: see client/quarkctl_app.h for commands, flags and exit codes.
#include <unistd.h>

#include <iostream>

#include "client/quarkctl_app.h"

int main(int argc, char** argv) {
  return quark::client::RunQuarkctl(argc, argv, std::cout, std::cerr, isatty(STDERR_FILENO) != 0);
}
