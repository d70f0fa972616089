// Generated handler declarations (isa/instruction_handlers.def): a visitor declares
// visit<Name> for exactly the rows of the categories its selector owns.
#include "isa/instruction_visitor.h"

#include <doctest/doctest.h>

#include <string>

using namespace tilus;

namespace {

// Every row of a category TILUSVM_PER_ROW owns answers its own name; the elementwise family and
// the atomic rows reach the family and category handlers.
struct PerRow {
#define TILUSVM_HANDLERS_OWNED TILUSVM_PER_ROW
#define TILUSVM_HANDLER(Name)                                                                      \
  std::string visit##Name(int) { return #Name; }
#include "isa/instruction_handlers.def"
  std::string visitElementwise(int) { return "family Elementwise"; }
  std::string visitAtomic(int) { return "category Atomic"; }
  std::string visitInvalid(int) { return "invalid"; }
};

// A class that handles one family owns just its categories.
#define TILUSVM_TEST_MEMORY_Movement TILUSVM_OWNED
struct MemoryOnly {
#define TILUSVM_HANDLERS_OWNED TILUSVM_TEST_MEMORY
#define TILUSVM_HANDLER(Name) int visit##Name(int)
#include "isa/instruction_handlers.def"
};

template <class T>
concept DeclaresLoadGlobal = requires(T t) { t.visitLoadGlobal(0); };
template <class T>
concept DeclaresLoadScalar = requires(T t) { t.visitLoadScalar(0); };
template <class T>
concept DeclaresAdd = requires(T t) { t.visitAdd(0); };
template <class T>
concept DeclaresDot = requires(T t) { t.visitDot(0); };
template <class T>
concept DeclaresWhere = requires(T t) { t.visitWhere(0); };
template <class T>
concept DeclaresFence = requires(T t) { t.visitFence(0); };

static_assert(DeclaresLoadGlobal<MemoryOnly> && DeclaresLoadScalar<MemoryOnly>);
static_assert(!DeclaresAdd<MemoryOnly> && !DeclaresDot<MemoryOnly> && !DeclaresWhere<MemoryOnly>);
static_assert(DeclaresDot<PerRow> && DeclaresWhere<PerRow> && DeclaresLoadGlobal<PerRow>);
static_assert(!DeclaresAdd<PerRow> && !DeclaresFence<PerRow>);

} // namespace

TEST_CASE("instruction handlers: TILUSVM_PER_ROW declares a handler for each row it owns") {
  PerRow visitor;
  CHECK(visitInstruction(Opcode::LoadGlobal, visitor, 0) == "LoadGlobal");
  CHECK(visitInstruction(Opcode::BlockIndices, visitor, 0) == "BlockIndices");
  CHECK(visitInstruction(Opcode::Where, visitor, 0) == "Where");
  CHECK(visitInstruction(Opcode::Cast, visitor, 0) == "Cast");
  CHECK(visitInstruction(Opcode::Wgmma, visitor, 0) == "Wgmma");
  CHECK(visitInstruction(Opcode::Exit, visitor, 0) == "Exit");
  CHECK(visitInstruction(Opcode::Add, visitor, 0) == "family Elementwise");
  CHECK(visitInstruction(Opcode::Not, visitor, 0) == "family Elementwise");
  CHECK(visitInstruction(Opcode::Tanh, visitor, 0) == "family Elementwise");
  CHECK(visitInstruction(Opcode::Rcp, visitor, 0) == "family Elementwise");
  CHECK(size_t(Opcode::Rcp) == 78); // appended: the earlier opcodes keep their numbers
  CHECK(visitInstruction(Opcode::Ge, visitor, 0) == "family Elementwise");
  CHECK(visitInstruction(Opcode::AtomicCas, visitor, 0) == "category Atomic");
  CHECK(visitInstruction(Opcode::Fence, visitor, 0) == "category Atomic");
  // The elementwise and atomic categories, by hand: every other row answers its own name.
  for (size_t op = 0; op < numOpcodes(); ++op) {
    const InstructionSpec &spec = instructionSpec(Opcode(op));
    std::string got = visitInstruction(Opcode(op), visitor, 0);
    switch (spec.category) {
    case InstructionCategory::Arithmetic:
    case InstructionCategory::Bitwise:
    case InstructionCategory::Comparison:
    case InstructionCategory::Unary:
    case InstructionCategory::Math:
      CHECK(got == "family Elementwise");
      break;
    case InstructionCategory::Atomic:
      CHECK(got == "category Atomic");
      break;
    case InstructionCategory::Indexing:
    case InstructionCategory::Creation:
    case InstructionCategory::Movement:
    case InstructionCategory::Select:
    case InstructionCategory::Conversion:
    case InstructionCategory::Contraction:
    case InstructionCategory::Control:
      CHECK(got == spec.name);
      break;
    }
  }
}
