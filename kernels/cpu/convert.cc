#include "kernels/cpu/convert.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/parallel.h"
#include "kernels/numeric.h"
#include "kernels/problem.h"

namespace convtune::cpu {
namespace {

float Load(const void* p, int type, int64_t i) {
  switch (static_cast<DataType>(type)) {
    case DataType::kFp32:
      return static_cast<const float*>(p)[i];
    case DataType::kFp16:
      return HalfToFloat(static_cast<const uint16_t*>(p)[i]);
    case DataType::kBf16:
      return Bf16ToFloat(static_cast<const uint16_t*>(p)[i]);
  }
  return 0.f;
}

void Store(void* p, int type, int64_t i, float v) {
  switch (static_cast<DataType>(type)) {
    case DataType::kFp32:
      static_cast<float*>(p)[i] = v;
      break;
    case DataType::kFp16:
      static_cast<uint16_t*>(p)[i] = FloatToHalf(v);
      break;
    case DataType::kBf16:
      static_cast<uint16_t*>(p)[i] = FloatToBf16(v);
      break;
  }
}

bool KnownType(int64_t t) { return t >= 1 && t <= 3; }

}  // namespace

absl::Status ConvertKernel(const v1::KernelStep& step,
                           const std::vector<void*>& buffers) {
  if (buffers.size() != 2 || step.scalars_size() != 3 || step.scalars(0) < 0 ||
      !KnownType(step.scalars(1)) || !KnownType(step.scalars(2))) {
    return absl::InvalidArgumentError(
        absl::StrCat(kConvertKernel,
                     ": needs 2 buffers and scalars (count, src, dst type)"));
  }
  const int64_t count = step.scalars(0);
  const int src_type = static_cast<int>(step.scalars(1));
  const int dst_type = static_cast<int>(step.scalars(2));
  const void* src = buffers[0];
  void* dst = buffers[1];
  if (src_type == dst_type) {
    std::memmove(dst, src,
                 count * ElementBytes(static_cast<DataType>(src_type)));
    return absl::OkStatus();
  }
  ParallelFor(count, 1 << 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      Store(dst, dst_type, i, Load(src, src_type, i));
  });
  return absl::OkStatus();
}

v1::KernelStep MakeConvertStep(int64_t count, int src_type, v1::BufferRef src,
                               int dst_type, v1::BufferRef dst) {
  v1::KernelStep step;
  step.set_kernel(std::string(kConvertKernel));
  *step.add_buffers() = src;
  *step.add_buffers() = dst;
  step.add_scalars(count);
  step.add_scalars(src_type);
  step.add_scalars(dst_type);
  return step;
}

}  // namespace convtune::cpu
