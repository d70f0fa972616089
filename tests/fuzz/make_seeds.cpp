// Writes the fuzzer's seed corpus (tests/fuzz/corpus/*.tbc): modules built in memory that
// mirror programs of programs/ (vector add, row softmax, the pipelined f16 matmul, the paper's
// f16 x i6 matmul) and one that exercises every remaining instruction, argument kind and
// statement kind, plus every .tasm file named on the command line, assembled; each with and
// without debug info. Seeds that pass the checker let the fuzzer reach deep into it; the tool
// prints, per seed, whether the checker accepts it.
//
// Usage: make_seeds OUTPUT_DIR [PROGRAM.tasm...]   (scripts/fuzz.sh --seeds runs it)
#include "assembler/assembler.h"
#include "isa/bytecode.h"
#include "loader/checker.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

using namespace tilus;

namespace {

RegisterLayout chain(std::initializer_list<Expected<RegisterLayout>> parts) {
  RegisterLayout l;
  bool first = true;
  for (const Expected<RegisterLayout> &p : parts) {
    if (!p.ok()) {
      std::fprintf(stderr, "make_seeds: %s\n", p.status().toString().c_str());
      std::exit(1);
    }
    Expected<RegisterLayout> next = first ? p : l.product(*p);
    if (!next.ok()) {
      std::fprintf(stderr, "make_seeds: %s\n", next.status().toString().c_str());
      std::exit(1);
    }
    l = *next;
    first = false;
  }
  return l;
}

template <typename T> T must(Expected<T> e) {
  if (!e.ok()) {
    std::fprintf(stderr, "make_seeds: %s\n", e.status().toString().c_str());
    std::exit(1);
  }
  return std::move(e).value();
}

Argument value(VarId v) {
  Argument a;
  a.present = true;
  a.var = v;
  return a;
}
Argument scalar(ExprId e) {
  Argument a;
  a.present = true;
  a.expr = e;
  return a;
}
Argument integer(int64_t v) {
  Argument a;
  a.present = true;
  a.intValue = v;
  return a;
}
Argument dtype(DataType t) {
  Argument a;
  a.present = true;
  a.dtype = t;
  return a;
}
Argument reg(RegisterLayout l) {
  Argument a;
  a.present = true;
  a.regLayout = std::move(l);
  return a;
}
Argument shared(SharedLayout l) {
  Argument a;
  a.present = true;
  a.sharedLayout = std::move(l);
  return a;
}
Argument ints(std::vector<int64_t> v) {
  Argument a;
  a.present = true;
  a.ints = std::move(v);
  return a;
}
Argument exprs(std::vector<ExprId> v) {
  Argument a;
  a.present = true;
  a.exprs = std::move(v);
  return a;
}
Argument offsets(std::vector<OffsetEntry> v) {
  Argument a;
  a.present = true;
  a.offsets = std::move(v);
  return a;
}
Argument text(std::string s) {
  Argument a;
  a.present = true;
  a.text = std::move(s);
  return a;
}

/// A tiny assembler-like builder: statements go to the innermost open block; every expression
/// helper creates fresh nodes (expressions are trees); locations count lines.
class Builder {
public:
  explicit Builder(std::string name, uint32_t threads) {
    p_.name = std::move(name);
    p_.threads = threads;
    p_.loc = next();
    blocks_.push_back(&p_.body);
  }

  VarId param(const std::string &name, VarKind kind, DataType t) {
    VarId v = var(name, kind, t);
    p_.vars[v].isParam = true;
    p_.params.push_back(v);
    return v;
  }
  VarId var(const std::string &name, VarKind kind, DataType t = DataType::i32()) {
    p_.vars.push_back(Variable{name, kind, t, false});
    return VarId(p_.vars.size() - 1);
  }
  VarId temp(VarKind kind) { return var("_t" + std::to_string(temps_++), kind); }

  ExprId c(int64_t v, DataType t = DataType::i32()) {
    ExprNode e;
    e.op = ExprOp::Const;
    e.dtype = t;
    e.bits = t.bits >= 64 ? uint64_t(v) : uint64_t(v) & ((uint64_t(1) << t.bits) - 1);
    return node(e);
  }
  ExprId f32(uint32_t bits) { return c(bits, DataType::f32()); }
  ExprId v(VarId x) {
    ExprNode e;
    e.op = ExprOp::Var;
    e.dtype = p_.vars[x].dtype;
    e.var = x;
    return node(e);
  }
  ExprId op(ExprOp o, std::initializer_list<ExprId> operands, DataType t = DataType::i32()) {
    ExprNode e;
    e.op = o;
    e.dtype = t;
    int k = 0;
    for (ExprId id : operands)
      e.operands[k++] = id;
    return node(e);
  }
  ExprId cmp(ExprOp o, ExprId a, ExprId b) { return op(o, {a, b}, DataType::boolean()); }

  void grid(std::vector<ExprId> g) { p_.grid = std::move(g); }

  /// An instruction statement; `args` by name, the rest absent.
  uint32_t inst(Opcode opc, std::vector<VarId> results,
                std::vector<std::pair<const char *, Argument>> args, bool out = false) {
    Instruction i;
    i.opcode = opc;
    i.results = std::move(results);
    i.out = out;
    const InstructionSpec &spec = instructionSpec(opc);
    i.args.resize(spec.args.size());
    for (auto &[name, a] : args) {
      size_t k = 0;
      while (k < spec.args.size() && std::string_view(spec.args[k].name) != name)
        ++k;
      assert(k < spec.args.size() && "the opcode has an argument of that name");
      i.args[k] = std::move(a);
    }
    i.loc = next();
    p_.instructions.push_back(std::move(i));
    Stmt s;
    s.kind = StmtKind::Instruction;
    s.index = uint32_t(p_.instructions.size() - 1);
    s.loc = p_.instructions.back().loc;
    blocks_.back()->push_back(s);
    return s.index;
  }
  void assign(VarId target, ExprId e) {
    Stmt s;
    s.kind = StmtKind::Assign;
    s.var = target;
    s.expr = e;
    s.loc = next();
    blocks_.back()->push_back(std::move(s));
  }
  void simple(StmtKind kind) {
    Stmt s;
    s.kind = kind;
    s.loc = next();
    blocks_.back()->push_back(std::move(s));
  }
  void forLoop(VarId var, ExprId start, ExprId stop, ExprId step, const std::function<void()> &body,
               uint32_t unroll = 0) {
    Stmt s;
    s.kind = StmtKind::For;
    s.unroll = unroll; // statement kind 10 in the bytecode where set
    s.var = var;
    s.expr = start;
    s.stop = stop;
    s.step = step;
    s.loc = next();
    nest(std::move(s), body);
  }
  void whileLoop(ExprId cond, const std::function<void()> &body) {
    Stmt s;
    s.kind = StmtKind::While;
    s.expr = cond;
    s.loc = next();
    nest(std::move(s), body);
  }
  void ifElse(ExprId cond, const std::function<void()> &then,
              const std::function<void()> &orelse = nullptr) {
    Stmt s;
    s.kind = StmtKind::If;
    s.expr = cond;
    s.loc = next();
    std::vector<Stmt> *parent = blocks_.back();
    parent->push_back(std::move(s));
    Stmt &placed = parent->back();
    blocks_.push_back(&placed.body);
    then();
    blocks_.pop_back();
    if (orelse) {
      Stmt &again = parent->back();
      blocks_.push_back(&again.orelse);
      orelse();
      blocks_.pop_back();
    }
  }

  Program take() { return std::move(p_); }

private:
  ExprId node(const ExprNode &e) {
    p_.exprs.push_back(e);
    return ExprId(p_.exprs.size() - 1);
  }
  SourceLoc next() { return SourceLoc{++line_, 5}; }
  void nest(Stmt s, const std::function<void()> &body) {
    std::vector<Stmt> *parent = blocks_.back();
    parent->push_back(std::move(s));
    blocks_.push_back(&parent->back().body);
    body();
    blocks_.pop_back();
  }

  Program p_;
  std::vector<std::vector<Stmt> *> blocks_;
  uint32_t temps_ = 0;
  uint32_t line_ = 0;
};

const DataType kI32 = DataType::i32(), kF32 = DataType::f32(), kF16 = DataType::f16();

Program vectorAdd() {
  Builder b("vector_add", 128);
  VarId x = b.param("x_ptr", VarKind::Pointer, kF32), y = b.param("y_ptr", VarKind::Pointer, kF32);
  VarId z = b.param("z_ptr", VarKind::Pointer, kF32), n = b.param("n", VarKind::Scalar, kI32);
  b.grid({b.op(ExprOp::CeilDiv, {b.v(n), b.c(256)})});
  VarId bi = b.var("bi", VarKind::Scalar);
  b.inst(Opcode::BlockIndices, {bi}, {});
  VarId gx = b.var("gx", VarKind::Global), gy = b.var("gy", VarKind::Global);
  VarId gz = b.var("gz", VarKind::Global);
  b.inst(Opcode::ViewGlobal, {gx}, {{"ptr", value(x)}, {"shape", exprs({b.v(n)})}});
  b.inst(Opcode::ViewGlobal, {gy}, {{"ptr", value(y)}, {"shape", exprs({b.v(n)})}});
  b.inst(Opcode::ViewGlobal, {gz}, {{"ptr", value(z)}, {"shape", exprs({b.v(n)})}});
  RegisterLayout l = chain({RegisterLayout::spatial({128}), RegisterLayout::local({2})});
  VarId rx = b.var("x", VarKind::Register), ry = b.var("y", VarKind::Register);
  b.inst(Opcode::LoadGlobal, {rx},
         {{"g", value(gx)},
          {"layout", reg(l)},
          {"offset", offsets({{b.op(ExprOp::Mul, {b.v(bi), b.c(256)}), true}})}});
  // an eviction hint: the file carries LoadGlobal's evict arguments (header flag bit 3)
  b.inst(Opcode::LoadGlobal, {ry},
         {{"g", value(gy)},
          {"layout", reg(l)},
          {"offset", offsets({{b.op(ExprOp::Mul, {b.v(bi), b.c(256)}), true}})},
          {"evict", integer(int64_t(Eviction::First))}});
  VarId t = b.temp(VarKind::Register);
  b.inst(Opcode::Add, {t}, {{"a", value(rx)}, {"b", value(ry)}});
  b.inst(Opcode::StoreGlobal, {},
         {{"r", value(t)},
          {"g", value(gz)},
          {"offset", offsets({{b.op(ExprOp::Mul, {b.v(bi), b.c(256)}), true}})}});
  return b.take();
}

Program softmax() {
  Builder b("softmax", 128);
  VarId x = b.param("x_ptr", VarKind::Pointer, kF32), y = b.param("y_ptr", VarKind::Pointer, kF32);
  VarId m = b.param("m", VarKind::Scalar, kI32);
  b.grid({b.op(ExprOp::CeilDiv, {b.v(m), b.c(4)})});
  VarId bi = b.var("bi", VarKind::Scalar);
  b.inst(Opcode::BlockIndices, {bi}, {});
  VarId gx = b.var("gx", VarKind::Global), gy = b.var("gy", VarKind::Global);
  b.inst(Opcode::ViewGlobal, {gx}, {{"ptr", value(x)}, {"shape", exprs({b.v(m), b.c(128)})}});
  b.inst(Opcode::ViewGlobal, {gy}, {{"ptr", value(y)}, {"shape", exprs({b.v(m), b.c(128)})}});
  auto rows = [&] {
    return offsets({{b.op(ExprOp::Mul, {b.v(bi), b.c(4)}), true}, {b.c(0), true}});
  };
  VarId rx = b.var("x", VarKind::Register);
  b.inst(Opcode::LoadGlobal, {rx},
         {{"g", value(gx)},
          {"layout", reg(chain({RegisterLayout::spatial({4, 32}), RegisterLayout::local({1, 4})}))},
          {"offset", rows()}});
  VarId mx = b.var("mx", VarKind::Register);
  b.inst(Opcode::Reduce, {mx},
         {{"a", value(rx)},
          {"dim", integer(1)},
          {"op", integer(int64_t(ReduceOp::Max))},
          {"keepdim", integer(1)}});
  VarId t0 = b.temp(VarKind::Register), e = b.var("e", VarKind::Register);
  b.inst(Opcode::Sub, {t0}, {{"a", value(rx)}, {"b", value(mx)}});
  b.inst(Opcode::Exp, {e}, {{"a", value(t0)}});
  VarId s = b.var("s", VarKind::Register);
  b.inst(Opcode::Reduce, {s},
         {{"a", value(e)},
          {"dim", integer(1)},
          {"op", integer(int64_t(ReduceOp::Sum))},
          {"keepdim", integer(1)}});
  VarId t1 = b.temp(VarKind::Register);
  b.inst(Opcode::Div, {t1}, {{"a", value(e)}, {"b", value(s)}});
  b.inst(Opcode::StoreGlobal, {}, {{"r", value(t1)}, {"g", value(gy)}, {"offset", rows()}});
  return b.take();
}

Program pipelinedMatmul() {
  Builder b("matmul_f16", 128);
  VarId ap = b.param("a_ptr", VarKind::Pointer, kF16),
        bp = b.param("b_ptr", VarKind::Pointer, kF16);
  VarId cp = b.param("c_ptr", VarKind::Pointer, kF16), m = b.param("m", VarKind::Scalar, kI32);
  VarId n = b.param("n", VarKind::Scalar, kI32), k = b.param("k", VarKind::Scalar, kI32);
  b.grid({b.op(ExprOp::CeilDiv, {b.v(m), b.c(64)}), b.op(ExprOp::CeilDiv, {b.v(n), b.c(64)})});
  VarId bi = b.var("bi", VarKind::Scalar), bj = b.var("bj", VarKind::Scalar);
  b.inst(Opcode::BlockIndices, {bi, bj}, {});
  VarId ga = b.var("ga", VarKind::Global), gb = b.var("gb", VarKind::Global);
  VarId gc = b.var("gc", VarKind::Global);
  b.inst(Opcode::ViewGlobal, {ga}, {{"ptr", value(ap)}, {"shape", exprs({b.v(m), b.v(k)})}});
  b.inst(Opcode::ViewGlobal, {gb}, {{"ptr", value(bp)}, {"shape", exprs({b.v(k), b.v(n)})}});
  b.inst(Opcode::ViewGlobal, {gc}, {{"ptr", value(cp)}, {"shape", exprs({b.v(m), b.v(n)})}});
  VarId sa = b.var("sa", VarKind::Shared), sb = b.var("sb", VarKind::Shared);
  b.inst(Opcode::AllocateShared, {sa}, {{"dtype", dtype(kF16)}, {"shape", ints({3, 64, 32})}});
  b.inst(Opcode::AllocateShared, {sb}, {{"dtype", dtype(kF16)}, {"shape", ints({3, 32, 64})}});
  VarId acc = b.var("acc", VarKind::Register);
  b.inst(Opcode::AllocateRegister, {acc},
         {{"dtype", dtype(kF32)},
          {"layout", reg(chain({RegisterLayout::spatial({2, 2}), RegisterLayout::local({2, 4}),
                                RegisterLayout::local({2, 1}), RegisterLayout::spatial({8, 4}),
                                RegisterLayout::local({1, 2})}))}});
  VarId numK = b.var("num_k", VarKind::Scalar);
  b.assign(numK, b.op(ExprOp::CeilDiv, {b.v(k), b.c(32)}));
  auto issue = [&](std::function<ExprId()> stageExpr, std::function<ExprId()> kExpr) {
    VarId t0 = b.temp(VarKind::Shared);
    b.inst(Opcode::SliceShared, {t0},
           {{"s", value(sa)},
            {"offset", offsets({{stageExpr(), false}, {b.c(0), true}, {b.c(0), true}})}});
    b.inst(Opcode::CopyAsync, {},
           {{"s", value(t0)},
            {"g", value(ga)},
            {"offset", offsets({{b.op(ExprOp::Mul, {b.v(bi), b.c(64)}), true},
                                {b.op(ExprOp::Mul, {kExpr(), b.c(32)}), true}})}});
    VarId t1 = b.temp(VarKind::Shared);
    b.inst(Opcode::SliceShared, {t1},
           {{"s", value(sb)},
            {"offset", offsets({{stageExpr(), false}, {b.c(0), true}, {b.c(0), true}})}});
    b.inst(Opcode::CopyAsync, {},
           {{"s", value(t1)},
            {"g", value(gb)},
            {"offset", offsets({{b.op(ExprOp::Mul, {kExpr(), b.c(32)}), true},
                                {b.op(ExprOp::Mul, {b.v(bj), b.c(64)}), true}})}});
  };
  VarId s = b.var("s", VarKind::Scalar);
  b.forLoop(
      s, b.c(0), b.c(2), b.c(1),
      [&] {
        b.ifElse(b.cmp(ExprOp::Lt, b.v(s), b.v(numK)),
                 [&] { issue([&] { return b.v(s); }, [&] { return b.v(s); }); });
        b.inst(Opcode::CopyAsyncCommitGroup, {}, {});
      },
      /*unroll=*/2);
  VarId kt = b.var("kt", VarKind::Scalar);
  b.forLoop(kt, b.c(0), b.v(numK), b.c(1), [&] {
    b.inst(Opcode::CopyAsyncWaitGroup, {}, {{"n", integer(1)}});
    b.inst(Opcode::Synchronize, {}, {});
    VarId stage = b.var("stage", VarKind::Scalar);
    b.assign(stage, b.op(ExprOp::Mod, {b.v(kt), b.c(3)}));
    VarId ra = b.var("a", VarKind::Register), rb = b.var("b", VarKind::Register);
    auto stageOffset = [&] {
      return offsets({{b.v(stage), false}, {b.c(0), true}, {b.c(0), true}});
    };
    b.inst(
        Opcode::LoadShared, {ra},
        {{"s", value(sa)},
         {"layout", reg(chain({RegisterLayout::spatial({2, 1}), RegisterLayout::replicate(2),
                               RegisterLayout::local({2, 2}), RegisterLayout::columnLocal({2, 2}),
                               RegisterLayout::spatial({8, 4}), RegisterLayout::local({1, 2})}))},
         {"offset", stageOffset()}});
    b.inst(Opcode::LoadShared, {rb},
           {{"s", value(sb)},
            {"layout",
             reg(chain({RegisterLayout::replicate(2), RegisterLayout::spatial({1, 2}),
                        RegisterLayout::local({2, 4}), RegisterLayout::local({2, 1}),
                        RegisterLayout::columnSpatial({4, 8}), RegisterLayout::local({2, 1})}))},
            {"offset", stageOffset()}});
    VarId nxt = b.var("nxt", VarKind::Scalar);
    b.assign(nxt, b.op(ExprOp::Add, {b.v(kt), b.c(2)}));
    b.ifElse(b.cmp(ExprOp::Lt, b.v(nxt), b.v(numK)), [&] {
      issue([&] { return b.op(ExprOp::Mod, {b.v(nxt), b.c(3)}); }, [&] { return b.v(nxt); });
    });
    b.inst(Opcode::CopyAsyncCommitGroup, {}, {});
    b.inst(Opcode::Dot, {acc}, {{"a", value(ra)}, {"b", value(rb)}, {"c", value(acc)}}, true);
  });
  VarId t = b.temp(VarKind::Register);
  b.inst(Opcode::Cast, {t}, {{"a", value(acc)}, {"dtype", dtype(kF16)}});
  b.inst(Opcode::StoreGlobal, {},
         {{"r", value(t)},
          {"g", value(gc)},
          {"offset", offsets({{b.op(ExprOp::Mul, {b.v(bi), b.c(64)}), true},
                              {b.op(ExprOp::Mul, {b.v(bj), b.c(64)}), true}})}});
  return b.take();
}

/// The paper's f16 x i6 matmul (ISA section 9), M = N = K = 1024.
Program paperMatmul() {
  Builder b("matmul", 32);
  VarId ap = b.param("a_ptr", VarKind::Pointer, kF16);
  VarId tp = b.param("transformed_b_ptr", VarKind::Pointer, DataType::u(8));
  VarId cp = b.param("c_ptr", VarKind::Pointer, kF16);
  b.grid({b.c(64), b.c(128)});
  VarId bi = b.var("bi", VarKind::Scalar), bj = b.var("bj", VarKind::Scalar);
  b.inst(Opcode::BlockIndices, {bi, bj}, {});
  VarId ga = b.var("ga", VarKind::Global), gb = b.var("gb", VarKind::Global);
  VarId gc = b.var("gc", VarKind::Global);
  b.inst(Opcode::ViewGlobal, {ga},
         {{"ptr", value(ap)}, {"dtype", dtype(kF16)}, {"shape", exprs({b.c(1024), b.c(1024)})}});
  b.inst(Opcode::ViewGlobal, {gb},
         {{"ptr", value(tp)},
          {"dtype", dtype(DataType::u(8))},
          {"shape", exprs({b.c(64), b.c(128), b.c(96)})}});
  b.inst(Opcode::ViewGlobal, {gc},
         {{"ptr", value(cp)}, {"dtype", dtype(kF16)}, {"shape", exprs({b.c(1024), b.c(1024)})}});
  RegisterLayout cFrag = chain({RegisterLayout::local({2, 1}), RegisterLayout::spatial({8, 4}),
                                RegisterLayout::local({1, 2})});
  VarId acc = b.var("acc", VarKind::Register);
  b.inst(Opcode::AllocateRegister, {acc},
         {{"dtype", dtype(kF32)}, {"layout", reg(cFrag)}, {"init", scalar(b.f32(0))}});
  VarId bk = b.var("bk", VarKind::Scalar);
  b.forLoop(bk, b.c(0), b.c(64), b.c(1), [&] {
    VarId a = b.var("a", VarKind::Register), rb = b.var("b", VarKind::Register);
    b.inst(
        Opcode::LoadGlobal, {a},
        {{"g", value(ga)},
         {"layout", reg(chain({RegisterLayout::columnLocal({2, 2}), RegisterLayout::spatial({8, 4}),
                               RegisterLayout::local({1, 2})}))},
         {"offset", offsets({{b.op(ExprOp::Mul, {b.v(bi), b.c(16)}), true},
                             {b.op(ExprOp::Mul, {b.v(bk), b.c(16)}), true}})}});
    b.inst(Opcode::LoadGlobal, {rb},
           {{"g", value(gb)},
            {"layout", reg(chain({RegisterLayout::local({3}), RegisterLayout::spatial({32})}))},
            {"offset", offsets({{b.v(bk), false}, {b.v(bj), false}, {b.c(0), true}})}});
    VarId b1 = b.var("b1", VarKind::Register), b2 = b.var("b2", VarKind::Register);
    b.inst(
        Opcode::View, {b1},
        {{"a", value(rb)},
         {"dtype", dtype(DataType::i(6))},
         {"layout", reg(chain({RegisterLayout::local({2, 1}), RegisterLayout::columnSpatial({4, 8}),
                               RegisterLayout::local({2, 1})}))}});
    b.inst(Opcode::Cast, {b2}, {{"a", value(b1)}, {"dtype", dtype(kF16)}});
    b.inst(Opcode::Dot, {acc}, {{"a", value(a)}, {"b", value(b2)}, {"c", value(acc)}}, true);
  });
  VarId acc16 = b.var("acc", VarKind::Register);
  b.inst(Opcode::Cast, {acc16}, {{"a", value(acc)}, {"dtype", dtype(kF16)}});
  b.inst(Opcode::StoreGlobal, {},
         {{"r", value(acc16)},
          {"g", value(gc)},
          {"offset", offsets({{b.op(ExprOp::Mul, {b.v(bi), b.c(16)}), true},
                              {b.op(ExprOp::Mul, {b.v(bj), b.c(8)}), true}})}});
  return b.take();
}

/// Everything else: Iota, Where, comparisons, Permute, ConvertLayout, View, AllocateGlobal,
/// SliceGlobal, swizzled and tiled shared layouts, Print, Exit, while/break/continue, elif.
Program misc() {
  Builder b("misc", 64);
  VarId p = b.param("p", VarKind::Pointer, kF32), n = b.param("n", VarKind::Scalar, kI32);
  b.grid({b.c(2), b.op(ExprOp::Max, {b.v(n), b.c(1)}), b.c(1)});
  VarId bx = b.var("bx", VarKind::Scalar), by = b.var("by", VarKind::Scalar);
  VarId bz = b.var("bz", VarKind::Scalar);
  b.inst(Opcode::BlockIndices, {bx, by, bz}, {});
  RegisterLayout l = chain({RegisterLayout::spatial({8, 8}), RegisterLayout::local({2, 2})});
  VarId io = b.var("io", VarKind::Register), mask = b.var("mask", VarKind::Register);
  b.inst(Opcode::Iota, {io}, {{"layout", reg(l)}, {"dim", integer(1)}});
  b.inst(Opcode::Lt, {mask}, {{"a", value(io)}, {"b", scalar(b.v(n))}});
  VarId z = b.var("z", VarKind::Register), w = b.var("w", VarKind::Register);
  b.inst(Opcode::AllocateRegister, {z},
         {{"dtype", dtype(kF32)}, {"layout", reg(l)}, {"init", scalar(b.f32(0x3f800000))}});
  b.inst(Opcode::Where, {w}, {{"c", value(mask)}, {"a", value(z)}, {"b", scalar(b.f32(0))}});
  VarId wt = b.var("wt", VarKind::Register), wc = b.var("wc", VarKind::Register);
  b.inst(Opcode::Permute, {wt}, {{"a", value(w)}, {"dims", ints({1, 0})}});
  b.inst(Opcode::ConvertLayout, {wc},
         {{"a", value(wt)},
          {"layout",
           reg(chain({RegisterLayout::local({2, 2}), RegisterLayout::columnSpatial({8, 8})}))}});
  VarId wv = b.var("wv", VarKind::Register);
  b.inst(Opcode::View, {wv}, {{"a", value(wc)}, {"dtype", dtype(DataType::u(32))}});
  VarId ws = b.var("ws", VarKind::Global), gp = b.var("gp", VarKind::Global);
  VarId gs = b.var("gs", VarKind::Global);
  b.inst(Opcode::AllocateGlobal, {ws},
         {{"dtype", dtype(kI32)},
          {"shape", exprs({b.c(16), b.v(n)})},
          {"requires_clean", integer(1)}});
  b.inst(Opcode::ViewGlobal, {gp},
         {{"ptr", value(p)},
          {"shape", exprs({b.v(n), b.c(16)})},
          {"strides", exprs({b.c(32), b.c(1)})}});
  b.inst(Opcode::SliceGlobal, {gs},
         {{"g", value(gp)},
          {"offset", offsets({{b.v(bx), true}, {b.c(0), true}})},
          {"shape", exprs({b.c(16), b.c(16)})}});
  VarId sh = b.var("sh", VarKind::Shared);
  b.inst(Opcode::AllocateShared, {sh},
         {{"dtype", dtype(kF32)},
          {"shape", ints({16, 16})},
          {"layout", shared(must(SharedLayout::swizzle(
                         must(SharedLayout::tile(must(SharedLayout::strided({2, 2}, {1, 2})),
                                                 must(SharedLayout::columnMajor({8, 8})))),
                         2, 0, 3)))}});
  b.inst(Opcode::CopyAsync, {}, {{"s", value(sh)}, {"g", value(gs)}});
  b.inst(Opcode::CopyAsyncCommitGroup, {}, {});
  b.inst(Opcode::CopyAsyncWaitAll, {}, {});
  b.inst(Opcode::Synchronize, {}, {});
  VarId r = b.var("r", VarKind::Register);
  b.inst(
      Opcode::LoadShared, {r},
      {{"s", value(sh)},
       {"layout", reg(chain({RegisterLayout::spatial({16, 4}), RegisterLayout::local({1, 4})}))}});
  VarId i = b.var("i", VarKind::Scalar, kI32);
  b.assign(i, b.c(0));
  b.whileLoop(b.cmp(ExprOp::Lt, b.v(i), b.c(10)), [&] {
    b.assign(i, b.op(ExprOp::Add, {b.v(i), b.c(1)}));
    b.ifElse(
        b.cmp(ExprOp::Eq, b.op(ExprOp::Mod, {b.v(i), b.c(2)}), b.c(0)),
        [&] { b.simple(StmtKind::Continue); },
        [&] { b.ifElse(b.cmp(ExprOp::Gt, b.v(i), b.c(7)), [&] { b.simple(StmtKind::Break); }); });
    VarId t = b.temp(VarKind::Register);
    b.inst(Opcode::Exp2, {t}, {{"a", value(r)}});
    b.inst(Opcode::Add, {r}, {{"a", value(r)}, {"b", value(t)}}, true);
  });
  b.inst(Opcode::StoreShared, {}, {{"r", value(r)}, {"s", value(sh)}});
  b.inst(Opcode::Print, {}, {{"x", value(r)}, {"msg", text("r =")}});
  b.inst(Opcode::Print, {},
         {{"x", scalar(b.op(ExprOp::Select, {b.cmp(ExprOp::Ge, b.v(by), b.c(1)), b.v(bz),
                                             b.op(ExprOp::Neg, {b.v(bz)})}))}});
  b.ifElse(
      b.op(ExprOp::LogicalAnd,
           {b.cmp(ExprOp::Ne, b.v(bx), b.c(0)),
            b.op(ExprOp::LogicalNot, {b.cmp(ExprOp::Le, b.v(by), b.c(3))}, DataType::boolean())},
           DataType::boolean()),
      [&] { b.inst(Opcode::Exit, {}, {}); });
  return b.take();
}

Program tiny() {
  Builder b("tiny", 32);
  b.grid({b.c(1)});
  b.inst(Opcode::Synchronize, {}, {});
  return b.take();
}

bool write(const std::string &dir, const std::string &name, const Module &m, bool debug) {
  std::vector<uint8_t> bytes = encodeModule(m, {debug});
  std::string path = dir + "/" + name + (debug ? "_g" : "") + ".tbc";
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
  Expected<VerifiedModule> checked = checkModule(m);
  std::printf("%-24s %6zu bytes  checker: %s\n", (name + (debug ? "_g" : "") + ".tbc").c_str(),
              bytes.size(), checked.ok() ? "accepts" : checked.status().first().toString().c_str());
  return bool(out);
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: make_seeds OUTPUT_DIR [PROGRAM.tasm...]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const std::vector<std::pair<std::string, std::function<Program()>>> programs = {
      {"tiny", tiny},
      {"vector_add", vectorAdd},
      {"softmax", softmax},
      {"matmul_pipelined", pipelinedMatmul},
      {"paper_matmul", paperMatmul},
      {"misc", misc}};
  bool ok = true;
  Module all;
  for (const auto &[name, make] : programs) {
    Module m;
    m.programs = {make()};
    m.sourceName = name + ".tasm";
    m.sourceText = "# " + name + "\n";
    all.programs.push_back(m.programs[0]);
    for (bool debug : {false, true})
      ok = write(dir, name, m, debug) && ok;
  }
  all.sourceName = "all.tasm";
  ok = write(dir, "all", all, true) && ok;
  for (int i = 2; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    AssembleOptions options;
    options.fileName = argv[i];
    options.keepSource = true;
    Expected<Module> m = assemble(text.str(), options);
    if (!in || !m.ok()) {
      std::fprintf(stderr, "make_seeds: %s: %s\n", argv[i],
                   in ? m.status().toString().c_str() : "cannot read");
      ok = false;
      continue;
    }
    std::string name = "asm_" + std::filesystem::path(argv[i]).stem().string();
    for (bool debug : {false, true})
      ok = write(dir, name, *m, debug) && ok;
  }
  return ok ? 0 : 1;
}
