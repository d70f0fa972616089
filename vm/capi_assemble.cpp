// tilusvm_module_assemble (vm/include/tilusvm.h, "Assembling"): `.tasm` source text to a
// checked module inside the library, as `tilus-asm` does it, for hosts that ship programs as
// source and choose their constants (-D) at load time. One error boundary, like every other
// exported function (vm/capi.cpp).
#include "vm/include/tilusvm.h"

#include "assembler/assembler.h"
#include "isa/bytecode.h"
#include "loader/checker.h"
#include "vm/capi_internal.h"

#include <string>
#include <string_view>

namespace {

using tilus::capi::failWithMessage;

int assembleChecked(const char *source, size_t sourceSize, const char *fileName,
                    const tilusvm_define *defines, size_t numDefines, tilusvm_module *out) {
  const char *function = "tilusvm_module_assemble";
  if (!out)
    return failWithMessage(TILUSVM_ERROR_INVALID_ARGUMENT, std::string(function) + ": out is NULL");
  *out = nullptr;
  if (!source && sourceSize != 0)
    return failWithMessage(TILUSVM_ERROR_INVALID_ARGUMENT,
                           std::string(function) + ": source is NULL");
  if (!defines && numDefines != 0)
    return failWithMessage(TILUSVM_ERROR_INVALID_ARGUMENT,
                           std::string(function) + ": defines is NULL");
  tilus::AssembleOptions options;
  options.fileName = fileName ? fileName : "<input>";
  const tilus::BytecodeLimits limits;
  if (sourceSize > limits.maxSourceBytes)
    return failWithMessage(TILUSVM_ERROR_INVALID_ARGUMENT,
                           options.fileName + ": the source is " + std::to_string(sourceSize) +
                               " bytes; the limit is " + std::to_string(limits.maxSourceBytes));
  for (size_t i = 0; i < numDefines; ++i) {
    const tilusvm_define &d = defines[i];
    std::string where = std::string(function) + ": define " + std::to_string(i);
    if (!d.name || !d.value)
      return failWithMessage(TILUSVM_ERROR_INVALID_ARGUMENT,
                             where + ": " + (d.name ? "value" : "name") + " is NULL");
    if (d.name[0] == '\0')
      return failWithMessage(TILUSVM_ERROR_INVALID_ARGUMENT, where + ": the name is empty");
    if (!options.defines.emplace(d.name, d.value).second)
      return failWithMessage(TILUSVM_ERROR_INVALID_ARGUMENT,
                             where + ": " + d.name + " is defined twice");
  }
  std::string_view text(source ? source : "", source ? sourceSize : 0);
  tilus::Expected<tilus::Module> module = tilus::assemble(text, options);
  if (!module.ok())
    return tilus::capi::failWithStatus(module.status());
  if (module->programs.empty())
    return failWithMessage(TILUSVM_ERROR_CHECK,
                           options.fileName +
                               ": no program is defined (an empty module is not assembled)");
  tilus::CheckOptions check;
  check.fileName = options.fileName;
  return tilus::capi::adoptModule(tilus::checkModule(std::move(*module), check), out);
}

} // namespace

extern "C" {

TILUSVM_API int tilusvm_module_assemble(const char *source, size_t source_size,
                                        const char *file_name, const tilusvm_define *defines,
                                        size_t num_defines, tilusvm_module *out) {
  return tilus::capi::errorBoundary(
      [&] { return assembleChecked(source, source_size, file_name, defines, num_defines, out); });
}

} // extern "C"
