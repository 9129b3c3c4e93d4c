//===- SharedEnums.cpp - enums of more than one dialect -------------------===//
#include "fsdpc/Dialect/SharedEnums.h"

#include "llvm/ADT/StringSwitch.h"

#include "fsdpc/Dialect/SharedEnums.cpp.inc"
