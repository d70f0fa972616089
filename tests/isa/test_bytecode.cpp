// The bytecode format (docs/bytecode.md) against independent references: files written byte by
// byte in this test from the document (with a separately written LEB128 writer and XXH3 from
// xxhash.h directly), a field-by-field comparison of modules, and whole-domain corruption
// sweeps (every truncation, every bit flip, overwritten and appended bytes) on a module that
// uses every argument kind and every statement kind. A global operator new records the largest
// single allocation so that hostile counts can be shown not to allocate.
#include "isa/bytecode.h"
#include "tests/test_helpers.h"

#include <doctest/doctest.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <new>
#include <string>

// ---------------------------------------------------------------------------------------------
// Allocation probe: the largest single allocation while `gTrack` is set. (GCC flags free() in
// a replaced operator delete once it is inlined next to a new-expression; that pairing is the
// point of the replacement.)

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace {
thread_local bool gTrack = false;
thread_local size_t gLargest = 0;
} // namespace

void *operator new(size_t n) {
  if (gTrack && n > gLargest)
    gLargest = n;
  if (void *p = std::malloc(n ? n : 1))
    return p;
  throw std::bad_alloc();
}
void operator delete(void *p) noexcept { std::free(p); }
void operator delete(void *p, size_t) noexcept { std::free(p); }

using namespace tilus;

namespace {

// ---------------------------------------------------------------------------------------------
// Hand-written bytes, following docs/bytecode.md (independent of isa/bytecode_io.cpp).

struct Bytes {
  std::vector<uint8_t> v;
  Bytes &u8(uint8_t b) {
    v.push_back(b);
    return *this;
  }
  Bytes &uleb(uint64_t x) {
    while (x >= 0x80) {
      v.push_back(uint8_t(x | 0x80));
      x >>= 7;
    }
    v.push_back(uint8_t(x));
    return *this;
  }
  Bytes &sleb(int64_t x) { return uleb(x >= 0 ? uint64_t(x) * 2 : uint64_t(-(x + 1)) * 2 + 1); }
  Bytes &str(std::string_view s) {
    uleb(s.size());
    v.insert(v.end(), s.begin(), s.end());
    return *this;
  }
  Bytes &dtype(uint8_t kind, uint8_t bits, uint8_t e = 0, uint8_t m = 0) {
    return u8(kind).u8(bits).u8(e).u8(m);
  }
  Bytes &i32() { return dtype(1, 32); }
  Bytes &add(const Bytes &b) {
    v.insert(v.end(), b.v.begin(), b.v.end());
    return *this;
  }
  Bytes &section(uint8_t id, const Bytes &payload) {
    return u8(id).uleb(payload.v.size()).add(payload);
  }
};

const std::string kProducer = "tilusvm " TILUSVM_VERSION;

uint64_t readLe(const std::vector<uint8_t> &b, size_t at, int n) {
  uint64_t x = 0;
  for (int i = 0; i < n; ++i)
    x |= uint64_t(b[at + i]) << (8 * i);
  return x;
}

void writeLe(std::vector<uint8_t> &b, size_t at, uint64_t x, int n) {
  for (int i = 0; i < n; ++i)
    b[at + i] = uint8_t(x >> (8 * i));
}

/// Rewrite total length (offset 16) and hash (offset 24) to match the contents.
std::vector<uint8_t> seal(std::vector<uint8_t> file) {
  REQUIRE(file.size() >= 32);
  writeLe(file, 16, file.size(), 8);
  writeLe(file, 24, XXH3_64bits(file.data() + 32, file.size() - 32), 8);
  return file;
}

/// A whole file: header, producer, programs and (when given) debug sections.
std::vector<uint8_t> makeFile(const Bytes &programs, const Bytes *debug = nullptr,
                              const std::string &producer = kProducer) {
  Bytes f;
  f.u8('T').u8('L').u8('B').u8('C');
  f.u8(1).u8(0).u8(0).u8(0);             // format version 1
  f.u8(debug ? 1 : 0).u8(0).u8(0).u8(0); // flags
  f.u8(0).u8(0).u8(0).u8(0);             // reserved
  for (int i = 0; i < 16; ++i)           // total length, hash: sealed below
    f.u8(0);
  f.section(1, Bytes().str(producer));
  f.section(2, programs);
  if (debug)
    f.section(3, *debug);
  return seal(f.v);
}

// The opcodes of the table rows used below (docs/bytecode.md, "Opcodes").
constexpr uint8_t kOpBlockIndices = 0, kOpAllocateRegister = 1, kOpSynchronize = 53;

/// Program "p": i32 parameter n, grid [1], threads 32, body: Synchronize().
Bytes tinyProgram() {
  Bytes p;
  p.str("p").uleb(32);
  p.uleb(1).str("n").u8(1).u8(1).i32();         // variables: n, Scalar, param, i32
  p.uleb(1).u8(0).i32().uleb(1);                // expressions: 0 = const i32 1
  p.uleb(1).uleb(0);                            // grid: [expr 0]
  p.uleb(1).uleb(kOpSynchronize).uleb(0).u8(0); // Synchronize: 0 results, no out, no args
  p.uleb(1).u8(0).uleb(0);                      // body: [instruction 0]
  return p;
}

Bytes programsOf(std::initializer_list<Bytes> programs) {
  Bytes b;
  b.uleb(programs.size());
  for (const Bytes &p : programs)
    b.add(p);
  return b;
}

// ---------------------------------------------------------------------------------------------
// Modules built by hand.

template <typename T> T must(Expected<T> e) {
  INFO(e.status().toString());
  REQUIRE(e.ok());
  return std::move(e).value();
}

RegisterLayout chain(std::initializer_list<Expected<RegisterLayout>> parts) {
  RegisterLayout l;
  bool first = true;
  for (const Expected<RegisterLayout> &p : parts) {
    RegisterLayout part = must(Expected<RegisterLayout>(p));
    l = first ? part : must(l.product(part));
    first = false;
  }
  return l;
}

struct ProgramBuilder {
  Program p;

  VarId var(const std::string &name, VarKind kind, DataType t = DataType::i32(),
            bool param = false) {
    p.vars.push_back(Variable{name, kind, t, param});
    if (param)
      p.params.push_back(VarId(p.vars.size() - 1));
    return VarId(p.vars.size() - 1);
  }
  ExprId node(ExprNode e) {
    p.exprs.push_back(e);
    return ExprId(p.exprs.size() - 1);
  }
  ExprId cnst(DataType t, uint64_t bits) {
    ExprNode e;
    e.op = ExprOp::Const;
    e.dtype = t;
    e.bits = bits;
    return node(e);
  }
  ExprId ref(VarId v) {
    ExprNode e;
    e.op = ExprOp::Var;
    e.dtype = p.vars[v].dtype;
    e.var = v;
    return node(e);
  }
  ExprId op(ExprOp o, DataType t, std::initializer_list<ExprId> operands) {
    ExprNode e;
    e.op = o;
    e.dtype = t;
    int k = 0;
    for (ExprId id : operands)
      e.operands[k++] = id;
    return node(e);
  }
  uint32_t inst(Opcode opc, std::vector<VarId> results, SourceLoc loc = {}) {
    Instruction i;
    i.opcode = opc;
    i.results = std::move(results);
    i.args.resize(instructionSpec(opc).args.size());
    i.loc = loc;
    p.instructions.push_back(std::move(i));
    return uint32_t(p.instructions.size() - 1);
  }
  Argument &arg(uint32_t inst, ArgName name) {
    Argument &a = p.instructions[inst].arg(name);
    a.present = true;
    return a;
  }
};

Stmt instStmt(uint32_t index, SourceLoc loc = {}) {
  Stmt s;
  s.kind = StmtKind::Instruction;
  s.index = index;
  s.loc = loc;
  return s;
}

Stmt simpleStmt(StmtKind kind, SourceLoc loc = {}) {
  Stmt s;
  s.kind = kind;
  s.loc = loc;
  return s;
}

/// "kernel": every ArgKind (Value as variable and as expression, Expr, Int, Bool, DType,
/// RegLayout ranked and unranked, SharedLayout with tile and swizzle, IntList with negative
/// entries, ExprList, Offset, ReduceOp, String with non-ASCII text), out=, every statement kind.
Program kernelProgram() {
  ProgramBuilder b;
  const DataType i32 = DataType::i32(), f32 = DataType::f32(), i64 = DataType::i64();
  const DataType boolean = DataType::boolean();
  VarId m = b.var("m", VarKind::Scalar, i32, true);
  VarId aPtr = b.var("a_ptr", VarKind::Pointer, DataType::f16(), true);
  b.var("b_ptr", VarKind::Pointer, DataType::u(8), true);
  VarId bi = b.var("bi", VarKind::Scalar), bj = b.var("bj", VarKind::Scalar);
  VarId ga = b.var("ga", VarKind::Global), s = b.var("s", VarKind::Shared);
  VarId acc = b.var("acc", VarKind::Register), x = b.var("x", VarKind::Register);
  VarId r = b.var("r", VarKind::Register), i = b.var("i", VarKind::Scalar);
  VarId k = b.var("k", VarKind::Scalar, i64), v = b.var("_t0", VarKind::Register);
  VarId w = b.var("w", VarKind::Register);

  b.p.name = "kernel";
  b.p.threads = 32;
  b.p.loc = {3, 1};
  b.p.grid = {b.op(ExprOp::CeilDiv, i32, {b.ref(m), b.cnst(i32, 16)}), b.cnst(i32, 4)};
  const RegisterLayout cFrag =
      chain({RegisterLayout::local({2, 1}), RegisterLayout::spatial({8, 4}),
             RegisterLayout::local({1, 2})});

  uint32_t n0 = b.inst(Opcode::BlockIndices, {bi, bj}, {4, 5});
  uint32_t n1 = b.inst(Opcode::ViewGlobal, {ga}, {5, 5});
  b.arg(n1, ArgName::ptr).var = aPtr;
  b.arg(n1, ArgName::dtype).dtype = DataType::f16();
  b.arg(n1, ArgName::shape).exprs = {b.ref(m), b.cnst(i32, 64)};
  uint32_t n2 = b.inst(Opcode::AllocateShared, {s}, {6, 5});
  b.arg(n2, ArgName::dtype).dtype = DataType::f16();
  b.arg(n2, ArgName::shape).ints = {16, 64};
  b.arg(n2, ArgName::layout).sharedLayout =
      must(SharedLayout::swizzle(must(SharedLayout::tile(must(SharedLayout::rowMajor({2, 8})),
                                                         must(SharedLayout::columnMajor({8, 8})))),
                                 3, 3, 3));
  uint32_t n3 = b.inst(Opcode::AllocateRegister, {acc}, {7, 5});
  b.arg(n3, ArgName::dtype).dtype = f32;
  b.arg(n3, ArgName::layout).regLayout = cFrag;
  b.arg(n3, ArgName::init).expr = b.cnst(f32, 0);

  ExprId start = b.cnst(i32, 0), stop = b.ref(m), step = b.cnst(i32, 1);
  uint32_t n4 = b.inst(Opcode::LoadGlobal, {x}, {9, 9});
  b.arg(n4, ArgName::g).var = ga;
  b.arg(n4, ArgName::layout).regLayout = cFrag;
  b.arg(n4, ArgName::offset).offsets = {
      {b.op(ExprOp::Mul, i32, {b.ref(bi), b.cnst(i32, 16)}), true}, {b.cnst(i32, 0), true}};
  uint32_t n5 = b.inst(Opcode::Reduce, {r}, {10, 9});
  b.arg(n5, ArgName::a).var = x;
  b.arg(n5, ArgName::dim).intValue = 1;
  b.arg(n5, ArgName::op).intValue = int64_t(ReduceOp::Max);
  b.arg(n5, ArgName::keepdim).intValue = 1;
  uint32_t n6 = b.inst(Opcode::Add, {acc}, {11, 9});
  b.p.instructions[n6].out = true;
  b.arg(n6, ArgName::a).var = x;
  b.arg(n6, ArgName::b).expr = b.cnst(f32, 0x3fc00000); // 1.5
  ExprId cond1 = b.op(ExprOp::Lt, boolean, {b.ref(i), b.cnst(i32, 3)});
  ExprId cond2 =
      b.op(ExprOp::LogicalNot, boolean, {b.op(ExprOp::Eq, boolean, {b.ref(i), b.ref(bj)})});
  ExprId assigned = b.op(ExprOp::Select, i64,
                         {b.cnst(boolean, 1), b.ref(k), b.cnst(i64, ~uint64_t(0))}); // k or -1
  ExprId whileCond = b.op(ExprOp::Ne, boolean, {b.ref(k), b.cnst(i64, 0)});

  uint32_t n7 = b.inst(Opcode::Iota, {w}, {20, 5});
  b.arg(n7, ArgName::layout).regLayout =
      chain({RegisterLayout::spatial({4, 1}), RegisterLayout::replicate(8)});
  b.arg(n7, ArgName::dim).intValue = 0;
  uint32_t n8 = b.inst(Opcode::View, {v}, {21, 5});
  b.arg(n8, ArgName::a).var = x;
  b.arg(n8, ArgName::layout).regLayout = must(RegisterLayout::replicate(4)); // unranked
  uint32_t n9 = b.inst(Opcode::Permute, {v}, {22, 5});
  b.arg(n9, ArgName::a).var = v;
  b.arg(n9, ArgName::dims).ints = {1, 0, -5, INT64_MIN, INT64_MAX};
  uint32_t n10 = b.inst(Opcode::CopyAsyncWaitGroup, {}, {24, 1});
  b.arg(n10, ArgName::n).intValue = -3;
  uint32_t n11 = b.inst(Opcode::Print, {}, {25, 1});
  b.arg(n11, ArgName::x).var = acc;
  b.arg(n11, ArgName::msg).text = "acc = \xc3\xa9 \xe2\x9c\x93"; // "acc = é ✓"
  uint32_t n12 = b.inst(Opcode::StoreShared, {}, {26, 1});
  b.arg(n12, ArgName::r).var = x;
  b.arg(n12, ArgName::s).var = s;
  uint32_t n13 = b.inst(Opcode::Synchronize, {}, {27, 1});
  uint32_t n14 = b.inst(Opcode::Exit, {}, {28, 1});
  uint32_t n15 = b.inst(Opcode::Print, {}, {29, 1});
  b.arg(n15, ArgName::x).expr = b.op(ExprOp::Cast, f32, {b.ref(k)});

  Stmt loop = simpleStmt(StmtKind::For, {8, 5});
  loop.var = i;
  loop.expr = start;
  loop.stop = stop;
  loop.step = step;
  Stmt ifs = simpleStmt(StmtKind::If, {12, 9});
  ifs.expr = cond1;
  ifs.body = {simpleStmt(StmtKind::Break, {13, 13})};
  Stmt elif = simpleStmt(StmtKind::If, {14, 9});
  elif.expr = cond2;
  elif.body = {simpleStmt(StmtKind::Continue, {15, 13})};
  ifs.orelse = {elif};
  loop.body = {instStmt(n4, {9, 9}), instStmt(n5, {10, 9}), instStmt(n6, {11, 9}), ifs};
  Stmt assign = simpleStmt(StmtKind::Assign, {18, 5});
  assign.var = k;
  assign.expr = assigned;
  Stmt wl = simpleStmt(StmtKind::While, {19, 5});
  wl.expr = whileCond;
  wl.body = {instStmt(n7, {20, 5}), instStmt(n8, {21, 5}), instStmt(n9, {22, 5}),
             simpleStmt(StmtKind::Break, {23, 5})};
  b.p.body = {instStmt(n0, {4, 5}),
              instStmt(n1, {5, 5}),
              instStmt(n2, {6, 5}),
              instStmt(n3, {7, 5}),
              loop,
              assign,
              wl,
              instStmt(n10, {24, 1}),
              instStmt(n11, {25, 1}),
              instStmt(n12, {26, 1}),
              instStmt(n15, {29, 1}),
              instStmt(n13, {27, 1}),
              instStmt(n14, {28, 1})};
  return b.p;
}

/// The program of tinyProgram(), built in memory.
Program tinyModuleProgram() {
  ProgramBuilder b;
  b.p.name = "p";
  b.p.threads = 32;
  b.var("n", VarKind::Scalar, DataType::i32(), true);
  b.p.grid = {b.cnst(DataType::i32(), 1)};
  uint32_t n = b.inst(Opcode::Synchronize, {});
  b.p.body = {instStmt(n)};
  return b.p;
}

Module sampleModule() {
  Module m;
  m.programs = {kernelProgram(), tinyModuleProgram()};
  m.programs[1].loc = {40, 1};
  m.hasDebugInfo = true;
  m.sourceName = "sample.tasm";
  m.sourceText =
      "# sample \xe2\x9c\x93\ndef kernel<cdiv(m, 16), 4>(i32 m, f16* a_ptr, u8* b_ptr):\n";
  return m;
}

/// What a module looks like after a round trip without debug info.
Module withoutDebugInfo(Module m) {
  m.hasDebugInfo = false;
  m.sourceName.clear();
  m.sourceText.clear();
  std::function<void(std::vector<Stmt> &)> clear = [&](std::vector<Stmt> &block) {
    for (Stmt &s : block) {
      s.loc = {};
      clear(s.body);
      clear(s.orelse);
    }
  };
  for (Program &p : m.programs) {
    p.loc = {};
    for (Instruction &i : p.instructions)
      i.loc = {};
    clear(p.body);
  }
  return m;
}

// ---------------------------------------------------------------------------------------------
// Field-by-field comparison.

void checkSameArg(const Argument &a, const Argument &b) {
  CHECK(a.present == b.present);
  CHECK(a.var == b.var);
  CHECK(a.expr == b.expr);
  CHECK(a.intValue == b.intValue);
  CHECK(a.dtype == b.dtype);
  CHECK(a.regLayout.has_value() == b.regLayout.has_value());
  if (a.regLayout && b.regLayout) {
    CHECK(*a.regLayout == *b.regLayout);
    CHECK(a.regLayout->numThreads() == b.regLayout->numThreads());
    CHECK(a.regLayout->numLocals() == b.regLayout->numLocals());
  }
  CHECK(a.sharedLayout.has_value() == b.sharedLayout.has_value());
  if (a.sharedLayout && b.sharedLayout) {
    CHECK(*a.sharedLayout == *b.sharedLayout);
    CHECK(a.sharedLayout->size() == b.sharedLayout->size());
  }
  CHECK(a.ints == b.ints);
  CHECK(a.exprs == b.exprs);
  CHECK(a.offsets == b.offsets);
  CHECK(a.text == b.text);
}

void checkSameBlock(const std::vector<Stmt> &a, const std::vector<Stmt> &b) {
  REQUIRE(a.size() == b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    INFO("statement " << k);
    CHECK(a[k].kind == b[k].kind);
    CHECK(a[k].loc == b[k].loc);
    CHECK(a[k].index == b[k].index);
    CHECK(a[k].var == b[k].var);
    CHECK(a[k].expr == b[k].expr);
    CHECK(a[k].stop == b[k].stop);
    CHECK(a[k].step == b[k].step);
    checkSameBlock(a[k].body, b[k].body);
    checkSameBlock(a[k].orelse, b[k].orelse);
  }
}

void checkSameProgram(const Program &a, const Program &b) {
  CHECK(a.name == b.name);
  CHECK(a.params == b.params);
  CHECK(a.grid == b.grid);
  CHECK(a.threads == b.threads);
  CHECK(a.blocksPerSm == b.blocksPerSm);
  CHECK(a.cluster == b.cluster);
  CHECK(a.loc == b.loc);
  REQUIRE(a.vars.size() == b.vars.size());
  for (size_t k = 0; k < a.vars.size(); ++k) {
    INFO("variable " << k);
    CHECK(a.vars[k].name == b.vars[k].name);
    CHECK(a.vars[k].kind == b.vars[k].kind);
    CHECK(a.vars[k].dtype == b.vars[k].dtype);
    CHECK(a.vars[k].isParam == b.vars[k].isParam);
  }
  REQUIRE(a.exprs.size() == b.exprs.size());
  for (size_t k = 0; k < a.exprs.size(); ++k) {
    INFO("expression " << k);
    CHECK(a.exprs[k].op == b.exprs[k].op);
    CHECK(a.exprs[k].dtype == b.exprs[k].dtype);
    for (int j = 0; j < 3; ++j)
      CHECK(a.exprs[k].operands[j] == b.exprs[k].operands[j]);
    CHECK(a.exprs[k].bits == b.exprs[k].bits);
    CHECK(a.exprs[k].var == b.exprs[k].var);
  }
  REQUIRE(a.instructions.size() == b.instructions.size());
  for (size_t k = 0; k < a.instructions.size(); ++k) {
    INFO("instruction " << k);
    const Instruction &x = a.instructions[k], &y = b.instructions[k];
    CHECK(x.opcode == y.opcode);
    CHECK(x.results == y.results);
    CHECK(x.out == y.out);
    CHECK(x.loc == y.loc);
    REQUIRE(x.args.size() == y.args.size());
    for (size_t j = 0; j < x.args.size(); ++j) {
      INFO("argument " << x.spec().args[j].name);
      checkSameArg(x.args[j], y.args[j]);
    }
  }
  checkSameBlock(a.body, b.body);
}

void checkSameModule(const Module &a, const Module &b) {
  CHECK(a.hasDebugInfo == b.hasDebugInfo);
  CHECK(a.sourceName == b.sourceName);
  CHECK(a.sourceText == b.sourceText);
  REQUIRE(a.programs.size() == b.programs.size());
  for (size_t k = 0; k < a.programs.size(); ++k) {
    INFO("program " << k);
    checkSameProgram(a.programs[k], b.programs[k]);
  }
}

std::string errorOf(std::span<const uint8_t> bytes, const BytecodeLimits &limits = {}) {
  Expected<Module> m = decodeModule(bytes, limits);
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().code() == ErrorCode::Bytecode);
  return m.status().first().message;
}

bool contains(const std::string &s, const std::string &part) {
  INFO(s);
  return s.find(part) != std::string::npos;
}

/// `file`, written with producer "tilusvm 0.1.0" (as the dump in docs/bytecode.md), with its
/// producer section rewritten for `producer` and the header's length and hash recomputed.
std::vector<uint8_t> withProducer(const std::vector<uint8_t> &file, const std::string &producer) {
  const std::string old = "tilusvm 0.1.0";
  REQUIRE(file.size() > 35 + old.size());
  REQUIRE(file[32] == 1); // producer section: id, byte length, string length, string
  REQUIRE(file[33] == old.size() + 1);
  REQUIRE(file[34] == old.size());
  REQUIRE(std::string(file.begin() + 35, file.begin() + 35 + long(old.size())) == old);
  REQUIRE(producer.size() < 127); // one-byte lengths
  std::vector<uint8_t> out(file.begin(), file.begin() + 32);
  out.push_back(1);
  out.push_back(uint8_t(producer.size() + 1));
  out.push_back(uint8_t(producer.size()));
  out.insert(out.end(), producer.begin(), producer.end());
  out.insert(out.end(), file.begin() + 35 + long(old.size()), file.end());
  return seal(out);
}

/// Offset of the programs section in a file written with kProducer (docs: header, then the
/// producer section: id, size, string length, string).
size_t programsSectionOffset() { return 32 + 1 + 1 + 1 + kProducer.size(); }

} // namespace

// ---------------------------------------------------------------------------------------------

TEST_CASE("bytecode: a hand-written file decodes to the module it describes") {
  const std::vector<uint8_t> file = makeFile(programsOf({tinyProgram()}));
  CHECK(int(Opcode::Synchronize) == kOpSynchronize);
  CHECK(int(Opcode::BlockIndices) == kOpBlockIndices);
  CHECK(int(Opcode::AllocateRegister) == kOpAllocateRegister);
  Module expected;
  expected.programs = {tinyModuleProgram()};
  Module decoded = must(decodeModule(file));
  checkSameModule(decoded, expected);
  CHECK(encodeModule(expected) == file);
}

TEST_CASE("bytecode: blocks_per_sm travels under header flag 2, after each program's threads") {
  // two programs, the second with blocks_per_sm 16: flag bit 1 set, a field in every program
  Bytes second;
  second.str("q").uleb(32).uleb(16);
  second.uleb(1).str("n").u8(1).u8(1).i32();
  second.uleb(1).u8(0).i32().uleb(1);
  second.uleb(1).uleb(0);
  second.uleb(1).uleb(kOpSynchronize).uleb(0).u8(0);
  second.uleb(1).u8(0).uleb(0);
  Bytes first;
  {
    // tinyProgram() with its blocks_per_sm field (0) after threads
    Bytes t = tinyProgram();
    std::vector<uint8_t> v = t.v;
    v.insert(v.begin() + 3, 0x00); // name "p" is 2 bytes, threads 32 is 1
    first.v = v;
  }
  std::vector<uint8_t> file = makeFile(programsOf({first, second}));
  file[8] = 2; // flags: kFlagBlocksPerSm
  file = seal(file);
  Module expected;
  expected.programs = {tinyModuleProgram(), tinyModuleProgram()};
  expected.programs[1].name = "q";
  expected.programs[1].blocksPerSm = 16;
  Module decoded = must(decodeModule(file));
  checkSameModule(decoded, expected);
  CHECK(encodeModule(expected) == file);
  // without the flag the same programs are read without the field (and here fail to parse)
  std::vector<uint8_t> noFlag = file;
  noFlag[8] = 0;
  CHECK(!decodeModule(seal(noFlag)).ok());
  // a module without any blocks_per_sm is written without the flag and the fields (version 1
  // files of every earlier build)
  expected.programs[1].blocksPerSm = 0;
  std::vector<uint8_t> plain = encodeModule(expected);
  CHECK(plain[8] == 0);
  CHECK(plain.size() == file.size() - 2);
  checkSameModule(must(decodeModule(plain)), expected);
  // the field's value is checked as a u32 like threads
  Bytes big;
  big.str("q").uleb(32).uleb(uint64_t(1) << 32);
  std::vector<uint8_t> bad = makeFile(programsOf({big}));
  bad[8] = 2;
  CHECK(errorOf(seal(bad)).find("blocks_per_sm") != std::string::npos);
}

TEST_CASE("bytecode: cluster= travels under header flag 4, after blocks_per_sm when present") {
  // tinyProgram() with cluster 2: flag bit 2 set, the field after threads
  std::vector<uint8_t> v = tinyProgram().v;
  v.insert(v.begin() + 3, 0x02); // name "p" is 2 bytes, threads 32 is 1
  Bytes clustered;
  clustered.v = v;
  std::vector<uint8_t> file = makeFile(programsOf({clustered}));
  file[8] = 4; // flags: kFlagCluster
  file = seal(file);
  Module expected;
  expected.programs = {tinyModuleProgram()};
  expected.programs[0].cluster = 2;
  checkSameModule(must(decodeModule(file)), expected);
  CHECK(must(decodeModule(file)).programs[0].cluster == 2);
  CHECK(encodeModule(expected) == file);
  // with blocks_per_sm too: both flags, blocks_per_sm (16) first
  std::vector<uint8_t> both = tinyProgram().v;
  both.insert(both.begin() + 3, {0x10, 0x02});
  Bytes two;
  two.v = both;
  std::vector<uint8_t> file2 = makeFile(programsOf({two}));
  file2[8] = 6;
  file2 = seal(file2);
  expected.programs[0].blocksPerSm = 16;
  checkSameModule(must(decodeModule(file2)), expected);
  CHECK(encodeModule(expected) == file2);
  // a module without clusters is written without the flag and the field
  expected.programs[0].blocksPerSm = 0;
  expected.programs[0].cluster = 1;
  std::vector<uint8_t> plain = encodeModule(expected);
  CHECK(plain[8] == 0);
  CHECK(plain.size() == file.size() - 1);
  // the field's value is checked as a u32
  Bytes big;
  big.str("q").uleb(32).uleb(uint64_t(1) << 32);
  std::vector<uint8_t> bad = makeFile(programsOf({big}));
  bad[8] = 4;
  CHECK(errorOf(seal(bad)).find("cluster") != std::string::npos);
}

TEST_CASE("bytecode: a field's header flag with only default values is not canonical") {
  // the encoder sets flag bit 1 (2) only when some program's blocks_per_sm is not 0 and bit 2
  // (4) only when some cluster is not 1; a file with the flag and only defaults would decode
  // to a module that re-encodes without it (found by the fuzzer), so the decoder rejects it
  auto withField = [](uint8_t value) {
    std::vector<uint8_t> v = tinyProgram().v;
    v.insert(v.begin() + 3, value); // name "p" is 2 bytes, threads 32 is 1
    Bytes b;
    b.v = v;
    return b;
  };
  std::vector<uint8_t> noRequest = makeFile(programsOf({withField(0), withField(0)}));
  noRequest[8] = 2;
  CHECK(contains(errorOf(seal(noRequest)), "every program's blocks_per_sm is 0"));
  std::vector<uint8_t> noCluster = makeFile(programsOf({withField(1), withField(1)}));
  noCluster[8] = 4;
  CHECK(contains(errorOf(seal(noCluster)), "every program's cluster is 1"));
  // one program with a value other than the default makes the flag canonical again
  std::vector<uint8_t> oneRequest = makeFile(programsOf({withField(0), withField(8)}));
  oneRequest[8] = 2;
  oneRequest = seal(oneRequest);
  Module m = must(decodeModule(oneRequest));
  CHECK(encodeModule(m) == oneRequest);
  std::vector<uint8_t> oneCluster = makeFile(programsOf({withField(1), withField(2)}));
  oneCluster[8] = 4;
  oneCluster = seal(oneCluster);
  Module c = must(decodeModule(oneCluster));
  CHECK(c.programs[1].cluster == 2);
  CHECK(encodeModule(c) == oneCluster);
  // bit 3 (8): LoadGlobal's evict arguments, only when some LoadGlobal has one
  std::vector<uint8_t> noHint = makeFile(programsOf({tinyProgram()}));
  noHint[8] = 8;
  CHECK(contains(errorOf(seal(noHint)), "header flag bit 3 (LoadGlobal evict arguments) is set "
                                        "but no LoadGlobal has one"));
}

TEST_CASE("bytecode: the complete file printed in docs/bytecode.md") {
  const std::vector<uint8_t> doc = {
      0x54, 0x4c, 0x42, 0x43, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x4f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xa1, 0x69, 0xd1, 0x26,
      0x84, 0xb0, 0x0c, 0x60, 0x01, 0x0e, 0x0d, 0x74, 0x69, 0x6c, 0x75, 0x73, 0x76, 0x6d,
      0x20, 0x30, 0x2e, 0x31, 0x2e, 0x30, 0x02, 0x1d, 0x01, 0x01, 0x70, 0x20, 0x01, 0x01,
      0x6e, 0x01, 0x01, 0x01, 0x20, 0x00, 0x00, 0x01, 0x00, 0x01, 0x20, 0x00, 0x00, 0x01,
      0x01, 0x00, 0x01, 0x35, 0x00, 0x00, 0x01, 0x00, 0x00};
  const std::vector<uint8_t> debugSection = {0x03, 0x11, 0x06, 0x74, 0x2e, 0x74, 0x61,
                                             0x73, 0x6d, 0x00, 0x01, 0x01, 0x01, 0x01,
                                             0x02, 0x05, 0x01, 0x02, 0x05};
  // The document's dump was made with producer "tilusvm 0.1.0"; it decodes with any producer.
  Module m = must(decodeModule(doc));
  Module expected;
  expected.programs = {tinyModuleProgram()};
  checkSameModule(m, expected);
  expected.sourceName = "t.tasm";
  expected.programs[0].loc = {1, 1};
  expected.programs[0].instructions[0].loc = {2, 5};
  expected.programs[0].body[0].loc = {2, 5};
  std::vector<uint8_t> withDebug = doc;
  withDebug[8] = 1;
  withDebug.insert(withDebug.end(), debugSection.begin(), debugSection.end());
  Module d = must(decodeModule(seal(withDebug)));
  expected.hasDebugInfo = true;
  checkSameModule(d, expected);
  // Encoding gives the document's bytes, with this build's producer in the producer section.
  CHECK(encodeModule(expected) == withProducer(doc, kProducer));
  CHECK(encodeModule(expected, {true}) == withProducer(seal(withDebug), kProducer));
  CHECK(withProducer(doc, "tilusvm 0.1.0") == doc);
}

TEST_CASE("bytecode: header fields at the offsets of docs/bytecode.md") {
  Module m = sampleModule();
  for (bool debug : {false, true}) {
    std::vector<uint8_t> b = encodeModule(m, {debug});
    REQUIRE(b.size() > 48);
    CHECK(std::string(b.begin(), b.begin() + 4) == "TLBC");
    CHECK(readLe(b, 4, 4) == 1); // format version
    CHECK(readLe(b, 4, 4) == kBytecodeFormatVersion);
    CHECK(readLe(b, 8, 4) == (debug ? 1u : 0u)); // flags
    CHECK(readLe(b, 12, 4) == 0);                // reserved
    CHECK(readLe(b, 16, 8) == b.size());         // total length
    CHECK(readLe(b, 24, 8) == XXH3_64bits(b.data() + 32, b.size() - 32));
    CHECK(b[32] == 1); // producer section
    CHECK(b[33] == kProducer.size() + 1);
    CHECK(b[34] == kProducer.size());
    CHECK(std::string(b.begin() + 35, b.begin() + 35 + long(kProducer.size())) == kProducer);
    CHECK(b[programsSectionOffset()] == 2); // programs section
  }
}

TEST_CASE("bytecode: round trip without debug info") {
  Module m = sampleModule();
  std::vector<uint8_t> bytes = encodeModule(m);
  Module decoded = must(decodeModule(bytes));
  checkSameModule(decoded, withoutDebugInfo(m));
  CHECK(encodeModule(decoded) == bytes);
}

TEST_CASE("bytecode: round trip with debug info") {
  Module m = sampleModule();
  std::vector<uint8_t> bytes = encodeModule(m, {true});
  Module decoded = must(decodeModule(bytes));
  checkSameModule(decoded, m);
  CHECK(encodeModule(decoded, {true}) == bytes);
  // Dropping debug info on re-encoding gives the plain encoding.
  CHECK(encodeModule(decoded) == encodeModule(m));
}

TEST_CASE("bytecode: encoding is deterministic and the content hash ignores debug info") {
  Module a = sampleModule(), b = sampleModule();
  CHECK(encodeModule(a) == encodeModule(b));
  CHECK(encodeModule(a, {true}) == encodeModule(b, {true}));
  CHECK(encodeModule(a) == encodeModule(a));
  // The content hash is XXH3-64 of the programs section (id, size, payload) of the encoding.
  std::vector<uint8_t> plain = encodeModule(a);
  size_t at = programsSectionOffset();
  CHECK(moduleContentHash(a) == XXH3_64bits(plain.data() + at, plain.size() - at));
  // Locations and source text do not change it; a constant does.
  b.programs[0].instructions[3].loc = {99, 99};
  b.sourceText = "other";
  CHECK(moduleContentHash(a) == moduleContentHash(b));
  CHECK(moduleContentHash(a) == moduleContentHash(withoutDebugInfo(a)));
  b.programs[0].exprs[1].bits = 17;
  CHECK(moduleContentHash(a) != moduleContentHash(b));
}

TEST_CASE("bytecode: empty module") {
  Module m;
  std::vector<uint8_t> bytes = encodeModule(m);
  CHECK(bytes == makeFile(programsOf({})));
  checkSameModule(must(decodeModule(bytes)), m);
}

// ---------------------------------------------------------------------------------------------
// Corruption sweeps.

TEST_CASE("bytecode: every truncation is an error") {
  for (bool debug : {false, true}) {
    std::vector<uint8_t> bytes = encodeModule(sampleModule(), {debug});
    for (size_t n = 0; n < bytes.size(); ++n) {
      INFO("length " << n);
      errorOf(std::span(bytes.data(), n));
      // Sealed again, so that the structure rather than the header catches it.
      if (n >= 32)
        errorOf(seal(std::vector<uint8_t>(bytes.begin(), bytes.begin() + long(n))));
    }
  }
}

TEST_CASE("bytecode: every bit flip is an error") {
  std::vector<uint8_t> bytes = encodeModule(sampleModule(), {true});
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::vector<uint8_t> c = bytes;
      c[i] ^= uint8_t(1 << bit);
      INFO("byte " << i << " bit " << bit);
      std::string message = errorOf(c);
      if (i >= 24) // the hash field or what it covers
        CHECK(message.find("integrity hash mismatch") != std::string::npos);
    }
  }
}

TEST_CASE("bytecode: sealed bit flips give an error or a canonical module") {
  // With the hash recomputed, a flip reaches the structural checks. Whatever decodes must
  // re-encode to exactly the flipped bytes: every accepted encoding is canonical.
  std::vector<uint8_t> bytes = encodeModule(sampleModule(), {true});
  size_t accepted = 0;
  for (size_t i = 32; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::vector<uint8_t> c = bytes;
      c[i] ^= uint8_t(1 << bit);
      c = seal(c);
      INFO("byte " << i << " bit " << bit);
      Expected<Module> m = decodeModule(c);
      if (!m) {
        CHECK(m.status().code() == ErrorCode::Bytecode);
        continue;
      }
      ++accepted;
      if (i >= programsSectionOffset()) // a changed producer string re-encodes as ours
        CHECK(encodeModule(*m, {m->hasDebugInfo}) == c);
    }
  }
  // Some flips only change a value (a constant, a name, a location): those decode.
  CHECK(accepted > 0);
}

TEST_CASE("bytecode: overwritten and appended bytes are errors") {
  std::vector<uint8_t> bytes = encodeModule(sampleModule(), {true});
  for (size_t i = 0; i < bytes.size(); ++i)
    for (uint8_t value : {uint8_t(0x00), uint8_t(0xff), uint8_t(0x80), uint8_t(0x7f)}) {
      if (bytes[i] == value)
        continue;
      std::vector<uint8_t> c = bytes;
      c[i] = value;
      INFO("byte " << i << " = " << int(value));
      errorOf(c);
    }
  for (size_t extra = 1; extra <= 40; ++extra) {
    std::vector<uint8_t> c = bytes;
    c.resize(bytes.size() + extra, uint8_t(extra));
    INFO("appended " << extra);
    CHECK(errorOf(c).find("header total length") != std::string::npos);
    CHECK(errorOf(seal(c)).find("bytes after the last section") != std::string::npos);
  }
}

TEST_CASE("bytecode: header errors name the field") {
  std::vector<uint8_t> good = makeFile(programsOf({tinyProgram()}));
  std::vector<uint8_t> c = good;
  c[0] = 'X';
  CHECK(errorOf(c).find("bad magic") != std::string::npos);
  c = good;
  c[4] = 2;
  CHECK(errorOf(c) == "unsupported format version 2 (this build reads 1) at offset 4");
  c = good;
  c[8] = 16;
  CHECK(errorOf(c).find("unknown flags") != std::string::npos);
  c = good;
  c[13] = 1;
  CHECK(errorOf(c) == "reserved header field is not zero at offset 12");
  c = good;
  c[24] ^= 1;
  CHECK(errorOf(c).find("integrity hash mismatch") != std::string::npos);
  CHECK(errorOf(std::span(good.data(), 10)).find("unexpected end of data") != std::string::npos);
  BytecodeLimits small;
  small.maxFileBytes = 16;
  CHECK(errorOf(good, small) == "file size " + std::to_string(good.size()) + " exceeds limit 16");
  // Debug flag without a debug section, and a debug section without the flag.
  c = good;
  c[8] = 1;
  CHECK(errorOf(seal(c)).find("unexpected end of data reading section id") != std::string::npos);
  Bytes debug;
  debug.str("").str("").uleb(1); // source name, source text, 1 program
  debug.uleb(0).uleb(0);         // program location
  debug.uleb(1).uleb(0).uleb(0); // 1 instruction location
  debug.uleb(1).uleb(0).uleb(0); // 1 statement location
  c = makeFile(programsOf({tinyProgram()}), &debug);
  CHECK_OK(decodeModule(c));
  c[8] = 0;
  CHECK(errorOf(seal(c)).find("bytes after the last section") != std::string::npos);
}

TEST_CASE("bytecode: section framing") {
  // A section that claims more bytes than remain.
  std::vector<uint8_t> good = makeFile(programsOf({tinyProgram()}));
  std::vector<uint8_t> c = good;
  size_t at = programsSectionOffset();
  c[at + 1] = 0x7f; // programs section size 127
  CHECK(errorOf(seal(c)) == "section 2 size 127 exceeds remaining " +
                                std::to_string(good.size() - at - 2) + " bytes at offset " +
                                std::to_string(at + 1));
  // Wrong section id.
  c = good;
  c[at] = 3;
  CHECK(errorOf(seal(c)) ==
        "expected section 2 (programs), found section id 3 at offset " + std::to_string(at));
  // Content that ends before the section does.
  Bytes programs = programsOf({tinyProgram()});
  programs.u8(0);
  CHECK(errorOf(makeFile(programs))
            .find("section 2 (programs) has 1 bytes left after its "
                  "content") != std::string::npos);
  // A producer that is not printable ASCII.
  CHECK(errorOf(makeFile(programsOf({}), nullptr, "tilus\x01")).find("producer") !=
        std::string::npos);
  CHECK(errorOf(makeFile(programsOf({}), nullptr, "")).find("producer") != std::string::npos);
}

TEST_CASE("bytecode: varints") {
  // Overlong: program count 1 written as 0x81 0x00.
  Bytes programs;
  programs.u8(0x81).u8(0x00);
  CHECK(errorOf(makeFile(programs)).find("program varint is overlong") != std::string::npos);
  // Overflow: eleven bytes.
  Bytes big;
  for (int i = 0; i < 10; ++i)
    big.u8(0xff);
  big.u8(0x01);
  CHECK(errorOf(makeFile(big)).find("overflows 64 bits") != std::string::npos);
  // The largest u64 (ten bytes, last byte 1) is read, then rejected by the count's limit.
  Bytes max;
  max.uleb(UINT64_MAX);
  CHECK(max.v.size() == 10);
  CHECK(errorOf(makeFile(max)).find("program count 18446744073709551615 exceeds limit 4096") !=
        std::string::npos);
  // A 32-bit field given 2^32.
  Bytes threads;
  threads.uleb(1).str("p").uleb(uint64_t(1) << 32).add(Bytes().uleb(0).uleb(0).uleb(0).uleb(0));
  CHECK(errorOf(makeFile(threads)).find("threads 4294967296 exceeds 4294967295") !=
        std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Hostile counts.

TEST_CASE("bytecode: huge counts fail fast without allocating") {
  // Program "p" whose variable count is 2^31, and nothing after it.
  Bytes programs;
  programs.uleb(1).str("p").uleb(0).uleb(uint64_t(1) << 31);
  std::vector<uint8_t> file = makeFile(programs);
  size_t countAt =
      programsSectionOffset() + 2 + 1 + 2 + 1; // section id, size, count, name, threads
  gLargest = 0;
  gTrack = true;
  Expected<Module> m = decodeModule(file);
  gTrack = false;
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().first().message ==
        "program 0 (p) variables: variable count 2147483648 exceeds limit 1048576 at offset " +
            std::to_string(countAt));
  CHECK(gLargest < 4096);
  // With the limit lifted, the bytes left still bound the count.
  BytecodeLimits lifted;
  lifted.maxVars = UINT32_MAX;
  gLargest = 0;
  gTrack = true;
  m = decodeModule(file, lifted);
  gTrack = false;
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().first().message ==
        "program 0 (p) variables: variable count 2147483648 exceeds remaining 0 bytes at offset " +
            std::to_string(countAt));
  CHECK(gLargest < 4096);
  // Every other count: programs, expressions, instructions, statements, list entries.
  auto hostile = [](Bytes programs) {
    gLargest = 0;
    gTrack = true;
    Expected<Module> r = decodeModule(makeFile(programs));
    gTrack = false;
    CHECK_FALSE(r.ok());
    CHECK(gLargest < 4096);
  };
  hostile(Bytes().uleb(UINT32_MAX));
  hostile(Bytes().uleb(1).str("p").uleb(0).uleb(0).uleb(UINT32_MAX));
  hostile(Bytes().uleb(1).str("p").uleb(0).uleb(0).uleb(1).u8(0).i32().uleb(1).uleb(1).uleb(0).uleb(
      UINT32_MAX));
  hostile(Bytes()
              .uleb(1)
              .str("p")
              .uleb(0)
              .uleb(0)
              .uleb(1)
              .u8(0)
              .i32()
              .uleb(1)
              .uleb(1)
              .uleb(0)
              .uleb(0)
              .uleb(UINT32_MAX));
  // AllocateRegister with a shape IntList of 2^32 - 1 entries.
  hostile(Bytes()
              .uleb(1)
              .str("p")
              .uleb(0)
              .uleb(1)
              .str("r")
              .u8(3)
              .u8(0)
              .i32()
              .uleb(1)
              .u8(0)
              .i32()
              .uleb(1)
              .uleb(1)
              .uleb(0)
              .uleb(1)
              .uleb(kOpAllocateRegister)
              .uleb(1)
              .uleb(0)
              .u8(0)
              .u8(1)
              .i32()
              .u8(1)
              .uleb(1)
              .uleb(0)
              .uleb(0)
              .uleb(0)
              .u8(1)
              .uleb(UINT32_MAX));
}

TEST_CASE("bytecode: the decoded IR's memory is budgeted") {
  // 20000 Reduce instructions of 13 bytes each, every one holding five 384-byte Arguments.
  Bytes p;
  p.str("p").uleb(32).uleb(1).str("x").u8(3).u8(0).i32();
  p.uleb(1).u8(0).i32().uleb(1).uleb(1).uleb(0);
  const uint32_t n = 20000;
  p.uleb(n);
  for (uint32_t i = 0; i < n; ++i) // Reduce(x, dim=0, op=sum) -> x
    p.uleb(int(Opcode::Reduce))
        .uleb(1)
        .uleb(0)
        .u8(0)
        .u8(1)
        .u8(0)
        .uleb(0)
        .u8(1)
        .sleb(0)
        .u8(1)
        .u8(0)
        .u8(0)
        .u8(0);
  p.uleb(n);
  for (uint32_t i = 0; i < n; ++i)
    p.u8(0).uleb(i);
  std::vector<uint8_t> file = makeFile(programsOf({p}));
  CHECK(file.size() < 20 * n);
  Module m = must(decodeModule(file));
  CHECK(m.programs[0].instructions.size() == n);
  BytecodeLimits limits;
  limits.maxDecodedBytes = uint64_t(n) * sizeof(Argument); // well below 5 Arguments each
  CHECK(contains(errorOf(file, limits), "decoded module needs more than " +
                                            std::to_string(limits.maxDecodedBytes) +
                                            " bytes of memory (maxDecodedBytes)"));
}

// ---------------------------------------------------------------------------------------------
// Structural validation, one rule at a time, on modules built in memory.

namespace {

std::string decodeError(const Module &m, const BytecodeLimits &limits = {}) {
  return errorOf(encodeModule(m), limits);
}

} // namespace

TEST_CASE("bytecode: ids and expression arena") {
  Module m;
  m.programs = {kernelProgram()};
  Program &p = m.programs[0];
  SUBCASE("operand not below its user") {
    p.exprs[2].operands[1] = 2;
    CHECK(contains(decodeError(m), "expression 2: operand 1 refers to expression 2, must be "
                                   "below 2"));
  }
  SUBCASE("operand shared by two nodes") {
    p.exprs[2].operands[1] = 0;
    CHECK(contains(decodeError(m), "reuses expression 0 (expressions are trees)"));
  }
  SUBCASE("Var of a non-scalar variable") {
    p.exprs[0].var = 1; // a_ptr: Pointer
    CHECK(contains(decodeError(m), "expression 0: expression refers to variable 1, which is not "
                                   "a Scalar"));
  }
  SUBCASE("Var out of range") {
    p.exprs[0].var = 100;
    CHECK(contains(decodeError(m), "expression variable 100 is out of range (14 variables)"));
  }
  SUBCASE("constant wider than its type") {
    p.exprs[1].dtype = DataType::i(8);
    p.exprs[1].bits = 256;
    CHECK(contains(decodeError(m), "constant bits 256 do not fit i8"));
  }
  SUBCASE("expression id out of range in an argument") {
    p.instructions[3].arg(ArgName::init).expr = ExprId(p.exprs.size());
    CHECK(contains(decodeError(m), "instruction 3 (AllocateRegister): expression argument " +
                                       std::to_string(p.exprs.size()) + " is out of range"));
  }
  SUBCASE("result variable out of range") {
    p.instructions[0].results[1] = 14;
    CHECK(contains(decodeError(m), "instruction 0 (BlockIndices): result 14 is out of range (14 "
                                   "variables)"));
  }
  SUBCASE("statement ids out of range") {
    p.body[5].var = 14;
    CHECK(contains(decodeError(m), "assignment target 14 is out of range"));
  }
  SUBCASE("invalid dtype") {
    p.vars[2].dtype = DataType{TypeKind::Float, 9, 5, 2};
    CHECK(contains(decodeError(m), "variable 2: invalid variable dtype (kind 3, bits 9, exponent "
                                   "5, mantissa 2)"));
  }
  SUBCASE("names") {
    p.vars[4].name = "9lives";
    CHECK(contains(decodeError(m), "variable name \"9lives\" is not an identifier"));
    p.vars[4].name = "bj";
    p.name = "bad name\xff";
    CHECK(contains(decodeError(m), "program name \"bad name\\xff\" is not an identifier"));
    p.name = std::string(2000, 'a');
    CHECK(contains(decodeError(m), "program name length 2000 exceeds limit 1024"));
  }
  SUBCASE("string argument must be UTF-8") {
    p.instructions[11].arg(ArgName::msg).text = "\xc0\xaf"; // overlong '/'
    CHECK(contains(decodeError(m), "string argument is not valid UTF-8"));
    p.instructions[11].arg(ArgName::msg).text = "\xed\xa0\x80"; // surrogate
    CHECK(contains(decodeError(m), "string argument is not valid UTF-8"));
  }
  SUBCASE("parameters first") {
    p.vars[3].isParam = true;
    p.params.push_back(3);
    CHECK_OK(decodeModule(encodeModule(m)));
    p.params.pop_back();
    p.params = {0, 1};
    p.vars[2].isParam = false; // b_ptr no longer a parameter, bi still one
    CHECK(contains(decodeError(m), "variable 3: parameter follows a non-parameter variable"));
  }
  SUBCASE("grid of 0 and 4 dimensions") {
    p.grid.clear();
    CHECK(contains(decodeError(m), "grid has 0 dimensions"));
    p.grid = {0, 1, 3, 4};
    CHECK(contains(decodeError(m), "grid dimension count 4 exceeds limit 3"));
  }
}

TEST_CASE("bytecode: instructions against the table") {
  Module m;
  m.programs = {kernelProgram()};
  Program &p = m.programs[0];
  SUBCASE("missing required argument") {
    p.instructions[4].arg(ArgName::g).present = false;
    CHECK(contains(decodeError(m), "instruction 4 (LoadGlobal): missing required argument 'g'"));
  }
  SUBCASE("too many results") {
    p.instructions[0].results = {3, 4, 3, 4};
    CHECK(contains(decodeError(m), "instruction 0 (BlockIndices): result count 4 exceeds limit 3"));
  }
  SUBCASE("too few results") {
    p.instructions[0].results = {};
    CHECK(contains(decodeError(m), "result count 0 is below 1"));
  }
  SUBCASE("out= where the table forbids it") {
    p.instructions[1].out = true;
    CHECK(contains(decodeError(m), "instruction 1 (ViewGlobal): out= is not allowed"));
  }
  SUBCASE("instruction referenced twice or never") {
    p.body[1].index = 0;
    CHECK(contains(decodeError(m), "instruction 0 is referenced by more than one statement"));
    p.body[1].index = 1;
    p.body.erase(p.body.begin() + 2);
    CHECK(contains(decodeError(m), "instruction 2 is not referenced by any statement"));
  }
  SUBCASE("instruction index out of range") {
    p.body[0].index = 99;
    CHECK(contains(decodeError(m), "instruction index 99 is out of range (16 instructions)"));
  }
}

/// A program "p" for the statement-prefix tests: variable n (Scalar parameter, i32); expression
/// 0: Const i32 1 (the grid), expression 1: Const bool 1 (a condition); one Synchronize; `body`
/// writes the statements.
std::vector<uint8_t> prefixProgramWith(const std::function<void(Bytes &)> &body) {
  Bytes p;
  p.str("p").uleb(32);
  p.uleb(1).str("n").u8(1).u8(1).i32();
  p.uleb(2).u8(0).i32().uleb(1);
  p.u8(0).u8(0).u8(1).u8(0).u8(0).uleb(1);
  p.uleb(1).uleb(0);
  p.uleb(1).uleb(kOpSynchronize).uleb(0).u8(0);
  body(p);
  return makeFile(programsOf({p}));
}

TEST_CASE("bytecode: assert statements (kind 7) form a prefix of the program body") {
  auto programWith = prefixProgramWith; // expression 1: the assert conditions
  auto first = programWith([](Bytes &p) {
    p.uleb(3).u8(7).uleb(1).str("n is fine").u8(7).uleb(1).str("").u8(0).uleb(0);
  });
  Expected<Module> m = decodeModule(first);
  REQUIRE_OK(m);
  const Program &prog = m->programs[0];
  REQUIRE(prog.body.size() == 3);
  CHECK(prog.body[0].kind == StmtKind::Assert);
  CHECK(prog.body[0].expr == 1);
  CHECK(prog.body[0].text == "n is fine");
  CHECK(prog.body[1].kind == StmtKind::Assert);
  CHECK(prog.body[1].text.empty());
  CHECK(prog.preconditions().size() == 2);
  CHECK(encodeModule(*m) == first); // canonical: the same bytes again
  CHECK(contains(
      errorOf(programWith([](Bytes &p) { p.uleb(2).u8(0).uleb(0).u8(7).uleb(1).str("late"); })),
      "assert statement after a statement other than assert"));
  CHECK(contains(errorOf(programWith([](Bytes &p) {
                   p.uleb(2).u8(3).uleb(1).uleb(1).u8(7).uleb(1).str("nested").uleb(0);
                   p.u8(0).uleb(0);
                 })),
                 "assert statement nested in another statement"));
  CHECK(contains(
      errorOf(programWith([](Bytes &p) { p.uleb(2).u8(7).uleb(1).str("\xff").u8(0).uleb(0); })),
      "assert message is not valid UTF-8"));
  CHECK(contains(
      errorOf(programWith([](Bytes &p) { p.uleb(2).u8(7).uleb(9).str("").u8(0).uleb(0); })),
      "assert condition 9 is out of range (2 expressions)"));
}

TEST_CASE("bytecode: specialize statements (kind 12) follow the asserts in the body's prefix") {
  auto programWith = prefixProgramWith; // a specialize statement: kind 12, variable, expression
  auto good = programWith([](Bytes &p) {
    p.uleb(4).u8(7).uleb(1).str("").u8(12).uleb(0).uleb(1).u8(12).uleb(0).uleb(1);
    p.u8(0).uleb(0);
  });
  Expected<Module> m = decodeModule(good);
  REQUIRE_OK(m);
  const Program &prog = m->programs[0];
  REQUIRE(prog.body.size() == 4);
  CHECK(prog.body[1].kind == StmtKind::Specialize);
  CHECK(prog.body[1].var == 0);
  CHECK(prog.body[1].expr == 1);
  CHECK(prog.specializations().size() == 2);
  CHECK(prog.preconditions().size() == 1);
  CHECK(encodeModule(*m) == good); // canonical: the same bytes again
  CHECK(contains(
      errorOf(programWith([](Bytes &p) { p.uleb(2).u8(0).uleb(0).u8(12).uleb(0).uleb(1); })),
      "specialize statement after a statement other than assert or specialize"));
  CHECK(contains(errorOf(programWith([](Bytes &p) {
                   p.uleb(3).u8(12).uleb(0).uleb(1).u8(7).uleb(1).str("").u8(0).uleb(0);
                 })),
                 "assert statement after a statement other than assert"));
  CHECK(contains(errorOf(programWith([](Bytes &p) {
                   p.uleb(2).u8(3).uleb(1).uleb(1).u8(12).uleb(0).uleb(1).uleb(0);
                   p.u8(0).uleb(0);
                 })),
                 "specialize statement nested in another statement"));
  CHECK(contains(
      errorOf(programWith([](Bytes &p) { p.uleb(2).u8(12).uleb(5).uleb(1).u8(0).uleb(0); })),
      "out of range"));
}

TEST_CASE("bytecode: enum values out of range") {
  // Patch single bytes of hand-written files: every enum field rejects its first invalid value.
  // the head of a hand-written program "p": `threads`, one i32 variable of `varKind`, one
  // expression of `exprOp` (i32, operand 1), a grid of that expression and one Synchronize;
  // its statements follow
  auto head = [](uint32_t threads, uint8_t varKind, uint8_t exprOp) {
    Bytes p;
    p.str("p").uleb(threads);
    p.uleb(1).str("n").u8(varKind).u8(0).i32();
    p.uleb(1).u8(exprOp).i32().uleb(1);
    p.uleb(1).uleb(0);
    p.uleb(1).uleb(kOpSynchronize).uleb(0).u8(0);
    return p;
  };
  auto programWith = [&](uint8_t varKind, uint8_t exprOp, uint8_t stmtKind) {
    Bytes p = head(32, varKind, exprOp);
    p.uleb(2).u8(0).uleb(0).u8(stmtKind);
    return makeFile(programsOf({p}));
  };
  CHECK_OK(decodeModule(programWith(1, 0, 5)));
  CHECK(contains(errorOf(programWith(0, 0, 5)), "variable kind 0 is not one of 1..5"));
  CHECK(contains(errorOf(programWith(6, 0, 5)), "variable kind 6 is not one of 1..5"));
  CHECK(contains(errorOf(programWith(1, 28, 5)), "expression op 28 is not one of 0..27"));
  CHECK(contains(errorOf(programWith(1, 0, 13)), "statement kind 13 is not one of 0..12"));
  // Kind 10, a For with an unroll hint: its fields, the hint in 1..8, then its body.
  auto forWith = [&](uint8_t kind, uint64_t hint) {
    Bytes p = head(32, 1, 0);
    p.uleb(2).u8(0).uleb(0).u8(kind).uleb(0).uleb(0).uleb(0).uleb(0);
    if (kind == 10)
      p.uleb(hint);
    p.uleb(0); // the empty body
    return makeFile(programsOf({p}));
  };
  for (uint64_t hint : {1, 5, 8}) {
    Expected<Module> m = decodeModule(forWith(10, hint));
    REQUIRE_OK(m);
    REQUIRE(m->programs[0].body.size() == 2);
    CHECK(m->programs[0].body[1].kind == StmtKind::For);
    CHECK(m->programs[0].body[1].unroll == hint);
    CHECK(encodeModule(*m) == forWith(10, hint));
  }
  Expected<Module> plain = decodeModule(forWith(2, 0));
  REQUIRE_OK(plain);
  CHECK(plain->programs[0].body[1].unroll == 0);
  for (uint64_t hint : {0, 9, 300})
    CHECK(contains(errorOf(forWith(10, hint)),
                   "loop unroll hint " + std::to_string(hint) + " is not in 1..8"));
  // Thread groups: a Group only directly inside a Parallel, which holds only Groups.
  CHECK(contains(errorOf(programWith(1, 0, 9)), "group statement outside a parallel statement"));
  auto parallelOf = [&](uint8_t childKind) {
    Bytes p = head(64, 1, 0);
    // Instruction 0, then parallel { group(32): []; CHILD }
    p.uleb(2).u8(0).uleb(0).u8(8).uleb(2).u8(9).uleb(32).uleb(0).uleb(0).u8(childKind);
    if (childKind == 9)
      p.uleb(32).uleb(0).uleb(0);
    return makeFile(programsOf({p}));
  };
  Expected<Module> two = decodeModule(parallelOf(9));
  REQUIRE(two.ok());
  const Stmt &par = two->programs[0].body[1];
  CHECK(par.kind == StmtKind::Parallel);
  REQUIRE(par.body.size() == 2);
  CHECK(
      (par.body[1].kind == StmtKind::Group && par.body[1].threads == 32 && par.body[1].regs == 0));
  CHECK(
      contains(errorOf(parallelOf(5)), "a parallel statement holds a statement other than group"));
  // Kind 11, a Group with copies: its fields, the copies in 1..15 and the index variable plus
  // one (0: none), then its body. Variable 0 of head() is the index here.
  auto copiesOf = [&](uint64_t copies, uint64_t var) {
    Bytes p = head(64, 1, 0);
    p.uleb(2).u8(0).uleb(0).u8(8).uleb(1).u8(11).uleb(32).uleb(0).uleb(copies).uleb(var).uleb(0);
    return makeFile(programsOf({p}));
  };
  Expected<Module> copies = decodeModule(copiesOf(2, 1));
  REQUIRE(copies.ok());
  const Stmt &g = copies->programs[0].body[1].body[0];
  CHECK((g.kind == StmtKind::Group && g.threads == 32 && g.copies == 2 && g.var == 0));
  Expected<Module> anonymous = decodeModule(copiesOf(2, 0));
  REQUIRE(anonymous.ok());
  CHECK(anonymous->programs[0].body[1].body[0].var == kNoId);
  CHECK(contains(errorOf(copiesOf(0, 0)), "group copies 0 is not in 1..15"));
  CHECK(contains(errorOf(copiesOf(16, 0)), "group copies 16 is not in 1..15"));
  CHECK(
      contains(errorOf(copiesOf(2, 2)), "group index variable 1 is not a variable of the program"));
  // the writer: kind 9 without copies or index, kind 11 with them; both read back the same
  for (auto [n, withVar] : {std::pair{1u, false}, std::pair{3u, false}, std::pair{1u, true}}) {
    Module m = *copies;
    Stmt &w = m.programs[0].body[1].body[0];
    w.copies = n;
    w.var = withVar ? 0 : kNoId;
    std::vector<uint8_t> bytes = encodeModule(m);
    Expected<Module> back = decodeModule(bytes);
    REQUIRE(back.ok());
    const Stmt &r = back->programs[0].body[1].body[0];
    CHECK(r.copies == n);
    CHECK(r.var == w.var);
  }
  // Opcode numOpcodes() and a reduce op of 6.
  Bytes p;
  p.str("p").uleb(32).uleb(0).uleb(1).u8(0).i32().uleb(1).uleb(1).uleb(0);
  p.uleb(1).uleb(numOpcodes()).uleb(0).u8(0).uleb(1).u8(0).uleb(0);
  CHECK(contains(errorOf(makeFile(programsOf({p}))), "opcode " + std::to_string(numOpcodes()) +
                                                         " exceeds " +
                                                         std::to_string(numOpcodes() - 1)));
  Module m;
  m.programs = {kernelProgram()};
  m.programs[0].instructions[5].arg(ArgName::op).intValue = 6;
  CHECK(contains(decodeError(m), "reduce op 6 exceeds 5"));
  m.programs[0].instructions[5].arg(ArgName::op).intValue = 1;
  m.programs[0].instructions[5].arg(ArgName::keepdim).intValue = 1;
  CHECK_OK(decodeModule(encodeModule(m)));
}

TEST_CASE("bytecode: value tags and flags are 0 or 1") {
  // A Print whose Value argument has tag 2, then a presence byte of 2, then an out flag of 2.
  auto printWith = [](uint8_t out, uint8_t presence, uint8_t tag) {
    Bytes p;
    p.str("p").uleb(32).uleb(0).uleb(1).u8(0).i32().uleb(1).uleb(1).uleb(0);
    p.uleb(1).uleb(int(Opcode::Print)).uleb(0).u8(out).u8(presence).u8(tag).uleb(0).u8(0);
    p.uleb(1).u8(0).uleb(0);
    return makeFile(programsOf({p}));
  };
  Module ok = must(decodeModule(printWith(0, 1, 1)));
  CHECK(ok.programs[0].instructions[0].args[0].expr == 0);
  CHECK(ok.programs[0].instructions[0].args[0].var == kNoId);
  CHECK(contains(errorOf(printWith(0, 1, 2)), "value tag 2 is not 0 (variable) or 1"));
  CHECK(contains(errorOf(printWith(0, 2, 1)), "argument presence must be 0 or 1, got 2"));
  CHECK(contains(errorOf(printWith(2, 1, 1)), "out flag must be 0 or 1, got 2"));
  CHECK(contains(errorOf(printWith(0, 1, 0)), "value variable 0 is out of range (0 variables)"));
}

TEST_CASE("bytecode: variable flags other than 0 and 1 are rejected") {
  auto withFlags = [](uint8_t flags) {
    Bytes p;
    p.str("p").uleb(32);
    p.uleb(1).str("n").u8(1).u8(flags).i32(); // n: Scalar, the given flags, i32
    p.uleb(1).u8(0).i32().uleb(1);
    p.uleb(1).uleb(0);
    p.uleb(1).uleb(kOpSynchronize).uleb(0).u8(0);
    p.uleb(1).u8(0).uleb(0);
    return makeFile(programsOf({p}));
  };
  CHECK(must(decodeModule(withFlags(1))).programs[0].vars[0].isParam);
  for (uint8_t flags : {2, 3, 0x80})
    CHECK(contains(errorOf(withFlags(flags)),
                   "variable flags " + std::to_string(flags) + " has unknown bits"));
}

TEST_CASE("bytecode: statement nesting limit") {
  auto nested = [](uint32_t depth) {
    Module m;
    m.programs = {tinyModuleProgram()};
    Program &p = m.programs[0];
    Stmt inner = instStmt(0);
    for (uint32_t d = 1; d < depth; ++d) {
      Stmt w = simpleStmt(StmtKind::While);
      w.expr = 0;
      w.body.push_back(std::move(inner));
      inner = std::move(w);
    }
    p.body.clear();
    p.body.push_back(std::move(inner));
    return m;
  };
  CHECK_OK(decodeModule(encodeModule(nested(256))));
  CHECK(contains(decodeError(nested(257)), "statements nested 257 deep exceed limit 256"));
  CHECK(contains(decodeError(nested(5000)), "statements nested 257 deep exceed limit 256"));
  BytecodeLimits limits;
  limits.maxStmtDepth = 4;
  CHECK(contains(decodeError(nested(5), limits), "statements nested 5 deep exceed limit 4"));
  limits.maxStmts = 3;
  CHECK(contains(decodeError(nested(4), limits), "statements of the program exceed limit 3"));
}

TEST_CASE("bytecode: expression depth limit") {
  auto chainOf = [](uint32_t depth) {
    Module m;
    m.programs = {tinyModuleProgram()};
    ProgramBuilder b;
    b.p = m.programs[0];
    ExprId e = b.p.grid[0];
    for (uint32_t d = 1; d < depth; ++d)
      e = b.op(ExprOp::Neg, DataType::i32(), {e});
    b.p.grid = {e};
    m.programs[0] = b.p;
    return m;
  };
  CHECK_OK(decodeModule(encodeModule(chainOf(1024))));
  CHECK(contains(decodeError(chainOf(1025)), "expression depth 1025 exceeds limit 1024"));
}

TEST_CASE("bytecode: layouts") {
  Module m;
  m.programs = {kernelProgram()};
  Program &p = m.programs[0];
  const size_t at = programsSectionOffset();
  std::vector<uint8_t> good = encodeModule(m);
  // Find the canonical C fragment encoding in the file and make it non-canonical by splitting a
  // mode: rank+1, shape, modes, spatial, local as docs/bytecode.md gives them.
  Bytes cFrag;
  cFrag.uleb(3).uleb(16).uleb(8); // rank 2, shape [16, 8]
  cFrag.uleb(4).uleb(1).uleb(2).uleb(1).uleb(8).uleb(2).uleb(4).uleb(2).uleb(2); // modes
  cFrag.uleb(2).uleb(1).uleb(2);                                                 // spatial [m1, m2]
  cFrag.uleb(2).uleb(0).uleb(3);                                                 // local [m0, m3]
  auto found = std::search(good.begin() + long(at), good.end(), cFrag.v.begin(), cFrag.v.end());
  REQUIRE(found != good.end());
  SUBCASE("the documented encoding of local(2,1).spatial(8,4).local(1,2)") {
    CHECK(p.instructions[3].arg(ArgName::layout).regLayout->modes().size() == 4);
  }
  SUBCASE("spatial and local swapped is a different valid layout, decoded as such") {
    std::vector<uint8_t> c = good;
    size_t k = size_t(found - good.begin()) + 12; // spatial count
    std::swap(c[k + 1], c[k + 4]);                // spatial [m0, m2], local [m1, m3]
    Expected<Module> d = decodeModule(seal(c));
    REQUIRE(d.ok());
    CHECK(d->programs[0].instructions[3].arg(ArgName::layout).regLayout->numThreads() == 8);
  }
  SUBCASE("a mode listed twice") {
    std::vector<uint8_t> c = good;
    size_t k = size_t(found - good.begin()) + 12;
    c[k + 4] = 1; // local [m1, m3]: m1 twice, m0 never
    CHECK(contains(errorOf(seal(c)), "register layout mode 0 is listed 0 times, must be once"));
  }
  SUBCASE("a size-1 mode") {
    std::vector<uint8_t> c = good;
    size_t k = size_t(found - good.begin()) + 3;
    c[k + 2] = 1; // m0 size 1
    CHECK(contains(errorOf(seal(c)), "register layout mode size 1 is below 2"));
  }
  SUBCASE("a shape that disagrees with the modes") {
    std::vector<uint8_t> c = good;
    c[size_t(found - good.begin()) + 1] = 32;
    CHECK(contains(errorOf(seal(c)), "register layout: "));
  }
  SUBCASE("rank above the limit") {
    BytecodeLimits limits;
    limits.maxLayoutRank = 1; // instruction 2's shared layout comes first
    CHECK(contains(errorOf(good, limits), "instruction 2 (AllocateShared): shared layout rank 2 "
                                          "exceeds 1"));
  }
  SUBCASE("too many elements") {
    BytecodeLimits limits;
    limits.maxLayoutElements = 100;
    CHECK(contains(errorOf(good, limits), "exceed"));
    limits = {};
    limits.maxTotalLayoutElements = 200;
    CHECK(contains(errorOf(good, limits), "layout elements of the module exceed limit 200"));
  }
  SUBCASE("shared layout nesting") {
    BytecodeLimits limits;
    limits.maxLayoutDepth = 2;
    CHECK(contains(errorOf(good, limits), "shared layout nesting exceeds limit 2"));
    limits.maxLayoutDepth = 3;
    CHECK_OK(decodeModule(good, limits));
  }
  SUBCASE("a right-nested tile is not canonical") {
    // tile(row_major(2), tile(row_major(2), row_major(2))): kind 3, then the children.
    Bytes tile;
    tile.u8(3).u8(0).uleb(1).uleb(2).u8(3).u8(0).uleb(1).uleb(2).u8(0).uleb(1).uleb(2);
    Bytes prog;
    prog.str("p").uleb(32).uleb(1).str("s").u8(4).u8(0).i32();
    prog.uleb(1).u8(0).i32().uleb(1).uleb(1).uleb(0);
    prog.uleb(1).uleb(int(Opcode::AllocateShared)).uleb(1).uleb(0).u8(0);
    prog.u8(1).dtype(3, 16, 5, 10).u8(1).uleb(1).sleb(8).u8(1).add(tile);
    prog.uleb(1).u8(0).uleb(0);
    CHECK(
        contains(errorOf(makeFile(programsOf({prog}))), "shared layout is not in canonical form"));
  }
  SUBCASE("swizzle parameters are bounded before the factory sees them") {
    Bytes prog;
    prog.str("p").uleb(32).uleb(1).str("s").u8(4).u8(0).i32();
    prog.uleb(1).u8(0).i32().uleb(1).uleb(1).uleb(0);
    prog.uleb(1).uleb(int(Opcode::AllocateShared)).uleb(1).uleb(0).u8(0);
    prog.u8(1).dtype(3, 16, 5, 10).u8(1).uleb(1).sleb(8).u8(1);
    prog.u8(4).u8(0).uleb(1).uleb(8).uleb(40).uleb(40).uleb(62); // swizzle(row_major(8), ...)
    prog.uleb(1).u8(0).uleb(0);
    CHECK(
        contains(errorOf(makeFile(programsOf({prog}))), "swizzle bits + base is 80, limit is 62"));
  }
}

TEST_CASE("bytecode: debug section consistency") {
  Module m = sampleModule();
  std::vector<uint8_t> good = encodeModule(m, {true});
  Module decoded = must(decodeModule(good));
  CHECK(decoded.programs[0].body[4].body[3].orelse[0].loc == SourceLoc{14, 9});
  // A debug section with the wrong number of programs or instructions.
  Bytes debug;
  debug.str("f").str("").uleb(2);
  CHECK(contains(errorOf(makeFile(programsOf({tinyProgram()}), &debug)),
                 "debug section: program count 2 differs from 1 programs"));
  Bytes debug2;
  debug2.str("f").str("").uleb(1).uleb(1).uleb(1).uleb(2);
  CHECK(contains(errorOf(makeFile(programsOf({tinyProgram()}), &debug2)),
                 "instruction location count 2 differs from 1 instructions"));
  Bytes debug3;
  debug3.str("f").str("").uleb(1).uleb(1).uleb(1).uleb(1).uleb(2).uleb(3).uleb(4);
  CHECK(contains(errorOf(makeFile(programsOf({tinyProgram()}), &debug3)),
                 "statement location count 4 differs from 1 statements"));
  // one program's locations (def 1:2, instruction 3:4, statement 5:6) under a source name
  auto located = [](std::string_view name) {
    Bytes debug;
    debug.str(name).str("src").uleb(1).uleb(1).uleb(2).uleb(1).uleb(3).uleb(4);
    debug.uleb(1).uleb(5).uleb(6);
    return debug;
  };
  Bytes debug4 = located("f.tasm");
  Module d = must(decodeModule(makeFile(programsOf({tinyProgram()}), &debug4)));
  CHECK(d.hasDebugInfo);
  CHECK(d.sourceName == "f.tasm");
  CHECK(d.sourceText == "src");
  CHECK(d.programs[0].loc == SourceLoc{1, 2});
  CHECK(d.programs[0].instructions[0].loc == SourceLoc{3, 4});
  CHECK(d.programs[0].body[0].loc == SourceLoc{5, 6});
  // a source name with a NUL byte (no file name has one; every located diagnostic begins with
  // it, and a C caller's message would end there)
  Bytes debug5 = located(std::string_view("f\0.tasm", 7));
  CHECK(contains(errorOf(makeFile(programsOf({tinyProgram()}), &debug5)),
                 "source name \"f\\x00.tasm\" contains a NUL byte"));
}

// ---------------------------------------------------------------------------------------------
// The fuzzer's checked-in inputs (tests/fuzz/).

namespace {

/// The .tbc files of `dir` by name.
std::map<std::string, std::vector<uint8_t>> filesIn(const std::string &dir) {
  std::map<std::string, std::vector<uint8_t>> files;
  if (!std::filesystem::is_directory(dir))
    return files;
  for (const auto &entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".tbc")
      continue;
    std::ifstream in(entry.path(), std::ios::binary);
    files[entry.path().stem().string()] =
        std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return files;
}

/// Whether b re-encodes a: equal apart from the producer section (which re-encodes as ours).
bool sameApartFromProducer(const std::vector<uint8_t> &a, const std::vector<uint8_t> &b) {
  size_t pa = 34 + a[33], pb = 34 + b[33];
  return std::equal(a.begin(), a.begin() + 16, b.begin()) &&
         std::equal(a.begin() + long(pa), a.end(), b.begin() + long(pb), b.end());
}

} // namespace

TEST_CASE("bytecode: the seed corpus decodes and re-encodes to the same bytes") {
  std::map<std::string, std::vector<uint8_t>> seeds =
      filesIn(TILUSVM_SOURCE_DIR "/tests/fuzz/corpus");
  CHECK(seeds.size() >= 13);
  for (const auto &[name, bytes] : seeds) {
    INFO(name);
    Module m = must(decodeModule(bytes));
    CHECK(sameApartFromProducer(bytes, encodeModule(m, {m.hasDebugInfo})));
  }
}

TEST_CASE("bytecode: fuzzer regression inputs") {
  // Each input is stored as the fuzzer produced it and, like in the fuzz target, resealed
  // before decoding. The expected outcome of each, by the bug it reproduces:
  const std::map<std::string, std::string> expected = {
      // A swizzle over a tile of 2^24 elements: SharedLayout::swizzle evaluates every offset
      // (12 s under ASan). Layouts are now bounded at 2^21 elements, and a swizzle is charged
      // its elements times the nodes below it.
      {"swizzle-factory-enumerates-16m-elements",
       "instruction 11 (AllocateShared): tiled shared layout exceeds 2097152 elements"},
      // A module with cluster=256 and a TmaLoadMulticast: it decodes (and re-encodes to the same
      // bytes); the checker shifted 1 by the cluster size for the mask's range (undefined
      // behaviour). It now reports the header alone (tests/loader/test_checker_rules.cpp).
      {"cluster-out-of-range-multicast-mask-shift", ""},
      // Header flag bit 2 (cluster fields) with every program's cluster 1: it decoded to a
      // module that re-encodes without the flag. The flag must now mean some cluster above 1.
      {"cluster-flag-without-clusters", "every program's cluster is 1"},
  };
  std::map<std::string, std::vector<uint8_t>> inputs =
      filesIn(TILUSVM_SOURCE_DIR "/tests/fuzz/regressions");
  CHECK(inputs.size() == expected.size());
  for (auto [name, bytes] : inputs) {
    INFO(name);
    REQUIRE(expected.count(name) == 1);
    if (bytes.size() >= 32)
      bytes = seal(bytes);
    Expected<Module> m = decodeModule(bytes);
    if (expected.at(name).empty()) {
      REQUIRE(m.ok());
      CHECK(sameApartFromProducer(bytes, encodeModule(*m, {m->hasDebugInfo})));
    } else {
      CHECK(contains(errorOf(bytes), expected.at(name)));
    }
  }
}

TEST_CASE("bytecode: layout work is charged per element visit") {
  // swizzle(tile(row_major(2^10), row_major(2^10))), 2^20 elements: its factory evaluates every
  // element's offset through four nodes (itself, the tile, both leaves), 4 * 2^20 visits; the
  // tile is charged 2^20 and the leaves 2^10 each.
  auto prog = [](const BytecodeLimits &limits) {
    Bytes p;
    p.str("p").uleb(32).uleb(1).str("s").u8(4).u8(0).i32();
    p.uleb(1).u8(0).i32().uleb(1).uleb(1).uleb(0);
    p.uleb(1).uleb(int(Opcode::AllocateShared)).uleb(1).uleb(0).u8(0);
    p.u8(1).dtype(2, 1).u8(1).uleb(1).sleb(1 << 20).u8(1);
    p.u8(4).u8(3).u8(0).uleb(1).uleb(1 << 10).u8(0).uleb(1).uleb(1 << 10).uleb(3).uleb(3).uleb(3);
    p.uleb(1).u8(0).uleb(0);
    return decodeModule(makeFile(programsOf({p})), limits);
  };
  BytecodeLimits limits;
  const int64_t visits = 4 * (1 << 20) + (1 << 20) + 2 * (1 << 10);
  limits.maxTotalLayoutElements = visits;
  CHECK_OK(prog(limits));
  limits.maxTotalLayoutElements = visits - 1;
  Expected<Module> m = prog(limits);
  REQUIRE_FALSE(m.ok());
  CHECK(contains(m.status().first().message, "layout elements of the module exceed limit"));
}
