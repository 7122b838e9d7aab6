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


class Solution(ctypes.Structure):
    """convtuneConvSolution_t."""
    _fields_ = [("time", ctypes.c_float), ("workspace_size", _SIZE),
                ("solution_id", ctypes.c_uint64), ("algorithm", ctypes.c_int),
                ("measured", ctypes.c_int), ("solver_name", ctypes.c_char * 64),
                ("provenance", ctypes.c_int), ("confidence", ctypes.c_float)]


class AlgoPerf(ctypes.Structure):
    """convtuneConvAlgoPerf_t (its union is one enum)."""
    _fields_ = [("algo", ctypes.c_int), ("time", ctypes.c_float),
                ("memory", _SIZE), ("solution_id", ctypes.c_uint64),
                ("solver_name", ctypes.c_char * 64)]


# Find's workspace limit: solutions needing more are left out (torch's cuDNN
# path caps its workspace likewise).
FIND_WORKSPACE_LIMIT = 4 << 30


class CApi:
    """The loaded library and one handle per thread (a handle must not be used
    by two threads at once)."""

    def __init__(self, address: str, path: Optional[str] = None,
                 timeouts: Optional[tuple] = None):
        """`timeouts`: (call, find) deadlines in seconds of every handle's
        questions to the daemon (None: the library's defaults)."""
        self.lib = ctypes.CDLL(path or library_path())
        self.address = address
        self.timeouts = timeouts
        self._local = threading.local()
        lib = self.lib
        lib.convtuneGetLastError.restype = ctypes.c_char_p
        lib.convtuneGetLastError.argtypes = [_P]
        lib.convtuneCreateWithAddress.argtypes = [ctypes.POINTER(_P), ctypes.c_char_p]
        lib.convtuneCreateForDevice.argtypes = [
            ctypes.POINTER(_P), ctypes.c_char_p, ctypes.c_int]
        lib.convtuneSetStream.argtypes = [_P, _P]
        lib.convtuneSetTimeouts.argtypes = [_P, ctypes.c_double, ctypes.c_double]
        lib.convtuneSetFindMode.argtypes = [_P, ctypes.c_int]
        lib.convtuneGetDeviceKey.argtypes = [_P, ctypes.c_char_p, _SIZE]
        solutions = [_P, _P, _P, _P, _P, _SIZE, ctypes.POINTER(_SIZE),
                     ctypes.POINTER(Solution)]
        find = [_P, _P, _P, _P, _P, _P, _P, _P, ctypes.c_int,
                ctypes.POINTER(ctypes.c_int), ctypes.POINTER(AlgoPerf), _P,
                _SIZE, ctypes.c_bool]
        for d in ("Forward", "BackwardData", "BackwardWeights"):
            getattr(lib, f"convtuneConvolution{d}GetSolution").argtypes = solutions
            getattr(lib, f"convtuneFindConvolution{d}Algorithm").argtypes = find
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

    def handle(self, device: Optional[int] = None):
        """This thread's handle for host plans (device None) or for GPU
        `device`'s."""
        handles = getattr(self._local, "handles", None)
        if handles is None:
            handles = self._local.handles = {}
        h = handles.get(device)
        if h is None:
            h = _P()
            if device is None:
                status = self.lib.convtuneCreateWithAddress(
                    ctypes.byref(h), self.address.encode())
            else:
                status = self.lib.convtuneCreateForDevice(
                    ctypes.byref(h), self.address.encode(), device)
            self._check("convtuneCreateWithAddress", status)
            # Find calls take the FindDb's answer, else tune (HYBRID).
            self._check("convtuneSetFindMode", self.lib.convtuneSetFindMode(h, 3), h)
            if self.timeouts is not None:
                self._check("convtuneSetTimeouts",
                            self.lib.convtuneSetTimeouts(h, *self.timeouts), h)
            handles[device] = h
        return h

    def use_stream(self, h, stream: int):
        """Queues h's GPU work on `stream` (told to the library only when it
        changes)."""
        streams = getattr(self._local, "streams", None)
        if streams is None:
            streams = self._local.streams = {}
        if streams.get(h.value) != stream:
            self._check("convtuneSetStream", self.lib.convtuneSetStream(h, stream), h)
            streams[h.value] = stream

    def device_key(self, device: Optional[int] = None) -> str:
        """The daemon's device key."""
        h = self.handle(device)
        buf = ctypes.create_string_buffer(256)
        self._check("convtuneGetDeviceKey",
                    self.lib.convtuneGetDeviceKey(h, buf, len(buf)), h)
        return buf.value.decode()

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

    _NAMES = {"F": "Forward", "B": "BackwardData", "W": "BackwardWeights"}

    def _roles(self, direction: str):
        """The descriptors of `direction`'s C calls, in their order."""
        if direction == "F":
            return self.w, self.x, self.y  # GetSolution: w, x, y
        if direction == "B":
            return self.y, self.w, self.x  # dy, w, dx
        return self.y, self.x, self.w      # dy, x, dw

    def solutions(self, direction: str, device: Optional[int] = None,
                  max_count: int = 1):
        """Immediate mode's solutions, best first (Solution structures).
        Never times anything."""
        api, h = self.api, self.api.handle(device)
        name = f"convtuneConvolution{self._NAMES[direction]}GetSolution"
        count = _SIZE(0)
        sols = (Solution * max_count)()
        a, b, c = self._roles(direction)
        api._check(name, getattr(api.lib, name)(
            h, a, b, self.conv, c, max_count, ctypes.byref(count), sols), h)
        return list(sols[:count.value])

    def best_solution(self, direction: str, device: Optional[int] = None):
        """Immediate mode's best solution: (solution id, workspace bytes,
        measured)."""
        found = self.solutions(direction, device)
        if not found:
            raise CApiError("GetSolution", 9, "no solution")
        sol = found[0]
        return sol.solution_id, sol.workspace_size, bool(sol.measured)

    def find_best(self, direction: str, x: int, w: int, y: int,
                  device: Optional[int] = None):
        """A find (HYBRID: the FindDb, else tuned now): the fastest
        solution's (id, workspace bytes). The daemon times on its own
        buffers; the addresses are only checked for NULL."""
        api, h = self.api, self.api.handle(device)
        name = f"convtuneFind{self._NAMES[direction]}Algorithm"
        name = name.replace("Find", "FindConvolution", 1)
        returned = ctypes.c_int(0)
        perf = AlgoPerf()
        if direction == "F":
            args = (self.x, x, self.w, w, self.conv, self.y, y)
        elif direction == "B":
            args = (self.y, y, self.w, w, self.conv, self.x, x)
        else:
            args = (self.y, y, self.x, x, self.conv, self.w, w)
        # Find checks the workspace pointer for NULL only; x stands in.
        api._check(name, getattr(api.lib, name)(
            h, *args, 1, ctypes.byref(returned), ctypes.byref(perf), x,
            FIND_WORKSPACE_LIMIT, False), h)
        if returned.value == 0:
            raise CApiError(name, 9, "no solution")
        return perf.solution_id, perf.memory

    def run(self, direction: str, solution_id: int, x: int, w: int, y: int,
            workspace: int, workspace_bytes: int, device: Optional[int] = None,
            stream: Optional[int] = None):
        """Runs the solution of `direction` on raw addresses: F writes y from
        x and w, B writes x (dx) from y (dy) and w, W writes w (dw) from y
        (dy) and x. On GPU `device`, the work is queued on `stream` (a
        cudaStream_t as an int) and the call returns."""
        api, h = self.api, self.api.handle(device)
        if device is not None:
            api.use_stream(h, stream)
        lib = api.lib
        if direction == "F":
            status = lib.convtuneConvolutionForwardImmediate(
                h, self.w, w, self.x, x, self.conv, self.y, y, workspace,
                workspace_bytes, solution_id)
        elif direction == "B":
            status = lib.convtuneConvolutionBackwardDataImmediate(
                h, self.y, y, self.w, w, self.conv, self.x, x, workspace,
                workspace_bytes, solution_id)
        else:
            status = lib.convtuneConvolutionBackwardWeightsImmediate(
                h, self.y, y, self.x, x, self.conv, self.w, w, workspace,
                workspace_bytes, solution_id)
        if status != 0:
            api._check(f"Convolution{self._NAMES[direction]}Immediate", status, h)
