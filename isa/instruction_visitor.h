// Dispatch over the instruction table, generated from isa/instructions.def (the way LLVM's
// InstVisitor is generated from Instruction.def).
//
// visitInstruction(op, visitor, args...) calls, for the row of `op`, the first of
//   visitor.visit<Name>(args...)       the instruction's own handler (visitLoadGlobal)
//   visitor.visit<Category>(args...)   its category's handler (visitMath)
//   visitor.visit<Family>(args...)     its family's handler (visitElementwise; see
//                                      TILUSVM_CATEGORIES in isa/instruction.h)
// that the visitor declares (publicly); a row with none of the three is a compile error naming
// the instruction. All handlers a visitor gives must return the same type. An opcode value
// outside the table (impossible for a decoded program) calls visitor.visitInvalid(args...).
// Family handlers find the row's payload with scalarOpOf / mathFnOf (isa/instruction.h).
//
// Generated handler declarations. A stage does not list its handlers by hand: inside its
// visitor class it writes
//
//   #define TILUSVM_HANDLERS_OWNED TILUSVM_PER_ROW
//   #define TILUSVM_HANDLER(Name) bool visit##Name(const Instruction &inst, Results &results)
//   #include "isa/instruction_handlers.def"
//
// which declares `TILUSVM_HANDLER(Name);` for every row of isa/instructions.def whose category
// the selector owns. A selector is a prefix P: it owns category C when P_C is defined as
// TILUSVM_OWNED, and no other category (so a class that handles one family owns just that
// family's categories: `#define TILUSVM_LOWER_MEMORY_Movement TILUSVM_OWNED`). TILUSVM_PER_ROW,
// below, owns every category whose rows have semantics of their own, i.e. all but the ones a
// stage serves with one family or category handler: the elementwise family (Arithmetic,
// Bitwise, Comparison, Unary, Math: visitElementwise) and Atomic (visitAtomic).
//
// Rules that follow:
// - A row of an owned category always has a declaration, so the dispatcher's "no handler"
//   error cannot fire for it; a missing definition is a link error that names the handler
//   (undefined reference to `...::visitName(...)`).
// - A row of a category the stage does not own but that still has a handler of its own there
//   (the checker's visitFence, an Atomic row next to visitAtomic) is declared by hand, next to
//   the family or category handler it bypasses; so are family and category handlers
//   (visitElementwise, visitAtomic) and visitInvalid.
// - Without a declaration, a row of a category nobody handles is the dispatcher's compile error.
#pragma once

#include "isa/instruction.h"

#include <utility>

namespace tilus {

namespace detail {
template <class Visitor> inline constexpr bool kNoHandler = false;
} // namespace detail

#define TILUSVM_VISIT_PASTE2(a, b) a##b
#define TILUSVM_VISIT_PASTE(a, b) TILUSVM_VISIT_PASTE2(a, b)

// ---- category selectors (see "Generated handler declarations" above) ----
// P_C defined as TILUSVM_OWNED makes TILUSVM_HANDLER_OWNS(P, C) expand to 1; any other P_C (not
// a macro) leaves the probe's default 0 in second place.
#define TILUSVM_OWNED ~, 1
#define TILUSVM_HANDLER_SECOND(first, second, ...) second
#define TILUSVM_HANDLER_PROBE(...) TILUSVM_HANDLER_SECOND(__VA_ARGS__, 0, ~)
#define TILUSVM_HANDLER_OWNS_PASTED(Prefix, Category) TILUSVM_HANDLER_PROBE(Prefix##_##Category)
#define TILUSVM_HANDLER_OWNS(Prefix, Category) TILUSVM_HANDLER_OWNS_PASTED(Prefix, Category)
// TILUSVM_HANDLER_WHEN(1, text) is text, TILUSVM_HANDLER_WHEN(0, text) is nothing.
#define TILUSVM_HANDLER_WHEN(owned, ...)                                                           \
  TILUSVM_VISIT_PASTE(TILUSVM_HANDLER_WHEN_, owned)(__VA_ARGS__)
#define TILUSVM_HANDLER_WHEN_1(...) __VA_ARGS__
#define TILUSVM_HANDLER_WHEN_0(...)

// Every category whose rows each have a handler of their own in a stage; the elementwise family
// and Atomic are served by visitElementwise and visitAtomic.
#define TILUSVM_PER_ROW_Indexing TILUSVM_OWNED
#define TILUSVM_PER_ROW_Creation TILUSVM_OWNED
#define TILUSVM_PER_ROW_Movement TILUSVM_OWNED
#define TILUSVM_PER_ROW_Select TILUSVM_OWNED
#define TILUSVM_PER_ROW_Conversion TILUSVM_OWNED
#define TILUSVM_PER_ROW_Contraction TILUSVM_OWNED
#define TILUSVM_PER_ROW_Control TILUSVM_OWNED

template <class Visitor, class... Params>
decltype(auto) visitInstruction(Opcode op, Visitor &&visitor, Params &&...params) {
  switch (op) {
#define TILUSVM_ARG(name, kind, required)
#define TILUSVM_INSTRUCTION(Name, Category, ResultKind, MinResults, MaxResults, AllowsOut, Args)   \
  case Opcode::Name:                                                                               \
    if constexpr (requires { visitor.visit##Name(std::forward<Params>(params)...); })              \
      return visitor.visit##Name(std::forward<Params>(params)...);                                 \
    else if constexpr (requires { visitor.visit##Category(std::forward<Params>(params)...); })     \
      return visitor.visit##Category(std::forward<Params>(params)...);                             \
    else if constexpr (requires {                                                                  \
                         visitor.TILUSVM_VISIT_PASTE(visit, TILUSVM_FAMILY_OF_##Category)(         \
                             std::forward<Params>(params)...);                                     \
                       })                                                                          \
      return visitor.TILUSVM_VISIT_PASTE(visit, TILUSVM_FAMILY_OF_##Category)(                     \
          std::forward<Params>(params)...);                                                        \
    else                                                                                           \
      static_assert(detail::kNoHandler<Visitor>,                                                   \
                    "no handler for instruction " #Name " (nor its category " #Category            \
                    "): declare visit" #Name);
#include "isa/instructions.def"
  }
  return visitor.visitInvalid(std::forward<Params>(params)...);
}

} // namespace tilus
