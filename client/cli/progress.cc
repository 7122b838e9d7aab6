#include "client/cli/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/quote.h"

namespace convtune::cli {
namespace {

// Columns of the terminal on stderr; 80 when it does not say.
int TerminalWidth() {
  winsize ws{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) {
    return ws.ws_col;
  }
  return 80;
}

void WriteErr(absl::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

}  // namespace

absl::StatusOr<ProgressDisplay::Style> ProgressDisplay::Parse(
    absl::string_view flag) {
  if (flag == "auto") {
    return isatty(STDERR_FILENO) ? Style::kBar : Style::kLines;
  }
  if (flag == "bar") return Style::kBar;
  if (flag == "lines") return Style::kLines;
  if (flag == "off") return Style::kOff;
  return absl::InvalidArgumentError(
      absl::StrCat("--progress: expected auto, bar, lines or off, got '",
                   QuotePrefix(flag), "'"));
}

ProgressDisplay::ProgressDisplay(Style style, std::string what, int total)
    : style_(style), what_(std::move(what)), total_(std::max(total, 0)) {}

ProgressDisplay::~ProgressDisplay() {
  absl::MutexLock lock(&mu_);
  Clear();
}

void ProgressDisplay::Update(int done, absl::string_view detail) {
  if (style_ != Style::kBar) return;
  absl::MutexLock lock(&mu_);
  if (closed_) return;
  done_ = done;
  detail_ = std::string(detail);
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  Draw();
}

void ProgressDisplay::Line(absl::string_view line) {
  if (style_ == Style::kOff) return;
  absl::MutexLock lock(&mu_);
  if (closed_) return;
  Clear();
  WriteErr(absl::StrCat(what_, ": ", line, "\n"));
  if (style_ == Style::kBar) Draw();
}

void ProgressDisplay::Close() {
  absl::MutexLock lock(&mu_);
  Clear();
  closed_ = true;
}

void ProgressDisplay::Draw() {
  const int width = TerminalWidth();
  constexpr int kBarCells = 24;
  const int filled =
      total_ > 0 ? std::min(kBarCells, done_ * kBarCells / total_) : 0;
  std::string text =
      absl::StrFormat("%s [%s%s] %d/%d", what_, std::string(filled, '#'),
                      std::string(kBarCells - filled, '.'), done_, total_);
  if (!detail_.empty()) absl::StrAppend(&text, "  ", detail_);
  // One line, never wrapped: the next draw returns to its start.
  if (static_cast<int>(text.size()) > width - 1) text.resize(width - 1);
  WriteErr(absl::StrCat("\r", text, "\x1b[K"));
  drawn_ = true;
  last_draw_ = std::chrono::steady_clock::now();
}

void ProgressDisplay::Clear() {
  if (!drawn_) return;
  WriteErr("\r\x1b[K");
  drawn_ = false;
}

std::string DescribeProgress(const v1::FindProgress& p) {
  std::string text = p.stage();
  if (p.stage() == "compiling") {
    absl::StrAppend(&text, " ", p.built(), "/", p.solvers(), " solvers");
  } else if (p.stage() == "timing") {
    absl::StrAppend(&text, " ", p.timed(), "/", p.solvers(), " solvers");
    if (!p.current_solver().empty()) {
      absl::StrAppend(&text, " (", p.current_solver(), ")");
    }
  }
  if (!p.best_solver().empty()) {
    absl::StrAppend(&text, absl::StrFormat(", best %s %.4g ms", p.best_solver(),
                                           p.best_ms()));
  }
  return text;
}

}  // namespace convtune::cli
