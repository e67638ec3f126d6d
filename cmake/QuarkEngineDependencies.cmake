# The engine's external dependencies besides LibTorch (core/, kernels/, the `quark` command): what the GPU kit's
# engine build (QUARK_GPU_KIT_ENGINE) carries as Debian packages, and what every full build finds first. The
# service's own (gRPC, SQLite, curl, yaml-cpp) are in QuarkDependencies.cmake.
find_package(Protobuf REQUIRED)
find_package(absl CONFIG REQUIRED)
find_package(fmt CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)
