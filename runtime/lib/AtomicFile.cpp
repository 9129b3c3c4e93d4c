#include "fsdpc/runtime/AtomicFile.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace fsdpc::runtime {

Status writeBytes(FILE *file, const void *data, size_t size, const std::string &path) {
  if (size != 0 && std::fwrite(data, 1, size, file) != size)
    return FSDPC_ERROR(kDataLoss, "cannot write '", path, "': ", std::strerror(errno));
  return Status::ok();
}

Status writeFileAtomically(const std::string &path, const std::function<Status(FILE *)> &writeBody) {
  std::string tempPath = path + ".tmp." + std::to_string(::getpid());
  FILE *file = std::fopen(tempPath.c_str(), "wb");
  if (!file)
    return FSDPC_ERROR(kInvalidArgument, "cannot create '", tempPath, "': ", std::strerror(errno));
  Status status = writeBody(file);
  if (status.isOk() && std::fflush(file) != 0)
    status = FSDPC_ERROR(kDataLoss, "cannot write '", tempPath, "': ", std::strerror(errno));
  if (status.isOk() && ::fsync(::fileno(file)) != 0)
    status = FSDPC_ERROR(kDataLoss, "cannot sync '", tempPath, "': ", std::strerror(errno));
  if (std::fclose(file) != 0 && status.isOk())
    status = FSDPC_ERROR(kDataLoss, "cannot close '", tempPath, "': ", std::strerror(errno));
  if (status.isOk() && std::rename(tempPath.c_str(), path.c_str()) != 0)
    status = FSDPC_ERROR(kDataLoss, "cannot rename '", tempPath, "' to '", path, "': ", std::strerror(errno));
  // The rename is durable once the directory that holds it is on disk.
  if (status.isOk()) {
    const size_t slash = path.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd < 0 || ::fsync(fd) != 0)
      status = FSDPC_ERROR(kDataLoss, "cannot sync directory '", dir, "': ", std::strerror(errno));
    if (fd >= 0)
      ::close(fd);
  }
  if (!status.isOk())
    std::remove(tempPath.c_str());
  return status;
}

StatusOr<std::string> readWholeFile(const std::string &path) {
  FILE *file = std::fopen(path.c_str(), "rb");
  if (!file)
    return FSDPC_ERROR(kNotFound, "cannot open '", path, "': ", std::strerror(errno));
  std::string contents;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0)
    contents.append(buffer, n);
  bool failed = std::ferror(file);
  std::fclose(file);
  if (failed)
    return FSDPC_ERROR(kDataLoss, "cannot read '", path, "'");
  return contents;
}

} // namespace fsdpc::runtime
