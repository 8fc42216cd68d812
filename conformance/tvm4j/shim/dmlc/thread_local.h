/* What tvm4j's JNI source (jvm/native, TVM v0.20.0) takes from dmlc-core when it is built
 * against tvmrt: dmlc::ThreadLocalStore<T>::Get(), one T per thread. tvmrt's own code; used
 * only by conformance/tvm4j/run.sh. */
#ifndef TVMRT_CONFORMANCE_TVM4J_THREAD_LOCAL_H_
#define TVMRT_CONFORMANCE_TVM4J_THREAD_LOCAL_H_

namespace dmlc {
template <typename T>
class ThreadLocalStore {
 public:
  static T* Get() {
    static thread_local T value;
    return &value;
  }
};
}  // namespace dmlc

#endif  // TVMRT_CONFORMANCE_TVM4J_THREAD_LOCAL_H_
