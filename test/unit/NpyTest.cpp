// .npy reading and writing, including files as numpy writes them.
#include "fsdpc/runtime/AtomicFile.h"
#include "fsdpc/runtime/Npy.h"

#include <gtest/gtest.h>

#include <fstream>

using namespace fsdpc;
using namespace fsdpc::runtime;

namespace {

TEST(Npy, RoundTripFloatAndInt) {
  std::string path = ::testing::TempDir() + "a.npy";
  float values[6] = {1, 2, 3, 4, 5, 6.5f};
  ASSERT_TRUE(writeNpy(HostArray::f32({2, 3}, values), path).isOk());
  StatusOr<HostArray> read = readNpy(path);
  ASSERT_TRUE(read.isOk()) << read.status().toString();
  EXPECT_EQ(read->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(read->data<float>()[5], 6.5f);

  HostArray labels;
  labels.dtype = plan::I64;
  labels.shape = {3};
  labels.bytes.resize(24);
  labels.data<int64_t>()[2] = 42;
  ASSERT_TRUE(writeNpy(labels, path).isOk());
  read = readNpy(path);
  ASSERT_TRUE(read.isOk());
  EXPECT_EQ(read->dtype, plan::I64);
  EXPECT_EQ(read->data<int64_t>()[2], 42);
}

// The bytes numpy 1.24 writes for np.array([[1, 2]], dtype=np.int32).
TEST(Npy, ReadsNumpyInt32AsInt64) {
  std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (1, 2), }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string file = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header;
  int32_t data[2] = {1, -2};
  file.append(reinterpret_cast<const char *>(data), 8);
  std::string path = ::testing::TempDir() + "i4.npy";
  std::ofstream(path, std::ios::binary) << file;
  StatusOr<HostArray> read = readNpy(path);
  ASSERT_TRUE(read.isOk()) << read.status().toString();
  EXPECT_EQ(read->dtype, plan::I64);
  EXPECT_EQ(read->data<int64_t>()[1], -2);
}

TEST(Npy, RejectsTruncatedAndForeignFiles) {
  std::string path = ::testing::TempDir() + "bad.npy";
  float values[4] = {1, 2, 3, 4};
  ASSERT_TRUE(writeNpy(HostArray::f32({4}, values), path).isOk());
  std::string bytes = *readWholeFile(path);
  std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() - 4);
  EXPECT_FALSE(readNpy(path).isOk());
  std::ofstream(path, std::ios::binary) << "not numpy at all";
  EXPECT_FALSE(readNpy(path).isOk());
}

// A shape whose element count times the element size wraps around to the
// bytes present (2^61 + 1 int64 labels, 8 data bytes) must not pass the size
// check: once it did, and the copy overran the heap (issue 15, finding 4).
TEST(Npy, RejectsShapesWhoseSizeWrapsAround) {
  for (const char *shape : {"(2305843009213693953,)", "(4294967297, 4294967296)", "(-1,)", "(99999999999999999999999,)"}) {
    std::string header = std::string("{'descr': '<i8', 'fortran_order': False, 'shape': ") + shape + ", }";
    header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
    header += '\n';
    std::string file = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header;
    file.append(8, '\1');
    std::string path = ::testing::TempDir() + "wrap.npy";
    std::ofstream(path, std::ios::binary) << file;
    StatusOr<HostArray> read = readNpy(path);
    EXPECT_FALSE(read.isOk()) << shape;
  }
}

} // namespace
