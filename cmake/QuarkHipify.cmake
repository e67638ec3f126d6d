# quark_hipify(OUT_VAR files...): each CUDA file (a path relative to the project's source folder) translated to HIP
# at build time by cmake/hipify.cmake, under ${QUARK_HIPIFIED_DIR} with every "cuda" of its path made "hip" and .cu
# made .hip (kernels/cuda/quant_cuda.h -> kernels/hip/quant_hip.h). OUT_VAR gets the generated paths, in order.
set(QUARK_HIPIFIED_DIR "${PROJECT_BINARY_DIR}/hipified")
set(QUARK_HIPIFY_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/hipify.cmake")

function(quark_hipify out_var)
  set(generated "")
  foreach(file IN LISTS ARGN)
    string(REPLACE "cuda" "hip" hip_path "${file}")
    string(REGEX REPLACE "\\.cu$" ".hip" hip_path "${hip_path}")
    set(out "${QUARK_HIPIFIED_DIR}/${hip_path}")
    add_custom_command(OUTPUT "${out}"
      COMMAND ${CMAKE_COMMAND} "-DIN=${PROJECT_SOURCE_DIR}/${file}" "-DOUT=${out}" -P "${QUARK_HIPIFY_SCRIPT}"
      DEPENDS "${PROJECT_SOURCE_DIR}/${file}" "${QUARK_HIPIFY_SCRIPT}"
      COMMENT "hipify ${file}"
      VERBATIM)
    list(APPEND generated "${out}")
  endforeach()
  set(${out_var} "${generated}" PARENT_SCOPE)
endfunction()
