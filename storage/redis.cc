#include "storage/redis.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace convtune::storage {
namespace {

constexpr size_t kQuoted = 40;  // characters of a bad value quoted back

timeval DeadlineTimeval(absl::Duration d) {
  if (d < absl::Milliseconds(1)) d = absl::Milliseconds(1);
  return absl::ToTimeval(d);
}

RedisReply Convert(const redisReply* r) {
  RedisReply out;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::kString;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::kStatus;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = RedisReply::Type::kError;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      out.elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) {
        out.elements.push_back(Convert(r->element[i]));
      }
      break;
    default:
      out.type = RedisReply::Type::kNil;
  }
  return out;
}

}  // namespace

std::string RedisEndpoint::ToString() const {
  if (!unix_path.empty()) return absl::StrCat("unix:", unix_path);
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<RedisEndpoint> ParseRedisAddress(absl::string_view address) {
  RedisEndpoint e;
  absl::string_view rest = address;
  if (absl::ConsumePrefix(&rest, "unix:")) {
    if (rest.empty() || rest[0] != '/') {
      return absl::InvalidArgumentError(
          absl::StrCat("tier.address: expected unix:/absolute/path, got \"",
                       address.substr(0, kQuoted), "\""));
    }
    e.unix_path = std::string(rest);
    return e;
  }
  absl::ConsumePrefix(&rest, "redis://");
  const size_t colon = rest.rfind(':');
  int port = 0;
  if (colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(rest.substr(colon + 1), &port) || port <= 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("tier.address: expected host:port, redis://host:port or "
                     "unix:/path, got \"",
                     address.substr(0, kQuoted), "\""));
  }
  e.host = std::string(rest.substr(0, colon));
  e.port = port;
  return e;
}

absl::StatusOr<std::unique_ptr<RedisConnection>> RedisConnection::Connect(
    const Options& options) {
  const timeval tv = DeadlineTimeval(options.deadline);
  redisContext* c =
      options.endpoint.unix_path.empty()
          ? redisConnectWithTimeout(options.endpoint.host.c_str(),
                                    options.endpoint.port, tv)
          : redisConnectUnixWithTimeout(options.endpoint.unix_path.c_str(), tv);
  if (c == nullptr) {
    return absl::ResourceExhaustedError("redis: cannot allocate a context");
  }
  if (c->err != 0) {
    absl::Status s = absl::UnavailableError(
        absl::StrCat("redis ", options.endpoint.ToString(), ": ", c->errstr));
    redisFree(c);
    return s;
  }
  if (redisSetTimeout(c, tv) != REDIS_OK) {
    redisFree(c);
    return absl::UnavailableError("redis: cannot set the deadline");
  }
  // TCP only: on a Unix socket it fails, and leaves the context failed.
  if (options.endpoint.unix_path.empty() &&
      redisEnableKeepAlive(c) != REDIS_OK) {
    redisFree(c);
    return absl::UnavailableError("redis: cannot enable keepalive");
  }
  std::unique_ptr<RedisConnection> conn(new RedisConnection(c));
  if (!options.password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!options.user.empty()) auth.push_back(options.user);
    auth.push_back(options.password);
    absl::StatusOr<RedisReply> r = conn->Command(auth);
    if (!r.ok()) return r.status();
    if (r->is_error()) {
      return absl::PermissionDeniedError(
          absl::StrCat("redis ", options.endpoint.ToString(), ": AUTH as \"",
                       options.user.empty() ? "default" : options.user,
                       "\" refused: ", r->str.substr(0, 80)));
    }
  }
  return conn;
}

RedisConnection::~RedisConnection() { redisFree(context_); }

absl::StatusOr<RedisReply> RedisConnection::Command(
    const std::vector<std::string>& argv) {
  if (broken_) return absl::UnavailableError("redis: connection broken");
  std::vector<const char*> args;
  std::vector<size_t> lens;
  args.reserve(argv.size());
  lens.reserve(argv.size());
  for (const std::string& a : argv) {
    args.push_back(a.data());
    lens.push_back(a.size());
  }
  void* raw = redisCommandArgv(context_, static_cast<int>(args.size()),
                               args.data(), lens.data());
  if (raw == nullptr) {
    broken_ = true;
    return absl::UnavailableError(absl::StrCat(
        "redis: ", context_->err != 0 ? context_->errstr : "no reply"));
  }
  auto* reply = static_cast<redisReply*>(raw);
  RedisReply out = Convert(reply);
  freeReplyObject(reply);
  return out;
}

}  // namespace convtune::storage
