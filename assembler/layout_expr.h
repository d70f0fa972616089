// Layout expressions (ISA sections 3.1 and 3.2) in instruction arguments. Internal to the
// assembler; parseRegisterLayout in assembler/assembler.h is the public entry point.
#pragma once

#include "assembler/scalar_expr.h"
#include "isa/layout.h"
#include "isa/shared_layout.h"

namespace tilus::tasm {

/// A chain of local / column_local / spatial / column_spatial / replicate joined by `.`
/// (Kronecker product, left to right). Sizes are integer constant expressions.
Expected<RegisterLayout> buildRegisterLayout(const AstExpr &ast, const ExprContext &ctx);

/// row_major(..), column_major(..), strided([..], [..]), swizzle(L, bits, base, shift) and
/// tilings `A.B` (left-associative; `A.(B.C)` groups to the right).
Expected<SharedLayout> buildSharedLayout(const AstExpr &ast, const ExprContext &ctx);

} // namespace tilus::tasm
