// jit::chunkSplit and jit::chunkStep (memory_util.h), the constant steps by which a copy's
// chunk t + i T lies from chunk t, proved over whole small domains against plain unravelling:
// for every row-major chunk shape of rank 2 to 5 with dimensions in {1, 2, 3, 4, 8, 16}, every
// thread count in {32, 64, 128, 256}, every thread t and every i, when a split is found the
// unravelled index of t + i T is that of t plus the steps (no carry), the steps are zero at the
// split dimension and beyond, and the shape holds a whole number of rounds of T chunks; and a
// split is found wherever its two conditions hold at some dimension >= 2.
#include "jit/memory_util.h"

#include "test_helpers.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace {

std::vector<int64_t> unravelIndex(int64_t x, const std::vector<int64_t> &shape) {
  std::vector<int64_t> d(shape.size());
  for (size_t k = shape.size(); k-- > 0;) {
    d[k] = k == 0 ? x : x % shape[k];
    x = k == 0 ? 0 : x / shape[k];
  }
  return d;
}

void forEachShape(size_t rank, std::vector<int64_t> &shape,
                  const std::function<void(const std::vector<int64_t> &)> &f) {
  static const int64_t dims[] = {1, 2, 3, 4, 8, 16};
  if (shape.size() == rank) {
    f(shape);
    return;
  }
  for (int64_t n : dims) {
    shape.push_back(n);
    forEachShape(rank, shape, f);
    shape.pop_back();
  }
}

} // namespace

TEST_CASE("chunkSplit: chunk t + i T is chunk t moved by chunkStep, without carries, over every "
          "small shape and thread count") {
  int64_t splits = 0, shapes = 0, bad = 0;
  for (size_t rank = 2; rank <= 5; ++rank) {
    std::vector<int64_t> shape;
    forEachShape(rank, shape, [&](const std::vector<int64_t> &s) {
      int64_t total = 1;
      for (int64_t n : s)
        total *= n;
      for (int64_t threads : {32, 64, 128, 256}) {
        ++shapes;
        tilus::jit::ChunkSplit split = tilus::jit::chunkSplit(s, threads);
        // an independent search for the conditions at any dimension >= 2
        bool exists = false;
        int64_t suffix = 1;
        for (size_t k = rank; k-- > 2;) {
          suffix *= s[k];
          if (suffix <= threads && threads % suffix == 0 && s[k - 1] % (threads / suffix) == 0)
            exists = true;
        }
        if (split.dim == 0) {
          if (exists)
            ++bad;
          continue;
        }
        ++splits;
        if (split.dim < 2 || split.dim >= rank || total % threads != 0)
          ++bad;
        for (int64_t i = 0; i * threads < total; ++i) {
          std::vector<int64_t> step = tilus::jit::chunkStep(s, split, threads, i);
          if (step.size() != split.dim) {
            ++bad;
            continue;
          }
          for (int64_t t = 0; t < threads; ++t) {
            std::vector<int64_t> want = unravelIndex(t + i * threads, s);
            std::vector<int64_t> got = unravelIndex(t, s);
            for (size_t k = 0; k < split.dim; ++k)
              got[k] += step[k];
            if (got != want)
              ++bad;
          }
        }
      }
    });
  }
  CHECK(bad == 0);
  CHECK(splits > 1000); // the property was exercised, not vacuous
  MESSAGE(splits << " splits among " << shapes << " shapes and thread counts");
}

TEST_CASE("chunkSplit: the decode attention's 16-bit stage tiles split at their third dimension; "
          "shapes whose threads cover whole rows, or no trailing chunks divide T, do not split") {
  // [2, 2, 4, 1, 16] chunks (rows of 256 bytes, 16-byte chunks), 32 threads: the last two
  // dimensions hold 16 chunks (32 / 16 = 2 divides 4)
  tilus::jit::ChunkSplit a = tilus::jit::chunkSplit({2, 2, 4, 1, 16}, 32);
  CHECK(a.dim == 3);
  CHECK(a.inner == 16);
  // chunk t + 32: two more of dimension 2 (t's digit there is 0 or 1)
  CHECK(tilus::jit::chunkStep({2, 2, 4, 1, 16}, a, 32, 1) == std::vector<int64_t>{0, 0, 2});
  // chunk t + 64: the next of dimension 1
  CHECK(tilus::jit::chunkStep({2, 2, 4, 1, 16}, a, 32, 2) == std::vector<int64_t>{0, 1, 0});
  // [3, 5, 7]: no suffix of chunks divides 32
  CHECK(tilus::jit::chunkSplit({3, 5, 7}, 32).dim == 0);
  // [4, 4, 2, 8] with 128 threads: 8 * 2 = 16 divides 128 but 128 / 16 = 8 does not divide 4, and
  // 8 * 2 * 4 = 64 divides 128 but the leading dimension is outside the split's range (dim >= 2)
  CHECK(tilus::jit::chunkSplit({4, 4, 2, 8}, 128).dim == 0);
}
