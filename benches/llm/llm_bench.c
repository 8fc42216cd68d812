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
 *        llm_bench --steps N MODEL.so WEIGHTS_DIR CONTEXT
 *   (the second: the prompt, then N decode steps and nothing else, for profilers such as
 *   callgrind, which count the instructions each runtime spends per step)
 *   prints RESULT lines (metric median min unit):
 *     decode_ctx<CONTEXT>   one decode step after a CONTEXT-token prompt (us)
 *     prefill_<N>           one N-token prefill of a new sequence (us)
 *     cache_rss / cache_vsz memory the cache took when created (KiB of resident / virtual)
 *     process_rss           resident memory grown from the ready runtime, before loading the
 *                           model, to after all steps (weights, pages written, auxiliary
 *                           arrays, activations; KiB)
 *   and a CHECK line with the greedy tokens of the first steps (both runtimes must agree).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef LB_RUNTIME
#define LB_RUNTIME "unknown"
#endif
#define LLM_PROGRAM "llm_bench (" LB_RUNTIME ")"
#include "../../c_tests/llm_common.h"
#include "../bench_timing.h"


static void report(const char* metric, double* v, int n, const char* unit) {
  double med, mn;
  median_min(v, n, &med, &mn);
  printf("RESULT %s %.4f %.4f %s\n", metric, med, mn, unit);
  fflush(stdout);
}

static int steps_only(int n, const char* lib, const char* weights, int64_t context) {
  static int32_t prompt[kMaxTokens];
  Llm l;
  TVMFFIAny cache, args[3], out;
  int i, tok;
  if (n < 1 || context < 1 || context >= kMaxTokens) llm_die("usage", "bad sizes");
  for (i = 0; i < kMaxTokens; i++) prompt[i] = (int32_t)((i * 37 + 11) % 100);
  llm_load(&l, lib, weights);
  cache = llm_create_cache(&l, 2, 4 * kMaxTokens, context);
  args[0] = cache;
  args[1] = vm_int(0);
  out = llm_call(l.add, args, 2, "add_sequence");
  vm_release(&out);
  tok = llm_forward(&l, cache, 0, prompt, (int)context, 0);
  for (i = 0; i < n; i++) tok = llm_forward(&l, cache, 0, &tok, 1, 1);
  printf("STEPS %d last token %d\n", n, tok);
  vm_release(&cache);
  llm_unload(&l);
  return 0;
}

int main(int argc, char** argv) {
  Llm l;
  TVMFFIAny cache, args[3], out;
  int64_t context, prefill_n;
  int samples, i, s, tok;
  static int32_t prompt[kMaxTokens];
  double *times, rss_start, rss0, vsz0, rss1, vsz1;
  char metric[64];
  if (argc == 6 && !strcmp(argv[1], "--steps")) return steps_only(atoi(argv[2]), argv[3], argv[4], atoll(argv[5]));
  if (argc < 5) llm_die("usage", "llm_bench MODEL.so WEIGHTS CONTEXT PREFILL_TOKENS [SAMPLES]");
  context = atoll(argv[3]);
  prefill_n = atoll(argv[4]);
  samples = argc > 5 ? atoi(argv[5]) : 200;
  if (context < 1 || context >= kMaxTokens || prefill_n < 1 || prefill_n >= kMaxTokens)
    llm_die("usage", "bad sizes");
  times = (double*)calloc((size_t)samples, sizeof(double));
  /* The runtime is ready first (TVM's registers its globals before main, tvmrt's on first
   * use): what the model and its serving take is measured from there. */
  TVMFFIObjectDecRef(llm_global("vm.builtin.kv_state_add_sequence"));
  llm_memory_kib(&rss_start, &vsz0);
  llm_load(&l, argv[1], argv[2]);
  for (i = 0; i < kMaxTokens; i++) prompt[i] = (int32_t)((i * 37 + 11) % 100);

  llm_memory_kib(&rss0, &vsz0);
  cache = llm_create_cache(&l, 2, 4 * kMaxTokens, prefill_n > context ? prefill_n : context);
  llm_memory_kib(&rss1, &vsz1);

  /* Decode at a fixed context: prompt, then (decode step, popn 1) repeated. */
  args[0] = cache;
  args[1] = vm_int(0);
  out = llm_call(l.add, args, 2, "add_sequence");
  vm_release(&out);
  tok = llm_forward(&l, cache, 0, prompt, (int)context, 0);
  printf("CHECK %d", tok);
  for (i = 0; i < 8; i++) {
    tok = llm_forward(&l, cache, 0, &tok, 1, 1);
    printf(" %d", tok);
  }
  printf("\n");
  args[2] = vm_int(8);
  out = llm_call(l.popn, args, 3, "popn");
  vm_release(&out);
  for (s = 0; s < samples + 20; s++) {
    int32_t t0 = prompt[s % 100];
    uint64_t start = now_ns();
    llm_forward(&l, cache, 0, &t0, 1, 1);
    if (s >= 20) times[s - 20] = (double)(now_ns() - start) / 1000.0;
    args[2] = vm_int(1);
    out = llm_call(l.popn, args, 3, "popn");
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
      out = llm_call(l.add, args, 2, "add_sequence");
      vm_release(&out);
      start = now_ns();
      llm_forward(&l, cache, 1, prompt, (int)prefill_n, 0);
      if (s >= 3) times[s - 3] = (double)(now_ns() - start) / 1000.0;
      out = llm_call(l.remove, args, 2, "remove_sequence");
      vm_release(&out);
    }
    snprintf(metric, sizeof(metric), "prefill_%lld", (long long)prefill_n);
    report(metric, times, reps, "us");
  }
  {
    double rss2, vsz2;
    llm_memory_kib(&rss2, &vsz2);
    printf("RESULT process_rss %.1f %.1f KiB\n", rss2 - rss_start, rss2 - rss_start);
  }
  printf("RESULT cache_rss %.1f %.1f KiB\n", rss1 - rss0, rss1 - rss0);
  printf("RESULT cache_vsz %.1f %.1f KiB\n", vsz1 - vsz0, vsz1 - vsz0);
  vm_release(&cache);
  llm_unload(&l);
  free(times);
  return 0;
}
