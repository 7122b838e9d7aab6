// The C API's argument checks and the client's addressing, with no daemon.
#include <random>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "client/convtune.h"
#include "common/defaults.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/process_util.h"

namespace convtune {
namespace {

using ::testing::HasSubstr;

class CApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Nobody listens here: calls that reach for the daemon fail, argument
    // checks must fail first.
    address_ = "unix:" + dir_.path() + "/nobody.sock";
    ASSERT_EQ(convtuneCreateWithAddress(&handle_, address_.c_str()),
              convtuneStatusSuccess);
    ASSERT_EQ(convtuneCreateTensorDescriptor(&x_), convtuneStatusSuccess);
    ASSERT_EQ(convtuneCreateTensorDescriptor(&w_), convtuneStatusSuccess);
    ASSERT_EQ(convtuneCreateTensorDescriptor(&y_), convtuneStatusSuccess);
    ASSERT_EQ(convtuneCreateConvolutionDescriptor(&conv_),
              convtuneStatusSuccess);
  }
  void TearDown() override {
    convtuneDestroyTensorDescriptor(x_);
    convtuneDestroyTensorDescriptor(w_);
    convtuneDestroyTensorDescriptor(y_);
    convtuneDestroyConvolutionDescriptor(conv_);
    convtuneDestroy(handle_);
  }

  // A random consistent 3x3 (pad 1) layer in x_, w_, y_, conv_.
  void SetLayer(int groups = 1) {
    std::uniform_int_distribution<int> size(2, 9);
    n_ = size(rng_), c_ = size(rng_) * groups, k_ = size(rng_) * groups;
    h_ = size(rng_) + 4, w_size_ = size(rng_) + 4;
    ASSERT_EQ(
        convtuneSet4dTensorDescriptor(x_, convtuneFloat, n_, c_, h_, w_size_),
        convtuneStatusSuccess);
    ASSERT_EQ(
        convtuneSet4dTensorDescriptor(w_, convtuneFloat, k_, c_ / groups, 3, 3),
        convtuneStatusSuccess);
    ASSERT_EQ(convtuneInitConvolutionDescriptor(conv_, convtuneConvolution, 1,
                                                1, 1, 1, 1, 1),
              convtuneStatusSuccess);
    ASSERT_EQ(convtuneSetConvolutionGroupCount(conv_, groups),
              convtuneStatusSuccess);
    ASSERT_EQ(
        convtuneSet4dTensorDescriptor(y_, convtuneFloat, n_, k_, h_, w_size_),
        convtuneStatusSuccess);
  }

  convtuneStatus_t FwdWorkspace(size_t* size) {
    return convtuneConvolutionForwardGetWorkSpaceSize(handle_, w_, x_, conv_,
                                                      y_, size);
  }

  testing::TempDir dir_;
  std::string address_;
  std::mt19937 rng_{std::random_device{}()};
  convtuneHandle_t handle_ = nullptr;
  convtuneTensorDescriptor_t x_ = nullptr, w_ = nullptr, y_ = nullptr;
  convtuneConvolutionDescriptor_t conv_ = nullptr;
  int n_ = 0, c_ = 0, k_ = 0, h_ = 0, w_size_ = 0;
};

TEST_F(CApiTest, ErrorStringsAreDistinct) {
  std::set<std::string> seen;
  for (int s = convtuneStatusSuccess; s <= convtuneStatusUnknownError; ++s) {
    seen.insert(convtuneGetErrorString(static_cast<convtuneStatus_t>(s)));
  }
  EXPECT_EQ(seen.size(), convtuneStatusUnknownError + 1u);
  EXPECT_STREQ(convtuneGetErrorString(convtuneStatusBadParm),
               "convtuneStatusBadParm");
}

TEST_F(CApiTest, NullPointersAreBadParm) {
  EXPECT_EQ(convtuneCreateWithAddress(nullptr, nullptr), convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(nullptr), HasSubstr("handle"));
  EXPECT_EQ(convtuneDestroy(nullptr), convtuneStatusBadParm);
  EXPECT_EQ(convtuneCreateTensorDescriptor(nullptr), convtuneStatusBadParm);
  EXPECT_EQ(convtuneSet4dTensorDescriptor(nullptr, convtuneFloat, 1, 1, 1, 1),
            convtuneStatusBadParm);
  EXPECT_EQ(convtuneSetTensorDescriptorEx(x_, convtuneFloat, convtuneTensorNCHW,
                                          4, nullptr),
            convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(nullptr), HasSubstr("dims"));
  EXPECT_EQ(convtuneInitConvolutionNdDescriptor(conv_, 2, nullptr, nullptr,
                                                nullptr, convtuneConvolution),
            convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(nullptr), HasSubstr("padA"));

  SetLayer();
  size_t size = 0;
  EXPECT_EQ(convtuneConvolutionForwardGetWorkSpaceSize(nullptr, w_, x_, conv_,
                                                       y_, &size),
            convtuneStatusBadParm);
  EXPECT_EQ(convtuneConvolutionForwardGetWorkSpaceSize(handle_, w_, x_, conv_,
                                                       y_, nullptr),
            convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr("workSpaceSize"));
  EXPECT_EQ(convtuneConvolutionForwardGetWorkSpaceSize(handle_, nullptr, x_,
                                                       conv_, y_, &size),
            convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr("wDesc is NULL"));
  EXPECT_EQ(convtuneConvolutionBackwardDataGetWorkSpaceSize(
                handle_, y_, w_, conv_, nullptr, &size),
            convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr("dxDesc is NULL"));

  float buf = 0;
  int returned = 0;
  convtuneConvAlgoPerf_t perf[2];
  EXPECT_EQ(convtuneFindConvolutionForwardAlgorithm(
                handle_, x_, nullptr, w_, &buf, conv_, y_, &buf, 2, &returned,
                perf, nullptr, 0, false),
            convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr("x is NULL"));
  EXPECT_EQ(convtuneFindConvolutionBackwardWeightsAlgorithm(
                handle_, y_, &buf, x_, &buf, conv_, w_, &buf, 2, &returned,
                nullptr, nullptr, 0, false),
            convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr("perfResults is NULL"));
  EXPECT_EQ(convtuneFindConvolutionForwardAlgorithm(
                handle_, x_, &buf, w_, &buf, conv_, y_, &buf, 0, &returned,
                perf, nullptr, 0, false),
            convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr("requestAlgoCount"));

  const float one = 1, zero = 0;
  EXPECT_EQ(convtuneConvolutionForward(handle_, nullptr, x_, &buf, w_, &buf,
                                       conv_, convtuneConvolutionFwdAlgoDirect,
                                       &zero, y_, &buf, nullptr, 0),
            convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr("alpha is NULL"));
  EXPECT_EQ(
      convtuneConvolutionBackwardData(handle_, &one, y_, &buf, w_, &buf, conv_,
                                      convtuneConvolutionBwdDataAlgoGEMM, &zero,
                                      x_, nullptr, nullptr, 0),
      convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr("dx is NULL"));
  EXPECT_EQ(
      convtuneConvolutionForward(handle_, &one, x_, &buf, w_, &buf, conv_,
                                 static_cast<convtuneConvFwdAlgorithm_t>(4),
                                 &zero, y_, &buf, nullptr, 0),
      convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr("algo 4"));
}

TEST_F(CApiTest, ImmediateArgumentsAreCheckedFirst) {
  SetLayer();
  float buf = 0;
  size_t count = 0;
  convtuneConvSolution_t solutions[2];
  EXPECT_EQ(convtuneConvolutionForwardGetSolutionCount(nullptr, w_, x_, conv_,
                                                       y_, &count),
            convtuneStatusBadParm);
  EXPECT_EQ(convtuneConvolutionForwardGetSolutionCount(handle_, w_, x_, conv_,
                                                       y_, nullptr),
            convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(handle_),
              HasSubstr("solutionCount is NULL"));
  EXPECT_EQ(convtuneConvolutionBackwardDataGetSolution(handle_, y_, w_, conv_,
                                                       x_, 2, &count, nullptr),
            convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr("solutions is NULL"));
  EXPECT_EQ(convtuneConvolutionBackwardWeightsGetSolution(
                handle_, y_, x_, conv_, w_, 0, &count, solutions),
            convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr("maxSolutionCount"));
  EXPECT_EQ(convtuneConvolutionForwardGetSolutionWorkspaceSize(
                handle_, w_, x_, conv_, y_, 1, nullptr),
            convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(handle_),
              HasSubstr("workSpaceSize is NULL"));
  EXPECT_EQ(convtuneConvolutionBackwardDataCompileSolution(handle_, y_, w_,
                                                           nullptr, x_, 1),
            convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr("convDesc is NULL"));
  EXPECT_EQ(convtuneConvolutionForwardImmediate(handle_, w_, nullptr, x_, &buf,
                                                conv_, y_, &buf, nullptr, 0, 1),
            convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr("w is NULL"));
  EXPECT_EQ(convtuneConvolutionBackwardDataImmediate(
                handle_, y_, &buf, w_, &buf, conv_, x_, nullptr, nullptr, 0, 1),
            convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr("dx is NULL"));
  EXPECT_EQ(convtuneConvolutionBackwardWeightsImmediate(
                handle_, y_, &buf, x_, &buf, conv_, w_, &buf, nullptr, 64, 1),
            convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(handle_),
              HasSubstr("workSpace is NULL but workSpaceSize is 64"));
  // Descriptors are checked before the daemon is asked.
  convtuneTensorDescriptor_t unset = nullptr;
  ASSERT_EQ(convtuneCreateTensorDescriptor(&unset), convtuneStatusSuccess);
  EXPECT_EQ(convtuneConvolutionForwardGetSolutionCount(handle_, w_, unset,
                                                       conv_, y_, &count),
            convtuneStatusNotInitialized);
  EXPECT_THAT(convtuneGetLastError(handle_),
              HasSubstr("xDesc has not been set"));
  convtuneDestroyTensorDescriptor(unset);
  // Then the daemon, which nobody serves here.
  EXPECT_EQ(convtuneConvolutionForwardGetSolutionCount(handle_, w_, x_, conv_,
                                                       y_, &count),
            convtuneStatusUnavailable);
  EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr(address_));

  convtuneFindMode_t mode;
  EXPECT_EQ(convtuneSetFindMode(nullptr, convtuneFindModeFast),
            convtuneStatusBadParm);
  EXPECT_EQ(convtuneGetFindMode(handle_, nullptr), convtuneStatusBadParm);
  for (int bad : {-1, 4, 8, 100}) {
    EXPECT_EQ(
        convtuneSetFindMode(handle_, static_cast<convtuneFindMode_t>(bad)),
        convtuneStatusBadParm)
        << bad;
    EXPECT_THAT(convtuneGetLastError(handle_),
                HasSubstr(absl::StrCat("findMode ", bad)));
  }
  for (convtuneFindMode_t good :
       {convtuneFindModeNormal, convtuneFindModeFast, convtuneFindModeHybrid,
        convtuneFindModeDynamicHybrid, convtuneFindModeTrustVerify,
        convtuneFindModeTrustVerifyFull, convtuneFindModeDefault}) {
    ASSERT_EQ(convtuneSetFindMode(handle_, good), convtuneStatusSuccess);
    ASSERT_EQ(convtuneGetFindMode(handle_, &mode), convtuneStatusSuccess);
    EXPECT_EQ(mode, good);
  }
}

TEST_F(CApiTest, TensorDescriptorValues) {
  EXPECT_EQ(convtuneSet4dTensorDescriptor(x_, convtuneFloat, 1, 0, 8, 8),
            convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(nullptr), HasSubstr("C must be positive"));
  EXPECT_EQ(convtuneSet4dTensorDescriptor(
                x_, static_cast<convtuneDataType_t>(7), 1, 1, 8, 8),
            convtuneStatusInvalidValue);
  EXPECT_THAT(convtuneGetLastError(nullptr), HasSubstr("dataType 7"));
  const int dims5[5] = {1, 2, 3, 4, 5};
  EXPECT_EQ(convtuneSetTensorDescriptorEx(x_, convtuneHalf, convtuneTensorNHWC,
                                          5, dims5),
            convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(nullptr), HasSubstr("nbDims"));
  EXPECT_EQ(convtuneSetTensorDescriptorEx(x_, convtuneHalf, convtuneTensorNDHWC,
                                          5, dims5),
            convtuneStatusSuccess);
  EXPECT_EQ(convtuneInitConvolutionDescriptor(conv_, convtuneConvolution, -1, 0,
                                              1, 1, 1, 1),
            convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(nullptr), HasSubstr("pad_h"));
  EXPECT_EQ(convtuneInitConvolutionDescriptor(conv_, convtuneConvolution, 0, 0,
                                              1, 0, 1, 1),
            convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(nullptr), HasSubstr("stride_w"));
  EXPECT_EQ(
      convtuneInitConvolutionDescriptor(
          conv_, static_cast<convtuneConvolutionMode_t>(1), 0, 0, 1, 1, 1, 1),
      convtuneStatusInvalidValue);
  EXPECT_EQ(convtuneSetConvolutionGroupCount(conv_, 0), convtuneStatusBadParm);
}

TEST_F(CApiTest, ForwardOutputDimFollowsTheFormula) {
  std::uniform_int_distribution<int> size(1, 5);
  for (int trial = 0; trial < 20; ++trial) {
    const int n = size(rng_), c = size(rng_), k = size(rng_), r = size(rng_),
              s = size(rng_);
    const int pad_h = size(rng_) - 1, pad_w = size(rng_) - 1, u = size(rng_),
              v = size(rng_);
    const int l = size(rng_), j = size(rng_);
    const int h = l * (r - 1) + 1 + size(rng_) * 3,
              w = j * (s - 1) + 1 + size(rng_) * 3;
    ASSERT_EQ(convtuneSet4dTensorDescriptor(x_, convtuneFloat, n, c, h, w),
              convtuneStatusSuccess);
    ASSERT_EQ(convtuneSet4dTensorDescriptor(w_, convtuneFloat, k, c, r, s),
              convtuneStatusSuccess);
    ASSERT_EQ(convtuneInitConvolutionDescriptor(conv_, convtuneConvolution,
                                                pad_h, pad_w, u, v, l, j),
              convtuneStatusSuccess);
    int on = 0, oc = 0, oh = 0, ow = 0;
    ASSERT_EQ(convtuneGetConvolutionForwardOutputDim(conv_, x_, w_, &on, &oc,
                                                     &oh, &ow),
              convtuneStatusSuccess)
        << convtuneGetLastError(nullptr);
    EXPECT_EQ(on, n);
    EXPECT_EQ(oc, k);
    EXPECT_EQ(oh, (h + 2 * pad_h - l * (r - 1) - 1) / u + 1);
    EXPECT_EQ(ow, (w + 2 * pad_w - j * (s - 1) - 1) / v + 1);
  }
  EXPECT_EQ(convtuneGetConvolutionForwardOutputDim(conv_, x_, w_, nullptr,
                                                   nullptr, nullptr, nullptr),
            convtuneStatusBadParm);
}

TEST_F(CApiTest, InconsistentDescriptorsNameTheField) {
  SetLayer(2);
  size_t size = 0;
  // w channels x groups != x channels.
  ASSERT_EQ(
      convtuneSet4dTensorDescriptor(w_, convtuneFloat, k_, c_ / 2 + 1, 3, 3),
      convtuneStatusSuccess);
  EXPECT_EQ(FwdWorkspace(&size), convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr("xDesc C"));
  EXPECT_THAT(convtuneGetLastError(handle_),
              HasSubstr("wDesc C x group count"));

  SetLayer();
  ASSERT_EQ(
      convtuneSet4dTensorDescriptor(y_, convtuneFloat, n_, k_ + 1, h_, w_size_),
      convtuneStatusSuccess);
  EXPECT_EQ(FwdWorkspace(&size), convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr("yDesc C"));

  SetLayer();
  ASSERT_EQ(
      convtuneSet4dTensorDescriptor(y_, convtuneFloat, n_, k_, h_ + 1, w_size_),
      convtuneStatusSuccess);
  EXPECT_EQ(FwdWorkspace(&size), convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr("yDesc H"));

  SetLayer();
  ASSERT_EQ(
      convtuneSet4dTensorDescriptor(y_, convtuneHalf, n_, k_, h_, w_size_),
      convtuneStatusSuccess);
  EXPECT_EQ(FwdWorkspace(&size), convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr("data type"));

  SetLayer();
  const int dims[4] = {n_, k_, h_, w_size_};
  ASSERT_EQ(convtuneSetTensorDescriptorEx(y_, convtuneFloat, convtuneTensorNHWC,
                                          4, dims),
            convtuneStatusSuccess);
  EXPECT_EQ(FwdWorkspace(&size), convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr("yDesc layout"));

  convtuneTensorDescriptor_t unset = nullptr;
  ASSERT_EQ(convtuneCreateTensorDescriptor(&unset), convtuneStatusSuccess);
  EXPECT_EQ(convtuneConvolutionForwardGetWorkSpaceSize(handle_, w_, unset,
                                                       conv_, y_, &size),
            convtuneStatusNotInitialized);
  EXPECT_THAT(convtuneGetLastError(handle_),
              HasSubstr("xDesc has not been set"));
  convtuneDestroyTensorDescriptor(unset);
}

TEST_F(CApiTest, UnreachableDaemonIsUnavailableNamingTheAddress) {
  SetLayer();
  size_t size = 0;
  EXPECT_EQ(FwdWorkspace(&size), convtuneStatusUnavailable);
  EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr(address_));
  std::vector<float> x(static_cast<size_t>(n_) * c_ * h_ * w_size_, 0.5f);
  std::vector<float> w(static_cast<size_t>(k_) * c_ * 9, 0.25f);
  std::vector<float> y(static_cast<size_t>(n_) * k_ * h_ * w_size_);
  int returned = -1;
  convtuneConvAlgoPerf_t perf[4];
  EXPECT_EQ(convtuneFindConvolutionForwardAlgorithm(
                handle_, x_, x.data(), w_, w.data(), conv_, y_, y.data(), 4,
                &returned, perf, nullptr, 0, false),
            convtuneStatusUnavailable);
  EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr(address_));
  const float one = 1, zero = 0;
  EXPECT_EQ(
      convtuneConvolutionForward(handle_, &one, x_, x.data(), w_, w.data(),
                                 conv_, convtuneConvolutionFwdAlgoGEMM, &zero,
                                 y_, y.data(), nullptr, 0),
      convtuneStatusUnavailable);
}

TEST(ResolveTargetTest, Forms) {
  EXPECT_EQ(*ResolveTarget(""), UnixTarget(DefaultSocketPath()));
  EXPECT_EQ(*ResolveTarget("/run/x.sock"), "unix:/run/x.sock");
  EXPECT_EQ(*ResolveTarget("unix:/run/x.sock"), "unix:/run/x.sock");
  EXPECT_EQ(*ResolveTarget("localhost:7050"), "localhost:7050");
  EXPECT_EQ(ResolveTarget("x.sock").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveTarget("a b:1").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ClientTest, UnreachableDaemonIsUnavailable) {
  testing::TempDir dir;
  ClientOptions options;
  options.call_timeout = absl::Seconds(5);
  auto client = Client::Connect(dir.path() + "/none.sock", options);
  ASSERT_TRUE(client.ok()) << client.status();
  ConvProblem p;
  p.c = 3;
  p.k = 5;
  p.in = {1, 9, 9};
  absl::StatusOr<int64_t> ws = (*client)->WorkspaceSize(p);
  EXPECT_EQ(ws.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(ws.status().message()),
              HasSubstr("unix:" + dir.path()));
  EXPECT_EQ((*client)->DbStats().status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace convtune
