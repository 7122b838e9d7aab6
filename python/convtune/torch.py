"""Convolutions of torch tensors through convtune: each direction (forward,
backward data, backward weights) runs the solution the node's convtuned chose
for it. Training never blocks or breaks on convtune: when the daemon is down,
is slow past a deadline (`set_deadlines`), has no solution, or runs on
another kind of device than the tensors, the call falls back to torch's own
convolution and counts it (`stats()`); `set_fallback(False)` makes those cases
raise instead.

Modes (`set_mode`, or CONVTUNE_TORCH_MODE): "immediate" (the default) takes
the daemon's immediate answer, which queues a background find on a miss, and
asks again later until the answer is measured; "find" waits for a tuned
answer on the first call of each shape.
"""

import collections
import os
import threading
import time
from typing import Optional, Tuple

import torch
import torch.nn.functional as F

from convtune import _capi, _problem

_lock = threading.Lock()
_stats = collections.Counter()
_state = {
    "mode": os.environ.get("CONVTUNE_TORCH_MODE", "immediate"),
    "fallback": os.environ.get("CONVTUNE_TORCH_FALLBACK", "1") != "0",
    "address": None,  # None: the default socket
    "capi": None,
    "down_until": 0.0,  # the daemon failed: torch only until then
    "down_reason": "daemon_down",  # or daemon_slow: past a deadline
    # Seconds to wait for the daemon's answers: immediate answers, plans and
    # code objects; finds (find mode's first call of a shape).
    "deadlines": None,  # set below
}


def _env_seconds(name: str, default: float) -> float:
    text = os.environ.get(name, "")
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 3.2e7:
        raise ValueError(f"{name}: expected seconds in (0, 3.2e7], got {text[:40]!r}")
    return value


_state["deadlines"] = (_env_seconds("CONVTUNE_TORCH_DEADLINE_S", 2.0),
                       _env_seconds("CONVTUNE_TORCH_FIND_DEADLINE_S", 600.0))
# Seconds between immediate-mode questions about a shape whose answer was not
# measured yet, and after a failed call before the daemon is asked again.
RECHECK_S = 10.0
RETRY_S = 1.0


def set_mode(mode: str):
    if mode not in ("immediate", "find"):
        raise ValueError(f"mode: expected immediate or find, got {mode[:40]!r}")
    with _lock:
        _state["mode"] = mode
        _choices.clear()
        _ready.clear()


def set_fallback(on: bool):
    """False: a call convtune cannot serve raises instead of using torch."""
    _state["fallback"] = bool(on)


def set_deadlines(call: float = 2.0, find: float = 600.0):
    """Seconds to wait for the daemon: `call` for immediate answers, plans
    and code objects, `find` for a find (find mode's first call of a shape;
    tuning takes seconds to minutes). A call past its deadline falls back to
    torch (counted as daemon_slow). Also CONVTUNE_TORCH_DEADLINE_S and
    CONVTUNE_TORCH_FIND_DEADLINE_S."""
    for name, value in (("call", call), ("find", find)):
        if not 0 < value <= 3.2e7:
            raise ValueError(f"{name}: expected seconds in (0, 3.2e7], got {value!r:.40}")
    with _lock:
        _state["deadlines"] = (float(call), float(find))
        _state["capi"] = None  # handles made from now on take them
        _calls.clear()
        _ready.clear()


def connect(address: Optional[str] = None):
    """Uses the daemon at `address` (default: the default socket)."""
    with _lock:
        _state["address"] = address
        _state["capi"] = None
        _choices.clear()
        _calls.clear()
        _ready.clear()
        _device_keys.clear()
        _state["down_until"] = 0.0


def stats() -> dict:
    """Calls served by convtune per direction, and fallbacks by reason."""
    with _lock:
        return dict(_stats)


def reset_stats():
    with _lock:
        _stats.clear()


def _count(name: str):
    with _lock:
        _stats[name] += 1


def _api() -> _capi.CApi:
    """libconvtune, whose C API does every call of this module: training
    processes need no gRPC of their own."""
    with _lock:
        if _state["capi"] is None:
            _state["capi"] = _capi.CApi(_state["address"] or "",
                                        timeouts=_state["deadlines"])
        return _state["capi"]


# By call signature (direction, shapes, type, device, arguments, memory
# format): the (solution id, workspace bytes, measured, asked at, daemon
# device key) chosen, and the (problem, C API descriptors, output shape).
_choices = {}
_calls = {}
_device_keys = {}  # GPU ordinal (None: host) -> the daemon's device key
# By call signature, the _Ready call of a final choice (measured, or found):
# later calls of the signature run without asking anything.
_ready = {}


class _NoPlan(RuntimeError):
    """Why convtune cannot serve a call; the fallback's reason."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


def _unavailable(e: "_capi.CApiError") -> _NoPlan:
    """The fallback of a daemon that is down or past a deadline; torch alone
    runs new shapes for RETRY_S seconds."""
    reason = ("daemon_slow" if "did not answer in time" in str(e)
              else "daemon_down")
    with _lock:
        _state["down_until"] = time.monotonic() + RETRY_S
        _state["down_reason"] = reason
    return _NoPlan(reason, str(e))


def _choose(key, p: _problem.Problem, desc, device, x, w, y):
    """(solution id, workspace bytes, daemon device key, final) for a call;
    final when the answer was measured and will not be asked again."""
    now = time.monotonic()
    with _lock:
        choice = _choices.get(key)
        mode = _state["mode"]
        if now < _state["down_until"] and choice is None:
            raise _NoPlan(_state["down_reason"])
    if choice is not None and (choice[2] or now - choice[3] < RECHECK_S):
        return choice[0], choice[1], choice[4], choice[2]
    try:
        device_key = _device_keys.get(device)
        if device_key is None:
            device_key = _device_keys[device] = _api().device_key(device)
        if mode == "find":
            solution, ws = desc.find_best(p.direction, x, w, y, device)
            choice = (solution, ws, True, now, device_key)
        else:
            solution, ws, measured = desc.best_solution(p.direction, device)
            choice = (solution, ws, measured, now, device_key)
    except _capi.CApiError as e:
        if choice is not None:  # keep what was chosen before
            return choice[0], choice[1], choice[4], False
        if e.status == _capi.UNAVAILABLE:
            raise _unavailable(e)
        raise _NoPlan("no_solution" if e.status in (7, 9) else "daemon_error",
                      str(e))
    with _lock:
        _choices[key] = choice
    return choice[0], choice[1], choice[4], choice[2]


def _layout(x):
    """The memory format a problem of x uses, and x in it."""
    fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
    if x.is_contiguous(memory_format=fmt) and not x.is_contiguous():
        return fmt
    return torch.contiguous_format


def _torch_conv(x, w, stride, padding, dilation, groups):
    conv = F.conv2d if x.dim() == 4 else F.conv3d
    return conv(x, w, None, stride, padding, dilation, groups)


def _torch_grad(direction, x, w, dy, stride, padding, dilation, groups):
    """torch's own backward data (B) or weights (W), without autograd."""
    grads = torch.nn.grad
    if direction == "B":
        fn = grads.conv2d_input if x.dim() == 4 else grads.conv3d_input
        return fn(x.shape, w, dy, stride, padding, dilation, groups)
    fn = grads.conv2d_weight if x.dim() == 4 else grads.conv3d_weight
    return fn(x, w.shape, dy, stride, padding, dilation, groups)


def _plan_of(key, direction, x, w, dy, stride, padding, dilation, groups,
             fmt):
    """The problem of a call and its descriptors, made once per signature
    (which holds x's and w's shapes, types and devices)."""
    # The plan reads w as x's type on x's device, and as (K, C / groups,
    # ...): anything else is torch's to refuse.
    entry = _calls.get(key)
    if entry is None:
        if (w.dtype != x.dtype or w.device != x.device or
                w.shape[1] * groups != x.shape[1]):
            raise _NoPlan("unsupported",
                          "x and w differ in type, device or channels")
        if x.device.type not in ("cpu", "cuda"):
            raise _NoPlan("device", f"{x.device.type} tensors run on torch")
        layout = "NCHW" if fmt == torch.contiguous_format else "NHWC"
        p = _problem.from_tensors(x, w, stride, padding, dilation, groups,
                                  direction, layout)
        entry = (p, _capi.Descriptors(_api(), p), (p.n, p.k) + p.out_size())
        with _lock:
            _calls[key] = entry
    return entry


# torch's current stream of a GPU as a raw handle, without a Stream object
# (torch 2.x); torch's default stream is the legacy default stream, whose
# handle is 0, and the C API takes 0 (NULL) for its own stream and
# CU_STREAM_LEGACY (1) for that one.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _stream(index: int) -> int:
    if _raw_stream is not None:
        return _raw_stream(index) or 1
    return torch.cuda.current_stream(index).cuda_stream or 1


class _Ready:
    """One call signature's solution, ready to run: the output allocated in
    the problem's memory format, the operands made contiguous in it, and the
    C API call on torch's current stream."""

    __slots__ = ("direction", "desc", "solution", "ws_bytes", "y_shape", "fmt",
                 "device", "served")

    def __init__(self, direction, desc, solution, ws_bytes, y_shape, fmt,
                 device):
        self.direction, self.desc, self.solution = direction, desc, solution
        self.ws_bytes, self.y_shape, self.fmt = ws_bytes, y_shape, fmt
        self.device = device  # GPU ordinal, None for host tensors
        self.served = f"convtune_{direction}"

    def __call__(self, x, w, dy):
        fmt, direction = self.fmt, self.direction
        if direction == "F":
            x, w = x.contiguous(memory_format=fmt), w.contiguous(memory_format=fmt)
            y = out = torch.empty(self.y_shape, dtype=x.dtype, device=x.device,
                                  memory_format=fmt)
        else:
            y = dy.contiguous(memory_format=fmt)
            if direction == "B":
                w = w.contiguous(memory_format=fmt)
                x = out = torch.empty(x.shape, dtype=x.dtype, device=x.device,
                                      memory_format=fmt)
            else:
                x = x.contiguous(memory_format=fmt)
                w = out = torch.empty(w.shape, dtype=w.dtype, device=w.device,
                                      memory_format=fmt)
        ws = self.ws_bytes
        workspace = (torch.empty(ws, dtype=torch.uint8, device=x.device)
                     if ws else None)
        device = self.device
        try:
            self.desc.run(direction, self.solution, x.data_ptr(), w.data_ptr(),
                          y.data_ptr(),
                          workspace.data_ptr() if ws else None, ws, device,
                          None if device is None else _stream(device))
        except _capi.CApiError as e:
            if e.status == _capi.UNAVAILABLE:
                raise _unavailable(e)
            raise _NoPlan("run_failed", str(e))
        return out


def _prepare(key, direction, x, w, dy, stride, padding, dilation, groups, fmt):
    """The _Ready call of a signature met for the first time, or whose
    answer was not final yet (kept in _ready once it is)."""
    p, desc, y_shape = _plan_of(key, direction, x, w, dy, stride, padding,
                                dilation, groups, fmt)
    on = x.device.type
    device = x.device.index if on != "cpu" else None
    xc = x.contiguous(memory_format=fmt)
    solution, ws_bytes, device_key, final = _choose(
        key, p, desc, device, xc.data_ptr(), w.data_ptr(),
        (dy if dy is not None else xc).data_ptr())
    # The daemon's plans run where its device is: host tensors on a CPU
    # daemon's, CUDA tensors on a CUDA daemon's.
    if not device_key.startswith(f"{on}-"):
        raise _NoPlan("device", f"{on} tensors, daemon device {device_key}")
    ready = _Ready(direction, desc, solution, ws_bytes, y_shape, fmt, device)
    if final:
        with _lock:
            _ready[key] = ready
    return ready


def _direction(direction, x, w, dy, stride, padding, dilation, groups):
    """One direction of a convolution: convtune's plan, else torch's own."""
    stride, padding, dilation = tuple(stride), tuple(padding), tuple(dilation)
    fmt = _layout(x)
    try:
        # The plan reads dy as x's type on x's device: anything else is
        # torch's to refuse.
        if dy is not None and (dy.dtype != x.dtype or dy.device != x.device):
            raise _NoPlan("unsupported", "dy differs from x in type or device")
        key = (direction, x.shape, w.shape, x.dtype, w.dtype, x.device,
               w.device, stride, padding, dilation, groups, fmt)
        ready = _ready.get(key)
        if ready is None:
            ready = _prepare(key, direction, x, w, dy, stride, padding,
                             dilation, groups, fmt)
        out = ready(x, w, dy)
        _count(ready.served)
        return out
    except (_NoPlan, ValueError) as e:
        reason = e.reason if isinstance(e, _NoPlan) else "unsupported"
        if not _state["fallback"]:
            raise RuntimeError(f"convtune cannot run this convolution: {e}") from None
        _count(f"fallback_{reason}")
    if direction == "F":
        return _torch_conv(x, w, stride, padding, dilation, groups)
    return _torch_grad(direction, x, w, dy, stride, padding, dilation, groups)


# The three directions as operators of the dispatcher ("convtune::conv_*"),
# so that tracing (torch.compile, CUDA graphs) sees single calls; their
# Meta kernels give output shapes without running anything.
_lib = torch.library.Library("convtune", "DEF")
_ARGS = "int[] stride, int[] padding, int[] dilation, int groups"
_lib.define(f"conv_forward(Tensor x, Tensor w, {_ARGS}) -> Tensor")
_lib.define(f"conv_backward_data(Tensor x, Tensor w, Tensor dy, {_ARGS}) -> Tensor")
_lib.define(f"conv_backward_weights(Tensor x, Tensor w, Tensor dy, {_ARGS}) -> Tensor")


def _forward(x, w, stride, padding, dilation, groups):
    return _direction("F", x, w, None, stride, padding, dilation, groups)


def _backward_data(x, w, dy, stride, padding, dilation, groups):
    return _direction("B", x, w, dy, stride, padding, dilation, groups)


def _backward_weights(x, w, dy, stride, padding, dilation, groups):
    return _direction("W", x, w, dy, stride, padding, dilation, groups)


def _forward_meta(x, w, stride, padding, dilation, groups):
    out = [(i + 2 * p - d * (k - 1) - 1) // s + 1 for i, k, p, s, d in
           zip(x.shape[2:], w.shape[2:], padding, stride, dilation)]
    return torch.empty([x.shape[0], w.shape[0]] + out, dtype=x.dtype,
                       device=x.device, memory_format=_layout(x))


def _backward_data_meta(x, w, dy, stride, padding, dilation, groups):
    return torch.empty_like(x)


def _backward_weights_meta(x, w, dy, stride, padding, dilation, groups):
    return torch.empty_like(w)


for _name, _fn, _meta in (
        ("conv_forward", _forward, _forward_meta),
        ("conv_backward_data", _backward_data, _backward_data_meta),
        ("conv_backward_weights", _backward_weights, _backward_weights_meta)):
    for _key in ("CPU", "CUDA"):
        _lib.impl(_name, _fn, _key)
    # Shapes need no autograd; torch 1.13 has no fallthrough for custom
    # operators at AutogradMeta.
    for _key in ("Meta", "AutogradMeta"):
        _lib.impl(_name, _meta, _key)


def _compile_check():
    """A function telling whether torch.compile or the JIT traces the call
    (looked up once: attribute lookups cost microseconds a call)."""
    compiler = getattr(torch, "compiler", None)
    dynamo = getattr(torch, "_dynamo", None)
    if compiler is not None and hasattr(compiler, "is_compiling"):
        compiling = compiler.is_compiling
    elif dynamo is not None and hasattr(dynamo, "is_compiling"):
        compiling = dynamo.is_compiling
    else:
        compiling = lambda: False  # noqa: E731
    tracing = torch.jit.is_tracing
    return lambda: compiling() or tracing()


_compiling = _compile_check()


class _Conv(torch.autograd.Function):
    """The three directions. A trace sees each as one dispatcher call; eager
    calls skip the dispatcher's Python round trip."""

    @staticmethod
    def forward(ctx, x, w, stride, padding, dilation, groups):
        ctx.save_for_backward(x, w)
        ctx.args = (stride, padding, dilation, groups)
        if _compiling():
            return torch.ops.convtune.conv_forward(x, w, stride, padding,
                                                   dilation, groups)
        return _direction("F", x, w, None, stride, padding, dilation, groups)

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        args = ctx.args
        traced = _compiling()
        dx = dw = None
        if ctx.needs_input_grad[0]:
            dx = (torch.ops.convtune.conv_backward_data(x, w, dy, *args)
                  if traced else _direction("B", x, w, dy, *args))
        if ctx.needs_input_grad[1]:
            dw = (torch.ops.convtune.conv_backward_weights(x, w, dy, *args)
                  if traced else _direction("W", x, w, dy, *args))
        return dx, dw, None, None, None, None


def _tuple(v, n):
    return (v,) * n if isinstance(v, int) else tuple(v)


def _autocast(x, weight, bias):
    """Under CUDA autocast, the types torch's own convolution would take."""
    if x.is_cuda and torch.is_autocast_enabled():
        dtype = torch.get_autocast_gpu_dtype()
        x, weight = x.to(dtype), weight.to(dtype)
        bias = bias.to(dtype) if bias is not None else None
    return x, weight, bias


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv2d through convtune (zero padding, numbers)."""
    x, weight, bias = _autocast(x, weight, bias)
    y = _Conv.apply(x, weight, _tuple(stride, 2), _tuple(padding, 2),
                    _tuple(dilation, 2), groups)
    return y if bias is None else y + bias.view(1, -1, 1, 1)


def conv3d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv3d through convtune (zero padding, numbers)."""
    x, weight, bias = _autocast(x, weight, bias)
    y = _Conv.apply(x, weight, _tuple(stride, 3), _tuple(padding, 3),
                    _tuple(dilation, 3), groups)
    return y if bias is None else y + bias.view(1, -1, 1, 1, 1)


def patch(model: torch.nn.Module) -> torch.nn.Module:
    """Swaps every Conv2d / Conv3d of `model` with zero padding for
    convtune.nn's, sharing its parameters. Returns the model."""
    from convtune import nn
    for name, child in list(model.named_children()):
        replaced = nn.from_torch(child)
        if replaced is not None:
            setattr(model, name, replaced)
        else:
            patch(child)
    return model
