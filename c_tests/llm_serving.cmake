# A language model with a paged KV cache served from C (c_tests/llm_serving.c): TVM's greedy
# tokens, refused calls that change nothing, and (under valgrind) no invalid access or leak in
# the cache, the tensor cache and the samplers' callers.
# It loads x86-64 fixtures (TVM-built): native x86-64 builds only (see TVMRT_X86_64_FIXTURES).
if(TVMRT_X86_64_FIXTURES)
  tvmrt_add_program(llm_serving tvmrt::tvmrt c_tests/llm_serving.c)
  add_test(NAME llm_serving COMMAND llm_serving "${CMAKE_CURRENT_SOURCE_DIR}/tests/fixtures/llm")
  set_tests_properties(llm_serving PROPERTIES TIMEOUT 120)
  tvmrt_add_memcheck(llm_serving ARGS "${CMAKE_CURRENT_SOURCE_DIR}/tests/fixtures/llm")
endif()
