// The daemon's Unix socket, accepted here rather than by gRPC so that each
// connection's peer credentials (SO_PEERCRED: pid, uid, gid) are read before
// it is handed to the gRPC server (AddInsecureChannelFromFd). Access then
// maps a call's "fd:N" peer to its user. Start/Stop are not thread-safe with
// each other; Stop is idempotent.
#ifndef CONVTUNE_SERVER_UNIX_LISTENER_H_
#define CONVTUNE_SERVER_UNIX_LISTENER_H_

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <string>
#include <thread>

#include "absl/status/status.h"
#include "server/access.h"

namespace convtune {

class UnixListener {
 public:
  // `server` and `peers` must outlive this.
  UnixListener(grpc::Server* server, PeerTable* peers)
      : server_(server), peers_(peers) {}
  ~UnixListener() { Stop(); }

  // Binds `path` (which must not exist), sets its mode, and starts accepting.
  // Unavailable if it cannot bind or listen.
  absl::Status Start(const std::string& path, mode_t mode);
  // Stops accepting; connections already handed over stay with gRPC.
  void Stop();

 private:
  void AcceptLoop();

  grpc::Server* server_;
  PeerTable* peers_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  std::thread thread_;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_UNIX_LISTENER_H_
