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

std::optional<RegisterLayout> wgmmaAFragment(int wgM, int64_t tilesM, int64_t ksteps,
                                             int elemBits) {
  if ((elemBits != 16 && elemBits != 8) || wgM < 1 || tilesM < 1 || ksteps < 1)
    return std::nullopt;
  using L = RegisterLayout;
  std::optional<RegisterLayout> want;
  for (const Expected<RegisterLayout> &part :
       {L::spatial({wgM, 1}), L::local({tilesM, ksteps}), L::spatial({4, 1}),
        L::columnLocal({2, 2}), L::spatial({8, 4}), L::local({1, 32 / elemBits})}) {
    if (!part.ok())
      return std::nullopt;
    if (!want) {
      want = *part;
      continue;
    }
    Expected<RegisterLayout> p = want->product(*part);
    if (!p.ok())
      return std::nullopt;
    want = std::move(p).value();
  }
  return want;
}

std::string wgmmaAFragmentText(int wgM, int64_t tilesM, int64_t ksteps, int elemBits) {
  std::string text;
  if (wgM != 1)
    text += "spatial(" + std::to_string(wgM) + ", 1).";
  if (tilesM != 1 || ksteps != 1)
    text += "local(" + std::to_string(tilesM) + ", " + std::to_string(ksteps) + ").";
  text += "spatial(4, 1).column_local(2, 2).spatial(8, 4).local(1, ";
  text += std::to_string(32 / elemBits);
  text += ")";
  return text;
}

} // namespace tilus
