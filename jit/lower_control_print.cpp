// Print through the device's vprintf, with the interpreter's text (vm/cpu/print_format.h):
//   [block X, Y, Z] MSG: DTYPE = VALUE
//   [block X, Y, Z] MSG: DTYPE[S1, S2] = [[v, v], [v, v]]
// Elements: bool true/false, integers in decimal (%lld / %llu), floats as their value printed
// with %.9g (%.17g for f64), NaN as the positive canonical NaN so that it prints `nan`.
// Thread 0 of the block prints. A register tensor is first gathered through a static shared
// buffer (barrier, primary owners write, barrier); shared and global tensors are read by thread
// 0 directly (global elements outside the tensor print as 0, like the interpreter's).
// Device printf takes at most 32 arguments per call, so a tensor line is split into several
// vprintf calls of at most 28 elements: within a block the pieces stay in order, but another
// block's line may land between them (the interpreter writes each line at once).
#include "jit/lowering.h"

#include "isa/convert.h"

#include <llvm/IR/IntrinsicsNVPTX.h>

namespace tilus::jit {

namespace {

std::string escapePercent(const std::string &text) {
  std::string out;
  for (char c : text) {
    out += c;
    if (c == '%')
      out += '%';
  }
  return out;
}

const char *elementFormat(DataType t) {
  if (t.isBool())
    return "%s";
  if (t.isInt())
    return t.isSigned() ? "%lld" : "%llu";
  return t == DataType::f64() ? "%.17g" : "%.9g";
}

/// One printf argument.
struct PrintArg {
  llvm::Value *value; // i32, i64, double or ptr
};

class Printer {
public:
  explicit Printer(Codegen &cg) : cg_(cg), b_(cg.b) {}

  llvm::Value *string(const std::string &text) {
    llvm::Constant *init = llvm::ConstantDataArray::getString(cg_.ctx, text, true);
    auto *gv =
        new llvm::GlobalVariable(cg_.mod, init->getType(), true, llvm::GlobalValue::PrivateLinkage,
                                 init, "tilus_str", nullptr, llvm::GlobalValue::NotThreadLocal, 1);
    gv->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
    return b_.CreateAddrSpaceCast(gv, llvm::PointerType::get(cg_.ctx, 0));
  }

  /// The printf argument for an element of type t.
  llvm::Value *element(llvm::Value *v, DataType t) {
    if (t.isBool())
      return b_.CreateSelect(v, string("true"), string("false"));
    if (t.isInt())
      return t.isSigned() ? b_.CreateSExt(v, b_.getInt64Ty()) : b_.CreateZExt(v, b_.getInt64Ty());
    llvm::Value *d = cg_.convert(v, t, DataType::f64());
    llvm::Value *nan = b_.CreateFCmpUNO(d, d);
    return b_.CreateSelect(nan, llvm::ConstantFP::getNaN(b_.getDoubleTy()), d);
  }

  void call(const std::string &format, const std::vector<llvm::Value *> &args) {
    llvm::Module &mod = cg_.mod;
    llvm::Type *ptr = llvm::PointerType::get(cg_.ctx, 0);
    llvm::FunctionCallee vprintf = mod.getOrInsertFunction(
        "vprintf", llvm::FunctionType::get(b_.getInt32Ty(), {ptr, ptr}, false));
    llvm::Value *buffer = llvm::ConstantPointerNull::get(llvm::PointerType::get(cg_.ctx, 0));
    if (!args.empty()) {
      std::vector<llvm::Type *> types;
      for (llvm::Value *a : args)
        types.push_back(a->getType());
      llvm::StructType *st = llvm::StructType::get(cg_.ctx, types);
      llvm::Function *fn = b_.GetInsertBlock()->getParent();
      llvm::IRBuilder<> ab(&fn->getEntryBlock(), fn->getEntryBlock().begin());
      llvm::AllocaInst *slot = ab.CreateAlloca(st);
      for (size_t k = 0; k < args.size(); ++k)
        b_.CreateStore(args[k], b_.CreateStructGEP(st, slot, unsigned(k)));
      buffer = slot;
    }
    b_.CreateCall(vprintf, {string(format), buffer});
  }

  /// "[block %d, %d, %d] MSG: " and its three arguments.
  std::string prefix(const std::string &message, std::vector<llvm::Value *> &args) {
    static const llvm::Intrinsic::ID ids[3] = {llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x,
                                               llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_y,
                                               llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_z};
    for (llvm::Intrinsic::ID id : ids)
      args.push_back(cg_.callIntrinsic(id, {}, {}));
    std::string text = "[block %d, %d, %d] ";
    if (!message.empty())
      text += escapePercent(message) + ": ";
    return text;
  }

  /// Print a tensor whose shape is static from logical values (row-major).
  void tensorLine(const std::string &head, std::vector<llvm::Value *> headArgs,
                  const std::vector<int64_t> &shape, const std::vector<llvm::Value *> &values,
                  DataType t) {
    std::string format = head;
    std::vector<llvm::Value *> args = std::move(headArgs);
    size_t rank = shape.size();
    std::vector<int64_t> idx(rank, 0);
    auto flush = [&]() {
      call(format, args);
      format.clear();
      args.clear();
    };
    if (values.empty()) {
      for (size_t d = 0; d < rank; ++d)
        format += d == 0 ? "[" : "";
      format += rank ? "]" : "";
    }
    for (size_t e = 0; e < values.size(); ++e) {
      // opening brackets of the dimensions that start here
      if (e > 0)
        format += ", ";
      for (size_t d = 0; d < rank; ++d) {
        bool start = true;
        for (size_t q = d; q < rank; ++q)
          start = start && idx[q] == 0;
        if (start)
          format += "[";
      }
      format += elementFormat(t);
      args.push_back(element(values[e], t));
      for (size_t d = rank; d-- > 0;) {
        bool end = true;
        for (size_t q = d; q < rank; ++q)
          end = end && idx[q] == shape[q] - 1;
        if (end)
          format += "]";
      }
      for (size_t d = rank; d-- > 0;) {
        if (++idx[d] < shape[d])
          break;
        idx[d] = 0;
      }
      if (args.size() >= 28)
        flush();
    }
    format += "\n";
    flush();
  }

private:
  Codegen &cg_;
  llvm::IRBuilder<> &b_;
};

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string out = "[";
  for (size_t d = 0; d < shape.size(); ++d)
    out += (d ? ", " : "") + std::to_string(shape[d]);
  return out + "]";
}

} // namespace

llvm::Value *ControlLowering::printBuffer(int64_t elements) {
  if (printBuffer_ && printBufferElements_ >= elements)
    return printBuffer_;
  auto *type = llvm::ArrayType::get(b.getInt64Ty(), uint64_t(elements));
  auto *gv = new llvm::GlobalVariable(mod, type, false, llvm::GlobalValue::InternalLinkage,
                                      llvm::UndefValue::get(type), "tilus_print_buffer", nullptr,
                                      llvm::GlobalValue::NotThreadLocal, 3);
  gv->setAlignment(llvm::Align(8));
  if (printBuffer_) {
    printBuffer_->replaceAllUsesWith(gv);
    printBuffer_->eraseFromParent();
  }
  printBuffer_ = gv;
  printBufferElements_ = elements;
  return gv;
}

namespace {

/// Runs `body` in thread 0 of the block only.
template <typename F> void onThreadZero(Codegen &cg, F &&body) {
  cg.emitIf(cg.b.CreateICmpEQ(cg.tid(), cg.constI32(0)), "print", body);
}

/// A register tensor: gathered through the static print buffer, printed by thread 0.
void printRegister(Codegen &cg, ControlLowering &control, Printer &p, VarId var,
                   const VarType &type, const std::string &message) {
  llvm::IRBuilder<> &b = cg.b;
  const LayoutMap &map = cg.layoutOf(var);
  int64_t elements = 1;
  for (int64_t n : map.shape())
    elements *= n;
  llvm::Value *buffer = control.printBuffer(elements);
  std::vector<llvm::Value *> slots = cg.readRegister(var);
  const std::vector<llvm::Value *> &s = cg.threadPart(map);
  std::vector<int64_t> strides(map.shape().size(), 1);
  for (size_t d = strides.size(); d-- > 1;)
    strides[d - 1] = strides[d] * map.shape()[d];
  cg.barrier();
  cg.emitIf(cg.isPrimary(map), "print.stage", [&] {
    for (int64_t i = 0; i < map.locals(); ++i) {
      llvm::Value *linear = cg.constI64(0);
      for (int d = 0; d < map.rank(); ++d)
        linear =
            addFolded(b, linear,
                      mulFolded(b, addFolded(b, s[size_t(d)], cg.constI64(map.localPart(i)[d])),
                                cg.constI64(strides[size_t(d)])));
      llvm::Value *bits =
          type.dtype.isBool()
              ? b.CreateZExt(slots[size_t(i)], b.getInt64Ty())
              : b.CreateZExt(cg.toBits(slots[size_t(i)], type.dtype), b.getInt64Ty());
      b.CreateStore(bits, b.CreateGEP(b.getInt64Ty(), buffer, linear));
    }
  });
  cg.barrier();
  onThreadZero(cg, [&] {
    std::vector<llvm::Value *> values;
    for (int64_t e = 0; e < elements; ++e) {
      llvm::Value *bits =
          b.CreateLoad(b.getInt64Ty(), b.CreateGEP(b.getInt64Ty(), buffer, cg.constI64(e)));
      llvm::Value *v =
          type.dtype.isBool()
              ? b.CreateICmpNE(bits, cg.constI64(0))
              : cg.fromBits(b.CreateTrunc(bits, b.getIntNTy(type.dtype.bits)), type.dtype);
      values.push_back(v);
    }
    std::vector<llvm::Value *> args;
    std::string head = p.prefix(message, args) + type.dtype.name() + shapeText(map.shape()) + " = ";
    p.tensorLine(head, args, map.shape(), values, type.dtype);
  });
  cg.barrier();
}

/// A shared tensor: read by thread 0.
void printShared(Codegen &cg, Printer &p, VarId var, const std::string &message) {
  llvm::IRBuilder<> &b = cg.b;
  SharedView view = cg.readShared(var);
  onThreadZero(cg, [&] {
    std::vector<llvm::Value *> values;
    int64_t elements = 1;
    for (int64_t n : view.shape)
      elements *= n;
    llvm::Value *root = cg.sharedElementAddress(view.root, cg.constI64(0), view.dtype);
    std::vector<int64_t> idx(view.shape.size(), 0);
    for (int64_t e = 0; e < elements; ++e) {
      std::vector<llvm::Value *> coords = view.origin;
      for (size_t d = 0; d < idx.size(); ++d)
        coords[size_t(view.dims[d])] =
            addFolded(b, coords[size_t(view.dims[d])], cg.constI64(idx[d]));
      values.push_back(cg.loadElement(root, cg.sharedOffset(view.root, coords), view.dtype));
      for (size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < view.shape[d])
          break;
        idx[d] = 0;
      }
    }
    std::vector<llvm::Value *> args;
    std::string head = p.prefix(message, args) + view.dtype.name() + shapeText(view.shape) + " = ";
    p.tensorLine(head, args, view.shape, values, view.dtype);
  });
}

/// A global tensor (run-time shape): one vprintf per element from thread 0.
void printGlobal(Codegen &cg, Printer &p, VarId var, const std::string &message) {
  llvm::IRBuilder<> &b = cg.b;
  GlobalView view = cg.readGlobal(var);
  DataType t = view.dtype;
  size_t rank = view.shape.size();
  onThreadZero(cg, [&] {
    // Header with the run-time shape.
    std::vector<llvm::Value *> args;
    std::string head = p.prefix(message, args) + t.name() + "[";
    for (size_t d = 0; d < rank; ++d) {
      head += d ? ", %lld" : "%lld";
      args.push_back(view.shape[d]);
    }
    head += "] = ";
    p.call(head, args);
    llvm::Value *count = cg.constI64(1);
    for (llvm::Value *n : view.shape)
      count = b.CreateMul(
          count, cg.callIntrinsic(llvm::Intrinsic::smax, {b.getInt64Ty()}, {n, cg.constI64(0)}));
    llvm::Value *opens = p.string(std::string(rank, '['));
    llvm::Value *closes = p.string(std::string(rank, ']'));
    auto element = [&](llvm::Value *e, const std::vector<llvm::Value *> &) {
      // index, opening and closing bracket counts
      std::vector<llvm::Value *> idx(rank);
      llvm::Value *rest = e;
      llvm::Value *nOpen = cg.constI64(0), *nClose = cg.constI64(0);
      llvm::Value *allZero = b.getTrue(), *allLast = b.getTrue();
      for (size_t d = rank; d-- > 0;) {
        llvm::Value *n = view.shape[d];
        idx[d] = b.CreateSRem(rest, n);
        rest = b.CreateSDiv(rest, n);
        allZero = b.CreateAnd(allZero, b.CreateICmpEQ(idx[d], cg.constI64(0)));
        allLast = b.CreateAnd(allLast, b.CreateICmpEQ(idx[d], b.CreateSub(n, cg.constI64(1))));
        nOpen = b.CreateAdd(nOpen, b.CreateZExt(allZero, b.getInt64Ty()));
        nClose = b.CreateAdd(nClose, b.CreateZExt(allLast, b.getInt64Ty()));
      }
      llvm::Value *inside = view.valid;
      llvm::Value *elem = view.offset;
      for (size_t d = 0; d < rank; ++d) {
        inside = b.CreateAnd(inside, b.CreateAnd(b.CreateICmpSGE(idx[d], view.lo[d]),
                                                 b.CreateICmpSLT(idx[d], view.hi[d])));
        elem = b.CreateAdd(elem, b.CreateMul(idx[d], view.strides[d]));
      }
      llvm::Value *value = cg.emitIf(inside, "print.load", {cg.zeroOf(t)}, [&] {
        return std::vector<llvm::Value *>{cg.loadElement(view.ptr, elem, t)};
      })[0];
      llvm::Value *sep =
          b.CreateSelect(b.CreateICmpEQ(e, cg.constI64(0)), p.string(""), p.string(", "));
      llvm::Value *open =
          b.CreateGEP(b.getInt8Ty(), opens, b.CreateSub(cg.constI64(int64_t(rank)), nOpen));
      llvm::Value *close =
          b.CreateGEP(b.getInt8Ty(), closes, b.CreateSub(cg.constI64(int64_t(rank)), nClose));
      p.call(std::string("%s%s") + elementFormat(t) + "%s",
             {sep, open, p.element(value, t), close});
      return std::vector<llvm::Value *>();
    };
    cg.emitCountedLoop("print.elem", cg.constI64(0), count, 1, {}, element, /*mayBeEmpty=*/true);
    p.call("\n", {});
  });
}

} // namespace

Status ControlLowering::visitPrint(const Instruction &inst) {
  const Argument &x = inst.arg(ArgName::x);
  const Argument &msg = inst.arg(ArgName::msg);
  std::string message = msg.present ? msg.text : std::string();
  Printer p(cg);
  if (x.isScalar() || (x.isTensor() && info.vars[x.var].kind == VarKind::Scalar)) {
    DataType t = x.isScalar() ? prog.expr(x.expr).dtype : prog.var(x.var).dtype;
    llvm::Value *v = x.isScalar() ? cg.emitExpr(x.expr) : cg.readScalar(x.var);
    onThreadZero(cg, [&] {
      std::vector<llvm::Value *> args;
      std::string format = p.prefix(message, args) + t.name() + " = " + elementFormat(t) + "\n";
      args.push_back(p.element(v, t));
      p.call(format, args);
    });
    return Status::success();
  }
  if (!x.isTensor())
    return cg.error(ErrorCode::BadArgument, inst, "nothing to print");
  const VarType &type = info.vars[x.var];
  switch (type.kind) {
  case VarKind::Register:
    printRegister(cg, *this, p, x.var, type, message);
    return Status::success();
  case VarKind::Shared:
    printShared(cg, p, x.var, message);
    return Status::success();
  case VarKind::Global:
    printGlobal(cg, p, x.var, message);
    return Status::success();
  case VarKind::Scalar:
  case VarKind::Pointer:
  case VarKind::None:
    break;
  }
  return cg.error(ErrorCode::Unsupported, inst, "Print of a pointer parameter");
}

} // namespace tilus::jit
