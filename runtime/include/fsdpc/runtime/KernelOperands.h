//===- KernelOperands.h - operand dtypes and shapes of each kernel -*- C++ -*-===//
//
// The second half of the kernel contract: what each kernel needs of its
// operands' dtypes and shapes (KernelContract.h has the names, counts and
// parameters). validatePlan checks every instruction with it before a plan
// runs, so that no kernel of any backend reads or writes outside its
// operands; the kernels then check only what depends on the data.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_KERNELOPERANDS_H
#define FSDPC_RUNTIME_KERNELOPERANDS_H

#include "fsdpc/runtime/Kernels.h"

#include <string_view>

namespace fsdpc::runtime {

/// Checks `call`'s operand dtypes and shapes (the views' data is not read)
/// against its kernel's rule; the error names the kernel, the operand and
/// the instruction's location.
Status checkKernelOperands(const KernelCall &call);

/// Whether `kernel` has an operand rule (a unit test checks every kernel
/// of the contract has one).
bool hasOperandRule(std::string_view kernel);

} // namespace fsdpc::runtime

#endif // FSDPC_RUNTIME_KERNELOPERANDS_H
