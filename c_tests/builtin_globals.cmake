# Every subsystem's globals are installed whether a program links libtvmrt.so or libtvmrt.a (a
# static link drops archive members nothing refers to; see src/globals.rs).
tvmrt_add_c_test(builtin_globals tvmrt::tvmrt c_tests/builtin_globals.c)
tvmrt_add_c_test(builtin_globals_static tvmrt::static c_tests/builtin_globals.c)
