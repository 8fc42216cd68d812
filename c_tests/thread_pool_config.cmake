# runtime.config_threadpool from C: affinities read back with sched_getaffinity, thread counts,
# bad input; with a two-thread pool whatever the machine; and under valgrind.
tvmrt_add_program(thread_pool_config tvmrt::tvmrt c_tests/thread_pool_config.c)
add_test(NAME thread_pool_config COMMAND thread_pool_config)
set_tests_properties(thread_pool_config PROPERTIES TIMEOUT 120 ENVIRONMENT "TVM_NUM_THREADS=2")
tvmrt_add_memcheck(thread_pool_config ENVIRONMENT "TVM_NUM_THREADS=2")
