# runtime.config_threadpool from C: affinities read back with sched_getaffinity, thread counts,
# bad input; with a two-thread pool whatever the machine; and under valgrind.
tvmrt_add_program(thread_pool_config tvmrt::tvmrt c_tests/thread_pool_config.c)
add_test(NAME thread_pool_config COMMAND thread_pool_config)
set_tests_properties(thread_pool_config PROPERTIES TIMEOUT 120 ENVIRONMENT "TVM_NUM_THREADS=2")
if(VALGRIND_EXECUTABLE)
  add_test(NAME memcheck_thread_pool_config
    COMMAND "${VALGRIND_EXECUTABLE}" --quiet --error-exitcode=1 --leak-check=full
            --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect
            $<TARGET_FILE:thread_pool_config>)
  set_tests_properties(memcheck_thread_pool_config PROPERTIES TIMEOUT 600
                       ENVIRONMENT "TVM_NUM_THREADS=2")
endif()
