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

# The ATen headers every LibTorch target precompiles. GCC writes a ~270 MB file for them, so targets share it:
# one per target (40 of them, 11 GB) filled a CI machine's disk. Targets share a precompiled header only where
# their code generation options agree, for two reasons:
# - GCC refuses a precompiled header built with another -fpic/-fpie setting (-Winvalid-pch, which CMake passes,
#   would name it in the build log);
# - GCC silently takes the precompiled header's optimization options, not the command line's, for functions with
#   a target attribute (the target_clones loops): -ffp-contract=off given to the target alone left FMAs in GPTQ's
#   AVX-512 column update and changed its bits.
# So each donor compiles the header with exactly the options of the targets that reuse it.
function(quark_torch_pch_donor name options)
  if(TARGET ${name})
    return()
  endif()
  add_library(${name} OBJECT ${PROJECT_SOURCE_DIR}/cmake/torch_pch_anchor.cc)
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE OFF)
  target_compile_options(${name} PRIVATE ${options})
  target_link_libraries(${name} PUBLIC quark_torch)
  target_precompile_headers(${name} PRIVATE <ATen/ATen.h> <ATen/Parallel.h>)
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
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    set(kind pie)
    set(code_model ${CMAKE_CXX_COMPILE_OPTIONS_PIE})
  else()
    set(kind pic)
    set(code_model ${CMAKE_CXX_COMPILE_OPTIONS_PIC})
  endif()
  string(MAKE_C_IDENTIFIER "quark_torch_pch_${kind}${options}" donor)
  quark_torch_pch_donor(${donor} "${code_model};${options}")
  target_precompile_headers(${target} REUSE_FROM ${donor})
endfunction()
