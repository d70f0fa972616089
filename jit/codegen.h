// The core of the code generator (internal to jit/): the builder, the variables' values,
// types, constants, scalar expressions, conversions, memory primitives and structured control
// flow that every family lowerer (lowering.h) emits with.
//
// One Codegen lowers one checked program into one NVPTX kernel function. It walks the
// structured body once, in order, keeping for every program variable its current value:
//   - scalars: one LLVM value of the element representation of their dtype (elemType);
//   - register tensors: one LLVM value per local slot of the calling thread (the slot index is
//     always a compile-time constant, so the array lives in registers);
//   - global views: root pointer, element offset, a validity flag and, per dimension, shape,
//     valid index range [lo, hi) and stride (the interpreter's GlobalView, vm/cpu/memory.h);
//   - shared views: per root dimension the origin, plus the static map from view dimensions
//     to root dimensions (the root's layout is static, checker-planned).
// A variable assigned once keeps plain SSA values (so constants stay visible to the lowering,
// e.g. a unit stride); a variable assigned more than once (loop-carried accumulators, loop
// variables, updates of enclosing-scope variables) lives in allocas that mem2reg promotes.
//
// The core lowers the structured statements itself (codegen.cpp) and hands each instruction to
// the lowerer of its family (InstructionRouter, lowering.h), one class per family in
// lower_<family>[_<topic>].cpp (the same families as the checker's check_<family>.cpp and the
// interpreter's exec_<family>.cpp); the value-level emitters that every family uses are
// emit_*.cpp.
#pragma once

#include "jit/jit.h"
#include "jit/layout_map.h"

#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace tilus::jit {

/// A global tensor at run time (see vm/cpu/memory.h GlobalView): element x lies at element
/// offset `offset + sum x_d * strides_d` from `ptr`; x is in bounds iff `valid` and lo_d <= x_d
/// < hi_d for every d. Sliced by the rules of isa/view_rules.h.
struct GlobalView {
  DataType dtype;
  llvm::Value *ptr = nullptr;                        // ptr addrspace(1)
  llvm::Value *offset = nullptr;                     // i64
  llvm::Value *valid = nullptr;                      // i1
  std::vector<llvm::Value *> shape, lo, hi, strides; // i64 per dimension
};

/// A shared tensor at run time: view element y is root element `origin + y_d` in root dimension
/// dims[d].
struct SharedView {
  VarId root = kNoId;
  DataType dtype;
  std::vector<int64_t> shape;        // static
  std::vector<int32_t> dims;         // static: view dimension -> root dimension
  std::vector<llvm::Value *> origin; // i64 per root dimension
};

/// Storage of one variable: a flat list of components (see the file comment).
struct VarStorage {
  bool multi = false;
  std::vector<llvm::Type *> types;
  std::vector<llvm::Value *> values;       // single assignment
  std::vector<llvm::AllocaInst *> allocas; // multi assignment
};

/// The tile that a load, store or copy touches: tile index k (one per slice entry of the
/// offset) is memory dimension dim[k]; the element offset of tile index x is
/// `offset + sum x_k * strides[k]` (global) and x is in bounds iff `valid` and lo_k <= x_k <
/// hi_k.
struct GlobalTile {
  DataType dtype;
  llvm::Value *ptr = nullptr;
  llvm::Value *offset = nullptr;
  llvm::Value *valid = nullptr;
  std::vector<llvm::Value *> lo, hi, strides;
};

/// The tile of a shared access: tile index k adds to root dimension dims[k] of `origin`.
/// Shared views and tiles carry no bounds: the JIT does not test shared accesses.
struct SharedTile {
  VarId root = kNoId;
  DataType dtype;
  std::vector<int32_t> dims;
  std::vector<llvm::Value *> origin;
};

class InstructionRouter;

/// The core of the code generator: what every family lowerer (lowering.h) emits with.
class Codegen {
public:
  Codegen(llvm::Module &module, const Program &program, const ProgramInfo &info,
          const JitOptions &options);

  /// Build the kernel function.
  Status run();

  /// The IR instructions that lowering each program instruction added (TILUSVM_JIT_TIMING=2):
  /// switched on by countIr(true) before run(), then one entry per lowered instruction, in
  /// program order.
  struct IrCount {
    size_t index;     // in Program::instructions
    const char *name; // the opcode's assembly name
    int64_t instructions;
  };
  void countIr(bool on) { countIr_ = on; }
  const std::vector<IrCount> &irCounts() const { return irCounts_; }

  /// The plain shared accesses analysed for bank conflicts (jit/bank_report.h), one per program
  /// instruction (a body lowered more than once, e.g. per thread-group copy, reports it once):
  /// switched on by reportSharedAccesses(true) before run().
  void reportSharedAccesses(bool on) { reportShared_ = on; }
  bool reportingSharedAccesses() const { return reportShared_; }
  void addSharedAccess(const SharedAccessReport &report);
  const std::vector<SharedAccessReport> &sharedAccesses() const { return sharedAccesses_; }

  llvm::Function *kernel() const { return fn_; }

  // ---- the builder and the inputs (used by every lowerer) ------------------------------------
  llvm::LLVMContext &ctx;
  llvm::Module &mod;
  llvm::IRBuilder<> b;
  const Program &prog;
  const ProgramInfo &info;
  const JitOptions &opts;

  // ---- types and constants (codegen.cpp) ----------------------------------------------------
  /// The representation of one element in registers: i1 (bool), iN (integers and the float
  /// formats without native LLVM type), half, bfloat, float, double.
  llvm::Type *elemType(DataType t);
  llvm::Value *constI32(int64_t v) { return b.getInt32(uint32_t(v)); }
  llvm::Value *constI64(int64_t v) { return b.getInt64(uint64_t(v)); }
  /// A constant of dtype t from its bit pattern.
  llvm::Value *constBits(DataType t, uint64_t bits);
  llvm::Value *zeroOf(DataType t) { return constBits(t, 0); }
  /// The value's bit pattern as an integer of t.bits bits (and back).
  llvm::Value *toBits(llvm::Value *v, DataType t);
  llvm::Value *fromBits(llvm::Value *bits, DataType t);
  /// The 32-bit register of `count` elements of type t at slots [first, first + count), the
  /// first in the lowest bits (a vector of the elements' bits, bit cast: one mov.b32 {..}).
  llvm::Value *packRegister32(const std::vector<llvm::Value *> &slots, int64_t first, int64_t count,
                              DataType t);
  /// A call of inline PTX `text` with side effects (never moved, merged or deleted), returning
  /// `ret` (void for none).
  llvm::CallInst *volatileAsm(llvm::Type *ret, const std::string &text,
                              const std::string &constraints, llvm::ArrayRef<llvm::Value *> args);
  /// The calling thread's index in the block, or inside a thread group in the group (i32).
  llvm::Value *tid();
  /// tid() from a fresh read of %tid.x (a volatile asm, which stays in its block: LICM cannot
  /// hoist what is computed from it) minus the thread group's first thread.
  llvm::Value *tidAfresh();
  /// The threads that execute the current statement: the block's, or a thread group's.
  int64_t threads() const { return group_.threads != 0 ? group_.threads : int64_t(info.threads); }
  llvm::Value *sharedBase(); // the dynamic shared memory, ptr addrspace(3)
  /// A call to an intrinsic or to a device library function.
  llvm::Value *callIntrinsic(llvm::Intrinsic::ID id, llvm::ArrayRef<llvm::Type *> types,
                             llvm::ArrayRef<llvm::Value *> args);
  llvm::Value *callDevlib(const char *name, llvm::ArrayRef<llvm::Value *> args);
  void barrier();
  Status error(ErrorCode code, const Instruction &inst, const std::string &message);

  // ---- variables (codegen.cpp) ---------------------------------------------------------------
  /// The value of a pointer parameter (ptr addrspace(1)).
  llvm::Value *readPointer(VarId v);
  llvm::Value *readScalar(VarId v);
  void writeScalar(VarId v, llvm::Value *value);
  std::vector<llvm::Value *> readRegister(VarId v);
  void writeRegister(VarId v, const std::vector<llvm::Value *> &slots);
  GlobalView readGlobal(VarId v);
  void writeGlobal(VarId v, const GlobalView &view);
  SharedView readShared(VarId v);
  Status writeShared(VarId v, const SharedView &view);
  const LayoutMap &layoutOf(VarId v);
  const LayoutMap &layoutMap(const RegisterLayout &layout);
  /// S_d(t) of a layout for the calling thread, i64 per dimension (cached per layout).
  const std::vector<llvm::Value *> &threadPart(const LayoutMap &map);
  /// gatherSlots(result, operand), computed once per pair of layouts that layoutMap returned
  /// (the unrolled steps of a loop repeat the same pairs); other maps are gathered each time.
  std::shared_ptr<const std::vector<SlotSource>> slotSources(const LayoutMap &result,
                                                             const LayoutMap &operand);
  /// Whether the calling thread is the primary owner of its elements (i1).
  llvm::Value *isPrimary(const LayoutMap &map);

  // ---- scalar expressions (emit_scalar.cpp) -------------------------------------------------
  llvm::Value *emitExpr(ExprId id);
  /// A scalar argument (expression) converted to dtype t.
  llvm::Value *scalarArg(const Argument &arg, DataType t);
  /// An expression as i64 (integers sign- or zero-extended, floats truncated).
  llvm::Value *exprI64(ExprId id);
  /// The truth of a value of type t (x != 0, NaN true), i1.
  llvm::Value *truth(llvm::Value *v, DataType t);
  /// An arithmetic, bitwise, comparison or logical operator applied in type t, with
  /// applyScalarOp's semantics (isa/scalar_eval.h). Comparisons return i1.
  llvm::Value *applyOp(ExprOp op, DataType t, llvm::Value *x, llvm::Value *y);
  llvm::Value *compareOp(ExprOp op, DataType t, llvm::Value *x, llvm::Value *y);
  llvm::Value *floatOp(ExprOp op, DataType t, llvm::Value *x, llvm::Value *y);
  llvm::Value *intOp(ExprOp op, DataType t, llvm::Value *x, llvm::Value *y);
  /// NaN results replaced by the canonical NaN of t (identity for non-floats).
  llvm::Value *canonicalizeNaN(llvm::Value *v, DataType t);

  // ---- conversions (emit_convert.cpp) -------------------------------------------------------
  /// Convert a value between any two types of ISA section 2.
  llvm::Value *convert(llvm::Value *v, DataType from, DataType to);
  /// Register slots of a low-bit integer or low-precision float type converted to f16 / bf16
  /// two at a time with packed arithmetic (emit_dequant.cpp); nullopt when no fast path
  /// applies. Bit-exact with convert().
  std::optional<std::vector<llvm::Value *>> dequantize(const std::vector<llvm::Value *> &slots,
                                                       DataType from, DataType to);
  /// dequantize() of integers of up to 8 bits into f16 / bf16 with two codes per mask and fma,
  /// read where they lie in the words they come from (emit_dequant_pairs.cpp).
  std::optional<std::vector<llvm::Value *>> dequantizePairs(const std::vector<llvm::Value *> &slots,
                                                            DataType from, DataType to);
  /// The same for the generic floats with E <= 4 (emit_dequant_pairs.cpp).
  std::optional<std::vector<llvm::Value *>>
  dequantizeFloatPairs(const std::vector<llvm::Value *> &slots, DataType from, DataType to);
  /// `slot * factor` without the multiplication where `slot` is a value of dequantizeFloatPairs
  /// (a lane of its one product per pair, `bits * 2^t`, exact) and `factor` the constant 2^-t:
  /// the lane of `bits` itself, the same value; nullptr otherwise (emit_dequant_pairs.cpp).
  llvm::Value *unscaledDequant(llvm::Value *slot, llvm::Value *factor);
  /// Whether `slot` is a lane of a Cast's exact dequantised pair (what unscaledDequant reads).
  bool isDequantLane(llvm::Value *slot) const;
  /// Register slots of f32, f16 or bf16 converted to f8e4m3 / f8e5m2 two at a time by the
  /// hardware's saturating pair conversion on sm_90 (emit_convert.cpp); nullopt elsewhere.
  /// Bit-exact with the ISA's conversion.
  std::optional<std::vector<llvm::Value *>> quantizeFp8(const std::vector<llvm::Value *> &slots,
                                                        DataType from, DataType to);
  /// Register slots of f32 rounded to f16 (sm_80 and later) or bf16 (sm_90) two at a time by
  /// the hardware's pair conversion (`cvt.rn.f16x2.f32`), each pair's NaNs made canonical by one
  /// marked select on the pair (lowered by nan_canonical.h's lowerPairCanonicalizations where it
  /// stays); nullopt elsewhere or for fewer than two slots. Bit-exact with convert().
  std::optional<std::vector<llvm::Value *>> narrowPairs(const std::vector<llvm::Value *> &slots,
                                                        DataType from, DataType to);
  /// Add, Sub or Mul of f16 register slots two at a time: slots 2i and 2i + 1 (a 32-bit register
  /// of a fragment or of a View of words) as one <2 x half> operation (`add/sub/mul.rn.f16x2`),
  /// its NaNs made canonical by one marked select on the pair, so that values that arrive and
  /// leave as pairs (dequantised words into an mma) are not split into halves around it; each
  /// lane rounds exactly as applyOp's scalar operation does (exact in f32, then rounded once).
  /// nullopt for other operations and types, fewer than two slots, or TILUSVM_JIT_PAIRS=0.
  std::optional<std::vector<llvm::Value *>> arithmeticPairs(ExprOp op, DataType t,
                                                            const std::vector<llvm::Value *> &xs,
                                                            const std::vector<llvm::Value *> &ys);

  // ---- control flow inside a lowering (codegen.cpp) -------------------------------------------
  /// Emits `then` in a block that runs only when `cond` (i1) holds (blocks `name` and
  /// `name.end`; the builder ends in the latter).
  void emitIf(llvm::Value *cond, const llvm::Twine &name, llvm::function_ref<void()> then);
  /// emitIf whose `then` produces values: returns, per value, its merge (a PHI) with the
  /// matching entry of `otherwise`, the value where `cond` does not hold.
  std::vector<llvm::Value *> emitIf(llvm::Value *cond, const llvm::Twine &name,
                                    const std::vector<llvm::Value *> &otherwise,
                                    llvm::function_ref<std::vector<llvm::Value *>()> then);
  /// Emits `then` where `cond` (i1) holds and `otherwise` where it does not, both continuing
  /// after (blocks `name`, `name.else` and `name.end`, laid out in that order; `otherwise` is
  /// emitted first). The builder ends in `name.end`.
  void emitIfElse(llvm::Value *cond, const llvm::Twine &name, llvm::function_ref<void()> then,
                  llvm::function_ref<void()> otherwise);
  /// A counted loop tested at the bottom: for i = start, start + step, ... while i < end
  /// (signed, i64), with loop-carried values that start as `init` and become what `body`
  /// returns. The body runs at least once unless `mayBeEmpty` (then `start < end` is tested
  /// first, and `init` must be empty). Returns the carried values of the last iteration.
  /// Blocks `name` and `name.end`; the builder ends in the latter.
  using CarriedBody = llvm::function_ref<std::vector<llvm::Value *>(
      llvm::Value *i, const std::vector<llvm::Value *> &carried)>;
  std::vector<llvm::Value *> emitCountedLoop(const llvm::Twine &name, llvm::Value *start,
                                             llvm::Value *end, int64_t step,
                                             const std::vector<llvm::Value *> &init,
                                             CarriedBody body, bool mayBeEmpty = false);
  /// Where `continue` and `break` of a loop go.
  struct LoopTargets {
    llvm::BasicBlock *continueTo;
    llvm::BasicBlock *breakTo;
  };
  /// A loop tested at the top: i = start, then while test(i): body(i), i += step (i64). Blocks
  /// `name.header`, `name.body`, `name.latch` (where `continue` goes; the increment) and
  /// `name.exit` (`break`); the builder ends in the exit. With `unroll` false, LLVM must not
  /// unroll it; with `unrollCount` U (a program's hint, `range(..., unroll=U)`) it unrolls it U
  /// times (1: not at all). The index PHI is named `index`.
  Status emitLoop(const llvm::Twine &name, llvm::Value *start, llvm::Value *step,
                  llvm::function_ref<llvm::Value *(llvm::Value *i)> test,
                  llvm::function_ref<Status(llvm::Value *i, const LoopTargets &targets)> body,
                  const llvm::Twine &index = "", bool unroll = true, uint32_t unrollCount = 0);

  /// The block that code after an unconditional transfer (Exit, break, continue) goes to: a
  /// fresh block without predecessors.
  void startDeadBlock();

  // ---- views and memory (emit_memory.cpp) ----------------------------------------------------
  /// Entry d of an offset argument as applyOffset (isa/view_rules.h) reads it: its start (i64)
  /// and whether it is a slice; an absent offset is all slices from 0.
  std::pair<llvm::Value *, bool> offsetEntry(const Argument &offset, size_t d);
  /// The tile of a load, store or copy at `offset` (isa/view_rules.h).
  GlobalTile globalTile(const GlobalView &view, const Argument &offset);
  /// Widens the upper bounds of a register tile's dimensions that lie inside their view for
  /// every block (emit_memory.cpp): the tile of view `g` (a ViewGlobal result) at `offset`,
  /// in `map`'s layout. A slice at `b * T` of extent E, where b is a block index whose grid
  /// extent is cdiv(E, T), E is a scalar parameter that the launch class makes a multiple of T
  /// and the layout's extent there is at most T, is in bounds whatever b: its bounds tests fold.
  void boundProvenTiles(VarId g, const Argument &offset, const LayoutMap &map, GlobalTile &tile);
  /// Records a ViewGlobal's shape expressions and the grid dimension of a block index, each
  /// for a variable assigned once (boundProvenTiles).
  void noteViewShape(VarId v, const std::vector<ExprId> &shape);
  void noteBlockIndex(VarId v, int dim);
  SharedTile sharedTile(const SharedView &view, const Argument &offset);
  /// Element offset (i64) of root coordinates in a shared root's layout.
  llvm::Value *sharedOffset(VarId root, const std::vector<llvm::Value *> &coords);
  /// Byte address (ptr addrspace(3)) of element offset `elem` in shared root `root`.
  llvm::Value *sharedElementAddress(VarId root, llvm::Value *elem, DataType t);
  /// The 32-bit shared address of the origin element of shared view `v` (the operand of the
  /// inline PTX of mbarriers, wgmma descriptors and TMA copies).
  llvm::Value *sharedOriginAddress32(VarId v);
  /// Load / store one element at an element offset of global or shared memory (sub-byte types
  /// bit-packed; stores of sub-byte types are atomic so that neighbours are not disturbed).
  llvm::Value *loadElement(llvm::Value *ptr, llvm::Value *elem, DataType t);
  void storeElement(llvm::Value *ptr, llvm::Value *elem, DataType t, llvm::Value *value);
  /// The start of the workspace region of AllocateGlobal `inst` (ptr addrspace(1)).
  llvm::Value *workspaceRegion(const Instruction &inst);

  // ---- operands (emit_operands.cpp) ------------------------------------------------------------
  /// Operand values parallel to the result's slots: a register tensor gathered through
  /// gatherSlots, or a scalar converted to t and repeated.
  Expected<std::vector<llvm::Value *>> operandSlots(const Instruction &inst, const Argument &arg,
                                                    const LayoutMap &result, DataType t);

  // ---- the scratch area that ConvertLayout, Reduce, Dot and the atomics exchange values through
  // (emit_scratch.cpp)
  llvm::Value *scratchBase(); // ptr addrspace(3)
  /// Stage a register tensor's elements in the scratch area at `byteOffset`, row-major, one
  /// `storageBytes` slot per element (written by primary owners).
  void stageToScratch(VarId v, const std::vector<llvm::Value *> &slots, int64_t byteOffset,
                      int elemBytes);
  llvm::Value *loadScratchElement(llvm::Value *linear, int64_t byteOffset, int elemBytes,
                                  DataType t);
  /// The address of row-major element `linear` (i64) of a tensor staged at `byteOffset`, and
  /// the load of one element from such an address (addresses of further elements: constant
  /// byte offsets from it, one GEP each).
  llvm::Value *scratchAddress(llvm::Value *linear, int64_t byteOffset, int elemBytes);
  /// This thread's slots of a tensor of `map`'s layout staged row-major at `byteOffset`: the
  /// address of its first element and each slot's byte offset from it (constants).
  struct ScratchSlots {
    llvm::Value *first;
    std::vector<int64_t> offsets;
  };
  ScratchSlots scratchSlots(const LayoutMap &map, int64_t byteOffset, int elemBytes);
  llvm::Value *loadScratchAt(llvm::Value *addr, int elemBytes, DataType t);
  /// Every local slot of `map` read back from a tensor of its shape staged at offset 0.
  std::vector<llvm::Value *> loadScratchSlots(const LayoutMap &map, int elemBytes, DataType t);
  /// A `runtime` error unless the scratch area holds a tensor of `shape` at `elemBytes` per
  /// element; the message ends "... bytes " + `need` (e.g. "the reduction needs").
  Status requireScratch(const Instruction &inst, const std::vector<int64_t> &shape, int elemBytes,
                        const std::string &need);
  /// Bytes of the scratch area that the lowering has staged tensors into so far (the checker
  /// plans for the worst case of every instruction, e.g. a Dot that takes the scratch path;
  /// a Dot that becomes mma.sync stages nothing).
  int64_t scratchUsed() const { return scratchUsed_; }
  /// Bytes of the scratch area that the current statement may use: the block's, or inside a
  /// thread group the group's own part (ProgramInfo::groupScratch).
  int64_t scratchLimit() const {
    return group_.threads != 0 ? group_.scratchBytes : info.scratchBytes;
  }

  /// An `unsupported` error unless the target is sm_90a (the Hopper instructions).
  Status requireHopper(const Instruction &inst);
  /// The generic address of tensor map `index` (ProgramInfo::tensorMaps), a kernel parameter.
  llvm::Value *tensorMap(uint32_t index) const { return tensorMaps_[index]; }

private:
  int64_t scratchUsed_ = 0;
  /// The thread group being lowered (lower_thread_group.cpp); threads == 0 outside groups.
  struct GroupContext {
    int64_t threads = 0;
    int barrier = 0; // its named barrier (the first copy's, for copies lowered as one body)
    int64_t scratchOffset = 0, scratchBytes = 0;
    /// Copies lowered as one body: the copy index (warp-uniform, from the thread index), added
    /// to the named barrier, and its scratch part's offset from the first copy's (the index
    /// times the bytes one copy stages at most, known once the body is lowered). Null otherwise.
    llvm::Value *copyIndex = nullptr;
    llvm::Value *copyScratch = nullptr;
  };
  /// Bytes of its scratch part that the thread group being lowered has staged into so far.
  int64_t groupScratchUsed_ = 0;
  GroupContext group_;
  size_t groupsLowered_ = 0; // index into ProgramInfo::groupScratch
  Status lowerParallel(const Stmt &stmt);
  Status lowerBody(const std::vector<Stmt> &body);
  Status lowerStmt(const Stmt &stmt);
  /// Lower one instruction: InstructionRouter (lowering.h) hands it to its family's lowerer,
  /// dispatched from isa/instructions.def by visitInstruction (isa/instruction_visitor.h).
  Status lowerInstruction(const Instruction &inst);
  void countAssignments(const std::vector<Stmt> &body);
  VarStorage &storage(VarId v, const std::vector<llvm::Type *> &types);
  std::vector<llvm::Value *> readComponents(VarId v);
  void writeComponents(VarId v, const std::vector<llvm::Value *> &values);
  Status setupParameters();
  Status lowerFor(const Stmt &stmt);
  Status lowerIf(const Stmt &stmt);
  Status lowerWhile(const Stmt &stmt);

  bool countIr_ = false;
  std::vector<IrCount> irCounts_;
  bool reportShared_ = false;
  std::vector<SharedAccessReport> sharedAccesses_;
  InstructionRouter *router_ = nullptr; // during run()
  llvm::Function *fn_ = nullptr;
  llvm::BasicBlock *entry_ = nullptr;
  llvm::Instruction *allocaPoint_ = nullptr;
  llvm::Value *tid_ = nullptr;
  llvm::Value *blockTid_ = nullptr; // %tid.x read in the prologue
  llvm::Value *workspace_ = nullptr;
  std::vector<llvm::Value *> tensorMaps_;       // the tensor-map parameters (generic pointers)
  std::vector<llvm::Value *> workspaceRegions_; // per instruction index (AllocateGlobal)
  std::vector<int> assignments_;                // per VarId
  size_t specialized_ = 0; // the Specialize statements lowered so far (their values in order)
  std::vector<std::unique_ptr<VarStorage>> storage_;
  std::vector<std::optional<std::vector<int32_t>>> sharedDims_; // per VarId
  std::map<std::string, std::unique_ptr<LayoutMap>> layoutCache_;
  std::map<const LayoutMap *, std::vector<llvm::Value *>> threadPartCache_;
  std::set<const LayoutMap *> cachedMaps_; // the maps of layoutCache_
  std::map<std::pair<const LayoutMap *, const LayoutMap *>,
           std::shared_ptr<const std::vector<SlotSource>>>
      slotSourceCache_;
  std::map<const LayoutMap *, llvm::Value *> primaryCache_;
  std::map<VarId, std::vector<ExprId>> viewShapes_; // noteViewShape
  std::map<VarId, int> blockIndexDims_;             // noteBlockIndex
  /// The products of dequantizeFloatPairs: bits * fix, exact (unscaledDequant).
  struct DequantProduct {
    llvm::Value *bits = nullptr;
    llvm::ConstantFP *fix = nullptr;
  };
  std::map<llvm::Value *, DequantProduct> dequantProducts_;
  std::vector<LoopTargets> loops_;
};

/// A call of inline PTX without side effects (hoisted, merged and deleted like arithmetic).
llvm::Value *pureAsm(llvm::IRBuilder<> &b, llvm::Type *result, const std::string &text,
                     const char *constraints, llvm::ArrayRef<llvm::Value *> args);

/// x + y and x * y, folding additions of 0 and multiplications by 1.
llvm::Value *addFolded(llvm::IRBuilder<> &b, llvm::Value *x, llvm::Value *y);
llvm::Value *mulFolded(llvm::IRBuilder<> &b, llvm::Value *x, llvm::Value *y);

/// The index arithmetic of isa/view_rules.h as IR: i64 indices, i1 truth values; additions of 0
/// and multiplications by 1 fold, so that constant strides and offsets stay visible.
struct IrArithmetic {
  using Index = llvm::Value *;
  using Bool = llvm::Value *;
  Codegen &cg;
  llvm::Value *zero() { return cg.constI64(0); }
  llvm::Value *add(llvm::Value *x, llvm::Value *y) { return addFolded(cg.b, x, y); }
  llvm::Value *mul(llvm::Value *x, llvm::Value *y) { return mulFolded(cg.b, x, y); }
  llvm::Value *sub(llvm::Value *x, llvm::Value *y) { return cg.b.CreateSub(x, y); }
  // folded for constants, so that a view's constant extents stay constants in its tiles' bounds
  llvm::Value *max(llvm::Value *x, llvm::Value *y) {
    if (auto [cx, cy] = constants(x, y); cx && cy)
      return cg.constI64(std::max(cx->getSExtValue(), cy->getSExtValue()));
    return cg.callIntrinsic(llvm::Intrinsic::smax, {cg.b.getInt64Ty()}, {x, y});
  }
  llvm::Value *min(llvm::Value *x, llvm::Value *y) {
    if (auto [cx, cy] = constants(x, y); cx && cy)
      return cg.constI64(std::min(cx->getSExtValue(), cy->getSExtValue()));
    return cg.callIntrinsic(llvm::Intrinsic::smin, {cg.b.getInt64Ty()}, {x, y});
  }
  llvm::Value *inside(llvm::Value *e, llvm::Value *lo, llvm::Value *hi) {
    return cg.b.CreateAnd(cg.b.CreateICmpSGE(e, lo), cg.b.CreateICmpSLT(e, hi));
  }
  llvm::Value *both(llvm::Value *x, llvm::Value *y) { return cg.b.CreateAnd(x, y); }

private:
  static std::pair<llvm::ConstantInt *, llvm::ConstantInt *> constants(llvm::Value *x,
                                                                       llvm::Value *y) {
    return {llvm::dyn_cast<llvm::ConstantInt>(x), llvm::dyn_cast<llvm::ConstantInt>(y)};
  }
};

/// Bytes of one element in the scratch area: its storage bytes, 1 for sub-byte types.
inline int scratchElementBytes(DataType t) {
  return t.storageBits() % 8 == 0 ? t.storageBits() / 8 : 1;
}

} // namespace tilus::jit
