# CUDA from C through both doors (c_tests/cuda.c) on the CUDA fixtures of tests/fixtures/cuda,
# with the test double of the NVIDIA driver (tests/cuda_double/fake_cuda.c, built here) in place
# of libcuda.so.1: no GPU needed.
# It loads x86-64 fixtures (TVM-built): native x86-64 builds only (see TVMRT_X86_64_FIXTURES).
if(TVMRT_X86_64_FIXTURES)
  add_library(fake_cuda SHARED tests/cuda_double/fake_cuda.c)
  tvmrt_add_program(cuda tvmrt::tvmrt c_tests/cuda.c)
  set(TVMRT_CUDA_FIXTURES "${CMAKE_CURRENT_SOURCE_DIR}/tests/fixtures/cuda")
  set(TVMRT_FAKE_CUDA_ENV "TVMRT_CUDA_LIBRARY=$<TARGET_FILE:fake_cuda>;FAKE_CUDA_DEVICES=2")
  add_test(NAME cuda COMMAND cuda "${TVMRT_CUDA_FIXTURES}")
  set_tests_properties(cuda PROPERTIES TIMEOUT 120 ENVIRONMENT "${TVMRT_FAKE_CUDA_ENV}")
  add_dependencies(cuda fake_cuda)
  # Relax models for CUDA from C (c_tests/device_relax.c): the double does not compute their
  # kernels, so values are compared on a GPU only (benches/gpu/run.sh); here the rest is. The
  # PTX payloads: ctest has no NVRTC for TVM's source ones (the Rust tests and the GPU run do).
  tvmrt_add_program(device_relax tvmrt::tvmrt c_tests/device_relax.c)
  add_test(NAME cuda_relax COMMAND device_relax cuda "${TVMRT_CUDA_FIXTURES}"
           mlp_ptx.so:mlp.main cnn_ptx.so:cnn.main --no-values)
  set_tests_properties(cuda_relax PROPERTIES TIMEOUT 120 ENVIRONMENT "${TVMRT_FAKE_CUDA_ENV}")
  add_dependencies(device_relax fake_cuda)
  # Under valgrind: the CUDA back end's raw pointers (driver handles, device pointers, kernel
  # argument slots, the blob and payload reads) with no invalid access and no leak.
  tvmrt_add_memcheck(cuda ARGS "${TVMRT_CUDA_FIXTURES}" ENVIRONMENT ${TVMRT_FAKE_CUDA_ENV})
endif()
