// Checker benchmark (not a test): generates a program of about N instructions (default
// 100,000; `bench_checker N` for another size) made of a realistic block repeated inside a loop
// (shared and global loads, an mma-atom Dot, elementwise operators with broadcasting, a
// Reduce, Casts with out=, a store) and prints the time to assemble and to check it, at N and
// 2N, so that linear growth can be seen.
#include "assembler/assembler.h"
#include "loader/checker.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace tilus;

namespace {

const char *kA =
    "spatial(2, 1).replicate(2).local(2, 2).column_local(2, 2).spatial(8, 4).local(1, 2)";
const char *kB =
    "replicate(2).spatial(1, 2).local(2, 4).local(2, 1).column_spatial(4, 8).local(2, 1)";
const char *kC = "spatial(2, 2).local(2, 4).local(2, 1).spatial(8, 4).local(1, 2)";
constexpr int kPerBlock = 10;

std::string program(int instructions) {
  std::string s = "def bench<1>(f16* a_ptr, f16* b_ptr, f32* c_ptr, i32 n) threads=128:\n"
                  "    ga = ViewGlobal(a_ptr, shape=[n, 32])\n"
                  "    gb = ViewGlobal(b_ptr, shape=[32, n])\n"
                  "    gc = ViewGlobal(c_ptr, shape=[n, n])\n"
                  "    sa = AllocateShared(f16, shape=[64, 32])\n"
                  "    acc = AllocateRegister(f32, layout=" +
                  std::string(kC) +
                  ")\n"
                  "    for i in range(n):\n";
  for (int k = 0; k < instructions / kPerBlock; ++k) {
    s += "        a = LoadShared(sa, layout=" + std::string(kA) + ")\n";
    s += "        b = LoadGlobal(gb, layout=" + std::string(kB) + ", offset=[0:, i:])\n";
    s += "        Dot(a, b, acc, out=acc)\n";
    s += "        x = Add(acc, 1.0)\n";
    s += "        m = Reduce(x, dim=1, op=max, keepdim=True)\n";
    s += "        y = Exp(Sub(x, m))\n";
    s += "        Cast(y, f32, out=acc)\n";
    s += "        h = Cast(y, f16)\n";
    s += "        StoreGlobal(y, gc, offset=[i:, 0:])\n";
  }
  return s;
}

double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

bool run(int instructions) {
  std::string text = program(instructions);
  auto t0 = std::chrono::steady_clock::now();
  Expected<Module> m = assemble(text);
  double asmMs = msSince(t0);
  if (!m) {
    std::fprintf(stderr, "%s\n", m.status().toString().c_str());
    return false;
  }
  size_t count = m->programs[0].instructions.size();
  // Best of three runs (the machine may be shared); each checks its own copy of the module.
  double checkMs = 0;
  for (int rep = 0; rep < 3; ++rep) {
    Module copy = *m;
    t0 = std::chrono::steady_clock::now();
    Expected<VerifiedModule> v = checkModule(std::move(copy));
    double ms = msSince(t0);
    if (!v) {
      std::fprintf(stderr, "%s\n", v.status().toString().c_str());
      return false;
    }
    checkMs = rep == 0 ? ms : std::min(checkMs, ms);
  }
  std::printf("%8zu instructions: assemble %8.1f ms, check %8.1f ms (%.0f ns per instruction)\n",
              count, asmMs, checkMs, checkMs * 1e6 / double(count));
  return true;
}

} // namespace

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 100000;
  if (n <= 0) {
    std::fprintf(stderr, "usage: bench_checker [INSTRUCTIONS]\n");
    return 2;
  }
  return run(n) && run(2 * n) ? 0 : 1;
}
