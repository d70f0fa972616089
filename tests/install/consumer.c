/* A program outside the project, as an engine's developer writes one: it includes the installed
 * header and links the installed library through `pkg-config --cflags --libs tilusvm` only.
 * It checks the version macros against the library, loads the bytecode given on the command
 * line, and runs vector_add on the CPU interpreter through the C API.
 *
 *   consumer VECTOR_ADD.tbc    prints "consumer: ok" and exits 0, or says what is wrong */
#include <tilusvm.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 1000

#define STR2(x) #x
#define STR(x) STR2(x)

static int fail(const char *what, int status) {
  fprintf(stderr, "consumer: %s: %s (%s)\n", what, tilusvm_status_name(status),
          tilusvm_last_error());
  return 1;
}

int main(int argc, char **argv) {
  const char *macro_version =
      STR(TILUSVM_VERSION_MAJOR) "." STR(TILUSVM_VERSION_MINOR) "." STR(TILUSVM_VERSION_PATCH);
  if (argc != 2) {
    fprintf(stderr, "usage: consumer VECTOR_ADD.tbc\n");
    return 2;
  }
  if (strcmp(macro_version, tilusvm_version()) != 0) {
    fprintf(stderr, "consumer: header says %s, library says %s\n", macro_version,
            tilusvm_version());
    return 1;
  }
  tilusvm_module module = NULL;
  int status = tilusvm_module_load_file(argv[1], &module);
  if (status != TILUSVM_OK)
    return fail("load", status);
  size_t params = 0;
  status = tilusvm_program_param_count(module, "vector_add", &params);
  if (status != TILUSVM_OK)
    return fail("param count", status);
  if (params != 4) {
    fprintf(stderr, "consumer: vector_add has %zu parameters, expected 4\n", params);
    return 1;
  }
  static float x[N], y[N], z[N];
  for (int i = 0; i < N; ++i) {
    x[i] = (float)i * 0.5f;   /* exact in binary32, and so is every sum below */
    y[i] = (float)(N - i);
    z[i] = -1.0f;
  }
  tilusvm_arg args[4] = {{0, x, sizeof x}, {0, y, sizeof y}, {0, z, sizeof z}, {N, NULL, 0}};
  status = tilusvm_run_cpu(module, "vector_add", args, 4, 1);
  if (status != TILUSVM_OK)
    return fail("run_cpu", status);
  for (int i = 0; i < N; ++i) {
    float expected = (float)i * 0.5f + (float)(N - i);
    if (z[i] != expected) {
      fprintf(stderr, "consumer: z[%d] = %g, expected %g\n", i, z[i], expected);
      return 1;
    }
  }
  /* A wrong argument count is a status and a message, not a crash. */
  status = tilusvm_run_cpu(module, "vector_add", args, 3, 1);
  if (status != TILUSVM_ERROR_INVALID_ARGUMENT) {
    fprintf(stderr, "consumer: 3 arguments gave %s\n", tilusvm_status_name(status));
    return 1;
  }
  tilusvm_module_destroy(module);
  printf("consumer: ok (tilusvm %s, vector_add of %d elements on the CPU interpreter)\n",
         tilusvm_version(), N);
  return 0;
}
