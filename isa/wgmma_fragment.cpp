#include "isa/wgmma_fragment.h"

namespace tilus {

std::vector<WgmmaFragment> wgmmaFragments(int64_t m, int64_t n, int warpgroups) {
  std::vector<WgmmaFragment> out;
  for (int wgM = 1; wgM <= warpgroups; ++wgM) {
    if (warpgroups % wgM != 0)
      continue;
    int wgN = warpgroups / wgM;
    if (m % (64 * wgM) != 0 || n % wgN != 0)
      continue;
    int64_t tilesM = m / (64 * wgM), nt = n / wgN;
    if (nt % 8 != 0 || nt > kWgmmaMaxAtomN)
      continue;
    using L = RegisterLayout;
    std::optional<RegisterLayout> want;
    bool ok = true;
    for (const Expected<RegisterLayout> &part :
         {L::spatial({wgM, wgN}), L::local({tilesM, 1}), L::spatial({4, 1}), L::local({1, nt / 8}),
          L::local({2, 1}), L::spatial({8, 4}), L::local({1, 2})}) {
      if (!part.ok()) {
        ok = false;
        break;
      }
      if (!want) {
        want = *part;
        continue;
      }
      Expected<RegisterLayout> p = want->product(*part);
      if (!p.ok()) {
        ok = false;
        break;
      }
      want = std::move(p).value();
    }
    if (ok && want)
      out.push_back({wgM, wgN, tilesM, nt, std::move(*want)});
  }
  return out;
}

} // namespace tilus
