//===- WarpMma.cuh - mma.sync, ldmatrix and cp.async with their lane layouts ===//
//
// The tensor-core instructions whose lane layouts the PTX ISA documents, so
// that a kernel may keep a product's result in registers and feed it to the
// next product (FlashAttention-2's P, which never goes through shared
// memory). `nvcuda::wmma` does not say which lane holds which element, so a
// wmma result must be stored and reloaded before a row-wise softmax.
//
// m16n8k16, bf16 inputs, f32 accumulators (lane l, g = l / 4, t = l % 4;
// a 32-bit register holds two bf16, the lower column in the low half):
//
//   A (16 x 16, row-major)  a0: row g,     cols 2t, 2t+1   a1: row g+8, cols 2t, 2t+1
//                           a2: row g,     cols 2t+8, +9   a3: row g+8, cols 2t+8, +9
//   B (16 x 8, k x n)       b0: rows 2t, 2t+1, col g       b1: rows 2t+8, 2t+9, col g
//   C (16 x 8, f32)         c0, c1: row g, cols 2t, 2t+1   c2, c3: row g+8, cols 2t, 2t+1
//
// So two C tiles side by side (16 x 16) are, rounded to bf16, the A operand
// of the next product: a0 = (c0, c1) and a1 = (c2, c3) of the left tile, a2
// and a3 of the right one (aFromAccumulators).
//
// ldmatrix.x4 loads four 8 x 8 bf16 matrices from shared memory; lanes 8m
// to 8m + 7 name the rows of matrix m (16-byte aligned). Lane l receives
// row l / 4, elements 2 (l % 4) and 2 (l % 4) + 1 of each, or with .trans
// the transpose: column l / 4, rows 2 (l % 4) and 2 (l % 4) + 1. A row-major
// matrix's 8 x 8 blocks so give A fragments and, for B = M^T, B fragments;
// with .trans, B fragments of B = M.
//
// cp.async copies 16 bytes from global to shared memory without a register
// on the way: a tile's loads are all in flight while the block computes on
// the previous tile. commit closes a group of copies; wait<N> returns when
// at most the N newest groups are still in flight. The copies are not
// visible to other threads before a __syncthreads after the wait.
//
// Under the CUDA emulator (docs/cuda-emulator.md) these are functions with
// the same lane semantics; a copy lands at its commit or at its wait, by a
// seeded coin, so a read before the wait or a copy into a buffer still
// being read both change the results.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_CUDA_WARPMMA_CUH
#define FSDPC_RUNTIME_CUDA_WARPMMA_CUH

#include "DeviceMath.cuh"

namespace fsdpc::runtime::cuda {

/// d (16 x 8, f32) += a (16 x 16, bf16) b (16 x 8, bf16), the layouts above.
__device__ __forceinline__ void mmaBf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#ifdef FSDPC_CUDA_EMULATOR
  fsdpc_cuda_emulator::warpMmaM16N8K16(a, b, d);
#else
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
               "{%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

/// Four 8 x 8 matrices from shared memory: `row` is the calling lane's row
/// (lanes 8m .. 8m + 7 give matrix m's rows, 16-byte aligned).
__device__ __forceinline__ void loadMatrices(uint32_t (&r)[4], const __nv_bfloat16 *row) {
#ifdef FSDPC_CUDA_EMULATOR
  fsdpc_cuda_emulator::warpLoadMatrices(r, /*transposed=*/false, row);
#else
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
#endif
}

/// loadMatrices, each matrix transposed.
__device__ __forceinline__ void loadMatricesTransposed(uint32_t (&r)[4], const __nv_bfloat16 *row) {
#ifdef FSDPC_CUDA_EMULATOR
  fsdpc_cuda_emulator::warpLoadMatrices(r, /*transposed=*/true, row);
#else
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
#endif
}

/// Starts a 16-byte copy from global `source` to shared `destination`
/// (both 16-byte aligned).
__device__ __forceinline__ void copyAsync16(void *destination, const void *source) {
#ifdef FSDPC_CUDA_EMULATOR
  fsdpc_cuda_emulator::asyncCopy16(destination, source);
#else
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(destination));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(source));
#endif
}

/// Closes the calling thread's group of copies started since the last commit.
__device__ __forceinline__ void commitAsyncCopies() {
#ifdef FSDPC_CUDA_EMULATOR
  fsdpc_cuda_emulator::asyncCommit();
#else
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

/// Waits until at most the Pending newest groups of the calling thread's
/// copies are in flight.
template <int Pending> __device__ __forceinline__ void waitAsyncCopies() {
#ifdef FSDPC_CUDA_EMULATOR
  fsdpc_cuda_emulator::asyncWait(Pending);
#else
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
#endif
}

/// Two floats as bf16 in one register, `low` in the low half (the lower
/// column, as the fragments want it).
__device__ __forceinline__ uint32_t packBf16(float low, float high) {
  return static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(low))) |
         static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(high))) << 16;
}

/// The A fragment of columns [16 s, 16 s + 16) of a 16-row product held in
/// accumulators c[n] (8 columns each): tiles 2 s and 2 s + 1, rounded to bf16.
__device__ __forceinline__ void aFromAccumulators(uint32_t (&a)[4], const float (&left)[4], const float (&right)[4]) {
  a[0] = packBf16(left[0], left[1]);
  a[1] = packBf16(left[2], left[3]);
  a[2] = packBf16(right[0], right[1]);
  a[3] = packBf16(right[2], right[3]);
}

// Fragments from shared tiles of pitch P (elements a row; rows 16-byte
// aligned).

/// The A fragment of the 16 x 16 block at (row0, col0) of a row-major tile.
template <int P>
__device__ __forceinline__ void loadA(uint32_t (&a)[4], const __nv_bfloat16 *tile, int row0, int col0, int lane) {
  loadMatrices(a, tile + (row0 + lane % 16) * P + col0 + lane / 16 * 8);
}

/// B fragments of B = M^T (k x n) for n in [n0, n0 + 16), k in [k0, k0 + 16),
/// M row-major (its rows are B's columns: K in Q K^T): b[0] for n0, b[1]
/// for n0 + 8.
template <int P>
__device__ __forceinline__ void loadBOfRows(uint32_t (&b)[2][2], const __nv_bfloat16 *tile, int n0, int k0, int lane) {
  uint32_t r[4];
  loadMatrices(r, tile + (n0 + lane / 16 * 8 + lane % 8) * P + k0 + lane / 8 % 2 * 8);
  b[0][0] = r[0];
  b[0][1] = r[1];
  b[1][0] = r[2];
  b[1][1] = r[3];
}

/// B fragments of B = M (k x n, row-major as stored: V in P V) for k in
/// [k0, k0 + 16), n in [n0, n0 + 16): b[0] for n0, b[1] for n0 + 8.
template <int P>
__device__ __forceinline__ void loadBAsStored(uint32_t (&b)[2][2], const __nv_bfloat16 *tile, int k0, int n0,
                                              int lane) {
  uint32_t r[4];
  loadMatricesTransposed(r, tile + (k0 + lane / 8 % 2 * 8 + lane % 8) * P + n0 + lane / 16 * 8);
  b[0][0] = r[0];
  b[0][1] = r[1];
  b[1][0] = r[2];
  b[1][1] = r[3];
}

/// The A fragment of A = M^T (the 16 x 16 block at A's (row0, col0)) from a
/// row-major tile M, whose rows are A's columns: lhs^T in a weight
/// gradient, with the tokens as M's rows.
template <int P>
__device__ __forceinline__ void loadAOfColumns(uint32_t (&a)[4], const __nv_bfloat16 *tile, int row0, int col0,
                                               int lane) {
  loadMatricesTransposed(a, tile + (col0 + lane / 16 * 8 + lane % 8) * P + row0 + lane / 8 % 2 * 8);
}

} // namespace fsdpc::runtime::cuda

#endif // FSDPC_RUNTIME_CUDA_WARPMMA_CUH
