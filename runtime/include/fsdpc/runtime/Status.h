//===- Status.h - Error values that carry their origin ----------*- C++ -*-===//
//
// The runtime reports failures as values, never exceptions or asserts, so a
// bad plan or data file ends in one clear line and a non-zero exit. Each error
// remembers the source file and line that raised it, for bug reports.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPC_RUNTIME_STATUS_H
#define FSDPC_RUNTIME_STATUS_H

#include <sstream>
#include <string>
#include <utility>

namespace fsdpc::runtime {

enum class StatusCode { kOk = 0, kInvalidArgument, kNotFound, kDataLoss, kInternal, kUnimplemented, kAborted };

class [[nodiscard]] Status {
public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(StatusCode code, std::string message, const char *file, int line) {
    Status s;
    s.code_ = code;
    s.message_ = std::move(message);
    s.file_ = file;
    s.line_ = line;
    return s;
  }

  bool isOk() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return isOk(); }
  StatusCode code() const { return code_; }
  const std::string &message() const { return message_; }
  const char *file() const { return file_; }
  int line() const { return line_; }
  /// "message (runtime/lib/Foo.cpp:12)"
  std::string toString() const;

private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  const char *file_ = "";
  int line_ = 0;
};

/// A value or the Status that explains why there is none.
template <typename T> class [[nodiscard]] StatusOr {
public:
  StatusOr(Status status) : status_(std::move(status)) {}
  StatusOr(T value) : value_(std::move(value)), hasValue_(true) {}
  bool isOk() const { return hasValue_; }
  const Status &status() const { return status_; }
  T &value() { return value_; }
  const T &value() const { return value_; }
  T &operator*() { return value_; }
  T *operator->() { return &value_; }

private:
  Status status_;
  T value_{};
  bool hasValue_ = false;
};

namespace detail {
template <typename... Args> std::string concat(Args &&...args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
} // namespace detail

} // namespace fsdpc::runtime

#define FSDPC_ERROR(code, ...)                                                                      \
  ::fsdpc::runtime::Status::error(::fsdpc::runtime::StatusCode::code,                            \
                                  ::fsdpc::runtime::detail::concat(__VA_ARGS__), __FILE__, __LINE__)

#define FSDPC_RETURN_IF_ERROR(expr)                                                                 \
  do {                                                                                             \
    ::fsdpc::runtime::Status fsdpcStatus_ = (expr);                                                \
    if (!fsdpcStatus_.isOk())                                                                      \
      return fsdpcStatus_;                                                                         \
  } while (0)

#endif // FSDPC_RUNTIME_STATUS_H
