/* The C API of libtilusvm: load verified Tilus VM programs and launch them on CUDA streams.
 *
 * Pure C (C99): opaque handles, int status codes (tilusvm_status), and a thread-local message
 * for the most recent failure on the calling thread (tilusvm_last_error). No function aborts
 * the process or lets an exception escape; every failure is a status and a message.
 *
 * Typical use by a serving engine:
 *
 *   tilusvm_runtime rt;  tilusvm_module m;
 *   if (tilusvm_runtime_create(-1, &rt) != TILUSVM_OK) fail(tilusvm_last_error());
 *   if (tilusvm_module_load_file("kernels.tbc", &m) != TILUSVM_OK) fail(tilusvm_last_error());
 *   tilusvm_arg args[4] = {
 *     {0, (void *)x_dev, n * 4}, {0, (void *)y_dev, n * 4}, {0, (void *)z_dev, n * 4},
 *     {(uint64_t)n, NULL, 0}};
 *   tilusvm_launch(rt, m, "vector_add", args, 4, (void *)my_cuda_stream);
 *
 * Arguments follow the program's parameters in order. Scalars carry the value's bit pattern
 * in the parameter's dtype (an i32 -1 is 0xffffffff; an f32 1.0 is 0x3f800000); pointers
 * carry a device address (CUdeviceptr cast to void *) and the bytes available there, which
 * must cover what the program can touch. Streams are CUstream values cast to void *; NULL is
 * the default stream. Launches are asynchronous: synchronize the stream before reading results.
 *
 * Thread safety: a runtime and a module may be used from many threads at once. Destroying a
 * handle while another thread uses it is the caller's error.
 *
 * Engines use the versioned interface below ("Runtimes with options", "Kernel handles"):
 * options and statistics are structs whose first field is their size, so that a program built
 * against this header keeps working with later versions of the library; a kernel handle skips
 * the name look-up on every launch; launches may take the engine's own workspace memory; and
 * launches inside CUDA graph capture are safe once the kernel is prepared:
 *
 *   tilusvm_runtime_options o;  tilusvm_runtime_options_init(&o);
 *   o.device = 1;  o.lazy_compile = 0;
 *   tilusvm_runtime_create_ex(&o, &rt);
 *   tilusvm_kernel k;  tilusvm_kernel_get(rt, m, "matmul", &k);       (compiles now)
 *   tilusvm_kernel_prepare(k, args, n, stream);                        (before any capture)
 *   uint64_t bytes;  tilusvm_kernel_workspace_size(k, args, n, &bytes);
 *   ... cuStreamBeginCapture(stream, ...) ...
 *   tilusvm_kernel_launch(k, args, n, stream, my_workspace, bytes);
 */
#ifndef TILUSVM_H
#define TILUSVM_H

#include <stddef.h>
#include <stdint.h>

/* The version of this header; tilusvm_version() gives the library's as "MAJOR.MINOR.PATCH".
 * The build refuses to configure when these differ from the project's version. */
#define TILUSVM_VERSION_MAJOR 0
#define TILUSVM_VERSION_MINOR 1
#define TILUSVM_VERSION_PATCH 0

#if defined(_WIN32)
#define TILUSVM_API __declspec(dllexport)
#else
#define TILUSVM_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tilusvm_status {
  TILUSVM_OK = 0,
  TILUSVM_ERROR_INVALID_ARGUMENT = 1, /* null handle or pointer, wrong argument count or size */
  TILUSVM_ERROR_NOT_FOUND = 2,        /* no program of that name or index */
  TILUSVM_ERROR_IO = 3,               /* a file cannot be read */
  TILUSVM_ERROR_BYTECODE = 4,         /* the bytes are not valid bytecode */
  TILUSVM_ERROR_CHECK = 5,            /* the module fails the layout type checker */
  TILUSVM_ERROR_NO_DRIVER = 6,        /* libcuda.so.1 cannot be opened */
  TILUSVM_ERROR_NO_DEVICE = 7,        /* the driver is there but no usable device */
  TILUSVM_ERROR_CUDA = 8,             /* a CUDA driver call failed */
  TILUSVM_ERROR_JIT = 9,              /* compiling the program to PTX failed */
  TILUSVM_ERROR_RUNTIME = 10,         /* the program failed while running (CPU traps, races),
                                         or a precondition (assert) of the launch is false */
  TILUSVM_ERROR_UNSUPPORTED = 11,     /* the program or device needs something not supported */
  TILUSVM_ERROR_INTERNAL = 12,        /* out of memory or a bug in Tilus VM */
  TILUSVM_ERROR_NOT_PREPARED = 13     /* a launch during CUDA graph capture (or with lazy
                                         compilation off) needs a kernel or workspace that was
                                         not prepared: call tilusvm_kernel_prepare first */
} tilusvm_status;

typedef struct tilusvm_runtime_s *tilusvm_runtime;
typedef struct tilusvm_module_s *tilusvm_module;

/* One launch argument (see the file comment). */
typedef struct tilusvm_arg {
  uint64_t scalar_bits;
  void *pointer;
  uint64_t byte_size;
} tilusvm_arg;

/* The message of the most recent failed call on this thread ("" if none). Valid until the
 * next failing call on this thread. */
TILUSVM_API const char *tilusvm_last_error(void);
/* The spelling of a status code, e.g. "TILUSVM_ERROR_NO_DRIVER". */
TILUSVM_API const char *tilusvm_status_name(int status);
/* The library version, e.g. "0.1.0". */
TILUSVM_API const char *tilusvm_version(void);

/* ---- Modules (no GPU needed) ---- */

/* Decode and check bytecode (.tbc bytes). */
TILUSVM_API int tilusvm_module_load(const void *bytes, size_t size, tilusvm_module *out);
TILUSVM_API int tilusvm_module_load_file(const char *path, tilusvm_module *out);
/* Destroying NULL is a no-op. Kernels compiled from the module stay cached in runtimes. */
TILUSVM_API int tilusvm_module_destroy(tilusvm_module module);
TILUSVM_API int tilusvm_module_program_count(tilusvm_module module, size_t *out);
/* The name of program `index`; the string lives as long as the module. */
TILUSVM_API int tilusvm_module_program_name(tilusvm_module module, size_t index, const char **out);
TILUSVM_API int tilusvm_module_find_program(tilusvm_module module, const char *name,
                                            size_t *out_index);
/* Number of parameters of a program. */
TILUSVM_API int tilusvm_program_param_count(tilusvm_module module, const char *program,
                                            size_t *out);
/* Parameter `index` of a program: its name, its dtype spelling ("f16", "i6", ...) and whether
 * it is a pointer. Strings live as long as the module. Any out pointer may be NULL. */
TILUSVM_API int tilusvm_program_param(tilusvm_module module, const char *program, size_t index,
                                      const char **out_name, const char **out_dtype,
                                      int *out_is_pointer);

/* ---- Assembling .tasm source (no GPU needed) ----
 *
 * The assembler and the layout type checker of tilus-asm, inside the library: a host that
 * ships programs as .tasm text picks their constants when it loads them, with no tool and no
 * .tbc file in between. The module behaves exactly as the same program assembled by
 * `tilus-asm FILE -D NAME=VALUE...` and loaded with tilusvm_module_load_file (it shares the
 * runtime's compiled kernels with it).
 *
 *   tilusvm_define d[2] = {{"WT", "u4"}, {"N", "8192"}};
 *   int r = tilusvm_module_assemble(text, strlen(text), "a16wx.tasm", d, 2, &m);
 *
 * Failures: TILUSVM_ERROR_CHECK when the source does not assemble or check, a define that
 * the source does not declare (`const NAME = ...`) or cannot take included: the message has
 * every diagnostic, one per line, as "FILE:LINE:COL: error[CODE]: message" with `file_name`
 * as FILE. TILUSVM_ERROR_INVALID_ARGUMENT: NULL pointers, a define with an empty name or one
 * given twice, source beyond the size limit. */

/* One -D NAME=VALUE: `value` is spelled as on tilus-asm's command line ("128", "u4", "f16"). */
typedef struct tilusvm_define {
  const char *name;
  const char *value;
} tilusvm_define;

/* Assemble and check `source_size` bytes of .tasm text (need not be NUL-terminated; at most
 * 64 MiB). `file_name` names the source in diagnostics (NULL: "<input>"); `defines` override
 * declared constants (NULL when num_defines is 0). On success *out is a new module. */
TILUSVM_API int tilusvm_module_assemble(const char *source, size_t source_size,
                                        const char *file_name, const tilusvm_define *defines,
                                        size_t num_defines, tilusvm_module *out);

/* ---- Running on the CPU reference interpreter (no GPU needed) ---- */

/* Run a program to completion on host memory (pointer arguments are host addresses).
 * checked != 0 enables race, bounds and workspace checks. */
TILUSVM_API int tilusvm_run_cpu(tilusvm_module module, const char *program, const tilusvm_arg *args,
                                size_t num_args, int checked);

/* ---- The CUDA runtime ---- */

/* Open a device: device >= 0 picks that ordinal; -1 picks $TILUSVM_DEVICE or device 0.
 * Fails with TILUSVM_ERROR_NO_DRIVER on machines without the CUDA driver. */
TILUSVM_API int tilusvm_runtime_create(int device, tilusvm_runtime *out);
/* Waits for the device's work, frees every kernel and workspace. NULL is a no-op. */
TILUSVM_API int tilusvm_runtime_destroy(tilusvm_runtime runtime);
/* The device's name; the string lives as long as the runtime. */
TILUSVM_API int tilusvm_runtime_device_name(tilusvm_runtime runtime, const char **out);
/* Compute capability as major * 10 + minor (90 for an H100). */
TILUSVM_API int tilusvm_runtime_compute_capability(tilusvm_runtime runtime, int *out);
/* Compile (or fetch from the caches) a program's kernel now, so the first launch is fast. */
TILUSVM_API int tilusvm_prepare(tilusvm_runtime runtime, tilusvm_module module,
                                const char *program);
/* Queue a launch of `program` on `stream` (a CUstream of the runtime's device; NULL = default
 * stream; a stream of another device or context is refused). Inside CUDA graph capture the
 * rules of tilusvm_kernel_launch apply (the runtime's own workspace). */
TILUSVM_API int tilusvm_launch(tilusvm_runtime runtime, tilusvm_module module, const char *program,
                               const tilusvm_arg *args, size_t num_args, void *stream);

/* ---- Errors from the CUDA driver ---- */

/* The CUresult of the driver call that made the most recent failing call on this thread fail
 * (an int holding a CUresult, e.g. 2 for CUDA_ERROR_OUT_OF_MEMORY); 0 (CUDA_SUCCESS) when that
 * failure did not come from a driver call. */
TILUSVM_API int tilusvm_last_cu_result(void);

/* ---- Runtimes with options ---- */

typedef enum tilusvm_log_level {
  TILUSVM_LOG_DEFAULT = -1, /* $TILUSVM_LOG_LEVEL (trace, debug, info, warn, err, off), else warn */
  TILUSVM_LOG_TRACE = 0,
  TILUSVM_LOG_DEBUG = 1,
  TILUSVM_LOG_INFO = 2,
  TILUSVM_LOG_WARN = 3,
  TILUSVM_LOG_ERROR = 4,
  TILUSVM_LOG_CRITICAL = 5,
  TILUSVM_LOG_OFF = 6
} tilusvm_log_level;

/* Receives one log message (no trailing newline) of a runtime; `level` is a tilusvm_log_level.
 * Calls are serialised per runtime and may come from any thread that uses the runtime; the
 * callback must not call into that runtime. */
typedef void (*tilusvm_log_callback)(int level, const char *message, void *user_data);

/* Version 1 of the options (the struct only grows; fields keep their offsets). */
typedef struct tilusvm_runtime_options {
  size_t struct_size;    /* sizeof(tilusvm_runtime_options) as the caller compiled it */
  int device;            /* ordinal; -1: $TILUSVM_DEVICE or 0 */
  const char *cache_dir; /* disk cache directory; NULL: the default ($TILUSVM_CACHE_DIR, ...);
                           "": no disk cache. Copied; need not outlive the call. */
  int log_level;         /* a tilusvm_log_level */
  tilusvm_log_callback log_callback; /* NULL: messages go to stderr */
  void *log_user_data;               /* passed to log_callback */
  int lazy_compile; /* 1: a launch compiles its kernel if needed (the default). 0: kernels
                       compile in tilusvm_kernel_get / tilusvm_kernel_prepare /
                       tilusvm_prepare only, and a launch of a kernel not compiled for its
                       arguments fails (TILUSVM_ERROR_NOT_PREPARED) */
} tilusvm_runtime_options;

/* Fill `options` with the defaults (device -1, default cache, default log level, stderr, lazy
 * compilation) and struct_size = sizeof(tilusvm_runtime_options). */
TILUSVM_API int tilusvm_runtime_options_init(tilusvm_runtime_options *options);
/* Open a device with options. struct_size smaller than version 1's size is refused; fields a
 * later header added and this library does not know must be zero. */
TILUSVM_API int tilusvm_runtime_create_ex(const tilusvm_runtime_options *options,
                                          tilusvm_runtime *out);

/* ---- Kernel handles ---- */

/* One program of a module, bound to a runtime: launches skip the name look-up. Valid while its
 * runtime and its module live; destroy it before them. Usable from many threads at once. */
typedef struct tilusvm_kernel_s *tilusvm_kernel;

/* Look `program` up once. With lazy compilation off, also compiles its unspecialised kernel
 * (so launches of any arguments can run). */
TILUSVM_API int tilusvm_kernel_get(tilusvm_runtime runtime, tilusvm_module module,
                                   const char *program, tilusvm_kernel *out);
/* NULL is a no-op. */
TILUSVM_API int tilusvm_kernel_destroy(tilusvm_kernel kernel);
/* Get the kernel ready for launches like `args` on `stream`, CUDA graph capture included:
 * compile the kernel for the kind of these arguments (addresses aligned to 16 bytes or not,
 * integers equal to 1 or multiples of 16; the values need not be the launch's) and, when the
 * program uses a workspace, grow the runtime's workspace of `stream` to what `args` need.
 * args = NULL: compile the kernel that is correct for every argument. Not during a capture on
 * `stream`. */
TILUSVM_API int tilusvm_kernel_prepare(tilusvm_kernel kernel, const tilusvm_arg *args,
                                       size_t num_args, void *stream);
/* Bytes of workspace a launch with these arguments needs (0 when the program needs none). Only
 * the scalar arguments matter; the count must match. */
TILUSVM_API int tilusvm_kernel_workspace_size(tilusvm_kernel kernel, const tilusvm_arg *args,
                                              size_t num_args, uint64_t *out_bytes);
/* Queue a launch on `stream` (a CUstream of the runtime's device; NULL = default stream).
 * workspace = NULL: the runtime's own workspace for `stream` (grown on demand, except during
 * capture). Otherwise a device address (CUdeviceptr as void *) in the runtime's context,
 * 256-byte aligned, of workspace_bytes >= tilusvm_kernel_workspace_size() bytes, that nothing
 * else uses until the launch completes (the caller's allocator owns it, as with cuBLASLt);
 * regions the program needs zeroed are zeroed on `stream` before the kernel (in a capture, by
 * memset nodes of the graph). During capture the launch fails, saying to prepare, if it would
 * have to compile or allocate. */
TILUSVM_API int tilusvm_kernel_launch(tilusvm_kernel kernel, const tilusvm_arg *args,
                                      size_t num_args, void *stream, void *workspace,
                                      uint64_t workspace_bytes);

/* ---- Statistics ---- */

/* Version 1 of the statistics (the struct only grows). */
typedef struct tilusvm_stats {
  size_t struct_size;       /* set by the caller: sizeof(tilusvm_stats) */
  uint64_t compiles;        /* kernels compiled by the JIT */
  uint64_t disk_hits;       /* kernels loaded from the disk cache */
  uint64_t shared_hits;     /* kernels built by another runtime of the process, loaded here */
  uint64_t memory_hits;     /* launches and look-ups answered by already loaded kernels */
  uint64_t disk_corrupt;    /* disk cache entries rejected (and recompiled) */
  uint64_t workspace_bytes; /* device memory the runtime's workspaces hold (0 for the process) */
} tilusvm_stats;

/* Counters of one runtime since its creation. The caller sets out->struct_size; fields past it
 * are not written. */
TILUSVM_API int tilusvm_runtime_get_stats(tilusvm_runtime runtime, tilusvm_stats *out);
/* The sums over every runtime of the process since it started: with several runtimes (one per
 * GPU), `compiles` counts each distinct kernel once per architecture. */
TILUSVM_API int tilusvm_process_get_stats(tilusvm_stats *out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TILUSVM_H */
