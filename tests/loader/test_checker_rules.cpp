// Checker rules of ISA section 6 on register computation, threads, grid, scopes, updates and
// diagnostics: one hand-written program per rule and case, with the expected code, line and
// derived types worked out by hand from ISA sections 3 and 5.
#include "check_test_util.h"
#include "test_helpers.h"

using namespace tilus;
using namespace tilus::testing;

namespace {
const char *kParams = "f32* p, f16* h, i32* ip, i4* q, f8e4m3* e, i32 n";
// x: [32, 4] f32, thread t holds row t.
const char *kLoadX = "    g = ViewGlobal(p, shape=[32, 4])\n"
                     "    x = LoadGlobal(g, layout=spatial(32, 1).local(1, 4))\n";
} // namespace

// --- threads and grid ---------------------------------------------------------------------

TEST_CASE("threads: explicit block sizes must be multiples of 32 in [32, 1024]") {
  for (int t : {16, 48, 1056, 2048}) {
    CAPTURE(t);
    expectError(kernel("", "    Synchronize()\n", t), ErrorCode::Threads, 1);
  }
  for (int t : {32, 96, 1024}) {
    CAPTURE(t);
    Expected<VerifiedModule> m = checkSource(kernel("", "    Synchronize()\n", t));
    REQUIRE_OK(m);
    CHECK(m->programs[0].threads == uint32_t(t));
  }
}

TEST_CASE("threads: inferred from the register layouts, which must agree") {
  Expected<VerifiedModule> m = checkSource("def k<1>(f32* p):\n"
                                           "    g = ViewGlobal(p, shape=[64])\n"
                                           "    x = LoadGlobal(g, layout=spatial(64))\n"
                                           "    y = Add(x, x)\n");
  REQUIRE_OK(m);
  CHECK(m->programs[0].threads == 64);
  expectError("def k<1>(f32* p):\n"
              "    g = ViewGlobal(p, shape=[64])\n"
              "    x = LoadGlobal(g, layout=spatial(64))\n"
              "    y = LoadGlobal(g, layout=spatial(32).local(2))\n",
              ErrorCode::LayoutThreads, 4);
  // A layout of 16 threads would make a block of 16: not allowed.
  expectError("def k<1>(f32* p):\n"
              "    g = ViewGlobal(p, shape=[16])\n"
              "    x = LoadGlobal(g, layout=spatial(16))\n",
              ErrorCode::Threads, 3);
  // No register layout at all: one warp.
  Expected<VerifiedModule> none = checkSource("def k<1>():\n    Synchronize()\n");
  REQUIRE_OK(none);
  CHECK(none->programs[0].threads == 32);
}

TEST_CASE("layout-threads: every layout has the block's thread count") {
  expectError(kernel(kParams, "    a = AllocateRegister(f32, layout=spatial(64))\n"),
              ErrorCode::LayoutThreads, 2);
  expectError(kernel(kParams, "    a = AllocateRegister(f32, layout=local(4))\n"),
              ErrorCode::LayoutThreads, 2);
  CHECK_OK(checkSource(
      kernel(kParams, "    a = AllocateRegister(f32, layout=local(4).replicate(32))\n")));
}

TEST_CASE("grid-expr: grid dimensions use constants and scalar parameters only") {
  CHECK_OK(checkSource("const B = 4\ndef k<cdiv(n, B), 2, n>(i32 n) threads=32:\n    pass\n"));
  expectError("def k<p>(f32* p) threads=32:\n    pass\n", ErrorCode::GridExpr);
  expectError("def k<x>(f32 x) threads=32:\n    pass\n", ErrorCode::DtypeMismatch);
}

// --- elementwise --------------------------------------------------------------------------

TEST_CASE("elementwise: operands, scalars, comparisons, Where, unary and math") {
  Expected<VerifiedModule> m =
      checkSource(kernel(kParams, std::string(kLoadX) + "    y = Add(x, 1.5)\n"
                                                        "    z = Mul(y, x)\n"
                                                        "    c = Lt(z, n)\n"
                                                        "    w = Where(c, z, 0.0)\n"
                                                        "    v = Exp(Neg(w))\n"
                                                        "    i = Cast(x, i32)\n"
                                                        "    j = Shl(And(i, 3), 1)\n"
                                                        "    b = Not(c)\n"));
  REQUIRE_OK(m);
  RegisterLayout lx = layoutOf("spatial(32, 1).local(1, 4)");
  const VarType &c = varType(*m, "k", "c");
  CHECK(c.dtype == DataType::boolean());
  CHECK(*c.layout == lx);
  CHECK(c.shape == std::vector<int64_t>{32, 4});
  CHECK(varType(*m, "k", "w").dtype == DataType::f32());
  CHECK(*varType(*m, "k", "v").layout == lx);
  CHECK(varType(*m, "k", "j").dtype == DataType::i32());
}

TEST_CASE("elementwise: broadcasting picks the operand with the result's shape") {
  std::string body = std::string(kLoadX) +
                     "    r = Reduce(x, dim=1, op=sum, keepdim=True)\n" // [32, 1]
                     "    s = Reduce(x, dim=0, op=max, keepdim=True)\n" // [1, 4]
                     "    d = Sub(r, x)\n";                             // [32, 4]
  Expected<VerifiedModule> m = checkSource(kernel(kParams, body));
  REQUIRE_OK(m);
  CHECK(*varType(*m, "k", "d").layout == layoutOf("spatial(32, 1).local(1, 4)"));
  CHECK(*varType(*m, "k", "r").layout == layoutOf("spatial(32, 1)"));
  CHECK(*varType(*m, "k", "s").layout == layoutOf("replicate(32).local(1, 4)"));
  // [32, 1] + [1, 4]: no operand has the result shape [32, 4].
  expectError(kernel(kParams, body + "    t = Add(r, s)\n"), ErrorCode::BadArgument, 7);
  // With layout=: every thread that holds t[m, n] holds r[m, 0] (row m) and s[0, n] (replicated).
  Expected<VerifiedModule> t =
      checkSource(kernel(kParams, body + "    t = Add(r, s, layout=spatial(32, 1).local(1, 4))\n"));
  REQUIRE_OK(t);
  CHECK(varType(*t, "k", "t").shape == std::vector<int64_t>{32, 4});
  // layout= of the wrong shape.
  expectError(kernel(kParams, body + "    t = Add(r, s, layout=spatial(32, 1).local(1, 2))\n"),
              ErrorCode::LayoutShape, 7);
}

TEST_CASE("elementwise: a rank-0 Reduce result broadcasts against any shape") {
  Expected<VerifiedModule> m =
      checkSource(kernel(kParams, "    a = AllocateRegister(f32, layout=spatial(32))\n"
                                  "    s = Reduce(a, dim=0, op=sum)\n"
                                  "    b = Sub(a, s)\n"
                                  "    c = Mul(s, 2.0)\n"));
  REQUIRE_OK(m);
  CHECK(varType(*m, "k", "s").shape.empty());
  CHECK(varType(*m, "k", "s").rank == 0);
  CHECK(varType(*m, "k", "b").shape == std::vector<int64_t>{32});
  CHECK(varType(*m, "k", "c").shape.empty());
  // `replicate(32)` written as a tensor layout is that rank-0 layout.
  Expected<VerifiedModule> r =
      checkSource(kernel(kParams, "    a = AllocateRegister(f32, layout=spatial(32))\n"
                                  "    s = Reduce(a, dim=0, op=sum, layout=replicate(32))\n"
                                  "    t = AllocateRegister(f32, layout=replicate(32))\n"
                                  "    u = Add(s, t)\n"
                                  "    Add(s, t, out=s)\n"));
  REQUIRE_OK(r);
  CHECK(*varType(*r, "k", "t").layout == *varType(*r, "k", "s").layout);
}

TEST_CASE("layout-mismatch: operand owners must cover the result") {
  // y [32, 4] in spatial(8, 4).local(4, 1): thread t holds y[4(t/4) + i, t % 4], not row t.
  expectError(kernel(kParams, std::string(kLoadX) +
                                  "    y = LoadGlobal(g, layout=spatial(8, 4).local(4, 1))\n"
                                  "    z = Add(x, y)\n"),
              ErrorCode::LayoutMismatch, 5);
  // Broadcast operand s [32, 1]: threads 0-15 hold rows 0, 2, .., 30, threads 16-31 rows
  // 1, 3, .., 31, so thread 1 holds x[1, :] but not s[1, 0].
  expectError(
      kernel(kParams,
             std::string(kLoadX) +
                 "    s = AllocateRegister(f32, layout=local(16, 1).spatial(2, 1).replicate(16))\n"
                 "    z = Add(x, s)\n"),
      ErrorCode::LayoutMismatch, 5);
  // Fully replicated s is held by every thread.
  CHECK_OK(checkSource(
      kernel(kParams, std::string(kLoadX) +
                          "    s = AllocateRegister(f32, layout=local(32, 1).replicate(32))\n"
                          "    z = Add(x, s)\n")));
}

TEST_CASE("elementwise dtype rules") {
  std::string i4 = "    gq = ViewGlobal(q, shape=[32])\n"
                   "    a = LoadGlobal(gq, layout=spatial(32))\n";
  expectError(kernel(kParams, i4 + "    b = Add(a, a)\n"), ErrorCode::SubbyteArith, 4);
  expectError(kernel(kParams, i4 + "    b = Lt(a, 1)\n"), ErrorCode::SubbyteArith, 4);
  CHECK_OK(checkSource(kernel(kParams, i4 + "    b = Add(Cast(a, f16), 1)\n")));
  std::string f8 = "    ge = ViewGlobal(e, shape=[32])\n"
                   "    a = LoadGlobal(ge, layout=spatial(32))\n";
  expectError(kernel(kParams, f8 + "    b = Exp(a)\n"), ErrorCode::SubbyteArith, 4);
  expectError(kernel(kParams, f8 + "    b = Mul(a, 2)\n"), ErrorCode::SubbyteArith, 4);
  // Bitwise operators on floats, math on integers.
  expectError(kernel(kParams, std::string(kLoadX) + "    b = And(x, x)\n"),
              ErrorCode::DtypeMismatch, 4);
  expectError(kernel(kParams, std::string(kLoadX) + "    b = Not(x)\n"), ErrorCode::DtypeMismatch,
              4);
  expectError(kernel(kParams, std::string(kLoadX) + "    b = Exp(Cast(x, i32))\n"),
              ErrorCode::DtypeMismatch, 4);
  // Operand dtypes must agree.
  expectError(kernel(kParams, std::string(kLoadX) + "    b = Add(x, Cast(x, f16))\n"),
              ErrorCode::DtypeMismatch, 4);
  // Where: the condition is bool or an integer.
  expectError(kernel(kParams, std::string(kLoadX) + "    b = Where(x, x, 0.0)\n"),
              ErrorCode::DtypeMismatch, 4);
}

TEST_CASE("elementwise shapes, scopes and operands") {
  std::string two =
      std::string(kLoadX) + "    y = LoadGlobal(g, layout=spatial(32, 1).local(1, 2))\n";
  expectError(kernel(kParams, two + "    z = Add(x, y)\n"), ErrorCode::ShapeMismatch, 5);
  expectError(kernel(kParams, "    s = AllocateShared(f32, shape=[32])\n"
                              "    z = Add(s, 1.0)\n"),
              ErrorCode::Scope, 3);
  expectError(kernel(kParams, "    z = Add(1, 2)\n"), ErrorCode::BadArgument, 2);
}

TEST_CASE("out=: same dtype and shape, and the target's owners cover the computed value") {
  CHECK_OK(checkSource(kernel(kParams, std::string(kLoadX) + "    Add(x, 1.0, out=x)\n")));
  expectError(
      kernel(kParams, std::string(kLoadX) +
                          "    t = AllocateRegister(f16, layout=spatial(32, 1).local(1, 4))\n"
                          "    Add(x, x, out=t)\n"),
      ErrorCode::DtypeMismatch, 5);
  expectError(
      kernel(kParams, std::string(kLoadX) +
                          "    t = AllocateRegister(f32, layout=spatial(32, 1).local(1, 2))\n"
                          "    Add(x, x, out=t)\n"),
      ErrorCode::ShapeMismatch, 5);
  // a is held by every thread; t[e] by threads 16e..16e+15, which all hold a[e]: fine.
  // The other way round thread 0 holds a[1] but not t[1].
  std::string body = "    a = AllocateRegister(f32, layout=local(2).replicate(32))\n"
                     "    t = AllocateRegister(f32, layout=spatial(2).replicate(16))\n";
  CHECK_OK(checkSource(kernel(kParams, body + "    Cast(a, f32, out=t)\n")));
  expectError(kernel(kParams, body + "    Cast(t, f32, out=a)\n"), ErrorCode::LayoutMismatch, 4);
  expectError(kernel(kParams, body + "    Add(t, 1.0, out=a)\n"), ErrorCode::LayoutMismatch, 4);
}

// --- conversions --------------------------------------------------------------------------

TEST_CASE("View: bits per thread stay, no replicated layouts") {
  std::string b6 = "    g6 = ViewGlobal(q, dtype=i6, shape=[16, 8])\n"
                   "    b = LoadGlobal(g6, layout=local(2, 1).column_spatial(4, 8).local(2, 1))\n";
  Expected<VerifiedModule> m =
      checkSource(kernel(kParams, b6 + "    u = View(b, dtype=u8, layout=local(3).spatial(32))\n"));
  REQUIRE_OK(m);
  const VarType &u = varType(*m, "k", "u");
  CHECK(u.dtype == DataType::u(8));
  CHECK(u.shape == std::vector<int64_t>{96});
  // 4 x i6 = 24 bits per thread, 2 x u8 = 16.
  Expected<VerifiedModule> bad =
      checkSource(kernel(kParams, b6 + "    u = View(b, dtype=u8, layout=local(2).spatial(32))\n"));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == ErrorCode::ViewBits);
  CHECK(bad.status().first().message.find("from 24 to 16") != std::string::npos);
  // Replicas must stay replicas: all 32 threads hold the same two elements, but as
  // spatial(32).local(2) they would hold different ones.
  expectError(kernel(kParams, "    a = AllocateRegister(f32, layout=local(2).replicate(32))\n"
                              "    b = View(a, layout=spatial(32).local(2))\n"),
              ErrorCode::ViewReplicated, 3);
  // The same replication on both sides: allowed (each class of replicas reinterprets the same
  // bits), also with the replicas in another position of the thread index.
  CHECK_OK(
      checkSource(kernel(kParams, "    a = AllocateRegister(f32, layout=local(2).replicate(32))\n"
                                  "    b = View(a, dtype=i32)\n")));
  CHECK_OK(
      checkSource("def k<1>() threads=64:\n"
                  "    a = AllocateRegister(f32, layout=replicate(2).spatial(32).local(2))\n"
                  "    b = View(a, dtype=f16, layout=replicate(2).spatial(32, 1).local(2, 2))\n"
                  "    c = AllocateRegister(f16, layout=spatial(32).replicate(2).local(4))\n"
                  "    d = View(c, dtype=u32, layout=spatial(32).replicate(2).local(2))\n"));
  // Replicas in different positions: threads 0 and 1 are replicas before, 0 and 32 after.
  Expected<VerifiedModule> moved =
      checkSource("def k<1>() threads=64:\n"
                  "    a = AllocateRegister(f32, layout=spatial(32).replicate(2).local(2))\n"
                  "    b = View(a, layout=replicate(2).spatial(32).local(2))\n");
  REQUIRE_FALSE(moved.ok());
  CHECK(moved.status().code() == ErrorCode::ViewReplicated);
  CHECK(moved.status().first().message.find("replicates thread 0 in thread 1") !=
        std::string::npos);
  expectError(kernel(kParams, "    a = AllocateRegister(f32, layout=spatial(32).local(2))\n"
                              "    b = View(a, layout=local(2).replicate(32))\n"),
              ErrorCode::ViewReplicated, 3);
  // Same bits, different shape and dtype: allowed.
  Expected<VerifiedModule> ok = checkSource(
      kernel(kParams, "    a = AllocateRegister(f32, layout=spatial(32).local(2))\n"
                      "    b = View(a, dtype=f16, layout=spatial(32, 1).local(2, 2))\n"));
  REQUIRE_OK(ok);
  CHECK(varType(*ok, "k", "b").shape == std::vector<int64_t>{64, 2});
}

TEST_CASE("Permute transposes the layout; ConvertLayout keeps the shape") {
  Expected<VerifiedModule> m = checkSource(
      kernel(kParams, std::string(kLoadX) +
                          "    y = Permute(x, dims=[1, 0])\n"
                          "    z = ConvertLayout(x, layout=spatial(8, 4).local(4, 1))\n"));
  REQUIRE_OK(m);
  const VarType &y = varType(*m, "k", "y");
  CHECK(y.shape == std::vector<int64_t>{4, 32});
  // y[i, t] is held by thread t at local i.
  CHECK(*y.layout == layoutOf("local(4, 1).spatial(1, 32)"));
  CHECK(*varType(*m, "k", "z").layout == layoutOf("spatial(8, 4).local(4, 1)"));
  // ConvertLayout scratch: 32 * 4 f32 (elements change threads).
  CHECK(m->programs[0].scratchBytes == 512);
  // a conversion in which every thread keeps its own elements (only their slot order changes)
  // renames registers: no scratch area
  Expected<VerifiedModule> local = checkSource(
      kernel(kParams, "    g = ViewGlobal(p, shape=[64, 4])\n"
                      "    x = LoadGlobal(g, layout=spatial(32, 1).local(2, 4))\n"
                      "    z = ConvertLayout(x, layout=spatial(32, 1).column_local(2, 4))\n"));
  REQUIRE_OK(local);
  CHECK(local->programs[0].scratchBytes == 0);
  expectError(kernel(kParams, std::string(kLoadX) + "    y = Permute(x, dims=[0, 0])\n"),
              ErrorCode::BadArgument, 4);
  expectError(kernel(kParams, std::string(kLoadX) + "    y = Permute(x, dims=[0])\n"),
              ErrorCode::BadArgument, 4);
  expectError(kernel(kParams, std::string(kLoadX) +
                                  "    y = ConvertLayout(x, layout=spatial(32).local(4))\n"),
              ErrorCode::LayoutShape, 4);
}

TEST_CASE("Reduce: dimension, dtype, derived layout") {
  Expected<VerifiedModule> m = checkSource(
      kernel(kParams,
             "    g = ViewGlobal(p, shape=[4, 128])\n"
             "    x = LoadGlobal(g, layout=spatial(4, 32).local(1, 4))\n"
             "    a = Reduce(x, dim=1, op=max)\n"
             "    b = Reduce(x, dim=1, op=sum, keepdim=True, layout=spatial(4, 1).replicate(32))\n",
             128));
  REQUIRE_OK(m);
  // ISA section 5's example.
  CHECK(*varType(*m, "k", "a").layout == layoutOf("spatial(4).replicate(32)"));
  CHECK(varType(*m, "k", "a").shape == std::vector<int64_t>{4});
  CHECK(varType(*m, "k", "b").shape == std::vector<int64_t>{4, 1});
  // the reduced thread modes (32 lanes) stay within a warp: shuffles, no scratch area
  CHECK(m->programs[0].scratchBytes == 0);
  Expected<VerifiedModule> across =
      checkSource(kernel(kParams,
                         "    g = ViewGlobal(p, shape=[4, 128])\n"
                         "    x = LoadGlobal(g, layout=spatial(4, 32).local(1, 4))\n"
                         "    a = Reduce(x, dim=0, op=max)\n",
                         128));
  REQUIRE_OK(across);
  // dimension 0's thread mode has stride 32: across warps, through the scratch area
  CHECK(across->programs[0].scratchBytes == 4 * 128 * 8);
  expectError(kernel(kParams, std::string(kLoadX) + "    r = Reduce(x, dim=2, op=sum)\n"),
              ErrorCode::ReduceDim, 4);
  // Derived: spatial(32, 1) (the local mode of dimension 1 is dropped).
  CHECK_OK(checkSource(kernel(
      kParams, std::string(kLoadX) +
                   "    r = Reduce(x, dim=1, op=sum, keepdim=True, layout=spatial(32, 1))\n")));
  expectError(kernel(kParams, std::string(kLoadX) +
                                  "    r = Reduce(x, dim=1, op=sum, keepdim=True, "
                                  "layout=local(32, 1).replicate(32))\n"),
              ErrorCode::LayoutMismatch, 4);
  expectError(kernel(kParams, std::string(kLoadX) +
                                  "    r = Reduce(x, dim=1, op=sum, layout=spatial(32, 1))\n"),
              ErrorCode::LayoutShape, 4);
  expectError(kernel(kParams, std::string(kLoadX) + "    r = Reduce(x, dim=0, op=any)\n"),
              ErrorCode::DtypeMismatch, 4);
  expectError(kernel(kParams, "    gq = ViewGlobal(q, shape=[32])\n"
                              "    a = LoadGlobal(gq, layout=spatial(32))\n"
                              "    r = Reduce(a, dim=0, op=sum)\n"),
              ErrorCode::SubbyteArith, 4);
  CHECK_OK(checkSource(
      kernel(kParams, std::string(kLoadX) + "    r = Reduce(Gt(x, 0.0), dim=0, op=any)\n")));
}

// --- creation -----------------------------------------------------------------------------

TEST_CASE("AllocateRegister and Iota") {
  Expected<VerifiedModule> m = checkSource(kernel(
      kParams,
      "    a = AllocateRegister(f16, layout=spatial(8, 4).local(1, 2), shape=[8, 8], init=1.5)\n"
      "    i = Iota(layout=spatial(8, 4).local(1, 2), dim=1)\n"
      "    j = Iota(layout=spatial(8, 4).local(1, 2), dim=0, dtype=f32)\n"));
  REQUIRE_OK(m);
  CHECK(varType(*m, "k", "a").shape == std::vector<int64_t>{8, 8});
  CHECK(varType(*m, "k", "a").dtype == DataType::f16());
  CHECK(varType(*m, "k", "i").dtype == DataType::i32());
  CHECK(varType(*m, "k", "j").dtype == DataType::f32());
  expectError(
      kernel(kParams,
             "    a = AllocateRegister(f16, layout=spatial(8, 4).local(1, 2), shape=[8, 4])\n"),
      ErrorCode::LayoutShape, 2);
  expectError(kernel(kParams, "    i = Iota(layout=spatial(8, 4), dim=2)\n"),
              ErrorCode::BadArgument, 2);
  expectError(kernel(kParams, "    i = Iota(layout=spatial(8, 4), dim=0, dtype=bool)\n"),
              ErrorCode::DtypeMismatch, 2);
  expectError(kernel(kParams, "    a = AllocateRegister(f32, layout=local(0).spatial(32))\n"),
              ErrorCode::LayoutInvalid, 2);
}

TEST_CASE("BlockIndices gives at most one index per grid dimension") {
  Expected<VerifiedModule> m =
      checkSource("def k<2, 3>() threads=32:\n    bx, by = BlockIndices()\n");
  REQUIRE_OK(m);
  CHECK(varType(*m, "k", "by").dtype == DataType::i32());
  expectError("def k<2>() threads=32:\n    bx, by = BlockIndices()\n", ErrorCode::BadArgument, 2);
}

TEST_CASE("Print takes scalars, register and shared tensors") {
  CHECK_OK(checkSource(kernel(kParams, std::string(kLoadX) +
                                           "    s = AllocateShared(f32, shape=[4])\n"
                                           "    Print(x)\n    Print(n, \"n\")\n    Print(s)\n")));
  expectError(kernel(kParams, std::string(kLoadX) + "    Print(g)\n"), ErrorCode::Scope, 4);
}

// --- scalars, control flow, updates -------------------------------------------------------

TEST_CASE("conditions are bool or integers; ranges are integers") {
  CHECK_OK(checkSource(kernel(kParams, "    if n:\n        pass\n"
                                       "    while n < 3:\n        break\n"
                                       "    for i in range(n, 10, 2):\n        continue\n")));
  expectError(kernel(kParams, "    x = 1.5 * n\n    if x:\n        pass\n"),
              ErrorCode::DtypeMismatch, 3);
  expectError(kernel(kParams, "    x = 1.5 * n\n    while x:\n        break\n"),
              ErrorCode::DtypeMismatch, 3);
  expectError(kernel(kParams, "    x = 1.5 * n\n    for i in range(x):\n        pass\n"),
              ErrorCode::DtypeMismatch, 3);
}

TEST_CASE("break and continue only inside loops") {
  expectError(kernel(kParams, "    break\n"), ErrorCode::BreakOutsideLoop, 2);
  expectError(kernel(kParams, "    if n:\n        continue\n"), ErrorCode::BreakOutsideLoop, 3);
}

TEST_CASE("update-type: an update keeps dtype, shape and layout") {
  std::string acc = "    acc = AllocateRegister(f32, layout=spatial(32))\n"
                    "    for i in range(4):\n";
  CHECK_OK(checkSource(kernel(kParams, acc + "        acc = Add(acc, 1.0)\n")));
  expectError(
      kernel(kParams,
             acc +
                 "        acc = AllocateRegister(f32, layout=local(2).spatial(16).replicate(2))\n"),
      ErrorCode::UpdateType, 4);
  expectError(kernel(kParams, acc + "        acc = Cast(acc, f16)\n"), ErrorCode::UpdateType, 4);
  expectError(
      kernel(kParams, acc + "        acc = AllocateRegister(f32, layout=spatial(32).local(2))\n"),
      ErrorCode::UpdateType, 4);
  expectError(kernel(kParams, "    s = 0\n    for i in range(4):\n        s = 1.5\n"),
              ErrorCode::UpdateType, 4);
  // Re-assigning in the same scope declares a new variable: the type may change.
  Expected<VerifiedModule> m =
      checkSource(kernel(kParams, "    acc = AllocateRegister(f32, layout=spatial(32))\n"
                                  "    acc = Cast(acc, f16)\n"));
  REQUIRE_OK(m);
  CHECK(varType(*m, "k", "acc").dtype == DataType::f16());
}

// --- diagnostics --------------------------------------------------------------------------

namespace {
const char *kTwoErrors = "def k<1>() threads=32:\n"
                         "    x = AllocateRegister(f32, layout=spatial(32))\n"
                         "    y = AllocateRegister(f16, layout=spatial(32))\n"
                         "    z = Add(x, y)\n"  // dtype-mismatch
                         "    w = Mul(z, z)\n"  // z is poisoned: no second diagnostic
                         "    v = Sub(x, y)\n"; // dtype-mismatch again
}

TEST_CASE("diagnostics: every error, ordered, located, without cascades") {
  Expected<VerifiedModule> r = checkSource(kTwoErrors);
  REQUIRE_FALSE(r.ok());
  const std::vector<Diagnostic> &d = r.status().diagnostics();
  REQUIRE(d.size() == 2);
  CHECK(d[0].code == ErrorCode::DtypeMismatch);
  CHECK(d[0].location.line == 4);
  CHECK(d[1].location.line == 6);
  CHECK(d[0].location.file == kTestFile);
  CHECK(d[0].location.column >= 1);
  std::string text = d[0].toString();
  CHECK(text.rfind("test.tasm:4:", 0) == 0);
  CHECK(text.find("error[dtype-mismatch]: ") != std::string::npos);
  CHECK(text.find("f32") != std::string::npos);
  CHECK(text.find("f16") != std::string::npos);
}

TEST_CASE("diagnostics without debug info point at <bytecode>:PROGRAM:INSTRUCTION") {
  AssembleOptions ao;
  Expected<Module> mod = assemble(kTwoErrors, ao);
  REQUIRE_OK(mod);
  Module module = std::move(mod).value();
  for (Instruction &inst : module.programs[0].instructions)
    inst.loc = SourceLoc{};
  for (Stmt &s : module.programs[0].body)
    s.loc = SourceLoc{};
  Expected<VerifiedModule> r = checkModule(std::move(module));
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.status().diagnostics().size() == 2);
  // Instructions in order: x 0, y 1, z 2, w 3, v 4.
  CHECK(r.status().diagnostics()[0].location.toString() == "<bytecode>:k:2 (Add)");
  CHECK(r.status().diagnostics()[1].location.toString() == "<bytecode>:k:4 (Sub)");
}

TEST_CASE("undefined-name: a variable outside the scope of its definition") {
  expectError(kernel(kParams, "    for i in range(2):\n"
                              "        y = AllocateRegister(f32, layout=spatial(32))\n"
                              "    z = Add(y, 1.0)\n"),
              ErrorCode::UndefinedName, 4);
}

TEST_CASE("cluster: a size out of range from bytecode is one diagnostic, not one per operand") {
  // The assembler refuses such a header; bytecode can carry any size. The mask and rank
  // operands are then checked for their type only (a mask range of 2^cluster - 1 was a shift
  // by 256 before), so the header's diagnostic is the only one.
  std::string source = readText(std::string(TILUSVM_CONFORMANCE_DIR) + "/ok_cluster.tasm");
  for (uint32_t size : {0u, 9u, 64u, 256u, 4000000000u}) {
    CAPTURE(size);
    AssembleOptions ao;
    Expected<Module> mod = assemble(source, ao);
    REQUIRE_OK(mod);
    Module module = std::move(mod).value();
    for (Program &p : module.programs)
      p.cluster = size;
    const size_t programs = module.programs.size();
    Expected<VerifiedModule> r = checkModule(std::move(module));
    REQUIRE_FALSE(r.ok());
    // one per program: the header's
    REQUIRE(r.status().diagnostics().size() == programs);
    for (const Diagnostic &d : r.status().diagnostics()) {
      CHECK(d.code == ErrorCode::Cluster);
      CHECK(d.message.find("is not in [1, 8]") != std::string::npos);
    }
  }
}
