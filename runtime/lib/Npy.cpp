#include "fsdpc/runtime/Npy.h"

#include "fsdpc/runtime/Float16.h"

#include "fsdpc/runtime/AtomicFile.h"

#include <cstdlib>

namespace fsdpc::runtime {

namespace {

/// Finds the value text after `'key':` in the header dict.
bool findDictValue(const std::string &header, const std::string &key, std::string &value) {
  size_t pos = header.find("'" + key + "'");
  if (pos == std::string::npos)
    return false;
  pos = header.find(':', pos);
  if (pos == std::string::npos)
    return false;
  ++pos;
  while (pos < header.size() && header[pos] == ' ')
    ++pos;
  size_t end = pos;
  if (header[pos] == '(') {
    end = header.find(')', pos);
    if (end == std::string::npos)
      return false;
    ++end;
  } else if (header[pos] == '\'') {
    end = header.find('\'', pos + 1);
    if (end == std::string::npos)
      return false;
    ++end;
  } else {
    while (end < header.size() && header[end] != ',' && header[end] != '}')
      ++end;
  }
  value = header.substr(pos, end - pos);
  return true;
}

bool parseShape(const std::string &text, std::vector<int64_t> &shape) {
  // "(3, 4)", "(5,)", "()"
  size_t pos = 1;
  while (pos < text.size()) {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == ','))
      ++pos;
    if (pos >= text.size() || text[pos] == ')')
      break;
    char *end = nullptr;
    long long dim = std::strtoll(text.c_str() + pos, &end, 10);
    if (end == text.c_str() + pos || dim < 0)
      return false;
    shape.push_back(dim);
    pos = end - text.c_str();
  }
  return true;
}

} // namespace

StatusOr<HostArray> readNpy(const std::string &path) {
  StatusOr<std::string> contents = readWholeFile(path);
  if (!contents.isOk())
    return contents.status();
  const std::string &bytes = *contents;
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    return FSDPC_ERROR(kInvalidArgument, "'", path, "' is not a .npy file");
  int major = static_cast<uint8_t>(bytes[6]);
  size_t headerLength, headerStart;
  if (major == 1) {
    headerLength = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
    headerStart = 10;
  } else {
    if (bytes.size() < 12)
      return FSDPC_ERROR(kInvalidArgument, "'", path, "' is truncated");
    headerLength = 0;
    for (int i = 0; i < 4; ++i)
      headerLength |= static_cast<size_t>(static_cast<uint8_t>(bytes[8 + i])) << (8 * i);
    headerStart = 12;
  }
  if (headerStart + headerLength > bytes.size())
    return FSDPC_ERROR(kInvalidArgument, "'", path, "' is truncated");
  std::string header = bytes.substr(headerStart, headerLength);
  std::string descr, fortran, shapeText;
  if (!findDictValue(header, "descr", descr) || !findDictValue(header, "fortran_order", fortran) ||
      !findDictValue(header, "shape", shapeText))
    return FSDPC_ERROR(kInvalidArgument, "'", path, "' has a malformed .npy header");
  if (fortran.rfind("False", 0) != 0)
    return FSDPC_ERROR(kInvalidArgument, "'", path, "' is in Fortran order; save it C-ordered");
  HostArray array;
  if (!parseShape(shapeText, array.shape))
    return FSDPC_ERROR(kInvalidArgument, "'", path, "' has a malformed shape ", shapeText);

  size_t sourceElementBytes;
  if (descr == "'<f4'" || descr == "'<f8'" || descr == "'<f2'") {
    array.dtype = plan::F32;
    sourceElementBytes = descr == "'<f4'" ? 4 : descr == "'<f2'" ? 2 : 8;
  } else if (descr == "'<i8'" || descr == "'<i4'") {
    array.dtype = plan::I64;
    sourceElementBytes = descr == "'<i8'" ? 8 : 4;
  } else {
    return FSDPC_ERROR(kInvalidArgument, "'", path, "' has dtype ", descr,
                       "; fsdp-run reads float16, float32, float64, int32 and int64");
  }
  const size_t payloadStart = headerStart + headerLength;
  const int64_t available = static_cast<int64_t>(bytes.size() - payloadStart);
  const int64_t needed = checkedByteSize(array.shape, static_cast<int64_t>(sourceElementBytes), INT64_MAX / 8);
  if (needed != available)
    return FSDPC_ERROR(kInvalidArgument, "'", path, "' holds ", available, " data bytes, its shape ", shapeText,
                       needed < 0 ? " is too large for any file" : " needs " + std::to_string(needed));
  const int64_t count = array.numElements();
  const char *payload = bytes.data() + payloadStart;
  array.bytes.resize(count * dtypeSize(array.dtype));
  if (array.dtype == plan::F32) {
    float *out = array.data<float>();
    for (int64_t i = 0; i < count; ++i) {
      if (sourceElementBytes == 4) {
        std::memcpy(&out[i], payload + 4 * i, 4);
      } else if (sourceElementBytes == 2) {
        uint16_t bits;
        std::memcpy(&bits, payload + 2 * i, 2);
        out[i] = halfToFloat(bits);
      } else {
        double d;
        std::memcpy(&d, payload + 8 * i, 8);
        out[i] = static_cast<float>(d);
      }
    }
  } else {
    int64_t *out = array.data<int64_t>();
    for (int64_t i = 0; i < count; ++i) {
      if (sourceElementBytes == 8) {
        std::memcpy(&out[i], payload + 8 * i, 8);
      } else {
        int32_t v;
        std::memcpy(&v, payload + 4 * i, 4);
        out[i] = v;
      }
    }
  }
  return array;
}

Status writeNpy(const HostArray &stored, const std::string &path) {
  // numpy has no bf16: it is written as the f32 it widens to.
  HostArray widened;
  if (stored.dtype == plan::BF16) {
    widened.dtype = plan::F32;
    widened.shape = stored.shape;
    widened.bytes.resize(stored.numElements() * sizeof(float));
    for (int64_t i = 0; i < stored.numElements(); ++i)
      widened.data<float>()[i] = bf16ToFloat(stored.data<uint16_t>()[i]);
  }
  const HostArray &array = stored.dtype == plan::BF16 ? widened : stored;
  const char *descr = array.dtype == plan::F32 ? "<f4" : array.dtype == plan::F16 ? "<f2"
                      : array.dtype == plan::I32 ? "<i4" : array.dtype == plan::BOOL ? "|b1" : "<i8";
  std::string shape = "(";
  for (size_t i = 0; i < array.shape.size(); ++i)
    shape += std::to_string(array.shape[i]) + (array.shape.size() == 1 ? "," : (i + 1 < array.shape.size() ? ", " : ""));
  shape += ")";
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad so the data starts 64-byte aligned, header ends with '\n'.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string preamble = "\x93NUMPY";
  preamble += static_cast<char>(1);
  preamble += static_cast<char>(0);
  preamble += static_cast<char>(header.size() & 0xff);
  preamble += static_cast<char>((header.size() >> 8) & 0xff);
  return writeFileAtomically(path, [&](FILE *file) -> Status {
    FSDPC_RETURN_IF_ERROR(writeBytes(file, preamble.data(), preamble.size(), path));
    FSDPC_RETURN_IF_ERROR(writeBytes(file, header.data(), header.size(), path));
    return writeBytes(file, array.bytes.data(), array.bytes.size(), path);
  });
}

} // namespace fsdpc::runtime
