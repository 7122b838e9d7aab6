/* The convtune C API: MIOpen's find workflow (descriptors, workspace size,
 * find, convolution) and immediate workflow (solution count, solutions,
 * solution workspace, compile, immediate run) answered by the convtuned
 * daemon, with the chosen plan run here: on host buffers when the daemon runs
 * on the CPU, on device memory of the same GPU (the primary context of
 * CONVTUNE_DEVICE's ordinal, default 0) when it runs on cuda or hip; the
 * calls return once the output is written. C99. A handle must not be used by
 * two threads at once; distinct handles and descriptors are independent. */
#ifndef CONVTUNE_CLIENT_CONVTUNE_H_
#define CONVTUNE_CLIENT_CONVTUNE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  convtuneStatusSuccess = 0,
  convtuneStatusBadParm = 1,        /* a NULL or inconsistent argument */
  convtuneStatusNotInitialized = 2, /* a descriptor used before it was set */
  convtuneStatusInvalidValue = 3,   /* an out-of-range enum value */
  convtuneStatusAllocFailed = 4,
  convtuneStatusInternalError = 5,
  convtuneStatusNotImplemented = 6,
  convtuneStatusUnsupportedOp = 7, /* no solver applies to the problem */
  convtuneStatusUnavailable = 8,   /* the daemon cannot be reached */
  convtuneStatusNotFound = 9,
  convtuneStatusResourceExhausted = 10, /* workspace or memory too small */
  convtuneStatusDataLoss = 11,
  convtuneStatusUnknownError = 12,
} convtuneStatus_t;

typedef struct convtuneHandle* convtuneHandle_t;
typedef struct convtuneTensorDescriptor* convtuneTensorDescriptor_t;
typedef struct convtuneConvolutionDescriptor* convtuneConvolutionDescriptor_t;

typedef enum {
  convtuneHalf = 0,
  convtuneFloat = 1,
  convtuneBFloat16 = 5
} convtuneDataType_t;

typedef enum {
  convtuneTensorNCHW = 0,
  convtuneTensorNHWC = 1,
  convtuneTensorNCDHW = 2,
  convtuneTensorNDHWC = 3,
} convtuneTensorLayout_t;

typedef enum { convtuneConvolution = 0 } convtuneConvolutionMode_t;

/* MIOpen's numbering; 4 is unused. */
typedef enum {
  convtuneConvolutionFwdAlgoGEMM = 0,
  convtuneConvolutionFwdAlgoDirect = 1,
  convtuneConvolutionFwdAlgoFFT = 2,
  convtuneConvolutionFwdAlgoWinograd = 3,
  convtuneConvolutionFwdAlgoImplicitGEMM = 5,
} convtuneConvFwdAlgorithm_t;

typedef enum {
  convtuneConvolutionBwdDataAlgoGEMM = 0,
  convtuneConvolutionBwdDataAlgoDirect = 1,
  convtuneConvolutionBwdDataAlgoFFT = 2,
  convtuneConvolutionBwdDataAlgoWinograd = 3,
  convtuneConvolutionBwdDataAlgoImplicitGEMM = 5,
} convtuneConvBwdDataAlgorithm_t;

typedef enum {
  convtuneConvolutionBwdWeightsAlgoGEMM = 0,
  convtuneConvolutionBwdWeightsAlgoDirect = 1,
  convtuneConvolutionBwdWeightsAlgoFFT = 2,
  convtuneConvolutionBwdWeightsAlgoWinograd = 3,
  convtuneConvolutionBwdWeightsAlgoImplicitGEMM = 5,
} convtuneConvBwdWeightsAlgorithm_t;

/* Any direction's algorithm family, MIOpen's numbering (4 is unused). */
typedef enum {
  convtuneConvolutionAlgoGEMM = 0,
  convtuneConvolutionAlgoDirect = 1,
  convtuneConvolutionAlgoFFT = 2,
  convtuneConvolutionAlgoWinograd = 3,
  convtuneConvolutionAlgoImplicitGEMM = 5,
} convtuneConvAlgorithm_t;

/* Find modes, numbered as MIOpen's MIOPEN_FIND_MODE (4 is reserved). */
typedef enum {
  convtuneFindModeDefault = 0, /* the daemon's default (CONVTUNE_FIND_MODE) */
  convtuneFindModeNormal = 1,  /* time every applicable solver */
  convtuneFindModeFast = 2,    /* FindDb, else the immediate-mode fallback */
  convtuneFindModeHybrid = 3,  /* FindDb, else a full find */
  convtuneFindModeDynamicHybrid = 5, /* FindDb, else dynamic solvers only */
  convtuneFindModeTrustVerify = 6,   /* system FindDb hits are re-timed */
  convtuneFindModeTrustVerifyFull = 7,
} convtuneFindMode_t;

/* Where an immediate-mode solution's time comes from. */
typedef enum {
  convtuneSolutionMeasured = 1,  /* a find timed it on this device */
  convtuneSolutionLearned = 2,   /* predicted from this device's measurements
                                    of the problem's class */
  convtuneSolutionEstimated = 3, /* nothing of its class measured here */
} convtuneSolutionProvenance_t;

/* One immediate-mode solution. `time` is in ms: measured by a find when
 * `measured` is 1, else an estimate of the fallback. `confidence` is 1 for
 * measured times; for estimates, from 0 (no measured support) towards 1
 * (close, consistent measurements). */
typedef struct {
  float time;
  size_t workspace_size;
  uint64_t solution_id;
  convtuneConvAlgorithm_t algorithm;
  int measured;
  char solver_name[64];
  convtuneSolutionProvenance_t provenance;
  float confidence;
} convtuneConvSolution_t;

/* The result struct's unnamed union (MIOpen's shape) is standard from C11;
 * GCC and Clang accept it in C99 and this keeps -pedantic quiet. */
#if defined(__GNUC__) && !defined(__cplusplus)
#define CONVTUNE_UNNAMED_UNION __extension__ union
#else
#define CONVTUNE_UNNAMED_UNION union
#endif

/* One result of a find call: the algorithm family, its time in ms, the
 * workspace bytes it needs, and the daemon's solver. */
typedef struct {
  CONVTUNE_UNNAMED_UNION {
    convtuneConvFwdAlgorithm_t fwd_algo;
    convtuneConvBwdWeightsAlgorithm_t bwd_weights_algo;
    convtuneConvBwdDataAlgorithm_t bwd_data_algo;
  };
  float time;
  size_t memory;
  uint64_t solution_id;
  char solver_name[64];
} convtuneConvAlgoPerf_t;

/* A static string for every status. */
const char* convtuneGetErrorString(convtuneStatus_t error);

/* The message of the last failed call on `handle` (naming the bad argument or
 * field), or "" if none failed. With a NULL handle: the last failure of a
 * descriptor call on this thread. Valid until the next call on the handle. */
const char* convtuneGetLastError(convtuneHandle_t handle);

/* `address`: "unix:/path", "/abs/path" or "host:port"; NULL or "" means the
 * default socket ($CONVTUNE_SOCKET, $XDG_RUNTIME_DIR/convtune/convtuned.sock,
 * /tmp/convtune-UID/convtuned.sock). Connects lazily: an absent daemon shows
 * up as convtuneStatusUnavailable on the first call that needs it. */
convtuneStatus_t convtuneCreateWithAddress(convtuneHandle_t* handle,
                                           const char* address);
/* As convtuneCreateWithAddress, with GPU plans run on GPU `device` (an
 * ordinal >= 0) instead of CONVTUNE_DEVICE's. */
convtuneStatus_t convtuneCreateForDevice(convtuneHandle_t* handle,
                                         const char* address, int device);
convtuneStatus_t convtuneDestroy(convtuneHandle_t handle);

convtuneStatus_t convtuneCreateTensorDescriptor(
    convtuneTensorDescriptor_t* tensorDesc);
/* NCHW with logical sizes n, c, h, w. */
convtuneStatus_t convtuneSet4dTensorDescriptor(
    convtuneTensorDescriptor_t tensorDesc, convtuneDataType_t dataType, int n,
    int c, int h, int w);
/* `dims` holds nbDims (4 or 5) logical sizes N, C, (D,) H, W whatever the
 * layout; layout NCHW/NHWC for 4 dims, NCDHW/NDHWC for 5. */
convtuneStatus_t convtuneSetTensorDescriptorEx(
    convtuneTensorDescriptor_t tensorDesc, convtuneDataType_t dataType,
    convtuneTensorLayout_t layout, int nbDims, const int* dims);
convtuneStatus_t convtuneDestroyTensorDescriptor(
    convtuneTensorDescriptor_t tensorDesc);

convtuneStatus_t convtuneCreateConvolutionDescriptor(
    convtuneConvolutionDescriptor_t* convDesc);
convtuneStatus_t convtuneInitConvolutionDescriptor(
    convtuneConvolutionDescriptor_t convDesc, convtuneConvolutionMode_t c_mode,
    int pad_h, int pad_w, int stride_h, int stride_w, int dilation_h,
    int dilation_w);
/* spatialDim 2 (H, W) or 3 (D, H, W); each array holds spatialDim values. */
convtuneStatus_t convtuneInitConvolutionNdDescriptor(
    convtuneConvolutionDescriptor_t convDesc, int spatialDim, const int* padA,
    const int* stridesA, const int* dilationA,
    convtuneConvolutionMode_t c_mode);
convtuneStatus_t convtuneSetConvolutionGroupCount(
    convtuneConvolutionDescriptor_t convDesc, int groupCount);
/* The forward output of a 4-D input and filter (filter dims: K, C/G, R, S). */
convtuneStatus_t convtuneGetConvolutionForwardOutputDim(
    convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t inputTensorDesc,
    const convtuneTensorDescriptor_t filterDesc, int* n, int* c, int* h,
    int* w);
convtuneStatus_t convtuneDestroyConvolutionDescriptor(
    convtuneConvolutionDescriptor_t convDesc);

/* The largest workspace any applicable solver needs, in bytes. */
convtuneStatus_t convtuneConvolutionForwardGetWorkSpaceSize(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t wDesc,
    const convtuneTensorDescriptor_t xDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t yDesc, size_t* workSpaceSize);
convtuneStatus_t convtuneConvolutionBackwardDataGetWorkSpaceSize(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const convtuneTensorDescriptor_t wDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dxDesc, size_t* workSpaceSize);
convtuneStatus_t convtuneConvolutionBackwardWeightsGetWorkSpaceSize(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const convtuneTensorDescriptor_t xDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dwDesc, size_t* workSpaceSize);

/* Asks the daemon to time the applicable solvers (or answer from its FindDb);
 * the daemon benchmarks on its own buffers, so the data pointers are only
 * checked for NULL. Solutions needing more than workSpaceSize bytes are left
 * out. Fills up to requestAlgoCount results, fastest first, and remembers
 * them in the handle for the convolution calls. */
convtuneStatus_t convtuneFindConvolutionForwardAlgorithm(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t xDesc,
    const void* x, const convtuneTensorDescriptor_t wDesc, const void* w,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t yDesc, void* y, const int requestAlgoCount,
    int* returnedAlgoCount, convtuneConvAlgoPerf_t* perfResults,
    void* workSpace, size_t workSpaceSize, bool exhaustiveSearch);
convtuneStatus_t convtuneFindConvolutionBackwardDataAlgorithm(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const void* dy, const convtuneTensorDescriptor_t wDesc, const void* w,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dxDesc, void* dx,
    const int requestAlgoCount, int* returnedAlgoCount,
    convtuneConvAlgoPerf_t* perfResults, void* workSpace, size_t workSpaceSize,
    bool exhaustiveSearch);
convtuneStatus_t convtuneFindConvolutionBackwardWeightsAlgorithm(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const void* dy, const convtuneTensorDescriptor_t xDesc, const void* x,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dwDesc, void* dw,
    const int requestAlgoCount, int* returnedAlgoCount,
    convtuneConvAlgoPerf_t* perfResults, void* workSpace, size_t workSpaceSize,
    bool exhaustiveSearch);

/* Runs the fastest solution of `algo`'s family that fits in workSpaceSize
 * (from this handle's find results, else the daemon's FindDb) on the
 * buffers here: out = alpha * conv + beta * out, alpha and beta pointing to
 * host floats (GPU plans: 1 and 0 only, else NotImplemented). ResourceExhausted
 * when no solution of the family fits the workspace; NotFound when the family
 * has no solution for the problem. */
convtuneStatus_t convtuneConvolutionForward(
    convtuneHandle_t handle, const void* alpha,
    const convtuneTensorDescriptor_t xDesc, const void* x,
    const convtuneTensorDescriptor_t wDesc, const void* w,
    const convtuneConvolutionDescriptor_t convDesc,
    convtuneConvFwdAlgorithm_t algo, const void* beta,
    const convtuneTensorDescriptor_t yDesc, void* y, void* workSpace,
    size_t workSpaceSize);
convtuneStatus_t convtuneConvolutionBackwardData(
    convtuneHandle_t handle, const void* alpha,
    const convtuneTensorDescriptor_t dyDesc, const void* dy,
    const convtuneTensorDescriptor_t wDesc, const void* w,
    const convtuneConvolutionDescriptor_t convDesc,
    convtuneConvBwdDataAlgorithm_t algo, const void* beta,
    const convtuneTensorDescriptor_t dxDesc, void* dx, void* workSpace,
    size_t workSpaceSize);
convtuneStatus_t convtuneConvolutionBackwardWeights(
    convtuneHandle_t handle, const void* alpha,
    const convtuneTensorDescriptor_t dyDesc, const void* dy,
    const convtuneTensorDescriptor_t xDesc, const void* x,
    const convtuneConvolutionDescriptor_t convDesc,
    convtuneConvBwdWeightsAlgorithm_t algo, const void* beta,
    const convtuneTensorDescriptor_t dwDesc, void* dw, void* workSpace,
    size_t workSpaceSize);

/* The find mode of the FindConvolution*Algorithm calls (and of the implicit
 * find of a convolution call that no find preceded) on this handle. A new
 * handle has convtuneFindModeDefault. BadParm for 4 (reserved) and values
 * that are no mode. */
convtuneStatus_t convtuneSetFindMode(convtuneHandle_t handle,
                                     convtuneFindMode_t findMode);
convtuneStatus_t convtuneGetFindMode(convtuneHandle_t handle,
                                     convtuneFindMode_t* findMode);

/* GPU plans of this handle's convolution calls run on `stream` (a
 * cudaStream_t / CUstream, or hipStream_t, of the device's primary context,
 * which the caller keeps alive; CU_STREAM_LEGACY, (void*)1, for CUDA's
 * legacy default stream), and the calls return once the work is
 * queued there, so that the caller orders what follows on that stream (a
 * framework's current stream; CUDA graph capture works). NULL, the default:
 * the library's own stream, and the calls return once the output is
 * written. CPU plans ignore it. */
convtuneStatus_t convtuneSetStream(convtuneHandle_t handle, void* stream);

/* Deadlines of this handle's questions to the daemon, in seconds: `call`
 * for every call but finds (default 30), `find` for the find calls and the
 * implicit find of a convolution call (default 600; tuning can take
 * minutes). 0 keeps a deadline at its default. A call past its deadline
 * fails with Unavailable, its message saying the daemon "did not answer in
 * time". BadParm for a negative or non-finite value. */
convtuneStatus_t convtuneSetTimeouts(convtuneHandle_t handle, double call,
                                     double find);

/* The daemon's device key ("cuda-sm_90-cu132-...", "cpu-x86-64-v4-..."),
 * NUL-terminated in `key` (`size` bytes; ResourceExhausted when too short):
 * which device its plans are for. Asked once per handle. */
convtuneStatus_t convtuneGetDeviceKey(convtuneHandle_t handle, char* key,
                                      size_t size);

/* Immediate mode. These never time anything: solutions come from the
 * daemon's FindDb (measured) or, on a miss, a fallback ranking (estimated).
 *
 * The number of applicable solutions of the problem. */
convtuneStatus_t convtuneConvolutionForwardGetSolutionCount(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t wDesc,
    const convtuneTensorDescriptor_t xDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t yDesc, size_t* solutionCount);
/* Fills up to maxSolutionCount (>= 1) solutions, best first. */
convtuneStatus_t convtuneConvolutionForwardGetSolution(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t wDesc,
    const convtuneTensorDescriptor_t xDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t yDesc, size_t maxSolutionCount,
    size_t* solutionCount, convtuneConvSolution_t* solutions);
/* NotFound when solution_id names no solver; UnsupportedOp (or BadParm) when
 * the solver does not apply to the problem. */
convtuneStatus_t convtuneConvolutionForwardGetSolutionWorkspaceSize(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t wDesc,
    const convtuneTensorDescriptor_t xDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t yDesc, uint64_t solution_id,
    size_t* workSpaceSize);
/* Optional: compiles the solution's kernels and keeps its plan in the
 * handle, so the first Immediate call asks the daemon nothing. */
convtuneStatus_t convtuneConvolutionForwardCompileSolution(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t wDesc,
    const convtuneTensorDescriptor_t xDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t yDesc, uint64_t solution_id);
/* y = conv(x, w) with the solution. ResourceExhausted when workSpaceSize is
 * below the solution's workspace. */
convtuneStatus_t convtuneConvolutionForwardImmediate(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t wDesc,
    const void* w, const convtuneTensorDescriptor_t xDesc, const void* x,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t yDesc, void* y, void* workSpace,
    size_t workSpaceSize, uint64_t solution_id);

convtuneStatus_t convtuneConvolutionBackwardDataGetSolutionCount(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const convtuneTensorDescriptor_t wDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dxDesc, size_t* solutionCount);
convtuneStatus_t convtuneConvolutionBackwardDataGetSolution(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const convtuneTensorDescriptor_t wDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dxDesc, size_t maxSolutionCount,
    size_t* solutionCount, convtuneConvSolution_t* solutions);
convtuneStatus_t convtuneConvolutionBackwardDataGetSolutionWorkspaceSize(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const convtuneTensorDescriptor_t wDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dxDesc, uint64_t solution_id,
    size_t* workSpaceSize);
convtuneStatus_t convtuneConvolutionBackwardDataCompileSolution(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const convtuneTensorDescriptor_t wDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dxDesc, uint64_t solution_id);
/* dx = the backward-data convolution of dy and w. */
convtuneStatus_t convtuneConvolutionBackwardDataImmediate(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const void* dy, const convtuneTensorDescriptor_t wDesc, const void* w,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dxDesc, void* dx, void* workSpace,
    size_t workSpaceSize, uint64_t solution_id);

convtuneStatus_t convtuneConvolutionBackwardWeightsGetSolutionCount(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const convtuneTensorDescriptor_t xDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dwDesc, size_t* solutionCount);
convtuneStatus_t convtuneConvolutionBackwardWeightsGetSolution(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const convtuneTensorDescriptor_t xDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dwDesc, size_t maxSolutionCount,
    size_t* solutionCount, convtuneConvSolution_t* solutions);
convtuneStatus_t convtuneConvolutionBackwardWeightsGetSolutionWorkspaceSize(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const convtuneTensorDescriptor_t xDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dwDesc, uint64_t solution_id,
    size_t* workSpaceSize);
convtuneStatus_t convtuneConvolutionBackwardWeightsCompileSolution(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const convtuneTensorDescriptor_t xDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dwDesc, uint64_t solution_id);
/* dw = the backward-weights convolution of dy and x. */
convtuneStatus_t convtuneConvolutionBackwardWeightsImmediate(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const void* dy, const convtuneTensorDescriptor_t xDesc, const void* x,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dwDesc, void* dw, void* workSpace,
    size_t workSpaceSize, uint64_t solution_id);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CONVTUNE_CLIENT_CONVTUNE_H_ */
