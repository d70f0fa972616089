// The JIT driver: one LLVM initialisation per process, then for each compilation a fresh
// LLVMContext (so compilations on different host threads share nothing), the device library
// read lazily into the module, the kernel built by Codegen (codegen.h), the bodies of the
// library functions it calls, the optimisation pipeline (O2 without the vectorisers), and PTX
// from the NVPTX backend for sm_80 or sm_90a.
//
// The kernel is an `.entry` named after the program (characters outside [A-Za-z0-9_$]
// replaced by `_`), with `.reqntid` = the block's threads and dynamic shared memory
// `tilus_smem` (extern, 16-byte aligned) that holds the checker's shared-memory plan.
#include "jit/jit.h"

#include "jit/code_size.h"
#include "jit/codegen.h"
#include "jit/fatal_error.h"
#include "jit/held_registers.h"
#include "jit/nan_canonical.h"
#include "jit/source_hash.h"
#include "jit/wgmma_zero_accumulator.h"

#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/PassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <mutex>

namespace tilus {

namespace jit {
extern const unsigned char kDevlibBitcode[];
extern const size_t kDevlibBitcodeSize;
} // namespace jit

namespace {

constexpr const char *kTriple = "nvptx64-nvidia-cuda";

void initializeLlvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
    // 32-bit pointers for shared (and local, const) memory: shared addresses then take one
    // register instead of two. This copy of LLVM is private to libtilusvm (linked statically).
    // The O3 threshold for full unrolling in the O2-based pipeline (kPipeline): short constant-trip
    // loops of the programs (pipeline prologues) are unrolled as before.
    const char *args[] = {"tilusvm", "-nvptx-short-ptr", "-unroll-threshold-default=300"};
    llvm::cl::ParseCommandLineOptions(3, args, "tilusvm JIT\n");
  });
}

/// CPU time of the calling thread in milliseconds (phase timings are then independent of
/// what else runs on the machine).
double threadMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

/// TILUSVM_JIT_TIMING=1: one line per compilation on stderr with the time of each phase; =2
/// adds a line with the IR that the program's instructions lowered to (irReport).
int timingLevel() {
  static const int level = [] {
    const char *v = std::getenv("TILUSVM_JIT_TIMING");
    if (!v || !*v || std::string(v) == "0")
      return 0;
    return std::string(v) == "2" ? 2 : 1;
  }();
  return level;
}

bool timingEnabled() { return timingLevel() > 0; }

/// TILUSVM_JIT_BANKS=1: a line per plain shared access on stderr (jit/bank_report.h).
bool banksEnabled() {
  static const bool on = [] {
    const char *v = std::getenv("TILUSVM_JIT_BANKS");
    return v && *v && std::string(v) != "0";
  }();
  return on;
}

/// "jit: NAME banks: #37 LoadShared: 4 accesses of up to 16 bytes per lane, 32 wavefronts (16
/// without bank conflicts): conflicts", one line per access instruction.
void bankReport(const std::string &name, const std::vector<SharedAccessReport> &reports) {
  for (const SharedAccessReport &r : reports) {
    if (r.wavefronts < 0) {
      std::fprintf(stderr, "jit: %s banks: #%zu %s: packed sub-byte elements, not analysed\n",
                   name.c_str(), r.instruction, r.opcode);
      continue;
    }
    std::fprintf(stderr,
                 "jit: %s banks: #%zu %s: %lld accesses of up to %d bytes per lane, %lld "
                 "wavefronts (%lld without bank conflicts)%s\n",
                 name.c_str(), r.instruction, r.opcode, (long long)r.accesses, r.bytes,
                 (long long)r.wavefronts, (long long)r.ideal,
                 r.wavefronts > r.ideal ? ": conflicts" : "");
  }
}

/// "jit: NAME IR before optimisation: N instructions; by opcode: Reduce 4100, ...; largest:
/// #69 Reduce 2893, ..." (the ten largest opcodes and instructions).
void irReport(const std::string &name, const std::vector<jit::Codegen::IrCount> &counts) {
  std::map<std::string, int64_t> byOpcode;
  int64_t total = 0;
  for (const jit::Codegen::IrCount &c : counts) {
    byOpcode[c.name] += c.instructions;
    total += c.instructions;
  }
  std::vector<std::pair<std::string, int64_t>> opcodes(byOpcode.begin(), byOpcode.end());
  std::stable_sort(opcodes.begin(), opcodes.end(),
                   [](const auto &x, const auto &y) { return x.second > y.second; });
  std::vector<jit::Codegen::IrCount> largest = counts;
  std::stable_sort(largest.begin(), largest.end(),
                   [](const auto &x, const auto &y) { return x.instructions > y.instructions; });
  std::string line = "jit: " + name + " IR before optimisation: " + std::to_string(total) +
                     " instructions; by opcode:";
  for (size_t k = 0; k < opcodes.size() && k < 10; ++k)
    line += (k ? ", " : " ") + opcodes[k].first + " " + std::to_string(opcodes[k].second);
  line += "; largest:";
  for (size_t k = 0; k < largest.size() && k < 10; ++k)
    line += (k ? ", #" : " #") + std::to_string(largest[k].index) + " " + largest[k].name + " " +
            std::to_string(largest[k].instructions);
  std::fprintf(stderr, "%s\n", line.c_str());
}

Status jitError(const std::string &message) { return Status::error(ErrorCode::Jit, message); }

/// The PTX version (times ten) that sm_90 code of the program needs: 84 for a Dot of FP8
/// operands (mma.sync on e4m3/e5m2), 81 for an AtomicAdd of f32, f16 or bf16 into global
/// memory (the vector red.global.add.v4.f32 of lower_atomic.cpp), 80 otherwise.
int ptxVersionSm90(const Program &program, const ProgramInfo &info) {
  int version = 80;
  for (const Instruction &inst : program.instructions) {
    if (inst.opcode == Opcode::Dot && inst.arg(ArgName::a).isTensor()) {
      DataType t = info.vars[inst.arg(ArgName::a).var].dtype;
      if (t == DataType::f8e4m3() || t == DataType::f8e5m2())
        return 84;
    }
    if (inst.opcode == Opcode::AtomicAdd && inst.arg(ArgName::dst).isTensor()) {
      const VarType &dst = info.vars[inst.arg(ArgName::dst).var];
      if (dst.kind == VarKind::Global &&
          (dst.dtype == DataType::f32() || dst.dtype == DataType::f16() ||
           dst.dtype == DataType::bf16()))
        version = 81;
    }
  }
  return version;
}

Expected<std::unique_ptr<llvm::TargetMachine>> makeTargetMachine(const JitOptions &options,
                                                                 int ptxSm90) {
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(kTriple, error);
  if (!target)
    return jitError("no NVPTX target: " + error);
  if (options.smVersion != 80 && options.smVersion != 90)
    return Status::error(ErrorCode::Unsupported,
                         "target sm_" + std::to_string(options.smVersion) + " (supported: 80, 90)");
  const char *cpu = options.smVersion == 90 ? "sm_90a" : "sm_80";
  // The lowest PTX version that has every instruction used, so that older drivers load it.
  std::string features =
      options.smVersion == 90 ? "+ptx" + std::to_string(ptxSm90) : std::string("+ptx75");
  llvm::TargetOptions to;
  to.AllowFPOpFusion = llvm::FPOpFusion::Standard; // never contract separate fadd/fmul
  // Default rather than Aggressive: NVPTX's IR passes then use EarlyCSE instead of GVN (the
  // optimisation pipeline has done that work already) and the machine passes are the same.
  llvm::CodeGenOptLevel level =
      options.optLevel <= 0 ? llvm::CodeGenOptLevel::None : llvm::CodeGenOptLevel::Default;
  // TILUSVM_JIT_CODEGEN=none|less|default|aggressive sets the backend's level for experiments
  if (const char *text = std::getenv("TILUSVM_JIT_CODEGEN");
      text && *text && options.optLevel > 0) {
    std::string v(text);
    if (v == "none")
      level = llvm::CodeGenOptLevel::None;
    else if (v == "less")
      level = llvm::CodeGenOptLevel::Less;
    else if (v == "default")
      level = llvm::CodeGenOptLevel::Default;
    else if (v == "aggressive")
      level = llvm::CodeGenOptLevel::Aggressive;
    else
      return Status::error(ErrorCode::Usage, "TILUSVM_JIT_CODEGEN: `" + v +
                                                 "` is not none, less, default or aggressive");
  }
  std::unique_ptr<llvm::TargetMachine> tm(
      target->createTargetMachine(kTriple, cpu, features, to, std::nullopt, std::nullopt, level));
  if (!tm)
    return jitError("cannot create the NVPTX target machine");
  return tm;
}

/// The device library read lazily into `ctx`, as the module the kernel is added to: function
/// bodies are parsed only when materializeUsed() finds them called (a kernel uses a few of the
/// library's functions; parsing all of them took about 3 ms per compilation and the
/// optimisation pipeline ran on them until GlobalOpt deleted them).
Expected<std::unique_ptr<llvm::Module>> loadDeviceLibrary(llvm::LLVMContext &ctx) {
  llvm::StringRef bytes(reinterpret_cast<const char *>(jit::kDevlibBitcode),
                        jit::kDevlibBitcodeSize);
  llvm::Expected<std::unique_ptr<llvm::Module>> module =
      llvm::getLazyBitcodeModule(llvm::MemoryBufferRef(bytes, "tilus_devlib"), ctx);
  if (!module)
    return jitError("device library: " + llvm::toString(module.takeError()));
  for (llvm::Function &f : **module) {
    f.removeFnAttr("target-cpu");
    f.removeFnAttr("target-features");
  }
  return std::move(*module);
}

/// Parses the bodies of the library functions that the kernel calls (and those they call),
/// deletes the others, and completes the module (metadata, global initialisers).
Status materializeUsed(llvm::Module &mod) {
  for (bool changed = true; changed;) {
    changed = false;
    for (llvm::Function &f : mod) {
      if (!f.isMaterializable() || f.use_empty())
        continue;
      if (llvm::Error error = f.materialize())
        return jitError("device library: " + llvm::toString(std::move(error)));
      changed = true;
    }
  }
  for (auto it = mod.begin(); it != mod.end();) {
    llvm::Function &f = *it++;
    if (f.isMaterializable())
      f.eraseFromParent();
  }
  if (llvm::Error error = mod.materializeAll())
    return jitError("device library: " + llvm::toString(std::move(error)));
  return Status::success();
}

/// The kernel's NVVM annotations: `.reqntid threads` and, for blocks_per_sm=, `.minnctapersm`
/// (ptxas then keeps the registers per thread low enough for that many blocks per SM).
void annotateKernel(llvm::Module &mod, llvm::Function *kernel, uint32_t threads,
                    uint32_t blocksPerSm, bool reallocates) {
  llvm::LLVMContext &ctx = mod.getContext();
  llvm::NamedMDNode *annotations = mod.getOrInsertNamedMetadata("nvvm.annotations");
  auto add = [&](const char *key, uint32_t value) {
    llvm::Metadata *md[] = {
        llvm::ValueAsMetadata::get(kernel), llvm::MDString::get(ctx, key),
        llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(llvm::Type::getInt32Ty(ctx), value))};
    annotations->addOperand(llvm::MDNode::get(ctx, md));
  };
  add("kernel", 1);
  add("reqntidx", threads);
  if (blocksPerSm > 0)
    add("minctasm", blocksPerSm);
  // setmaxnreg re-distributes a register file of a known size (docs/isa.md, "Thread groups")
  if (reallocates)
    add("maxnreg", uint32_t(groupStartRegisters(threads, blocksPerSm)));
}

/// Library functions become internal (unused ones are deleted, used ones may be inlined);
/// the small conversion helpers are always inlined so that their constant arguments fold.
void internalizeLibrary(llvm::Module &mod, llvm::Function *kernel) {
  for (llvm::Function &f : mod) {
    if (&f == kernel || f.isDeclaration())
      continue;
    f.setLinkage(llvm::GlobalValue::InternalLinkage);
    llvm::StringRef name = f.getName();
    if (name.contains("_to_float") || name.contains("to_f32") || name.contains("encode_finite") ||
        name == "tl_expf") {
      f.removeFnAttr(llvm::Attribute::NoInline);
      f.removeFnAttr(llvm::Attribute::OptimizeNone);
      f.addFnAttr(llvm::Attribute::AlwaysInline);
    }
  }
  for (llvm::GlobalVariable &g : mod.globals())
    if (!g.isDeclaration() && g.getName() != "tilus_smem")
      g.setLinkage(llvm::GlobalValue::InternalLinkage);
}

/// The optimisation pipeline: LLVM 19's per-module O2 pipeline (`opt -passes='default<O2>'
/// -print-pipeline-passes`) without the passes that find nothing in the per-thread scalar code
/// Codegen emits: the loop and SLP vectorisers with the InstCombine rounds after them, loop
/// distribution and load elimination, OpenMP and coroutine passes. Measured on every program of
/// programs/ (scripts/jit_quality.py), it gives the same PTX loop bodies, registers and spills
/// as O3 in about 70 % of its time (the O3 extras: non-trivial loop unswitching, argument
/// promotion, aggressive InstCombine, change nothing here). Also left out, because the PTX of
/// every program and test kernel (sm_80, sm_90a, with and without the launch-time
/// specialisation) is byte-identical without them: the fifth of O2's six InstCombine rounds (at
/// the end of the CGSCC function pipeline), DSE, BDCE, ADCE, MemCpyOpt, MergedLoadStoreMotion, both
/// JumpThreading runs, the three CorrelatedValuePropagation runs, ConstraintElimination,
/// VectorCombine, Float2Int, LoopSink, InstSimplify, the second TailCallElim,
/// LibCallsShrinkWrap and CalledValuePropagation, and the sixth InstCombine round, after the
/// late LoopUnroll (together about 25 % of the optimisation time; the sixth InstCombine round,
/// 3-5 %, only swapped two instructions in swiglu_quant.tasm's PTX and laid out the blocks of
/// tests/conformance/ok_control_flow.tasm differently; the last two
/// CorrelatedValuePropagation runs went once the element paths of vector groups became inline
/// PTX, after which they found nothing and took 10-15 % of the GEMMs' optimisation time,
/// LazyValueInfo over chains of cold blocks).
/// A second pruning, pass by pass (each left out only if the PTX stayed byte-identical for 108
/// kernels of programs/ and variants with and without specialisation, 612 of programs/ and
/// tests/ at sm_80 and sm_90a, and the 970 kernels of the GPU differential tests), left out 36
/// more: the attribute, reflection, expect and instrumentation passes at the start, every SROA
/// and Mem2Reg (Codegen's multiply assigned variables are promoted before the pipeline,
/// jit/nan_canonical.h), AlwaysInline (the inliner inlines the device library's functions), three
/// of the nine SimplifyCFG runs, both GlobalOpt, both FunctionAttrs, LoopSimplifyCFG, LoopIdiom,
/// both SimpleLoopUnswitch, the late LoopRotate, and the module clean-ups at the end (6 % of the
/// optimisation time). AggressiveInstCombine stays (it folds byte shuffles of FP8 operands in 17
/// of the test kernels), as do SCCP and the late LoopUnroll (32 and 12 of them). Smaller pipelines
/// (one or two InstCombine rounds around LoopRotate and LICM) are twice as fast but lose the
/// induction-variable reasoning that proves the bounds tests of unrolled tile loads true (IPSCCP
/// after SROA, then InstCombine, then IndVarSimplify), and with it registers and loop
/// instructions. TILUSVM_JIT_PASSES replaces the pipeline by a new-PM pipeline text (e.g.
/// `default<O3>`) for such experiments.
constexpr const char *kPipeline =
    "annotation2metadata,function(nvvm-intr-range),function<eager-inv>(simplifycfg<bonus-inst-thres"
    "hold=1;no-forward-switch-cond;no-switch-range-to-icmp;no-switch-to-lookup;keep-loops;no-hoist-"
    "common-insts;no-sink-common-insts;speculate-blocks;simplify-cond-branch;no-speculate-unpredict"
    "ables>,early-cse<>),ipsccp,function<eager-inv>(instcombine<max-iterations=1;no-use-loop-info;n"
    "o-verify-fixpoint>,simplifycfg<bonus-inst-threshold=1;no-forward-switch-cond;switch-range-to-i"
    "cmp;no-switch-to-lookup;keep-loops;no-hoist-common-insts;no-sink-common-insts;speculate-blocks"
    ";simplify-cond-branch;no-speculate-unpredictables>),function(invalidate<aa>),cgscc(devirt<4>(i"
    "nline,function<eager-inv;no-rerun>(early-cse<memssa>,speculative-execution<only-if-divergent-t"
    "arget>,simplifycfg<bonus-inst-threshold=1;no-forward-switch-cond;switch-range-to-icmp;no-switc"
    "h-to-lookup;keep-loops;no-hoist-common-insts;no-sink-common-insts;speculate-blocks;simplify-co"
    "nd-branch;no-speculate-unpredictables>,instcombine<max-iterations=1;no-use-loop-info;no-verify"
    "-fixpoint>,aggressive-instcombine,tailcallelim,reassociate,loop-mssa(loop-instsimplify,licm<no"
    "-allowspeculation>,loop-rotate<header-duplication;no-prepare-for-lto>,licm<allowspeculation>),"
    "simplifycfg<bonus-inst-threshold=1;no-forward-switch-cond;switch-range-to-icmp;no-switch-to-lo"
    "okup;keep-loops;no-hoist-common-insts;no-sink-common-insts;speculate-blocks;simplify-cond-bran"
    "ch;no-speculate-unpredictables>,instcombine<max-iterations=1;no-use-loop-info;no-verify-fixpoi"
    "nt>,loop(indvars,loop-deletion,loop-unroll-full),gvn<>,sccp,instcombine<max-iterations=1;no-us"
    "e-loop-info;no-verify-fixpoint>,loop-mssa(licm<allowspeculation>),simplifycfg<bonus-inst-thres"
    "hold=1;no-forward-switch-cond;switch-range-to-icmp;no-switch-to-lookup;keep-loops;hoist-common"
    "-insts;sink-common-insts;speculate-blocks;simplify-cond-branch;no-speculate-unpredictables>),f"
    "unction(require<should-not-run-function-passes>))),deadargelim,function<eager-inv>(loop(loop-d"
    "eletion),loop-unroll<O2>,infer-alignment,loop-mssa(licm<allowspeculation>),div-rem-pairs),glob"
    "aldce,function(annotation-remarks),verify";

Status optimize(llvm::Module &mod, llvm::TargetMachine &tm, int optLevel) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&tm);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  if (optLevel <= 0) {
    pb.buildO0DefaultPipeline(llvm::OptimizationLevel::O0).run(mod, mam);
    return Status::success();
  }
  llvm::ModulePassManager mpm;
  const char *text = std::getenv("TILUSVM_JIT_PASSES");
  if (text && *text) {
    if (llvm::Error error = pb.parsePassPipeline(mpm, text))
      return jitError("TILUSVM_JIT_PASSES: " + llvm::toString(std::move(error)));
  } else if (llvm::Error error = pb.parsePassPipeline(mpm, kPipeline)) {
    return jitError("optimisation pipeline: " + llvm::toString(std::move(error)));
  }
  mpm.run(mod, mam);
  return Status::success();
}

struct Compiled {
  double setupMs = 0, buildMs = 0, optimizeMs = 0;
  std::vector<SharedAccessReport> sharedAccesses;
  std::unique_ptr<llvm::LLVMContext> ctx;
  std::unique_ptr<llvm::Module> module;
  std::unique_ptr<llvm::TargetMachine> tm;
  std::string entryName;
  int64_t sharedBytes = 0;
};

Expected<Compiled> compileModule(const VerifiedModule &vm, size_t programIndex,
                                 const JitOptions &options) {
  double t0 = threadMs();
  initializeLlvm();
  if (programIndex >= vm.module.programs.size() || programIndex >= vm.programs.size())
    return Status::error(ErrorCode::Usage,
                         "program index " + std::to_string(programIndex) + " out of range for " +
                             std::to_string(vm.module.programs.size()) + " programs");
  const Program &program = vm.module.programs[programIndex];
  const ProgramInfo &info = vm.programs[programIndex];
  if (info.threads == 0)
    return jitError("program `" + program.name + "` has no thread count");
  if (program.cluster > 1 && options.smVersion < 90) {
    Location loc;
    loc.program = program.name;
    loc.line = program.loc.line;
    loc.column = program.loc.column;
    return Status::error(ErrorCode::Unsupported,
                         "cluster=" + std::to_string(program.cluster) +
                             " needs sm_90a (Hopper); the target is sm_" +
                             std::to_string(options.smVersion),
                         loc);
  }
  Expected<int64_t> limit = jit::maxCode();
  if (!limit)
    return limit.takeStatus();
  TILUSVM_TRY(jit::checkCodeSize(program, info, options.smVersion, *limit));
  Expected<std::unique_ptr<llvm::TargetMachine>> tm =
      makeTargetMachine(options, ptxVersionSm90(program, info));
  if (!tm)
    return tm.takeStatus();
  Compiled c;
  c.ctx = std::make_unique<llvm::LLVMContext>();
  Expected<std::unique_ptr<llvm::Module>> mod = loadDeviceLibrary(*c.ctx);
  if (!mod)
    return mod.takeStatus();
  c.module = std::move(*mod);
  c.module->setModuleIdentifier(program.name);
  c.module->setTargetTriple(kTriple);
  c.module->setDataLayout((*tm)->createDataLayout());
  double t1 = threadMs();
  jit::Codegen cg(*c.module, program, info, options);
  cg.countIr(timingLevel() >= 2);
  cg.reportSharedAccesses(options.reportSharedAccesses || banksEnabled());
  Status status = cg.run();
  if (!status.ok())
    return status;
  if (timingLevel() >= 2)
    irReport(cg.kernel()->getName().str(), cg.irCounts());
  c.sharedAccesses = cg.sharedAccesses();
  if (banksEnabled())
    bankReport(cg.kernel()->getName().str(), c.sharedAccesses);
  TILUSVM_TRY(jit::checkIrSize(program, info, options.smVersion,
                               int64_t(cg.kernel()->getInstructionCount()), *limit));
  TILUSVM_TRY(materializeUsed(*c.module));
  jit::dropUnseenNaNCanonicalizations(*cg.kernel());
  jit::lowerPairCanonicalizations(*cg.kernel(), options.smVersion);
  jit::foldZeroWgmmaAccumulators(*cg.kernel());
  annotateKernel(*c.module, cg.kernel(), info.threads, program.blocksPerSm,
                 program.reallocatesRegisters());
  internalizeLibrary(*c.module, cg.kernel());
  std::string verifyErrors;
  llvm::raw_string_ostream verifyStream(verifyErrors);
  if (llvm::verifyModule(*c.module, &verifyStream))
    return jitError("generated IR for `" + program.name + "` is invalid: " + verifyErrors);
  double t2 = threadMs();
  Status optimized = optimize(*c.module, **tm, options.optLevel);
  if (!optimized.ok())
    return optimized;
  // TILUSVM_JIT_HOLD=0 leaves the kernel as optimised, for experiments (held_registers.h)
  if (const char *hold = std::getenv("TILUSVM_JIT_HOLD");
      options.optLevel > 0 && !(hold && std::string(hold) == "0"))
    jit::holdLoopInvariantRegisters(*cg.kernel());
  double t3 = threadMs();
  c.setupMs = t1 - t0;
  c.buildMs = t2 - t1;
  c.optimizeMs = t3 - t2;
  c.entryName = cg.kernel()->getName().str();
  // the allocations and the part of the scratch area that the lowering used (16-byte units)
  c.sharedBytes =
      info.scratchBytes > 0
          ? std::min(info.sharedBytes, info.scratchByteOffset + (cg.scratchUsed() + 15) / 16 * 16)
          : info.sharedBytes;
  c.tm = std::move(*tm);
  return c;
}

} // namespace

bool Specialization::empty() const {
  if (!values.empty())
    return false;
  for (ParamFact f : params)
    if (f != ParamFact::None)
      return false;
  return true;
}

std::string Specialization::text() const {
  if (empty())
    return "";
  std::string s;
  for (ParamFact f : params) {
    switch (f) {
    case ParamFact::None:
      s += '-';
      break;
    case ParamFact::Aligned16:
      s += 'a';
      break;
    case ParamFact::Divisible16:
      s += 'd';
      break;
    case ParamFact::One:
      s += '1';
      break;
    case ParamFact::NotOne:
      s += 'n';
      break;
    }
  }
  if (s.find_first_not_of('-') == std::string::npos)
    s.clear(); // no facts: the values alone
  if (!values.empty()) {
    s += '/';
    for (bool v : values)
      s += v ? 'T' : 'F';
  }
  return s;
}

const char *JitOptions::compilerVersion() {
  // the experiment variables that change the compiled code are part of it, so that kernels
  // cached under one setting are not served under another
  static const std::string version = [] {
    std::string v = std::string("tilusvm-") + TILUSVM_VERSION +
                    " src-" TILUSVM_SOURCE_HASH " llvm-" + LLVM_VERSION_STRING;
    if (const char *passes = std::getenv("TILUSVM_JIT_PASSES"); passes && *passes)
      v += " passes-" + std::to_string(std::hash<std::string>()(passes));
    if (const char *codegen = std::getenv("TILUSVM_JIT_CODEGEN"); codegen && *codegen)
      v += std::string(" codegen-") + codegen;
    if (const char *hold = std::getenv("TILUSVM_JIT_HOLD"); hold && *hold)
      v += std::string(" hold-") + hold;
    if (const char *proven = std::getenv("TILUSVM_JIT_PROVEN"); proven && *proven)
      v += std::string(" proven-") + proven;
    if (const char *pairs = std::getenv("TILUSVM_JIT_PAIRS"); pairs && *pairs)
      v += std::string(" pairs-") + pairs;
    return v;
  }();
  return version.c_str();
}

/// With cluster= C above 1, `.explicitcluster` and `.reqnctapercluster C, 1, 1` after the
/// kernel's `.reqntid` (the NVPTX backend has no annotation for them), so that an ordinary
/// launch runs the kernel in clusters (docs/isa.md, "Thread-block clusters and TMA multicast").
/// Every kernel has `.reqntid` (annotateKernel); without it the PTX is not the backend's.
Status addClusterDirectives(std::string &ptx, uint32_t cluster) {
  if (cluster <= 1)
    return Status::success();
  size_t at = ptx.find("\n.reqntid");
  size_t end = at == std::string::npos ? at : ptx.find('\n', at + 1);
  if (end == std::string::npos)
    return jitError("no .reqntid line in the kernel's PTX for the cluster directives");
  ptx.insert(end + 1,
             ".explicitcluster\n.reqnctapercluster " + std::to_string(cluster) + ", 1, 1\n");
  return Status::success();
}

// Both entry points run the whole compilation under the fatal error trap (fatal_error.h): an
// LLVM fatal error becomes error[jit], never the end of the host process.
Expected<PtxKernel> compileToPtx(const VerifiedModule &module, size_t programIndex,
                                 const JitOptions &options) {
  PtxKernel kernel;
  Status status = jit::runTrappingLlvmFatalErrors([&]() -> Status {
    Expected<Compiled> c = compileModule(module, programIndex, options);
    if (!c)
      return c.takeStatus();
    llvm::SmallString<0> ptx;
    llvm::raw_svector_ostream os(ptx);
    llvm::legacy::PassManager pm;
    // The module was verified before optimisation and, by kPipeline's last pass, after it: the
    // backend's own verifier run would repeat that (1-2 % of the PTX phase). After a pipeline
    // from TILUSVM_JIT_PASSES (which need not end with `verify`) or the O0 one, the backend
    // verifies.
    const char *passes = std::getenv("TILUSVM_JIT_PASSES");
    bool verified = !(passes && *passes) && options.optLevel > 0;
    if (c->tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::AssemblyFile,
                                   /*DisableVerify=*/verified))
      return jitError("the NVPTX backend cannot emit assembly");
    double t0 = threadMs();
    pm.run(*c->module);
    if (timingEnabled())
      std::fprintf(stderr,
                   "jit: %s sm_%d: setup %.1f ms, IR %.1f ms, optimisation %.1f ms, PTX %.1f ms, "
                   "total %.1f ms (thread CPU time)\n",
                   c->entryName.c_str(), options.smVersion, c->setupMs, c->buildMs, c->optimizeMs,
                   threadMs() - t0, c->setupMs + c->buildMs + c->optimizeMs + threadMs() - t0);
    kernel.ptx = std::string(ptx.str());
    TILUSVM_TRY(addClusterDirectives(kernel.ptx, module.module.programs[programIndex].cluster));
    kernel.entryName = c->entryName;
    kernel.sharedBytes = c->sharedBytes;
    kernel.sharedAccesses = c->sharedAccesses;
    return Status::success();
  });
  if (!status.ok())
    return status;
  kernel.threads = module.programs[programIndex].threads;
  return kernel;
}

Expected<std::string> compileToLlvmIr(const VerifiedModule &module, size_t programIndex,
                                      const JitOptions &options) {
  std::string text;
  Status status = jit::runTrappingLlvmFatalErrors([&]() -> Status {
    Expected<Compiled> c = compileModule(module, programIndex, options);
    if (!c)
      return c.takeStatus();
    llvm::raw_string_ostream os(text);
    c->module->print(os, nullptr);
    return Status::success();
  });
  if (!status.ok())
    return status;
  return text;
}

} // namespace tilus
