// How long work shows its progress on stderr: a bar redrawn in place on a
// terminal, plain lines otherwise (a log, a pipe), or nothing. Thread-safe:
// the find command's workers report from their own threads.
#ifndef CONVTUNE_CLIENT_CLI_PROGRESS_H_
#define CONVTUNE_CLIENT_CLI_PROGRESS_H_

#include <chrono>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "convtune/v1/service.pb.h"

namespace convtune::cli {

class ProgressDisplay {
 public:
  enum class Style { kOff, kBar, kLines };
  // "auto" (a bar when stderr is a terminal, else lines), "bar", "lines" or
  // "off"; InvalidArgument naming --progress otherwise.
  static absl::StatusOr<Style> Parse(absl::string_view flag);

  // `what` starts each line ("find", "prefill"); `total` is the number of
  // units of work.
  ProgressDisplay(Style style, std::string what, int total);
  // Clears the bar.
  ~ProgressDisplay();

  Style style() const { return style_; }

  // `done` of the total finished; `detail` says what is under way. The bar
  // is redrawn at most ten times a second; lines print nothing.
  void Update(int done, absl::string_view detail);
  // A line that stays: printed above the bar, or as a line of its own.
  void Line(absl::string_view line);
  // Clears the bar for good (before the command prints its answer); later
  // calls print nothing.
  void Close();

 private:
  void Draw() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Clear() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Style style_;
  const std::string what_;
  const int total_;
  absl::Mutex mu_;
  int done_ ABSL_GUARDED_BY(mu_) = 0;
  std::string detail_ ABSL_GUARDED_BY(mu_);
  bool drawn_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::chrono::steady_clock::time_point last_draw_ ABSL_GUARDED_BY(mu_);
};

// One line about a tuning run: "timing 5/9 solvers, best NAME 0.41 ms".
std::string DescribeProgress(const v1::FindProgress& p);

}  // namespace convtune::cli

#endif  // CONVTUNE_CLIENT_CLI_PROGRESS_H_
