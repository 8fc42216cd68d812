# TVM's RPC client from C (issue 48): tensors on a session's masked CPU through the classic
# TVMArray* API, TVM's compiled add_dyn.so called on them on the server, against `tvmrt
# rpc-server` (the tool this build makes, started by the test on a free port of 127.0.0.1 and
# stopped by its process id); once more under valgrind. x86-64 only: the server loads the x86-64
# fixture, and a program under qemu-user cannot start the tool (.ci/cross.sh runs the server
# under qemu with TVM's client instead: tests/rpc_board).
if(TVMRT_X86_64_FIXTURES AND NOT CMAKE_CROSSCOMPILING)
  tvmrt_add_program(rpc_remote_tensors tvmrt::tvmrt c_tests/rpc_remote_tensors.c)
  set(rpc_args "${TVMRT_CLI}" "${CMAKE_CURRENT_SOURCE_DIR}/tests/fixtures")
  add_test(NAME rpc_remote_tensors COMMAND rpc_remote_tensors ${rpc_args})
  set_tests_properties(rpc_remote_tensors PROPERTIES TIMEOUT 120)
  tvmrt_add_memcheck(rpc_remote_tensors ARGS ${rpc_args})
endif()
