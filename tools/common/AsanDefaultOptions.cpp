//===- AsanDefaultOptions.cpp - ASan defaults of the MLIR tools ----------===//
//
// Linked into the executables that link MLIR, in the sanitizer build only.
// MLIR and LLVM come as uninstrumented static libraries, but our generated
// attribute storage instantiates llvm::BumpPtrAllocator in instrumented
// code, and the linker keeps one copy of its slow path for both: the
// instrumented one poisons each new slab, MLIR's inlined fast path hands out
// its bytes without unpoisoning them, and the next memcpy into them is a
// use-after-poison inside MLIR's own dialect registration. With user
// poisoning off, ASan checks every access against its own red zones as
// before and ignores LLVM's allocator annotations.
//
//===----------------------------------------------------------------------===//

extern "C" __attribute__((no_sanitize("address", "undefined"), used, visibility("default"))) const char *
__asan_default_options() {
  return "allow_user_poisoning=0";
}
