// The wgmma fragment layouts (docs/isa.md, "Hopper instructions", Wgmma): the register layouts
// in which a block of `warpgroups` warpgroups can hold the [M, N] f32 accumulator of one Wgmma,
// shared by the checker (which accepts exactly these) and the assembler's layout inference
// (which picks one for an accumulator written without a layout); and the register layout of an
// A operand [M, K] held in registers (the PTX "register fragment for matrix A" of
// wgmma.m64nNk16 and m64nNk32).
#pragma once

#include "isa/layout.h"

#include <cstdint>
#include <optional>
#include <string>
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

/// The register layout of Wgmma's A operand [64 wgM tilesM, ksteps atomK] in registers, for
/// `wgM` warpgroups stacked along M (each holds its own rows) and elements of `elemBits` bits
/// (16: k16 atoms, 8: k32 atoms):
///   spatial(wgM, 1).local(tilesM, ksteps).spatial(4, 1).column_local(2, 2).spatial(8, 4)
///     .local(1, 32 / elemBits)
/// With e = 32 / elemBits elements per 32-bit register, thread t of warpgroup i holds at local
/// slot (r ksteps + s) 4e + j e + l element l of PTX register j (0..3) of the A fragment of atom
/// r, k step s: row 64 (i tilesM + r) + 16 (t / 32 % 4) + t % 32 / 4 + 8 (j % 2), column
/// s atomK + (j / 2) atomK / 2 + e (t % 4) + l (the lowest element in the register's low bits).
/// Empty for other element sizes or sizes below 1.
std::optional<RegisterLayout> wgmmaAFragment(int wgM, int64_t tilesM, int64_t ksteps, int elemBits);
/// Its text, as wgmmaAFragment's comment writes it (without the factors of size 1).
std::string wgmmaAFragmentText(int wgM, int64_t tilesM, int64_t ksteps, int elemBits);

} // namespace tilus
