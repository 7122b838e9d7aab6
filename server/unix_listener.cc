#include "server/unix_listener.h"

#include <fcntl.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "absl/strings/str_cat.h"

namespace convtune {

absl::Status UnixListener::Start(const std::string& path, mode_t mode) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "socket: path is longer than ", sizeof(addr.sun_path) - 1, " bytes"));
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0 ||
      bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      // Before listen: no one connects through a wider mode meanwhile.
      chmod(path.c_str(), mode) != 0 || listen(listen_fd_, 256) != 0 ||
      pipe2(wake_, O_CLOEXEC) != 0) {
    const std::string why = std::strerror(errno);
    Stop();
    return absl::UnavailableError(
        absl::StrCat("cannot listen on unix:", path, ": ", why));
  }
  thread_ = std::thread([this] { AcceptLoop(); });
  return absl::OkStatus();
}

void UnixListener::AcceptLoop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      std::cerr << "convtuned: socket poll failed: " << std::strerror(errno)
                << std::endl;
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int fd =
        accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      // EMFILE and friends: the client sees a refused connection; back off
      // so the loop does not spin.
      if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
        poll(nullptr, 0, 10);
      }
      continue;
    }
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      close(fd);
      continue;
    }
    peers_->Set(fd, {cred.pid, cred.uid, cred.gid});
    grpc::AddInsecureChannelFromFd(server_, fd);
  }
}

void UnixListener::Stop() {
  if (thread_.joinable()) {
    const char byte = 0;
    while (write(wake_[1], &byte, 1) < 0 && errno == EINTR) {
    }
    thread_.join();
  }
  for (int* fd : {&listen_fd_, &wake_[0], &wake_[1]}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

}  // namespace convtune
