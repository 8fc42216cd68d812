# The system library with kernels linked statically into the test program, and tensors and the
# backend API (workspace, parallel pool) from C.
foreach(t IN ITEMS system_lib tensor_backend)
  tvmrt_add_c_test(${t} tvmrt::tvmrt c_tests/${t}.c)
endforeach()

# Loading TVM-built libraries from C (the fixtures directory is the argument; x86-64 code).
tvmrt_add_program(modules tvmrt::tvmrt c_tests/modules.c)
if(TVMRT_X86_64_FIXTURES)
  add_test(NAME modules COMMAND modules "${CMAKE_CURRENT_SOURCE_DIR}/tests/fixtures")
  set_tests_properties(modules PROPERTIES TIMEOUT 120)
  tvmrt_add_memcheck(modules ARGS "${CMAKE_CURRENT_SOURCE_DIR}/tests/fixtures")
endif()

# A classic-ABI library (TVM <= 0.20 layout) built here from the Rust tests' source, called
# from C through both doors (its path is the argument). It links nothing: classic kernels reach
# the runtime through context pointers that the loader fills.
add_library(tvmrt_test_classic_kernels SHARED tests/classic_libs/classic_kernels.c)
set_target_properties(tvmrt_test_classic_kernels PROPERTIES PREFIX "" OUTPUT_NAME classic_kernels)
tvmrt_add_program(classic_modules tvmrt::tvmrt c_tests/classic_modules.c)
add_test(NAME classic_modules
  COMMAND classic_modules $<TARGET_FILE:tvmrt_test_classic_kernels>)
set_tests_properties(classic_modules PROPERTIES TIMEOUT 120)
tvmrt_add_memcheck(classic_modules ARGS $<TARGET_FILE:tvmrt_test_classic_kernels>)
