#!/usr/bin/env python3
"""Mutation testing: how many small, deliberate bugs does the test suite catch?

Each mutation is (id, file, original snippet, replacement, suites): the snippet must occur
exactly once in the file, so a mutation that no longer applies (the code moved or changed) is
an error that names it, never a silent no-op. Mutations run one at a time in a scratch copy of
the repository (default /tmp/mutate-work/src, with its own meson build dir; ccache makes the
rebuilds cheap): apply, rebuild only the test executables of the mutation's suites, run those
suites with tests/run_tests.py, restore. A mutant is *killed* when a test fails (or the run
times out), *survives* when every test passes; one that does not compile is *stillborn* and
left out of the score.

  scripts/mutate.py --list                 the mutations, one a line
  scripts/mutate.py --check                verify that every mutation applies (no build)
  scripts/mutate.py [--area cpu|gpu|all] [--only ID[,ID..]] [--jobs N] [--json FILE]
                                           run the campaign; print a table and the score
  scripts/mutate.py --gpu-pack [--only ..] pack the JIT mutants' kernels for the GPU machine
  scripts/mutate.py --runtime-pack [--only ..]
                                           pack the vm/cuda mutants' libraries for the GPU machine
                                           into .carry-mutants/ (scripts/gpu_mutants.sh runs
                                           them there)

Areas: "cpu" mutations live in isa/, assembler/, loader/ and vm/cpu/ and are judged by the CPU
suites; "gpu" ones live in jit/ and vm/cuda/: the CPU suites (jit, backends, runtime) see only
PTX text and host-side logic, so their real judge is the GPU suite. --gpu-pack records the
differential test's modules (running its interpreter side with TILUSVM_DIFF_RECORD_DIR), and
for each jit/ mutant builds tests/jit/mutant_kernels against the mutated library and compiles
every recorded module to sm_90a PTX; .carry-mutants/ then holds the unmutated, stripped
libtilusvm, test_jit_gpu and mutant_kernels, the modules and one PTX set per mutant (plus the
unmutated set as the baseline). On the GPU, scripts/gpu_mutants.sh installs each set into a
fresh disk kernel cache under the keys the unmutated runtime computes (compiler version, device
and driver included) and runs the gpu: cases of test_jit_gpu against it, with the library's
programs read from the pack (as recorded) and TILUSVM_SPECIALIZE=0 (launches unspecialised,
so their keys are the ones the PTX was compiled for). vm/cuda/ mutants change
host code, not kernels: they are judged by the runtime suite here (a mutated libtilusvm is too
big to carry more than one per GPU call). The default runs the cpu area.
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Suite -> ninja targets that its tests run (tests/meson.build and its subdirectories).
SUITE_TARGETS = {
    "isa": ["tests/isa/test_isa"],
    "assembler": ["tests/assembler/test_assembler"],
    "tilus-asm": ["tools/tilus-asm"],
    "loader": ["tests/loader/test_loader"],
    "vm_cpu": ["tests/vm_cpu/test_vm_cpu"],
    "programs": ["tests/programs/test_programs", "tools/tilus-asm"],
    "jit": ["tests/jit/test_jit"],
    "backends": ["tests/programs/test_backends"],
    "runtime": ["tests/runtime/test_runtime", "tools/vm-run"],
    "jit_gpu": ["tests/jit/test_jit_gpu"],
    "gpu": ["tests/gpu/test_gpu"],
}

ISA = ["isa", "assembler", "loader", "vm_cpu", "programs"]
ASM = ["assembler", "tilus-asm", "loader", "vm_cpu", "programs"]
LOADER = ["loader", "vm_cpu", "programs"]
CPU = ["vm_cpu", "programs"]
JIT = ["jit", "backends"]
CUDA = ["runtime"]


def m(ident, path, original, replacement, suites, what):
    return {"id": ident, "file": path, "original": original, "replacement": replacement,
            "suites": suites, "what": what,
            "area": "gpu" if path.startswith(("jit/", "vm/cuda/")) else "cpu"}


# vm/cpu/memory.cpp: the interpreter's instantiations of isa/view_rules.h's applyOffset (tiles of
# loads, stores and copies; SliceGlobal and SliceShared), for the mutants of its bound rules.
TILE_ARITHMETIC = ("  IntArithmetic a;\n"
                   "  applyOffset<OffsetUse::Tile>(a, view, tile, offsets.size(), entryOf(offsets));")
SLICE_ARITHMETIC = ("  IntArithmetic a;\n  applyOffset<OffsetUse::Slice>(a, view, out, offsets.size(), "
                    "entryOf(offsets), lengthOf(shape));")
SLICE_RESULT = ("  applyOffset<OffsetUse::Slice>(a, view, out, offsets.size(), entryOf(offsets), "
                "lengthOf(shape));\n  return out;")


def mutant_inside(original, condition):
    """`original` (an instantiation over `IntArithmetic a`) with an arithmetic whose `inside`,
    the test of a fixed entry against [lo, hi), is `condition` instead."""
    return original.replace(
        "  IntArithmetic a;\n",
        "  struct : IntArithmetic {\n    bool inside(int64_t e, int64_t lo, int64_t hi) const {\n"
        f"      return {condition};\n    }}\n  }} a;\n")


MUTATIONS = [
    # ---- isa/ -------------------------------------------------------------------------------
    m(1, "isa/expr_op.h", "  if (op == ExprOp::Lt)\n    return x < y;",
      "  if (op == ExprOp::Lt)\n    return x <= y;", ISA, "Lt compares as Le"),
    m(2, "isa/expr_op.h", "  if (op == ExprOp::Gt)\n    return x > y;\n  return x >= y;",
      "  if (op == ExprOp::Gt)\n    return x > y;\n  return x > y;", ISA, "Ge compares as Gt"),
    m(3, "isa/scalar_eval.cpp", "    return amount >= t.bits ? 0 : x << amount;",
      "    return amount > t.bits ? 0 : x << amount;", ISA, "Shl by the width not 0"),
    m(4, "isa/scalar_eval.cpp", "  return uint64_t(q + (r != 0 && (sx < 0) == (sy < 0))); // CeilDiv",
      "  return uint64_t(q + (r != 0)); // CeilDiv", ISA, "signed cdiv rounds up for mixed signs"),
    m(5, "isa/scalar_eval.cpp", "    return op == ExprOp::Mod ? 0 : uint64_t(0) - uint64_t(sx);",
      "    return op == ExprOp::Mod ? 1 : uint64_t(0) - uint64_t(sx);", ISA, "x % -1 gives 1"),
    m(6, "isa/convert.cpp", "  if (rest > half || (rest == half && (result & 1)))",
      "  if (rest >= half)", ISA, "round half up instead of to even"),
    m(7, "isa/convert.cpp", "int floatBias(DataType t) { return (1 << (t.exponent - 1)) - 1; }",
      "int floatBias(DataType t) { return (1 << (t.exponent - 1)); }", ISA, "float bias off by one"),
    m(8, "isa/shared_layout.cpp", "    for (size_t d = rank; d-- > 0;)\n      o = o * shape_[d] + index[d];",
      "    for (size_t d = 0; d < rank; ++d)\n      o = o * shape_[d] + index[d];", ISA,
      "column-major offset computed row-major"),
    m(9, "isa/shared_layout.cpp", "  if (bits < 0 || base < 0 || shift < bits)",
      "  if (bits < 0 || base < 0 || shift < bits - 1)", ISA, "swizzle accepts shift = bits - 1"),
    m(10, "isa/layout.cpp",
      "    if (modes_[k].dim >= 0)\n      index[modes_[k].dim] = index[modes_[k].dim] * modes_[k].size + coord[k];",
      "    if (modes_[k].dim >= 0)\n      index[modes_[k].dim] = index[modes_[k].dim] * modes_[k].size - coord[k];",
      ISA, "RegisterLayout::apply subtracts a mode coordinate"),
    m(11, "isa/dtype.cpp", "  return bits >= (isSigned ? 2 : 1) && bits <= 8;",
      "  return bits >= 1 && bits <= 8;", ISA, "i1 accepted as a type"),
    m(12, "isa/bytecode_read.cpp", "  if (r_.ok() && flags > 1)", "  if (r_.ok() && flags > 2)", ISA,
      "variable flags 2 accepted"),
    m(13, "isa/layout_division.cpp", "    if (p == boundary && hm.size % om.size != 0)",
      "    if (p == boundary && hm.size % om.size == 0)", ISA, "layout division boundary test inverted"),
    # ---- assembler/ -------------------------------------------------------------------------
    m(20, "assembler/lexer.cpp", "bool isDigit(char c) { return c >= '0' && c <= '9'; }",
      "bool isDigit(char c) { return c >= '0' && c < '9'; }", ASM, "9 is not a digit"),
    m(21, "assembler/lexer.cpp", "    if (value > (uint64_t(INT64_MAX) - digit) / 10)",
      "    if (value > (uint64_t(INT64_MAX) - digit) / 10 + 1)", ASM, "decimal overflow check late"),
    m(22, "assembler/lexer.cpp", "  if (width > indents_.back()) {", "  if (width >= indents_.back()) {",
      ASM, "equal indentation opens a block"),
    m(23, "assembler/parser.cpp", "  if (out.rangeArgs.empty() || out.rangeArgs.size() > 3)",
      "  if (out.rangeArgs.empty() || out.rangeArgs.size() > 4)", ASM, "range() with 4 arguments"),
    m(24, "assembler/parser.cpp", "    auto rhs = binaryLevel(level + 1);", "    auto rhs = binaryLevel(level);",
      ASM, "binary operators associate to the right"),
    m(25, "assembler/lower_program.cpp", "    } else if (*t < 32 || *t > 1024 || *t % 32 != 0) {",
      "    } else if (*t < 32 || *t > 1024 || *t % 16 != 0) {", ASM, "threads= multiple of 16"),
    m(26, "assembler/scopes.cpp", "    if (name[k] < '0' || name[k] > '9')",
      "    if (name[k] < '0' || name[k] > '8')", ASM, "temporary names with 9 not reserved"),
    m(27, "assembler/layout_expr.cpp", "  for (size_t k = 1; k < chain.size(); ++k) {",
      "  for (size_t k = 2; k < chain.size(); ++k) {", ASM, "layout chain skips its second factor"),
    # ---- loader/ ----------------------------------------------------------------------------
    m(30, "loader/check_elementwise.cpp",
      "      if (a.var != kNoId && !t.isArithmetic())\n        return fail(ErrorCode::SubbyteArith, std::string(\"Where condition of type \") + t.name() +\n                                                 \": Cast sub-byte tensors first\");\n",
      "", LOADER, "sub-byte Where conditions accepted"),
    m(31, "loader/check_memory.cpp", "      if (tileShape[d] > memory.shape[d])",
      "      if (tileShape[d] > memory.shape[d] + 1)", LOADER, "shared tile one longer than its tensor"),
    m(32, "loader/check_memory.cpp", "    if (c && (*c < 0 || *c > memory.shape[d] - len))",
      "    if (c && (*c < 0 || *c > memory.shape[d] - len + 1))", LOADER,
      "constant shared slice one past the end accepted"),
    m(33, "loader/check_views.cpp", "  if (c && (*c < 0 || *c >= dim))", "  if (c && (*c < 0 || *c > dim))",
      LOADER, "SliceShared fixed index at the extent accepted"),
    m(34, "loader/check_views.cpp", "  if (len > dim || (c && *c + len > dim))",
      "  if (len > dim || (c && *c + len > dim + 1))", LOADER, "SliceShared slice one past the end"),
    m(35, "loader/check_views.cpp", "  if (storageBytes(shapeElements(shape), dtype) > limit)",
      "  if (storageBytes(shapeElements(shape), dtype) > 2 * limit)", LOADER,
      "shared capacity of one allocation doubled"),
    m(36, "loader/check_views.cpp", "  for (size_t d = 0; d < shape.size(); ++d)\n    if (shape[d] <= 0)",
      "  for (size_t d = 0; d < shape.size(); ++d)\n    if (shape[d] < 0)", LOADER,
      "AllocateShared with a zero dimension"),
    # CopyAsyncWaitGroup's count is checked by checkGroupCount, shared with WgmmaWaitGroup (which
    # has an upper bound and its own branch): the unbounded branch is CopyAsyncWaitGroup's.
    m(37, "loader/checker.cpp",
      "  if (n < 0)\n    return fail(ErrorCode::BadArgument, what + \" must not be negative\");",
      "  if (n < -1)\n    return fail(ErrorCode::BadArgument, what + \" must not be negative\");",
      LOADER, "CopyAsyncWaitGroup(-1) accepted"),
    m(38, "loader/checker.cpp", "  if (n < spec.minResults || n > spec.maxResults)",
      "  if (n < spec.minResults || n > spec.maxResults + 1)", LOADER, "one result too many accepted"),
    m(39, "loader/checker.cpp",
      "  info_.sharedBytes = scratchBytes_ > 0 ? info_.scratchByteOffset + scratchBytes_ : sharedEnd_;",
      "  info_.sharedBytes = sharedEnd_;", LOADER, "scratch area left out of sharedBytes"),
    m(40, "loader/checker.cpp", "    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;",
      "    int64_t da = i < a.size() ? a[i] : 1;", LOADER, "broadcast aligns on the left"),
    # ---- vm/cpu/ ----------------------------------------------------------------------------
    # The offset rules (validity of fixed entries, slice bounds) are one template in
    # isa/view_rules.h (applyOffset) that the interpreter instantiates in vm/cpu/memory.cpp with
    # IntArithmetic for both global and shared views; the mutants below change the interpreter's
    # instantiation for one kind of view only (a derived arithmetic, or the slice's result), so
    # each plants its bug where the interpreter computes that rule, and nowhere else.
    m(50, "vm/cpu/memory.cpp", TILE_ARITHMETIC,
      mutant_inside(TILE_ARITHMETIC, "e >= lo && (std::is_same_v<View, GlobalView> ? e <= hi : e < hi)"),
      CPU, "fixed global index at the view's extent in bounds"),
    m(51, "vm/cpu/memory.cpp", TILE_ARITHMETIC,
      mutant_inside(TILE_ARITHMETIC, "(std::is_same_v<View, GlobalView> ? e >= lo - 1 : e >= lo) && e < hi"),
      CPU, "fixed global index -1 in bounds"),
    m(52, "vm/cpu/memory.cpp", SLICE_RESULT,
      SLICE_RESULT.replace("  return out;", "  if constexpr (std::is_same_v<View, GlobalView>)\n"
                           "    for (int64_t &lo : out.lo)\n      lo = std::max<int64_t>(0, lo - 1);\n"
                           "  return out;"),
      CPU, "SliceGlobal lower bound one too low"),
    m(53, "vm/cpu/memory.cpp", SLICE_RESULT,
      SLICE_RESULT.replace("  return out;", "  if constexpr (std::is_same_v<View, GlobalView>)\n"
                           "    out.hi = out.shape;\n  return out;"),
      CPU, "SliceGlobal ignores the parent's upper bound"),
    m(54, "vm/cpu/memory.cpp", "    (reach < 0 ? min : max) += reach;", "    max += reach;", CPU,
      "negative strides extend the footprint upwards"),
    m(55, "vm/cpu/exec_conversion.cpp", "  if (shift + n > 64)\n    v |= words[w + 1] << (64 - shift);",
      "  if (shift + n > 65)\n    v |= words[w + 1] << (64 - shift);", CPU,
      "bit reads straddling a word lose a bit"),
    m(56, "vm/cpu/exec_contraction.cpp", "    double acc = sum ? 0.0 : 1.0;", "    double acc = sum ? 0.0 : 2.0;",
      CPU, "float Reduce prod starts at 2"),
    m(57, "vm/cpu/exec_contraction.cpp", "    for (int64_t j = 1; j < len; ++j) {",
      "    for (int64_t j = 2; j < len; ++j) {", CPU, "Reduce skips the second element"),
    m(58, "vm/cpu/memory.cpp", SLICE_ARITHMETIC,
      mutant_inside(SLICE_ARITHMETIC, "e >= lo && (std::is_same_v<View, SharedView> ? e <= hi : e < hi)"),
      CPU, "SliceShared fixed index at the extent in bounds"),
    m(59, "vm/cpu/exec_control.cpp", "  for (int64_t i = start; !done && (step > 0 ? i < stop : i > stop); i += step) {",
      "  for (int64_t i = start; !done && (step > 0 ? i <= stop : i > stop); i += step) {", CPU,
      "range() includes its stop"),
    m(60, "vm/cpu/race_detector.cpp", "  bool cross = thread != otherThread || thread < 0;",
      "  bool cross = thread != otherThread;", CPU, "accesses of unknown threads never conflict"),
    m(61, "vm/cpu/elements.cpp", "  if (shift + storageBits > 8)\n    updateByteAtomically(p + 1,",
      "  if (shift + storageBits > 9)\n    updateByteAtomically(p + 1,", CPU,
      "sub-byte stores straddling a byte lose a bit"),
    m(62, "vm/cpu/exec_views.cpp", "  if (view.byteOffset < 0 || end > int64_t(b.shared.size()))",
      "  if (view.byteOffset < 0 || end > int64_t(b.shared.size()) + 1)", CPU,
      "a shared view one byte past the block's shared memory"),
    m(63, "vm/cpu/launch_plan.cpp", "    if (ownerSlots[size_t(k)] / locals == t)",
      "    if (ownerSlots[size_t(k)] % locals == t)", CPU,
      "an operand's owner on a thread looked up by local slot"),
    m(64, "vm/cpu/exec_views.cpp", "  for (size_t d = shape.size(); d-- > dim + 1;)",
      "  for (size_t d = shape.size(); d-- > dim + 2;)", CPU, "Iota coordinate ignores a dimension"),
    # ---- jit/ -------------------------------------------------------------------------------
    m(70, "jit/emit_memory.cpp",
      "  uint64_t mask = ((uint64_t(1) << layout.swizzleBits()) - 1) << layout.swizzleBase();",
      "  uint64_t mask = ((uint64_t(1) << layout.swizzleBits()) - 1) << (layout.swizzleBase() + 1);",
      JIT, "swizzle mask shifted by one bit"),
    m(71, "jit/emit_memory.cpp", "      q[d] = b.CreateUDiv(c[d], n);\n      r[d] = b.CreateURem(c[d], n);",
      "      q[d] = b.CreateUDiv(c[d], n);\n      r[d] = b.CreateUDiv(c[d], n);", JIT,
      "tiled shared layout: inner index is the quotient"),
    m(72, "jit/lower_memory_global.cpp",
      "        ok, b.CreateAnd(b.CreateICmpSLE(a.lo[size_t(k)], c), b.CreateICmpSGT(a.hi[size_t(k)], c)));",
      "        ok, b.CreateAnd(b.CreateICmpSLE(a.lo[size_t(k)], c), b.CreateICmpSGE(a.hi[size_t(k)], c)));",
      JIT, "global element at the extent in bounds"),
    m(73, "jit/lower_memory_global.cpp", "    a.lo.push_back(b.CreateSub(tile.lo[size_t(k)], s[size_t(k)]));",
      "    a.lo.push_back(b.CreateSub(tile.lo[size_t(k)], b.CreateAdd(s[size_t(k)], b.getInt64(1))));",
      JIT, "global lower bound one too low"),
    m(74, "jit/emit_scalar.cpp", "  static constexpr P kSigned[] = {P::ICMP_EQ,  P::ICMP_NE,  P::ICMP_SLT,",
      "  static constexpr P kSigned[] = {P::ICMP_EQ,  P::ICMP_NE,  P::ICMP_SLE,", JIT,
      "signed Lt as Le"),
    m(75, "jit/emit_scalar.cpp",
      "    return b.CreateSelect(s ? b.CreateICmpSLT(y, x) : b.CreateICmpULT(y, x), y, x);",
      "    return b.CreateSelect(s ? b.CreateICmpSLT(y, x) : b.CreateICmpULT(y, x), x, y);", JIT,
      "integer Min gives the maximum"),
    m(76, "jit/emit_scalar.cpp",
      "  llvm::Value *fill = b.CreateAShr(x, llvm::ConstantInt::get(type, bits - 1));",
      "  llvm::Value *fill = llvm::ConstantInt::get(type, 0);", JIT,
      "signed Shr by the width gives 0 for negatives"),
    m(77, "jit/lower_memory_async.cpp",
      "            ok, b_.CreateAnd(b_.CreateICmpSGE(x[k], g_.lo[k]), b_.CreateICmpSLT(x[k], g_.hi[k])));",
      "            ok, b_.CreateAnd(b_.CreateICmpSGE(x[k], g_.lo[k]), b_.CreateICmpSLE(x[k], g_.hi[k])));",
      JIT, "CopyAsync element at the extent in bounds"),
    m(78, "jit/lower_memory_async.cpp", "  cg.callIntrinsic(llvm::Intrinsic::nvvm_cp_async_wait_all, {}, {});",
      "  cg.callIntrinsic(llvm::Intrinsic::nvvm_cp_async_commit_group, {}, {});", JIT,
      "CopyAsyncWaitAll does not wait"),
    m(79, "jit/lower_memory_matrix.cpp", "  llvm::Value *matrix = b.CreateLShr(lane, cg.constI32(3)); // 0..3",
      "  llvm::Value *matrix = b.CreateLShr(lane, cg.constI32(2)); // 0..3", JIT,
      "ldmatrix: lanes grouped by 4 instead of 8"),
    m(80, "jit/lower_contraction.cpp",
      "    llvm::Value *hi = shfl32(b.CreateTrunc(b.CreateLShr(bits, 32), b.getInt32Ty()));",
      "    llvm::Value *hi = shfl32(b.CreateTrunc(b.CreateLShr(bits, 31), b.getInt32Ty()));", JIT,
      "64-bit shuffles take the wrong high word"),
    m(81, "jit/lower_memory_global.cpp",
      "      words[size_t(byte / 4 + 1)] = b.CreateTrunc(b.CreateLShr(bits, 32), b.getInt32Ty());",
      "      words[size_t(byte / 4 + 1)] = b.CreateTrunc(b.CreateLShr(bits, 16), b.getInt32Ty());", JIT,
      "8-byte elements split at bit 16"),
    m(82, "jit/lower_memory_matrix.cpp", "  llvm::Value *warp = b.CreateLShr(cg.tid(), cg.constI32(5));",
      "  llvm::Value *warp = b.CreateLShr(cg.tid(), cg.constI32(4));", JIT, "ldmatrix: warp of 16 lanes"),
    # ---- vm/cuda/ ---------------------------------------------------------------------------
    m(90, "vm/cuda/launch_args.cpp", "  return (n / 8) * bits + ((n % 8) * bits + 7) / 8;",
      "  return (n / 8) * bits + ((n % 8) * bits) / 8;", CUDA, "storage bytes round down"),
    m(91, "vm/cuda/launch_args.cpp", "    if (arg.byteSize < needed)", "    if (arg.byteSize + 1 < needed)",
      CUDA, "argument one byte short accepted"),
    m(92, "isa/scalar_eval.cpp", "    if (n < 1 || n > kMaxGridDims[d])",
      "    if (n < 1 || n > kMaxGridDims[d] + 1)", ISA + CUDA, "grid dimension over the limit"),
    m(93, "vm/cuda/workspace.cpp", "  return (value + alignment - 1) / alignment * alignment;",
      "  return value / alignment * alignment;", CUDA, "workspace alignment rounds down"),
    m(94, "vm/cuda/workspace.cpp", "    if (r.end <= begin || end <= r.begin) {",
      "    if (r.end < begin || end < r.begin) {", CUDA, "dirty ranges touching count as overlapping"),
    m(95, "vm/cuda/kernel_cache.cpp", "         \" program=\" + program + \" compiler=\" + compilerVersion +",
      "         \" program=\" + program +", CUDA, "cache key without the compiler version"),
    m(96, "vm/cuda/kernel_cache.cpp", "  if (archSpecific && version >= 90)",
      "  if (archSpecific && version > 90)", CUDA, "sm_90 not spelled sm_90a"),
]


def load_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def apply_check(mut, root):
    """The mutated text of the mutation's file, or raise SystemExit when it does not apply."""
    path = os.path.join(root, mut["file"])
    if not os.path.exists(path):
        raise SystemExit(f"mutation {mut['id']} no longer applies: {mut['file']} does not exist")
    text = load_text(path)
    count = text.count(mut["original"]) if mut["original"] else 0
    if count != 1:
        raise SystemExit(f"mutation {mut['id']} no longer applies: its snippet occurs {count} times "
                         f"in {mut['file']} (expected once):\n{mut['original']}")
    return text, text.replace(mut["original"], mut["replacement"], 1)


def sync_tree(src, dst):
    """Copy the tracked files of src into dst where their content differs (keeps mtimes of
    unchanged files, so the scratch build stays incremental); remove files no longer tracked."""
    files = subprocess.check_output(["git", "ls-files", "-z"], cwd=src).decode().split("\0")
    files = [f for f in files if f and os.path.isfile(os.path.join(src, f))]
    keep = set(files)
    changed = 0
    for f in files:
        s, d = os.path.join(src, f), os.path.join(dst, f)
        with open(s, "rb") as fh:
            data = fh.read()
        if os.path.exists(d):
            with open(d, "rb") as fh:
                if fh.read() == data:
                    continue
        os.makedirs(os.path.dirname(d), exist_ok=True)
        with open(d, "wb") as fh:
            fh.write(data)
        shutil.copymode(s, d)
        changed += 1
    listing = os.path.join(dst, ".mutate-files")
    if os.path.exists(listing):
        for f in load_text(listing).split("\n"):
            if f and f not in keep and os.path.exists(os.path.join(dst, f)):
                os.remove(os.path.join(dst, f))
    with open(listing, "w") as fh:
        fh.write("\n".join(files))
    return changed


def run(cmd, cwd, timeout=None, env=None):
    try:
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           errors="replace", timeout=timeout, env=env)
        return p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return None, out


def prepare_workdir(work, log):
    src = os.path.join(work, "src")
    os.makedirs(src, exist_ok=True)
    changed = sync_tree(ROOT, src)
    env = dict(os.environ)
    if shutil.which("ccache") and "CXX" not in env:
        env["CXX"] = "ccache g++"
    if not os.path.exists(os.path.join(src, "build", "build.ninja")):
        rc, out = run(["meson", "setup", "build"], src, env=env)
        if rc != 0:
            raise SystemExit("meson setup failed in " + src + "\n" + out)
    log(f"[{work}] synced ({changed} files changed); building the unmutated tree")
    rc, out = run(["nice", "-n", "19", "ninja", "-C", "build"], src, env=env)
    if rc != 0:
        raise SystemExit("the unmutated scratch tree does not build:\n" + out[-5000:])
    return src, env


SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed, (\d+) skipped$")


def run_mutant(mut, src, env, timeout):
    path = os.path.join(src, mut["file"])
    original_text, mutated = apply_check(mut, src)
    targets = sorted({t for s in mut["suites"] for t in SUITE_TARGETS[s]})
    start = time.monotonic()
    result = {"id": mut["id"], "file": mut["file"], "what": mut["what"], "area": mut["area"],
              "suites": mut["suites"]}
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(mutated)
        rc, out = run(["nice", "-n", "19", "ninja", "-C", "build"] + targets, src, env=env)
        if rc != 0:
            result.update(status="stillborn", detail=out[-2000:])
            return result
        rc, out = run(["nice", "-n", "19", sys.executable, "tests/run_tests.py", "build"] +
                      mut["suites"], src, timeout=timeout, env=env)
        if rc is None:
            result.update(status="killed", detail="timed out after %d s" % timeout)
            return result
        last = out.strip().splitlines()[-1] if out.strip() else ""
        failing = [l for l in out.splitlines() if l.startswith("failing: ")]
        result["summary"] = last
        if rc != 0:
            result.update(status="killed", detail=(failing[0] if failing else last))
        else:
            result.update(status="survived", detail=last)
        return result
    finally:
        with open(path, "w", encoding="utf-8") as f:
            f.write(original_text)
        result["seconds"] = round(time.monotonic() - start, 1)


def gpu_pack(selected, work, log):
    """Record the differential modules, compile them with each jit/ mutant, pack for the GPU."""
    src, env = prepare_workdir(work, log)
    jit = [x for x in selected if x["file"].startswith("jit/")]
    rc, out = run(["nice", "-n", "19", "ninja", "-C", "build", "tests/jit/test_jit_gpu",
                   "tests/jit/mutant_kernels"], src, env=env)
    if rc != 0:
        raise SystemExit("building test_jit_gpu and mutant_kernels failed:\n" + out[-5000:])
    pack = os.path.join(ROOT, ".carry-mutants")
    shutil.rmtree(pack, ignore_errors=True)
    modules = os.path.join(pack, "modules")
    os.makedirs(modules)
    rec_env = dict(env, TILUSVM_DIFF_RECORD_DIR=modules)
    rc, out = run(["build/tests/jit/test_jit_gpu", "-tc=interpreter side: *"], src, env=rec_env)
    if rc != 0:
        raise SystemExit("recording the differential modules failed:\n" + out[-5000:])
    log(f"recorded {len(os.listdir(modules))} modules")

    def compile_set(name):
        ptx = os.path.join(work, "ptx", name)
        shutil.rmtree(ptx, ignore_errors=True)
        rc, out = run(["build/tests/jit/mutant_kernels", "compile", modules, ptx, "90"], src, env=env)
        if rc != 0:
            return "compile failed: " + out[-300:]
        archive = os.path.join(pack, "ptx", name + ".tar.xz")
        os.makedirs(os.path.dirname(archive), exist_ok=True)
        subprocess.check_call(["tar", "-cJf", archive, "-C", ptx, "."])
        return out.strip().splitlines()[-1] if out.strip() else ""

    log("baseline (unmutated): " + compile_set("0"))
    for mut in jit:
        path = os.path.join(src, mut["file"])
        original_text, mutated = apply_check(mut, src)
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(mutated)
            rc, out = run(["nice", "-n", "19", "ninja", "-C", "build", "tests/jit/mutant_kernels"],
                          src, env=env)
            if rc != 0:
                log(f"mutation {mut['id']}: stillborn (does not compile)")
                continue
            log(f"mutation {mut['id']} ({mut['what']}): " + compile_set(str(mut["id"])))
        finally:
            with open(path, "w", encoding="utf-8") as f:
                f.write(original_text)
    rc, out = run(["nice", "-n", "19", "ninja", "-C", "build", "tests/jit/mutant_kernels"], src,
                  env=env)
    binaries = {"vm/libtilusvm_private.so.0": None, "tests/jit/test_jit_gpu": None,
                "tests/jit/mutant_kernels": None}
    for rel in binaries:
        dst = os.path.join(pack, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy(os.path.join(src, "build", rel), dst)
        subprocess.check_call(["strip", "--strip-unneeded", dst])
    ldd = subprocess.check_output(["ldd", os.path.join(src, "build", "vm/libtilusvm_private.so.0")], text=True)
    for line in ldd.splitlines():
        if "libxxhash" in line:
            shutil.copy(line.split("=>")[1].split()[0], os.path.join(pack, "vm"))
    # The programs the differential test reads (TILUSVM_SOURCE_ROOT=pack there), as recorded.
    shutil.copytree(os.path.join(src, "programs"), os.path.join(pack, "programs"))
    with open(os.path.join(pack, "mutations.json"), "w") as f:
        json.dump([{k: x[k] for k in ("id", "file", "what")} for x in jit], f, indent=1)
    size = subprocess.check_output(["du", "-sh", pack], text=True).split()[0]
    log(f"packed {pack} ({size}); on the GPU machine, carrying .carry-mutants:\n"
        "  bash scripts/gpu_mutants.sh .carry-mutants")


def runtime_pack(selected, work, log, per_pack=3):
    """Build libtilusvm once per vm/cuda mutant (stripped, xz) and pack them with the unmutated
    GPU and runtime test executables, `per_pack` mutants per folder (each about 12 MB, so a
    folder stays under the device tool's 64 MiB): .carry-runtime-mutants-1, -2, ..."""
    src, env = prepare_workdir(work, log)
    lib = "vm/libtilusvm_private.so.0.1.0"
    tests = ["tests/gpu/test_gpu", "tests/runtime/test_runtime", "tools/vm-run"]
    rc, out = run(["nice", "-n", "19", "ninja", "-C", "build", lib] + tests, src, env=env)
    if rc != 0:
        raise SystemExit("building the runtime tests failed:\n" + out[-5000:])
    staging = os.path.join(work, "runtime-libs")
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging)

    def keep(name):
        dst = os.path.join(staging, f"lib_{name}.so.0")
        shutil.copy(os.path.join(src, "build", lib), dst)
        subprocess.check_call(["strip", "--strip-unneeded", dst])
        subprocess.check_call(["xz", "-T0", "-6", "-f", dst])

    keep("0")
    built = []
    for mut in [x for x in selected if x["file"].startswith("vm/cuda/")]:
        path = os.path.join(src, mut["file"])
        original_text, mutated = apply_check(mut, src)
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(mutated)
            rc, out = run(["nice", "-n", "19", "ninja", "-C", "build", lib], src, env=env)
            if rc != 0:
                log(f"mutation {mut['id']}: stillborn (does not compile)")
                continue
            keep(str(mut["id"]))
            built.append(mut)
            log(f"mutation {mut['id']} ({mut['what']}): library built")
        finally:
            with open(path, "w", encoding="utf-8") as f:
                f.write(original_text)
    rc, out = run(["nice", "-n", "19", "ninja", "-C", "build", lib], src, env=env)
    for old in glob.glob(os.path.join(ROOT, ".carry-runtime-mutants-*")):
        shutil.rmtree(old)
    packs = [built[k:k + per_pack] for k in range(0, len(built), per_pack)] or [[]]
    for n, group in enumerate(packs, 1):
        pack = os.path.join(ROOT, f".carry-runtime-mutants-{n}")
        for rel in tests:
            dst = os.path.join(pack, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy(os.path.join(src, "build", rel), dst)
            subprocess.check_call(["strip", "--strip-unneeded", dst])
        os.makedirs(os.path.join(pack, "vm"), exist_ok=True)
        ldd = subprocess.check_output(["ldd", os.path.join(src, "build", lib)], text=True)
        for line in ldd.splitlines():
            if "libxxhash" in line:
                shutil.copy(line.split("=>")[1].split()[0], os.path.join(pack, "vm"))
        for name in ["0"] + [str(x["id"]) for x in group]:
            shutil.copy(os.path.join(staging, f"lib_{name}.so.0.xz"), pack)
        size = subprocess.check_output(["du", "-sh", pack], text=True).split()[0]
        log(f"packed {pack} ({size}): baseline and mutations "
            f"{', '.join(str(x['id']) for x in group)}; on the GPU machine, carrying it:\n"
            f"  bash scripts/gpu_runtime_mutants.sh {os.path.basename(pack)}")


def print_table(results, out=sys.stdout):
    print(f"{'id':>3}  {'status':<9}  {'file':<28} {'mutation':<52} {'s':>5}", file=out)
    for r in sorted(results, key=lambda r: r["id"]):
        print(f"{r['id']:>3}  {r['status']:<9}  {r['file']:<28} {r['what'][:52]:<52} "
              f"{r.get('seconds', 0):>5}", file=out)
        if r["status"] == "killed":
            print(f"{'':16}by: {r.get('detail', '')[:100]}", file=out)
    for area in ("cpu", "gpu"):
        scored = [r for r in results if r["area"] == area and r["status"] in ("killed", "survived")]
        if not scored:
            continue
        killed = sum(r["status"] == "killed" for r in scored)
        stillborn = sum(r["area"] == area and r["status"] == "stillborn" for r in results)
        print(f"{area} mutation score: {killed}/{len(scored)} killed = "
              f"{100.0 * killed / len(scored):.1f}% (stillborn, not scored: {stillborn})", file=out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="list the mutations and exit")
    ap.add_argument("--check", action="store_true", help="verify that every mutation applies")
    ap.add_argument("--gpu-pack", action="store_true",
                    help="pack the jit/ mutants' kernels for scripts/gpu_mutants.sh")
    ap.add_argument("--runtime-pack", action="store_true",
                    help="pack the vm/cuda mutants' libraries for the GPU machine")
    ap.add_argument("--only", help="comma-separated mutation ids")
    ap.add_argument("--area", choices=["cpu", "gpu", "all"], default="cpu")
    ap.add_argument("--jobs", type=int, default=1, help="mutants run in parallel (one scratch copy each)")
    ap.add_argument("--work", default="/tmp/mutate-work", help="scratch directory")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per mutant's test run")
    ap.add_argument("--json", help="write the report here (default WORK/report.json)")
    args = ap.parse_args()

    ids = [x["id"] for x in MUTATIONS]
    if len(ids) != len(set(ids)):
        raise SystemExit("duplicate mutation ids")
    selected = MUTATIONS
    if args.only:
        wanted = {int(x) for x in args.only.split(",")}
        unknown = wanted - set(ids)
        if unknown:
            raise SystemExit("no mutation " + ", ".join(map(str, sorted(unknown))))
        selected = [x for x in MUTATIONS if x["id"] in wanted]
    elif args.area != "all":
        selected = [x for x in MUTATIONS if x["area"] == args.area]

    if args.list:
        for x in selected:
            print(f"{x['id']:>3} {x['area']} {x['file']}: {x['what']}  [{', '.join(x['suites'])}]")
        return 0
    problems = []
    for x in MUTATIONS:
        try:
            apply_check(x, ROOT)
        except SystemExit as e:
            problems.append(str(e))
    if problems:
        raise SystemExit("\n".join(problems))
    if args.check:
        areas = {a: sum(x["area"] == a for x in MUTATIONS) for a in ("cpu", "gpu")}
        print(f"all {len(MUTATIONS)} mutations apply ({areas['cpu']} cpu, {areas['gpu']} gpu)")
        return 0

    lock = threading.Lock()

    def log(msg):
        with lock:
            print(msg, flush=True)

    if args.runtime_pack:
        runtime_pack([x for x in selected if x["area"] == "gpu"] if args.only else
                     [x for x in MUTATIONS if x["area"] == "gpu"], args.work, log)
        return 0
    if args.gpu_pack:
        gpu_pack([x for x in selected if x["area"] == "gpu"] if args.only else
                 [x for x in MUTATIONS if x["area"] == "gpu"], args.work, log)
        return 0

    jobs = max(1, min(args.jobs, len(selected)))
    workdirs = [args.work if k == 0 else f"{args.work}-{k}" for k in range(jobs)]
    prepared = [prepare_workdir(w, log) for w in workdirs]
    queue = list(selected)
    results = []
    done = [0]

    def worker(k):
        src, env = prepared[k]
        while True:
            with lock:
                if not queue:
                    return
                mut = queue.pop(0)
            r = run_mutant(mut, src, env, args.timeout)
            with lock:
                results.append(r)
                done[0] += 1
                print(f"[{done[0]}/{len(selected)}] mutation {r['id']} ({r['file']}: {r['what']}): "
                      f"{r['status']} in {r.get('seconds')} s", flush=True)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(worker, range(jobs)))
    print()
    print_table(results)
    report = args.json or os.path.join(args.work, "report.json")
    with open(report, "w") as f:
        json.dump({"results": sorted(results, key=lambda r: r["id"])}, f, indent=1)
    print("report: " + report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
