// A second process for storage_process_test: opens a database the way a
// second convtuned would and reports through its stdout and exit status.
//   put_and_exit <dir> <device> <problem> <time_ms>  synced Put, then _exit(0)
//                                                     without closing anything
//   put_and_hang <dir> <device> <problem> <time_ms>  synced Put, then wait to
//                                                     be killed
//   hold <dir>       open, then hold the database until stdin closes
//   try_open <dir>   exit status: the absl status code of opening for writing
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/numbers.h"
#include "convtune/v1/records.pb.h"
#include "storage/records.h"
#include "storage/store.h"

namespace convtune::storage {
namespace {

void Say(const std::string& line) {
  std::fprintf(stdout, "%s\n", line.c_str());
  std::fflush(stdout);
}

int Put(int argc, char** argv, bool hang) {
  if (argc != 6) return 100;
  absl::StatusOr<std::unique_ptr<Store>> store = OpenRocksDbStore(argv[2]);
  if (!store.ok()) {
    Say(std::string(store.status().message()));
    return 101;
  }
  double time_ms = 0;
  if (!absl::SimpleAtod(argv[5], &time_ms)) return 100;
  v1::FindRecord record;
  record.set_problem_key(argv[4]);
  v1::PerfResult* result = record.add_results();
  result->set_solver_id(1);
  result->set_time_ms(time_ms);
  absl::Status s = FindDb(store->get(), argv[3]).Put(record);
  if (!s.ok()) {
    Say(std::string(s.message()));
    return 102;
  }
  Say("written");
  if (hang) {
    while (true) pause();
  }
  // Leaves the store open: no destructor, no flush, no close.
  _exit(0);
}

int Hold(const char* dir) {
  absl::StatusOr<std::unique_ptr<Store>> store = OpenRocksDbStore(dir);
  if (!store.ok()) {
    Say(std::string(store.status().message()));
    return 101;
  }
  Say("open");
  char c;
  while (read(STDIN_FILENO, &c, 1) > 0) {
  }
  return 0;
}

int TryOpen(const char* dir) {
  absl::StatusOr<std::unique_ptr<Store>> store = OpenRocksDbStore(dir);
  Say(store.ok() ? std::string("ok") : std::string(store.status().message()));
  return static_cast<int>(store.status().code());
}

}  // namespace
}  // namespace convtune::storage

int main(int argc, char** argv) {
  if (argc < 3) return 100;
  std::string command = argv[1];
  if (command == "put_and_exit")
    return convtune::storage::Put(argc, argv, false);
  if (command == "put_and_hang")
    return convtune::storage::Put(argc, argv, true);
  if (command == "hold") return convtune::storage::Hold(argv[2]);
  if (command == "try_open") return convtune::storage::TryOpen(argv[2]);
  return 100;
}
