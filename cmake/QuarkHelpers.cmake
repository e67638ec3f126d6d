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

# Links a target against LibTorch and gives it a precompiled ATen header:
# ATen is the slowest part of every engine translation unit on a 2-core machine.
function(quark_use_torch target)
  target_link_libraries(${target} PUBLIC quark_torch)
  target_precompile_headers(${target} PRIVATE <ATen/ATen.h> <ATen/Parallel.h>)
endfunction()
