// The family lowerers (internal to jit/): one class per instruction family, each defined in the
// files of its family (lower_<family>[_<topic>].cpp), holding the core (Codegen, codegen.h) and
// the state that only its family needs. The core's dispatcher hands every instruction to its
// family's lowerer through InstructionRouter (below).
//
// Handlers are declared from isa/instructions.def (isa/instruction_handlers.def): each class
// owns the categories of its family (the TILUSVM_LOWER_<FAMILY>_<Category> selectors) and gets a
// declaration `Status visit<Name>(const Instruction &)` for every row of them, so adding a row
// of an existing family edits no header here: define its handler in the family's file (a
// missing definition is a link error naming it). Family and category handlers (visitElementwise
// for the elementwise categories, visitAtomic) and rows handled beside them (visitFence) are
// declared by hand.
#pragma once

#include "isa/instruction_visitor.h"
#include "jit/codegen.h"

#include <functional>

namespace tilus::jit {

// The categories each lowerer declares a handler per row for.
#define TILUSVM_LOWER_VIEWS_Indexing TILUSVM_OWNED
#define TILUSVM_LOWER_VIEWS_Creation TILUSVM_OWNED
#define TILUSVM_LOWER_MEMORY_Movement TILUSVM_OWNED
#define TILUSVM_LOWER_ELEMENTWISE_Select TILUSVM_OWNED
#define TILUSVM_LOWER_CONVERSION_Conversion TILUSVM_OWNED
#define TILUSVM_LOWER_CONTRACTION_Contraction TILUSVM_OWNED
#define TILUSVM_LOWER_CONTROL_Control TILUSVM_OWNED

#define TILUSVM_LOWER_HANDLER(Name) Status visit##Name(const Instruction &inst)

/// What every family lowerer holds: the core, and the core's builder and inputs under the
/// names the lowering code uses.
class FamilyLowering {
public:
  explicit FamilyLowering(Codegen &core)
      : cg(core), ctx(core.ctx), mod(core.mod), b(core.b), prog(core.prog), info(core.info),
        opts(core.opts) {}

protected:
  Codegen &cg;
  llvm::LLVMContext &ctx;
  llvm::Module &mod;
  llvm::IRBuilder<> &b;
  const Program &prog;
  const ProgramInfo &info;
  const JitOptions &opts;
};

/// Indexing and tensor creation: BlockIndices, AllocateRegister, Iota, the shared and global
/// allocations and views (lower_views.cpp).
class ViewLowering : public FamilyLowering {
public:
  using FamilyLowering::FamilyLowering;
#define TILUSVM_HANDLERS_OWNED TILUSVM_LOWER_VIEWS
#define TILUSVM_HANDLER TILUSVM_LOWER_HANDLER
#include "isa/instruction_handlers.def"
};

/// Data movement (lower_memory.cpp, lower_memory_global.cpp, lower_memory_async.cpp,
/// lower_memory_matrix.cpp).
class MemoryLowering : public FamilyLowering {
public:
  using FamilyLowering::FamilyLowering;
#define TILUSVM_HANDLERS_OWNED TILUSVM_LOWER_MEMORY
#define TILUSVM_HANDLER TILUSVM_LOWER_HANDLER
#include "isa/instruction_handlers.def"

  /// Whether every run of `width` elements along root dimension `dim` of a shared root that
  /// starts at a multiple of `width` is contiguous and width-aligned in its layout (checked
  /// exhaustively over the root's shape, cached).
  bool contiguousRuns(VarId root, int dim, int width);

private:
  /// LoadShared of mma fragments of 16-bit types with ldmatrix, and StoreShared of them with
  /// stmatrix (sm_90; lower_memory_matrix.cpp); false (and nothing emitted) when the layouts do
  /// not allow it.
  bool tryLdmatrix(const SharedTile &tile, VarId result);
  bool tryStmatrix(const SharedTile &tile, VarId src, const std::vector<llvm::Value *> &slots);
  bool matrixAccesses(const SharedTile &tile, const RegisterLayout &layout,
                      const std::function<void(int64_t, int, int, bool, llvm::Value *)> &access);

  std::map<std::tuple<VarId, int, int>, bool> runsCache_;
};

/// The elementwise family, computed within each thread (lower_elementwise.cpp): every
/// arithmetic, bitwise, comparison, unary and math row by one handler, and Where.
class ElementwiseLowering : public FamilyLowering {
public:
  using FamilyLowering::FamilyLowering;
  Status visitElementwise(const Instruction &inst);
#define TILUSVM_HANDLERS_OWNED TILUSVM_LOWER_ELEMENTWISE
#define TILUSVM_HANDLER TILUSVM_LOWER_HANDLER
#include "isa/instruction_handlers.def"

private:
  llvm::Value *mathOp(MathFn fn, llvm::Value *x, DataType t);
  /// Exp2 of f32/f16/bf16 and Exp of f16/bf16 by `ex2.approx` (bounds in lower_elementwise.cpp).
  llvm::Value *fastExp2(MathFn fn, llvm::Value *x, DataType t);
  /// Rcp of f32, f16 and bf16 by the hardware reciprocal.
  llvm::Value *fastRcp(llvm::Value *x, DataType t);
};

/// Cast, View, Permute and ConvertLayout (lower_conversion.cpp).
class ConversionLowering : public FamilyLowering {
public:
  using FamilyLowering::FamilyLowering;
#define TILUSVM_HANDLERS_OWNED TILUSVM_LOWER_CONVERSION
#define TILUSVM_HANDLER TILUSVM_LOWER_HANDLER
#include "isa/instruction_handlers.def"

private:
  /// View of 8- or 16-bit slots as 32-bit slots, each word one `prmt` of the words its bytes
  /// were cut from (pack_bytes.h); nothing when some word's bytes do not trace to at most four
  /// 32-bit words.
  std::optional<std::vector<llvm::Value *>> packedView(const std::vector<llvm::Value *> &in,
                                                       DataType da, DataType dr);
};

/// Reduce (lower_contraction.cpp), Dot (lower_contraction_dot.cpp) and wgmma, sm_90a
/// (lower_contraction_wgmma.cpp).
class ContractionLowering : public FamilyLowering {
public:
  using FamilyLowering::FamilyLowering;
#define TILUSVM_HANDLERS_OWNED TILUSVM_LOWER_CONTRACTION
#define TILUSVM_HANDLER TILUSVM_LOWER_HANDLER
#include "isa/instruction_handlers.def"

private:
  std::vector<VarId> wgmmaAccumulators_; // every Wgmma accumulator lowered so far
};

/// Whether a Dot of these operands lowers to mma.sync atoms (lower_contraction_dot.cpp) rather
/// than to per-thread multiply-adds.
bool dotUsesMma(const VarType &a, const VarType &b, const VarType &d, int64_t threads,
                int smVersion);

/// Control and debugging: Synchronize and Exit (lower_control.cpp), Print
/// (lower_control_print.cpp), the mbarriers and the async-proxy fence, sm_90a
/// (lower_control_mbarrier.cpp).
class ControlLowering : public FamilyLowering {
public:
  using FamilyLowering::FamilyLowering;
#define TILUSVM_HANDLERS_OWNED TILUSVM_LOWER_CONTROL
#define TILUSVM_HANDLER TILUSVM_LOWER_HANDLER
#include "isa/instruction_handlers.def"

  /// The static shared buffer that Print stages register tensors in (elements of 8 bytes),
  /// grown on demand.
  llvm::Value *printBuffer(int64_t elements);

private:
  llvm::GlobalVariable *printBuffer_ = nullptr;
  int64_t printBufferElements_ = 0;
};

/// Atomics and fences (lower_atomic.cpp).
class AtomicLowering : public FamilyLowering {
public:
  using FamilyLowering::FamilyLowering;
  /// AtomicAdd, AtomicMax, AtomicMin, AtomicExch, AtomicCas, AtomicStore.
  Status visitAtomic(const Instruction &inst);
  Status visitFence(const Instruction &inst);
  Status visitAtomicLoad(const Instruction &inst);
};

// The lowerer of each category (a member of InstructionRouter).
#define TILUSVM_LOWERER_OF_Indexing views_
#define TILUSVM_LOWERER_OF_Creation views_
#define TILUSVM_LOWERER_OF_Movement memory_
#define TILUSVM_LOWERER_OF_Arithmetic elementwise_
#define TILUSVM_LOWERER_OF_Bitwise elementwise_
#define TILUSVM_LOWERER_OF_Comparison elementwise_
#define TILUSVM_LOWERER_OF_Unary elementwise_
#define TILUSVM_LOWERER_OF_Math elementwise_
#define TILUSVM_LOWERER_OF_Select elementwise_
#define TILUSVM_LOWERER_OF_Conversion conversion_
#define TILUSVM_LOWERER_OF_Contraction contraction_
#define TILUSVM_LOWERER_OF_Control control_
#define TILUSVM_LOWERER_OF_Atomic atomic_

/// The family lowerers of one kernel, and the visitor the core dispatches instructions to
/// (isa/instruction_visitor.h): the handler of each row passes the instruction to the first
/// of visit<Name>, visit<Category> and visit<Family> that its category's lowerer has (a
/// compile error when it has none).
class InstructionRouter {
public:
  explicit InstructionRouter(Codegen &core)
      : views_(core), memory_(core), elementwise_(core), conversion_(core), contraction_(core),
        control_(core), atomic_(core), core_(core) {}

#define TILUSVM_ARG(name, kind, required)
#define TILUSVM_INSTRUCTION(Name, Category, ResultKind, MinResults, MaxResults, AllowsOut, Args)   \
  Status visit##Name(const Instruction &inst) {                                                    \
    /* a generic lambda, so that only the taken branch is instantiated */                          \
    return [&](auto &lowerer) -> Status {                                                          \
      if constexpr (requires { lowerer.visit##Name(inst); })                                       \
        return lowerer.visit##Name(inst);                                                          \
      else if constexpr (requires { lowerer.visit##Category(inst); })                              \
        return lowerer.visit##Category(inst);                                                      \
      else                                                                                         \
        return lowerer.TILUSVM_VISIT_PASTE(visit, TILUSVM_FAMILY_OF_##Category)(inst);             \
    }(TILUSVM_LOWERER_OF_##Category);                                                              \
  }
#include "isa/instructions.def"

  Status visitInvalid(const Instruction &inst);

private:
  ViewLowering views_;
  MemoryLowering memory_;
  ElementwiseLowering elementwise_;
  ConversionLowering conversion_;
  ContractionLowering contraction_;
  ControlLowering control_;
  AtomicLowering atomic_;
  Codegen &core_;
};

} // namespace tilus::jit
