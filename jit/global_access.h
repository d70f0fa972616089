// The lowering of a register tile's accesses to a global view, shared by LoadGlobal and
// StoreGlobal (plain accesses) and by AtomicLoad and AtomicStore of 32-bit elements (relaxed
// accesses at gpu scope; docs/isa.md, "AtomicLoad and AtomicStore"): slot (t, i) of the register
// layout addresses tile index S(t) + Loc(i); runs of consecutive slots along a unit-stride
// dimension are one vector access when in bounds and aligned, the element path otherwise;
// elements outside the view read 0 and are not written (lower_memory_global.cpp).
#pragma once

#include "jit/codegen.h"

namespace tilus::jit {

/// The register tile `r` loaded from the global view `g` at `offset` (LoadGlobal's `evict`
/// hint from `inst`); `relaxed`: every access `ld.relaxed.gpu` (AtomicLoad).
Status lowerLoadGlobal(Codegen &cg, const Instruction &inst, VarId r, VarId g,
                       const Argument &offset, bool relaxed);

/// The register tile `src` stored into the global view `g` at `offset`, each element once from
/// its primary owner, converted to g's type; `relaxed`: every access `st.relaxed.gpu`
/// (AtomicStore).
Status lowerStoreGlobal(Codegen &cg, const Instruction &inst, VarId src, VarId g,
                        const Argument &offset, bool relaxed);

} // namespace tilus::jit
