# The Relax VM from C: runs the fixture models through the tvm-ffi API (c_tests/vm_models.c).
tvmrt_add_program(vm_models tvmrt::tvmrt c_tests/vm_models.c)
add_test(NAME vm_models COMMAND vm_models "${CMAKE_CURRENT_SOURCE_DIR}/tests/fixtures")
set_tests_properties(vm_models PROPERTIES TIMEOUT 120)
