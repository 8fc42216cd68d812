/* Serving a language model TVM compiled with a paged KV cache, through the tvm-ffi C API only,
 * the way MLC-LLM's driver does: weights from a tensor cache
 * (vm.builtin.tensor_cache.load, vm.builtin.param_array_from_cache_by_name_unpacked), the
 * model's create_tir_paged_kv_cache, and per forward embed, vm.builtin.reshape,
 * vm.builtin.kv_state_begin_forward, prefill or decode, vm.builtin.kv_state_end_forward.
 * Nothing here is specific to tvmrt: benches/llm/llm_bench.c builds it against Apache TVM's
 * runtime too. Define LLM_PROGRAM (the name in error messages) before including. */
#ifndef TVMRT_C_TESTS_LLM_COMMON_H_
#define TVMRT_C_TESTS_LLM_COMMON_H_

#include "vm_common.h"

#ifndef LLM_PROGRAM
#define LLM_PROGRAM "llm"
#endif

enum { kMaxParams = 512, kMaxTokens = 4096 };

static inline void llm_die(const char* what, const char* msg) {
  fprintf(stderr, "%s: %s: %s\n", LLM_PROGRAM, what, msg);
  exit(1);
}

static inline TVMFFIObjectHandle llm_global(const char* name) {
  TVMFFIObjectHandle f = vm_global(name);
  if (!f) llm_die("missing global", name);
  return f;
}

static inline TVMFFIAny llm_call(TVMFFIObjectHandle f, TVMFFIAny* args, int n, const char* what) {
  TVMFFIAny out;
  char err[4096];
  if (vm_call(f, args, n, &out, err, sizeof(err)) != 0) llm_die(what, err);
  return out;
}

/* An ffi.Shape of `n` dims (through the global `ffi.Shape`, as Python's ShapeTuple). */
static inline TVMFFIAny llm_shape(const int64_t* dims, int n) {
  static TVMFFIObjectHandle f;
  TVMFFIAny args[16];
  int i;
  if (!f) f = llm_global("ffi.Shape");
  for (i = 0; i < n; i++) args[i] = vm_int(dims[i]);
  return llm_call(f, args, n, "ffi.Shape");
}

static inline TVMFFIAny llm_shape1(int64_t v) { return llm_shape(&v, 1); }

/* Resident and virtual size of this process in KiB. */
static inline void llm_memory_kib(double* rss, double* vsz) {
  long pages_total = 0, pages_rss = 0;
  FILE* f = fopen("/proc/self/statm", "r");
  if (!f || fscanf(f, "%ld %ld", &pages_total, &pages_rss) != 2) llm_die("statm", "unreadable");
  fclose(f);
  *vsz = pages_total * 4.0;
  *rss = pages_rss * 4.0;
}

/* The record names of tensor-cache.json, in file order ("name": "...", one per record). */
static inline int llm_param_names(const char* dir, char names[][256], int cap) {
  char path[2048];
  FILE* f;
  long n;
  char *text, *p;
  int count = 0;
  snprintf(path, sizeof(path), "%s/tensor-cache.json", dir);
  f = fopen(path, "rb");
  if (!f) llm_die("opening", path);
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fseek(f, 0, SEEK_SET);
  text = (char*)malloc((size_t)n + 1);
  if (fread(text, 1, (size_t)n, f) != (size_t)n) llm_die("reading", path);
  text[n] = 0;
  fclose(f);
  for (p = text; (p = strstr(p, "\"name\"")) != NULL && count < cap;) {
    char* q = strchr(p + 6, '"');
    char* e = q ? strchr(q + 1, '"') : NULL;
    if (!e || e - q - 1 >= 256) llm_die("parsing", path);
    memcpy(names[count], q + 1, (size_t)(e - q - 1));
    names[count][e - q - 1] = 0;
    count++;
    p = e + 1;
  }
  free(text);
  return count;
}

typedef struct {
  VmModel m;
  TVMFFIObjectHandle embed, prefill, decode, create;
  TVMFFIObjectHandle begin, end, add, remove, popn, reshape;
  TVMFFIAny params;
  int64_t hidden;
} Llm;

static inline void llm_load(Llm* l, const char* lib, const char* weights) {
  static char names[kMaxParams][256];
  TVMFFIAny args[kMaxParams + 3], out;
  char err[4096];
  int n, i;
  TVMFFIObjectHandle f;
  memset(l, 0, sizeof(*l));
  if (vm_load(&l->m, lib, 2, err, sizeof(err)) != 0) llm_die(lib, err);
  l->embed = vm_module_function(&l->m, l->m.vm, "embed");
  l->prefill = vm_module_function(&l->m, l->m.vm, "prefill");
  l->decode = vm_module_function(&l->m, l->m.vm, "decode");
  l->create = vm_module_function(&l->m, l->m.vm, "create_tir_paged_kv_cache");
  if (!l->embed || !l->prefill || !l->decode || !l->create) llm_die(lib, "missing functions");
  l->begin = llm_global("vm.builtin.kv_state_begin_forward");
  l->end = llm_global("vm.builtin.kv_state_end_forward");
  l->add = llm_global("vm.builtin.kv_state_add_sequence");
  l->remove = llm_global("vm.builtin.kv_state_remove_sequence");
  l->popn = llm_global("vm.builtin.kv_state_popn");
  l->reshape = llm_global("vm.builtin.reshape");
  args[0] = vm_str(weights);
  args[1] = vm_int(kDLCPU);
  args[2] = vm_int(0);
  f = llm_global("vm.builtin.tensor_cache.load");
  out = llm_call(f, args, 3, "tensor_cache.load");
  TVMFFIObjectDecRef(f);
  vm_release(&out);
  n = llm_param_names(weights, names, kMaxParams);
  for (i = 0; i < n; i++) args[i] = vm_str(names[i]);
  f = llm_global("vm.builtin.param_array_from_cache_by_name_unpacked");
  l->params = llm_call(f, args, n, "param_array_from_cache_by_name_unpacked");
  TVMFFIObjectDecRef(f);
}

/* Releases what llm_load made (the tensor cache keeps the weights until cleared). */
static inline void llm_unload(Llm* l) {
  TVMFFIObjectHandle* fs[] = {&l->embed, &l->prefill, &l->decode, &l->create, &l->begin,
                              &l->end,   &l->add,     &l->remove, &l->popn,   &l->reshape};
  size_t i;
  for (i = 0; i < sizeof(fs) / sizeof(fs[0]); i++) {
    if (*fs[i]) TVMFFIObjectDecRef(*fs[i]);
    *fs[i] = NULL;
  }
  vm_release(&l->params);
  vm_unload(&l->m);
}

/* The model's create_tir_paged_kv_cache(max_batch_size, max_total_seq_len,
 * prefill_chunk_size, page_size 16, support_sliding_window 0). */
static inline TVMFFIAny llm_create_cache(Llm* l, int64_t max_batch, int64_t context,
                                         int64_t chunk) {
  TVMFFIAny args[5], cache;
  int64_t vals[5];
  int i;
  vals[0] = max_batch;
  vals[1] = context;
  vals[2] = chunk;
  vals[3] = 16;
  vals[4] = 0;
  for (i = 0; i < 5; i++) args[i] = llm_shape1(vals[i]);
  cache = llm_call(l->create, args, 5, "create_tir_paged_kv_cache");
  for (i = 0; i < 5; i++) vm_release(&args[i]);
  return cache;
}

/* One forward of `n` tokens of sequence `seq` (a decode step: `n` sequences, one token each,
 * only for `n` = 1 here); returns the argmax of the last logits row. */
static inline int llm_forward(Llm* l, TVMFFIAny cache, int64_t seq, const int32_t* tokens, int n,
                   int decode) {
  static int32_t buf[kMaxTokens] __attribute__((aligned(64)));
  static TVMFFIObjectHandle getitem;
  HostArray ids;
  TVMFFIObjectHandle t;
  TVMFFIAny args[3], out, emb, res, logits_any, ga[2];
  int64_t dims[3];
  const DLTensor* dl;
  const float* lg;
  int64_t vocab, i, best = 0;
  if (n < 1 || n > kMaxTokens) llm_die("forward", "token count out of range");
  memcpy(buf, tokens, sizeof(int32_t) * (size_t)n);
  memset(&ids, 0, sizeof(ids));
  ids.data = buf;
  ids.ndim = 1;
  ids.shape[0] = n;
  ids.dtype.code = kDLInt;
  ids.dtype.bits = 32;
  ids.dtype.lanes = 1;
  t = host_tensor(&ids);
  args[0] = vm_obj(t);
  args[1] = l->params;
  emb = llm_call(l->embed, args, 2, "embed");
  TVMFFIObjectDecRef(t);
  dims[0] = decode ? n : 1;
  dims[1] = decode ? 1 : n;
  dims[2] = tensor_dl(emb.v_obj)->shape[1];
  args[0] = emb;
  args[1] = llm_shape(dims, 3);
  out = llm_call(l->reshape, args, 2, "reshape");
  vm_release(&args[1]);
  vm_release(&emb);
  emb = out;
  args[0] = cache;
  args[1] = llm_shape1(seq);
  args[2] = llm_shape1(decode ? 1 : n);
  res = llm_call(l->begin, args, 3, "begin_forward");
  vm_release(&res);
  vm_release(&args[1]);
  vm_release(&args[2]);
  args[0] = emb;
  args[1] = cache;
  args[2] = l->params;
  res = llm_call(decode ? l->decode : l->prefill, args, 3, decode ? "decode" : "prefill");
  vm_release(&emb);
  args[0] = cache;
  out = llm_call(l->end, args, 1, "end_forward");
  vm_release(&out);
  /* res is (logits, cache): an ffi.Array. */
  if (!getitem) getitem = llm_global("ffi.ArrayGetItem");
  ga[0] = res;
  ga[1] = vm_int(0);
  logits_any = llm_call(getitem, ga, 2, "ffi.ArrayGetItem");
  dl = tensor_dl(logits_any.v_obj);
  vocab = dl->shape[dl->ndim - 1];
  lg = (const float*)((const char*)dl->data + dl->byte_offset);
  {
    int64_t rows = 1;
    for (i = 0; i < dl->ndim - 1; i++) rows *= dl->shape[i];
    lg += (rows - 1) * vocab;
  }
  for (i = 1; i < vocab; i++)
    if (lg[i] > lg[best]) best = i;
  vm_release(&logits_any);
  vm_release(&res);
  return (int)best;
}

#endif /* TVMRT_C_TESTS_LLM_COMMON_H_ */
