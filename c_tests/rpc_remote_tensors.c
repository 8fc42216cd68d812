/* A C program of TVM's RPC client, as written for TVM's runtime, on tvmrt: it starts
 * `tvmrt rpc-server` on 127.0.0.1 (a free port, stopped by its process id), connects with
 * `rpc.Connect`, uploads and loads TVM's compiled add_dyn.so there, and works on tensors of the
 * session's masked CPU (`kDLCPU + 128 * (session index + 1)`) through the classic API:
 * TVMArrayAlloc, TVMArrayCopyFromBytes/ToBytes, TVMArrayCopyFromTo between remote tensors and
 * to a local one, TVMSynchronize, the remote `add` called with them, TVMArrayFree. Then what is
 * refused with a clear error while the session goes on: a session that is not open, a tensor
 * whose data is no remote allocation, a local tensor passed to the remote, a short one. Last,
 * rpc.Connect's enable_logging: the session's packets logged on stderr.
 *
 *   rpc_remote_tensors TVMRT_TOOL FIXTURES_DIR */
#define _POSIX_C_SOURCE 200809L /* fdopen, fileno, kill */

#include <tvm/runtime/c_runtime_api.h>

#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

enum { N = 1024 };

/* Starts `tool rpc-server` on a free port; returns its pid and writes the port. */
static pid_t start_server(const char* tool, int* port) {
  int fds[2];
  pid_t pid;
  FILE* out;
  char line[256];
  if (pipe(fds) != 0) return -1;
  pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execl(tool, tool, "rpc-server", "--host", "127.0.0.1", "--port", "0", "--work-dir",
          "rpc_remote_tensors.work", (char*)NULL);
    _exit(127);
  }
  close(fds[1]);
  out = fdopen(fds[0], "r");
  *port = 0;
  /* "listening on 127.0.0.1:PORT" */
  if (out && fgets(line, sizeof(line), out)) {
    const char* colon = strrchr(line, ':');
    if (colon) *port = atoi(colon + 1);
  }
  if (out) fclose(out);
  return pid;
}

static void stop_server(pid_t pid) {
  int status;
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  waitpid(pid, &status, 0);
}

/* Calls `f` with `n` arguments; returns its result in *rv (type code in *code). */
static int call(TVMFunctionHandle f, TVMValue* args, int* codes, int n, TVMValue* rv, int* code) {
  return TVMFuncCall(f, args, codes, n, rv, code);
}

static void* read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  void* buf;
  long n;
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fseek(f, 0, SEEK_SET);
  buf = malloc((size_t)n);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *size = (size_t)n;
  return buf;
}

/* The session's remote `add` of add_dyn.so, loaded there. */
static TVMFunctionHandle load_add(TVMModuleHandle sess, const char* fixtures,
                                  TVMModuleHandle* remote_mod) {
  TVMFunctionHandle upload = NULL, load = NULL, add = NULL;
  TVMValue a[2], rv;
  int c[2], rc;
  TVMByteArray bytes;
  char path[4096];
  size_t size = 0;
  snprintf(path, sizeof(path), "%s/add_dyn.so", fixtures);
  bytes.data = read_file(path, &size);
  bytes.size = size;
  if (!CHECK(bytes.data != NULL, "cannot read %s", path)) return NULL;
  CHECK_OK(TVMModGetFunction(sess, "tvm.rpc.server.upload", 0, &upload));
  a[0].v_str = "add_dyn.so";
  c[0] = kTVMStr;
  a[1].v_handle = &bytes;
  c[1] = kTVMBytes;
  CHECK_OK(call(upload, a, c, 2, &rv, &rc));
  free((void*)bytes.data);
  CHECK_OK(TVMFuncGetGlobal("rpc.LoadRemoteModule", &load));
  a[0].v_handle = sess;
  c[0] = kTVMModuleHandle;
  a[1].v_str = "add_dyn.so";
  c[1] = kTVMStr;
  CHECK_OK(call(load, a, c, 2, &rv, &rc));
  if (!CHECK(rc == kTVMModuleHandle, "load_module returned type code %d", rc)) return NULL;
  *remote_mod = rv.v_handle;
  CHECK_OK(TVMModGetFunction(*remote_mod, "add", 0, &add));
  if (upload) TVMFuncFree(upload);
  return add;
}

static void remote_tensors(TVMModuleHandle sess, const char* fixtures) {
  TVMFunctionHandle index_of = NULL, add;
  TVMModuleHandle remote_mod = NULL;
  TVMValue a[3], rv;
  int c[3], rc, i, remote_cpu;
  int64_t shape[1] = {N};
  float x[N], y[N], want[N];
  TVMArrayHandle ra = NULL, rb = NULL, rc_ = NULL, local = NULL, other = NULL;
  DLTensor forged;

  CHECK_OK(TVMFuncGetGlobal("rpc.SessTableIndex", &index_of));
  a[0].v_handle = sess;
  c[0] = kTVMModuleHandle;
  CHECK_OK(call(index_of, a, c, 1, &rv, &rc));
  remote_cpu = kDLCPU + 128 * ((int)rv.v_int64 + 1);
  add = load_add(sess, fixtures, &remote_mod);
  if (!add) return;

  for (i = 0; i < N; i++) {
    x[i] = (float)i * 0.25f;
    want[i] = 2.0f * x[i];
  }
  CHECK_OK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, remote_cpu, 0, &ra));
  CHECK_OK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, remote_cpu, 0, &rb));
  CHECK_OK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, remote_cpu, 0, &rc_));
  if (!CHECK(ra && rb && rc_, "remote allocation")) return;
  CHECK((int)ra->device.device_type == remote_cpu, "device type %d", ra->device.device_type);
  CHECK_OK(TVMArrayCopyFromBytes(ra, x, sizeof(x)));
  memset(y, 0, sizeof(y));
  CHECK_OK(TVMArrayCopyToBytes(ra, y, sizeof(y)));
  CHECK(memcmp(x, y, sizeof(x)) == 0, "remote round trip changed the data");
  CHECK_OK(TVMArrayCopyFromTo(ra, rb, NULL));
  CHECK_OK(TVMSynchronize(remote_cpu, 0, NULL));

  /* c = a + b on the server, the tensors passed as TVM's client passes them. */
  a[0].v_handle = ra;
  a[1].v_handle = rb;
  a[2].v_handle = rc_;
  c[0] = c[1] = c[2] = kTVMDLTensorHandle;
  CHECK_OK(call(add, a, c, 3, &rv, &rc));
  CHECK_OK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &local));
  CHECK_OK(TVMArrayCopyFromTo(rc_, local, NULL));
  CHECK(memcmp(local->data, want, sizeof(want)) == 0, "a + b on the server: wrong sums");
  c[0] = c[1] = c[2] = kTVMNDArrayHandle;
  CHECK_OK(TVMArrayCopyFromBytes(rc_, y, sizeof(y)));
  CHECK_OK(call(add, a, c, 3, &rv, &rc));
  CHECK_OK(TVMArrayCopyToBytes(rc_, y, sizeof(y)));
  CHECK(memcmp(y, want, sizeof(want)) == 0, "a + b with NDArray handles: wrong sums");

  /* Refused, each alone: a session nobody opened; a tensor whose data is not a remote
   * allocation; a local tensor passed to the remote; a shape the kernel refuses. */
  CHECK_FAILS_WITH(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU + 128 * 40, 0, &other),
                   "no RPC session 39");
  forged = *ra;
  forged.data = (void*)(uintptr_t)0x1000;
  a[0].v_handle = &forged;
  c[0] = kTVMDLTensorHandle;
  CHECK_FAILS_WITH(call(add, a, c, 3, &rv, &rc), "not the data of a remote tensor");
  a[0].v_handle = local;
  CHECK_FAILS_WITH(call(add, a, c, 3, &rv, &rc), "local tensor");
  {
    int64_t short_shape[1] = {8};
    CHECK_OK(TVMArrayAlloc(short_shape, 1, kDLFloat, 32, 1, remote_cpu, 0, &other));
    a[0].v_handle = other;
    CHECK(call(add, a, c, 3, &rv, &rc) != 0, "a short tensor accepted by add");
    CHECK_FAILS_WITH(TVMArrayCopyFromTo(other, ra, NULL), "size");
    CHECK_OK(TVMArrayFree(other));
  }

  /* The session goes on. */
  a[0].v_handle = ra;
  c[0] = kTVMDLTensorHandle;
  memset(y, 0, sizeof(y));
  CHECK_OK(call(add, a, c, 3, &rv, &rc));
  CHECK_OK(TVMArrayCopyToBytes(rc_, y, sizeof(y)));
  CHECK(memcmp(y, want, sizeof(want)) == 0, "after the refusals: wrong sums");

  CHECK_OK(TVMArrayFree(ra));
  CHECK_OK(TVMArrayFree(rb));
  CHECK_OK(TVMArrayFree(rc_));
  CHECK_OK(TVMArrayFree(local));
  TVMFuncFree(add);
  TVMFuncFree(index_of);
  TVMModFree(remote_mod);
}

/* rpc.Connect("127.0.0.1", port, "", enable_logging): the session module, or NULL. */
static TVMModuleHandle connect_to(int port, int enable_logging) {
  TVMFunctionHandle connect = NULL;
  TVMValue a[4], rv;
  int c[4], rc, ok;
  CHECK_OK(TVMFuncGetGlobal("rpc.Connect", &connect));
  if (!connect) return NULL;
  a[0].v_str = "127.0.0.1";
  c[0] = kTVMStr;
  a[1].v_int64 = port;
  c[1] = kDLInt;
  a[2].v_str = "";
  c[2] = kTVMStr;
  a[3].v_int64 = enable_logging;
  c[3] = kDLInt;
  ok = call(connect, a, c, 4, &rv, &rc) == 0 && rc == kTVMModuleHandle;
  CHECK(ok, "rpc.Connect to port %d failed: %s", port, TVMGetLastError());
  TVMFuncFree(connect);
  return ok ? rv.v_handle : NULL;
}

/* rpc.Connect with enable_logging (its fourth argument) on: every packet and answer of the
 * session is a line on stderr, read back here from a temporary file. */
static void logging(int port) {
  TVMFunctionHandle enabled = NULL;
  TVMModuleHandle sess;
  TVMValue a[1], rv;
  int c[1], rc, saved;
  FILE* log = tmpfile();
  char text[8192];
  size_t n;
  if (!CHECK(log != NULL, "no temporary file")) return;
  fflush(stderr);
  saved = dup(2);
  dup2(fileno(log), 2);
  sess = connect_to(port, 1);
  if (sess) {
    CHECK_OK(TVMModGetFunction(sess, "runtime.RuntimeEnabled", 0, &enabled));
    a[0].v_str = "cpu";
    c[0] = kTVMStr;
    if (enabled) CHECK_OK(call(enabled, a, c, 1, &rv, &rc));
    CHECK(rv.v_int64 == 1, "runtime.RuntimeEnabled(\"cpu\") on the server: %lld",
          (long long)rv.v_int64);
    if (enabled) TVMFuncFree(enabled);
    TVMModFree(sess);
  }
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  rewind(log);
  n = fread(text, 1, sizeof(text) - 1, log);
  text[n] = 0;
  fclose(log);
  CHECK(strstr(text, "-> GetGlobalFunc") && strstr(text, "runtime.RuntimeEnabled"),
        "no GetGlobalFunc line in the log:\n%s", text);
  CHECK(strstr(text, "-> CallFunc") && strstr(text, "<- Return"),
        "no CallFunc / Return lines in the log:\n%s", text);
}

int main(int argc, char** argv) {
  TVMFunctionHandle shutdown = NULL;
  TVMModuleHandle sess;
  TVMValue rv;
  int rc, port = 0;
  pid_t server;
  if (argc != 3) {
    fprintf(stderr, "usage: %s TVMRT_TOOL FIXTURES_DIR\n", argv[0]);
    return 2;
  }
  server = start_server(argv[1], &port);
  if (!CHECK(server > 0 && port > 0, "tvmrt rpc-server did not start (port %d)", port)) {
    stop_server(server);
    return 1;
  }
  sess = connect_to(port, 0);
  if (sess) {
    remote_tensors(sess, argv[2]);
    CHECK_OK(TVMModGetFunction(sess, "CloseRPCConnection", 0, &shutdown));
    if (shutdown) {
      CHECK_OK(call(shutdown, NULL, NULL, 0, &rv, &rc));
      TVMFuncFree(shutdown);
    }
    TVMModFree(sess);
  }
  logging(port);
  stop_server(server);
  if (g_failures) fprintf(stderr, "%d check(s) failed\n", g_failures);
  return g_failures ? 1 : 0;
}
