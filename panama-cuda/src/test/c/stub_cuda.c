/*
 * stub_cuda.c: a TEST DOUBLE of the CUDA driver (libcuda.so.1) for accel4j's binding layer. It is NOT a GPU
 * emulator: no kernel ever runs. It implements, over host memory, exactly the driver functions that
 * panama-cuda's bindings (cuda_h) bind, so that CPU-only tests can run the real Java layer (Cuda.probe, CudaContext,
 * DeviceBuffer, CudaModule, CudaKernel, Event, the kernels module's CudaMemory and launchers) through the real FFM
 * downcalls:
 *   - "device" memory is malloc'd host memory (a CUdeviceptr is its host address); every copy, fill and free is
 *     checked against the live allocations and refused with CUDA_ERROR_INVALID_VALUE when out of range;
 *   - streams and events are no-ops, events record the host clock (so elapsed times are real, small and >= 0);
 *   - cuModuleLoadDataEx parses the PTX's .entry names and .param lists (a cubin it refuses with
 *     CUDA_ERROR_INVALID_IMAGE, as a driver older than the ptxas that wrote it does); cuModuleGetFunction finds an entry;
 *     cuLaunchKernel checks the kernelParams array against the parsed list (one non-NULL pointer per parameter),
 *     the dynamic shared memory against 48 KiB or the opt-in attribute, and records the launch (name, dims, the
 *     parameter bytes) for the test to read back;
 *   - configurable: the driver version (stub_set_driver_version), injected errors (stub_fail), and call counts.
 * Built by src/test/c/build-stub.sh in the test phase; the tests find it through ACCEL4J_CUDA_LIB_PATH.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_NO_DEVICE 100
#define CUDA_ERROR_INVALID_DEVICE 101
#define CUDA_ERROR_INVALID_IMAGE 200
#define CUDA_ERROR_INVALID_PTX 218
#define CUDA_ERROR_UNSUPPORTED_PTX_VERSION 222
#define CUDA_ERROR_INVALID_HANDLE 400
#define CUDA_ERROR_NOT_FOUND 500
#define CUDA_ERROR_NOT_READY 600
#define CUDA_ERROR_ILLEGAL_ADDRESS 700
#define CUDA_ERROR_LAUNCH_FAILED 719

#define MAX_ALLOCS 65536
#define MAX_ENTRIES 64
#define MAX_PARAMS 32
#define MAX_FAILS 16
#define MAX_COUNTS 128
#define DEFAULT_SHARED (48 * 1024)

/* ---- configuration and bookkeeping read by the tests */

static int driver_version = 13000;
static int initialised = 0;

struct fail { char function[64]; char match[128]; int rc; int remaining; };
static struct fail fails[MAX_FAILS];

struct count { char function[64]; long n; };
static struct count counts[MAX_COUNTS];

static void count(const char *function) {
    for (int i = 0; i < MAX_COUNTS; i++) {
        if (counts[i].function[0] == 0) {
            snprintf(counts[i].function, sizeof counts[i].function, "%s", function);
        }
        if (strcmp(counts[i].function, function) == 0) {
            counts[i].n++;
            return;
        }
    }
}

/* The status injected for this call of function (match: a substring of the PTX image or kernel name, or ""). */
static int injected(const char *function, const char *subject) {
    for (int i = 0; i < MAX_FAILS; i++) {
        struct fail *f = &fails[i];
        if (f->remaining == 0 || strcmp(f->function, function) != 0) {
            continue;
        }
        if (f->match[0] && (subject == NULL || strstr(subject, f->match) == NULL)) {
            continue;
        }
        if (f->remaining > 0) {
            f->remaining--;
        }
        return f->rc;
    }
    return CUDA_SUCCESS;
}

#define ENTER(fn, subject)                      \
    count(fn);                                  \
    do {                                        \
        int inj_ = injected(fn, subject);       \
        if (inj_ != CUDA_SUCCESS) return inj_;  \
    } while (0)

/** The version cuDriverGetVersion reports (1000 * major + 10 * minor). */
void stub_set_driver_version(int version) { driver_version = version; }

/** Makes the next `times` calls (-1: every call) of `function` whose subject contains `match` return `rc`. */
int stub_fail(const char *function, const char *match, int rc, int times) {
    for (int i = 0; i < MAX_FAILS; i++) {
        if (fails[i].remaining == 0) {
            snprintf(fails[i].function, sizeof fails[i].function, "%s", function);
            snprintf(fails[i].match, sizeof fails[i].match, "%s", match ? match : "");
            fails[i].rc = rc;
            fails[i].remaining = times;
            return 0;
        }
    }
    return -1;
}

/** How many times `function` was called since the last reset. */
long stub_calls(const char *function) {
    for (int i = 0; i < MAX_COUNTS && counts[i].function[0]; i++) {
        if (strcmp(counts[i].function, function) == 0) {
            return counts[i].n;
        }
    }
    return 0;
}

/** A marker the tests look for, so that they never mistake a real driver for this one. */
int stub_is_accel4j_stub(void) { return 1; }

/* ---- memory */

struct alloc { uintptr_t base; size_t size; };
static struct alloc allocs[MAX_ALLOCS];
static size_t live_bytes = 0;
#define TOTAL_MEMORY (8ULL << 30)

/** Live device allocations (for leak checks). */
int stub_live_allocations(void) {
    int n = 0;
    for (int i = 0; i < MAX_ALLOCS; i++) {
        n += allocs[i].base != 0;
    }
    return n;
}

void stub_reset(void) {
    memset(fails, 0, sizeof fails);
    memset(counts, 0, sizeof counts);
    driver_version = 13000;
}

static int in_device(CUdeviceptr p, size_t n) {
    for (int i = 0; i < MAX_ALLOCS; i++) {
        if (allocs[i].base && p >= allocs[i].base && p + n <= allocs[i].base + allocs[i].size && p + n >= p) {
            return 1;
        }
    }
    return 0;
}

CUresult cuMemGetInfo_v2(size_t *free_, size_t *total) {
    ENTER("cuMemGetInfo_v2", NULL);
    if (!free_ || !total) return CUDA_ERROR_INVALID_VALUE;
    *free_ = TOTAL_MEMORY - live_bytes;
    *total = TOTAL_MEMORY;
    return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes) {
    ENTER("cuMemAlloc_v2", NULL);
    if (!dptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    if (live_bytes + bytes > TOTAL_MEMORY) return CUDA_ERROR_OUT_OF_MEMORY;
    for (int i = 0; i < MAX_ALLOCS; i++) {
        if (allocs[i].base == 0) {
            void *p = aligned_alloc(256, (bytes + 255) / 256 * 256);
            if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
            memset(p, 0xA5, bytes); /* garbage, as fresh device memory */
            allocs[i].base = (uintptr_t) p;
            allocs[i].size = bytes;
            live_bytes += bytes;
            *dptr = (CUdeviceptr) (uintptr_t) p;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
    ENTER("cuMemFree_v2", NULL);
    for (int i = 0; i < MAX_ALLOCS; i++) {
        if (allocs[i].base == dptr && dptr != 0) {
            free((void *) (uintptr_t) dptr);
            live_bytes -= allocs[i].size;
            allocs[i].base = 0;
            allocs[i].size = 0;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemHostAlloc(void **pp, size_t bytes, unsigned int flags) {
    (void) flags;
    ENTER("cuMemHostAlloc", NULL);
    if (!pp || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    *pp = calloc(1, bytes);
    return *pp ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemFreeHost(void *p) {
    ENTER("cuMemFreeHost", NULL);
    free(p);
    return CUDA_SUCCESS;
}

static CUresult memset8(CUdeviceptr d, unsigned char v, size_t n) {
    if (!in_device(d, n)) return CUDA_ERROR_INVALID_VALUE;
    memset((void *) (uintptr_t) d, v, n);
    return CUDA_SUCCESS;
}

static CUresult memset32(CUdeviceptr d, unsigned int v, size_t n) {
    if (d % 4 != 0 || !in_device(d, 4 * n)) return CUDA_ERROR_INVALID_VALUE;
    unsigned int *p = (unsigned int *) (uintptr_t) d;
    for (size_t i = 0; i < n; i++) p[i] = v;
    return CUDA_SUCCESS;
}

CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { ENTER("cuMemsetD8_v2", NULL); return memset8(d, v, n); }
CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned int v, size_t n) { ENTER("cuMemsetD32_v2", NULL); return memset32(d, v, n); }
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, void *s) { (void) s; ENTER("cuMemsetD8Async", NULL); return memset8(d, v, n); }
CUresult cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, void *s) { (void) s; ENTER("cuMemsetD32Async", NULL); return memset32(d, v, n); }

static CUresult htod(CUdeviceptr d, const void *h, size_t n) {
    if (!h || !in_device(d, n)) return CUDA_ERROR_INVALID_VALUE;
    memcpy((void *) (uintptr_t) d, h, n);
    return CUDA_SUCCESS;
}

static CUresult dtoh(void *h, CUdeviceptr d, size_t n) {
    if (!h || !in_device(d, n)) return CUDA_ERROR_INVALID_VALUE;
    memcpy(h, (const void *) (uintptr_t) d, n);
    return CUDA_SUCCESS;
}

static CUresult dtod(CUdeviceptr d, CUdeviceptr s, size_t n) {
    if (!in_device(d, n) || !in_device(s, n)) return CUDA_ERROR_INVALID_VALUE;
    memmove((void *) (uintptr_t) d, (const void *) (uintptr_t) s, n);
    return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *h, size_t n) { ENTER("cuMemcpyHtoD_v2", NULL); return htod(d, h, n); }
CUresult cuMemcpyDtoH_v2(void *h, CUdeviceptr d, size_t n) { ENTER("cuMemcpyDtoH_v2", NULL); return dtoh(h, d, n); }
CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { ENTER("cuMemcpyDtoD_v2", NULL); return dtod(d, s, n); }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *h, size_t n, void *s) { (void) s; ENTER("cuMemcpyHtoDAsync_v2", NULL); return htod(d, h, n); }
CUresult cuMemcpyDtoHAsync_v2(void *h, CUdeviceptr d, size_t n, void *s) { (void) s; ENTER("cuMemcpyDtoHAsync_v2", NULL); return dtoh(h, d, n); }
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, void *st) { (void) st; ENTER("cuMemcpyDtoDAsync_v2", NULL); return dtod(d, s, n); }

/* ---- init, device, context, errors */

static const struct { int rc; const char *name; const char *text; } ERRORS[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain."},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
};

static CUresult error_string(CUresult e, const char **p, int name) {
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof ERRORS / sizeof ERRORS[0]; i++) {
        if (ERRORS[i].rc == e) {
            *p = name ? ERRORS[i].name : ERRORS[i].text;
            return CUDA_SUCCESS;
        }
    }
    *p = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorName(CUresult e, const char **p) { count("cuGetErrorName"); return error_string(e, p, 1); }
CUresult cuGetErrorString(CUresult e, const char **p) { count("cuGetErrorString"); return error_string(e, p, 0); }

CUresult cuInit(unsigned int flags) {
    (void) flags;
    ENTER("cuInit", NULL);
    initialised = 1;
    return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *v) {
    ENTER("cuDriverGetVersion", NULL);
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    *v = driver_version;
    return CUDA_SUCCESS;
}

#define NEED_INIT() if (!initialised) return CUDA_ERROR_NOT_INITIALIZED

CUresult cuDeviceGetCount(int *n) { ENTER("cuDeviceGetCount", NULL); NEED_INIT(); if (!n) return CUDA_ERROR_INVALID_VALUE; *n = 1; return CUDA_SUCCESS; }

CUresult cuDeviceGet(int *d, int ordinal) {
    ENTER("cuDeviceGet", NULL);
    NEED_INIT();
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
    *d = 0;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, int dev) {
    ENTER("cuDeviceGetName", NULL);
    if (!name || len < 1) return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t) len, "accel4j stub driver (no GPU)");
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *pi, int attrib, int dev) {
    ENTER("cuDeviceGetAttribute", NULL);
    if (!pi) return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
    switch (attrib) {
        case 1: *pi = 1024; break;          /* MAX_THREADS_PER_BLOCK */
        case 8: *pi = DEFAULT_SHARED; break; /* MAX_SHARED_MEMORY_PER_BLOCK */
        case 10: *pi = 32; break;           /* WARP_SIZE */
        case 16: *pi = 132; break;          /* MULTIPROCESSOR_COUNT */
        case 75: *pi = 9; break;            /* COMPUTE_CAPABILITY_MAJOR */
        case 76: *pi = 0; break;            /* COMPUTE_CAPABILITY_MINOR */
        case 97: *pi = 232448; break;       /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
        default: *pi = 0; break;
    }
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, int dev) {
    ENTER("cuDeviceTotalMem_v2", NULL);
    if (!bytes) return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
    *bytes = TOTAL_MEMORY;
    return CUDA_SUCCESS;
}

static int primary_context_token;
static __thread void *current_context;

CUresult cuDevicePrimaryCtxRetain(void **pctx, int dev) {
    ENTER("cuDevicePrimaryCtxRetain", NULL);
    NEED_INIT();
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
    *pctx = &primary_context_token;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(int dev) { ENTER("cuDevicePrimaryCtxRelease_v2", NULL); return dev == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE; }

CUresult cuCtxSetCurrent(void *ctx) {
    ENTER("cuCtxSetCurrent", NULL);
    if (ctx != NULL && ctx != &primary_context_token) return CUDA_ERROR_INVALID_HANDLE;
    current_context = ctx;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(void **pctx) { ENTER("cuCtxGetCurrent", NULL); if (!pctx) return CUDA_ERROR_INVALID_VALUE; *pctx = current_context; return CUDA_SUCCESS; }
CUresult cuCtxSynchronize(void) { ENTER("cuCtxSynchronize", NULL); return current_context ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; }

/* ---- streams and events */

struct stream { int magic; };
struct event { int magic; int timing; int recorded; double ms; };
#define STREAM_MAGIC 0x57AE
#define EVENT_MAGIC 0xE7E7

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int bad_stream(void *s) { return s != NULL && ((struct stream *) s)->magic != STREAM_MAGIC; }
static int bad_event(void *e) { return e == NULL || ((struct event *) e)->magic != EVENT_MAGIC; }

CUresult cuStreamCreate(void **ps, unsigned int flags) {
    (void) flags;
    ENTER("cuStreamCreate", NULL);
    if (!ps) return CUDA_ERROR_INVALID_VALUE;
    struct stream *s = calloc(1, sizeof *s);
    s->magic = STREAM_MAGIC;
    *ps = s;
    return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(void *s) { ENTER("cuStreamSynchronize", NULL); return bad_stream(s) ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS; }

CUresult cuStreamDestroy_v2(void *s) {
    ENTER("cuStreamDestroy_v2", NULL);
    if (s == NULL || bad_stream(s)) return CUDA_ERROR_INVALID_HANDLE;
    ((struct stream *) s)->magic = 0;
    free(s);
    return CUDA_SUCCESS;
}

CUresult cuStreamWaitEvent(void *s, void *e, unsigned int flags) {
    (void) flags;
    ENTER("cuStreamWaitEvent", NULL);
    return bad_stream(s) || bad_event(e) ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
}

CUresult cuEventCreate(void **pe, unsigned int flags) {
    ENTER("cuEventCreate", NULL);
    if (!pe) return CUDA_ERROR_INVALID_VALUE;
    struct event *e = calloc(1, sizeof *e);
    e->magic = EVENT_MAGIC;
    e->timing = (flags & 2) == 0;
    *pe = e;
    return CUDA_SUCCESS;
}

CUresult cuEventRecord(void *pe, void *s) {
    ENTER("cuEventRecord", NULL);
    if (bad_event(pe) || bad_stream(s)) return CUDA_ERROR_INVALID_HANDLE;
    struct event *e = pe;
    e->recorded = 1;
    e->ms = now_ms();
    return CUDA_SUCCESS;
}

CUresult cuEventSynchronize(void *e) { ENTER("cuEventSynchronize", NULL); return bad_event(e) ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS; }
CUresult cuEventQuery(void *e) { ENTER("cuEventQuery", NULL); return bad_event(e) ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS; }

static CUresult elapsed(float *ms, void *start, void *end) {
    if (!ms) return CUDA_ERROR_INVALID_VALUE;
    if (bad_event(start) || bad_event(end)) return CUDA_ERROR_INVALID_HANDLE;
    struct event *a = start, *b = end;
    if (!a->timing || !b->timing) return CUDA_ERROR_INVALID_HANDLE;
    if (!a->recorded || !b->recorded) return CUDA_ERROR_INVALID_HANDLE;
    *ms = (float) (b->ms - a->ms);
    return CUDA_SUCCESS;
}

/* Every driver exports cuEventElapsedTime; build with -DSTUB_NO_ELAPSED_V2 for one older than 12.8. */
CUresult cuEventElapsedTime(float *ms, void *start, void *end) { ENTER("cuEventElapsedTime", NULL); return elapsed(ms, start, end); }
#ifndef STUB_NO_ELAPSED_V2
CUresult cuEventElapsedTime_v2(float *ms, void *start, void *end) { ENTER("cuEventElapsedTime_v2", NULL); return elapsed(ms, start, end); }
#endif

CUresult cuEventDestroy_v2(void *pe) {
    ENTER("cuEventDestroy_v2", NULL);
    if (bad_event(pe)) return CUDA_ERROR_INVALID_HANDLE;
    ((struct event *) pe)->magic = 0;
    free(pe);
    return CUDA_SUCCESS;
}

/* ---- modules and launches */

struct function {
    int magic;
    char name[128];
    int nparams;
    int sizes[MAX_PARAMS];
    int max_dynamic_shared; /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, -1 until set */
};

struct module { int magic; int nentries; struct function entries[MAX_ENTRIES]; };
#define MODULE_MAGIC 0x30D1
#define MAX_MODULES 256
static struct module *modules[MAX_MODULES]; /* live modules, in load order */

static void remember(struct module *m) {
    for (int i = 0; i < MAX_MODULES; i++) {
        if (modules[i] == NULL) { modules[i] = m; return; }
    }
}

static void forget(struct module *m) {
    for (int i = 0; i < MAX_MODULES; i++) {
        if (modules[i] == m) modules[i] = NULL;
    }
}

/** Live modules (for leak checks). */
int stub_live_modules(void) {
    int n = 0;
    for (int i = 0; i < MAX_MODULES; i++) n += modules[i] != NULL;
    return n;
}
#define FUNCTION_MAGIC 0xF00C

/* The size of one .param declaration ("  .param .u64 name", "  .param .align 128 .b8 name[128]"), or -1. */
static int param_size(const char *decl, const char *end) {
    const char *t = strstr(decl, ".param");
    if (!t || t >= end) return -1;
    t += 6;
    while (t < end && (*t == ' ' || *t == '\t')) t++;
    if (strncmp(t, ".align", 6) == 0) {
        t += 6;
        while (t < end && (*t == ' ' || *t == '\t' || (*t >= '0' && *t <= '9'))) t++;
    }
    if (*t != '.') return -1;
    t++;
    const char *bracket = memchr(t, '[', (size_t) (end - t));
    int elements = bracket ? atoi(bracket + 1) : 1;
    int bits = atoi(t + 1); /* u64, f32, b8, s32, ... */
    if (bits <= 0 || elements <= 0) return -1;
    return bits / 8 * elements;
}

/* Parses every ".entry name( ... )" of a PTX text; 0 on success, else a message in `error`. */
static int parse_ptx(const char *ptx, struct module *m, char *error, size_t error_size) {
    if (strstr(ptx, ".version") == NULL || strstr(ptx, ".target") == NULL) {
        snprintf(error, error_size, "stub: not a PTX text (no .version / .target)");
        return -1;
    }
    const char *p = ptx;
    while ((p = strstr(p, ".entry")) != NULL) {
        p += 6;
        while (*p == ' ' || *p == '\t') p++;
        const char *name = p;
        while (*p && *p != '(' && *p != ' ' && *p != '\n' && *p != '\t') p++;
        if (m->nentries == MAX_ENTRIES) {
            snprintf(error, error_size, "stub: more than %d entries", MAX_ENTRIES);
            return -1;
        }
        struct function *f = &m->entries[m->nentries++];
        f->magic = FUNCTION_MAGIC;
        f->max_dynamic_shared = -1;
        snprintf(f->name, sizeof f->name, "%.*s", (int) (p - name), name);
        const char *open = strchr(p, '(');
        const char *close = open ? strchr(open, ')') : NULL;
        if (!close) {
            snprintf(error, error_size, "stub: entry %s has no parameter list", f->name);
            return -1;
        }
        const char *decl = open + 1;
        while (decl < close) {
            const char *comma = memchr(decl, ',', (size_t) (close - decl));
            const char *end = comma ? comma : close;
            if (memchr(decl, '.', (size_t) (end - decl)) != NULL) {
                int size = param_size(decl, end);
                if (size < 0 || f->nparams == MAX_PARAMS) {
                    snprintf(error, error_size, "stub: unparsed parameter %d of %s", f->nparams, f->name);
                    return -1;
                }
                f->sizes[f->nparams++] = size;
            }
            decl = end + 1;
        }
        p = close;
    }
    return 0;
}

enum { JIT_INFO_LOG_BUFFER = 3, JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4, JIT_ERROR_LOG_BUFFER = 5,
       JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6 };

CUresult cuModuleLoadDataEx(void **pmod, const void *image, unsigned int n, int *options, void **values) {
    char *info = NULL, *err = NULL;
    size_t info_size = 0, err_size = 0;
    for (unsigned int i = 0; i < n && options && values; i++) {
        switch (options[i]) {
            case JIT_INFO_LOG_BUFFER: info = values[i]; break;
            case JIT_INFO_LOG_BUFFER_SIZE_BYTES: info_size = (size_t) (uintptr_t) values[i]; break;
            case JIT_ERROR_LOG_BUFFER: err = values[i]; break;
            case JIT_ERROR_LOG_BUFFER_SIZE_BYTES: err_size = (size_t) (uintptr_t) values[i]; break;
            default: break;
        }
    }
    count("cuModuleLoadDataEx");
    int inj = injected("cuModuleLoadDataEx", image);
    if (inj != CUDA_SUCCESS) {
        if (err && err_size) snprintf(err, err_size, "stub: injected failure %d", inj);
        return inj;
    }
    if (!pmod || !image) return CUDA_ERROR_INVALID_VALUE;
    if (memcmp(image, "\177ELF", 4) == 0) { /* a cubin: what a driver older than its ptxas answers */
        if (err && err_size) snprintf(err, err_size, "stub: loads PTX text only, not a cubin");
        return CUDA_ERROR_INVALID_IMAGE;
    }
    struct module *m = calloc(1, sizeof *m);
    m->magic = MODULE_MAGIC;
    char message[256] = "";
    if (parse_ptx(image, m, message, sizeof message) != 0) {
        free(m);
        if (err && err_size) snprintf(err, err_size, "%s", message);
        return CUDA_ERROR_INVALID_PTX;
    }
    if (info && info_size) snprintf(info, info_size, "stub: %d entries parsed, nothing compiled", m->nentries);
    remember(m);
    *pmod = m;
    return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(void **pf, void *hmod, const char *name) {
    ENTER("cuModuleGetFunction", name);
    struct module *m = hmod;
    if (!pf || !name) return CUDA_ERROR_INVALID_VALUE;
    if (!m || m->magic != MODULE_MAGIC) return CUDA_ERROR_INVALID_HANDLE;
    for (int i = 0; i < m->nentries; i++) {
        if (strcmp(m->entries[i].name, name) == 0) {
            *pf = &m->entries[i];
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_NOT_FOUND;
}

CUresult cuModuleUnload(void *hmod) {
    ENTER("cuModuleUnload", NULL);
    struct module *m = hmod;
    if (!m || m->magic != MODULE_MAGIC) return CUDA_ERROR_INVALID_HANDLE;
    forget(m);
    m->magic = 0;
    for (int i = 0; i < m->nentries; i++) m->entries[i].magic = 0;
    free(m);
    return CUDA_SUCCESS;
}

static int bad_function(void *f) { return f == NULL || ((struct function *) f)->magic != FUNCTION_MAGIC; }

CUresult cuFuncSetAttribute(void *hfunc, int attrib, int value) {
    ENTER("cuFuncSetAttribute", bad_function(hfunc) ? NULL : ((struct function *) hfunc)->name);
    if (bad_function(hfunc)) return CUDA_ERROR_INVALID_HANDLE;
    if (attrib == 8) { /* MAX_DYNAMIC_SHARED_SIZE_BYTES */
        if (value < 0 || value > 232448) return CUDA_ERROR_INVALID_VALUE;
        ((struct function *) hfunc)->max_dynamic_shared = value;
    }
    return CUDA_SUCCESS;
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, void *f, int block, size_t shared) {
    (void) shared;
    ENTER("cuOccupancyMaxActiveBlocksPerMultiprocessor", NULL);
    if (!n || block < 1) return CUDA_ERROR_INVALID_VALUE;
    if (bad_function(f)) return CUDA_ERROR_INVALID_HANDLE;
    *n = block > 1024 ? 0 : 2048 / block > 32 ? 32 : 2048 / block;
    return CUDA_SUCCESS;
}

/* The last launch, for the tests. */
static struct {
    char name[128];
    unsigned int dims[7]; /* grid x y z, block x y z, shared bytes */
    int nparams;
    int sizes[MAX_PARAMS];
    unsigned char bytes[MAX_PARAMS * 128];
    int nbytes;
} last_launch;

CUresult cuLaunchKernel(void *f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by,
                        unsigned int bz, unsigned int shared, void *stream, void **params, void **extra) {
    ENTER("cuLaunchKernel", bad_function(f) ? NULL : ((struct function *) f)->name);
    if (bad_function(f) || bad_stream(stream)) return CUDA_ERROR_INVALID_HANDLE;
    struct function *fn = f;
    if (extra != NULL) return CUDA_ERROR_INVALID_VALUE; /* the bindings never use extra */
    if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0) return CUDA_ERROR_INVALID_VALUE;
    if ((unsigned long long) bx * by * bz > 1024 || gy > 65535 || gz > 65535) return CUDA_ERROR_INVALID_VALUE;
    int limit = fn->max_dynamic_shared < 0 ? DEFAULT_SHARED : fn->max_dynamic_shared;
    if ((int) shared > limit) return CUDA_ERROR_INVALID_VALUE;
    if (fn->nparams > 0 && params == NULL) return CUDA_ERROR_INVALID_VALUE;
    int total = 0;
    for (int i = 0; i < fn->nparams; i++) {
        if (params[i] == NULL) return CUDA_ERROR_INVALID_VALUE;
        total += fn->sizes[i];
    }
    if (total > (int) sizeof last_launch.bytes) return CUDA_ERROR_INVALID_VALUE;
    snprintf(last_launch.name, sizeof last_launch.name, "%s", fn->name);
    unsigned int dims[7] = {gx, gy, gz, bx, by, bz, shared};
    memcpy(last_launch.dims, dims, sizeof dims);
    last_launch.nparams = fn->nparams;
    last_launch.nbytes = total;
    int at = 0;
    for (int i = 0; i < fn->nparams; i++) {
        last_launch.sizes[i] = fn->sizes[i];
        memcpy(last_launch.bytes + at, params[i], (size_t) fn->sizes[i]);
        at += fn->sizes[i];
    }
    return CUDA_SUCCESS;
}

/**
 * The last launch: its kernel name into `name` (cap bytes), grid/block/shared into dims[7], the parameters' sizes
 * into sizes[] and their bytes, back to back, into bytes[]; returns the parameter count (-1: no launch yet).
 */
int stub_last_launch(char *name, int cap, unsigned int *dims, int *sizes, unsigned char *bytes) {
    if (last_launch.name[0] == 0) return -1;
    snprintf(name, (size_t) cap, "%s", last_launch.name);
    memcpy(dims, last_launch.dims, sizeof last_launch.dims);
    memcpy(sizes, last_launch.sizes, sizeof(int) * (size_t) last_launch.nparams);
    memcpy(bytes, last_launch.bytes, (size_t) last_launch.nbytes);
    return last_launch.nparams;
}

/**
 * The MAX_DYNAMIC_SHARED_SIZE_BYTES attribute of the kernel `entry` in the most recently loaded live module that
 * has it: -1 if never set, -2 if no live module has that entry.
 */
int stub_dynamic_shared_attribute(const char *entry) {
    for (int i = MAX_MODULES - 1; i >= 0; i--) {
        struct module *m = modules[i];
        for (int j = 0; m && j < m->nentries; j++) {
            if (strcmp(m->entries[j].name, entry) == 0) return m->entries[j].max_dynamic_shared;
        }
    }
    return -2;
}

CUresult cuTensorMapEncodeTiled(void *map, int type, unsigned int rank, void *global, const unsigned long long *dims,
                                const unsigned long long *strides, const unsigned int *box,
                                const unsigned int *element_strides, int interleave, int swizzle, int l2, int oob) {
    (void) type; (void) interleave; (void) swizzle; (void) l2; (void) oob;
    ENTER("cuTensorMapEncodeTiled", NULL);
    if (!map || !global || !dims || !box || !element_strides || rank < 1 || rank > 5) return CUDA_ERROR_INVALID_VALUE;
    if (rank > 1 && !strides) return CUDA_ERROR_INVALID_VALUE;
    if ((uintptr_t) map % 64 != 0 || (uintptr_t) global % 16 != 0) return CUDA_ERROR_INVALID_VALUE;
    for (unsigned int i = 0; i < rank; i++) {
        if (box[i] == 0 || box[i] > 256) return CUDA_ERROR_INVALID_VALUE;
    }
    unsigned long long *words = map;
    memset(map, 0, 128);
    words[0] = (unsigned long long) (uintptr_t) global;
    words[1] = rank;
    for (unsigned int i = 0; i < rank && i < 5; i++) words[2 + i] = dims[i];
    return CUDA_SUCCESS;
}
