#include "common/file_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace convtune {
namespace {

absl::Status ErrnoError(int err, absl::string_view what,
                        absl::string_view path) {
  return absl::ErrnoToStatus(err, absl::StrCat(what, " ", path));
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view bytes) {
  std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, "create", tmp);
  auto fail = [&](absl::string_view what) {
    int err = errno;
    if (fd >= 0) close(fd);
    unlink(tmp.c_str());
    return ErrnoError(err, what, tmp);
  };
  for (size_t done = 0; done < bytes.size();) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail("write");
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) return fail("fsync");
  if (close(fd) != 0) {
    fd = -1;
    return fail("close");
  }
  fd = -1;
  if (rename(tmp.c_str(), path.c_str()) != 0)
    return fail("rename to " + path + " from");
  // The rename is durable only once the folder's entry is.
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::string dir = parent.empty() ? std::string(".") : parent.string();
  int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return ErrnoError(errno, "open folder", dir);
  int rc = fsync(dfd);
  int err = errno;
  close(dfd);
  if (rc != 0) return ErrnoError(err, "fsync folder", dir);
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "open", path);
  std::string out;
  char buf[1 << 16];
  while (true) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      return ErrnoError(err, "read", path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

}  // namespace convtune
