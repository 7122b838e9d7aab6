#include "server/config.h"

#include <cstdlib>
#include <fstream>
#include <set>
#include <toml.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/defaults.h"
#include "common/quote.h"
#include "common/vocabulary.h"

namespace convtune {
namespace {

// Reads typed keys of one table, naming "table.key" in its errors.
class Table {
 public:
  Table(const std::string& file, std::string name, const toml::value& v)
      : file_(file), name_(std::move(name)), v_(v) {}

  absl::Status Error(const std::string& key, const std::string& what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("config ", file_, ": ", Name(key), ": ", what));
  }
  std::string Name(const std::string& key) const {
    return name_.empty() ? key : absl::StrCat(name_, ".", key);
  }
  // An error of the file as a whole (`what` names its key).
  absl::Status FileError(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("config ", file_, ": ", what));
  }
  // InvalidArgument naming the first key not in `known`.
  absl::Status OnlyKeys(std::initializer_list<const char*> known) const {
    std::set<std::string> names(known.begin(), known.end());
    for (const auto& [key, value] : v_.as_table()) {
      if (names.count(key) == 0) {
        return Error(QuotePrefix(key),
                     absl::StrCat("unknown key (this table has ",
                                  absl::StrJoin(names, ", "), ")"));
      }
    }
    return absl::OkStatus();
  }
  bool Has(const std::string& key) const { return v_.contains(key); }

  absl::Status String(const std::string& key, std::string* out) const {
    if (!Has(key)) return absl::OkStatus();
    const toml::value& x = v_.at(key);
    if (!x.is_string()) return Error(key, "expected a string");
    *out = x.as_string().str;
    return absl::OkStatus();
  }
  absl::Status Bool(const std::string& key, bool* out) const {
    if (!Has(key)) return absl::OkStatus();
    const toml::value& x = v_.at(key);
    if (!x.is_boolean()) return Error(key, "expected true or false");
    *out = x.as_boolean();
    return absl::OkStatus();
  }
  absl::Status Int(const std::string& key, int64_t lo, int64_t hi,
                   int64_t* out) const {
    if (!Has(key)) return absl::OkStatus();
    const toml::value& x = v_.at(key);
    if (!x.is_integer()) return Error(key, "expected an integer");
    const int64_t n = x.as_integer();
    if (n < lo || n > hi) {
      return Error(key, absl::StrCat("expected ", lo, " to ", hi, ", got ", n));
    }
    *out = n;
    return absl::OkStatus();
  }
  absl::Status Number(const std::string& key, double lo, double hi,
                      double* out) const {
    if (!Has(key)) return absl::OkStatus();
    const toml::value& x = v_.at(key);
    if (!x.is_integer() && !x.is_floating()) {
      return Error(key, "expected a number");
    }
    const double n =
        x.is_integer() ? static_cast<double>(x.as_integer()) : x.as_floating();
    if (!(n >= lo && n <= hi)) {
      return Error(key, absl::StrCat("expected ", lo, " to ", hi, ", got ", n));
    }
    *out = n;
    return absl::OkStatus();
  }
  absl::Status Strings(const std::string& key,
                       std::vector<std::string>* out) const {
    if (!Has(key)) return absl::OkStatus();
    const toml::value& x = v_.at(key);
    if (!x.is_array()) return Error(key, "expected an array of strings");
    for (const toml::value& e : x.as_array()) {
      if (!e.is_string() || e.as_string().str.empty() ||
          e.as_string().str.size() > 256) {
        return Error(key, "expected an array of strings of 1 to 256 bytes");
      }
      out->push_back(e.as_string().str);
    }
    return absl::OkStatus();
  }
  template <typename T>
  absl::Status Ids(const std::string& key, std::vector<T>* out) const {
    if (!Has(key)) return absl::OkStatus();
    const toml::value& x = v_.at(key);
    if (!x.is_array()) return Error(key, "expected an array of integers");
    for (const toml::value& e : x.as_array()) {
      if (!e.is_integer() || e.as_integer() < 0 ||
          e.as_integer() > int64_t{0xfffffffe}) {
        return Error(key, "expected an array of ids from 0 to 4294967294");
      }
      out->push_back(static_cast<T>(e.as_integer()));
    }
    return absl::OkStatus();
  }
  const toml::value& value() const { return v_; }

 private:
  const std::string& file_;
  const std::string name_;
  const toml::value& v_;
};

bool ValidTenantName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' &&
        c != '.') {
      return false;
    }
  }
  return true;
}

absl::Status LoadDaemon(const Table& t, DaemonOptions* o) {
  if (absl::Status s = t.OnlyKeys({"socket",
                                   "socket_mode",
                                   "db",
                                   "db_min_free_mb",
                                   "db_recovery",
                                   "system_db",
                                   "backend",
                                   "device",
                                   "cpu_devices",
                                   "devices",
                                   "device_in_use_ms",
                                   "find_mode",
                                   "background_tune",
                                   "compile_threads",
                                   "tuning_threads",
                                   "listen_plaintext",
                                   "listen_tls",
                                   "tls_cert",
                                   "tls_key",
                                   "tls_client_ca",
                                   "log_rpcs",
                                   "metrics",
                                   "measure_in_worker",
                                   "measure_bound_ms"});
      !s.ok()) {
    return s;
  }
  std::string mode;
  int64_t n = 0;
  for (absl::Status s :
       {t.String("socket", &o->socket_path), t.String("socket_mode", &mode),
        t.String("db", &o->db_dir), t.String("db_recovery", &o->db_recovery),
        t.String("system_db", &o->system_db_dir),
        t.String("backend", &o->backend), t.String("find_mode", &o->find_mode),
        t.Bool("background_tune", &o->core.background_tuning),
        t.String("listen_plaintext", &o->listen_address),
        t.String("listen_tls", &o->tls_address),
        t.String("tls_cert", &o->tls.cert_file),
        t.String("tls_key", &o->tls.key_file),
        t.String("tls_client_ca", &o->tls.client_ca_file),
        t.Bool("log_rpcs", &o->log_rpcs),
        t.Bool("measure_in_worker", &o->measure_in_worker),
        t.String("metrics", &o->metrics_address)}) {
    if (!s.ok()) return s;
  }
  if (t.Has("socket_mode")) {
    unsigned bits = 0;
    const bool octal = !mode.empty() && mode.size() <= 4 &&
                       mode.find_first_not_of("01234567") == std::string::npos;
    if (octal) bits = std::strtoul(mode.c_str(), nullptr, 8);
    if (!octal || (bits & 0600) != 0600 || (bits & 0111) != 0) {
      return t.Error("socket_mode",
                     absl::StrCat("expected an octal mode string such as "
                                  "\"0660\" with owner read and write and no "
                                  "execute bits, got '",
                                  QuotePrefix(mode), "'"));
    }
    o->socket_mode = bits;
  }
  if (t.Has("db_recovery") && o->db_recovery != "continue" &&
      o->db_recovery != "refuse") {
    return t.Error("db_recovery",
                   absl::StrCat("unknown '", QuotePrefix(o->db_recovery),
                                "' (expected continue or refuse)"));
  }
  if (t.Has("backend") && o->backend != "auto" && o->backend != "cpu" &&
      o->backend != "cuda" && o->backend != "hip") {
    return t.Error("backend", absl::StrCat("unknown '", QuotePrefix(o->backend),
                                           "' (expected auto, cpu, cuda or "
                                           "hip)"));
  }
  if (t.Has("find_mode")) {
    absl::StatusOr<v1::FindMode> m =
        ParseFindMode(o->find_mode, t.Name("find_mode"));
    if (!m.ok()) return t.Error("find_mode", std::string(m.status().message()));
  }
  if (absl::Status s = t.Int("db_min_free_mb", 0, int64_t{1} << 30, &n);
      !s.ok()) {
    return s;
  }
  if (t.Has("db_min_free_mb")) o->db_min_free_mb = n;
  if (absl::Status s = t.Int("device", 0, 1024, &n); !s.ok()) return s;
  if (t.Has("device")) o->device_ordinal = static_cast<int>(n);
  if (absl::Status s = t.Int("cpu_devices", 1, 64, &n); !s.ok()) return s;
  if (t.Has("cpu_devices")) o->cpu_devices = static_cast<int>(n);
  if (absl::Status s = t.Ids("devices", &o->devices); !s.ok()) return s;
  if (absl::Status s = t.Int("device_in_use_ms", 0, 86400000, &n); !s.ok()) {
    return s;
  }
  if (t.Has("device_in_use_ms")) {
    o->core.device_in_use_ms = static_cast<double>(n);
  }
  if (absl::Status s = t.Int("compile_threads", 0, 1024, &n); !s.ok()) return s;
  if (t.Has("compile_threads")) o->compile_threads = static_cast<int>(n);
  if (absl::Status s = t.Int("tuning_threads", 0, 1024, &n); !s.ok()) return s;
  if (t.Has("tuning_threads")) o->tuning_threads = static_cast<int>(n);
  if (absl::Status s = t.Int("measure_bound_ms", 100, 3600000, &n); !s.ok()) {
    return s;
  }
  if (t.Has("measure_bound_ms")) {
    o->core.bound_floor_ms = static_cast<double>(n);
  }
  return absl::OkStatus();
}

absl::Status LoadLimits(const Table& t, DaemonOptions* o) {
  if (absl::Status s = t.OnlyKeys(
          {"max_tensor_bytes", "max_execute_bytes", "tenant_executes_in_flight",
           "tenant_execute_bytes_in_flight", "tenant_tunings_in_flight",
           "tenant_tunings_queued", "tenant_benchmark_seconds_per_minute"});
      !s.ok()) {
    return s;
  }
  int64_t n = 0;
  TuningQuotas::Limits& quotas = o->core.quotas;
  if (absl::Status s = t.Int("tenant_tunings_in_flight", 1, 100000, &n);
      !s.ok()) {
    return s;
  }
  if (t.Has("tenant_tunings_in_flight")) {
    quotas.max_in_flight = static_cast<int>(n);
  }
  if (absl::Status s = t.Int("tenant_tunings_queued", 1, 1000000, &n);
      !s.ok()) {
    return s;
  }
  if (t.Has("tenant_tunings_queued")) quotas.max_queued = static_cast<int>(n);
  if (absl::Status s = t.Number("tenant_benchmark_seconds_per_minute", 0, 60,
                                &quotas.max_benchmark_seconds_per_minute);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = t.Int("max_tensor_bytes", 1, int64_t{1} << 50, &n);
      !s.ok()) {
    return s;
  }
  if (t.Has("max_tensor_bytes")) o->service.limits.max_tensor_bytes = n;
  if (absl::Status s =
          t.Int("max_execute_bytes", 1, kMaxGrpcMessageBytes / 2, &n);
      !s.ok()) {
    return s;
  }
  if (t.Has("max_execute_bytes")) o->service.max_execute_bytes = n;
  if (absl::Status s = t.Int("tenant_executes_in_flight", 1, 1024, &n);
      !s.ok()) {
    return s;
  }
  if (t.Has("tenant_executes_in_flight")) {
    o->service.tenant_executes.max_executes = static_cast<int>(n);
  }
  if (absl::Status s =
          t.Int("tenant_execute_bytes_in_flight", 1, int64_t{1} << 40, &n);
      !s.ok()) {
    return s;
  }
  if (t.Has("tenant_execute_bytes_in_flight")) {
    o->service.tenant_executes.max_bytes = n;
  }
  return absl::OkStatus();
}

absl::Status LoadAccess(const Table& t, AccessPolicy* p) {
  if (absl::Status s = t.OnlyKeys({"unlisted_users", "owner_is_admin"});
      !s.ok()) {
    return s;
  }
  std::string unlisted;
  if (absl::Status s = t.String("unlisted_users", &unlisted); !s.ok()) return s;
  if (t.Has("unlisted_users")) {
    if (unlisted != "tenant" && unlisted != "refuse") {
      return t.Error("unlisted_users",
                     absl::StrCat("expected \"tenant\" or \"refuse\", got '",
                                  QuotePrefix(unlisted), "'"));
    }
    p->unlisted_users_are_tenants = unlisted == "tenant";
  }
  return t.Bool("owner_is_admin", &p->owner_is_admin);
}

absl::Status LoadTenant(const Table& t, AccessPolicy* p) {
  if (absl::Status s =
          t.OnlyKeys({"name", "uids", "gids", "cert_names", "admin"});
      !s.ok()) {
    return s;
  }
  Tenant tenant;
  bool admin = false;
  for (absl::Status s :
       {t.String("name", &tenant.name), t.Ids("uids", &tenant.uids),
        t.Ids("gids", &tenant.gids),
        t.Strings("cert_names", &tenant.cert_names), t.Bool("admin", &admin)}) {
    if (!s.ok()) return s;
  }
  if (!ValidTenantName(tenant.name)) {
    return t.Error("name", absl::StrCat("expected 1 to 64 of A-Z a-z 0-9 - _ "
                                        "., got '",
                                        QuotePrefix(tenant.name), "'"));
  }
  for (const Tenant& other : p->tenants) {
    if (other.name == tenant.name) {
      return t.Error("name",
                     absl::StrCat("'", tenant.name, "' names two tenants"));
    }
  }
  if (tenant.uids.empty() && tenant.gids.empty() && tenant.cert_names.empty()) {
    return t.Error("uids", "a tenant needs uids, gids or cert_names");
  }
  tenant.role = admin ? Role::kAdmin : Role::kTenant;
  p->tenants.push_back(std::move(tenant));
  return absl::OkStatus();
}

absl::Status LoadTier(const Table& t, DaemonOptions* o) {
  if (absl::Status s = t.OnlyKeys({"address", "user", "password_file", "fleet",
                                   "node", "deadline_ms", "breaker_failures",
                                   "breaker_open_ms", "lease_ms", "max_wait_ms",
                                   "job_claim_ms", "job_attempts"});
      !s.ok()) {
    return s;
  }
  FindTier::Options& tier = o->tier;
  for (absl::Status s :
       {t.String("address", &tier.address), t.String("user", &tier.user),
        t.String("password_file", &o->tier_password_file),
        t.String("fleet", &tier.fleet), t.String("node", &tier.node)}) {
    if (!s.ok()) return s;
  }
  int64_t n = 0;
  if (absl::Status s = t.Int("deadline_ms", 1, 10000, &n); !s.ok()) return s;
  if (t.Has("deadline_ms")) tier.deadline = absl::Milliseconds(n);
  if (absl::Status s = t.Int("breaker_failures", 1, 1000, &n); !s.ok()) {
    return s;
  }
  if (t.Has("breaker_failures")) tier.breaker_failures = static_cast<int>(n);
  if (absl::Status s = t.Int("breaker_open_ms", 100, 3600000, &n); !s.ok()) {
    return s;
  }
  if (t.Has("breaker_open_ms")) tier.breaker_open = absl::Milliseconds(n);
  if (absl::Status s = t.Int("lease_ms", 100, 3600000, &n); !s.ok()) return s;
  if (t.Has("lease_ms")) tier.lease = absl::Milliseconds(n);
  if (absl::Status s = t.Int("max_wait_ms", 0, 86400000, &n); !s.ok()) {
    return s;
  }
  if (t.Has("max_wait_ms")) tier.max_wait = absl::Milliseconds(n);
  if (absl::Status s = t.Int("job_claim_ms", 100, 86400000, &n); !s.ok()) {
    return s;
  }
  if (t.Has("job_claim_ms")) tier.job_claim = absl::Milliseconds(n);
  if (absl::Status s = t.Int("job_attempts", 1, 100, &n); !s.ok()) return s;
  if (t.Has("job_attempts")) tier.job_attempts = static_cast<int>(n);
  if (absl::Status s = FindTier::Validate(tier); !s.ok()) {
    return t.FileError(s.message());
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LoadConfig(const std::string& path, DaemonOptions* options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("config ", QuotePrefix(path), ": cannot be read"));
  }
  toml::value root;
  try {
    root = toml::parse(in, path);
  } catch (const std::exception& e) {
    // toml11's message names the line and column and shows the line.
    return absl::InvalidArgumentError(absl::StrCat(
        "config ", path, ": ", std::string(e.what()).substr(0, 400)));
  }
  const Table top(path, "", root);
  if (absl::Status s =
          top.OnlyKeys({"daemon", "limits", "access", "tenant", "tier"});
      !s.ok()) {
    return s;
  }
  for (const char* name : {"daemon", "limits", "access", "tier"}) {
    if (top.Has(name) && !root.at(name).is_table()) {
      return top.Error(name, "expected a table ([" + std::string(name) + "])");
    }
  }
  if (top.Has("daemon")) {
    if (absl::Status s =
            LoadDaemon(Table(path, "daemon", root.at("daemon")), options);
        !s.ok()) {
      return s;
    }
  }
  if (top.Has("limits")) {
    if (absl::Status s =
            LoadLimits(Table(path, "limits", root.at("limits")), options);
        !s.ok()) {
      return s;
    }
  }
  if (top.Has("tier")) {
    if (absl::Status s =
            LoadTier(Table(path, "tier", root.at("tier")), options);
        !s.ok()) {
      return s;
    }
  }
  if (top.Has("access")) {
    if (absl::Status s = LoadAccess(Table(path, "access", root.at("access")),
                                    &options->access);
        !s.ok()) {
      return s;
    }
  }
  if (top.Has("tenant")) {
    const toml::value& list = root.at("tenant");
    if (!list.is_array()) {
      return top.Error("tenant", "expected tables ([[tenant]])");
    }
    for (size_t i = 0; i < list.as_array().size(); ++i) {
      const toml::value& t = list.as_array()[i];
      const std::string name = absl::StrCat("tenant[", i, "]");
      if (!t.is_table()) return top.Error(name, "expected a table");
      if (absl::Status s = LoadTenant(Table(path, name, t), &options->access);
          !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ApplyEnvironment(DaemonOptions* options) {
  auto get = [](const char* name) -> const char* {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? v : nullptr;
  };
  if (const char* v = get("CONVTUNE_SOCKET")) options->socket_path = v;
  if (const char* v = get("CONVTUNE_FIND_MODE")) {
    absl::StatusOr<v1::FindMode> m = ParseFindMode(v, "CONVTUNE_FIND_MODE");
    if (!m.ok()) return m.status();
    options->find_mode = v;
  }
  if (const char* v = get("CONVTUNE_COMPILE_PARALLEL_LEVEL")) {
    int n = 0;
    if (!absl::SimpleAtoi(v, &n) || n < 1 || n > 1024) {
      return absl::InvalidArgumentError(
          absl::StrCat("CONVTUNE_COMPILE_PARALLEL_LEVEL: expected 1 to 1024, "
                       "got '",
                       QuotePrefix(v), "'"));
    }
    options->compile_threads = n;
  }
  return absl::OkStatus();
}

}  // namespace convtune
