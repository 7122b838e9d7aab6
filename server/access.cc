#include "server/access.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/quote.h"

namespace convtune {
namespace {

template <typename T>
bool Contains(const std::vector<T>& v, T x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The host of a "ipv4:1.2.3.4:5" or "ipv6:[::1]:5" peer.
std::string TcpHost(absl::string_view peer) {
  peer.remove_prefix(peer.find(':') + 1);
  const size_t colon = peer.rfind(':');
  if (colon != absl::string_view::npos) peer = peer.substr(0, colon);
  return std::string(peer);
}

}  // namespace

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kAnonymous:
      return "anonymous";
    case Role::kTenant:
      return "tenant";
    case Role::kAdmin:
      return "admin";
  }
  return "anonymous";
}

absl::string_view RightName(Right right) {
  switch (right) {
    case Right::kQuery:
      return "query";
    case Right::kTune:
      return "tune";
    case Right::kExecute:
      return "execute";
    case Right::kAdmin:
      return "admin";
  }
  return "admin";
}

AccessPolicy AccessPolicy::Default() {
  AccessPolicy p;
  p.owner_uid = geteuid();
  return p;
}

void PeerTable::Set(int fd, Credentials c) {
  absl::MutexLock lock(&mu_);
  by_fd_[fd] = c;
}

bool PeerTable::Get(int fd, Credentials* c) const {
  absl::MutexLock lock(&mu_);
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return false;
  *c = it->second;
  return true;
}

Access::Access(AccessPolicy policy, const PeerTable* peers)
    : policy_(std::move(policy)), peers_(peers) {}

Caller Access::ForUser(uid_t uid, gid_t gid) const {
  Caller c;
  for (const Tenant& t : policy_.tenants) {
    if (Contains(t.uids, uid)) {
      c.tenant = t.name;
      c.role = t.role;
      c.known = true;
      return c;
    }
  }
  for (const Tenant& t : policy_.tenants) {
    if (Contains(t.gids, gid)) {
      c.tenant = t.name;
      c.role = t.role;
      c.known = true;
      return c;
    }
  }
  c.tenant = absl::StrCat("uid:", uid);
  if (policy_.owner_is_admin && (uid == 0 || uid == policy_.owner_uid)) {
    c.role = Role::kAdmin;
    c.known = true;
    return c;
  }
  if (policy_.unlisted_users_are_tenants) {
    c.role = Role::kTenant;
    c.known = true;
    return c;
  }
  c.refusal = absl::StrCat("uid ", uid, " (gid ", gid,
                           ") is not a tenant of this convtuned: the config "
                           "names its tenants and refuses other users");
  return c;
}

std::string CertTenantName(absl::string_view name) {
  // Log lines and metric labels carry the name: only plain characters, and
  // a name that is long or had others is told apart by its hash.
  constexpr size_t kKept = 48;
  std::string plain;
  bool changed = name.size() > kKept;
  for (char ch : name.substr(0, kKept)) {
    const bool ok = std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' ||
                    ch == '-' || ch == '_' || ch == '@';
    plain += ok ? ch : '_';
    changed |= !ok;
  }
  if (!changed) return absl::StrCat("cert:", plain);
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the whole name
  for (char ch : name) {
    h = (h ^ static_cast<unsigned char>(ch)) * 0x100000001b3ull;
  }
  return absl::StrCat("cert:", plain, "~", absl::Hex(h, absl::kZeroPad16));
}

Caller Access::ForCertificate(const std::vector<std::string>& names) const {
  Caller c;
  for (const Tenant& t : policy_.tenants) {
    for (const std::string& name : names) {
      if (Contains(t.cert_names, name)) {
        c.tenant = t.name;
        c.role = t.role;
        c.known = true;
        return c;
      }
    }
  }
  const std::string first = names.empty() ? "" : names.front();
  c.tenant = CertTenantName(first);
  if (names.empty()) {
    c.refusal = "the client certificate names no one";
    return c;
  }
  if (policy_.unlisted_users_are_tenants) {
    c.role = Role::kTenant;
    c.known = true;
    return c;
  }
  c.refusal = absl::StrCat("the client certificate '", QuotePrefix(first),
                           "' is not a tenant of this convtuned: the config "
                           "names its tenants and refuses others");
  return c;
}

Caller Access::IdentifyCall(const grpc::ServerContextBase& ctx) const {
  const std::string peer = ctx.peer();
  // Unix connections carry no TLS: only TCP peers may have a certificate.
  if (absl::StartsWith(peer, "ipv4:") || absl::StartsWith(peer, "ipv6:")) {
    const std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
    if (auth != nullptr && auth->IsPeerAuthenticated()) {
      std::vector<std::string> names;
      for (const char* property :
           {"x509_common_name", "x509_subject_alternative_name"}) {
        for (const grpc::string_ref& v : auth->FindPropertyValues(property)) {
          names.emplace_back(v.data(), v.size());
        }
      }
      return ForCertificate(names);
    }
  }
  return Identify(peer);
}

Caller Access::Identify(absl::string_view peer) const {
  if (absl::StartsWith(peer, "fd:")) {
    int fd = -1;
    PeerTable::Credentials cred;
    if (peers_ != nullptr && absl::SimpleAtoi(peer.substr(3), &fd) &&
        peers_->Get(fd, &cred)) {
      return ForUser(cred.uid, cred.gid);
    }
  } else if (absl::StartsWith(peer, "ipv4:") ||
             absl::StartsWith(peer, "ipv6:")) {
    Caller c;
    c.tenant = absl::StrCat("tcp:", TcpHost(peer));
    c.role = Role::kAnonymous;
    c.known = true;
    return c;
  } else if (policy_.uncredentialed.has_value()) {
    Caller c;
    c.tenant = "in-process";
    c.role = *policy_.uncredentialed;
    c.known = true;
    return c;
  }
  Caller c;
  c.tenant = "unknown";
  c.refusal = absl::StrCat("connection '", QuotePrefix(peer),
                           "' has no known credentials");
  return c;
}

absl::Status Access::Check(const Caller& caller, Right right,
                           absl::string_view rpc) {
  if (!caller.known) {
    return absl::PermissionDeniedError(
        absl::StrCat(rpc, ": refused: ", caller.refusal));
  }
  const Role needed = right == Right::kQuery   ? Role::kAnonymous
                      : right == Right::kAdmin ? Role::kAdmin
                                               : Role::kTenant;
  if (caller.role >= needed) return absl::OkStatus();
  if (needed == Role::kAdmin) {
    return absl::PermissionDeniedError(absl::StrCat(
        rpc, ": an admin call, and '", caller.tenant, "' is a ",
        RoleName(caller.role),
        " (admins are the daemon's own user, root, and [[tenant]] tables "
        "with admin = true in its config)"));
  }
  return absl::PermissionDeniedError(absl::StrCat(
      rpc, ": needs the ", RightName(right), " right, and '", caller.tenant,
      "' is anonymous (plaintext TCP answers read-only queries; "
      "tune and execute over the Unix socket, or over TLS with a client "
      "certificate)"));
}

}  // namespace convtune
