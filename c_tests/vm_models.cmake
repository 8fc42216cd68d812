# The Relax VM from C: runs the fixture models through the tvm-ffi API (c_tests/vm_models.c).
tvmrt_add_program(vm_models tvmrt::tvmrt c_tests/vm_models.c)
# The fixture models are x86-64 code.
if(TVMRT_X86_64_FIXTURES)
  add_test(NAME vm_models COMMAND vm_models "${CMAKE_CURRENT_SOURCE_DIR}/tests/fixtures")
  set_tests_properties(vm_models PROPERTIES TIMEOUT 120)
  # Under valgrind: model loading reads the library's mapped blob in place and drops the pages
  # of copied constants (src/mapped.rs); no invalid read, no leak.
  tvmrt_add_memcheck(vm_models ARGS "${CMAKE_CURRENT_SOURCE_DIR}/tests/fixtures")
endif()
