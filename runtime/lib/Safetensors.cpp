#include "fsdpc/runtime/Safetensors.h"
#include "fsdpc/runtime/PlanFile.h" // fnv1a64

#include "fsdpc/runtime/Float16.h"

#include "fsdpc/runtime/AtomicFile.h"

#include <cstdlib>
#include <memory>

namespace fsdpc::runtime {

namespace {
const char *safetensorsDtype(plan::DType dtype) {
  switch (dtype) {
  case plan::I64:
    return "I64";
  case plan::BF16:
    return "BF16";
  case plan::F16:
    return "F16";
  case plan::I32:
    return "I32";
  case plan::BOOL:
    return "BOOL";
  default:
    return "F32";
  }
}
} // namespace

namespace {

std::string jsonEscape(const std::string &text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out;
}

/// Just enough JSON for safetensors headers: objects, arrays, strings and
/// integers. Anything else is a parse error.
struct JsonValue {
  enum Kind { kObject, kArray, kString, kNumber } kind = kNumber;
  std::vector<std::pair<std::string, std::unique_ptr<JsonValue>>> members;
  std::vector<std::unique_ptr<JsonValue>> elements;
  std::string text;
  int64_t number = 0;

  const JsonValue *get(const std::string &key) const {
    for (const auto &member : members)
      if (member.first == key)
        return member.second.get();
    return nullptr;
  }
};

class JsonParser {
public:
  explicit JsonParser(const std::string &text) : text_(text) {}

  std::unique_ptr<JsonValue> parse() {
    auto value = parseValue(0);
    skipSpace();
    if (pos_ != text_.size())
      return nullptr;
    return value;
  }

private:
  void skipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t' || text_[pos_] == '\r'))
      ++pos_;
  }
  bool consume(char c) {
    skipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool parseString(std::string &out) {
    if (!consume('"'))
      return false;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      if (text_[pos_] == '\\') {
        if (++pos_ >= text_.size())
          return false;
      }
      out += text_[pos_++];
    }
    return consume('"');
  }
  std::unique_ptr<JsonValue> parseValue(int depth) {
    if (depth > 8)
      return nullptr;
    skipSpace();
    if (pos_ >= text_.size())
      return nullptr;
    auto value = std::make_unique<JsonValue>();
    char c = text_[pos_];
    if (c == '{') {
      value->kind = JsonValue::kObject;
      ++pos_;
      if (consume('}'))
        return value;
      do {
        std::string key;
        if (!parseString(key) || !consume(':'))
          return nullptr;
        auto member = parseValue(depth + 1);
        if (!member)
          return nullptr;
        value->members.emplace_back(std::move(key), std::move(member));
      } while (consume(','));
      return consume('}') ? std::move(value) : nullptr;
    }
    if (c == '[') {
      value->kind = JsonValue::kArray;
      ++pos_;
      if (consume(']'))
        return value;
      do {
        auto element = parseValue(depth + 1);
        if (!element)
          return nullptr;
        value->elements.push_back(std::move(element));
      } while (consume(','));
      return consume(']') ? std::move(value) : nullptr;
    }
    if (c == '"') {
      value->kind = JsonValue::kString;
      return parseString(value->text) ? std::move(value) : nullptr;
    }
    char *end = nullptr;
    value->number = std::strtoll(text_.c_str() + pos_, &end, 10);
    if (end == text_.c_str() + pos_)
      return nullptr;
    pos_ = end - text_.c_str();
    return value;
  }

  const std::string &text_;
  size_t pos_ = 0;
};

} // namespace

Status writeSafetensors(const NamedArrays &arrays, const std::string &path,
                        const std::map<std::string, std::string> &metadata, FileDigest *digest) {
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto &[key, value] : metadata) {
      header += (first ? "\"" : ",\"") + jsonEscape(key) + "\":\"" + jsonEscape(value) + "\"";
      first = false;
    }
    header += "}";
  }
  uint64_t offset = 0;
  for (const auto &[name, array] : arrays) {
    if (header.size() > 1)
      header += ",";
    header += "\"" + jsonEscape(name) + "\":{\"dtype\":\"" + safetensorsDtype(array.dtype) + "\",\"shape\":[";
    for (size_t i = 0; i < array.shape.size(); ++i)
      header += (i ? "," : "") + std::to_string(array.shape[i]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + array.bytes.size()) + "]}";
    offset += array.bytes.size();
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  uint8_t length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i));
  if (digest) { // the bytes below, in the order they are written
    digest->bytes = sizeof(length) + header.size() + offset;
    digest->fnv1a64 = fnv1a64(header.data(), header.size(), fnv1a64(length, sizeof(length)));
    for (const auto &entry : arrays)
      digest->fnv1a64 = fnv1a64(entry.second.bytes.data(), entry.second.bytes.size(), digest->fnv1a64);
  }
  return writeFileAtomically(path, [&](FILE *file) -> Status {
    FSDPC_RETURN_IF_ERROR(writeBytes(file, length, sizeof(length), path));
    FSDPC_RETURN_IF_ERROR(writeBytes(file, header.data(), header.size(), path));
    for (const auto &entry : arrays)
      FSDPC_RETURN_IF_ERROR(writeBytes(file, entry.second.bytes.data(), entry.second.bytes.size(), path));
    return Status::ok();
  });
}

StatusOr<NamedArrays> readSafetensors(const std::string &path, std::map<std::string, std::string> *metadata) {
  StatusOr<std::string> contents = readWholeFile(path);
  if (!contents.isOk())
    return contents.status();
  return parseSafetensors(*contents, path, metadata);
}

StatusOr<NamedArrays> parseSafetensors(const std::string &bytes, const std::string &path,
                                       std::map<std::string, std::string> *metadata) {
  if (bytes.size() < 8)
    return FSDPC_ERROR(kInvalidArgument, "'", path, "' is not a safetensors file");
  uint64_t headerLength = 0;
  for (int i = 0; i < 8; ++i)
    headerLength |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  if (headerLength > bytes.size() - 8)
    return FSDPC_ERROR(kInvalidArgument, "'", path, "' is not a safetensors file (header length)");
  std::string headerText = bytes.substr(8, headerLength);
  std::unique_ptr<JsonValue> header = JsonParser(headerText).parse();
  if (!header || header->kind != JsonValue::kObject)
    return FSDPC_ERROR(kInvalidArgument, "'", path, "' has a malformed safetensors header");
  const size_t dataStart = 8 + headerLength;
  const uint64_t dataBytes = bytes.size() - dataStart;
  NamedArrays arrays;
  for (const auto &[name, entry] : header->members) {
    if (name == "__metadata__") {
      if (metadata && entry->kind == JsonValue::kObject)
        for (const auto &[key, value] : entry->members)
          if (value->kind == JsonValue::kString)
            (*metadata)[key] = value->text;
      continue;
    }
    const JsonValue *dtype = entry->get("dtype");
    const JsonValue *shape = entry->get("shape");
    const JsonValue *offsets = entry->get("data_offsets");
    if (!dtype || !shape || !offsets || dtype->kind != JsonValue::kString || shape->kind != JsonValue::kArray ||
        offsets->kind != JsonValue::kArray || offsets->elements.size() != 2)
      return FSDPC_ERROR(kInvalidArgument, "'", path, "': tensor '", name, "' has a malformed entry");
    HostArray array;
    size_t sourceBytes;
    if (dtype->text == "F32" || dtype->text == "F64") {
      array.dtype = plan::F32;
      sourceBytes = dtype->text == "F32" ? 4 : 8;
    } else if (dtype->text == "I64" || dtype->text == "I32") {
      array.dtype = plan::I64;
      sourceBytes = dtype->text == "I64" ? 8 : 4;
    } else if (dtype->text == "BF16" || dtype->text == "F16") {
      // Parameters are trained from f32 master values; a bf16 or f16
      // checkpoint widens exactly.
      array.dtype = plan::F32;
      sourceBytes = 2;
    } else {
      return FSDPC_ERROR(kInvalidArgument, "'", path, "': tensor '", name, "' has dtype ", dtype->text,
                         "; supported are F32, F64, BF16, F16, I32, I64");
    }
    const bool bf16 = dtype->text == "BF16";
    for (const auto &dim : shape->elements)
      array.shape.push_back(dim->number);
    int64_t begin = offsets->elements[0]->number, end = offsets->elements[1]->number;
    const int64_t needed = checkedByteSize(array.shape, static_cast<int64_t>(sourceBytes), static_cast<int64_t>(dataBytes));
    if (needed < 0)
      return FSDPC_ERROR(kInvalidArgument, "'", path, "': tensor '", name, "' has shape larger than the file's ",
                         dataBytes, " data bytes");
    if (begin < 0 || end < begin || static_cast<uint64_t>(end) > dataBytes || end - begin != needed)
      return FSDPC_ERROR(kInvalidArgument, "'", path, "': tensor '", name, "' has bad data offsets");
    const int64_t count = array.numElements();
    const char *src = bytes.data() + dataStart + begin;
    array.bytes.resize(count * dtypeSize(array.dtype));
    for (int64_t i = 0; i < count; ++i) {
      if (sourceBytes == dtypeSize(array.dtype)) {
        std::memcpy(array.bytes.data() + i * sourceBytes, src + i * sourceBytes, sourceBytes);
      } else if (array.dtype == plan::F32 && sourceBytes == 2) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        array.data<float>()[i] = bf16 ? bf16ToFloat(h) : halfToFloat(h);
      } else if (array.dtype == plan::F32) {
        double d;
        std::memcpy(&d, src + 8 * i, 8);
        array.data<float>()[i] = static_cast<float>(d);
      } else {
        int32_t v;
        std::memcpy(&v, src + 4 * i, 4);
        array.data<int64_t>()[i] = v;
      }
    }
    arrays.emplace_back(name, std::move(array));
  }
  return arrays;
}

} // namespace fsdpc::runtime
