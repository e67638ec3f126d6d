// The one source of the targets that compile the shared precompiled ATen header (cmake/QuarkHelpers.cmake):
// CMake builds a target's precompiled header only alongside at least one of its sources.
