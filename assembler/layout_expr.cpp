// Layout expressions in the assembly text. Register layouts are products of primitives,
//   local(2, 1).spatial(8, 4).local(1, 2)  =  (local(2,1) (x) spatial(8,4)) (x) local(1,2),
// and since the product is associative the chain is flattened and multiplied left to right
// with RegisterLayout::product; the result is canonical, so any spelling of a layout gives the
// same value. Shared layouts are trees (a tiling A.B keeps its two children), so their
// grouping is kept as written. Sizes are integer constant expressions (constants and
// arithmetic); errors from the layout algebra (non-positive sizes, rank mismatches, bad
// swizzles) keep their code (layout-invalid) and get the position of the offending call.
#include "assembler/layout_expr.h"

namespace tilus::tasm {

namespace {

Status relocate(const Status &s, const std::string &file, SrcPos at) {
  Status out;
  for (Diagnostic d : s.diagnostics()) {
    d.location = makeLocation(file, at);
    out.append(std::move(d));
  }
  return out;
}

Status argError(const ExprContext &ctx, SrcPos at, std::string message) {
  return Status::error(ErrorCode::BadArgument, std::move(message), makeLocation(ctx.fileName, at));
}

Status noKeywords(const AstExpr &call, const ExprContext &ctx) {
  for (const AstArg &a : call.args)
    if (!a.keyword.empty())
      return argError(ctx, a.pos, call.text + "() takes no keyword arguments");
  return Status::success();
}

Expected<std::vector<int64_t>> intArgs(const AstExpr &call, size_t first, size_t last,
                                       const ExprContext &ctx) {
  std::vector<int64_t> out;
  for (size_t k = first; k < last; ++k) {
    auto v = buildIntConstant(*call.args[k].value, ctx, ErrorCode::BadArgument,
                              "argument " + std::to_string(k + 1) + " of " + call.text + "()");
    if (!v)
      return v.takeStatus();
    out.push_back(*v);
  }
  return out;
}

Expected<std::vector<int64_t>> intList(const AstExpr &list, const ExprContext &ctx,
                                       const std::string &what) {
  if (list.kind != AstKind::List)
    return argError(ctx, list.pos, what + " must be a list of integers");
  std::vector<int64_t> out;
  for (const AstExprPtr &e : list.children) {
    auto v = buildIntConstant(*e, ctx, ErrorCode::BadArgument, "an entry of " + what);
    if (!v)
      return v.takeStatus();
    out.push_back(*v);
  }
  return out;
}

void flattenChain(const AstExpr &ast, std::vector<const AstExpr *> &out) {
  if (ast.kind == AstKind::Dot) {
    flattenChain(*ast.children[0], out);
    flattenChain(*ast.children[1], out);
    return;
  }
  out.push_back(&ast);
}

Expected<RegisterLayout> registerPrimitive(const AstExpr &call, const ExprContext &ctx) {
  static const char *kExpected =
      " (expected local, column_local, spatial, column_spatial or replicate)";
  if (call.kind != AstKind::Call) {
    if (call.kind == AstKind::Name)
      return argError(ctx, call.pos, "'" + call.text + "' is not a register layout" + kExpected);
    return argError(ctx, call.pos, std::string("expected a register layout") + kExpected);
  }
  TILUSVM_TRY(noKeywords(call, ctx));
  const std::string &f = call.text;
  bool known = f == "local" || f == "column_local" || f == "spatial" || f == "column_spatial" ||
               f == "replicate";
  if (!known)
    return argError(ctx, call.pos, "unknown register layout '" + f + "'" + kExpected);
  if (f == "replicate" && call.args.size() != 1)
    return argError(ctx, call.pos,
                    "replicate() takes 1 argument, got " + std::to_string(call.args.size()));
  auto n = intArgs(call, 0, call.args.size(), ctx);
  if (!n)
    return n.takeStatus();
  Expected<RegisterLayout> l = f == "local"            ? RegisterLayout::local(*n)
                               : f == "column_local"   ? RegisterLayout::columnLocal(*n)
                               : f == "spatial"        ? RegisterLayout::spatial(*n)
                               : f == "column_spatial" ? RegisterLayout::columnSpatial(*n)
                                                       : RegisterLayout::replicate((*n)[0]);
  if (!l)
    return relocate(l.status(), ctx.fileName, call.pos);
  return l;
}

} // namespace

Expected<RegisterLayout> buildRegisterLayout(const AstExpr &ast, const ExprContext &ctx) {
  std::vector<const AstExpr *> chain;
  flattenChain(ast, chain);
  auto acc = registerPrimitive(*chain[0], ctx);
  if (!acc)
    return acc;
  for (size_t k = 1; k < chain.size(); ++k) {
    auto next = registerPrimitive(*chain[k], ctx);
    if (!next)
      return next;
    auto prod = acc->product(*next);
    if (!prod)
      return relocate(prod.status(), ctx.fileName, chain[k]->pos);
    acc = std::move(prod);
  }
  return acc;
}

Expected<SharedLayout> buildSharedLayout(const AstExpr &ast, const ExprContext &ctx) {
  static const char *kExpected =
      " (expected row_major, column_major, strided, swizzle or a tiling A.B)";
  if (ast.kind == AstKind::Dot) {
    auto a = buildSharedLayout(*ast.children[0], ctx);
    if (!a)
      return a;
    auto b = buildSharedLayout(*ast.children[1], ctx);
    if (!b)
      return b;
    auto t = SharedLayout::tile(*a, *b);
    if (!t)
      return relocate(t.status(), ctx.fileName, ast.pos);
    return t;
  }
  if (ast.kind != AstKind::Call)
    return argError(ctx, ast.pos, std::string("expected a shared layout") + kExpected);
  TILUSVM_TRY(noKeywords(ast, ctx));
  const std::string &f = ast.text;
  Expected<SharedLayout> result = Status::error(ErrorCode::BadArgument, "unreachable");
  if (f == "row_major" || f == "column_major") {
    auto n = intArgs(ast, 0, ast.args.size(), ctx);
    if (!n)
      return n.takeStatus();
    result = f == "row_major" ? SharedLayout::rowMajor(*n) : SharedLayout::columnMajor(*n);
  } else if (f == "strided") {
    if (ast.args.size() != 2)
      return argError(ctx, ast.pos,
                      "strided() takes 2 arguments, got " + std::to_string(ast.args.size()));
    auto shape = intList(*ast.args[0].value, ctx, "the shape of strided()");
    if (!shape)
      return shape.takeStatus();
    auto strides = intList(*ast.args[1].value, ctx, "the strides of strided()");
    if (!strides)
      return strides.takeStatus();
    result = SharedLayout::strided(*shape, *strides);
  } else if (f == "swizzle") {
    if (ast.args.size() != 4)
      return argError(ctx, ast.pos,
                      "swizzle() takes 4 arguments, got " + std::to_string(ast.args.size()));
    auto inner = buildSharedLayout(*ast.args[0].value, ctx);
    if (!inner)
      return inner;
    auto p = intArgs(ast, 1, 4, ctx);
    if (!p)
      return p.takeStatus();
    result = SharedLayout::swizzle(*inner, (*p)[0], (*p)[1], (*p)[2]);
  } else {
    return argError(ctx, ast.pos, "unknown shared layout '" + f + "'" + kExpected);
  }
  if (!result)
    return relocate(result.status(), ctx.fileName, ast.pos);
  return result;
}

} // namespace tilus::tasm
