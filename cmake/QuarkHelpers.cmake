# Adds every direct child folder of DIR that has a CMakeLists.txt, in name order,
# so each part of the tree owns its own build file.
function(quark_add_subdirectories dir)
  file(GLOB children LIST_DIRECTORIES true "${CMAKE_CURRENT_SOURCE_DIR}/${dir}/*")
  list(SORT children)
  if(NOT dir STREQUAL "." AND EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/${dir}/CMakeLists.txt")
    add_subdirectory(${dir})
    return()
  endif()
  foreach(child IN LISTS children)
    if(IS_DIRECTORY "${child}" AND EXISTS "${child}/CMakeLists.txt")
      file(RELATIVE_PATH rel "${CMAKE_CURRENT_SOURCE_DIR}" "${child}")
      add_subdirectory(${rel})
    endif()
  endforeach()
endfunction()

# The headers every LibTorch target precompiles: ATen (the slowest part of every engine file). (Adding nn::Module,
# json and absl made some engine files 15-25% faster to compile and others 10% slower, the header growing from 269 to
# 422 MB: not done.)
set(QUARK_TORCH_PCH_HEADERS <ATen/ATen.h> <ATen/Parallel.h>)
# GCC writes a ~270 MB file for them, so targets share it:
# one per target (40 of them, 11 GB) filled a CI machine's disk. Targets share a precompiled header only where
# their code generation options agree, for two reasons:
# - GCC refuses a precompiled header built with another -fpic/-fpie setting (-Winvalid-pch, which CMake passes,
#   would name it in the build log);
# - GCC silently takes the precompiled header's optimization options, not the command line's, for functions with
#   a target attribute (the target_clones loops): -ffp-contract=off given to the target alone left FMAs in GPTQ's
#   AVX-512 column update and changed its bits.
# So each donor compiles the header with exactly the options of the targets that reuse it. A folder may add headers
# (QUARK_PCH_HEADERS, with the libraries whose usage requirements they need in QUARK_PCH_LIBS: tests/ adds GoogleTest,
# gMock, nlohmann/json and absl; QUARK_PCH_SET names its donors apart).
#
# quark_pch_donor(name options [TORCH] [HEADERS h...] [LIBS l...])
function(quark_pch_donor name options)
  cmake_parse_arguments(PARSE_ARGV 2 arg "TORCH" "" "HEADERS;LIBS")
  if(TARGET ${name})
    return()
  endif()
  add_library(${name} OBJECT ${PROJECT_SOURCE_DIR}/cmake/torch_pch_anchor.cc)
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE OFF)
  target_compile_options(${name} PRIVATE ${options})
  set(headers ${arg_HEADERS})
  if(arg_TORCH)
    target_link_libraries(${name} PUBLIC quark_torch)
    list(PREPEND headers ${QUARK_TORCH_PCH_HEADERS})
  endif()
  if(arg_LIBS)
    target_link_libraries(${name} PUBLIC ${arg_LIBS})
  endif()
  target_precompile_headers(${name} PRIVATE ${headers})
endfunction()

# The code model option of `target` (-fPIE for executables, -fPIC otherwise) into `out`, and its name into `kind`.
function(quark_code_model target out kind)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    set(${kind} pie PARENT_SCOPE)
    set(${out} ${CMAKE_CXX_COMPILE_OPTIONS_PIE} PARENT_SCOPE)
  else()
    set(${kind} pic PARENT_SCOPE)
    set(${out} ${CMAKE_CXX_COMPILE_OPTIONS_PIC} PARENT_SCOPE)
  endif()
endfunction()

# Links a target against LibTorch and gives it a shared precompiled ATen header (ATen is the slowest part of
# every engine translation unit on a 2-core machine). Every such target compiles with -ffp-contract=off: the
# bit-exact contract needs separately rounded multiplies and adds (Quark's column update is a product, then a
# subtraction). OPTIONS adds code generation options of the target's own; targets with the same ones share.
# QUARK_CODE_OPTIONS, set in a folder's scope, adds options to every such target of the folder (tests/: -O1).
function(quark_use_torch target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "OPTIONS")
  if(DEFINED quark_kit_test_filter AND NOT TARGET ${target})
    return()  # a test the GPU kit leaves out (tests/CMakeLists.txt)
  endif()
  set(options -ffp-contract=off ${QUARK_CODE_OPTIONS} ${arg_OPTIONS})
  target_link_libraries(${target} PUBLIC quark_torch)
  target_compile_options(${target} PRIVATE ${options})
  quark_code_model(${target} code_model kind)
  # The folder's headers go to its GoogleTest executables only: a tool beside them (gguf_export_tool) has its own
  # `testing` namespaces, which GoogleTest's would make ambiguous.
  get_target_property(libs ${target} LINK_LIBRARIES)
  if(QUARK_PCH_HEADERS AND "GTest::gtest_main" IN_LIST libs)
    # -pthread on the header and on every test that reads it, as quark_use_folder_pch's (why there).
    string(MAKE_C_IDENTIFIER "quark_torch_pch_${kind}${options}${QUARK_PCH_SET}" donor)
    quark_pch_donor(${donor} "${code_model};${options};-pthread" TORCH HEADERS ${QUARK_PCH_HEADERS}
      LIBS ${QUARK_PCH_LIBS})
    target_compile_options(${target} PRIVATE -pthread)
  else()
    string(MAKE_C_IDENTIFIER "quark_torch_pch_${kind}${options}" donor)
    quark_pch_donor(${donor} "${code_model};${options}" TORCH)
  endif()
  target_precompile_headers(${target} REUSE_FROM ${donor})
endfunction()

# Gives a target without LibTorch the folder's precompiled headers (QUARK_PCH_HEADERS), unless it has one already
# (quark_use_torch's). tests/ calls it for every test once its folder is read, after any quark_use_torch.
function(quark_use_folder_pch target)
  get_target_property(reused ${target} PRECOMPILE_HEADERS_REUSE_FROM)
  if(reused OR NOT QUARK_PCH_HEADERS)
    return()
  endif()
  quark_code_model(${target} code_model kind)
  # -pthread as most of these tests have it (gRPC's), and given to the rest: GCC refuses a header built with another
  # _REENTRANT (the one -pthread defines) and compiles the headers anew, without a word but a warning.
  string(MAKE_C_IDENTIFIER "quark_pch_${kind}${QUARK_CODE_OPTIONS}${QUARK_PCH_SET}" donor)
  quark_pch_donor(${donor} "${code_model};${QUARK_CODE_OPTIONS};-pthread" HEADERS ${QUARK_PCH_HEADERS}
    LIBS ${QUARK_PCH_LIBS})
  target_precompile_headers(${target} REUSE_FROM ${donor})
  target_compile_options(${target} PRIVATE -pthread)
endfunction()
