#include "kernels/device.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace convtune {

absl::Status Device::CopyFromDeviceAt(void* dst, const DeviceBuffer& src,
                                      int64_t offset, int64_t bytes) {
  if (offset < 0 || bytes < 0 || offset + bytes > src.size()) {
    return absl::OutOfRangeError(absl::StrCat("copy of ", bytes, " bytes at ",
                                              offset, " from a buffer of ",
                                              src.size()));
  }
  std::vector<char> host(offset + bytes);
  RETURN_IF_ERROR(CopyFromDevice(host.data(), src, offset + bytes));
  std::memcpy(dst, host.data() + offset, bytes);
  return absl::OkStatus();
}

absl::Status Device::Fill(DeviceBuffer* dst, uint32_t pattern,
                          int element_bytes, int64_t count) {
  if ((element_bytes != 2 && element_bytes != 4) || count < 0 ||
      count * element_bytes > dst->size()) {
    return absl::OutOfRangeError(
        absl::StrCat("fill of ", count, " x ", element_bytes,
                     " bytes into a buffer of ", dst->size()));
  }
  std::vector<char> host(count * element_bytes);
  for (int64_t i = 0; i < count; ++i) {
    if (element_bytes == 4) {
      std::memcpy(host.data() + 4 * i, &pattern, 4);
    } else {
      const uint16_t half = static_cast<uint16_t>(pattern);
      std::memcpy(host.data() + 2 * i, &half, 2);
    }
  }
  return CopyToDevice(dst, host.data(), count * element_bytes);
}

}  // namespace convtune
