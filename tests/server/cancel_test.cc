// Callers who leave: a real convtuned on the CPU given a thousand finds whose
// deadlines pass mid-tuning stops their runs, and is left with no run,
// queued task, thread or memory of theirs; the next honest find is tuned as
// usual. tests/gpu/gpu_cancel_test.cc runs the same check on a GPU.
#include <gtest/gtest.h>

#include "kernels/problem.h"
#include "kernels/problem_proto.h"
#include "tests/server/leaving_callers.h"

namespace convtune {
namespace {

v1::ConvProblem Problem(int i) {
  ConvProblem p;
  p.n = 4;
  p.c = 8 + i % 40;
  p.k = 8 + (i / 40) % 25;
  p.in = {1, 28, 28};
  p.filter = {1, 3, 3};
  p.pad = {0, 1, 1};
  v1::ConvProblem wire;
  ProblemToProto(p, &wire);
  return wire;
}

TEST(CancelTest, AThousandCallersWhoLeaveMidTuningLeaveNothingBehind) {
  testing::LeavingCallers c;
  c.convtuned = CONVTUNED_PATH;
  c.backend = {"--backend", "cpu"};
  c.problem = Problem;
  testing::CheckLeavingCallersLeaveNothing(c);
}

}  // namespace
}  // namespace convtune
