/* The find workflow with convtune's C API: workspace size, find, then run the
 * fastest algorithm on host buffers and check it against a direct computation.
 *
 *   find_workflow_example [ADDRESS]     (default: the default socket)
 *
 * Exits 0 only if every call succeeds and every checked output matches. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/convtune.h"

#define CHECK(handle, call)                                                   \
  do {                                                                        \
    convtuneStatus_t status_ = (call);                                        \
    if (status_ != convtuneStatusSuccess) {                                   \
      fprintf(stderr, "%s failed: %s: %s\n", #call,                           \
              convtuneGetErrorString(status_), convtuneGetLastError(handle)); \
      exit(1);                                                                \
    }                                                                         \
  } while (0)

/* The layer: a 3x3 convolution of a 32-channel 28x28 image into 64 channels. */
enum {
  N = 2,
  C = 32,
  H = 28,
  W = 28,
  K = 64,
  R = 3,
  S = 3,
  PAD = 1,
  STRIDE = 1,
  DIL = 1
};
enum { kRequestAlgoCount = 4, kChecks = 64 };

static unsigned long long rng_state;

static unsigned int NextRandom(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (unsigned int)(rng_state >> 32);
}

static float RandomFloat(void) {
  return (float)(NextRandom() % 20001) / 10000.0f - 1.0f;
}

static double DirectOutput(const float* x, const float* w, int n, int k, int oh,
                           int ow) {
  double sum = 0;
  for (int c = 0; c < C; ++c) {
    for (int r = 0; r < R; ++r) {
      for (int s = 0; s < S; ++s) {
        const int ih = oh * STRIDE - PAD + r * DIL;
        const int iw = ow * STRIDE - PAD + s * DIL;
        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
        sum += (double)x[((n * C + c) * H + ih) * W + iw] *
               w[((k * C + c) * R + r) * S + s];
      }
    }
  }
  return sum;
}

static void* Allocate(size_t bytes) {
  void* p = malloc(bytes > 0 ? bytes : 1);
  if (p == NULL) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  return p;
}

int main(int argc, char** argv) {
  rng_state = (unsigned long long)time(NULL) * 2654435761ULL + 1;
  convtuneHandle_t handle;
  CHECK(NULL, convtuneCreateWithAddress(&handle, argc > 1 ? argv[1] : NULL));

  convtuneTensorDescriptor_t x_desc, w_desc, y_desc;
  convtuneConvolutionDescriptor_t conv_desc;
  CHECK(handle, convtuneCreateTensorDescriptor(&x_desc));
  CHECK(handle, convtuneCreateTensorDescriptor(&w_desc));
  CHECK(handle, convtuneCreateTensorDescriptor(&y_desc));
  CHECK(handle, convtuneCreateConvolutionDescriptor(&conv_desc));
  CHECK(NULL, convtuneSet4dTensorDescriptor(x_desc, convtuneFloat, N, C, H, W));
  CHECK(NULL, convtuneSet4dTensorDescriptor(w_desc, convtuneFloat, K, C, R, S));
  CHECK(NULL,
        convtuneInitConvolutionDescriptor(conv_desc, convtuneConvolution, PAD,
                                          PAD, STRIDE, STRIDE, DIL, DIL));
  int yn, yc, yh, yw;
  CHECK(NULL, convtuneGetConvolutionForwardOutputDim(conv_desc, x_desc, w_desc,
                                                     &yn, &yc, &yh, &yw));
  CHECK(NULL,
        convtuneSet4dTensorDescriptor(y_desc, convtuneFloat, yn, yc, yh, yw));

  const size_t x_count = (size_t)N * C * H * W, w_count = (size_t)K * C * R * S;
  const size_t y_count = (size_t)yn * yc * yh * yw;
  float* x = Allocate(x_count * sizeof(float));
  float* w = Allocate(w_count * sizeof(float));
  float* y = Allocate(y_count * sizeof(float));
  for (size_t i = 0; i < x_count; ++i) x[i] = RandomFloat();
  for (size_t i = 0; i < w_count; ++i) w[i] = RandomFloat();
  for (size_t i = 0; i < y_count; ++i) y[i] = NAN;

  size_t max_workspace = 0;
  CHECK(handle, convtuneConvolutionForwardGetWorkSpaceSize(
                    handle, w_desc, x_desc, conv_desc, y_desc, &max_workspace));
  void* workspace = Allocate(max_workspace);

  /* Not exhaustive: a FindDb answer from an earlier run is as good as a new
   * one. */
  convtuneConvAlgoPerf_t perf_results[kRequestAlgoCount];
  int returned = 0;
  CHECK(handle, convtuneFindConvolutionForwardAlgorithm(
                    handle, x_desc, x, w_desc, w, conv_desc, y_desc, y,
                    kRequestAlgoCount, &returned, perf_results, workspace,
                    max_workspace, false));
  if (returned < 1) {
    fprintf(stderr, "find returned no algorithm\n");
    return 1;
  }
  printf("%d result(s), fastest first (workspace offered: %zu bytes):\n",
         returned, max_workspace);
  for (int i = 0; i < returned; ++i) {
    printf("  %d. algo %d  %-32s  id %llu  %.4f ms  %zu bytes\n", i + 1,
           (int)perf_results[i].fwd_algo, perf_results[i].solver_name,
           (unsigned long long)perf_results[i].solution_id,
           perf_results[i].time, perf_results[i].memory);
  }

  /* Keep only the workspace the chosen algorithm needs. */
  free(workspace);
  workspace = Allocate(perf_results[0].memory);
  const float alpha = 1.0f, beta = 0.0f;
  CHECK(handle, convtuneConvolutionForward(handle, &alpha, x_desc, x, w_desc, w,
                                           conv_desc, perf_results[0].fwd_algo,
                                           &beta, y_desc, y, workspace,
                                           perf_results[0].memory));

  int failures = 0;
  for (size_t i = 0; i < y_count; ++i) {
    if (!isfinite(y[i])) {
      fprintf(stderr, "y[%zu] was not written (%f)\n", i, y[i]);
      ++failures;
      break;
    }
  }
  for (int i = 0; i < kChecks; ++i) {
    const int n = NextRandom() % yn, k = NextRandom() % yc;
    const int oh = NextRandom() % yh, ow = NextRandom() % yw;
    const double want = DirectOutput(x, w, n, k, oh, ow);
    const double got = y[((n * yc + k) * yh + oh) * yw + ow];
    if (fabs(got - want) > 1e-5 * (fabs(want) + C * R * S)) {
      fprintf(stderr, "y[%d,%d,%d,%d] = %f, expected %f\n", n, k, oh, ow, got,
              want);
      ++failures;
    }
  }
  printf(
      "%s: %d output(s) checked against a direct computation, %d "
      "mismatch(es)\n",
      failures == 0 ? "PASS" : "FAIL", kChecks, failures);

  free(workspace);
  free(x);
  free(w);
  free(y);
  CHECK(handle, convtuneDestroyTensorDescriptor(x_desc));
  CHECK(handle, convtuneDestroyTensorDescriptor(w_desc));
  CHECK(handle, convtuneDestroyTensorDescriptor(y_desc));
  CHECK(handle, convtuneDestroyConvolutionDescriptor(conv_desc));
  CHECK(NULL, convtuneDestroy(handle));
  return failures == 0 ? 0 : 1;
}
