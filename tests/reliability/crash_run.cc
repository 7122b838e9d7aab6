#include "tests/reliability/crash_run.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/defaults.h"
#include "convtune/v1/service.grpc.pb.h"
#include "kernels/problem.h"
#include "kernels/problem_proto.h"
#include "tests/server/daemon_process.h"

namespace convtune::testing {
namespace {

using Clock = std::chrono::steady_clock;

// A small problem, distinct for every index: quick to tune on the CPU.
v1::ConvProblem Problem(int64_t i) {
  ConvProblem p;
  p.n = 1;
  p.c = 1 + i % 24;
  p.k = 1 + (i / 24) % 24;
  p.in = {1, 5 + (i / 576) % 40, 6};
  p.filter = {1, 3, 3};
  p.pad = {0, 1, 1};
  v1::ConvProblem wire;
  ProblemToProto(p, &wire);
  return wire;
}

// The answer's results, byte for byte.
std::string Results(const v1::FindResponse& r) {
  std::string out;
  for (const v1::PerfResult& p : r.results()) {
    out += p.SerializeAsString();
    out += '|';
  }
  return out;
}

// The kill points, one round each in turn after a round killed at a
// random moment; odds make each fire within a few calls.
struct PointSet {
  const char* name;    // in the figures
  const char* points;  // CONVTUNE_KILL_POINTS
  int odds;
};
constexpr PointSet kPointSets[] = {
    {"find_db.before_write", "find_db.before_write", 2},
    {"find_db.after_write", "find_db.after_write", 2},
    {"tune.build", "tune.build", 6},
    {"tune.measure", "tune.measure", 8},
    {"import", "import.before_write,import.after_write", 2},
};

class Driver {
 public:
  explicit Driver(const CrashOptions& o) : o_(o), rng_(std::random_device{}()) {
    db_ = o.dir + "/db";
    socket_ = o.dir + "/d.sock";
  }

  CrashFigures Run();

 private:
  std::vector<std::string> Args(const std::string& db) const {
    return {
        "--socket",          socket_, "--db",       db,   "--backend", "cpu",
        "--background-tune", "off",   "--log-rpcs", "off"};
  }
  std::unique_ptr<v1::ConvTune::Stub> Stub() const {
    return v1::ConvTune::NewStub(grpc::CreateChannel(
        UnixTarget(socket_), grpc::InsecureChannelCredentials()));
  }
  void Fail(const std::string& what) {
    if (f_.failures.size() < 20) f_.failures.push_back(what);
  }

  // Tunes a few problems in a database of their own and exports it.
  bool MakeImport();
  bool StartDaemon(DaemonProcess& d, const std::string& log);
  // One find; `mode` FAST answers from the FindDb or a fallback, never tunes.
  grpc::Status Find(v1::ConvTune::Stub& stub, int64_t i, v1::FindMode mode,
                    int timeout_s, v1::FindResponse* resp);
  void Verify(v1::ConvTune::Stub& stub, bool all);
  void CheckImport(v1::ConvTune::Stub& stub);

  const CrashOptions& o_;
  std::mt19937_64 rng_;
  std::string db_, socket_;
  CrashFigures f_;
  // The expected state: problem index -> results acknowledged as stored.
  std::map<int64_t, std::string> acked_;
  std::vector<int64_t> last_round_;
  int64_t next_problem_ = 0;
  // The import: its file, its problems and their results.
  std::string import_file_;
  std::map<int64_t, std::string> import_records_;
  bool import_acked_ = false;
};

bool Driver::StartDaemon(DaemonProcess& d, const std::string& log) {
  return d.Start(o_.daemon, Args(db_), o_.dir + "/" + log) &&
         d.WaitServing(socket_, 30000);
}

grpc::Status Driver::Find(v1::ConvTune::Stub& stub, int64_t i,
                          v1::FindMode mode, int timeout_s,
                          v1::FindResponse* resp) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::seconds(timeout_s));
  v1::FindRequest req;
  *req.mutable_problem() = Problem(i);
  req.set_mode(mode);
  return stub.Find(&ctx, req, resp);
}

bool Driver::MakeImport() {
  DaemonProcess d;
  if (!d.Start(o_.daemon, Args(o_.dir + "/import-db"),
               o_.dir + "/import.log") ||
      !d.WaitServing(socket_, 30000)) {
    Fail("the daemon that makes the import did not start: " + d.log());
    return false;
  }
  auto stub = Stub();
  for (int64_t i = 1'000'000; i < 1'000'004; ++i) {
    v1::FindResponse r;
    grpc::Status s = Find(*stub, i, v1::NORMAL, 120, &r);
    if (!s.ok() || !r.not_stored().empty()) {
      Fail("a find for the import failed: " + s.error_message());
      return false;
    }
    import_records_[i] = Results(r);
  }
  grpc::ClientContext ctx;
  v1::DbExportResponse exported;
  grpc::Status s = stub->DbExport(&ctx, v1::DbExportRequest(), &exported);
  if (!s.ok()) {
    Fail("export for the import failed: " + s.error_message());
    return false;
  }
  import_file_ = exported.file();
  return d.Stop(SIGTERM) == 0;
}

void Driver::Verify(v1::ConvTune::Stub& stub, bool all) {
  std::vector<int64_t> keys;
  if (all) {
    for (const auto& [i, results] : acked_) keys.push_back(i);
  } else {
    keys = last_round_;
    std::vector<int64_t> everything;
    for (const auto& [i, results] : acked_) everything.push_back(i);
    std::shuffle(everything.begin(), everything.end(), rng_);
    if (everything.size() > 200) everything.resize(200);
    keys.insert(keys.end(), everything.begin(), everything.end());
  }
  for (int64_t i : keys) {
    auto it = acked_.find(i);
    if (it == acked_.end()) continue;
    v1::FindResponse r;
    grpc::Status s = Find(stub, i, v1::FAST, 30, &r);
    ++f_.verified;
    if (!s.ok()) {
      ++f_.lost;
      Fail(absl::StrCat("problem ", i,
                        ": read back failed: ", s.error_message()));
    } else if (!r.from_db()) {
      ++f_.lost;
      Fail(absl::StrCat("problem ", i, " (", r.problem_key(),
                        ") was acknowledged as stored and is not in the "
                        "FindDb after a restart"));
    } else if (Results(r) != it->second) {
      ++f_.corrupt;
      Fail(absl::StrCat("problem ", i, " (", r.problem_key(),
                        ") reads back with other results than acknowledged"));
    }
  }
}

void Driver::CheckImport(v1::ConvTune::Stub& stub) {
  int present = 0;
  for (const auto& [i, results] : import_records_) {
    v1::FindResponse r;
    grpc::Status s = Find(stub, i, v1::FAST, 30, &r);
    if (s.ok() && r.from_db()) {
      ++present;
      if (Results(r) != results) {
        ++f_.corrupt;
        Fail(absl::StrCat("imported problem ", i, " reads back altered"));
      }
    }
  }
  const int n = static_cast<int>(import_records_.size());
  if (import_acked_ && present != n) {
    f_.lost += n - present;
    Fail(absl::StrCat("an acknowledged import left ", present, " of ", n,
                      " records"));
  } else if (present != 0 && present != n) {
    ++f_.partial_imports;
    Fail(
        absl::StrCat("a cut-off import left ", present, " of ", n, " records"));
  }
}

CrashFigures Driver::Run() {
  const auto start = Clock::now();
  std::filesystem::create_directories(o_.dir);
  if (!MakeImport()) return f_;
  for (int round = 0; round < o_.kills; ++round) {
    ++f_.rounds;
    const int kind = round % (1 + std::size(kPointSets));
    const PointSet* point = kind == 0 ? nullptr : &kPointSets[kind - 1];
    if (point != nullptr) {
      setenv("CONVTUNE_KILL_POINTS", point->points, 1);
      setenv("CONVTUNE_KILL_ODDS", absl::StrCat(point->odds).c_str(), 1);
    } else {
      unsetenv("CONVTUNE_KILL_POINTS");
      unsetenv("CONVTUNE_KILL_ODDS");
    }
    DaemonProcess d;
    if (!StartDaemon(d, "round.log")) {
      ++f_.failed_restarts;
      Fail(absl::StrCat("round ", round, ": convtuned did not restart: ",
                        d.log().substr(0, 2000)));
      // A kill point may have fired while it started; try once more
      // without kill points before giving up.
      unsetenv("CONVTUNE_KILL_POINTS");
      DaemonProcess again;
      if (!StartDaemon(again, "round-retry.log")) break;
      again.Stop(SIGKILL);
      continue;
    }
    auto stub = Stub();
    const bool all = o_.verify_all_each_restart || round % 50 == 0;
    Verify(*stub, all);
    CheckImport(*stub);
    last_round_.clear();

    // The round's work: new problems tuned one after another, and in
    // import rounds the export imported, until the daemon dies or the
    // driver kills it.
    const auto kill_at =
        Clock::now() +
        std::chrono::milliseconds(
            point == nullptr ? std::uniform_int_distribution<int>(20, 600)(rng_)
                             : 30000);
    std::atomic<bool> stop{false};
    std::thread importer;
    std::atomic<bool> import_done{false};
    const bool importing =
        point != nullptr && std::string(point->name) == "import";
    if (importing) {
      importer = std::thread([&] {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
        v1::DbImportRequest req;
        req.set_file(import_file_);
        v1::DbImportResponse resp;
        const grpc::Status s = stub->DbImport(&ctx, req, &resp);
        if (s.ok()) {
          import_acked_ = true;
          ++f_.imports;
        } else if (s.error_code() != grpc::StatusCode::UNAVAILABLE) {
          Fail(absl::StrCat("round ", round,
                            ": import failed: ", s.error_message()));
        }
        import_done = true;
      });
    }
    std::thread finder([&] {
      while (!stop) {
        const int64_t i = next_problem_++;
        v1::FindResponse r;
        grpc::Status s = Find(*stub, i, v1::HYBRID, 60, &r);
        if (!s.ok()) {
          if (s.error_code() != grpc::StatusCode::UNAVAILABLE &&
              s.error_code() != grpc::StatusCode::CANCELLED) {
            Fail(absl::StrCat("round ", round,
                              ": find failed: ", s.error_message()));
          }
          return;  // the daemon is gone
        }
        ++f_.finds;
        if (r.source() == "tuned" && r.not_stored().empty()) {
          ++f_.acknowledged;
          acked_[i] = Results(r);
          last_round_.push_back(i);
        }
      }
    });
    int code = -1;
    while (Clock::now() < kill_at) {
      code = d.WaitExit(20);
      if (code != -1) break;
      if (importing && import_done) {
        // Cut off by a kill point, or done without one.
        code = d.WaitExit(1000);
        break;
      }
    }
    const bool by_driver = code == -1;
    if (by_driver) code = d.Stop(SIGKILL);
    stop = true;
    finder.join();
    if (importer.joinable()) importer.join();
    if (by_driver) {
      if (point == nullptr) {
        ++f_.timed_kills;
      } else {
        // The point did not fire (an import may end before it does):
        // killed by the driver.
        ++f_.point_kills[absl::StrCat(point->name, " (driver)")];
      }
    } else if (code == 128 + SIGKILL) {
      ++f_.point_kills[point != nullptr ? point->name : "unexpected"];
    } else {
      ++f_.aborts;
      Fail(absl::StrCat("round ", round, ": convtuned ended with ", code,
                        " instead of a kill: ", d.log().substr(0, 2000)));
    }
    if (o_.progress && (round + 1) % 25 == 0) {
      f_.seconds = std::chrono::duration<double>(Clock::now() - start).count();
      o_.progress(absl::StrCat("after ", round + 1, " kills: ", f_.Summary()));
    }
  }
  unsetenv("CONVTUNE_KILL_POINTS");
  unsetenv("CONVTUNE_KILL_ODDS");
  // The last restart reads everything back, and stops cleanly.
  DaemonProcess d;
  if (!StartDaemon(d, "final.log")) {
    ++f_.failed_restarts;
    Fail("the final restart failed: " + d.log().substr(0, 2000));
  } else {
    auto stub = Stub();
    Verify(*stub, /*all=*/true);
    CheckImport(*stub);
    if (int code = d.Stop(SIGTERM); code != 0) {
      ++f_.aborts;
      Fail(absl::StrCat("the final stop ended with ", code));
    }
  }
  f_.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return f_;
}

}  // namespace

std::string CrashFigures::Summary() const {
  std::string points;
  for (const auto& [name, n] : point_kills) {
    absl::StrAppend(&points, points.empty() ? "" : ", ", name, " ", n);
  }
  return absl::StrFormat(
      "%d kills (%d at random moments; at kill points: %s); %d finds, %d "
      "acknowledged as stored, %d read back after restarts; %d imports "
      "acknowledged; lost %d, corrupt %d, partial imports %d, aborts %d, "
      "failed restarts %d; %.0f s",
      rounds, timed_kills, points.empty() ? "none" : points, finds,
      acknowledged, verified, imports, lost, corrupt, partial_imports, aborts,
      failed_restarts, seconds);
}

CrashFigures RunCrashTest(const CrashOptions& options) {
  return Driver(options).Run();
}

}  // namespace convtune::testing
