/* A language model with a paged KV cache served from C through the tvm-ffi API only
 * (c_tests/llm_common.h), on the tiny Llama of tests/fixtures/llm that Apache TVM 0.27
 * compiled: the greedy tokens are the ones TVM's runtime generated (greedy.txt), refused calls
 * (a sequence added twice, popping past the start, forking a missing sequence, a batch that
 * needs more pages than are free) leave the sequence to decode on as if they never happened,
 * and everything is released (memcheck_llm_serving runs this under valgrind).
 *
 * Usage: llm_serving FIXTURES_DIR (tests/fixtures/llm) */
#define _GNU_SOURCE
#define LLM_PROGRAM "llm_serving"
#include "check.h"
#include "llm_common.h"

static int read_ids(FILE* f, int32_t* out, int cap) {
  char line[8192], *p = line;
  int n = 0;
  if (!fgets(line, sizeof(line), f)) return -1;
  while (*p && *p != '\n' && n < cap) {
    out[n++] = (int32_t)strtol(p, &p, 10);
    if (*p == ',') p++;
  }
  return n;
}

/* A KV-state call that must fail with `needle` in its message. */
static void expect_error(TVMFFIObjectHandle f, TVMFFIAny* args, int n, const char* needle) {
  TVMFFIAny out;
  char err[2048];
  if (vm_call(f, args, n, &out, err, sizeof(err)) == 0) {
    vm_release(&out);
    CHECK(0, "the call succeeded, expected an error containing \"%s\"", needle);
    return;
  }
  CHECK(strstr(err, needle) != NULL, "error \"%s\" lacks \"%s\"", err, needle);
}

int main(int argc, char** argv) {
  char path[1024], weights[1200];
  int32_t prompt[256], want[256];
  int n_prompt, n_want, i, tok;
  FILE* f;
  Llm l;
  TVMFFIAny cache, args[4], out;
  TVMFFIObjectHandle fork;
  if (argc != 2) {
    fprintf(stderr, "usage: llm_serving FIXTURES_DIR\n");
    return 2;
  }
  snprintf(path, sizeof(path), "%s/greedy.txt", argv[1]);
  f = fopen(path, "r");
  if (!f) llm_die("opening", path);
  n_prompt = read_ids(f, prompt, 256);
  n_want = read_ids(f, want, 256);
  fclose(f);
  if (n_prompt < 1 || n_want < 2) llm_die("reading", path);

  snprintf(path, sizeof(path), "%s/model.so", argv[1]);
  snprintf(weights, sizeof(weights), "%s/weights", argv[1]);
  llm_load(&l, path, weights);
  /* 32 tokens of capacity: 3 pages of 16. */
  cache = llm_create_cache(&l, 2, 32, 64);
  args[0] = cache;
  args[1] = vm_int(0);
  out = llm_call(l.add, args, 2, "add_sequence");
  vm_release(&out);

  tok = llm_forward(&l, cache, 0, prompt, n_prompt, 0);
  CHECK(tok == want[0], "first token %d, TVM's %d", tok, want[0]);
  for (i = 1; i < n_want; i++) {
    if (i == 3) {
      /* Refused calls between steps. */
      expect_error(l.add, args, 2, "already in the KV cache");
      args[2] = vm_int(1000);
      expect_error(l.popn, args, 3, "exceeds the whole sequence length");
      fork = llm_global("vm.builtin.kv_state_fork_sequence");
      args[1] = vm_int(7);
      args[2] = vm_int(8);
      args[3] = vm_int(-1);
      expect_error(fork, args, 4, "cannot be found");
      TVMFFIObjectDecRef(fork);
      args[1] = llm_shape1(0);
      args[2] = llm_shape1(40);
      expect_error(l.begin, args, 3, "No page can be allocated");
      vm_release(&args[1]);
      vm_release(&args[2]);
      args[1] = vm_int(0);
    }
    tok = llm_forward(&l, cache, 0, &tok, 1, 1);
    CHECK(tok == want[i], "token %d is %d, TVM's %d", i, tok, want[i]);
  }
  out = llm_call(l.remove, args, 2, "remove_sequence");
  vm_release(&out);
  vm_release(&cache);
  llm_unload(&l);
  {
    TVMFFIObjectHandle clear = llm_global("vm.builtin.tensor_cache.clear");
    out = llm_call(clear, NULL, 0, "tensor_cache.clear");
    TVMFFIObjectDecRef(clear);
  }
  if (g_failures == 0) printf("llm_serving: %d tokens as TVM generated them\n", n_want);
  return g_failures == 0 ? 0 : 1;
}
