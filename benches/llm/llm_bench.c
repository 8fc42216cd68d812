/* SPDX-License-Identifier: Apache-2.0
 *
 * llm_bench: one C source, built twice (benches/llm/run.sh), that serves a language model TVM
 * compiled with a paged KV cache through the tvm-ffi C API, the way MLC-LLM's driver does:
 * linked against tvmrt (libtvmrt.so) it measures tvmrt, linked against Apache TVM's runtime
 * (libtvm_ffi.so + libtvm_runtime.so of the apache-tvm wheel) it measures TVM. Same library,
 * same weights, same calls:
 *   vm.builtin.tensor_cache.load, vm.builtin.param_array_from_cache_by_name_unpacked,
 *   the model's create_tir_paged_kv_cache, vm.builtin.kv_state_add_sequence, and per forward
 *   embed, vm.builtin.reshape, vm.builtin.kv_state_begin_forward, prefill or decode,
 *   vm.builtin.kv_state_end_forward (plus vm.builtin.kv_state_popn between timed decode
 *   steps, to keep the context length fixed).
 *
 * Usage: llm_bench MODEL.so WEIGHTS_DIR CONTEXT PREFILL_TOKENS [SAMPLES]
 *   prints RESULT lines (metric median min unit):
 *     decode_ctx<CONTEXT>   one decode step after a CONTEXT-token prompt (us)
 *     prefill_<N>           one N-token prefill of a new sequence (us)
 *     cache_rss / cache_vsz memory the cache took when created (KiB of resident / virtual)
 *   and a CHECK line with the greedy tokens of the first steps (both runtimes must agree).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../c_tests/vm_common.h"
#include "../bench_timing.h"

#ifndef LB_RUNTIME
#define LB_RUNTIME "unknown"
#endif

enum { kMaxParams = 512, kMaxTokens = 4096 };

static void die(const char* what, const char* msg) {
  fprintf(stderr, "llm_bench (%s): %s: %s\n", LB_RUNTIME, what, msg);
  exit(1);
}

static TVMFFIObjectHandle global(const char* name) {
  TVMFFIObjectHandle f = vm_global(name);
  if (!f) die("missing global", name);
  return f;
}

static TVMFFIAny call(TVMFFIObjectHandle f, TVMFFIAny* args, int n, const char* what) {
  TVMFFIAny out;
  char err[4096];
  if (vm_call(f, args, n, &out, err, sizeof(err)) != 0) die(what, err);
  return out;
}

/* An ffi.Shape of `n` dims (through the global `ffi.Shape`, as Python's ShapeTuple). */
static TVMFFIAny shape(const int64_t* dims, int n) {
  static TVMFFIObjectHandle f;
  TVMFFIAny args[16];
  int i;
  if (!f) f = global("ffi.Shape");
  for (i = 0; i < n; i++) args[i] = vm_int(dims[i]);
  return call(f, args, n, "ffi.Shape");
}

static TVMFFIAny shape1(int64_t v) { return shape(&v, 1); }

/* Resident and virtual size of this process in KiB. */
static void memory_kib(double* rss, double* vsz) {
  long pages_total = 0, pages_rss = 0;
  FILE* f = fopen("/proc/self/statm", "r");
  if (!f || fscanf(f, "%ld %ld", &pages_total, &pages_rss) != 2) die("statm", "unreadable");
  fclose(f);
  *vsz = pages_total * 4.0;
  *rss = pages_rss * 4.0;
}

/* The record names of tensor-cache.json, in file order ("name": "...", one per record). */
static int param_names(const char* dir, char names[][256], int cap) {
  char path[1024];
  FILE* f;
  long n;
  char *text, *p;
  int count = 0;
  snprintf(path, sizeof(path), "%s/tensor-cache.json", dir);
  f = fopen(path, "rb");
  if (!f) die("opening", path);
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fseek(f, 0, SEEK_SET);
  text = (char*)malloc((size_t)n + 1);
  if (fread(text, 1, (size_t)n, f) != (size_t)n) die("reading", path);
  text[n] = 0;
  fclose(f);
  for (p = text; (p = strstr(p, "\"name\"")) != NULL && count < cap;) {
    char* q = strchr(p + 6, '"');
    char* e = q ? strchr(q + 1, '"') : NULL;
    if (!e || e - q - 1 >= 256) die("parsing", path);
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

static void load(Llm* l, const char* lib, const char* weights) {
  static char names[kMaxParams][256];
  TVMFFIAny args[kMaxParams + 3], out;
  char err[4096];
  int n, i;
  if (vm_load(&l->m, lib, 2, err, sizeof(err)) != 0) die(lib, err);
  l->embed = vm_module_function(&l->m, l->m.vm, "embed");
  l->prefill = vm_module_function(&l->m, l->m.vm, "prefill");
  l->decode = vm_module_function(&l->m, l->m.vm, "decode");
  l->create = vm_module_function(&l->m, l->m.vm, "create_tir_paged_kv_cache");
  if (!l->embed || !l->prefill || !l->decode || !l->create) die(lib, "missing functions");
  l->begin = global("vm.builtin.kv_state_begin_forward");
  l->end = global("vm.builtin.kv_state_end_forward");
  l->add = global("vm.builtin.kv_state_add_sequence");
  l->remove = global("vm.builtin.kv_state_remove_sequence");
  l->popn = global("vm.builtin.kv_state_popn");
  l->reshape = global("vm.builtin.reshape");
  args[0] = vm_str(weights);
  args[1] = vm_int(kDLCPU);
  args[2] = vm_int(0);
  out = call(global("vm.builtin.tensor_cache.load"), args, 3, "tensor_cache.load");
  vm_release(&out);
  n = param_names(weights, names, kMaxParams);
  for (i = 0; i < n; i++) args[i] = vm_str(names[i]);
  l->params = call(global("vm.builtin.param_array_from_cache_by_name_unpacked"), args, n,
                   "param_array_from_cache_by_name_unpacked");
}

static TVMFFIAny create_cache(Llm* l, int64_t context, int64_t chunk) {
  TVMFFIAny args[5];
  int64_t vals[5];
  int i;
  vals[0] = 2;       /* max_batch_size */
  vals[1] = context; /* max_total_seq_len */
  vals[2] = chunk;   /* prefill_chunk_size */
  vals[3] = 16;      /* page_size */
  vals[4] = 0;       /* support_sliding_window */
  for (i = 0; i < 5; i++) args[i] = shape1(vals[i]);
  return call(l->create, args, 5, "create_tir_paged_kv_cache");
}

/* One forward of `n` tokens of sequence `seq`; returns the argmax of the last logits row. */
static int forward(Llm* l, TVMFFIAny cache, int64_t seq, const int32_t* tokens, int n,
                   int decode) {
  static int32_t buf[kMaxTokens] __attribute__((aligned(64)));
  HostArray ids;
  TVMFFIObjectHandle t;
  TVMFFIAny args[3], out, emb, res, logits_any;
  int64_t dims[3];
  const DLTensor* dl;
  const float* lg;
  int64_t vocab, i, best = 0;
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
  emb = call(l->embed, args, 2, "embed");
  TVMFFIObjectDecRef(t);
  dims[0] = decode ? n : 1;
  dims[1] = decode ? 1 : n;
  dims[2] = tensor_dl(emb.v_obj)->shape[1];
  args[0] = emb;
  args[1] = shape(dims, 3);
  out = call(l->reshape, args, 2, "reshape");
  vm_release(&args[1]);
  vm_release(&emb);
  emb = out;
  args[0] = cache;
  args[1] = shape1(seq);
  args[2] = shape1(decode ? 1 : n);
  res = call(l->begin, args, 3, "begin_forward");
  vm_release(&res);
  vm_release(&args[1]);
  vm_release(&args[2]);
  args[0] = emb;
  args[1] = cache;
  args[2] = l->params;
  res = call(decode ? l->decode : l->prefill, args, 3, decode ? "decode" : "prefill");
  vm_release(&emb);
  args[0] = cache;
  out = call(l->end, args, 1, "end_forward");
  vm_release(&out);
  /* res is (logits, cache): an ffi.Array. */
  {
    TVMFFIObjectHandle getitem = NULL;
    static TVMFFIObjectHandle f;
    TVMFFIAny ga[2];
    if (!f) f = global("ffi.ArrayGetItem");
    getitem = f;
    ga[0] = res;
    ga[1] = vm_int(0);
    logits_any = call(getitem, ga, 2, "ffi.ArrayGetItem");
  }
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

static void report(const char* metric, double* v, int n, const char* unit) {
  double med, mn;
  median_min(v, n, &med, &mn);
  printf("RESULT %s %.4f %.4f %s\n", metric, med, mn, unit);
  fflush(stdout);
}

int main(int argc, char** argv) {
  Llm l;
  TVMFFIAny cache, args[3], out;
  int64_t context, prefill_n;
  int samples, i, s, tok;
  static int32_t prompt[kMaxTokens];
  double *times, rss0, vsz0, rss1, vsz1;
  char metric[64];
  if (argc < 5) die("usage", "llm_bench MODEL.so WEIGHTS CONTEXT PREFILL_TOKENS [SAMPLES]");
  context = atoll(argv[3]);
  prefill_n = atoll(argv[4]);
  samples = argc > 5 ? atoi(argv[5]) : 200;
  if (context < 1 || context >= kMaxTokens || prefill_n < 1 || prefill_n >= kMaxTokens)
    die("usage", "bad sizes");
  times = (double*)calloc((size_t)samples, sizeof(double));
  load(&l, argv[1], argv[2]);
  for (i = 0; i < kMaxTokens; i++) prompt[i] = (int32_t)((i * 37 + 11) % 100);

  memory_kib(&rss0, &vsz0);
  cache = create_cache(&l, 4 * kMaxTokens, prefill_n > context ? prefill_n : context);
  memory_kib(&rss1, &vsz1);

  /* Decode at a fixed context: prompt, then (decode step, popn 1) repeated. */
  args[0] = cache;
  args[1] = vm_int(0);
  out = call(l.add, args, 2, "add_sequence");
  vm_release(&out);
  tok = forward(&l, cache, 0, prompt, (int)context, 0);
  printf("CHECK %d", tok);
  for (i = 0; i < 8; i++) {
    tok = forward(&l, cache, 0, &tok, 1, 1);
    printf(" %d", tok);
  }
  printf("\n");
  args[2] = vm_int(8);
  out = call(l.popn, args, 3, "popn");
  vm_release(&out);
  for (s = 0; s < samples + 20; s++) {
    int32_t t0 = prompt[s % 100];
    uint64_t start = now_ns();
    forward(&l, cache, 0, &t0, 1, 1);
    if (s >= 20) times[s - 20] = (double)(now_ns() - start) / 1000.0;
    args[2] = vm_int(1);
    out = call(l.popn, args, 3, "popn");
    vm_release(&out);
  }
  snprintf(metric, sizeof(metric), "decode_ctx%lld", (long long)context);
  report(metric, times, samples, "us");

  /* Prefill of a new sequence (added and removed around each timed forward). */
  {
    int reps = samples / 4 < 10 ? 10 : samples / 4;
    for (s = 0; s < reps + 3; s++) {
      uint64_t start;
      args[1] = vm_int(1);
      out = call(l.add, args, 2, "add_sequence");
      vm_release(&out);
      start = now_ns();
      forward(&l, cache, 1, prompt, (int)prefill_n, 0);
      if (s >= 3) times[s - 3] = (double)(now_ns() - start) / 1000.0;
      out = call(l.remove, args, 2, "remove_sequence");
      vm_release(&out);
    }
    snprintf(metric, sizeof(metric), "prefill_%lld", (long long)prefill_n);
    report(metric, times, reps, "us");
  }
  printf("RESULT cache_rss %.1f %.1f KiB\n", rss1 - rss0, rss1 - rss0);
  printf("RESULT cache_vsz %.1f %.1f KiB\n", vsz1 - vsz0, vsz1 - vsz0);
  vm_release(&cache);
  free(times);
  return 0;
}
