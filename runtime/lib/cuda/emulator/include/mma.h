//===- mma.h - the CUDA emulator's warp matrix operations (nvcuda::wmma) ---===//
//
// The 16x16x16 shape with bf16 (or f16) inputs and f32 accumulators. Which
// element of a tile a lane holds is unspecified in CUDA, and code may not
// depend on it; here lane l holds elements l, l + 32, ..., l + 224 of the
// tile in row-major order, so code that assumes a mapping reads wrong
// values. Loads and stores check the alignment CUDA requires (a 32-byte
// pointer, a leading dimension of a multiple of 16 bytes). They are not
// barriers: a lane reading what another lane stored needs __syncwarp first,
// and without it reads what was there before, as it may on a GPU.
// mma_sync is one: every lane of the warp takes part.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_CUDA_EMULATOR_MMA_H
#define FSDPC_CUDA_EMULATOR_MMA_H

#include "cuda_runtime.h"

#include <type_traits>

namespace fsdpc_cuda_emulator {
/// D = A B + C over one warp; each argument is the calling lane's eight
/// elements.
void warpMatrixMultiply(const float *a, const float *b, const float *c, float *d);
/// Stops the kernel with `what` (a fault CUDA leaves undefined).
void kernelFault(const char *what);
inline float toFloat(float v) { return v; }
inline float toFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
inline float toFloat(__half v) { return __half2float(v); }
template <typename T> T fromFloat(float v);
template <> inline float fromFloat<float>(float v) { return v; }
template <> inline __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> inline __half fromFloat<__half>(float v) { return __float2half_rn(v); }
} // namespace fsdpc_cuda_emulator

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the CUDA emulator has the 16x16x16 shape");
  enum { num_elements = 8 };
  T x[8];
};

namespace detail {
/// Row and column (in the 16x16 tile) of the calling lane's element i.
inline void place(int i, int &row, int &col) {
  const int e = i * 32 + fsdpc_cuda_emulator::laneId();
  row = e / 16;
  col = e % 16;
}
inline void checkAccess(const void *pointer, unsigned ldm, size_t elementBytes) {
  if (reinterpret_cast<uintptr_t>(pointer) % 32 != 0)
    fsdpc_cuda_emulator::kernelFault("wmma load or store through a pointer not aligned to 32 bytes");
  if ((ldm * elementBytes) % 16 != 0)
    fsdpc_cuda_emulator::kernelFault("wmma load or store with a leading dimension not a multiple of 16 bytes");
}
} // namespace detail

template <typename Use, typename T, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout> &f, const T *p, unsigned ldm) {
  static_assert(!std::is_same<Layout, void>::value, "an a or b fragment names its layout");
  detail::checkAccess(p, ldm, sizeof(T));
  for (int i = 0; i < 8; ++i) {
    int r, c;
    detail::place(i, r, c);
    f.x[i] = std::is_same<Layout, row_major>::value ? p[r * ldm + c] : p[c * ldm + r];
  }
}

template <typename T>
void load_matrix_sync(fragment<accumulator, 16, 16, 16, T> &f, const T *p, unsigned ldm, layout_t layout) {
  detail::checkAccess(p, ldm, sizeof(T));
  for (int i = 0; i < 8; ++i) {
    int r, c;
    detail::place(i, r, c);
    f.x[i] = layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r];
  }
}

template <typename T>
void store_matrix_sync(T *p, const fragment<accumulator, 16, 16, 16, T> &f, unsigned ldm, layout_t layout) {
  detail::checkAccess(p, ldm, sizeof(T));
  for (int i = 0; i < 8; ++i) {
    int r, c;
    detail::place(i, r, c);
    (layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.x[i];
  }
}

template <typename Use, typename T, typename Layout, typename V>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout> &f, V value) {
  for (int i = 0; i < 8; ++i)
    f.x[i] = fsdpc_cuda_emulator::fromFloat<T>(static_cast<float>(value));
}

template <typename TA, typename LA, typename TB, typename LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float> &d, const fragment<matrix_a, 16, 16, 16, TA, LA> &a,
              const fragment<matrix_b, 16, 16, 16, TB, LB> &b, const fragment<accumulator, 16, 16, 16, float> &c) {
  float av[8], bv[8], cv[8], dv[8];
  for (int i = 0; i < 8; ++i) {
    av[i] = fsdpc_cuda_emulator::toFloat(a.x[i]);
    bv[i] = fsdpc_cuda_emulator::toFloat(b.x[i]);
    cv[i] = c.x[i];
  }
  fsdpc_cuda_emulator::warpMatrixMultiply(av, bv, cv, dv);
  for (int i = 0; i < 8; ++i)
    d.x[i] = dv[i];
}

} // namespace wmma
} // namespace nvcuda

#endif // FSDPC_CUDA_EMULATOR_MMA_H
