//===- cub/device/device_radix_sort.cuh - the CUDA emulator's CUB sort ----===//
//
// The part of CUB's DeviceRadixSort the backend uses: SortPairs, a stable
// sort of (key, value) pairs by the key's bits [beginBit, endBit), as the
// library documents it. The first call (no temporary storage) asks how much
// it needs; the second runs on the stream, here as host work in the
// stream's order, which std::stable_sort does.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_CUDA_EMULATOR_CUB_DEVICE_RADIX_SORT_CUH
#define FSDPC_CUDA_EMULATOR_CUB_DEVICE_RADIX_SORT_CUH

#include "cuda_runtime.h"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <numeric>
#include <type_traits>
#include <vector>

namespace fsdpc_cuda_emulator {
cudaError_t enqueueHostWork(cudaStream_t stream, std::function<void()> work);
}

namespace cub {

struct DeviceRadixSort {
  template <typename KeyT, typename ValueT, typename NumItemsT>
  static cudaError_t SortPairs(void *tempStorage, size_t &tempStorageBytes, const KeyT *keysIn, KeyT *keysOut,
                               const ValueT *valuesIn, ValueT *valuesOut, NumItemsT numItems, int beginBit = 0,
                               int endBit = sizeof(KeyT) * 8, cudaStream_t stream = 0) {
    static_assert(std::is_unsigned_v<KeyT>, "the emulator sorts unsigned keys only");
    // Some storage, as the library always asks for some.
    constexpr size_t kTempBytes = 256;
    if (tempStorage == nullptr) {
      tempStorageBytes = kTempBytes;
      return cudaSuccess;
    }
    if (tempStorageBytes < kTempBytes || beginBit < 0 || endBit > static_cast<int>(sizeof(KeyT) * 8) ||
        beginBit >= endBit)
      return cudaErrorInvalidValue;
    const long long n = static_cast<long long>(numItems);
    return fsdpc_cuda_emulator::enqueueHostWork(stream, [=] {
      const KeyT mask = static_cast<KeyT>(
          (endBit - beginBit >= static_cast<int>(sizeof(KeyT) * 8) ? ~KeyT{0}
                                                                    : (KeyT{1} << (endBit - beginBit)) - 1)
          << beginBit);
      std::vector<long long> order(n);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](long long a, long long b) { return (keysIn[a] & mask) < (keysIn[b] & mask); });
      std::vector<KeyT> keys(n);
      std::vector<ValueT> values(n);
      for (long long i = 0; i < n; ++i) {
        keys[i] = keysIn[order[i]];
        values[i] = valuesIn[order[i]];
      }
      std::copy(keys.begin(), keys.end(), keysOut);
      std::copy(values.begin(), values.end(), valuesOut);
    });
  }
};

} // namespace cub

#endif // FSDPC_CUDA_EMULATOR_CUB_DEVICE_RADIX_SORT_CUH
