# C++ programs written against tvm-ffi's own headers, linked with -ltvmrt (issue 25): modules
# made by C++ code inside tvmrt and tvmrt's modules inside C++ ones (c_tests/cxx/).
#
# They need tvm-ffi's C++ headers: TVMRT_TVM_FFI_INCLUDE_DIR, e.g. the include directory of
# the pinned apache-tvm-ffi wheel (`python -m tvm_ffi.config --includedir` in .venv/tvm_ffi,
# which .ci/test.sh passes). Without it these tests are not built, unless
# TVMRT_REQUIRE_CXX_TESTS is on (CI), which makes that an error.
set(TVMRT_TVM_FFI_INCLUDE_DIR "" CACHE PATH
    "tvm-ffi's C++ headers (tvm/ffi/tvm_ffi.h), for the C++ tests")
option(TVMRT_REQUIRE_CXX_TESTS "Fail when the C++ tests cannot be built" OFF)

if(NOT EXISTS "${TVMRT_TVM_FFI_INCLUDE_DIR}/tvm/ffi/tvm_ffi.h")
  if(TVMRT_REQUIRE_CXX_TESTS)
    message(FATAL_ERROR "TVMRT_TVM_FFI_INCLUDE_DIR (${TVMRT_TVM_FFI_INCLUDE_DIR}) has no "
                        "tvm/ffi/tvm_ffi.h: the C++ tests cannot be built")
  endif()
  message(STATUS "TVMRT_TVM_FFI_INCLUDE_DIR not set: the C++ tests (c_tests/cxx) are not built")
  return()
endif()

# tvm-ffi's headers come first (as system headers: their warnings are not ours). tvmrt's
# include/ has its own, equivalent tvm/ffi/c_api.h, but a tvm-ffi client sees tvm-ffi's.
function(tvmrt_add_cxx_target name)
  target_include_directories(${name} SYSTEM BEFORE PRIVATE "${TVMRT_TVM_FFI_INCLUDE_DIR}")
  target_link_libraries(${name} PRIVATE tvmrt::tvmrt)
  set_target_properties(${name} PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON
                                           BUILD_RPATH "${TVMRT_LIB_DIR}")
  add_dependencies(${name} tvmrt_cargo)
endfunction()

# A C++ library that makes ModuleObj subclasses and exports a tvm-ffi function.
add_library(tvmrt_test_counter_module SHARED c_tests/cxx/counter_module_lib.cc)
tvmrt_add_cxx_target(tvmrt_test_counter_module)

add_executable(cxx_modules c_tests/cxx/cxx_modules.cc)
tvmrt_add_cxx_target(cxx_modules)
target_compile_options(cxx_modules PRIVATE -Wall -Wextra $<$<BOOL:${TVMRT_WERROR}>:-Werror>)
add_test(NAME cxx_modules
  COMMAND cxx_modules $<TARGET_FILE:tvmrt_test_counter_module>
          "${CMAKE_CURRENT_SOURCE_DIR}/tests/fixtures")
set_tests_properties(cxx_modules PROPERTIES TIMEOUT 120)
# The vtable and reference-count paths between C++ and Rust under memcheck: every module,
# function and error crossing is released.
tvmrt_add_memcheck(cxx_modules
  ARGS $<TARGET_FILE:tvmrt_test_counter_module> "${CMAKE_CURRENT_SOURCE_DIR}/tests/fixtures")
