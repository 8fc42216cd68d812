/* The Relax models of tests/fixtures (built by TVM 0.27) run from C through the tvm-ffi API,
 * compared with the outputs TVM's own VM recorded; wrong inputs fail with the model's own
 * check naming the parameter.
 *
 * Usage: vm_models FIXTURES_DIR */
#include "vm_common.h"

#include "check.h"

typedef struct {
  const char* id;      /* case id: data/<id>.in<i>.npy, data/<id>.out<i>.npy */
  const char* library; /* fixture library */
  int num_inputs;
  int num_outputs; /* > 1: main returns a tuple of this many tensors */
} Case;

static const Case kCases[] = {
    {"mlp.main", "mlp.so", 1, 1},
    {"cnn.main", "cnn.so", 1, 1},
    {"dyn_batch.main.n1", "dyn_batch.so", 3, 1},
    {"dyn_batch.main.n5", "dyn_batch.so", 3, 1},
    {"tuple_ret.main", "tuple_ret.so", 2, 3},
    {"cond.main.true", "cond.so", 2, 1},
    {"cond.main.false", "cond.so", 2, 1},
};

typedef struct {
  const char* id;
  const char* library;
  int num_inputs;
  const char* needles[3]; /* all must appear in the error */
} ErrorCase;

static const ErrorCase kErrors[] = {
    {"cnn.main.err_shape", "cnn.so", 1,
     {"RuntimeError", "param=x", "shape[3] mismatch to specified constant"}},
    {"cnn.main.err_dtype", "cnn.so", 1,
     {"ValueError", "param=x", "expect Tensor with dtype float32 but get float64"}},
    {"dyn_batch.main.err_w_shape", "dyn_batch.so", 3, {"RuntimeError", "param=w", "(5 vs. 4)"}},
    {"dyn_batch.main.err_b_dtype", "dyn_batch.so", 3,
     {"ValueError", "param=b", "but get int32"}},
};

static const char* g_dir;

static void path_of(char* out, size_t cap, const char* file) {
  snprintf(out, cap, "%s/%s", g_dir, file);
}

/* Loads the inputs of case `id` as tensors; returns the count loaded. */
static int load_inputs(const char* id, int n, HostArray* host, TVMFFIObjectHandle* tensors) {
  int i;
  for (i = 0; i < n; i++) {
    char path[1024], file[256];
    snprintf(file, sizeof(file), "data/%s.in%d.npy", id, i);
    path_of(path, sizeof(path), file);
    if (!CHECK(npy_read(path, &host[i]) == 0, "reading %s", path)) return i;
    tensors[i] = host_tensor(&host[i]);
    if (!CHECK(tensors[i] != NULL, "TVMFFITensorFromDLPack for %s", path)) {
      host_free(&host[i]);
      return i;
    }
  }
  return n;
}

static void free_inputs(int n, HostArray* host, TVMFFIObjectHandle* tensors) {
  int i;
  for (i = 0; i < n; i++) {
    TVMFFIObjectDecRef(tensors[i]);
    host_free(&host[i]);
  }
}

static void check_output(const char* id, int index, TVMFFIAny* v) {
  char path[1024], file[256], why[256];
  HostArray want;
  snprintf(file, sizeof(file), "data/%s.out%d.npy", id, index);
  path_of(path, sizeof(path), file);
  if (!CHECK(npy_read(path, &want) == 0, "reading %s", path)) return;
  if (CHECK(v->type_index == kTVMFFITensor, "%s output %d has type index %d", id, index,
            v->type_index)) {
    CHECK(close_f32(tensor_dl(v->v_obj), &want, 1e-5, 1e-6, why, sizeof(why)), "%s output %d: %s",
          id, index, why);
  }
  host_free(&want);
}

static void run_case(const Case* c, int allocator) {
  char err[2048], path[1024];
  VmModel m;
  HostArray host[4];
  TVMFFIObjectHandle tensors[4], main_fn;
  TVMFFIAny args[4], out;
  int i, loaded;
  path_of(path, sizeof(path), c->library);
  if (!CHECK(vm_load(&m, path, allocator, err, sizeof(err)) == 0, "%s: %s", c->id, err)) return;
  main_fn = vm_module_function(&m, m.vm, "main");
  CHECK(main_fn != NULL, "%s: the VM has no main", c->id);
  loaded = load_inputs(c->id, c->num_inputs, host, tensors);
  if (main_fn && loaded == c->num_inputs) {
    for (i = 0; i < loaded; i++) args[i] = vm_obj(tensors[i]);
    /* Twice: the second call runs on storage the pooled allocator recycled. */
    for (int round = 0; round < 2; round++) {
      if (!CHECK(vm_call(main_fn, args, loaded, &out, err, sizeof(err)) == 0, "%s: %s", c->id,
                 err))
        break;
      if (c->num_outputs == 1) {
        check_output(c->id, 0, &out);
      } else if (CHECK(out.type_index == kTVMFFIArray, "%s returns type %d, not a tuple", c->id,
                       out.type_index)) {
        const TVMFFISeqCell* seq =
            (const TVMFFISeqCell*)((const char*)out.v_obj + sizeof(TVMFFIObject));
        if (CHECK(seq->size == c->num_outputs, "%s: tuple of %lld", c->id, (long long)seq->size)) {
          for (i = 0; i < c->num_outputs; i++) check_output(c->id, i, &((TVMFFIAny*)seq->data)[i]);
        }
      }
      vm_release(&out);
    }
  }
  if (main_fn) TVMFFIObjectDecRef(main_fn);
  free_inputs(loaded, host, tensors);
  vm_unload(&m);
}

static void run_error_case(const ErrorCase* c) {
  char err[2048], path[1024];
  VmModel m;
  HostArray host[4];
  TVMFFIObjectHandle tensors[4], main_fn;
  TVMFFIAny args[4], out;
  int i, loaded;
  path_of(path, sizeof(path), c->library);
  if (!CHECK(vm_load(&m, path, 2, err, sizeof(err)) == 0, "%s: %s", c->id, err)) return;
  main_fn = vm_module_function(&m, m.vm, "main");
  loaded = load_inputs(c->id, c->num_inputs, host, tensors);
  if (main_fn && loaded == c->num_inputs) {
    for (i = 0; i < loaded; i++) args[i] = vm_obj(tensors[i]);
    if (CHECK(vm_call(main_fn, args, loaded, &out, err, sizeof(err)) != 0, "%s succeeded",
              c->id)) {
      for (i = 0; i < 3 && c->needles[i]; i++)
        CHECK(strstr(err, c->needles[i]) != NULL, "%s: \"%s\" not in: %s", c->id, c->needles[i],
              err);
    } else {
      vm_release(&out);
    }
  }
  if (main_fn) TVMFFIObjectDecRef(main_fn);
  free_inputs(loaded, host, tensors);
  vm_unload(&m);
}

int main(int argc, char** argv) {
  size_t i;
  if (argc != 2) {
    fprintf(stderr, "usage: %s FIXTURES_DIR\n", argv[0]);
    return 2;
  }
  g_dir = argv[1];
  for (i = 0; i < sizeof(kCases) / sizeof(kCases[0]); i++) {
    run_case(&kCases[i], 2);
    run_case(&kCases[i], 1);
  }
  for (i = 0; i < sizeof(kErrors) / sizeof(kErrors[0]); i++) run_error_case(&kErrors[i]);
  {
    /* A missing library and a non-model library are errors, not crashes. */
    char err[1024], path[1024];
    VmModel m;
    path_of(path, sizeof(path), "no_such_model.so");
    CHECK(vm_load(&m, path, 2, err, sizeof(err)) != 0, "loading a missing file succeeded");
    vm_unload(&m);
    path_of(path, sizeof(path), "add_dyn.so");
    CHECK(vm_load(&m, path, 2, err, sizeof(err)) != 0, "a kernel library made a VM");
    vm_unload(&m);
  }
  if (g_failures) {
    fprintf(stderr, "%d check(s) failed\n", g_failures);
    return 1;
  }
  printf("vm_models: all checks passed\n");
  return 0;
}
