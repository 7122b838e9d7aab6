// A blocking connection to a Redis server (hiredis), for the cluster tier:
// one command at a time, each bounded by the connection's deadline. After an
// I/O error or a deadline the connection is broken and says so; the caller
// makes a new one. Not thread-safe: one caller at a time.
#ifndef CONVTUNE_STORAGE_REDIS_H_
#define CONVTUNE_STORAGE_REDIS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

struct redisContext;

namespace convtune::storage {

// Where a Redis server listens: "host:port", "redis://host:port" or
// "unix:/path/to/socket".
struct RedisEndpoint {
  std::string host;
  int port = 6379;
  std::string unix_path;  // set for a Unix socket; host and port unused

  std::string ToString() const;
};

// InvalidArgument naming `address` (a prefix of it) when it is none of the
// forms above.
absl::StatusOr<RedisEndpoint> ParseRedisAddress(absl::string_view address);

// One reply. Errors the server answers with ("NOPERM ...", "WRONGTYPE ...")
// are replies of type kError, not failed calls.
struct RedisReply {
  enum class Type { kNil, kString, kInteger, kArray, kStatus, kError };
  Type type = Type::kNil;
  std::string str;  // kString, kStatus, kError
  int64_t integer = 0;
  std::vector<RedisReply> elements;  // kArray

  bool is_error() const { return type == Type::kError; }
};

class RedisConnection {
 public:
  struct Options {
    RedisEndpoint endpoint;
    // ACL user and password (AUTH user password); an empty user with a
    // password authenticates as "default"; neither: no AUTH.
    std::string user;
    std::string password;
    // Connecting, and each command, fail past this.
    absl::Duration deadline = absl::Milliseconds(50);
  };

  // Connects and authenticates. Unavailable when the server cannot be
  // reached in time; PermissionDenied when AUTH is refused.
  static absl::StatusOr<std::unique_ptr<RedisConnection>> Connect(
      const Options& options);

  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Sends one command (binary-safe arguments) and reads its reply.
  // Unavailable on an I/O error or past the deadline (the connection is then
  // broken).
  absl::StatusOr<RedisReply> Command(const std::vector<std::string>& argv);
  bool broken() const { return broken_; }

 private:
  explicit RedisConnection(redisContext* context) : context_(context) {}

  redisContext* context_;
  bool broken_ = false;
};

}  // namespace convtune::storage

#endif  // CONVTUNE_STORAGE_REDIS_H_
