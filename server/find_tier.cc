#include "server/find_tier.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/gpu/sha256.h"
#include "storage/records.h"

namespace convtune {
namespace {

constexpr size_t kQuoted = 40;

// Compare-and-renew and compare-and-delete: only the holder's token acts.
constexpr char kRenew[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";
constexpr char kRelease[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('del', KEYS[1]) else return 0 end";

int64_t UnixMsNow() { return absl::ToUnixMillis(absl::Now()); }

std::string Hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') {
    return "unknown";
  }
  return name;
}

std::string RandomToken() {
  absl::BitGen gen;
  return absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(gen),
                         absl::Uniform<uint64_t>(gen));
}

FindTier::Options WithNode(FindTier::Options o) {
  if (o.node.empty()) o.node = Hostname();
  return o;
}

bool IsName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

absl::Status ReplyError(const storage::RedisReply& r) {
  const std::string msg = absl::StrCat("redis: ", r.str.substr(0, 120));
  if (r.str.rfind("NOPERM", 0) == 0 || r.str.rfind("NOAUTH", 0) == 0 ||
      r.str.rfind("WRONGPASS", 0) == 0) {
    return absl::PermissionDeniedError(msg);
  }
  return absl::FailedPreconditionError(msg);
}

}  // namespace

absl::Status FindTier::Validate(const Options& o) {
  if (o.address.empty()) return absl::OkStatus();
  absl::StatusOr<storage::RedisEndpoint> e =
      storage::ParseRedisAddress(o.address);
  if (!e.ok()) return e.status();
  if (!IsName(o.fleet)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tier.fleet: expected 1 to 64 letters, digits, '.', '_' or '-', got "
        "\"",
        o.fleet.substr(0, kQuoted), "\""));
  }
  if (!o.node.empty() && !IsName(o.node)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tier.node: expected 1 to 64 letters, digits, '.', '_' or '-', got \"",
        o.node.substr(0, kQuoted), "\""));
  }
  if (o.deadline <= absl::ZeroDuration() || o.deadline > absl::Seconds(10)) {
    return absl::InvalidArgumentError(
        "tier.deadline_ms: expected 1 to 10000 milliseconds");
  }
  if (o.breaker_failures < 1) {
    return absl::InvalidArgumentError(
        "tier.breaker_failures: expected at least 1");
  }
  if (o.lease < absl::Milliseconds(100)) {
    return absl::InvalidArgumentError(
        "tier.lease_ms: expected at least 100 milliseconds");
  }
  if (o.max_wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("tier.max_wait_ms: negative");
  }
  if (o.job_claim < absl::Milliseconds(100)) {
    return absl::InvalidArgumentError(
        "tier.job_claim_ms: expected at least 100 milliseconds");
  }
  if (o.job_attempts < 1) {
    return absl::InvalidArgumentError("tier.job_attempts: expected at least 1");
  }
  if (o.breaker_open < absl::Milliseconds(100)) {
    return absl::InvalidArgumentError(
        "tier.breaker_open_ms: expected at least 100 milliseconds");
  }
  return absl::OkStatus();
}

FindTier::FindTier(Options options, const std::string& scope_key,
                   std::string version, LocalRecords local, Counters& counters)
    : options_(WithNode(std::move(options))),
      prefix_(absl::StrCat("convtune:v1:", options_.fleet, ":",
                           Sha256Hex(scope_key).substr(0, 24))),
      version_(std::move(version)),
      local_(std::move(local)),
      counters_(counters),
      token_(absl::StrCat(options_.node, ":", RandomToken())) {
  connect_.endpoint = *storage::ParseRedisAddress(options_.address);
  connect_.user = options_.user;
  connect_.password = options_.password;
  connect_.deadline = options_.deadline;
  thread_ = std::thread([this] { Loop(); });
  lease_thread_ = std::thread([this] { LeaseLoop(); });
}

FindTier::~FindTier() {
  Shutdown();
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
  lease_thread_.join();
  if (job_thread_.joinable()) job_thread_.join();
}

void FindTier::Shutdown() {
  std::vector<Wait> waits;
  {
    absl::MutexLock lock(&mu_);
    waits_closed_ = true;
    waits.swap(waits_);
  }
  for (Wait& w : waits) w.done(true);
  // The lease thread may hold waits it took before: it fires them too, and
  // returns before the pools their callbacks use go away.
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](bool* busy) { return !*busy; }, &lease_busy_));
  }
  // No more jobs: the one running stays pending, for another daemon (or
  // this one, restarted) to take over.
  if (job_thread_.joinable()) job_thread_.join();
}

std::string FindTier::RecordKey(int64_t generation,
                                const std::string& problem_key) const {
  return absl::StrCat(prefix_, ":g", generation,
                      ":find:", Sha256Hex(problem_key));
}

bool FindTier::MayCall() {
  absl::MutexLock lock(&mu_);
  return absl::Now() >= open_until_;
}

void FindTier::Succeeded() {
  absl::MutexLock lock(&mu_);
  if (failures_ >= options_.breaker_failures) {
    std::cerr << "convtuned: tier " << connect_.endpoint.ToString()
              << " answers again" << std::endl;
  }
  failures_ = 0;
  last_error_.clear();
}

void FindTier::Failed(const absl::Status& why) {
  counters_.Add(&EngineCounters::tier_errors);
  absl::MutexLock lock(&mu_);
  last_error_ = std::string(why.message());
  // The server answered (a refused command, out of memory, read-only):
  // other commands, lookups among them, may still work.
  if (!absl::IsUnavailable(why)) return;
  if (++failures_ == options_.breaker_failures) {
    std::cerr << "convtuned: tier " << connect_.endpoint.ToString()
              << " is not answering (" << last_error_
              << "); finds go on without it" << std::endl;
  }
  if (failures_ >= options_.breaker_failures) {
    open_until_ = absl::Now() + options_.breaker_open;
  }
}

absl::StatusOr<storage::RedisReply> FindTier::Call(
    std::unique_ptr<storage::RedisConnection>* conn,
    const std::vector<std::string>& argv) {
  if (*conn == nullptr || (*conn)->broken()) {
    conn->reset();
    absl::StatusOr<std::unique_ptr<storage::RedisConnection>> made =
        storage::RedisConnection::Connect(connect_);
    if (!made.ok()) return made.status();
    *conn = *std::move(made);
  }
  absl::StatusOr<storage::RedisReply> r = (*conn)->Command(argv);
  if (r.ok() && r->is_error()) return ReplyError(*r);
  return r;
}

absl::StatusOr<v1::FindRecord> FindTier::Get(const std::string& problem_key) {
  if (!MayCall()) {
    counters_.Add(&EngineCounters::tier_skipped);
    return absl::UnavailableError("tier: circuit breaker open");
  }
  int64_t generation;
  {
    absl::MutexLock lock(&mu_);
    generation = generation_;
  }
  if (generation < 0) {
    counters_.Add(&EngineCounters::tier_skipped);
    return absl::UnavailableError("tier: generation not read yet");
  }
  absl::StatusOr<storage::RedisReply> r;
  {
    absl::MutexLock lock(&lookup_mu_);
    // The breaker may have opened while this lookup waited its turn.
    if (!MayCall()) {
      counters_.Add(&EngineCounters::tier_skipped);
      return absl::UnavailableError("tier: circuit breaker open");
    }
    r = Call(&lookup_conn_, {"GET", RecordKey(generation, problem_key)});
  }
  if (!r.ok()) {
    Failed(r.status());
    return absl::UnavailableError(r.status().message());
  }
  Succeeded();
  if (r->type == storage::RedisReply::Type::kNil) {
    counters_.Add(&EngineCounters::tier_misses);
    return absl::NotFoundError(problem_key);
  }
  v1::FindRecord record;
  if (r->type != storage::RedisReply::Type::kString ||
      !record.ParseFromString(r->str)) {
    return absl::InvalidArgumentError("tier record does not decode");
  }
  return record;
}

v1::FindRecord FindTier::Stamped(const v1::FindRecord& record) const {
  v1::FindRecord out = record;
  out.set_schema_version(storage::kSchemaVersion);
  v1::RecordOrigin* origin = out.mutable_origin();
  if (origin->via() == "tier" && !origin->node().empty()) {
    origin->clear_via();  // someone else's measurement, as it was published
    return out;
  }
  origin->clear_via();
  origin->set_node(options_.node);
  origin->set_daemon_version(version_);
  origin->set_published_unix_ms(UnixMsNow());
  return out;
}

void FindTier::Publish(const v1::FindRecord& record, const std::string& lease) {
  Job job{Stamped(record), true, lease};
  absl::MutexLock lock(&mu_);
  if (static_cast<int>(queue_.size()) >= std::max(1, options_.max_queued)) {
    queue_.pop_front();  // a lease it would release expires instead
    counters_.Add(&EngineCounters::tier_dropped);
  }
  queue_.push_back(std::move(job));
}

std::string FindTier::LeaseName(const std::string& problem_key,
                                int64_t workspace_limit) {
  return workspace_limit < 0
             ? problem_key
             : absl::StrCat(problem_key, "|ws=", workspace_limit);
}

std::string FindTier::LeaseKey(int64_t generation,
                               const std::string& lease) const {
  return absl::StrCat(prefix_, ":g", generation, ":lease:", Sha256Hex(lease));
}

FindTier::LeaseState FindTier::Acquire(const std::string& lease) {
  int64_t generation;
  {
    absl::MutexLock lock(&mu_);
    generation = generation_;
  }
  if (generation < 0 || !MayCall()) return LeaseState::kUnavailable;
  absl::StatusOr<storage::RedisReply> r;
  {
    absl::MutexLock lock(&lookup_mu_);
    r = Call(&lookup_conn_, {"SET", LeaseKey(generation, lease), token_, "PX",
                             absl::StrCat(std::max<int64_t>(
                                 1, absl::ToInt64Milliseconds(options_.lease))),
                             "NX"});
  }
  if (!r.ok()) {
    Failed(r.status());
    return LeaseState::kUnavailable;
  }
  Succeeded();
  if (r->type == storage::RedisReply::Type::kNil) return LeaseState::kHeld;
  absl::MutexLock lock(&mu_);
  held_[lease] = generation;
  return LeaseState::kAcquired;
}

void FindTier::Release(const std::string& lease) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(Job{{}, false, lease});
}

void FindTier::AwaitFree(const std::string& lease, absl::Time deadline,
                         std::function<bool()> gone,
                         std::function<void(bool)> done) {
  {
    absl::MutexLock lock(&mu_);
    if (!waits_closed_ && generation_ >= 0) {
      waits_.push_back(
          Wait{lease, generation_, deadline, std::move(gone), std::move(done)});
      return;
    }
  }
  done(true);
}

void FindTier::LeaseLoop() {
  std::unique_ptr<storage::RedisConnection> conn;
  const absl::Duration renew_every = options_.lease / 3;
  absl::Time next_renew = absl::Now() + renew_every;
  while (true) {
    std::vector<std::pair<std::string, int64_t>> held;
    std::vector<Wait> waits;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(50));
      if (stopping_) return;
      if (absl::Now() >= next_renew) held.assign(held_.begin(), held_.end());
      waits.swap(waits_);
      lease_busy_ = true;
    }
    if (!held.empty()) {
      next_renew = absl::Now() + renew_every;
      for (const auto& [lease, generation] : held) {
        absl::StatusOr<storage::RedisReply> r = Call(
            &conn, {"EVAL", kRenew, "1", LeaseKey(generation, lease), token_,
                    absl::StrCat(absl::ToInt64Milliseconds(options_.lease))});
        if (!r.ok()) {
          Failed(r.status());
          break;
        }
        if (r->type == storage::RedisReply::Type::kInteger && r->integer == 0) {
          // Lost (it expired and another daemon took it): the record that
          // is published first stays.
          absl::MutexLock lock(&mu_);
          held_.erase(lease);
        }
      }
    }
    std::vector<Wait> still, fired;
    const absl::Time now = absl::Now();
    for (Wait& w : waits) {
      if (now >= w.deadline) {
        w.done(false);
        continue;
      }
      if (w.gone && w.gone()) {  // nobody waits for it any more
        fired.push_back(std::move(w));
        continue;
      }
      absl::StatusOr<storage::RedisReply> r =
          Call(&conn, {"EXISTS", LeaseKey(w.generation, w.lease)});
      if (!r.ok() || r->integer == 0) {
        if (!r.ok()) Failed(r.status());
        fired.push_back(std::move(w));
      } else {
        still.push_back(std::move(w));
      }
    }
    for (Wait& w : fired) w.done(true);
    bool closed;
    {
      absl::MutexLock lock(&mu_);
      closed = waits_closed_;
      if (!closed) {
        for (Wait& w : still) waits_.push_back(std::move(w));
      }
    }
    if (closed) {
      for (Wait& w : still) w.done(true);
    }
    absl::MutexLock lock(&mu_);
    lease_busy_ = false;
  }
}

bool FindTier::Write(std::unique_ptr<storage::RedisConnection>* conn,
                     const v1::FindRecord& record, int64_t generation) {
  absl::StatusOr<storage::RedisReply> r =
      Call(conn, {"SET", RecordKey(generation, record.problem_key()),
                  record.SerializeAsString(), "NX"});
  if (!r.ok()) {
    Failed(r.status());
    return false;
  }
  Succeeded();
  if (r->type == storage::RedisReply::Type::kStatus) {
    counters_.Add(&EngineCounters::tier_published);
  }
  return true;
}

void FindTier::ReleaseNow(std::unique_ptr<storage::RedisConnection>* conn,
                          const std::string& lease) {
  int64_t generation;
  {
    absl::MutexLock lock(&mu_);
    auto it = held_.find(lease);
    if (it == held_.end()) return;  // lost, or never held
    generation = it->second;
    held_.erase(it);
  }
  absl::StatusOr<storage::RedisReply> r =
      Call(conn, {"EVAL", kRelease, "1", LeaseKey(generation, lease), token_});
  if (!r.ok()) Failed(r.status());  // it expires instead
}

void FindTier::Poll(std::unique_ptr<storage::RedisConnection>* conn) {
  absl::StatusOr<storage::RedisReply> g =
      Call(conn, {"GET", absl::StrCat(prefix_, ":generation")});
  if (!g.ok()) {
    Failed(g.status());
    return;
  }
  int64_t generation = 0;
  if (g->type == storage::RedisReply::Type::kString &&
      (!absl::SimpleAtoi(g->str, &generation) || generation < 0)) {
    Failed(absl::FailedPreconditionError(
        absl::StrCat(prefix_, ":generation is not a count: \"",
                     g->str.substr(0, kQuoted), "\"")));
    return;
  }
  int64_t highest;
  {
    absl::MutexLock lock(&mu_);
    highest = highest_generation_;
  }
  if (generation < highest) {
    // The tier lost its data (or the key): records of disowned generations
    // must stay disowned.
    absl::StatusOr<storage::RedisReply> set = Call(
        conn,
        {"SET", absl::StrCat(prefix_, ":generation"), absl::StrCat(highest)});
    if (!set.ok()) {
      Failed(set.status());
      return;
    }
    generation = highest;
  }
  {
    absl::MutexLock lock(&mu_);
    if (generation_ >= 0 && generation != generation_) {
      std::cerr << "convtuned: tier generation " << generation_ << " -> "
                << generation << ": earlier records disowned" << std::endl;
    }
    generation_ = generation;
    highest_generation_ = generation;
  }
  const std::string epoch_key =
      absl::StrCat(prefix_, ":g", generation, ":epoch");
  absl::StatusOr<storage::RedisReply> set =
      Call(conn, {"SET", epoch_key, RandomToken(), "NX"});
  absl::StatusOr<storage::RedisReply> epoch =
      set.ok() ? Call(conn, {"GET", epoch_key}) : set;
  if (!epoch.ok()) {
    Failed(epoch.status());
    return;
  }
  Succeeded();
  {
    absl::MutexLock lock(&mu_);
    if (epoch->str == epoch_) return;
  }
  // A tier this daemon has not published to (new, restarted empty, flushed,
  // or a new generation): its own records go again.
  bool ok = true;
  int64_t sent = 0;
  local_([&](const v1::FindRecord& record) {
    if (!ok || record.origin().generation() != generation) return;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) {
        ok = false;
        return;
      }
    }
    ok = Write(conn, Stamped(record), generation);
    if (ok) ++sent;
  });
  counters_.Add(&EngineCounters::tier_republished, sent);
  if (ok) {
    absl::MutexLock lock(&mu_);
    epoch_ = epoch->str;
  }
}

void FindTier::Loop() {
  std::unique_ptr<storage::RedisConnection> conn;
  absl::Time next_poll = absl::InfinitePast();
  // After a batch the tier refused: not before this.
  absl::Time retry_at = absl::InfinitePast();
  while (true) {
    std::deque<Job> batch;
    int64_t generation;
    {
      absl::MutexLock lock(&mu_);
      const bool can_write = generation_ >= 0 && absl::Now() >= open_until_ &&
                             absl::Now() >= retry_at;
      const absl::Time wake =
          can_write ? next_poll
                    : std::max(next_poll, std::max(open_until_, retry_at));
      if (can_write) {
        mu_.AwaitWithDeadline(
            absl::Condition(
                +[](FindTier* t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(t->mu_) {
                  return t->stopping_ || !t->queue_.empty();
                },
                this),
            wake);
      } else {
        mu_.AwaitWithDeadline(absl::Condition(&stopping_), wake);
      }
      if (stopping_) return;
      generation = generation_;
      if (generation >= 0 && absl::Now() >= open_until_ &&
          absl::Now() >= retry_at) {
        while (!queue_.empty() && batch.size() < 256) {
          batch.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
      }
    }
    if (absl::Now() >= next_poll) {
      Poll(&conn);
      next_poll = absl::Now() + options_.poll;
    }
    while (!batch.empty()) {
      Job& job = batch.front();
      // Measured before the generation changed: disowned with the rest.
      if (job.has_record && job.record.origin().generation() == generation &&
          !Write(&conn, job.record, generation)) {
        break;
      }
      if (!job.release.empty()) ReleaseNow(&conn, job.release);
      batch.pop_front();
    }
    if (!batch.empty()) {
      // Back to the front, in order, for when the tier answers again (or
      // takes writes again: a refusal opens no breaker, so wait a second).
      retry_at = absl::Now() + absl::Seconds(1);
      absl::MutexLock lock(&mu_);
      while (!batch.empty()) {
        queue_.push_front(std::move(batch.back()));
        batch.pop_back();
      }
      while (static_cast<int>(queue_.size()) >
             std::max(1, options_.max_queued)) {
        queue_.pop_front();
        counters_.Add(&EngineCounters::tier_dropped);
      }
    }
  }
}

namespace {

constexpr char kGroup[] = "convtune";

// A stream entry's fields ([field, value, ...]) as a map.
absl::flat_hash_map<std::string, std::string> Fields(
    const storage::RedisReply& r) {
  absl::flat_hash_map<std::string, std::string> out;
  for (size_t i = 0; i + 1 < r.elements.size(); i += 2) {
    out[r.elements[i].str] = r.elements[i + 1].str;
  }
  return out;
}

// XINFO's [name, value, ...] replies: the integer or string of `name`.
const storage::RedisReply* Field(const storage::RedisReply& r,
                                 absl::string_view name) {
  for (size_t i = 0; i + 1 < r.elements.size(); i += 2) {
    if (r.elements[i].str == name) return &r.elements[i + 1];
  }
  return nullptr;
}

}  // namespace

std::string FindTier::JobsKey(int64_t generation) const {
  return absl::StrCat(prefix_, ":g", generation, ":jobs");
}

absl::StatusOr<int> FindTier::AddJobs(
    const std::vector<std::string>& problem_keys, int64_t workspace_limit) {
  int64_t generation;
  {
    absl::MutexLock lock(&mu_);
    generation = generation_;
  }
  if (generation < 0 || !MayCall()) {
    return absl::UnavailableError(
        absl::StrCat("the cluster tier does not answer now: ", Describe()));
  }
  int added = 0;
  absl::MutexLock lock(&admin_mu_);
  for (const std::string& key : problem_keys) {
    absl::StatusOr<storage::RedisReply> r = Call(
        &admin_conn_, {"XADD", JobsKey(generation), "*", "problem", key, "ws",
                       absl::StrCat(workspace_limit), "attempts", "0"});
    if (!r.ok()) {
      Failed(r.status());
      return absl::UnavailableError(
          absl::StrCat("the cluster tier took ", added, " of ",
                       problem_keys.size(), " jobs: ", r.status().message()));
    }
    ++added;
  }
  Succeeded();
  return added;
}

void FindTier::StartJobs(JobRunner run) {
  {
    absl::MutexLock lock(&mu_);
    run_job_ = std::move(run);
  }
  job_thread_ = std::thread([this] { JobLoop(); });
}

void FindTier::JobLoop() {
  std::unique_ptr<storage::RedisConnection> conn;
  int64_t group_generation = -1;  // the generation whose group exists
  std::string running_id;         // this daemon's job, while it runs
  int64_t running_generation = 0;
  absl::Time next_touch = absl::InfinitePast();
  while (true) {
    std::vector<StreamJob> finished;
    int64_t generation;
    bool running;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_),
                           absl::Milliseconds(100));
      if (stopping_ || waits_closed_) return;
      generation = generation_;
      running = job_running_;
      // Finished jobs wait here while the tier cannot be asked.
      if (generation < 0 || absl::Now() < open_until_) continue;
      finished.swap(jobs_finished_);
    }
    for (StreamJob& job : finished) {
      const std::string key = JobsKey(job.generation);
      if (job.id == running_id) running_id.clear();
      // Cut short (this daemon stopping): left pending, to be taken over.
      if (absl::IsUnavailable(job.result) || absl::IsCancelled(job.result)) {
        continue;
      }
      if (!job.result.ok()) {
        const bool dead = job.attempts + 1 >= options_.job_attempts;
        absl::StatusOr<storage::RedisReply> again =
            dead ? Call(&conn,
                        {"XADD", key + ":dead", "*", "problem", job.problem_key,
                         "ws", absl::StrCat(job.workspace_limit), "attempts",
                         absl::StrCat(job.attempts + 1), "error",
                         std::string(job.result.message().substr(0, 200))})
                 : Call(&conn, {"XADD", key, "*", "problem", job.problem_key,
                                "ws", absl::StrCat(job.workspace_limit),
                                "attempts", absl::StrCat(job.attempts + 1)});
        if (!again.ok()) {
          Failed(again.status());  // not acknowledged: another daemon retries
          continue;
        }
        counters_.Add(dead ? &EngineCounters::tier_jobs_dead
                           : &EngineCounters::tier_jobs_failed);
      } else {
        counters_.Add(&EngineCounters::tier_jobs_done);
      }
      absl::StatusOr<storage::RedisReply> ack =
          Call(&conn, {"XACK", key, kGroup, job.id});
      if (!ack.ok()) Failed(ack.status());
    }
    if (running) {
      // Still at it: keep its idle time short, so that nobody takes it over.
      if (!running_id.empty() && absl::Now() >= next_touch) {
        absl::StatusOr<storage::RedisReply> r =
            Call(&conn, {"XCLAIM", JobsKey(running_generation), kGroup,
                         options_.node, "0", running_id, "JUSTID"});
        if (!r.ok()) Failed(r.status());
        next_touch = absl::Now() + options_.job_claim / 3;
      }
      continue;
    }
    const std::string key = JobsKey(generation);
    if (group_generation != generation) {
      absl::StatusOr<storage::RedisReply> made =
          Call(&conn, {"XGROUP", "CREATE", key, kGroup, "0", "MKSTREAM"});
      if (!made.ok() && made.status().message().find("BUSYGROUP") ==
                            absl::string_view::npos) {
        Failed(made.status());
        continue;
      }
      group_generation = generation;
    }
    // A stream call that failed: the tier lost its data (restarted empty,
    // flushed), so the group, gone with the stream, is made again; or the
    // tier failed.
    auto failed = [&](const absl::Status& why) {
      if (why.message().find("NOGROUP") != absl::string_view::npos) {
        group_generation = -1;
      } else {
        Failed(why);
      }
    };
    // A job another daemon left (it died), else a new one.
    const storage::RedisReply* entry = nullptr;
    bool claimed = false;
    absl::StatusOr<storage::RedisReply> got = Call(
        &conn, {"XAUTOCLAIM", key, kGroup, options_.node,
                absl::StrCat(absl::ToInt64Milliseconds(options_.job_claim)),
                "0-0", "COUNT", "1"});
    if (!got.ok()) {
      failed(got.status());
      continue;
    }
    if (got->elements.size() >= 2 && !got->elements[1].elements.empty()) {
      entry = &got->elements[1].elements[0];
      claimed = true;
    } else {
      got = Call(&conn, {"XREADGROUP", "GROUP", kGroup, options_.node, "COUNT",
                         "1", "STREAMS", key, ">"});
      if (!got.ok()) {
        failed(got.status());
        continue;
      }
      if (got->type == storage::RedisReply::Type::kArray &&
          !got->elements.empty() && got->elements[0].elements.size() >= 2 &&
          !got->elements[0].elements[1].elements.empty()) {
        entry = &got->elements[0].elements[1].elements[0];
      }
    }
    Succeeded();
    if (entry == nullptr || entry->elements.size() < 2) continue;
    if (claimed) counters_.Add(&EngineCounters::tier_jobs_claimed);
    StreamJob job;
    job.id = entry->elements[0].str;
    job.generation = generation;
    auto fields = Fields(entry->elements[1]);
    job.problem_key = fields["problem"];
    if (!absl::SimpleAtoi(fields["ws"], &job.workspace_limit)) {
      job.workspace_limit = -1;
    }
    if (!absl::SimpleAtoi(fields["attempts"], &job.attempts)) job.attempts = 0;
    job.attempts = std::clamp(job.attempts, 0, options_.job_attempts);
    running_id = job.id;
    running_generation = generation;
    next_touch = absl::Now() + options_.job_claim / 3;
    JobRunner run;
    {
      absl::MutexLock lock(&mu_);
      job_running_ = true;
      run = run_job_;
    }
    run(job.problem_key, job.workspace_limit,
        [this, job](absl::Status result) mutable {
          job.result = std::move(result);
          absl::MutexLock lock(&mu_);
          job_running_ = false;
          jobs_finished_.push_back(std::move(job));
        });
  }
}

v1::ClusterJobs FindTier::Jobs() {
  v1::ClusterJobs out;
  int64_t generation;
  {
    absl::MutexLock lock(&mu_);
    generation = generation_;
  }
  if (generation < 0 || !MayCall()) {
    out.set_error(absl::StrCat("the cluster tier does not answer now"));
    return out;
  }
  const std::string key = JobsKey(generation);
  absl::MutexLock lock(&admin_mu_);
  absl::StatusOr<storage::RedisReply> groups =
      Call(&admin_conn_, {"XINFO", "GROUPS", key});
  if (!groups.ok()) {
    // No stream yet: nothing was ever queued.
    if (groups.status().message().find("no such key") ==
        absl::string_view::npos) {
      out.set_error(std::string(groups.status().message()));
    }
    return out;
  }
  for (const storage::RedisReply& g : groups->elements) {
    const storage::RedisReply* name = Field(g, "name");
    if (name == nullptr || name->str != kGroup) continue;
    const storage::RedisReply* pending = Field(g, "pending");
    const storage::RedisReply* read = Field(g, "entries-read");
    const storage::RedisReply* lag = Field(g, "lag");
    const int64_t running = pending != nullptr ? pending->integer : 0;
    out.set_running(running);
    if (read != nullptr)
      out.set_done(std::max<int64_t>(0, read->integer - running));
    if (lag != nullptr && lag->type == storage::RedisReply::Type::kInteger) {
      out.set_waiting(lag->integer);
    }
  }
  absl::StatusOr<storage::RedisReply> consumers =
      Call(&admin_conn_, {"XINFO", "CONSUMERS", key, kGroup});
  if (consumers.ok()) {
    for (const storage::RedisReply& c : consumers->elements) {
      v1::ClusterJobs::Node* n = out.add_nodes();
      if (const auto* f = Field(c, "name")) n->set_node(f->str);
      if (const auto* f = Field(c, "pending")) n->set_running(f->integer);
      if (const auto* f = Field(c, "idle")) n->set_idle_ms(f->integer);
    }
  }
  absl::StatusOr<storage::RedisReply> dead =
      Call(&admin_conn_, {"XLEN", key + ":dead"});
  if (dead.ok()) out.set_dead(dead->integer);
  return out;
}

int64_t FindTier::generation() {
  absl::MutexLock lock(&mu_);
  return generation_;
}

std::string FindTier::Describe() {
  absl::MutexLock lock(&mu_);
  std::string state;
  if (absl::Now() < open_until_) {
    state = absl::StrCat("not answering (", last_error_, ")");
  } else if (failures_ > 0) {
    state = absl::StrCat("failing (", last_error_, ")");
  } else if (generation_ < 0) {
    state = "not reached yet";
  } else {
    state = "answering";
  }
  return absl::StrCat("redis ", connect_.endpoint.ToString(), " as ",
                      options_.user, ", fleet ", options_.fleet, ", node ",
                      options_.node, ", keys ", prefix_, ":*, generation ",
                      std::max<int64_t>(generation_, 0), ", ", queue_.size(),
                      " queued: ", state);
}

}  // namespace convtune
