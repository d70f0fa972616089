// The wgmma accumulator fragment layouts (docs/isa.md, "Hopper instructions", Wgmma): the
// register layouts in which a block of `warpgroups` warpgroups can hold the [M, N] f32
// accumulator of one Wgmma. Shared by the checker (which accepts exactly these) and the
// assembler's layout inference (which picks one for an accumulator written without a layout).
#pragma once

#include "isa/layout.h"

#include <cstdint>
#include <vector>

namespace tilus {

struct WgmmaFragment {
  int wgM = 1, wgN = 1;  // the grid of warpgroups over [M, N]
  int64_t tilesM = 1;    // m64 atoms along M per warpgroup
  int64_t n = 8;         // N of one atom (the warpgroup's columns)
  RegisterLayout layout; // spatial(wgM, wgN).local(tilesM, 1).spatial(4, 1).local(1, n / 8)
                         //   .local(2, 1).spatial(8, 4).local(1, 2)
};

/// The largest N of one wgmma atom.
constexpr int64_t kWgmmaMaxAtomN = 256;

/// Every fragment layout of an [m, n] accumulator over `warpgroups` warpgroups, by increasing
/// wgM (warpgroups along M); empty when the shape splits into no m64 atoms with N per
/// warpgroup a multiple of 8 up to 256.
std::vector<WgmmaFragment> wgmmaFragments(int64_t m, int64_t n, int warpgroups);

} // namespace tilus
