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
#pragma once

#include "isa/instruction.h"

#include <utility>

namespace tilus {

namespace detail {
template <class Visitor> inline constexpr bool kNoHandler = false;
} // namespace detail

#define TILUSVM_VISIT_PASTE2(a, b) a##b
#define TILUSVM_VISIT_PASTE(a, b) TILUSVM_VISIT_PASTE2(a, b)

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
