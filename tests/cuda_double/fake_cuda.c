/* A test double of NVIDIA's CUDA driver (libcuda.so.1) for machines without a GPU.
 *
 * tvmrt opens it in place of the driver (TVMRT_CUDA_LIBRARY=<path of this library>). It exports
 * the cu* entry points tvmrt uses, with the driver's signatures and error codes, and:
 * - "device memory" is host memory (posix_memalign, 256-byte aligned), so copies in every
 *   direction move real bytes; every pointer a copy, free or kernel is given is checked against
 *   the live allocations, as the real driver faults or refuses;
 * - modules are read as the driver reads them: PTX (.target, .entry names and parameter sizes),
 *   cubin (ELF EM_CUDA, SM from e_flags, global functions, static shared memory from
 *   .nv.shared.<name>) and fatbin (the entry for the device's SM); code for another
 *   architecture is refused with the driver's code (CUDA_ERROR_NO_BINARY_FOR_GPU for machine
 *   code, CUDA_ERROR_INVALID_PTX and a JIT log for PTX);
 * - launches are recorded (function, grid, block, dynamic shared memory, stream, and for PTX
 *   kernels each parameter's bytes), and refused as the driver does when the block is too
 *   large or the dynamic shared memory exceeds the function's allowance; the fixtures' kernels
 *   (add_kernel, axpk_kernel, mul_2d_kernel, matmul_kernel of tests/fixtures/cuda, and the
 *   classic graph model's add_relu_kernel and scale_kernel) run on the host, written from
 *   TVM's CUDA source, so values can be checked end to end (a test may add others with
 *   fake_cuda_set_kernel).
 *
 * Configuration (read at cuInit): FAKE_CUDA_DEVICES (default 1), FAKE_CUDA_SM (default 80),
 * FAKE_CUDA_SHARED_OPTIN (default 166912, an A100's opt-in shared memory per block).
 * Inspection: the fake_cuda_* functions at the end. Thread-safe (one lock). */
/* posix_memalign under strict C modes. */
#define _POSIX_C_SOURCE 200112L

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef uint64_t CUdeviceptr;

enum {
  OK = 0, INVALID_VALUE = 1, NOT_INITIALIZED = 3, NO_DEVICE = 100, INVALID_DEVICE = 101,
  INVALID_IMAGE = 200, INVALID_CONTEXT = 201, NO_BINARY_FOR_GPU = 209, INVALID_PTX = 218,
  INVALID_HANDLE = 400, NOT_FOUND = 500
};

#define MAX_ALLOCS 4096
#define MAX_PARAMS 32
#define MAX_KERNELS 256
#define MAX_LAUNCHES 1024
#define LOG_SIZE 65536

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int initialized, n_devices = 1, device_sm = 80, shared_optin = 166912;
static struct ctx { int device; } contexts[8];
static __thread struct ctx *current;

struct alloc { uintptr_t p; size_t n; int device; int host; int live; };
static struct alloc allocs[MAX_ALLOCS];
static int n_allocs;

struct kernel {
  char name[128];
  int n_params, param_size[MAX_PARAMS];
  int static_shared, max_dynamic_shared;
};
/* `any_name`: PTX the double cannot read (compressed in a fatbin): every name is a kernel. */
struct module { int live, device, n_kernels, any_name; struct kernel kernels[MAX_KERNELS]; };
struct stream { int live, device; };
struct event { int live; };

/* What a launch recorded. */
struct fake_launch {
  char name[128];
  unsigned grid[3], block[3], shared;
  void *stream;
  int device, n_params;
  int param_size[MAX_PARAMS];
  uint64_t params[MAX_PARAMS];
};
static struct fake_launch launches[MAX_LAUNCHES];
static int n_launches;
static char call_log[LOG_SIZE];
static size_t log_len;

typedef void (*kernel_impl)(void **params, const unsigned *grid, const unsigned *block);

/* Host versions of the CUDA fixtures' kernels (tests/fixtures/cuda), written from TVM's CUDA
 * source, so that launches compute what the GPU would. */
#define P(T, i) (*(T *)params[i])
static void emulate_add_kernel(void **params, const unsigned *grid, const unsigned *block) {
  float *a = P(float *, 0), *b = P(float *, 1), *c = P(float *, 2);
  int n = P(int, 3); /* i = blockIdx.x * 64 + threadIdx.x */
  for (int i = 0; i < (int)(grid[0] * block[0]); i++)
    if (i < n) c[i] = a[i] + b[i];
}
static void emulate_axpk_kernel(void **params, const unsigned *grid, const unsigned *block) {
  float *x = P(float *, 0), *y = P(float *, 1), alpha = P(float, 2);
  int k = P(int, 3), n = P(int, 4);
  for (int i = 0; i < (int)(grid[0] * block[0]); i++)
    if (i < n) y[i] = x[i] * alpha + (float)k;
}
static void emulate_mul_2d_kernel(void **params, const unsigned *grid, const unsigned *block) {
  float *a = P(float *, 0), *b = P(float *, 1), *c = P(float *, 2);
  int n = P(int, 4); /* row blockIdx.y, column blockIdx.x * 32 + threadIdx.x */
  for (unsigned row = 0; row < grid[1]; row++)
    for (int col = 0; col < (int)(grid[0] * block[0]); col++)
      if (col < n) c[row * n + col] = a[row * n + col] * b[row * n + col];
}
static void emulate_matmul_kernel(void **params, const unsigned *grid, const unsigned *block) {
  const float *w = P(float *, 0), *x = P(float *, 1);
  float *y = P(float *, 2); /* Y = X @ W, 64 x 64 */
  (void)grid; (void)block;
  for (int i = 0; i < 64; i++)
    for (int j = 0; j < 64; j++) {
      float acc = 0;
      for (int k = 0; k < 64; k++) acc += x[i * 64 + k] * w[k * 64 + j];
      y[i * 64 + j] = acc;
    }
}
/* The classic graph model's (tests/fixtures/cuda/gen_classic.py): i = blockIdx.x * 32 + tid. */
static void emulate_add_relu_kernel(void **params, const unsigned *grid, const unsigned *block) {
  float *a = P(float *, 0), *b = P(float *, 1), *c = P(float *, 2);
  int n = P(int, 3);
  for (int i = 0; i < (int)(grid[0] * block[0]); i++)
    if (i < n) c[i] = fmaxf(a[i] + b[i], 0.0f);
}
static void emulate_scale_kernel(void **params, const unsigned *grid, const unsigned *block) {
  float *a = P(float *, 0), *b = P(float *, 1), s = P(float, 2);
  int n = P(int, 3);
  for (int i = 0; i < (int)(grid[0] * block[0]); i++)
    if (i < n) b[i] = a[i] * s;
}
#undef P

/* n_params: the parameters of the fixture's kernel (0: any; a cubin's are not read, so 0
 * there too); buf_bytes: what each of its first three (pointer) parameters must hold (0: not
 * checked). Another library's kernel of the same name (dlight names a model's plain matmul
 * `matmul_kernel` too) has other parameters or shapes, so it is not emulated: the fixed-size
 * 64 x 64 matmul would write past its buffers. */
static struct { char name[128]; kernel_impl f; int n_params; size_t buf_bytes; } impls[16] = {
  {"add_kernel", emulate_add_kernel, 4, 0}, {"axpk_kernel", emulate_axpk_kernel, 5, 0},
  {"mul_2d_kernel", emulate_mul_2d_kernel, 5, 0},
  {"matmul_kernel", emulate_matmul_kernel, 3, 64 * 64 * sizeof(float)},
  {"add_relu_kernel", emulate_add_relu_kernel, 4, 0},
  {"scale_kernel", emulate_scale_kernel, 4, 0},
};
static int n_impls = 6;

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#include <stdarg.h>
static void logf_(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (log_len < LOG_SIZE - 256) {
    int n = vsnprintf(call_log + log_len, LOG_SIZE - log_len, fmt, ap);
    if (n > 0) log_len += (size_t)n;
    call_log[log_len++] = '\n';
    call_log[log_len] = 0;
  }
  va_end(ap);
}

static int env_int(const char *name, int fallback) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : fallback;
}

CUresult cuInit(unsigned flags) {
  pthread_mutex_lock(&lock);
  if (!initialized) {
    n_devices = env_int("FAKE_CUDA_DEVICES", 1);
    if (n_devices > 8) n_devices = 8;
    device_sm = env_int("FAKE_CUDA_SM", 80);
    shared_optin = env_int("FAKE_CUDA_SHARED_OPTIN", 166912);
    for (int i = 0; i < 8; i++) contexts[i].device = i;
    initialized = 1;
  }
  logf_("cuInit(%u)", flags);
  pthread_mutex_unlock(&lock);
  return OK;
}
CUresult cuDriverGetVersion(int *v) { *v = 12040; return OK; }

static const char *error_name(CUresult rc) {
  switch (rc) {
    case OK: return "CUDA_SUCCESS";
    case INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
    case INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
    case INVALID_IMAGE: return "CUDA_ERROR_INVALID_IMAGE";
    case INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case NO_BINARY_FOR_GPU: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case INVALID_PTX: return "CUDA_ERROR_INVALID_PTX";
    case INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
    case NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    default: return NULL;
  }
}
CUresult cuGetErrorName(CUresult rc, const char **out) {
  *out = error_name(rc);
  return *out ? OK : INVALID_VALUE;
}
CUresult cuGetErrorString(CUresult rc, const char **out) {
  *out = error_name(rc) ? "(fake driver)" : NULL;
  return *out ? OK : INVALID_VALUE;
}

CUresult cuDeviceGetCount(int *n) { *n = n_devices; return initialized ? OK : NOT_INITIALIZED; }
CUresult cuDeviceGet(CUdevice *d, int ordinal) {
  if (ordinal < 0 || ordinal >= n_devices) return INVALID_DEVICE;
  *d = ordinal;
  return OK;
}
CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
  snprintf(name, (size_t)len, "Fake CUDA Device %d", d);
  return OK;
}
CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
  if (d < 0 || d >= n_devices) return INVALID_DEVICE;
  switch (attr) {
    case 1: *v = 1024; break;                        /* max threads per block */
    case 2: case 3: *v = 1024; break;                /* max block x, y */
    case 4: *v = 64; break;                          /* max block z */
    case 5: *v = 2147483647; break;                  /* max grid x */
    case 6: case 7: *v = 65535; break;               /* max grid y, z */
    case 8: *v = 49152; break;                       /* shared memory per block */
    case 10: *v = 32; break;                         /* warp size */
    case 12: *v = 65536; break;                      /* registers per block */
    case 13: *v = 1410000; break;                    /* clock rate, kHz */
    case 16: *v = 108; break;                        /* multiprocessors */
    case 38: *v = 41943040; break;                   /* L2 */
    case 51: *v = 32; break;                         /* texture pitch alignment */
    case 75: *v = device_sm / 10; break;
    case 76: *v = device_sm % 10; break;
    case 97: *v = shared_optin; break;
    default: return INVALID_VALUE;
  }
  return OK;
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) { (void)d; *bytes = (size_t)40 << 30; return OK; }
CUresult cuDevicePrimaryCtxRetain(void **ctx, CUdevice d) {
  if (d < 0 || d >= n_devices) return INVALID_DEVICE;
  *ctx = &contexts[d];
  pthread_mutex_lock(&lock);
  logf_("cuDevicePrimaryCtxRetain(%d)", d);
  pthread_mutex_unlock(&lock);
  return OK;
}
CUresult cuCtxSetCurrent(void *ctx) { current = ctx; return OK; }
CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total) {
  if (!current) return INVALID_CONTEXT;
  *free_b = (size_t)39 << 30;
  *total = (size_t)40 << 30;
  return OK;
}

static int new_alloc(uintptr_t p, size_t n, int device, int host) {
  for (int i = 0; i < n_allocs; i++)
    if (!allocs[i].live) {
      allocs[i] = (struct alloc){p, n, device, host, 1};
      return 0;
    }
  if (n_allocs == MAX_ALLOCS) return -1;
  allocs[n_allocs++] = (struct alloc){p, n, device, host, 1};
  return 0;
}
/* The live allocation holding [p, p + n), or NULL. */
static struct alloc *find(uintptr_t p, size_t n, int host) {
  for (int i = 0; i < n_allocs; i++) {
    struct alloc *a = &allocs[i];
    if (a->live && a->host == host && p >= a->p && p + n <= a->p + (a->n ? a->n : 1)) return a;
  }
  return NULL;
}

CUresult cuMemAlloc_v2(CUdeviceptr *out, size_t n) {
  if (!current) return INVALID_CONTEXT;
  void *p = NULL;
  if (n == 0) return INVALID_VALUE;
  if (posix_memalign(&p, 256, n)) return 2;
  memset(p, 0xAB, n); /* device memory is not zeroed */
  pthread_mutex_lock(&lock);
  int rc = new_alloc((uintptr_t)p, n, current->device, 0);
  logf_("cuMemAlloc(%zu) on %d", n, current->device);
  pthread_mutex_unlock(&lock);
  if (rc) { free(p); return 2; }
  *out = (CUdeviceptr)(uintptr_t)p;
  return OK;
}
static CUresult free_block(uintptr_t p, int host) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < n_allocs; i++)
    if (allocs[i].live && allocs[i].host == host && allocs[i].p == p) {
      allocs[i].live = 0;
      logf_("%s(%zu)", host ? "cuMemFreeHost" : "cuMemFree", allocs[i].n);
      pthread_mutex_unlock(&lock);
      free((void *)p);
      return OK;
    }
  logf_("%s of a pointer that is not live", host ? "cuMemFreeHost" : "cuMemFree");
  pthread_mutex_unlock(&lock);
  return INVALID_VALUE;
}
CUresult cuMemFree_v2(CUdeviceptr p) { return free_block((uintptr_t)p, 0); }
CUresult cuMemAllocHost_v2(void **out, size_t n) {
  if (!current) return INVALID_CONTEXT;
  void *p = NULL;
  if (posix_memalign(&p, 4096, n ? n : 1)) return 2;
  pthread_mutex_lock(&lock);
  new_alloc((uintptr_t)p, n, current->device, 1);
  logf_("cuMemAllocHost(%zu)", n);
  pthread_mutex_unlock(&lock);
  *out = p;
  return OK;
}
CUresult cuMemFreeHost(void *p) { return free_block((uintptr_t)p, 1); }

static struct stream streams[256];
static int stream_ok(void *s) {
  if (!s) return 1;
  struct stream *st = s;
  return st >= streams && st < streams + 256 && st->live;
}

static CUresult copy(const char *what, uintptr_t dst, int dst_dev, uintptr_t src, int src_dev,
                     size_t n, void *stream) {
  pthread_mutex_lock(&lock);
  int ok = stream_ok(stream) && (!dst_dev || find(dst, n, 0)) && (!src_dev || find(src, n, 0));
  logf_("%s(%zu)%s", what, n, ok ? "" : " refused");
  pthread_mutex_unlock(&lock);
  if (!current) return INVALID_CONTEXT;
  if (!ok) return INVALID_VALUE;
  memmove((void *)dst, (const void *)src, n);
  return OK;
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *h, size_t n, void *s) {
  return copy("cuMemcpyHtoDAsync", (uintptr_t)d, 1, (uintptr_t)h, 0, n, s);
}
CUresult cuMemcpyDtoHAsync_v2(void *h, CUdeviceptr d, size_t n, void *s) {
  return copy("cuMemcpyDtoHAsync", (uintptr_t)h, 0, (uintptr_t)d, 1, n, s);
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s_, size_t n, void *s) {
  return copy("cuMemcpyDtoDAsync", (uintptr_t)d, 1, (uintptr_t)s_, 1, n, s);
}
CUresult cuMemcpyPeerAsync(CUdeviceptr d, void *dctx, CUdeviceptr s_, void *sctx, size_t n,
                           void *s) {
  (void)dctx; (void)sctx;
  return copy("cuMemcpyPeerAsync", (uintptr_t)d, 1, (uintptr_t)s_, 1, n, s);
}
CUresult cuPointerGetAttribute(void *out, int attr, CUdeviceptr p) {
  pthread_mutex_lock(&lock);
  struct alloc *a = find((uintptr_t)p, 1, 0);
  int host = 0;
  if (!a) { a = find((uintptr_t)p, 1, 1); host = 1; }
  pthread_mutex_unlock(&lock);
  if (!a) return INVALID_VALUE; /* memory the driver does not know (plain host memory) */
  if (attr == 2) *(unsigned *)out = host ? 1 : 2;
  else if (attr == 9) *(int *)out = a->device;
  else return INVALID_VALUE;
  return OK;
}

CUresult cuStreamCreate(void **out, unsigned flags) {
  if (!current) return INVALID_CONTEXT;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < 256; i++)
    if (!streams[i].live) {
      streams[i].live = 1;
      streams[i].device = current->device;
      *out = &streams[i];
      logf_("cuStreamCreate(flags=%u) -> stream %d", flags, i);
      pthread_mutex_unlock(&lock);
      return OK;
    }
  pthread_mutex_unlock(&lock);
  return 2;
}
CUresult cuStreamDestroy_v2(void *s) {
  pthread_mutex_lock(&lock);
  int ok = s && stream_ok(s);
  if (ok) ((struct stream *)s)->live = 0;
  logf_("cuStreamDestroy(stream %ld)%s", ok ? (long)((struct stream *)s - streams) : -1L,
        ok ? "" : " refused");
  pthread_mutex_unlock(&lock);
  return ok ? OK : INVALID_HANDLE;
}
CUresult cuStreamSynchronize(void *s) {
  pthread_mutex_lock(&lock);
  int ok = stream_ok(s);
  logf_("cuStreamSynchronize(stream %ld)", s ? (long)((struct stream *)s - streams) : -1L);
  pthread_mutex_unlock(&lock);
  return ok ? OK : INVALID_HANDLE;
}
static struct event events[64];
CUresult cuEventCreate(void **out, unsigned flags) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < 64; i++)
    if (!events[i].live) {
      events[i].live = 1;
      *out = &events[i];
      logf_("cuEventCreate(flags=%u)", flags);
      pthread_mutex_unlock(&lock);
      return OK;
    }
  pthread_mutex_unlock(&lock);
  return 2;
}
CUresult cuEventRecord(void *e, void *s) {
  pthread_mutex_lock(&lock);
  int ok = stream_ok(s) && ((struct event *)e)->live;
  logf_("cuEventRecord(stream %ld)", s ? (long)((struct stream *)s - streams) : -1L);
  pthread_mutex_unlock(&lock);
  return ok ? OK : INVALID_HANDLE;
}
CUresult cuStreamWaitEvent(void *s, void *e, unsigned flags) {
  (void)flags;
  pthread_mutex_lock(&lock);
  int ok = stream_ok(s) && ((struct event *)e)->live;
  logf_("cuStreamWaitEvent(stream %ld)", s ? (long)((struct stream *)s - streams) : -1L);
  pthread_mutex_unlock(&lock);
  return ok ? OK : INVALID_HANDLE;
}
CUresult cuEventDestroy_v2(void *e) {
  pthread_mutex_lock(&lock);
  ((struct event *)e)->live = 0;
  logf_("cuEventDestroy");
  pthread_mutex_unlock(&lock);
  return OK;
}

/* ---- code images ---------------------------------------------------------------------- */

static void add_kernel(struct module *m, const char *name, size_t len) {
  if (m->n_kernels == MAX_KERNELS || len >= sizeof m->kernels[0].name) return;
  struct kernel *k = &m->kernels[m->n_kernels++];
  memset(k, 0, sizeof *k);
  memcpy(k->name, name, len);
  k->max_dynamic_shared = 49152;
}

/* PTX: the .target SM and each .entry with its parameters' sizes. */
static int read_ptx(struct module *m, const char *text, size_t n, int *sm) {
  const char *t = strstr(text, ".target sm_");
  if (!t) return -1;
  *sm = atoi(t + 11);
  const char *end = text + n;
  for (const char *p = text; (p = strstr(p, ".entry ")) && p < end; ) {
    p += 7;
    const char *q = p;
    while (*q && *q != '(' && *q != ' ' && *q != '\n') q++;
    add_kernel(m, p, (size_t)(q - p));
    struct kernel *k = &m->kernels[m->n_kernels - 1];
    const char *close = strchr(q, ')');
    for (const char *a = q; close && (a = strstr(a, ".param")) && a < close; a += 6) {
      int size = 8;
      const char *ty = a + 6;
      while (*ty == ' ') ty++;
      if (!strncmp(ty, ".align", 6)) { /* .param .align A .b8 name[N] */
        const char *br = strchr(ty, '[');
        size = br ? atoi(br + 1) : 8;
      } else if (strstr(ty, "32") && strstr(ty, "32") < strchr(ty, ' ')) {
        size = 4;
      }
      if (k->n_params < MAX_PARAMS) k->param_size[k->n_params++] = size;
    }
    p = q;
  }
  return 0;
}

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) { return (uint32_t)rd16(p) | (uint32_t)rd16(p + 2) << 16; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* cubin: SM from e_flags, global functions, static shared memory. */
static int read_cubin(struct module *m, const uint8_t *b, size_t n, int *sm) {
  if (n < 64 || memcmp(b, "\x7f" "ELF", 4) || b[4] != 2 || rd16(b + 18) != 190) return -1;
  uint32_t flags = rd32(b + 48);
  *sm = b[8] >= 8 ? (int)((flags >> 8) & 0xff) : (int)(flags & 0xff);
  uint64_t shoff = rd64(b + 40);
  uint16_t shentsize = rd16(b + 58), shnum = rd16(b + 60), shstrndx = rd16(b + 62);
  if (shoff + (uint64_t)shnum * shentsize > n || shstrndx >= shnum) return -1;
  const uint8_t *sh = b + shoff;
  const uint8_t *names = b + rd64(sh + shstrndx * shentsize + 24);
  for (int i = 0; i < shnum; i++) {
    const uint8_t *s = sh + i * shentsize;
    if (rd32(s + 4) != 2) continue; /* SHT_SYMTAB */
    const uint8_t *syms = b + rd64(s + 24);
    uint64_t count = rd64(s + 32) / 24;
    const uint8_t *str = b + rd64(sh + rd32(s + 40) * shentsize + 24);
    for (uint64_t j = 0; j < count; j++) {
      const uint8_t *y = syms + j * 24;
      if ((y[4] & 0xf) == 2 && (y[4] >> 4) == 1) { /* STT_FUNC, STB_GLOBAL */
        const char *name = (const char *)str + rd32(y);
        add_kernel(m, name, strlen(name));
      }
    }
  }
  for (int i = 0; i < shnum; i++) { /* .nv.shared.<kernel>: its static shared memory */
    const uint8_t *s = sh + i * shentsize;
    const char *name = (const char *)names + rd32(s);
    if (strncmp(name, ".nv.shared.", 11)) continue;
    for (int k = 0; k < m->n_kernels; k++)
      if (!strcmp(m->kernels[k].name, name + 11)) m->kernels[k].static_shared = (int)rd64(s + 32);
  }
  return 0;
}

static struct module modules[64];
static char jit_log[512];

static CUresult load(struct module *m, const uint8_t *img) {
  int sm = 0;
  if (!memcmp(img, "\x7f" "ELF", 4)) {
    size_t n = rd64(img + 40) + (size_t)rd16(img + 60) * rd16(img + 58);
    if (read_cubin(m, img, n, &sm)) return INVALID_IMAGE;
    if (sm / 10 != device_sm / 10 || sm > device_sm) return NO_BINARY_FOR_GPU;
    return OK;
  }
  if (rd32(img) == 0xBA55ED50u) { /* fatbin: an uncompressed cubin for the SM, else PTX */
    uint64_t end = rd16(img + 6) + rd64(img + 8);
    const uint8_t *ptx = NULL;
    size_t ptx_n = 0;
    int compressed_ptx = 0;
    for (uint64_t at = rd16(img + 6); at < end; at += rd32(img + at + 4) + rd64(img + at + 8)) {
      const uint8_t *e = img + at;
      int kind = rd16(e), entry_sm = (int)rd32(e + 28), compressed = (rd64(e + 40) & 0x2000) != 0;
      const uint8_t *payload = e + rd32(e + 4);
      if (compressed) {
        /* The driver decompresses; the double cannot read it, and takes the PTX on trust. */
        if (kind == 1 && entry_sm <= device_sm) compressed_ptx = 1;
        continue;
      }
      if (kind == 2 && entry_sm / 10 == device_sm / 10 && entry_sm <= device_sm)
        return read_cubin(m, payload, rd64(e + 8), &sm) ? INVALID_IMAGE : OK;
      if (kind == 1 && entry_sm <= device_sm) { ptx = payload; ptx_n = rd64(e + 8); }
    }
    if (!ptx && compressed_ptx) { m->any_name = 1; return OK; }
    if (!ptx) return NO_BINARY_FOR_GPU;
    return read_ptx(m, (const char *)ptx, ptx_n, &sm) ? INVALID_IMAGE : OK;
  }
  size_t n = strlen((const char *)img);
  if (read_ptx(m, (const char *)img, n, &sm)) return INVALID_PTX;
  if (sm > device_sm) {
    snprintf(jit_log, sizeof jit_log,
             "ptxas fatal   : SM version specified by .target is higher than default SM "
             "version assumed");
    return INVALID_PTX;
  }
  return OK;
}

CUresult cuModuleLoadDataEx(void **out, const void *image, unsigned n_options, int *options,
                            void **values) {
  if (!current) return INVALID_CONTEXT;
  pthread_mutex_lock(&lock);
  struct module *m = NULL;
  for (int i = 0; i < 64 && !m; i++)
    if (!modules[i].live) m = &modules[i];
  if (!m) { pthread_mutex_unlock(&lock); return 2; }
  memset(m, 0, sizeof *m);
  jit_log[0] = 0;
  CUresult rc = load(m, image);
  logf_("cuModuleLoadData on %d -> %d (%d kernels)", current->device, rc, m->n_kernels);
  if (rc == OK) {
    m->live = 1;
    m->device = current->device;
    *out = m;
  } else {
    char *buf = NULL;
    size_t size = 0;
    for (unsigned i = 0; i < n_options; i++) {
      if (options[i] == 5) buf = values[i];
      if (options[i] == 6) size = (size_t)(uintptr_t)values[i];
    }
    if (buf && size) snprintf(buf, size, "%s", jit_log);
  }
  pthread_mutex_unlock(&lock);
  return rc;
}
CUresult cuModuleUnload(void *mod) {
  pthread_mutex_lock(&lock);
  struct module *m = mod;
  int ok = m >= modules && m < modules + 64 && m->live;
  if (ok) m->live = 0;
  logf_("cuModuleUnload%s", ok ? "" : " refused");
  pthread_mutex_unlock(&lock);
  return ok ? OK : INVALID_HANDLE;
}
CUresult cuModuleGetFunction(void **out, void *mod, const char *name) {
  struct module *m = mod;
  if (!m || !m->live) return INVALID_HANDLE;
  for (int i = 0; i < m->n_kernels; i++)
    if (!strcmp(m->kernels[i].name, name)) { *out = &m->kernels[i]; return OK; }
  if (m->any_name && m->n_kernels < MAX_KERNELS) {
    add_kernel(m, name, strlen(name));
    *out = &m->kernels[m->n_kernels - 1];
    return OK;
  }
  return NOT_FOUND;
}
CUresult cuFuncGetAttribute(int *v, int attr, void *f) {
  struct kernel *k = f;
  if (attr == 1) { *v = k->static_shared; return OK; }
  if (attr == 8) { *v = k->max_dynamic_shared; return OK; }
  return INVALID_VALUE;
}
CUresult cuFuncSetAttribute(void *f, int attr, int v) {
  struct kernel *k = f;
  pthread_mutex_lock(&lock);
  logf_("cuFuncSetAttribute(%s, %d, %d)", k->name, attr, v);
  pthread_mutex_unlock(&lock);
  if (attr != 8 || v < 0 || v + k->static_shared > shared_optin) return INVALID_VALUE;
  k->max_dynamic_shared = v;
  return OK;
}

static CUresult launch(void *f, const unsigned *grid, const unsigned *block, unsigned shared,
                       void *stream, void **params, int n_attrs) {
  struct kernel *k = f;
  if (!current) return INVALID_CONTEXT;
  if ((int)shared > k->max_dynamic_shared) return INVALID_VALUE;
  if ((uint64_t)block[0] * block[1] * block[2] > 1024 || !grid[0] || !grid[1] || !grid[2])
    return INVALID_VALUE;
  kernel_impl impl = NULL;
  pthread_mutex_lock(&lock);
  if (!stream_ok(stream)) { pthread_mutex_unlock(&lock); return INVALID_HANDLE; }
  struct fake_launch *l = &launches[n_launches % MAX_LAUNCHES];
  n_launches++;
  memset(l, 0, sizeof *l);
  snprintf(l->name, sizeof l->name, "%s", k->name);
  memcpy(l->grid, grid, sizeof l->grid);
  memcpy(l->block, block, sizeof l->block);
  l->shared = shared;
  l->stream = stream;
  l->device = current->device;
  l->n_params = k->n_params;
  for (int i = 0; i < k->n_params; i++) {
    l->param_size[i] = k->param_size[i];
    memcpy(&l->params[i], params[i], k->param_size[i] < 8 ? (size_t)k->param_size[i] : 8);
  }
  for (int i = 0; i < n_impls; i++)
    if (!strcmp(impls[i].name, k->name) &&
        (!impls[i].n_params || !k->n_params || k->n_params == impls[i].n_params)) {
      impl = impls[i].f;
      for (int j = 0; impls[i].buf_bytes && j < 3; j++)
        if (!find(*(uintptr_t *)params[j], impls[i].buf_bytes, 0)) impl = NULL;
    }
  logf_("launch %s grid=(%u,%u,%u) block=(%u,%u,%u) shared=%u attrs=%d", k->name, grid[0],
        grid[1], grid[2], block[0], block[1], block[2], shared, n_attrs);
  pthread_mutex_unlock(&lock);
  if (impl) impl(params, grid, block);
  return OK;
}
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shared, void *stream, void **params, void **extra) {
  (void)extra;
  unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  return launch(f, grid, block, shared, stream, params, 0);
}
typedef struct { unsigned grid[3], block[3], shared; void *stream; void *attrs; unsigned n; } launch_config;
CUresult cuLaunchKernelEx(const launch_config *c, void *f, void **params, void **extra) {
  (void)extra;
  return launch(f, c->grid, c->block, c->shared, c->stream, params, (int)c->n);
}

/* ---- inspection, for the tests ---------------------------------------------------------- */

int fake_cuda_live_allocations(int host) {
  int n = 0;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < n_allocs; i++) n += allocs[i].live && allocs[i].host == host;
  pthread_mutex_unlock(&lock);
  return n;
}
int fake_cuda_live_modules(void) {
  int n = 0;
  for (int i = 0; i < 64; i++) n += modules[i].live;
  return n;
}
int fake_cuda_live_streams(void) {
  int n = 0;
  for (int i = 0; i < 256; i++) n += streams[i].live;
  return n;
}
int fake_cuda_launch_count(void) { return n_launches; }
/* Copies launch `i` (0 = the first since the last reset) into `out`; -1 if there is none. */
int fake_cuda_launch(int i, struct fake_launch *out) {
  pthread_mutex_lock(&lock);
  int ok = i >= 0 && i < n_launches && i >= n_launches - MAX_LAUNCHES;
  if (ok) *out = launches[i % MAX_LAUNCHES];
  pthread_mutex_unlock(&lock);
  return ok ? 0 : -1;
}
/* The calls logged since the last reset, one per line. */
const char *fake_cuda_log(void) { return call_log; }
void fake_cuda_reset(void) {
  pthread_mutex_lock(&lock);
  n_launches = 0;
  log_len = 0;
  call_log[0] = 0;
  pthread_mutex_unlock(&lock);
}
/* Runs `f` for every launch of kernel `name` (null removes it). */
void fake_cuda_set_kernel(const char *name, kernel_impl f) {
  pthread_mutex_lock(&lock);
  int i = 0;
  while (i < n_impls && strcmp(impls[i].name, name)) i++;
  if (i == n_impls && n_impls < 16) n_impls++;
  if (i < 16) {
    snprintf(impls[i].name, sizeof impls[i].name, "%s", name);
    impls[i].f = f;
    impls[i].n_params = 0;
    impls[i].buf_bytes = 0;
  }
  pthread_mutex_unlock(&lock);
}
/* The device of the live allocation holding `p` (-1: none; -2: page-locked host memory). */
int fake_cuda_pointer_device(uint64_t p) {
  pthread_mutex_lock(&lock);
  struct alloc *a = find((uintptr_t)p, 1, 0);
  int d = a ? a->device : (find((uintptr_t)p, 1, 1) ? -2 : -1);
  pthread_mutex_unlock(&lock);
  return d;
}
