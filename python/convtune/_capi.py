"""ctypes over libconvtune's C API (client/convtune.h): runs a daemon's
solution on buffers of this process (host memory when the daemon runs on the
CPU). The C library keeps each solution's plan after its first use, so a
problem seen before runs without any RPC."""

import ctypes
import ctypes.util
import os
import threading
from typing import Optional

from convtune._problem import Problem

_LAYOUT = {("NCHW", 2): 0, ("NHWC", 2): 1, ("NCHW", 3): 2, ("NHWC", 3): 3}
_DTYPE = {"fp16": 0, "fp32": 1, "bf16": 5}
_STATUS = {0: "Success", 1: "BadParm", 2: "NotInitialized", 3: "InvalidValue",
           4: "AllocFailed", 5: "InternalError", 6: "NotImplemented",
           7: "UnsupportedOp", 8: "Unavailable", 9: "NotFound",
           10: "ResourceExhausted", 11: "DataLoss", 12: "UnknownError"}
UNAVAILABLE = 8


class CApiError(RuntimeError):
    """A failed C API call: `status` is the convtuneStatus_t value."""

    def __init__(self, call: str, status: int, message: str):
        super().__init__(f"{call}: {_STATUS.get(status, status)}: {message}")
        self.status = status


def library_path() -> str:
    """$CONVTUNE_LIBRARY, else libconvtune.so beside this package (a build
    tree or an install), else the system's."""
    env = os.environ.get("CONVTUNE_LIBRARY")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in (os.path.join(here, "libconvtune.so"),
                      os.path.join(here, "..", "..", "client", "libconvtune.so")):
        if os.path.exists(candidate):
            return os.path.abspath(candidate)
    found = ctypes.util.find_library("convtune")
    if found is None:
        raise OSError("libconvtune.so not found: set CONVTUNE_LIBRARY to its path")
    return found


_P = ctypes.c_void_p
_SIZE = ctypes.c_size_t


class CApi:
    """The loaded library and one handle per thread (a handle must not be used
    by two threads at once)."""

    def __init__(self, address: str, path: Optional[str] = None):
        self.lib = ctypes.CDLL(path or library_path())
        self.address = address
        self._local = threading.local()
        lib = self.lib
        lib.convtuneGetLastError.restype = ctypes.c_char_p
        lib.convtuneGetLastError.argtypes = [_P]
        lib.convtuneCreateWithAddress.argtypes = [ctypes.POINTER(_P), ctypes.c_char_p]
        lib.convtuneSetTensorDescriptorEx.argtypes = [
            _P, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
        lib.convtuneInitConvolutionNdDescriptor.argtypes = [
            _P, ctypes.c_int, ctypes.POINTER(ctypes.c_int),
            ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int), ctypes.c_int]
        lib.convtuneSetConvolutionGroupCount.argtypes = [_P, ctypes.c_int]
        run = [_P, _P, _P, _P, _P, _P, _P, _P, _P, _SIZE, ctypes.c_uint64]
        for name in ("convtuneConvolutionForwardImmediate",
                     "convtuneConvolutionBackwardDataImmediate",
                     "convtuneConvolutionBackwardWeightsImmediate"):
            getattr(lib, name).argtypes = run

    def _check(self, call: str, status: int, handle=None):
        if status != 0:
            message = self.lib.convtuneGetLastError(handle).decode(errors="replace")
            raise CApiError(call, status, message)

    def handle(self):
        h = getattr(self._local, "handle", None)
        if h is None:
            h = _P()
            self._check("convtuneCreateWithAddress",
                        self.lib.convtuneCreateWithAddress(
                            ctypes.byref(h), self.address.encode()))
            self._local.handle = h
        return h

    def tensor(self, dtype: str, layout: str, dims):
        d = _P()
        self._check("convtuneCreateTensorDescriptor",
                    self.lib.convtuneCreateTensorDescriptor(ctypes.byref(d)))
        arr = (ctypes.c_int * len(dims))(*dims)
        self._check("convtuneSetTensorDescriptorEx",
                    self.lib.convtuneSetTensorDescriptorEx(
                        d, _DTYPE[dtype], _LAYOUT[(layout, len(dims) - 2)],
                        len(dims), arr))
        return d

    def conv(self, p: Problem):
        d = _P()
        self._check("convtuneCreateConvolutionDescriptor",
                    self.lib.convtuneCreateConvolutionDescriptor(ctypes.byref(d)))
        n = p.spatial_dims
        ints = lambda v: (ctypes.c_int * n)(*v)
        self._check("convtuneInitConvolutionNdDescriptor",
                    self.lib.convtuneInitConvolutionNdDescriptor(
                        d, n, ints(p.pad), ints(p.stride), ints(p.dilation), 0))
        self._check("convtuneSetConvolutionGroupCount",
                    self.lib.convtuneSetConvolutionGroupCount(d, p.groups))
        return d


class Descriptors:
    """x, w, y and convolution descriptors of one problem, made once."""

    def __init__(self, api: CApi, p: Problem):
        self.api = api
        self.x = api.tensor(p.dtype, p.layout, (p.n, p.c) + p.in_size)
        self.w = api.tensor(p.dtype, p.layout,
                            (p.k, p.c // p.groups) + p.filter)
        self.y = api.tensor(p.dtype, p.layout, (p.n, p.k) + p.out_size())
        self.conv = api.conv(p)

    def __del__(self):
        lib = getattr(self.api, "lib", None)
        if lib is None:
            return
        for t in (self.x, self.w, self.y):
            lib.convtuneDestroyTensorDescriptor(t)
        lib.convtuneDestroyConvolutionDescriptor(self.conv)

    def run(self, direction: str, solution_id: int, x: int, w: int, y: int,
            workspace: int, workspace_bytes: int):
        """Runs the solution of `direction` on raw addresses: F writes y from
        x and w, B writes x (dx) from y (dy) and w, W writes w (dw) from y
        (dy) and x."""
        api, h = self.api, self.api.handle()
        if direction == "F":
            name = "convtuneConvolutionForwardImmediate"
            args = (self.w, w, self.x, x, self.conv, self.y, y)
        elif direction == "B":
            name = "convtuneConvolutionBackwardDataImmediate"
            args = (self.y, y, self.w, w, self.conv, self.x, x)
        else:
            name = "convtuneConvolutionBackwardWeightsImmediate"
            args = (self.y, y, self.x, x, self.conv, self.w, w)
        status = getattr(api.lib, name)(h, *args, workspace, workspace_bytes,
                                        solution_id)
        api._check(name, status, h)
