// Layout inference over one program's IR (docs/layout-inference.md).
//
// 1. Types: one pass in program order derives every tensor's kind, dtype and shape (the tile
//    shape of a hole comes from its `shape=`, or for LoadShared from the sliced dimensions).
// 2. Classes: register tensors that must share one layout are merged (union-find): an
//    instruction's result with its `out=` target, a Cast with its operand, an elementwise result
//    with its operands of the result's shape, a Dot's result with its accumulator. Layouts that
//    follow from another tensor's are *derivations*: Reduce and Permute results from their
//    operand, a broadcast operand from the elementwise result that reads it. Written layouts fix
//    their class.
// 3. Solving, in this order: the Dot rule for every Dot (mma atoms for the types and the warp
//    count; a variant the written layouts fit), then derivations, then the load/store rule for
//    the remaining classes that touch memory, then for the rest (elementwise-only tensors),
//    deriving after each choice.
// 4. Conflicts: an operand whose layout fails the checker's cover rule (or a Dot operand that
//    fits no arrangement) gets a ConvertLayout to the layout its reader needs, said in a note; a
//    tensor whose own layout is forced two ways (a written or derived layout of the variable
//    itself, a View of an inferred layout) is `layout-infer`, naming both constraints.
// 5. Shared layouts from the register layouts that access each shared tensor.
#include "assembler/layout_infer.h"

#include "assembler/layout_rules.h"
#include "assembler/lexer.h"
#include "isa/shape.h"
#include "isa/wgmma_fragment.h"

#include <algorithm>
#include <set>

namespace tilus::tasm {

namespace {

/// At most this many variants per choice point enter the candidate space.
constexpr size_t kMaxDotChoices = 4;
constexpr size_t kMaxVectorChoices = 3;

struct Tensor {
  VarKind kind = VarKind::None;
  DataType dtype;
  std::vector<int64_t> shape; // register and shared tensors
  bool known = false;         // the kind-specific facts above are known
  int rank = 0;               // global tensors
  int unitDim = -1;           // global tensors: the dimension with a constant unit stride
  VarId sharedRoot = kNoId;   // shared tensors: the AllocateShared result it views
  bool fromInt = false;       // register tensors: a Cast of an integer tensor to a float type
};

/// A set of register tensors with one layout.
struct Class {
  std::optional<RegisterLayout> layout;
  std::string rule;     // why it has this layout
  bool written = false; // a written layout fixed it
  std::string holeAt;   // an instruction of the class whose layout was left out
  bool memory = false;  // some member is loaded or stored
  int memoryBits = 0;   // the narrowest element loaded or stored
  int vectorDim = -1;   // the tile dimension with unit stride in that memory
  uint32_t first = UINT32_MAX;
  std::vector<int64_t> shape;
  DataType dtype;
  bool shapeKnown = false;
  std::string noLayout; // why the load/store rule found no layout (empty: it did not run)
};

enum class DeriveKind : uint8_t { Reduce, Permute, Broadcast };

struct Derivation {
  DeriveKind kind;
  VarId from, to;
  uint32_t inst;
  int dim = 0;
  bool keep = false;
  std::vector<int64_t> dims; // Permute
};

struct ElementwiseUse {
  uint32_t inst;
  VarId result;
  std::vector<std::pair<size_t, VarId>> operands; // (argument slot, tensor)
  bool layoutWritten = false;
};

struct DotUse {
  uint32_t inst;
  VarId a, b, c, d;
  size_t slotA, slotB;
};

struct SharedAccess {
  VarId root;
  VarId reg;
};

/// The candidate index read as a mixed-radix number, one digit per choice point.
struct Chooser {
  int64_t rest = 0;
  int64_t total = 1;
  size_t pick(size_t options) {
    if (options <= 1)
      return 0;
    size_t k = size_t(rest % int64_t(options));
    rest /= int64_t(options);
    total = std::min<int64_t>(total * int64_t(options), int64_t(1) << 20);
    return k;
  }
};

std::optional<int64_t> constInt(const Program &p, ExprId id) {
  if (id == kNoId || id >= p.exprs.size())
    return std::nullopt;
  const ExprNode &n = p.exprs[id];
  if (n.op != ExprOp::Const || !(n.dtype.isInt() || n.dtype.isBool()))
    return std::nullopt;
  uint64_t bits = n.bits;
  if (n.dtype.bits < 64) {
    uint64_t mask = (uint64_t(1) << n.dtype.bits) - 1;
    bits &= mask;
    if (n.dtype.isSigned() && (bits >> (n.dtype.bits - 1)) & 1)
      bits |= ~mask;
  }
  return int64_t(bits);
}

bool isElementwise(InstructionCategory c) {
  return c == InstructionCategory::Arithmetic || c == InstructionCategory::Bitwise ||
         c == InstructionCategory::Comparison || c == InstructionCategory::Unary ||
         c == InstructionCategory::Math || c == InstructionCategory::Select;
}

class Inference {
public:
  Inference(const Program &p, const InferInput &in, const std::string &file, int64_t candidate)
      : p_(p), in_(in), file_(file) {
    chooser_.rest = candidate;
    t_.resize(p.vars.size());
    parent_.resize(p.vars.size());
    cls_.resize(p.vars.size());
    for (VarId v = 0; v < p.vars.size(); ++v)
      parent_[v] = v;
  }

  Expected<LayoutDecisions> run(LayoutReport *report);
  std::vector<PerformanceLayout> performanceOnly();

private:
  // --- types and classes (pass 1) ---
  void visit(uint32_t i);
  void visitMemoryLoad(uint32_t i, const Instruction &inst, bool global);
  void visitElementwise(uint32_t i, const Instruction &inst);
  void visitDot(uint32_t i, const Instruction &inst);
  void visitWgmma(uint32_t i, const Instruction &inst);
  void declareRegister(VarId v, DataType dtype, std::vector<int64_t> shape, uint32_t i);
  void fix(VarId v, const RegisterLayout &l, uint32_t i);
  void markMemory(VarId v, int bits, int vectorDim);
  VarId find(VarId v) {
    while (parent_[v] != v)
      v = parent_[v] = parent_[parent_[v]];
    return v;
  }
  bool unite(VarId x, VarId y);
  std::vector<int64_t> tileShapeFromOffsets(const Tensor &mem, const Instruction &inst) const;
  int tileDim(const Instruction &inst, int memDim) const;

  // --- solving (pass 2) ---
  void assign(VarId v, const RegisterLayout &l, std::string rule);
  void closure();
  std::optional<RegisterLayout> derive(const Derivation &d, const RegisterLayout &from) const;
  void solveDot(const DotUse &u);
  void solveWgmma(const std::pair<uint32_t, VarId> &u);
  bool wgmmaAccumulator(VarId root);
  bool pendingDerivation(VarId root);
  void solveFree();
  std::optional<std::pair<RegisterLayout, std::string>> broadcastUp(VarId root);
  void resolveElementwise();
  void checkDerivations();
  void checkViews();
  /// `marks` (one per class) spread along the Reduce and Permute derivations, whose result's
  /// layout follows from the operand's: from operands to results, or back (`toOperands`)
  void spreadAlongDerivations(std::vector<bool> &marks, bool toOperands);
  void chooseShared();
  void emit(LayoutReport *report);

  std::string where(uint32_t i) const {
    const SourceLoc &l = p_.instructions[i].loc;
    return std::to_string(l.line) + ":" + std::to_string(l.column);
  }
  std::string opName(uint32_t i) const { return p_.instructions[i].spec().name; }
  std::string at(uint32_t i) const { return opName(i) + " at " + where(i); }
  std::string name(VarId v) const { return "'" + p_.vars[v].name + "'"; }
  Location location(uint32_t i) const {
    return makeLocation(file_, SrcPos{p_.instructions[i].loc.line, p_.instructions[i].loc.column});
  }
  void fail(uint32_t i, std::string message) {
    errors_.append(Status::error(ErrorCode::LayoutInfer, std::move(message), location(i)));
  }
  void note(uint32_t i, const std::string &message) {
    notes_.push_back(location(i).toString() + ": note[layout-infer]: " + message);
  }
  void convert(uint32_t i, size_t slot, VarId operand, const RegisterLayout &to,
               const std::string &why);
  int64_t bytesOf(VarId v) const {
    const Tensor &t = t_[v];
    return productOf(t.shape) * std::max(1, t.dtype.storageBits() / 8);
  }

  const Program &p_;
  const InferInput &in_;
  const std::string &file_;
  Chooser chooser_;
  int64_t threads_ = 128;
  /// Per instruction: the threads of the thread group that runs it, 0 outside groups (docs/isa.md,
  /// "Thread groups"); and the threads of the first parallel statement together (0: none).
  std::vector<int64_t> groupThreads_;
  int64_t parallelThreads_ = 0;
  void markGroups(const std::vector<Stmt> &body, int64_t threads);
  /// The threads that run instruction `inst` (UINT32_MAX: the block's).
  int64_t threadsAt(uint32_t inst) const {
    return inst < groupThreads_.size() && groupThreads_[inst] != 0 ? groupThreads_[inst] : threads_;
  }
  std::vector<Tensor> t_;
  std::vector<VarId> parent_;
  std::vector<Class> cls_;
  std::vector<Derivation> derivations_;
  std::vector<ElementwiseUse> elementwise_;
  std::vector<DotUse> dots_;
  std::vector<std::pair<uint32_t, VarId>> wgmmas_; // (instruction, accumulator)
  // shared tensors read by Wgmma or copied by TmaLoad / TmaStore: their layouts carry meaning
  std::set<VarId> descriptorRoots_;
  std::vector<std::pair<uint32_t, VarId>> views_; // (View, operand)
  std::vector<SharedAccess> sharedAccesses_;
  std::vector<uint32_t> registerHoles_, sharedHoles_;
  LayoutDecisions decisions_;
  std::vector<std::string> notes_;
  std::vector<std::pair<uint32_t, std::string>> lines_;
  Status errors_;
};

// ---------------------------------------------------------------- pass 1: types and classes

void Inference::declareRegister(VarId v, DataType dtype, std::vector<int64_t> shape, uint32_t i) {
  Tensor &t = t_[v];
  t.kind = VarKind::Register;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.known = true;
  Class &c = cls_[find(v)];
  c.first = std::min(c.first, i);
  if (!c.shapeKnown) {
    c.shape = t.shape;
    c.dtype = dtype;
    c.shapeKnown = true;
  }
}

void Inference::fix(VarId v, const RegisterLayout &l, uint32_t i) {
  Class &c = cls_[find(v)];
  if (c.layout)
    return; // two written layouts on one variable: the checker's update-type / layout-mismatch
  c.layout = l;
  c.written = true;
  c.rule = "written at " + where(i);
}

void Inference::markMemory(VarId v, int bits, int vectorDim) {
  if (v == kNoId || t_[v].kind != VarKind::Register)
    return;
  Class &c = cls_[find(v)];
  c.memory = true;
  c.memoryBits = c.memoryBits == 0 ? bits : std::min(c.memoryBits, bits);
  if (c.vectorDim < 0)
    c.vectorDim = vectorDim;
}

bool Inference::unite(VarId x, VarId y) {
  VarId rx = find(x), ry = find(y);
  if (rx == ry)
    return true;
  Class &a = cls_[rx], &b = cls_[ry];
  if (a.layout && b.layout && !(*a.layout == *b.layout))
    return false;
  if (!a.layout && b.layout) {
    a.layout = b.layout;
    a.rule = b.rule;
    a.written = b.written;
  } else if (a.layout && b.layout) {
    a.written = a.written || b.written;
  }
  a.memory = a.memory || b.memory;
  if (b.memoryBits != 0)
    a.memoryBits = a.memoryBits == 0 ? b.memoryBits : std::min(a.memoryBits, b.memoryBits);
  if (a.vectorDim < 0)
    a.vectorDim = b.vectorDim;
  if (a.holeAt.empty())
    a.holeAt = b.holeAt;
  if (!a.shapeKnown && b.shapeKnown) {
    a.shape = b.shape;
    a.dtype = b.dtype;
    a.shapeKnown = true;
  }
  a.first = std::min(a.first, b.first);
  parent_[ry] = rx;
  return true;
}

std::vector<int64_t> Inference::tileShapeFromOffsets(const Tensor &mem,
                                                     const Instruction &inst) const {
  const Argument &off = inst.arg(ArgName::offset);
  if (!off.present)
    return mem.shape;
  std::vector<int64_t> shape;
  for (size_t d = 0; d < off.offsets.size() && d < mem.shape.size(); ++d) {
    if (!off.offsets[d].slice)
      continue;
    std::optional<int64_t> start = constInt(p_, off.offsets[d].expr);
    shape.push_back(mem.shape[d] - (start && *start > 0 ? *start : 0));
  }
  return shape;
}

/// The tile dimension that memory dimension `memDim` becomes (-1: fixed by the offset).
int Inference::tileDim(const Instruction &inst, int memDim) const {
  if (memDim < 0)
    return -1;
  const Argument &off = inst.arg(ArgName::offset);
  if (!off.present)
    return memDim;
  int k = 0;
  for (size_t d = 0; d < off.offsets.size(); ++d) {
    if (int(d) == memDim)
      return off.offsets[d].slice ? k : -1;
    if (off.offsets[d].slice)
      ++k;
  }
  return -1;
}

void Inference::visitMemoryLoad(uint32_t i, const Instruction &inst, bool global) {
  VarId mem = inst.arg(global ? ArgName::g : ArgName::s).var;
  if (mem == kNoId || inst.results.empty() || !t_[mem].known)
    return;
  const Tensor &m = t_[mem];
  const Argument &layout = inst.arg(ArgName::layout);
  std::vector<int64_t> shape;
  if (layout.present && layout.regLayout)
    shape = layout.regLayout->shape();
  else if (!in_.holeShapes[i].empty())
    shape = in_.holeShapes[i];
  else if (!global)
    shape = tileShapeFromOffsets(m, inst);
  else
    return;
  VarId r = inst.results[0];
  declareRegister(r, m.dtype, shape, i);
  if (layout.present && layout.regLayout)
    fix(r, *layout.regLayout, i);
  int unit = global ? m.unitDim : int(m.shape.size()) - 1;
  markMemory(r, m.dtype.storageBits(), tileDim(inst, unit));
  if (!global)
    sharedAccesses_.push_back({m.sharedRoot, r});
}

void Inference::visitElementwise(uint32_t i, const Instruction &inst) {
  if (inst.results.empty())
    return;
  ElementwiseUse use{i, inst.results[0], {}, false};
  const InstructionSpec &spec = inst.spec();
  std::vector<int64_t> shape;
  std::optional<DataType> dtype;
  for (size_t k = 0; k < spec.args.size(); ++k) {
    const Argument &a = inst.args[k];
    if (spec.args[k].kind != ArgKind::Value || !a.isTensor())
      continue;
    const Tensor &t = t_[a.var];
    if (t.kind != VarKind::Register || !t.known)
      return; // the checker reports it
    use.operands.push_back({k, a.var});
    // numpy broadcasting, aligned on the right
    std::vector<int64_t> s = t.shape;
    if (s.size() > shape.size())
      shape.insert(shape.begin(), s.size() - shape.size(), 1);
    for (size_t d = 0; d < s.size(); ++d) {
      int64_t &r = shape[shape.size() - s.size() + d];
      if (r == 1)
        r = s[d];
      else if (s[d] != 1 && s[d] != r)
        return; // shape-mismatch: the checker's
    }
    if (!(spec.opcode == Opcode::Where && k == 0) && !dtype)
      dtype = t.dtype;
  }
  if (use.operands.empty())
    return;
  if (!dtype)
    dtype = t_[use.operands[0].second].dtype;
  if (spec.category == InstructionCategory::Comparison)
    dtype = DataType::boolean();
  VarId r = use.result;
  declareRegister(r, *dtype, shape, i);
  int li = spec.argIndex("layout");
  if (li >= 0 && inst.args[size_t(li)].present && inst.args[size_t(li)].regLayout) {
    fix(r, *inst.args[size_t(li)].regLayout, i);
    use.layoutWritten = true;
  }
  for (auto [slot, v] : use.operands) {
    if (t_[v].shape == shape) {
      unite(r, v); // a failure is resolved by a ConvertLayout (resolveElementwise)
      continue;
    }
    derivations_.push_back({DeriveKind::Broadcast, r, v, i, 0, false, {}});
  }
  elementwise_.push_back(std::move(use));
}

void Inference::visitDot(uint32_t i, const Instruction &inst) {
  VarId a = inst.arg(ArgName::a).var, b = inst.arg(ArgName::b).var, c = inst.arg(ArgName::c).var;
  if (a == kNoId || b == kNoId || c == kNoId || inst.results.empty())
    return;
  if (!t_[a].known || !t_[b].known || !t_[c].known)
    return;
  VarId d = inst.results[0];
  declareRegister(d, t_[c].dtype, t_[c].shape, i);
  if (!unite(d, c))
    fail(i, "the Dot's result " + name(d) + " has layout " + cls_[find(d)].layout->toString() +
                " (" + cls_[find(d)].rule + ") but its accumulator " + name(c) + " has " +
                cls_[find(c)].layout->toString() + " (" + cls_[find(c)].rule +
                "); the Dot writes its result in the accumulator's layout");
  const InstructionSpec &spec = inst.spec();
  dots_.push_back({i, a, b, c, d, size_t(spec.argIndex("a")), size_t(spec.argIndex("b"))});
}

void Inference::visitWgmma(uint32_t i, const Instruction &inst) {
  for (ArgName operand : {ArgName::a, ArgName::b}) {
    VarId v = inst.arg(operand).var;
    if (v != kNoId && t_[v].sharedRoot != kNoId)
      descriptorRoots_.insert(t_[v].sharedRoot);
  }
  VarId c = inst.arg(ArgName::c).var;
  if (c == kNoId || inst.results.empty() || !t_[c].known || t_[c].kind != VarKind::Register)
    return;
  VarId d = inst.results[0];
  declareRegister(d, t_[c].dtype, t_[c].shape, i);
  unite(d, c); // out= names the accumulator (the checker's rule otherwise)
  wgmmas_.push_back({i, c});
}

void Inference::visit(uint32_t i) {
  const Instruction &inst = p_.instructions[i];
  const InstructionSpec &spec = inst.spec();
  VarId r = inst.results.empty() ? kNoId : inst.results[0];
  bool hole = in_.holes[i];
  auto layoutArg = [&]() -> std::optional<RegisterLayout> {
    int k = spec.argIndex("layout");
    if (k < 0 || !inst.args[size_t(k)].present)
      return std::nullopt;
    return inst.args[size_t(k)].regLayout;
  };
  Opcode op = spec.opcode;
  if (op == Opcode::ViewGlobal) {
    VarId ptr = inst.arg(ArgName::ptr).var;
    if (r == kNoId)
      return;
    Tensor &t = t_[r];
    t.kind = VarKind::Global;
    const Argument &dt = inst.arg(ArgName::dtype);
    t.dtype = dt.present ? dt.dtype : (ptr != kNoId ? p_.vars[ptr].dtype : DataType::u(8));
    const Argument &shape = inst.arg(ArgName::shape);
    t.rank = shape.present ? int(shape.exprs.size()) : 1;
    t.unitDim = t.rank - 1;
    const Argument &strides = inst.arg(ArgName::strides);
    if (strides.present) {
      t.unitDim = -1;
      for (size_t d = 0; d < strides.exprs.size(); ++d)
        if (constInt(p_, strides.exprs[d]) == 1)
          t.unitDim = int(d);
    }
    t.known = true;
    return;
  }
  if (op == Opcode::AllocateGlobal) {
    if (r == kNoId)
      return;
    Tensor &t = t_[r];
    t.kind = VarKind::Global;
    t.dtype = inst.arg(ArgName::dtype).dtype;
    t.rank = int(inst.arg(ArgName::shape).exprs.size());
    t.unitDim = t.rank - 1;
    t.known = true;
    return;
  }
  if (op == Opcode::SliceGlobal) {
    VarId g = inst.arg(ArgName::g).var;
    if (r == kNoId || g == kNoId || !t_[g].known)
      return;
    Tensor &t = t_[r];
    t = t_[g];
    t.unitDim = tileDim(inst, t_[g].unitDim);
    int slices = 0;
    for (const OffsetEntry &e : inst.arg(ArgName::offset).offsets)
      slices += e.slice ? 1 : 0;
    t.rank = slices;
    return;
  }
  if (op == Opcode::AllocateShared) {
    if (r == kNoId)
      return;
    Tensor &t = t_[r];
    t.kind = VarKind::Shared;
    t.dtype = inst.arg(ArgName::dtype).dtype;
    t.shape = inst.arg(ArgName::shape).ints;
    t.sharedRoot = r;
    t.known = true;
    if (hole)
      sharedHoles_.push_back(i);
    return;
  }
  if (op == Opcode::SliceShared) {
    VarId s = inst.arg(ArgName::s).var;
    if (r == kNoId || s == kNoId || !t_[s].known)
      return;
    Tensor t = t_[s];
    const Argument &shape = inst.arg(ArgName::shape);
    t.shape = shape.present ? shape.ints : tileShapeFromOffsets(t_[s], inst);
    t_[r] = t;
    return;
  }
  if (op == Opcode::PermuteShared) {
    VarId s = inst.arg(ArgName::s).var;
    if (r == kNoId || s == kNoId || !t_[s].known)
      return;
    Tensor t = t_[s];
    const std::vector<int64_t> &dims = inst.arg(ArgName::dims).ints;
    if (dims.size() != t.shape.size())
      return; // bad-argument: the checker's
    for (size_t k = 0; k < dims.size(); ++k)
      if (dims[k] < 0 || size_t(dims[k]) >= t.shape.size())
        return;
    for (size_t k = 0; k < dims.size(); ++k)
      t.shape[k] = t_[s].shape[size_t(dims[k])];
    t_[r] = t;
    return;
  }
  if (op == Opcode::LoadGlobal || op == Opcode::LoadShared) {
    visitMemoryLoad(i, inst, op == Opcode::LoadGlobal);
    if (hole && r != kNoId && t_[r].known) {
      registerHoles_.push_back(i);
      if (cls_[find(r)].holeAt.empty())
        cls_[find(r)].holeAt = at(i);
    }
    return;
  }
  if (op == Opcode::StoreGlobal || op == Opcode::StoreShared) {
    bool global = op == Opcode::StoreGlobal;
    VarId reg = inst.arg(ArgName::r).var;
    VarId mem = inst.arg(global ? ArgName::g : ArgName::s).var;
    if (reg == kNoId || mem == kNoId || !t_[mem].known)
      return;
    int unit = global ? t_[mem].unitDim : int(t_[mem].shape.size()) - 1;
    markMemory(reg, t_[mem].dtype.storageBits(), tileDim(inst, unit));
    if (!global)
      sharedAccesses_.push_back({t_[mem].sharedRoot, reg});
    return;
  }
  if (op == Opcode::AllocateRegister || op == Opcode::Iota) {
    if (r == kNoId)
      return;
    std::optional<RegisterLayout> l = layoutArg();
    std::vector<int64_t> shape = l ? l->shape() : in_.holeShapes[i];
    if (!l && shape.empty() && op == Opcode::AllocateRegister && inst.arg(ArgName::shape).present)
      shape = inst.arg(ArgName::shape).ints;
    if (!l && !hole)
      return;
    const Argument &dt = inst.arg(ArgName::dtype);
    declareRegister(r, dt.present ? dt.dtype : DataType::i32(), shape, i);
    if (l) {
      fix(r, *l, i);
    } else {
      registerHoles_.push_back(i);
      if (cls_[find(r)].holeAt.empty())
        cls_[find(r)].holeAt = at(i);
    }
    return;
  }
  if (op == Opcode::Cast) {
    VarId a = inst.arg(ArgName::a).var;
    if (r == kNoId || a == kNoId || !t_[a].known || t_[a].kind != VarKind::Register)
      return;
    DataType to = inst.arg(ArgName::dtype).dtype;
    declareRegister(r, to, t_[a].shape, i);
    t_[r].fromInt = t_[a].dtype.isInt() && to.isFloat();
    unite(r, a);
    return;
  }
  if (op == Opcode::View) {
    VarId a = inst.arg(ArgName::a).var;
    if (r == kNoId || a == kNoId || !t_[a].known || t_[a].kind != VarKind::Register)
      return;
    const Argument &dt = inst.arg(ArgName::dtype);
    std::optional<RegisterLayout> l = layoutArg();
    declareRegister(r, dt.present ? dt.dtype : t_[a].dtype, l ? l->shape() : t_[a].shape, i);
    if (l)
      fix(r, *l, i);
    else
      unite(r, a);
    views_.push_back({i, a});
    return;
  }
  if (op == Opcode::Permute) {
    VarId a = inst.arg(ArgName::a).var;
    if (r == kNoId || a == kNoId || !t_[a].known || t_[a].kind != VarKind::Register)
      return;
    const std::vector<int64_t> &dims = inst.arg(ArgName::dims).ints;
    std::vector<int64_t> shape;
    for (int64_t d : dims) {
      if (d < 0 || size_t(d) >= t_[a].shape.size())
        return;
      shape.push_back(t_[a].shape[size_t(d)]);
    }
    declareRegister(r, t_[a].dtype, shape, i);
    derivations_.push_back({DeriveKind::Permute, a, r, i, 0, false, dims});
    return;
  }
  if (op == Opcode::ConvertLayout) {
    VarId a = inst.arg(ArgName::a).var;
    std::optional<RegisterLayout> l = layoutArg();
    if (r == kNoId || a == kNoId || !t_[a].known || !l)
      return;
    declareRegister(r, t_[a].dtype, l->shape(), i);
    fix(r, *l, i);
    return;
  }
  if (op == Opcode::Reduce) {
    VarId a = inst.arg(ArgName::a).var;
    if (r == kNoId || a == kNoId || !t_[a].known || t_[a].kind != VarKind::Register)
      return;
    int dim = int(inst.arg(ArgName::dim).intValue);
    bool keep = inst.arg(ArgName::keepdim).present && inst.arg(ArgName::keepdim).intValue != 0;
    std::vector<int64_t> shape = t_[a].shape;
    if (dim < 0 || size_t(dim) >= shape.size())
      return;
    if (keep)
      shape[size_t(dim)] = 1;
    else
      shape.erase(shape.begin() + dim);
    declareRegister(r, t_[a].dtype, shape, i);
    if (std::optional<RegisterLayout> l = layoutArg())
      fix(r, *l, i);
    derivations_.push_back({DeriveKind::Reduce, a, r, i, dim, keep, {}});
    return;
  }
  if (op == Opcode::Dot) {
    visitDot(i, inst);
    return;
  }
  if (op == Opcode::Wgmma) {
    visitWgmma(i, inst);
    return;
  }
  if (op == Opcode::AtomicLoad) {
    // x's tile in the written layout (docs/isa.md, "AtomicLoad and AtomicStore")
    VarId mem = inst.arg(ArgName::x).var;
    const Argument &layout = inst.arg(ArgName::layout);
    if (mem == kNoId || r == kNoId || !t_[mem].known || !layout.present || !layout.regLayout)
      return;
    declareRegister(r, t_[mem].dtype, layout.regLayout->shape(), i);
    fix(r, *layout.regLayout, i);
    return;
  }
  if (spec.category == InstructionCategory::Atomic && op != Opcode::Fence) {
    // The old values are a register tensor of dst's dtype in r's layout (AtomicCas's cmp has
    // that layout too), so a View of them reinterprets r's layout (docs/isa.md, "Atomics").
    VarId reg = inst.arg(ArgName::r).var;
    if (reg == kNoId || !t_[reg].known || t_[reg].kind != VarKind::Register)
      return;
    if (op == Opcode::AtomicCas) {
      VarId cmp = inst.arg(ArgName::cmp).var;
      if (cmp != kNoId && t_[cmp].known && t_[cmp].kind == VarKind::Register)
        unite(cmp, reg);
    }
    if (r == kNoId)
      return;
    declareRegister(r, t_[reg].dtype, t_[reg].shape, i);
    unite(r, reg);
    return;
  }
  if (op == Opcode::TmaLoad || op == Opcode::TmaStore || op == Opcode::TmaLoadMulticast) {
    VarId v = inst.arg(ArgName::s).var; // a box the tensor memory accelerator writes or reads
    if (v != kNoId && t_[v].sharedRoot != kNoId)
      descriptorRoots_.insert(t_[v].sharedRoot);
    return;
  }
  if (isElementwise(spec.category))
    visitElementwise(i, inst);
}

// ---------------------------------------------------------------- pass 2: solving

void Inference::assign(VarId v, const RegisterLayout &l, std::string rule) {
  Class &c = cls_[find(v)];
  c.layout = l;
  c.rule = std::move(rule);
}

std::optional<RegisterLayout> Inference::derive(const Derivation &d,
                                                const RegisterLayout &from) const {
  switch (d.kind) {
  case DeriveKind::Reduce: {
    Expected<RegisterLayout> l = from.reduce(d.dim, d.keep);
    if (!l)
      return std::nullopt;
    return std::move(l).value();
  }
  case DeriveKind::Permute: {
    Expected<RegisterLayout> l = from.permute(d.dims);
    if (!l)
      return std::nullopt;
    return std::move(l).value();
  }
  case DeriveKind::Broadcast:
    return broadcastLayout(from, t_[d.to].shape);
  }
  return std::nullopt;
}

void Inference::closure() {
  for (bool changed = true; changed;) {
    changed = false;
    for (const Derivation &d : derivations_) {
      Class &from = cls_[find(d.from)], &to = cls_[find(d.to)];
      if (from.layout && !to.layout) {
        std::optional<RegisterLayout> l = derive(d, *from.layout);
        if (!l)
          continue;
        const char *what = d.kind == DeriveKind::Reduce    ? "reduce rule: the operand's layout"
                           : d.kind == DeriveKind::Permute ? "permute rule: the operand's layout"
                                                           : "broadcast rule: the layout of ";
        std::string rule =
            d.kind == DeriveKind::Broadcast
                ? std::string(what) + opName(d.inst) + "'s result at " + where(d.inst) +
                      " reduced over the broadcast dimensions"
                : std::string(what) + " through the " + opName(d.inst) + " at " + where(d.inst);
        assign(d.to, *l, rule);
        changed = true;
      } else if (!from.layout && to.layout && d.kind == DeriveKind::Reduce && d.keep &&
                 !wgmmaAccumulator(find(d.from))) {
        // Backwards through a keepdim Reduce: the result's layout with the reduced dimension
        // held in local slots reduces to it (m = Reduce(AllocateRegister(...)) before a loop
        // that updates m from another Reduce). Not into a Wgmma accumulator, whose layout is
        // a wgmma fragment (the Wgmma rule's).
        std::vector<int64_t> ones(t_[d.from].shape.size(), 1);
        if (size_t(d.dim) >= ones.size())
          continue;
        ones[size_t(d.dim)] = t_[d.from].shape[size_t(d.dim)];
        Expected<RegisterLayout> local = RegisterLayout::local(ones);
        if (!local)
          continue;
        Expected<RegisterLayout> l = to.layout->product(*local);
        if (!l || !(derive(d, *l) == std::optional<RegisterLayout>(*to.layout)))
          continue;
        assign(d.from, std::move(l).value(),
               "reduce rule: the result's layout of the Reduce at " + where(d.inst) +
                   " with the reduced dimension in local slots");
        changed = true;
      } else if (!from.layout && to.layout && d.kind == DeriveKind::Permute) {
        std::vector<int64_t> inverse(d.dims.size());
        for (size_t k = 0; k < d.dims.size(); ++k)
          inverse[size_t(d.dims[k])] = int64_t(k);
        Expected<RegisterLayout> l = to.layout->permute(inverse);
        if (!l)
          continue;
        assign(d.from, std::move(l).value(),
               "permute rule: the result's layout of the Permute at " + where(d.inst) +
                   " permuted back");
        changed = true;
      }
    }
  }
}

void Inference::convert(uint32_t i, size_t slot, VarId operand, const RegisterLayout &to,
                        const std::string &why) {
  decisions_.conversions[{in_.calls[i], slot}] = to;
  note(i, "ConvertLayout of " + name(operand) + " (" + std::to_string(bytesOf(operand)) +
              " bytes) to " + to.toString() + " inserted before the " + opName(i) + ": " + why);
}

void Inference::solveDot(const DotUse &u) {
  const Tensor &ta = t_[u.a], &tb = t_[u.b], &tc = t_[u.c];
  if (ta.shape.size() != 2 || tb.shape.size() != 2 || tc.shape.size() != 2)
    return;
  int64_t m = tc.shape[0], n = tc.shape[1], k = ta.shape[1];
  std::optional<RegisterLayout> la = cls_[find(u.a)].layout, lb = cls_[find(u.b)].layout,
                                lc = cls_[find(u.c)].layout;
  for (const std::optional<RegisterLayout> *l : {&la, &lb, &lc})
    if (*l && (*l)->numThreads() != threadsAt(u.inst))
      return; // layout-threads: the checker's
  std::vector<DotPlan> plans = dotPlans(m, n, k, ta.dtype, tc.dtype, threadsAt(u.inst),
                                        operandCost(ta.fromInt), operandCost(tb.fromInt));
  // Last, the per-thread plan made from an accumulator whose layout is already decided.
  if (lc)
    if (std::optional<DotPlan> own = perThreadPlanFor(*lc, k))
      plans.push_back(std::move(*own));
  std::vector<const DotPlan *> fit;
  for (const DotPlan &p : plans)
    if (dotLayoutsFit(la ? *la : p.a, lb ? *lb : p.b, lc ? *lc : p.c, ta.dtype, tc.dtype, p.mma))
      fit.push_back(&p);
  // A result that a later Dot takes as an operand (P = softmax(Q K^T) into P V): plans whose
  // accumulator that Dot can take as it stands come first, so no ConvertLayout moves it.
  if (!lc) {
    auto consumable = [&](const DotPlan &p) {
      for (const DotUse &v : dots_) {
        if (v.inst <= u.inst)
          continue;
        bool asA = find(v.a) == find(u.d), asB = find(v.b) == find(u.d);
        if (!asA && !asB)
          continue;
        const Tensor &va = t_[v.a], &vb = t_[v.b], &vc = t_[v.c];
        if (va.shape.size() != 2 || vb.shape.size() != 2 || vc.shape.size() != 2)
          continue;
        bool any = false;
        for (const DotPlan &q :
             dotPlans(vc.shape[0], vc.shape[1], va.shape[1], va.dtype, vc.dtype, threadsAt(v.inst)))
          if (dotLayoutsFit(asA ? p.c : q.a, asB ? p.c : q.b, q.c, va.dtype, vc.dtype, q.mma)) {
            any = true;
            break;
          }
        if (!any)
          return false;
      }
      return true;
    };
    std::stable_partition(fit.begin(), fit.end(), [&](const DotPlan *p) { return consumable(*p); });
  }
  std::string dot = "Dot rule at " + where(u.inst) + ": ";
  if (!fit.empty()) {
    // Variants only among the mma arrangements when one fits.
    size_t choices = 0;
    while (choices < fit.size() && fit[choices]->mma == fit[0]->mma)
      ++choices;
    const DotPlan &p = *fit[chooser_.pick(std::min(choices, kMaxDotChoices))];
    std::string how = dot + p.describe(m, n);
    if (!la)
      assign(u.a, p.a, how + ", operand a");
    if (!lb)
      assign(u.b, p.b, how + ", operand b");
    if (!lc)
      assign(u.c, p.c, how + ", accumulator");
    return;
  }
  // Convert a and b (never the accumulator, which the Dot updates) to the cheapest plan.
  const DotPlan *best = nullptr;
  int64_t bestCost = INT64_MAX;
  for (const DotPlan &p : plans) {
    if (!dotLayoutsFit(p.a, p.b, lc ? *lc : p.c, ta.dtype, tc.dtype, p.mma))
      continue;
    int64_t cost =
        (la && !(*la == p.a) ? bytesOf(u.a) : 0) + (lb && !(*lb == p.b) ? bytesOf(u.b) : 0);
    if (cost < bestCost) {
      best = &p;
      bestCost = cost;
    }
  }
  if (!best) {
    const Class &c = cls_[find(u.c)];
    fail(u.inst, "no arrangement of the Dot of [" + std::to_string(m) + ", " + std::to_string(k) +
                     "] x [" + std::to_string(k) + ", " + std::to_string(n) + "] over " +
                     std::to_string(threads_) + " threads (the Dot rule) fits the accumulator " +
                     name(u.c) + ", whose layout " + c.layout->toString() + " is " + c.rule +
                     " (the Dot updates it in place, so it cannot be converted)");
    return;
  }
  std::string how = dot + best->describe(m, n);
  if (la && !(*la == best->a))
    convert(u.inst, u.slotA, u.a, best->a,
            "its layout (" + cls_[find(u.a)].rule + ") does not fit the Dot's " +
                best->describe(m, n));
  else if (!la)
    assign(u.a, best->a, how + ", operand a");
  if (lb && !(*lb == best->b))
    convert(u.inst, u.slotB, u.b, best->b,
            "its layout (" + cls_[find(u.b)].rule + ") does not fit the Dot's " +
                best->describe(m, n));
  else if (!lb)
    assign(u.b, best->b, how + ", operand b");
  if (!lc)
    assign(u.c, best->c, how + ", accumulator");
}

/// Whether the class `root` holds the accumulator of a Wgmma.
bool Inference::wgmmaAccumulator(VarId root) {
  for (const auto &u : wgmmas_)
    if (find(u.second) == root)
      return true;
  return false;
}

/// An accumulator of a Wgmma without a layout takes the wgmma fragment layout with the most
/// warpgroups along M (each warpgroup then reads its own rows of A and all of B's tile).
void Inference::solveWgmma(const std::pair<uint32_t, VarId> &u) {
  const Tensor &tc = t_[u.second];
  int64_t threads = threadsAt(u.first);
  if (cls_[find(u.second)].layout || tc.shape.size() != 2 || threads % 128 != 0)
    return;
  std::vector<WgmmaFragment> f = wgmmaFragments(tc.shape[0], tc.shape[1], int(threads / 128));
  if (f.empty())
    return; // wgmma-shape: the checker's
  assign(u.second, f.back().layout,
         "Wgmma rule at " + where(u.first) + ": " + std::to_string(f.back().wgM) + " x " +
             std::to_string(f.back().wgN) + " warpgroups, accumulator");
}

bool Inference::pendingDerivation(VarId root) {
  for (const Derivation &d : derivations_)
    if (find(d.to) == root && !cls_[find(d.from)].layout)
      return true;
  return false;
}

/// The broadcast rule, upwards: a class that no Dot or memory access decides and that is the
/// result of an elementwise instruction broadcasting operands of the same rank whose layouts are
/// decided takes the largest one's layout repeated in local slots along the broadcast
/// dimensions, so that operand is used where it is (no ConvertLayout): `Mul(q, kf)` with kf [1, P,
/// PG, KL, HD] into [GQ, P, PG, KL, HD] is local(GQ, 1, 1, 1, 1).(kf's layout).
std::optional<std::pair<RegisterLayout, std::string>> Inference::broadcastUp(VarId root) {
  const Class &c = cls_[root];
  std::optional<std::pair<RegisterLayout, std::string>> best;
  int64_t bestElems = 0;
  for (const Derivation &d : derivations_) {
    if (d.kind != DeriveKind::Broadcast || find(d.from) != root)
      continue;
    const Class &o = cls_[find(d.to)];
    const std::vector<int64_t> &os = t_[d.to].shape;
    if (!o.layout || os.size() != c.shape.size() || o.layout->numThreads() != threadsAt(c.first))
      continue;
    std::vector<int64_t> expand(os.size(), 1);
    int64_t elems = 1;
    bool ok = true;
    for (size_t k = 0; k < os.size(); ++k) {
      elems *= os[k];
      if (os[k] == c.shape[k])
        continue;
      if (os[k] != 1) {
        ok = false;
        break;
      }
      expand[k] = c.shape[k];
    }
    // the largest operand keeps its layout: converting another one would move more data
    if (!ok || elems <= bestElems)
      continue;
    Expected<RegisterLayout> rep = RegisterLayout::local(expand);
    if (!rep)
      continue;
    Expected<RegisterLayout> up = rep->product(*o.layout);
    if (!up || up->shape() != c.shape)
      continue;
    best = std::make_pair(std::move(up).value(),
                          "broadcast rule: " + name(d.to) + "'s layout (" + o.rule +
                              ") repeated along the broadcast dimensions at " + where(d.inst));
    bestElems = elems;
  }
  return best;
}

void Inference::solveFree() {
  for (;;) {
    closure();
    VarId pick = kNoId;
    // Loads and stores first, then everything else; program order within each; a class whose
    // layout will follow from another's waits for it.
    for (int pass = 0; pass < 3 && pick == kNoId; ++pass) {
      uint32_t best = UINT32_MAX;
      for (VarId v = 0; v < cls_.size(); ++v) {
        if (find(v) != v || t_[v].kind != VarKind::Register)
          continue;
        const Class &c = cls_[v];
        if (c.layout || !c.shapeKnown || c.first >= best)
          continue;
        if (pass == 0 && !c.memory)
          continue;
        if (pass < 2 && pendingDerivation(v))
          continue;
        best = c.first;
        pick = v;
      }
    }
    if (pick == kNoId)
      return;
    Class &c = cls_[pick];
    if (!c.memory) {
      if (std::optional<std::pair<RegisterLayout, std::string>> up = broadcastUp(pick)) {
        assign(pick, up->first, up->second);
        continue;
      }
    }
    int bits = c.memoryBits != 0 ? c.memoryBits : c.dtype.storageBits();
    int vdim = c.vectorDim >= 0 ? c.vectorDim : int(c.shape.size()) - 1;
    int64_t threads = threadsAt(c.first);
    std::vector<RegisterLayout> options = vectorLayouts(c.shape, bits, threads, vdim);
    if (options.empty()) {
      // nothing fits: left to the error below
      c.shapeKnown = false;
      std::string shape;
      for (int64_t d : c.shape)
        shape += (shape.empty() ? "" : ", ") + std::to_string(d);
      c.noLayout = "no layout of shape [" + shape + "] over " + std::to_string(threads) +
                   " threads stays within the " + std::to_string(kMaxLayoutCells) +
                   " cells (threads x elements per thread) a layout may have: the threads "
                   "divide too little of the shape, so each would hold it all; choose a tile "
                   "shape that the thread count divides, or write the layout";
      continue;
    }
    const RegisterLayout &l = options[chooser_.pick(std::min(options.size(), kMaxVectorChoices))];
    int64_t run = vectorRun(l, vdim);
    std::string rule = std::string("load/store rule: ") +
                       (c.memory ? "" : "no Dot or memory access decides it; ") + "runs of " +
                       std::to_string(run) + " elements (" + std::to_string(run * bits / 8) +
                       " bytes) along dimension " + std::to_string(vdim) + " over " +
                       std::to_string(threads) + " threads";
    // where the rule put fewer elements per thread before wider runs (vectorLayouts), say so
    const RegisterLayout *widest = &options[0];
    for (const RegisterLayout &o : options)
      if (vectorRun(o, vdim) > vectorRun(*widest, vdim))
        widest = &o;
    if (vectorRun(*widest, vdim) > run && widest->numLocals() > l.numLocals())
      rule += "; " + std::to_string(l.numLocals()) + " elements per thread (runs of " +
              std::to_string(vectorRun(*widest, vdim)) + " elements would leave each thread " +
              std::to_string(widest->numLocals()) + ")";
    assign(pick, l, rule);
  }
}

void Inference::resolveElementwise() {
  for (const ElementwiseUse &u : elementwise_) {
    const Class &rc = cls_[find(u.result)];
    if (!rc.layout)
      continue;
    const RegisterLayout &result = *rc.layout;
    bool firstFull = true, needLayout = true;
    const Instruction &inst = p_.instructions[u.inst];
    for (auto [slot, v] : u.operands) {
      const Class &oc = cls_[find(v)];
      if (!oc.layout || oc.layout->numThreads() != result.numThreads())
        continue;
      bool full = t_[v].shape == t_[u.result].shape;
      std::optional<RegisterLayout> read = *oc.layout;
      if (!covers(result, *oc.layout)) {
        read = full ? std::optional<RegisterLayout>(result) : broadcastLayout(result, t_[v].shape);
        if (!read)
          continue;
        convert(u.inst, slot, v, *read,
                "its layout (" + oc.rule +
                    ") does not give every thread the elements it needs "
                    "for the result's layout (" +
                    rc.rule + ")");
      }
      if (full && firstFull) {
        firstFull = false;
        needLayout = !(*read == result);
      }
    }
    // The checker takes the first operand of the result's shape; write the layout otherwise.
    if (needLayout && !u.layoutWritten && !inst.out)
      decisions_.registerLayouts[in_.calls[u.inst]] = result;
  }
}

void Inference::checkDerivations() {
  for (const Derivation &d : derivations_) {
    if (d.kind == DeriveKind::Broadcast)
      continue;
    const Class &from = cls_[find(d.from)], &to = cls_[find(d.to)];
    if (!from.layout || !to.layout)
      continue;
    std::optional<RegisterLayout> l = derive(d, *from.layout);
    if (!l || *l == *to.layout)
      continue;
    fail(d.inst, "the " + opName(d.inst) + " gives " + name(d.to) + " the layout " + l->toString() +
                     " (from its operand's layout, " + from.rule + "), but " + name(d.to) +
                     " has the layout " + to.layout->toString() + " (" + to.rule +
                     "); a variable's own layout cannot be converted");
  }
}

void Inference::spreadAlongDerivations(std::vector<bool> &marks, bool toOperands) {
  for (bool grew = true; grew;) {
    grew = false;
    for (const Derivation &d : derivations_) {
      if (d.kind == DeriveKind::Broadcast)
        continue;
      VarId from = find(toOperands ? d.to : d.from), to = find(toOperands ? d.from : d.to);
      if (marks[from] && !marks[to])
        grew = marks[to] = true;
    }
  }
}

void Inference::checkViews() {
  // a class whose layout is written, or follows by Reduce or Permute from such a class (the
  // words that a Reduce gathers from a written tile), fixes which bits mean which elements
  std::vector<bool> fixed(cls_.size(), false);
  for (size_t k = 0; k < cls_.size(); ++k)
    fixed[k] = cls_[k].written;
  spreadAlongDerivations(fixed, false);
  for (auto [i, v] : views_) {
    const Class &c = cls_[find(v)];
    if (fixed[find(v)])
      continue;
    fail(i, "the View reinterprets the bits of " + name(v) +
                ", so which bits mean which elements depends on its layout, but that layout is "
                "left out (" +
                (c.holeAt.empty() ? std::string("no instruction writes it") : c.holeAt) +
                "): write layout= there");
  }
}

void Inference::chooseShared() {
  for (uint32_t i : sharedHoles_) {
    const Instruction &inst = p_.instructions[i];
    if (inst.results.empty())
      continue;
    VarId s = inst.results[0];
    const Tensor &t = t_[s];
    if (descriptorRoots_.count(s)) {
      // the hardware reads it (wgmma descriptors, TMA boxes): the ISA's row_major default,
      // which is a TMA box when its rows are whole 16-byte chunks
      SharedLayout l = SharedLayout::rowMajor(t.shape).value();
      decisions_.sharedLayouts[in_.calls[i]] = l;
      lines_.push_back({i, location(i).toString() + ": " + p_.vars[s].name + " = " + opName(i) +
                               ": " + l.toString() +
                               "  [shared rule: read by Wgmma or copied by the tensor memory "
                               "accelerator: the row_major default]"});
      continue;
    }
    bool columns = false;
    std::string reader;
    for (const SharedAccess &a : sharedAccesses_) {
      const Class &c = cls_[find(a.reg)];
      if (a.root != s || !c.layout)
        continue;
      if (readsColumnChunks(*c.layout, t.dtype.storageBits())) {
        columns = true;
        reader = c.layout->toString();
        break;
      }
    }
    SharedLayout l = sharedLayoutFor(t.shape, t.dtype.storageBits(), columns);
    decisions_.sharedLayouts[in_.calls[i]] = l;
    std::string rule =
        columns ? (l.kind() == SharedLayout::Kind::Swizzle
                       ? "shared rule: accessed in " + reader +
                             ", which reads 16-byte column chunks of several rows at once; "
                             "16-byte chunks XORed with the row, conflict-free"
                       : "shared rule: accessed by column chunks, but no swizzle fits the shape")
                : "shared rule: every access reads whole rows";
    lines_.push_back({i, location(i).toString() + ": " + p_.vars[s].name + " = " + opName(i) +
                             ": " + l.toString() + "  [" + rule + "]"});
  }
}

void Inference::emit(LayoutReport *report) {
  for (uint32_t i : registerHoles_) {
    const Instruction &inst = p_.instructions[i];
    VarId r = inst.results[0];
    const Class &c = cls_[find(r)];
    if (!c.layout) {
      fail(i, "cannot infer the layout of " + name(r) + ": " +
                  (c.noLayout.empty() ? "its shape is unknown (give shape=)" : c.noLayout));
      continue;
    }
    decisions_.registerLayouts[in_.calls[i]] = *c.layout;
    lines_.push_back({i, location(i).toString() + ": " + p_.vars[r].name + " = " + opName(i) +
                             ": " + c.layout->toString() + "  [" + c.rule + "]"});
  }
  for (const ElementwiseUse &u : elementwise_) {
    auto it = decisions_.registerLayouts.find(in_.calls[u.inst]);
    if (it != decisions_.registerLayouts.end())
      lines_.push_back({u.inst, location(u.inst).toString() + ": " + p_.vars[u.result].name +
                                    " = " + opName(u.inst) + ": " + it->second.toString() + "  [" +
                                    cls_[find(u.result)].rule + "]"});
  }
  std::stable_sort(lines_.begin(), lines_.end(),
                   [](const auto &x, const auto &y) { return x.first < y.first; });
  if (p_.threads == 0)
    decisions_.threads = uint32_t(threads_);
  if (!report)
    return;
  if (p_.threads == 0)
    report->lines.push_back(makeLocation(file_, SrcPos{p_.loc.line, p_.loc.column}).toString() +
                            ": " + p_.name + ": threads=" + std::to_string(threads_));
  for (auto &[i, line] : lines_)
    report->lines.push_back(line);
  report->notes.insert(report->notes.end(), notes_.begin(), notes_.end());
  report->candidates = std::min<int64_t>(report->candidates * chooser_.total, int64_t(1) << 20);
}

void Inference::markGroups(const std::vector<Stmt> &body, int64_t threads) {
  for (const Stmt &s : body) {
    if (s.kind == StmtKind::Instruction && s.index < groupThreads_.size())
      groupThreads_[s.index] = threads;
    if (s.kind == StmtKind::Parallel && parallelThreads_ == 0)
      for (const Stmt &g : s.body)
        parallelThreads_ += int64_t(g.threads) * int64_t(g.copies);
    markGroups(s.body, s.kind == StmtKind::Group ? int64_t(s.threads) : threads);
    markGroups(s.orelse, threads);
  }
}

Expected<LayoutDecisions> Inference::run(LayoutReport *report) {
  for (uint32_t i = 0; i < p_.instructions.size(); ++i)
    visit(i);
  groupThreads_.assign(p_.instructions.size(), 0);
  markGroups(p_.body, 0);
  // The block size: threads= when written, else the threads of the groups of the first parallel
  // statement, else the thread count of the first written register layout outside groups, else
  // four warps.
  if (p_.threads != 0) {
    threads_ = p_.threads;
  } else if (parallelThreads_ != 0) {
    threads_ = parallelThreads_;
  } else {
    for (const Instruction &inst : p_.instructions) {
      bool found = false;
      for (const Argument &a : inst.args)
        if (a.present && a.regLayout && a.regLayout->rank() >= 0) {
          threads_ = a.regLayout->numThreads();
          found = true;
          break;
        }
      if (found)
        break;
    }
  }
  closure();
  for (const auto &u : wgmmas_) {
    solveWgmma(u);
    closure();
  }
  for (const DotUse &u : dots_) {
    solveDot(u);
    closure();
  }
  solveFree();
  resolveElementwise();
  checkDerivations();
  checkViews();
  chooseShared();
  emit(report);
  if (!errors_.ok())
    return errors_;
  return decisions_;
}

std::vector<PerformanceLayout> Inference::performanceOnly() {
  for (uint32_t i = 0; i < p_.instructions.size(); ++i)
    visit(i);
  std::vector<bool> meaningful(cls_.size(), false);
  for (auto [i, v] : views_)
    meaningful[find(v)] = true;
  // a Reduce or Permute result's layout follows from its operand's: where the result feeds a
  // View (the bits of words gathered by a Reduce, then viewed), so does the operand's layout
  spreadAlongDerivations(meaningful, true);
  // a call lowered more than once (the two copies of a loop whose unroll hint is a choice by a
  // parameter, a macro body expanded twice) is listed once, and only where every instruction
  // lowered from it qualifies with a layout of the same shape (the shape= that replaces it is
  // one list for all of them: a macro's expansions may give the tile other shapes)
  std::map<const AstExpr *, size_t> lowered, qualified;
  std::map<const AstExpr *, std::vector<int64_t>> shapes;
  for (uint32_t i = 0; i < p_.instructions.size(); ++i)
    ++lowered[in_.calls[i].call];
  std::vector<PerformanceLayout> out;
  for (uint32_t i = 0; i < p_.instructions.size(); ++i) {
    const Instruction &inst = p_.instructions[i];
    const InstructionSpec &spec = inst.spec();
    Opcode op = spec.opcode;
    bool family = op == Opcode::AllocateRegister || op == Opcode::Iota ||
                  op == Opcode::LoadGlobal || op == Opcode::LoadShared ||
                  op == Opcode::AllocateShared || op == Opcode::Reduce ||
                  isElementwise(spec.category);
    int li = spec.argIndex("layout");
    if (!family || li < 0 || !inst.args[size_t(li)].present || inst.results.empty())
      continue;
    const Argument &l = inst.args[size_t(li)];
    VarId r = inst.results[0];
    if (op != Opcode::AllocateShared && (t_[r].kind != VarKind::Register || meaningful[find(r)]))
      continue;
    if (op == Opcode::AllocateShared && descriptorRoots_.count(r))
      continue; // a Wgmma operand or a TMA tile: its layout must fit a descriptor or a box
    const AstExpr *call = in_.calls[i].call;
    std::vector<int64_t> shape = l.regLayout ? l.regLayout->shape() : std::vector<int64_t>{};
    auto [first, inserted] = shapes.emplace(call, shape);
    if (!inserted && first->second != shape)
      continue; // never all of them
    if (++qualified[call] == lowered[call])
      out.push_back({call, op, std::move(shape)});
  }
  return out;
}

} // namespace

std::vector<PerformanceLayout> performanceOnlyLayouts(const Program &program,
                                                      const InferInput &input) {
  static const std::string file;
  return Inference(program, input, file, 0).performanceOnly();
}

Expected<LayoutDecisions> inferLayouts(const Program &program, const InferInput &input,
                                       const std::string &fileName, int64_t candidate,
                                       LayoutReport *report) {
  return Inference(program, input, fileName, candidate).run(report);
}

} // namespace tilus::tasm
