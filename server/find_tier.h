// The cluster tier: find records shared through Redis by the daemons of one
// fleet and device (storage/FORMAT.md names the keys). A find that misses the
// local FindDbs asks the tier before it tunes (Tuner); a record the daemon
// tuned is published to it. Only daemons hold the tier's credentials; what
// comes back is validated by the caller before use (Tuner::FromTier).
//
// The tier is never on the path of an error: a lookup has a short deadline
// and sits behind a circuit breaker, so a tier that is down, slow or
// refusing costs a miss, and publishing is queued and done by one
// background thread. When the tier comes back empty, each daemon publishes
// its own records again. Thread-safe.
#ifndef CONVTUNE_SERVER_FIND_TIER_H_
#define CONVTUNE_SERVER_FIND_TIER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "convtune/v1/records.pb.h"
#include "convtune/v1/service.pb.h"
#include "server/counters.h"
#include "storage/redis.h"

namespace convtune {

class FindTier {
 public:
  struct Options {
    // "host:port", "redis://host:port" or "unix:/path". Empty: no tier.
    std::string address;
    // The ACL user daemons write as, and its password (from a file).
    std::string user = "convtune-daemon";
    std::string password;
    // Daemons of one fleet share records: letters, digits, '.', '_', '-'.
    std::string fleet = "default";
    // This daemon's name in the records it publishes. Default: hostname.
    std::string node;
    // Each lookup and write, connecting included.
    absl::Duration deadline = absl::Milliseconds(25);
    // Failures in a row that open the breaker, and how long it stays open
    // (lookups are misses then, without asking).
    int breaker_failures = 3;
    absl::Duration breaker_open = absl::Seconds(5);
    // How often the background thread reads the generation and checks that
    // the tier still has its data.
    absl::Duration poll = absl::Seconds(2);
    // Records waiting to be published; beyond it the oldest are dropped
    // (they stay local, and go again when the tier's epoch changes).
    int max_queued = 10000;
    // Demand tuning: a daemon that tunes a problem the tier lacks holds a
    // lease on it for this long, renewed while it tunes; the others wait
    // for its record, up to max_wait, then tune themselves.
    absl::Duration lease = absl::Seconds(10);
    absl::Duration max_wait = absl::Seconds(120);
    // Prefill jobs: a job its daemon has not touched for this long (the
    // daemon died) is taken over by another; a job that failed this many
    // times goes to the dead-letter stream.
    absl::Duration job_claim = absl::Minutes(2);
    int job_attempts = 3;
  };

  // InvalidArgument naming the bad field.
  static absl::Status Validate(const Options& options);

  // Calls `each` with every record of this device's local FindDb: what is
  // published again when the tier has lost its data.
  using LocalRecords = std::function<void(
      const std::function<void(const v1::FindRecord&)>& each)>;

  // `scope_key` is the tier's device key (DeviceInfo::Key() and the vendor
  // BLAS version); `version` is the daemon's. Starts the background thread,
  // which connects: the tier being down at start is not an error.
  // REQUIRES: Validate(options) is OK.
  FindTier(Options options, const std::string& scope_key, std::string version,
           LocalRecords local, Counters& counters);
  // Stops the background thread; what is still queued is not published.
  ~FindTier();
  FindTier(const FindTier&) = delete;
  FindTier& operator=(const FindTier&) = delete;

  // The tier's record stored under `problem_key` (limited keys included),
  // as it is there: NotFound when absent; Unavailable when the tier could
  // not be asked (down, slow, breaker open, generation not known yet).
  absl::StatusOr<v1::FindRecord> Get(const std::string& problem_key);

  // Queues `record` (measured here, or read from the tier) to be written
  // unless the tier has one under its key, then `lease` (if not empty) to
  // be released. Never blocks.
  void Publish(const v1::FindRecord& record, const std::string& lease = "");

  // Leases on tuning a problem, named by the problem key and workspace
  // limit of the request (LeaseName).
  static std::string LeaseName(const std::string& problem_key,
                               int64_t workspace_limit);
  enum class LeaseState {
    kAcquired,     // this daemon holds it now, renewed until released
    kHeld,         // another daemon holds it
    kUnavailable,  // the tier could not be asked
  };
  LeaseState Acquire(const std::string& lease);
  // Queued behind what is being published, like Publish's.
  void Release(const std::string& lease);
  // Calls `done` (on the tier's lease thread: it must only queue work) once
  // `lease` is free (released with its record published, or expired), or
  // the tier cannot be asked (true), or at `deadline` (false).
  // `gone` (may be empty) says when nobody waits any more: `done` then
  // fires early.
  void AwaitFree(const std::string& lease, absl::Time deadline,
                 std::function<bool()> gone,
                 std::function<void(bool free)> done);

  // Fires every wait (as if its lease were free) and takes no more, and
  // stops taking jobs: for a daemon shutting down, whose runs must end.
  void Shutdown();

  // The job stream: prefill lists shared by the fleet's daemons (a Redis
  // Stream with one consumer group; each daemon a consumer taking one job
  // at a time). Adds a job per problem key: the number added; Unavailable
  // when the tier cannot be asked.
  absl::StatusOr<int> AddJobs(const std::vector<std::string>& problem_keys,
                              int64_t workspace_limit);
  // What this daemon does with a job: calls `done` once the problem's record
  // is stored (OK), or with why it failed. Called on the job thread: it must
  // only queue work.
  using JobRunner = std::function<void(const std::string& problem_key,
                                       int64_t workspace_limit,
                                       std::function<void(absl::Status)> done)>;
  // Starts taking jobs. Call once.
  void StartJobs(JobRunner run);
  // The stream's state: jobs waiting, running (per daemon), done, dead.
  v1::ClusterJobs Jobs();

  // One line for status: where the tier is, its generation, and whether it
  // answers.
  std::string Describe();
  // The tier's generation as last read; -1 before it has been read.
  int64_t generation();

  // The key of `problem_key`'s record in generation `generation` (tests).
  std::string RecordKey(int64_t generation,
                        const std::string& problem_key) const;
  const std::string& prefix() const { return prefix_; }
  const Options& options() const { return options_; }

 private:
  // Breaker: whether a call may go out now; the call's outcome.
  bool MayCall();
  void Succeeded();
  void Failed(const absl::Status& why);

  // Runs `argv` on *conn, connecting first when needed.
  absl::StatusOr<storage::RedisReply> Call(
      std::unique_ptr<storage::RedisConnection>* conn,
      const std::vector<std::string>& argv);

  void Loop();
  // Takes jobs, acknowledges them, retries or buries the failed.
  void JobLoop();
  std::string JobsKey(int64_t generation) const;
  // Renews the leases held, and watches the awaited ones.
  void LeaseLoop();
  std::string LeaseKey(int64_t generation, const std::string& lease) const;
  // Reads the generation, checks the epoch; publishes the local records
  // again when the epoch is new to this daemon.
  void Poll(std::unique_ptr<storage::RedisConnection>* conn);
  // Writes `record` unless present. False when the tier could not be asked.
  bool Write(std::unique_ptr<storage::RedisConnection>* conn,
             const v1::FindRecord& record, int64_t generation);
  // Deletes the lease if this daemon still holds it; forgets it anyway.
  void ReleaseNow(std::unique_ptr<storage::RedisConnection>* conn,
                  const std::string& lease);
  v1::FindRecord Stamped(const v1::FindRecord& record) const;

  const Options options_;
  storage::RedisConnection::Options connect_;
  const std::string prefix_;
  const std::string version_;
  const LocalRecords local_;
  Counters& counters_;

  absl::Mutex lookup_mu_;
  std::unique_ptr<storage::RedisConnection> lookup_conn_
      ABSL_GUARDED_BY(lookup_mu_);
  // Queueing jobs and reading the stream's state (operators' calls) on a
  // connection of their own: finds' lookups never wait behind them.
  absl::Mutex admin_mu_;
  std::unique_ptr<storage::RedisConnection> admin_conn_
      ABSL_GUARDED_BY(admin_mu_);

  absl::Mutex mu_;
  int failures_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time open_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::string last_error_ ABSL_GUARDED_BY(mu_);
  int64_t generation_ ABSL_GUARDED_BY(mu_) = -1;  // -1: not read yet
  // The highest generation seen: a tier that lost its data gets it back.
  int64_t highest_generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::string epoch_ ABSL_GUARDED_BY(mu_);  // the last one published to
  // What the publishing thread writes, in order: a record (unless empty),
  // then a lease to release (unless empty).
  struct Job {
    v1::FindRecord record;
    bool has_record = false;
    std::string release;
  };
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool waits_closed_ ABSL_GUARDED_BY(mu_) = false;
  // The lease thread holds waits it has taken from waits_.
  bool lease_busy_ ABSL_GUARDED_BY(mu_) = false;
  // This daemon's leases: the lease name and the generation it was taken
  // in, and the token that marks them as this daemon's.
  const std::string token_;
  absl::flat_hash_map<std::string, int64_t> held_ ABSL_GUARDED_BY(mu_);
  struct Wait {
    std::string lease;
    int64_t generation;
    absl::Time deadline;
    std::function<bool()> gone;
    std::function<void(bool)> done;
  };
  std::vector<Wait> waits_ ABSL_GUARDED_BY(mu_);

  // The job this daemon runs, and jobs finished and not yet acknowledged.
  struct StreamJob {
    std::string id;
    std::string problem_key;
    int64_t workspace_limit = -1;
    int attempts = 0;
    int64_t generation = 0;
    absl::Status result;
  };
  JobRunner run_job_ ABSL_GUARDED_BY(mu_);
  bool job_running_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<StreamJob> jobs_finished_ ABSL_GUARDED_BY(mu_);

  std::thread thread_;
  std::thread lease_thread_;
  std::thread job_thread_;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_FIND_TIER_H_
