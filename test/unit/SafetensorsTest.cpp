// safetensors writing and reading.
#include "fsdpc/runtime/AtomicFile.h"
#include "fsdpc/runtime/Safetensors.h"

#include <gtest/gtest.h>

using namespace fsdpc;
using namespace fsdpc::runtime;

namespace {

TEST(Safetensors, RoundTripKeepsNamesShapesAndValues) {
  float w[6] = {1, 2, 3, 4, 5, 6}, b[2] = {-1, 0.5f};
  NamedArrays arrays;
  arrays.emplace_back("fc1.weight", HostArray::f32({2, 3}, w));
  arrays.emplace_back("fc1.bias", HostArray::f32({2}, b));
  std::string path = ::testing::TempDir() + "m.safetensors";
  ASSERT_TRUE(writeSafetensors(arrays, path, {{"producer", "test"}}).isOk());
  StatusOr<NamedArrays> read = readSafetensors(path);
  ASSERT_TRUE(read.isOk()) << read.status().toString();
  ASSERT_EQ(read->size(), 2u);
  EXPECT_EQ((*read)[0].first, "fc1.weight");
  EXPECT_EQ((*read)[0].second.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ((*read)[1].second.data<float>()[0], -1.0f);
  // The header length is a multiple of 8, as the format requires.
  std::string bytes = *readWholeFile(path);
  uint64_t headerLength = 0;
  for (int i = 0; i < 8; ++i)
    headerLength |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  EXPECT_EQ(headerLength % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + headerLength + 32);
}

TEST(Safetensors, RejectsMalformedHeader) {
  std::string path = ::testing::TempDir() + "bad.safetensors";
  std::string bytes("\x05\0\0\0\0\0\0\0{oops", 13);
  ASSERT_TRUE(writeFileAtomically(path, [&](FILE *f) { return writeBytes(f, bytes.data(), bytes.size(), path); }).isOk());
  EXPECT_FALSE(readSafetensors(path).isOk());
}

// F32 [2^62 + 1]: 4 * (2^62 + 1) wraps to 4, the 4 bytes present (issue
// 15, finding 4); so do shapes whose product alone wraps.
TEST(Safetensors, RejectsShapesWhoseSizeWrapsAround) {
  for (const char *shape : {"[4611686018427387905]", "[4294967296,4294967297]", "[-1]"}) {
    std::string header = std::string("{\"w\":{\"dtype\":\"F32\",\"shape\":") + shape + ",\"data_offsets\":[0,4]}}";
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i)
      bytes[i] = static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i));
    bytes += header;
    bytes.append(4, '\0');
    std::string path = ::testing::TempDir() + "wrap.safetensors";
    ASSERT_TRUE(writeFileAtomically(path, [&](FILE *f) { return writeBytes(f, bytes.data(), bytes.size(), path); }).isOk());
    EXPECT_FALSE(readSafetensors(path).isOk()) << shape;
  }
}

} // namespace
