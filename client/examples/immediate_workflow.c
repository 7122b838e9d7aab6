/* The immediate workflow with convtune's C API: solution count, solutions
 * (best first), workspace of the chosen solution, compile, then an immediate
 * run on host buffers checked against a direct computation. Nothing is timed:
 * on a FindDb miss the daemon ranks solutions by estimate.
 *
 *   immediate_workflow_example [ADDRESS]     (default: the default socket)
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

/* The layer: a strided 3x3 convolution of a 24-channel 30x30 image into 48
 * channels. */
enum {
  N = 2,
  C = 24,
  H = 30,
  W = 30,
  K = 48,
  R = 3,
  S = 3,
  PAD = 1,
  STRIDE = 2,
  DIL = 1
};
enum { kChecks = 96 };

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

static const char* AlgoName(convtuneConvAlgorithm_t algo) {
  switch (algo) {
    case convtuneConvolutionAlgoGEMM:
      return "gemm";
    case convtuneConvolutionAlgoDirect:
      return "direct";
    case convtuneConvolutionAlgoFFT:
      return "fft";
    case convtuneConvolutionAlgoWinograd:
      return "winograd";
    case convtuneConvolutionAlgoImplicitGEMM:
      return "implicit_gemm";
  }
  return "?";
}

/* Counts outputs that were not written or differ from DirectOutput. */
static int CheckOutputs(const float* x, const float* w, const float* y, int yn,
                        int yc, int yh, int yw) {
  int failures = 0;
  const size_t y_count = (size_t)yn * yc * yh * yw;
  for (size_t i = 0; i < y_count; ++i) {
    if (!isfinite(y[i])) {
      fprintf(stderr, "y[%zu] was not written (%f)\n", i, y[i]);
      return 1;
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
  return failures;
}

int main(int argc, char** argv) {
  rng_state = (unsigned long long)time(NULL) * 2654435761ULL + 1;
  convtuneHandle_t handle;
  CHECK(NULL, convtuneCreateWithAddress(&handle, argc > 1 ? argv[1] : NULL));

  convtuneTensorDescriptor_t x_desc, w_desc, y_desc;
  convtuneConvolutionDescriptor_t conv_desc;
  CHECK(NULL, convtuneCreateTensorDescriptor(&x_desc));
  CHECK(NULL, convtuneCreateTensorDescriptor(&w_desc));
  CHECK(NULL, convtuneCreateTensorDescriptor(&y_desc));
  CHECK(NULL, convtuneCreateConvolutionDescriptor(&conv_desc));
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

  size_t solution_count = 0;
  CHECK(handle, convtuneConvolutionForwardGetSolutionCount(
                    handle, w_desc, x_desc, conv_desc, y_desc, &solution_count));
  if (solution_count < 1) {
    fprintf(stderr, "no solution applies\n");
    return 1;
  }
  convtuneConvSolution_t* solutions =
      Allocate(solution_count * sizeof(convtuneConvSolution_t));
  size_t actual = 0;
  CHECK(handle, convtuneConvolutionForwardGetSolution(
                    handle, w_desc, x_desc, conv_desc, y_desc, solution_count,
                    &actual, solutions));
  if (actual < 1) {
    fprintf(stderr, "GetSolution returned no solution\n");
    return 1;
  }
  printf("%zu solution(s), best first:\n", actual);
  for (size_t i = 0; i < actual; ++i) {
    printf("  %zu. id %-4llu %-32s %-14s %10.4f ms (%s)  %zu bytes\n", i + 1,
           (unsigned long long)solutions[i].solution_id,
           solutions[i].solver_name, AlgoName(solutions[i].algorithm),
           solutions[i].time, solutions[i].measured ? "measured" : "estimated",
           solutions[i].workspace_size);
  }

  /* The first solution is the best one the daemon knows of. */
  const convtuneConvSolution_t* selected = &solutions[0];
  size_t ws_size = 0;
  CHECK(handle, convtuneConvolutionForwardGetSolutionWorkspaceSize(
                    handle, w_desc, x_desc, conv_desc, y_desc,
                    selected->solution_id, &ws_size));
  int failures = 0;
  if (ws_size != selected->workspace_size) {
    fprintf(stderr, "workspace of solution %llu: %zu, the solution said %zu\n",
            (unsigned long long)selected->solution_id, ws_size,
            selected->workspace_size);
    ++failures;
  }
  void* workspace = Allocate(ws_size);
  CHECK(handle, convtuneConvolutionForwardCompileSolution(
                    handle, w_desc, x_desc, conv_desc, y_desc,
                    selected->solution_id));

  const size_t x_count = (size_t)N * C * H * W, w_count = (size_t)K * C * R * S;
  const size_t y_count = (size_t)yn * yc * yh * yw;
  float* x = Allocate(x_count * sizeof(float));
  float* w = Allocate(w_count * sizeof(float));
  float* y = Allocate(y_count * sizeof(float));
  for (size_t i = 0; i < x_count; ++i) x[i] = RandomFloat();
  for (size_t i = 0; i < w_count; ++i) w[i] = RandomFloat();
  for (size_t i = 0; i < y_count; ++i) y[i] = NAN;
  CHECK(handle, convtuneConvolutionForwardImmediate(
                    handle, w_desc, w, x_desc, x, conv_desc, y_desc, y,
                    workspace, ws_size, selected->solution_id));

  failures += CheckOutputs(x, w, y, yn, yc, yh, yw);
  printf("%s: solution %llu (%s), %d output(s) checked against a direct "
         "computation, %d failure(s)\n",
         failures == 0 ? "PASS" : "FAIL",
         (unsigned long long)selected->solution_id, selected->solver_name,
         kChecks, failures);

  free(workspace);
  free(solutions);
  free(x);
  free(w);
  free(y);
  CHECK(NULL, convtuneDestroyTensorDescriptor(x_desc));
  CHECK(NULL, convtuneDestroyTensorDescriptor(w_desc));
  CHECK(NULL, convtuneDestroyTensorDescriptor(y_desc));
  CHECK(NULL, convtuneDestroyConvolutionDescriptor(conv_desc));
  CHECK(NULL, convtuneDestroy(handle));
  return failures == 0 ? 0 : 1;
}
