# Bool across the ABI generations (TVM 0.19's uint1 on the classic side, kDLBool on tvm-ffi's):
# arrays, the classic bool model, callbacks and kernels through both doors; and under valgrind.
# It loads x86-64 fixtures (TVM-built): native x86-64 builds only (see TVMRT_X86_64_FIXTURES).
if(TVMRT_X86_64_FIXTURES)
  tvmrt_add_program(classic_bool tvmrt::tvmrt c_tests/classic_bool.c)
  set(TVMRT_BOOL_MODEL "${CMAKE_CURRENT_SOURCE_DIR}/tests/fixtures/graph/bool_model.so")
  add_test(NAME classic_bool COMMAND classic_bool "${TVMRT_BOOL_MODEL}")
  set_tests_properties(classic_bool PROPERTIES TIMEOUT 120)
  tvmrt_add_memcheck(classic_bool ARGS "${TVMRT_BOOL_MODEL}")
endif()
