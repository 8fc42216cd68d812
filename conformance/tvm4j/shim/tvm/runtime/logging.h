/* What tvm4j's JNI source (jvm/native, TVM v0.20.0) takes from TVM's C++ logging header when it
 * is built against tvmrt, which ships TVM's C headers only: CHECK(cond) and LOG(FATAL) << ...,
 * both ending the process with the message, as TVM's do for a JNI library. tvmrt's own code;
 * used only by conformance/tvm4j/run.sh. */
#ifndef TVMRT_CONFORMANCE_TVM4J_LOGGING_H_
#define TVMRT_CONFORMANCE_TVM4J_LOGGING_H_

#include <cstdlib>
#include <iostream>

namespace tvmrt_tvm4j_shim {
/* Streams a message to stderr and aborts when destroyed. */
struct Fatal {
  Fatal(const char* file, int line) { std::cerr << file << ":" << line << ": "; }
  ~Fatal() {
    std::cerr << std::endl;
    std::abort();
  }
  template <typename T>
  Fatal& operator<<(const T& v) {
    std::cerr << v;
    return *this;
  }
};
}  // namespace tvmrt_tvm4j_shim

#define LOG(severity) ::tvmrt_tvm4j_shim::Fatal(__FILE__, __LINE__)
#define CHECK(cond) \
  if (!(cond)) ::tvmrt_tvm4j_shim::Fatal(__FILE__, __LINE__) << "Check failed: " #cond " "

#endif  // TVMRT_CONFORMANCE_TVM4J_LOGGING_H_
