//===- KernelOperands.h - operand dtypes and shapes of each kernel -*- C++ -*-===//
//
// The rules of the kernel contract's operand families (OperandRule in
// KernelContract.h): what each kernel needs of its operands' dtypes and
// shapes. validatePlan checks every instruction with it before a plan
// runs, so that no kernel of any backend reads or writes outside its
// operands; the kernels then check only what depends on the data.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_KERNELOPERANDS_H
#define FSDPC_RUNTIME_KERNELOPERANDS_H

#include "fsdpc/runtime/Kernels.h"

namespace fsdpc::runtime {

/// Checks `call`'s operand dtypes and shapes (the views' data is not read)
/// against its kernel's rule (KernelSignature::operands); the error names
/// the kernel, the operand and the instruction's location.
Status checkKernelOperands(const KernelCall &call);

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_KERNELOPERANDS_H
