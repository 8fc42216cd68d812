# Relax models built for Vulkan (tests/fixtures/vulkan: TVM 0.27's host code, kernels in TVM's
# SPIR-V layout) from C on vulkan:0 with c_tests/device_relax.c (its target: cuda.cmake): the
# CNN and the MLP against TVM's CPU outputs. CI's driver is Mesa's lavapipe (.ci/test.sh
# installs it); benches/gpu/run.sh runs the same program on an NVIDIA GPU.
if(TVMRT_X86_64_FIXTURES)
  add_test(NAME vulkan_relax
           COMMAND device_relax vulkan "${CMAKE_CURRENT_SOURCE_DIR}/tests/fixtures/vulkan"
                   cnn.so:cnn.main mlp.so:mlp.main)
  set_tests_properties(vulkan_relax PROPERTIES TIMEOUT 120)
endif()
