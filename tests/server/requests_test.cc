// The service's requests as engine parameters, without gRPC: every bad field
// is named in the error, and a long bad value is quoted only by a prefix.
#include "server/requests.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "kernels/problem_proto.h"

namespace convtune {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

ConvProblem Problem(Direction dir = Direction::kForward) {
  ConvProblem p;
  p.n = 2;
  p.c = 4;
  p.k = 6;
  p.in = {1, 5, 5};
  p.filter = {1, 3, 3};
  p.pad = {0, 1, 1};
  p.direction = dir;
  return p;
}

TEST(RequestsTest, FindTakesTheDefaultModeAndTheLimit) {
  v1::FindRequest req;
  ProblemToProto(Problem(), req.mutable_problem());
  ServiceOptions options;
  options.default_mode = v1::HYBRID;
  absl::StatusOr<FindInput> in = FindInputFrom(req, options);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->params.mode, v1::HYBRID);
  EXPECT_EQ(in->params.workspace_limit, -1);
  req.set_mode(v1::NORMAL);
  req.set_workspace_limit(4096);
  req.set_exhaustive(true);
  req.set_request_count(2);
  in = FindInputFrom(req, options);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->params.mode, v1::NORMAL);
  EXPECT_EQ(in->params.workspace_limit, 4096);
  EXPECT_TRUE(in->params.exhaustive);
  EXPECT_EQ(in->request_count, 2);
  req.set_workspace_limit(-5);
  EXPECT_EQ(FindInputFrom(req, options)->params.workspace_limit, -1);
}

TEST(RequestsTest, FindErrorsNameTheField) {
  v1::FindRequest req;
  ProblemToProto(Problem(), req.mutable_problem());
  req.mutable_problem()->set_groups(3);
  absl::Status s = FindInputFrom(req, {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), StartsWith("problem."));
  ProblemToProto(Problem(), req.mutable_problem());
  req.set_request_count(-1);
  s = FindInputFrom(req, {}).status();
  EXPECT_THAT(std::string(s.message()), StartsWith("request_count:"));
  req.set_request_count(0);
  req.set_mode(static_cast<v1::FindMode>(4));
  s = FindInputFrom(req, {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), StartsWith("mode:"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("reserved"));
}

TEST(RequestsTest, FindResponseKeepsAtMostTheRequestedCount) {
  FindOutcome outcome;
  outcome.record.set_problem_key("k");
  for (int i = 0; i < 3; ++i)
    outcome.record.add_results()->set_solver_id(i + 1);
  outcome.source = "tuned";
  FindInput in;
  in.request_count = 2;
  in.params.mode = v1::FAST;
  v1::FindResponse resp;
  FillFindResponse(outcome, in, "dev", &resp);
  EXPECT_EQ(resp.results_size(), 2);
  EXPECT_EQ(resp.mode(), v1::FAST);
  EXPECT_EQ(resp.source(), "tuned");
  EXPECT_EQ(resp.device_key(), "dev");
  EXPECT_EQ(resp.problem_key(), "k");
}

TEST(RequestsTest, ExecuteChecksEveryTensorAgainstTheProblem) {
  const ConvProblem p = Problem(Direction::kBackwardData);
  v1::ExecuteRequest req;
  ProblemToProto(p, req.mutable_problem());
  req.set_solver_id(7);
  req.set_w(std::string(p.w_bytes(), '\1'));
  req.set_y(std::string(p.y_bytes(), '\2'));
  absl::StatusOr<ExecuteInput> in = ExecuteInputFrom(req, {});
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->solver_id, 7u);
  // The output (x) may be left out; it is sized for the kernel to write.
  EXPECT_EQ((*in->tensors)[Tensor::kX].size(),
            static_cast<size_t>(p.x_bytes()));
  EXPECT_EQ((*in->tensors)[Tensor::kY], req.y());

  (*in->tensors)[Tensor::kX] = "out";
  v1::ExecuteResponse resp;
  FillExecuteResponse(*in, 1.5, &resp);
  EXPECT_EQ(resp.output(), "out");
  EXPECT_EQ(resp.time_ms(), 1.5);

  req.set_y("short");
  absl::Status s = ExecuteInputFrom(req, {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), StartsWith("y: expected "));
  req.set_y(std::string(p.y_bytes(), '\2'));
  req.set_x("not the size of x");
  s = ExecuteInputFrom(req, {}).status();
  EXPECT_THAT(std::string(s.message()), StartsWith("x: expected "));
}

TEST(RequestsTest, ExecuteOverTheInlineLimitIsResourceExhausted) {
  const ConvProblem p = Problem();
  v1::ExecuteRequest req;
  ProblemToProto(p, req.mutable_problem());
  ServiceOptions options;
  options.max_execute_bytes = 100;
  absl::Status s = ExecuteInputFrom(req, options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("--max-execute-bytes"));
}

TEST(RequestsTest, SolutionsAndSolutionIds) {
  v1::GetSolutionsRequest req;
  ProblemToProto(Problem(), req.mutable_problem());
  req.set_max_count(-2);
  absl::Status s = SolutionsInputFrom(req, {}).status();
  EXPECT_THAT(std::string(s.message()), StartsWith("max_count:"));
  req.set_max_count(1);
  req.set_workspace_limit(0);
  absl::StatusOr<SolutionsInput> in = SolutionsInputFrom(req, {});
  ASSERT_TRUE(in.ok());
  EXPECT_EQ(in->workspace_limit, 0);

  Solutions solutions;
  for (const char* family : {"winograd", "gemm"}) {
    v1::PerfResult r;
    r.set_solver_id(3);
    r.set_algorithm(family);
    solutions.results.push_back(r);
  }
  v1::GetSolutionsResponse resp;
  FillSolutionsResponse(solutions, *in, "dev", &resp);
  ASSERT_EQ(resp.solutions_size(), 1);
  EXPECT_EQ(resp.solutions(0).algorithm(), v1::WINOGRAD);
  // A family with no name here is left out, and the next one takes its place.
  solutions.results[0].set_algorithm("gemo");
  v1::GetSolutionsResponse skipped;
  FillSolutionsResponse(solutions, *in, "dev", &skipped);
  ASSERT_EQ(skipped.solutions_size(), 1);
  EXPECT_EQ(skipped.solutions(0).algorithm(), v1::GEMM);

  EXPECT_EQ(*SolverIdFrom(111), 111u);
  EXPECT_EQ(SolverIdFrom(uint64_t{1} << 33).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(RequestsTest, CodeObjectsNeedAHashAndAKnownBackend) {
  EXPECT_THAT(std::string(CheckCodeObjectRequest({}).message()),
              StartsWith("hash:"));
  v1::KernelCacheRecord record;
  record.set_backend("cuda");
  record.set_arch("sm_90");
  record.set_code_object("elf");
  v1::GetCodeObjectResponse resp;
  ASSERT_TRUE(FillCodeObjectResponse(record, &resp).ok());
  EXPECT_EQ(resp.backend(), v1::CUDA);
  record.set_backend(std::string(1000, 'z'));
  absl::Status s = FillCodeObjectResponse(record, &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_LT(s.message().size(), 200u);
}

}  // namespace
}  // namespace convtune
