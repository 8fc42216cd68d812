# OpenCL from C through both doors (c_tests/opencl.c), on the OpenCL fixtures of
# tests/fixtures/opencl; CI runs it on POCL.
# It loads x86-64 fixtures (TVM-built): native x86-64 builds only (see TVMRT_X86_64_FIXTURES).
if(TVMRT_X86_64_FIXTURES)
  tvmrt_add_program(opencl tvmrt::tvmrt c_tests/opencl.c)
  target_link_libraries(opencl PRIVATE m)
  set(TVMRT_OPENCL_FIXTURES "${CMAKE_CURRENT_SOURCE_DIR}/tests/fixtures/opencl")
  # POCL's kernel cache: the environment's (CI shares target/pocl-cache across its steps), else
  # one under the build folder.
  if(DEFINED ENV{POCL_CACHE_DIR})
    set(TVMRT_POCL_CACHE "POCL_CACHE_DIR=$ENV{POCL_CACHE_DIR}")
  else()
    set(TVMRT_POCL_CACHE "POCL_CACHE_DIR=${CMAKE_CURRENT_BINARY_DIR}/pocl-cache")
  endif()
  add_test(NAME opencl COMMAND opencl "${TVMRT_OPENCL_FIXTURES}")
  set_tests_properties(opencl PROPERTIES TIMEOUT 300 ENVIRONMENT "${TVMRT_POCL_CACHE}")
  # Under valgrind, a small case (load, device arrays, one kernel, copies, errors, frees): no
  # invalid access and no leak of tvmrt's; POCL's, LLVM's and the dynamic loader's own reports
  # are suppressed (c_tests/pocl.supp). It runs after `opencl`, whose POCL kernel cache it
  # reuses, so usually no kernel is compiled under valgrind (15 to 35 s).
  tvmrt_add_memcheck(opencl ARGS "${TVMRT_OPENCL_FIXTURES}" --small
    SUPPRESSIONS "${CMAKE_CURRENT_SOURCE_DIR}/c_tests/pocl.supp"
    ENVIRONMENT "${TVMRT_POCL_CACHE}" DEPENDS opencl)
endif()
