//===- SignedAttrs.td - i64 attributes read as int64_t -------*- tablegen -*-===//
//
// MLIR's I64Attr stores a signless i64 but its getter returns uint64_t
// (getZExtValue), so a verifier's `getEvent() < 0` never fires and `-1`
// reads as 2^64 - 1. Fsdpc_I64Attr is the same attribute, `-1 : i64` in the
// IR, read with getSExtValue as int64_t: sizes, offsets and events compare
// as the numbers they are.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPC_DIALECT_SIGNEDATTRS_TD
#define FSDPC_DIALECT_SIGNEDATTRS_TD

include "mlir/IR/CommonAttrConstraints.td"

def Fsdpc_I64Attr : TypedSignlessIntegerAttrBase<I64, "int64_t", "64-bit signless integer attribute, read signed"> {
  let convertFromStorage = "$_self.getValue().getSExtValue()";
}

#endif // FSDPC_DIALECT_SIGNEDATTRS_TD
