// The C API's errors, handle and descriptors.
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/c_api_internal.h"
#include "client/convtune.h"

namespace convtune::capi {
namespace {

thread_local std::string thread_last_error;

const char* kDimNames4[] = {"N", "C", "H", "W"};
const char* kDimNames5[] = {"N", "C", "D", "H", "W"};

const char* DimName(int nb_dims, int i) {
  return nb_dims == 5 ? kDimNames5[i] : kDimNames4[i];
}

bool ToDataType(convtuneDataType_t in, DataType* out) {
  switch (in) {
    case convtuneFloat:
      *out = DataType::kFp32;
      return true;
    case convtuneHalf:
      *out = DataType::kFp16;
      return true;
    case convtuneBFloat16:
      *out = DataType::kBf16;
      return true;
  }
  return false;
}

convtuneStatus_t SetTensor(convtuneTensorDescriptor_t desc,
                           convtuneDataType_t data_type, Layout layout,
                           int nb_dims, const int* dims) {
  if (desc == nullptr)
    return Fail(nullptr, convtuneStatusBadParm, "tensorDesc is NULL");
  DataType type;
  if (!ToDataType(data_type, &type)) {
    return Fail(nullptr, convtuneStatusInvalidValue,
                absl::StrCat(
                    "dataType ", static_cast<int>(data_type),
                    " is not convtuneFloat, convtuneHalf or convtuneBFloat16"));
  }
  for (int i = 0; i < nb_dims; ++i) {
    if (dims[i] < 1) {
      return Fail(nullptr, convtuneStatusBadParm,
                  absl::StrCat("tensor ", DimName(nb_dims, i),
                               " must be positive, got ", dims[i]));
    }
  }
  desc->type = type;
  desc->layout = layout;
  desc->nb_dims = nb_dims;
  desc->dims = {};
  for (int i = 0; i < nb_dims; ++i) desc->dims[i] = dims[i];
  desc->set = true;
  return convtuneStatusSuccess;
}

convtuneStatus_t CheckConvMode(convtuneConvolutionMode_t mode) {
  if (mode != convtuneConvolution) {
    return Fail(
        nullptr, convtuneStatusInvalidValue,
        absl::StrCat("c_mode ", static_cast<int>(mode),
                     " is not convtuneConvolution (the only mode supported)"));
  }
  return convtuneStatusSuccess;
}

}  // namespace

convtuneStatus_t Fail(convtuneHandle_t handle, convtuneStatus_t code,
                      std::string message) {
  if (handle != nullptr) handle->last_error = message;
  thread_last_error = std::move(message);
  return code;
}

convtuneStatus_t StatusCode(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return convtuneStatusSuccess;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return convtuneStatusBadParm;
    case absl::StatusCode::kNotFound:
      return convtuneStatusNotFound;
    case absl::StatusCode::kFailedPrecondition:
      return convtuneStatusUnsupportedOp;
    case absl::StatusCode::kResourceExhausted:
      return convtuneStatusResourceExhausted;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return convtuneStatusUnavailable;
    case absl::StatusCode::kDataLoss:
      return convtuneStatusDataLoss;
    case absl::StatusCode::kUnimplemented:
      return convtuneStatusNotImplemented;
    case absl::StatusCode::kInternal:
      return convtuneStatusInternalError;
    default:
      return convtuneStatusUnknownError;
  }
}

convtuneStatus_t FailWith(convtuneHandle_t handle, const absl::Status& status) {
  return Fail(handle, StatusCode(status), std::string(status.message()));
}

const char* ThreadLastError() { return thread_last_error.c_str(); }

}  // namespace convtune::capi

using convtune::capi::Fail;
using convtune::capi::Guard;

namespace {

// A handle on `address` whose GPU plans run on GPU `device` (-1:
// CONVTUNE_DEVICE, else 0).
convtuneStatus_t CreateHandle(convtuneHandle_t* handle, const char* address,
                              int device) {
  return Guard(nullptr, [&] {
    if (handle == nullptr)
      return Fail(nullptr, convtuneStatusBadParm, "handle is NULL");
    *handle = nullptr;
    convtune::ClientOptions options;
    if (device >= 0) {
      options.device_ordinal = device;
    } else if (const char* ordinal = std::getenv("CONVTUNE_DEVICE");
               ordinal != nullptr && *ordinal != '\0') {
      int n = -1;
      if (!absl::SimpleAtoi(ordinal, &n) || n < 0) {
        return Fail(nullptr, convtuneStatusBadParm,
                    absl::StrCat("CONVTUNE_DEVICE: expected a GPU ordinal "
                                 ">= 0, got '",
                                 ordinal, "'"));
      }
      options.device_ordinal = n;
    }
    auto client =
        convtune::Client::Connect(address == nullptr ? "" : address, options);
    if (!client.ok()) return convtune::capi::FailWith(nullptr, client.status());
    auto* h = new (std::nothrow) convtuneHandle;
    if (h == nullptr)
      return Fail(nullptr, convtuneStatusAllocFailed, "out of memory");
    h->client = std::move(*client);
    *handle = h;
    return convtuneStatusSuccess;
  });
}

}  // namespace

extern "C" {

const char* convtuneGetErrorString(convtuneStatus_t error) {
  switch (error) {
    case convtuneStatusSuccess:
      return "convtuneStatusSuccess";
    case convtuneStatusBadParm:
      return "convtuneStatusBadParm";
    case convtuneStatusNotInitialized:
      return "convtuneStatusNotInitialized";
    case convtuneStatusInvalidValue:
      return "convtuneStatusInvalidValue";
    case convtuneStatusAllocFailed:
      return "convtuneStatusAllocFailed";
    case convtuneStatusInternalError:
      return "convtuneStatusInternalError";
    case convtuneStatusNotImplemented:
      return "convtuneStatusNotImplemented";
    case convtuneStatusUnsupportedOp:
      return "convtuneStatusUnsupportedOp";
    case convtuneStatusUnavailable:
      return "convtuneStatusUnavailable";
    case convtuneStatusNotFound:
      return "convtuneStatusNotFound";
    case convtuneStatusResourceExhausted:
      return "convtuneStatusResourceExhausted";
    case convtuneStatusDataLoss:
      return "convtuneStatusDataLoss";
    case convtuneStatusUnknownError:
      return "convtuneStatusUnknownError";
  }
  return "unknown convtuneStatus_t value";
}

const char* convtuneGetLastError(convtuneHandle_t handle) {
  if (handle == nullptr) return convtune::capi::ThreadLastError();
  return handle->last_error.c_str();
}

convtuneStatus_t convtuneCreateWithAddress(convtuneHandle_t* handle,
                                           const char* address) {
  return CreateHandle(handle, address, -1);
}

convtuneStatus_t convtuneCreateForDevice(convtuneHandle_t* handle,
                                         const char* address, int device) {
  if (device < 0) {
    return Fail(
        nullptr, convtuneStatusBadParm,
        absl::StrCat("device: expected a GPU ordinal >= 0, got ", device));
  }
  return CreateHandle(handle, address, device);
}

convtuneStatus_t convtuneDestroy(convtuneHandle_t handle) {
  if (handle == nullptr)
    return Fail(nullptr, convtuneStatusBadParm, "handle is NULL");
  delete handle;
  return convtuneStatusSuccess;
}

convtuneStatus_t convtuneCreateTensorDescriptor(
    convtuneTensorDescriptor_t* tensorDesc) {
  if (tensorDesc == nullptr)
    return Fail(nullptr, convtuneStatusBadParm, "tensorDesc is NULL");
  *tensorDesc = new (std::nothrow) convtuneTensorDescriptor;
  if (*tensorDesc == nullptr)
    return Fail(nullptr, convtuneStatusAllocFailed, "out of memory");
  return convtuneStatusSuccess;
}

convtuneStatus_t convtuneSet4dTensorDescriptor(
    convtuneTensorDescriptor_t tensorDesc, convtuneDataType_t dataType, int n,
    int c, int h, int w) {
  const int dims[4] = {n, c, h, w};
  return convtune::capi::SetTensor(tensorDesc, dataType,
                                   convtune::Layout::kNCHW, 4, dims);
}

convtuneStatus_t convtuneSetTensorDescriptorEx(
    convtuneTensorDescriptor_t tensorDesc, convtuneDataType_t dataType,
    convtuneTensorLayout_t layout, int nbDims, const int* dims) {
  if (dims == nullptr)
    return Fail(nullptr, convtuneStatusBadParm, "dims is NULL");
  int want_dims = 0;
  convtune::Layout l = convtune::Layout::kNCHW;
  switch (layout) {
    case convtuneTensorNCHW:
      want_dims = 4;
      l = convtune::Layout::kNCHW;
      break;
    case convtuneTensorNHWC:
      want_dims = 4;
      l = convtune::Layout::kNHWC;
      break;
    case convtuneTensorNCDHW:
      want_dims = 5;
      l = convtune::Layout::kNCHW;
      break;
    case convtuneTensorNDHWC:
      want_dims = 5;
      l = convtune::Layout::kNHWC;
      break;
    default:
      return Fail(nullptr, convtuneStatusInvalidValue,
                  absl::StrCat("layout ", static_cast<int>(layout),
                               " is not a tensor layout"));
  }
  if (nbDims != want_dims) {
    return Fail(nullptr, convtuneStatusBadParm,
                absl::StrCat("nbDims is ", nbDims, " but the layout needs ",
                             want_dims));
  }
  return convtune::capi::SetTensor(tensorDesc, dataType, l, nbDims, dims);
}

convtuneStatus_t convtuneDestroyTensorDescriptor(
    convtuneTensorDescriptor_t tensorDesc) {
  if (tensorDesc == nullptr)
    return Fail(nullptr, convtuneStatusBadParm, "tensorDesc is NULL");
  delete tensorDesc;
  return convtuneStatusSuccess;
}

convtuneStatus_t convtuneCreateConvolutionDescriptor(
    convtuneConvolutionDescriptor_t* convDesc) {
  if (convDesc == nullptr)
    return Fail(nullptr, convtuneStatusBadParm, "convDesc is NULL");
  *convDesc = new (std::nothrow) convtuneConvolutionDescriptor;
  if (*convDesc == nullptr)
    return Fail(nullptr, convtuneStatusAllocFailed, "out of memory");
  return convtuneStatusSuccess;
}

convtuneStatus_t convtuneInitConvolutionDescriptor(
    convtuneConvolutionDescriptor_t convDesc, convtuneConvolutionMode_t c_mode,
    int pad_h, int pad_w, int stride_h, int stride_w, int dilation_h,
    int dilation_w) {
  const int pads[2] = {pad_h, pad_w};
  const int strides[2] = {stride_h, stride_w};
  const int dilations[2] = {dilation_h, dilation_w};
  return convtuneInitConvolutionNdDescriptor(convDesc, 2, pads, strides,
                                             dilations, c_mode);
}

convtuneStatus_t convtuneInitConvolutionNdDescriptor(
    convtuneConvolutionDescriptor_t convDesc, int spatialDim, const int* padA,
    const int* stridesA, const int* dilationA,
    convtuneConvolutionMode_t c_mode) {
  if (convDesc == nullptr)
    return Fail(nullptr, convtuneStatusBadParm, "convDesc is NULL");
  if (padA == nullptr)
    return Fail(nullptr, convtuneStatusBadParm, "padA is NULL");
  if (stridesA == nullptr)
    return Fail(nullptr, convtuneStatusBadParm, "stridesA is NULL");
  if (dilationA == nullptr)
    return Fail(nullptr, convtuneStatusBadParm, "dilationA is NULL");
  if (convtuneStatus_t s = convtune::capi::CheckConvMode(c_mode);
      s != convtuneStatusSuccess) {
    return s;
  }
  if (spatialDim != 2 && spatialDim != 3) {
    return Fail(nullptr, convtuneStatusBadParm,
                absl::StrCat("spatialDim must be 2 or 3, got ", spatialDim));
  }
  static const char* kAxis[] = {"d", "h", "w"};
  const int first = 3 - spatialDim;
  for (int i = 0; i < spatialDim; ++i) {
    const char* axis = kAxis[first + i];
    if (padA[i] < 0) {
      return Fail(nullptr, convtuneStatusBadParm,
                  absl::StrCat("pad_", axis, " must be >= 0, got ", padA[i]));
    }
    if (stridesA[i] < 1) {
      return Fail(
          nullptr, convtuneStatusBadParm,
          absl::StrCat("stride_", axis, " must be >= 1, got ", stridesA[i]));
    }
    if (dilationA[i] < 1) {
      return Fail(
          nullptr, convtuneStatusBadParm,
          absl::StrCat("dilation_", axis, " must be >= 1, got ", dilationA[i]));
    }
  }
  convDesc->spatial_dims = spatialDim;
  convDesc->pad = {0, 0, 0};
  convDesc->stride = {1, 1, 1};
  convDesc->dilation = {1, 1, 1};
  for (int i = 0; i < spatialDim; ++i) {
    convDesc->pad[first + i] = padA[i];
    convDesc->stride[first + i] = stridesA[i];
    convDesc->dilation[first + i] = dilationA[i];
  }
  convDesc->set = true;
  return convtuneStatusSuccess;
}

convtuneStatus_t convtuneSetConvolutionGroupCount(
    convtuneConvolutionDescriptor_t convDesc, int groupCount) {
  if (convDesc == nullptr)
    return Fail(nullptr, convtuneStatusBadParm, "convDesc is NULL");
  if (groupCount < 1) {
    return Fail(nullptr, convtuneStatusBadParm,
                absl::StrCat("groupCount must be >= 1, got ", groupCount));
  }
  convDesc->groups = groupCount;
  return convtuneStatusSuccess;
}

convtuneStatus_t convtuneGetConvolutionForwardOutputDim(
    convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t inputTensorDesc,
    const convtuneTensorDescriptor_t filterDesc, int* n, int* c, int* h,
    int* w) {
  return Guard(nullptr, [&] {
    if (n == nullptr || c == nullptr || h == nullptr || w == nullptr) {
      return Fail(nullptr, convtuneStatusBadParm,
                  "an output pointer (n, c, h or w) is NULL");
    }
    if (convDesc != nullptr && convDesc->set && convDesc->spatial_dims != 2) {
      return Fail(nullptr, convtuneStatusBadParm,
                  "convDesc is 3-D; this call is for 2-D");
    }
    convtune::ConvProblem p;
    convtuneStatus_t s = convtune::capi::MakeProblem(
        nullptr, convtune::Direction::kForward,
        {"inputTensorDesc", "filterDesc", nullptr}, inputTensorDesc, filterDesc,
        nullptr, convDesc, &p);
    if (s != convtuneStatusSuccess) return s;
    *n = static_cast<int>(p.n);
    *c = static_cast<int>(p.k);
    *h = static_cast<int>(p.out(1));
    *w = static_cast<int>(p.out(2));
    return convtuneStatusSuccess;
  });
}

convtuneStatus_t convtuneDestroyConvolutionDescriptor(
    convtuneConvolutionDescriptor_t convDesc) {
  if (convDesc == nullptr)
    return Fail(nullptr, convtuneStatusBadParm, "convDesc is NULL");
  delete convDesc;
  return convtuneStatusSuccess;
}

}  // extern "C"
