// C API descriptors for a ConvProblem, for tests that drive the C API
// against a daemon. Not thread-safe (one owner).
#ifndef CONVTUNE_TESTS_CLIENT_C_DESCRIPTORS_H_
#define CONVTUNE_TESTS_CLIENT_C_DESCRIPTORS_H_

#include "client/convtune.h"
#include "kernels/problem.h"

namespace convtune {

// Descriptors for `p` (NCHW, 2-D) through the C API.
struct CDescriptors {
  explicit CDescriptors(const ConvProblem& p) {
    const convtuneDataType_t type = p.type == DataType::kFp32 ? convtuneFloat
                                    : p.type == DataType::kFp16
                                        ? convtuneHalf
                                        : convtuneBFloat16;
    convtuneCreateTensorDescriptor(&x);
    convtuneCreateTensorDescriptor(&w);
    convtuneCreateTensorDescriptor(&y);
    convtuneCreateConvolutionDescriptor(&conv);
    ok = convtuneSet4dTensorDescriptor(x, type, p.n, p.c, p.in[1], p.in[2]) ==
             0 &&
         convtuneSet4dTensorDescriptor(w, type, p.k, p.c_per_group(),
                                       p.filter[1], p.filter[2]) == 0 &&
         convtuneSet4dTensorDescriptor(y, type, p.n, p.k, p.out(1), p.out(2)) ==
             0 &&
         convtuneInitConvolutionDescriptor(conv, convtuneConvolution, p.pad[1],
                                           p.pad[2], p.stride[1], p.stride[2],
                                           p.dilation[1], p.dilation[2]) == 0 &&
         convtuneSetConvolutionGroupCount(conv, p.groups) == 0;
  }
  ~CDescriptors() {
    convtuneDestroyTensorDescriptor(x);
    convtuneDestroyTensorDescriptor(w);
    convtuneDestroyTensorDescriptor(y);
    convtuneDestroyConvolutionDescriptor(conv);
  }
  bool ok = false;
  convtuneTensorDescriptor_t x = nullptr, w = nullptr, y = nullptr;
  convtuneConvolutionDescriptor_t conv = nullptr;
};

}  // namespace convtune

#endif  // CONVTUNE_TESTS_CLIENT_C_DESCRIPTORS_H_
