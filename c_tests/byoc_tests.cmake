# BYOC C tests (included by CMakeLists.txt like every c_tests/*.cmake): the ExampleJSON module
# from C, the guide's generated C++ compiled against the drop-in headers and called directly,
# and a library packed by `tvmrt pack` (built as a ctest fixture) loaded with TVMModLoadFromFile.

# The `tvmrt` command-line tool (TVMRT_CLI), for the pack fixture: the library's cargo step
# builds it with the tests on (CMakeLists.txt).

set(TVMRT_BYOC_DIR "${CMAKE_CURRENT_SOURCE_DIR}/examples/byoc")

tvmrt_add_program(byoc_examplejson tvmrt::tvmrt c_tests/byoc_examplejson.c)
add_test(NAME byoc_examplejson
         COMMAND byoc_examplejson "${TVMRT_BYOC_DIR}/subgraph_0.examplejson")
set_tests_properties(byoc_examplejson PROPERTIES TIMEOUT 120)

tvmrt_add_c_test(byoc_guide_direct tvmrt::tvmrt
                 c_tests/byoc_guide_direct.c examples/byoc/gcc_0_guide.cc)

# Cross builds run the tool under the emulator, and it compiles with the target's compilers.
add_test(NAME byoc_pack
         COMMAND ${CMAKE_CROSSCOMPILING_EMULATOR} "${TVMRT_CLI}" pack --output "${CMAKE_CURRENT_BINARY_DIR}/byoc_packed.so"
                 --c-source "${TVMRT_BYOC_DIR}/gcc_0_guide.cc"
                 --c-source "${TVMRT_BYOC_DIR}/gcc_1_plain.c"
                 --module "examplejson=${TVMRT_BYOC_DIR}/subgraph_0.examplejson")
set_tests_properties(byoc_pack PROPERTIES FIXTURES_SETUP byoc_packed_lib TIMEOUT 300
  ENVIRONMENT "CC=${CMAKE_C_COMPILER};CXX=${CMAKE_CXX_COMPILER}")

tvmrt_add_program(byoc_packed tvmrt::tvmrt c_tests/byoc_packed.c)
add_test(NAME byoc_packed COMMAND byoc_packed "${CMAKE_CURRENT_BINARY_DIR}/byoc_packed.so")
set_tests_properties(byoc_packed PROPERTIES FIXTURES_REQUIRED byoc_packed_lib TIMEOUT 120)
