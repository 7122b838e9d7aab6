// Who is calling and what they may do. A caller on the Unix socket is known
// by the uid and gid the kernel reports for its connection (SO_PEERCRED,
// recorded by UnixListener in a PeerTable); a caller over TLS by the names
// of the client certificate it presented (its subject's common name and
// subject alternative names), which the daemon's client CA signed; a
// caller over plaintext TCP is anonymous. The policy (from the config's
// [[tenant]] tables) maps them to a tenant and a role:
//
//   anonymous  read-only queries: workspace sizes, solver lists, immediate
//              answers (never queuing a tuning), code objects;
//   tenant     also finds, plan builds and Execute: everything that measures
//              with the daemon's own timer or runs on its device;
//   admin      also what writes or reveals the database as a whole: import,
//              export, statistics, retraining the immediate-mode model.
//
// Thread-safe: the policy is fixed after construction and the PeerTable
// locks.
#ifndef CONVTUNE_SERVER_ACCESS_H_
#define CONVTUNE_SERVER_ACCESS_H_

#include <grpcpp/server_context.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace convtune {

enum class Role { kAnonymous = 0, kTenant = 1, kAdmin = 2 };

// "anonymous", "tenant" or "admin".
absl::string_view RoleName(Role role);

// What a call needs; each RPC needs exactly one.
enum class Right {
  kQuery,    // answers from what is stored, computes nothing on the device
  kTune,     // compiles or times kernels (finds, plan builds, background
             // tuning of an immediate-mode miss)
  kExecute,  // runs a convolution on the device with the caller's tensors
  kAdmin,    // writes, exports or counts the database as a whole
};

// The name a refusal uses ("tune", "admin", ...).
absl::string_view RightName(Right right);

struct Tenant {
  std::string name;
  Role role = Role::kTenant;
  // Unix users and groups that are this tenant. A connection matches when its
  // uid is listed, or else its gid is.
  std::vector<uid_t> uids;
  std::vector<gid_t> gids;
  // TLS clients that are this tenant: a connection matches when its
  // certificate's common name, or one of its subject alternative names, is
  // listed.
  std::vector<std::string> cert_names;
};

// The tenant of a TLS client that no [[tenant]] names, from its
// certificate's first name: "cert:NAME" when NAME is plain (letters,
// digits, . - _ @) and at most 48 characters, else its first 48 characters
// made plain and a hash of the whole ("cert:NA_ME~0123456789abcdef"), so
// that two names never share a tenant.
std::string CertTenantName(absl::string_view name);

struct AccessPolicy {
  // Named tenants, in config order; the first match wins.
  std::vector<Tenant> tenants;
  // Local users the list does not name: tenants named "uid:N" when true,
  // refused when false; and likewise TLS clients whose certificate no
  // tenant names ("cert:NAME"). Default: true, since the socket's mode and
  // group, and the client CA, already decide who can connect at all.
  bool unlisted_users_are_tenants = true;
  // The daemon's own uid and root are admins unless a listed tenant names
  // them otherwise. Default: true.
  bool owner_is_admin = true;
  uid_t owner_uid = 0;
  // The role of a caller whose connection carries no credentials at all (an
  // in-process channel's). Default: none, refused; the daemon never sets it,
  // only a program serving itself in-process does.
  std::optional<Role> uncredentialed;

  // The policy without a config: the daemon's user and root administer, other
  // local users that can reach the socket are tenants.
  static AccessPolicy Default();
};

// The caller of one RPC.
struct Caller {
  std::string tenant;  // "ops", "uid:1001", "tcp:127.0.0.1"
  Role role = Role::kAnonymous;
  bool known = false;  // false: refuse everything (why in `refusal`)
  std::string refusal;
};

// Peer credentials of the Unix connections handed to gRPC, by descriptor.
// gRPC names such a connection's peer "fd:N"; a descriptor number is reused
// only after gRPC has closed it, which happens when no call of the old
// connection is left.
class PeerTable {
 public:
  struct Credentials {
    pid_t pid = 0;
    uid_t uid = 0;
    gid_t gid = 0;
  };
  void Set(int fd, Credentials c);
  // False if `fd` was never set.
  bool Get(int fd, Credentials* c) const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<int, Credentials> by_fd_ ABSL_GUARDED_BY(mu_);
};

class Access {
 public:
  // `peers` must outlive this; null when no Unix connections are handed over
  // (then an "fd:" peer is unknown and refused).
  Access(AccessPolicy policy, const PeerTable* peers);

  // The caller of a call: a TCP connection whose client certificate was
  // verified (TLS) is known by its names, anything else by Identify(peer).
  Caller IdentifyCall(const grpc::ServerContextBase& ctx) const;
  // The caller behind gRPC's peer string: "fd:N" (a Unix connection from
  // UnixListener), "ipv4:..." / "ipv6:..." (plaintext TCP: anonymous).
  // Anything else has policy().uncredentialed, refused without it.
  Caller Identify(absl::string_view peer) const;
  // The tenant of a local user.
  Caller ForUser(uid_t uid, gid_t gid) const;
  // The tenant of a TLS client whose verified certificate carries `names`
  // (its common name first, then its subject alternative names).
  Caller ForCertificate(const std::vector<std::string>& names) const;

  // OK if `caller` holds `right`; PermissionDenied naming the RPC, the
  // tenant, its role and what would be needed otherwise.
  static absl::Status Check(const Caller& caller, Right right,
                            absl::string_view rpc);

  const AccessPolicy& policy() const { return policy_; }

 private:
  const AccessPolicy policy_;
  const PeerTable* peers_;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_ACCESS_H_
