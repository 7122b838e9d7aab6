// Test helpers for tests/storage: a fresh temporary folder per test, random
// records, and a whole-prefix scan. TempDir and RandomRecords are not
// thread-safe; one per test.
#ifndef CONVTUNE_TESTS_STORAGE_STORAGE_TEST_UTIL_H_
#define CONVTUNE_TESTS_STORAGE_STORAGE_TEST_UTIL_H_

#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "convtune/v1/records.pb.h"
#include "gtest/gtest.h"
#include "storage/store.h"

namespace convtune::storage::testing {

// A folder under /tmp made by mkdtemp, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/convtune-storage-XXXXXX";
    char* made = mkdtemp(tmpl);
    EXPECT_NE(made, nullptr);
    path_ = made == nullptr ? "" : made;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // A database folder inside (not created).
  std::string db() const { return path_ + "/db"; }

 private:
  std::string path_;
};

class RandomRecords {
 public:
  RandomRecords() : rng_(std::random_device{}()) {}

  int64_t Int(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  double Real(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng_);
  }

  // Shaped like a canonical problem key: C-H-W-FHxFW-K-OH-OW-N-...-TYPE-DIR.
  std::string ProblemKey() {
    int64_t f = Int(1, 7);
    return absl::StrCat(Int(1, 512), "-", Int(1, 224), "-", Int(1, 224), "-", f,
                        "x", f, "-", Int(1, 512), "-", Int(1, 224), "-",
                        Int(1, 224), "-", Int(1, 64), "-1x1-1x1-1x1-",
                        Int(1, 4), "-NCHW-FP32-F");
  }
  std::string DeviceKey() {
    return absl::StrCat("cpu-x86-64-v3-cu", Int(1, 256), "-openblas0.3.",
                        Int(0, 99));
  }
  std::string Bytes(size_t n) {
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(Int(0, 255));
    return s;
  }

  // 1 to 6 results, fastest first, schema_version left 0 for Put to stamp.
  v1::FindRecord Find(const std::string& device_key,
                      const std::string& problem_key) {
    v1::FindRecord r;
    r.set_device_key(device_key);
    r.set_problem_key(problem_key);
    r.set_workspace_limit(Int(-1, 1 << 30));
    r.set_created_unix_ms(Int(1, int64_t{1} << 42));
    r.set_timing_repeats(static_cast<uint32_t>(Int(1, 20)));
    int n = static_cast<int>(Int(1, 6));
    std::vector<double> times;
    for (int i = 0; i < n; ++i) times.push_back(Real(0.001, 500.0));
    std::sort(times.begin(), times.end());
    for (double t : times) {
      v1::PerfResult* p = r.add_results();
      p->set_solver_id(static_cast<uint32_t>(Int(1, 10000)));
      p->set_solver_name(absl::StrCat("Solver", p->solver_id()));
      p->set_algorithm(Int(0, 1) ? "gemm" : "direct");
      p->set_time_ms(t);
      p->set_workspace_bytes(Int(0, 1 << 24));
      p->add_perf_config(Int(1, 64));
      p->set_measured(true);
    }
    return r;
  }

  v1::PerfDbRecord Perf() {
    v1::PerfDbRecord r;
    r.set_solver_id(static_cast<uint32_t>(Int(1, 100000)));
    for (int i = 0, n = static_cast<int>(Int(1, 5)); i < n; ++i)
      r.add_perf_config(Int(1, 256));
    r.set_time_ms(Real(0.001, 100.0));
    return r;
  }

  v1::KernelCacheRecord Kernel() {
    v1::KernelCacheRecord r;
    r.set_backend("cpu");
    r.set_arch(absl::StrCat("x86-64-v", Int(2, 4)));
    r.set_code_object(Bytes(static_cast<size_t>(Int(1, 4096))));
    return r;
  }

  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
};

// Every pair under `prefix` in column `c`; a failed scan fails the test.
inline std::map<std::string, std::string> ScanAll(Store& store, Column c,
                                                  absl::string_view prefix) {
  std::map<std::string, std::string> out;
  absl::Status s =
      store.Scan(c, prefix, [&](absl::string_view k, absl::string_view v) {
        out.emplace(std::string(k), std::string(v));
        return true;
      });
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

}  // namespace convtune::storage::testing

#endif  // CONVTUNE_TESTS_STORAGE_STORAGE_TEST_UTIL_H_
