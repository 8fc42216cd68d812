# The system library with kernels linked statically into the test program, and tensors and the
# backend API (workspace, parallel pool) from C.
foreach(t IN ITEMS system_lib tensor_backend)
  tvmrt_add_c_test(${t} tvmrt::tvmrt c_tests/${t}.c)
endforeach()
