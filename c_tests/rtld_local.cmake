# tvmrt loaded with RTLD_LOCAL (c_tests/rtld_local.c): the program does not link tvmrt; it
# dlopens libtvmrt.so, or a plugin that links libtvmrt.a, in a local scope and loads the TVM 0.27
# fixtures through it. The fixtures are x86-64 code, so nothing is built elsewhere (cross builds
# would only link a plugin they cannot run).
if(TVMRT_X86_64_FIXTURES)
  tvmrt_add_program(rtld_local "" c_tests/rtld_local.c)
  target_link_libraries(rtld_local PRIVATE ${CMAKE_DL_LIBS})

  add_library(tvmrt_rtld_local_plugin SHARED c_tests/rtld_local_plugin.c)
  target_link_libraries(tvmrt_rtld_local_plugin PRIVATE tvmrt::static)
  set_target_properties(tvmrt_rtld_local_plugin PROPERTIES PREFIX "" OUTPUT_NAME rtld_local_plugin)
  add_dependencies(rtld_local tvmrt_rtld_local_plugin)

  add_test(NAME rtld_local
    COMMAND rtld_local "${TVMRT_SHARED_LIB}" "${CMAKE_CURRENT_SOURCE_DIR}/tests/fixtures")
  add_test(NAME rtld_local_plugin
    COMMAND rtld_local $<TARGET_FILE:tvmrt_rtld_local_plugin>
            "${CMAKE_CURRENT_SOURCE_DIR}/tests/fixtures")
  set_tests_properties(rtld_local rtld_local_plugin PROPERTIES TIMEOUT 120)
endif()
