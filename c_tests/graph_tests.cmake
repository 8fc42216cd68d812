# The graph executor from C (included by CMakeLists.txt like every c_tests/*.cmake): a classic
# model library of tests/fixtures/graph run through the classic C API, and under valgrind.
tvmrt_add_program(graph_executor tvmrt::tvmrt c_tests/graph_executor.c)
set(TVMRT_GRAPH_MODEL "${CMAKE_CURRENT_SOURCE_DIR}/tests/fixtures/graph/int_model.so")
# The graph fixtures are x86-64 code.
if(TVMRT_X86_64_FIXTURES)
  add_test(NAME graph_executor COMMAND graph_executor "${TVMRT_GRAPH_MODEL}")
  set_tests_properties(graph_executor PROPERTIES TIMEOUT 120)
  tvmrt_add_memcheck(graph_executor ARGS "${TVMRT_GRAPH_MODEL}")
endif()
