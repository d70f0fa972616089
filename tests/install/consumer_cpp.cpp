// The C++ side of tests/install/consumer.c: tilusvm.hpp is header-only over the C API, so a C++
// program built with `pkg-config --cflags --libs tilusvm` and nothing else links against the
// installed library (which exports only tilusvm_*). It runs vector_add on the CPU interpreter
// and checks a failure surfaces as tilusvm::Error.
//
//   consumer_cpp VECTOR_ADD.tbc    prints "consumer_cpp: ok" and exits 0, or says what is wrong
#include <tilusvm.hpp>

#include <cstdio>
#include <vector>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer_cpp VECTOR_ADD.tbc\n");
    return 2;
  }
  try {
    tilusvm::Module module = tilusvm::Module::loadFile(argv[1]);
    std::vector<tilusvm::ParamInfo> params = module.params("vector_add");
    if (params.size() != 4 || params[0].dtype != "f32" || !params[0].isPointer ||
        params[3].dtype != "i32" || params[3].isPointer) {
      std::fprintf(stderr, "consumer_cpp: unexpected parameters of vector_add\n");
      return 1;
    }
    const int n = 777;
    std::vector<float> x(n), y(n), z(n, -1.0f);
    for (int i = 0; i < n; ++i) {
      x[i] = float(i) * 0.25f; // exact in binary32, and so is every sum below
      y[i] = float(3 * i);
    }
    module.runOnCpu("vector_add",
                    {tilusvm::Arg::pointer(x.data(), n * 4), tilusvm::Arg::pointer(y.data(), n * 4),
                     tilusvm::Arg::pointer(z.data(), n * 4), tilusvm::Arg::i32(n)});
    for (int i = 0; i < n; ++i)
      if (z[i] != float(i) * 0.25f + float(3 * i)) {
        std::fprintf(stderr, "consumer_cpp: z[%d] = %g\n", i, z[i]);
        return 1;
      }
    try {
      module.runOnCpu("no_such_program", {});
      std::fprintf(stderr, "consumer_cpp: an unknown program did not throw\n");
      return 1;
    } catch (const tilusvm::Error &e) {
      if (e.status() != TILUSVM_ERROR_NOT_FOUND) {
        std::fprintf(stderr, "consumer_cpp: unknown program gave %s\n", e.what());
        return 1;
      }
    }
  } catch (const tilusvm::Error &e) {
    std::fprintf(stderr, "consumer_cpp: %s\n", e.what());
    return 1;
  }
  std::printf("consumer_cpp: ok (tilusvm.hpp over the installed library)\n");
  return 0;
}
