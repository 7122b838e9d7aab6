#!/usr/bin/env python3
"""Times the convolution layers of MIOpenDriver problem lists through PyTorch.

The GPU peer of bench_gpu_vs_cudnn: each (layer, direction, layout) runs the
one ATen convolution op of that direction with cuDNN's benchmark mode on, as a
training job gets it (torch.backends.cudnn.benchmark = True, no TF32). The
first call of each is cuDNN's own find, whose wall time is reported apart;
after a warm-up the median of single timed calls (CUDA events) is the time.

    python3 tests/bench/torch_peer.py --json torch.json \\
        ../shared/problems/miopen-perf-models/Resnet50_v1.5_FP16_BS128.txt

--device cpu runs the same loop on the CPU (slow; for checking the script),
and --self-check compares the backward ops used here with autograd in
float64 and exits nonzero on a mismatch. compare_peers.py joins the JSON
written with --json to that of bench_gpu_vs_cudnn --json.
"""

import argparse
import itertools
import json
import math
import os
import statistics
import sys
import time
import warnings

import torch
import torch.nn.functional as nnf

TYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
COMMAND_TYPES = {"conv": "fp32", "convfp16": "fp16", "convbfp16": "bf16"}
DIRECTIONS = ("F", "B", "W")  # bit 0, 1, 2 of --forw
LAYOUTS = ("NCHW", "NHWC")

# ---------------------------------------------------------------------------
# MIOpenDriver lines

# Long flag -> (field, axis). Spatial axes are 0 = D, 1 = H, 2 = W.
_LONG_FLAGS = {
    "batchsize": ("n", None),
    "in_channels": ("c", None),
    "out_channels": ("k", None),
    "in_d": ("in", 0),
    "in_h": ("in", 1),
    "in_w": ("in", 2),
    "fil_d": ("fil", 0),
    "fil_h": ("fil", 1),
    "fil_w": ("fil", 2),
    "pad_d": ("pad", 0),
    "pad_h": ("pad", 1),
    "pad_w": ("pad", 2),
    "conv_stride_d": ("stride", 0),
    "conv_stride_h": ("stride", 1),
    "conv_stride_w": ("stride", 2),
    "dilation_d": ("dil", 0),
    "dilation_h": ("dil", 1),
    "dilation_w": ("dil", 2),
    "group_count": ("groups", None),
    "spatial_dim": ("dims", None),
    "forw": ("forw", None),
    "mode": ("mode", None),
    # The tensor layout is chosen by --layout, not by the line.
    "in_layout": (None, None),
    "out_layout": (None, None),
    "fil_layout": (None, None),
    # MIOpenDriver flags that do not change the problem.
    "pad_mode": (None, None),
    "trans_output_pad_d": (None, None),
    "trans_output_pad_h": (None, None),
    "trans_output_pad_w": (None, None),
    "time": (None, None),
    "verify": (None, None),
    "iter": (None, None),
    "search": (None, None),
    "printconv": (None, None),
    "pad_val": (None, None),
    "bias": (None, None),
    "wall": (None, None),
    "solution": (None, None),
    "in_data": (None, None),
    "weights": (None, None),
    "dout_data": (None, None),
    "in_bias": (None, None),
    "dump_output": (None, None),
    "gpubuffer_check": (None, None),
    "tensor_vect": (None, None),
    "vector_length": (None, None),
    "dilation_d_check": (None, None),
}

_SHORT_FLAGS = {
    "n": "batchsize", "c": "in_channels", "k": "out_channels",
    "H": "in_h", "W": "in_w", "!": "in_d",
    "y": "fil_h", "x": "fil_w", "@": "fil_d",
    "p": "pad_h", "q": "pad_w", "$": "pad_d",
    "u": "conv_stride_h", "v": "conv_stride_w", "#": "conv_stride_d",
    "l": "dilation_h", "j": "dilation_w", "^": "dilation_d",
    "g": "group_count", "_": "spatial_dim", "F": "forw", "m": "mode",
    "I": "in_layout", "O": "out_layout", "f": "fil_layout",
    "z": "pad_mode", "t": "time", "V": "verify", "i": "iter", "s": "search",
    "P": "printconv", "r": "pad_val", "b": "bias", "w": "wall",
    "S": "solution", "d": "in_data", "e": "weights", "D": "dout_data",
    "a": "in_bias", "o": "dump_output", "C": "gpubuffer_check",
    "Z": "tensor_vect", "L": "vector_length", "Y": "pad_d",
}


class LineError(ValueError):
    """A line that is not a convolution problem this script can run."""


class NotConvMode(LineError):
    """A line whose --mode is not plain convolution (e.g. trans)."""


class Problem(object):
    """One convolution problem; hashable, so equal problems de-duplicate."""

    __slots__ = ("dims", "n", "c", "k", "in_", "fil", "pad", "stride", "dil",
                 "groups", "type")

    def __init__(self, dims, n, c, k, in_, fil, pad, stride, dil, groups,
                 type_):
        self.dims = dims
        self.n, self.c, self.k = n, c, k
        self.in_, self.fil = tuple(in_), tuple(fil)
        self.pad, self.stride, self.dil = tuple(pad), tuple(stride), tuple(dil)
        self.groups = groups
        self.type = type_

    def _key(self):
        return (self.dims, self.n, self.c, self.k, self.in_, self.fil,
                self.pad, self.stride, self.dil, self.groups, self.type)

    def __eq__(self, other):
        return isinstance(other, Problem) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def with_type(self, type_):
        return Problem(self.dims, self.n, self.c, self.k, self.in_, self.fil,
                       self.pad, self.stride, self.dil, self.groups, type_)

    def out(self):
        return tuple((i + 2 * p - d * (f - 1) - 1) // s + 1
                     for i, f, p, s, d in zip(self.in_, self.fil, self.pad,
                                              self.stride, self.dil))

    def group_kind(self):
        if self.groups == 1:
            return "dense"
        return "depthwise" if self.groups == self.c else "grouped"

    def x_shape(self):
        return (self.n, self.c) + self.in_

    def w_shape(self):
        return (self.k, self.c // self.groups) + self.fil

    def y_shape(self):
        return (self.n, self.k) + self.out()

    def short(self):
        """e.g. 'n128 c1024 14x14 k512 1x1 s2 p0 g1' (+ ' d2' if dilated)."""
        def axes(v):
            return str(v[0]) if len(set(v)) == 1 else "x".join(map(str, v))
        s = "n%d c%d %s k%d %s s%s p%s g%d" % (
            self.n, self.c, "x".join(map(str, self.in_)), self.k,
            "x".join(map(str, self.fil)), axes(self.stride), axes(self.pad),
            self.groups)
        if any(d != 1 for d in self.dil):
            s += " d" + axes(self.dil)
        return s


def parse_line(text):
    """Parses one MIOpenDriver line into (Problem, [directions]).

    Raises NotConvMode for a --mode other than conv, LineError otherwise.
    """
    tokens = text.split()
    if tokens and tokens[0].endswith("MIOpenDriver"):
        tokens = tokens[1:]
    if not tokens:
        raise LineError("empty command")
    if tokens[0] not in COMMAND_TYPES:
        raise LineError("'%s' is not conv, convfp16 or convbfp16" % tokens[0])
    type_ = COMMAND_TYPES[tokens[0]]
    f = {"n": 1, "c": 1, "k": 1, "groups": 1, "dims": 2, "forw": 0,
         "in": [1, 1, 1], "fil": [1, 1, 1], "pad": [0, 0, 0],
         "stride": [1, 1, 1], "dil": [1, 1, 1]}
    i = 1
    while i < len(tokens):
        tok = tokens[i]
        value = None
        if tok.startswith("--"):
            name = tok[2:]
            if "=" in name:
                name, value = name.split("=", 1)
        elif len(tok) == 2 and tok[0] == "-" and tok[1] in _SHORT_FLAGS:
            name = _SHORT_FLAGS[tok[1]]
        else:
            raise LineError("%s: unknown flag" % tok)
        if name not in _LONG_FLAGS:
            raise LineError("%s: unknown flag" % tok)
        if value is None:
            if i + 1 >= len(tokens):
                raise LineError("%s: missing value" % tok)
            i += 1
            value = tokens[i]
        i += 1
        field, axis = _LONG_FLAGS[name]
        if field is None:
            continue
        if field == "mode":
            if value != "conv":
                raise NotConvMode("--mode %s is not conv" % value)
            continue
        try:
            v = int(value)
        except ValueError:
            raise LineError("%s: '%s' is not an integer" % (tok, value))
        if axis is None:
            f[field] = v
        else:
            f[field][axis] = v
    dims, forw = f["dims"], f["forw"]
    if dims not in (2, 3):
        raise LineError("--spatial_dim must be 2 or 3, got %d" % dims)
    if not 0 <= forw <= 7:
        raise LineError("--forw must be 0 to 7, got %d" % forw)
    first = 3 - dims  # a 2-D line's depth flags are ignored
    p = Problem(dims, f["n"], f["c"], f["k"], f["in"][first:],
                f["fil"][first:], f["pad"][first:], f["stride"][first:],
                f["dil"][first:], f["groups"], type_)
    for name, v in (("n", p.n), ("c", p.c), ("k", p.k), ("groups", p.groups)):
        if v < 1:
            raise LineError("%s must be positive, got %d" % (name, v))
    if p.c % p.groups or p.k % p.groups:
        raise LineError("c=%d and k=%d must be divisible by groups=%d"
                        % (p.c, p.k, p.groups))
    for name, vals, low in (("in", p.in_, 1), ("filter", p.fil, 1),
                            ("stride", p.stride, 1), ("dilation", p.dil, 1),
                            ("pad", p.pad, 0)):
        if any(v < low for v in vals):
            raise LineError("%s %s below %d" % (name, list(vals), low))
    if any(o < 1 for o in p.out()):
        raise LineError("output size %s below 1" % list(p.out()))
    dirs = [d for bit, d in enumerate(DIRECTIONS)
            if forw == 0 or forw & (1 << bit)]
    return p, dirs


def read_layers(path, type_override=None, max_layers=None):
    """The (line_no, line, Problem, direction) of a file, each pair once."""
    out, seen = [], set()
    with open(path) as fh:
        for line_no, raw in enumerate(fh, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            try:
                prob, dirs = parse_line(line)
            except NotConvMode as e:
                warn("%s:%d: skipped, %s" % (path, line_no, e))
                continue
            except LineError as e:
                warn("%s:%d: skipped, cannot parse: %s" % (path, line_no, e))
                continue
            if type_override:
                prob = prob.with_type(type_override)
            for d in dirs:
                if (prob, d) in seen:
                    continue
                seen.add((prob, d))
                out.append((line_no, line, prob, d))
    if max_layers is not None:
        out = out[:max_layers]
    return out


# ---------------------------------------------------------------------------
# Running one direction


def warn(msg):
    sys.stderr.write("warning: " + msg + "\n")
    sys.stderr.flush()


def memory_format(dims, layout):
    if layout == "NCHW":
        return torch.contiguous_format
    return torch.channels_last if dims == 2 else torch.channels_last_3d


def random_tensor(shape, dtype, device):
    if device.type == "cpu" and dtype != torch.float32 and \
            dtype != torch.float64:
        # The CPU normal sampler lacks some reduced types in old releases.
        return torch.randn(shape, device=device).to(dtype)
    return torch.randn(shape, dtype=dtype, device=device)


def direction_op(direction, prob, x, w, gy):
    """A no-argument callable running the one convolution op of direction."""
    stride, pad, dil = list(prob.stride), list(prob.pad), list(prob.dil)
    groups = prob.groups
    if direction == "F":
        conv = nnf.conv2d if prob.dims == 2 else nnf.conv3d
        return lambda: conv(x, w, None, stride, pad, dil, groups)
    mask = [True, False, False] if direction == "B" else [False, True, False]
    out_pad = [0] * prob.dims
    backward = torch.ops.aten.convolution_backward
    return lambda: backward(gy, x, w, None, stride, pad, dil, False, out_pad,
                            groups, mask)


def make_tensors(direction, prob, dtype, device):
    """Fresh random x, w and (for B and W) dy in NCHW order."""
    x = random_tensor(prob.x_shape(), dtype, device)
    w = random_tensor(prob.w_shape(), dtype, device)
    gy = None
    if direction != "F":
        gy = random_tensor(prob.y_shape(), dtype, device)
    return x, w, gy


def in_layout(tensors, dims, layout):
    fmt = memory_format(dims, layout)
    return [None if t is None else t.contiguous(memory_format=fmt)
            for t in tensors]


class Timer(object):
    """Times single calls: CUDA events on a GPU, perf_counter on the CPU."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.start = torch.cuda.Event(enable_timing=True)
            self.end = torch.cuda.Event(enable_timing=True)

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def wall_ms(self, fn):
        self.sync()
        t0 = time.perf_counter()
        fn()
        self.sync()
        return (time.perf_counter() - t0) * 1e3

    def call_ms(self, fn):
        if not self.cuda:
            return self.wall_ms(fn)
        self.start.record()
        fn()
        self.end.record()
        self.end.synchronize()
        return self.start.elapsed_time(self.end)


def short_error(exc):
    text = str(exc).strip().splitlines()
    text = text[0] if text else type(exc).__name__
    if len(text) > 160:
        text = text[:157] + "..."
    return "%s: %s" % (type(exc).__name__, text)


def time_op(op, timer, warmup, repeats):
    """(median ms, first-call ms) of op."""
    first = timer.wall_ms(op)
    for _ in range(warmup):
        op()
    timer.sync()
    times = [timer.call_ms(op) for _ in range(repeats)]
    return statistics.median(times), first


def release_memory(device, force=False):
    if device.type != "cuda":
        return
    total = torch.cuda.get_device_properties(device).total_memory
    if force or torch.cuda.memory_reserved(device) > 0.5 * total:
        torch.cuda.empty_cache()


# ---------------------------------------------------------------------------
# Settings and reports


def apply_settings(benchmark=True):
    """cuDNN benchmark mode on (off: cuDNN's heuristic picks), TF32 off,
    non-deterministic; returns the flags as read back."""
    flags = (
        ("cudnn.benchmark", torch.backends.cudnn, "benchmark", benchmark),
        ("cudnn.deterministic", torch.backends.cudnn, "deterministic", False),
        ("cudnn.allow_tf32", torch.backends.cudnn, "allow_tf32", False),
        ("cuda.matmul.allow_tf32", torch.backends.cuda.matmul, "allow_tf32",
         False),
    )
    parts = []
    with warnings.catch_warnings():
        # Newer releases mark the allow_tf32 flags as legacy (the
        # per-backend fp32_precision flags replace them); setting only the
        # legacy ones keeps the two consistent.
        warnings.simplefilter("ignore")
        for _, obj, attr, value in flags:
            setattr(obj, attr, value)
        for name, obj, attr, _ in flags:
            try:
                parts.append("%s=%s" % (name, getattr(obj, attr)))
            except Exception as e:  # report, do not fail
                parts.append("%s=? (%s)" % (name, short_error(e)))
    limit = getattr(torch.backends.cudnn, "benchmark_limit", None)
    if limit is not None:
        parts.append("cudnn.benchmark_limit=%s" % limit)
    return ", ".join(parts)


def cudnn_version(device):
    if device.type != "cuda":
        return None
    return torch.backends.cudnn.version()


def device_name(device):
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return "CPU (%d threads)" % torch.get_num_threads()


def fmt_ms(v):
    return "-" if v is None else "%.4f" % v


def fmt_first(v):
    return "-" if v is None else "%.1f" % v


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def print_report(results, header, note):
    print("# PyTorch (cuDNN) per layer")
    print()
    for line in header:
        print(line)
    print()
    print("| file | line | problem | dir | type | layout | torch ms | "
          "first call ms |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        time_cell = fmt_ms(r["torch_ms"])
        if "error" in r:
            time_cell = "error: " + r["error"].replace("|", "/")
        print("| %s | %d | %s | %s | %s | %s | %s | %s |" % (
            r["list"], r["line_no"], r["_short"], r["direction"], r["type"],
            r["layout"], time_cell, fmt_first(r["first_call_ms"])))
    print()
    print("## Summary")
    print()
    print("| file | dir | type | layout | layers | failed | total ms | "
          "geomean ms |")
    print("|---|---|---|---|---|---|---|---|")
    groups = {}
    for r in results:
        key = (r["list"], r["direction"], r["type"], r["layout"])
        groups.setdefault(key, []).append(r)
    order = {d: i for i, d in enumerate(DIRECTIONS)}
    files = []
    for r in results:
        if r["list"] not in files:
            files.append(r["list"])
    for key in sorted(groups, key=lambda k: (files.index(k[0]), order[k[1]],
                                             k[2], LAYOUTS.index(k[3]))):
        rows = groups[key]
        times = [r["torch_ms"] for r in rows if r["torch_ms"] is not None]
        failed = len(rows) - len(times)
        total = "%.3f" % sum(times) if times else "-"
        gm = "%.4f" % geomean(times) if times else "-"
        print("| %s | %s | %s | %s | %d | %d | %s | %s |"
              % (key + (len(times), failed, total, gm)))
    if note:
        print()
        print(note)


# ---------------------------------------------------------------------------
# Self-check


def reference_conv(x, w, prob):
    """The forward convolution as a sum over filter taps of strided slices
    and small matrix products: no convolution op, so autograd through it is
    independent of convolution_backward."""
    pads = []
    for p in reversed(prob.pad):
        pads += [p, p]
    xp = nnf.pad(x, pads)
    n, g = prob.n, prob.groups
    cg, kg = prob.c // g, prob.k // g
    out = prob.out()
    y = None
    for tap in itertools.product(*[range(f) for f in prob.fil]):
        index = [slice(None), slice(None)]
        for t, d, s, o in zip(tap, prob.dil, prob.stride, out):
            index.append(slice(t * d, t * d + (o - 1) * s + 1, s))
        xs = xp[tuple(index)].reshape((n, g, cg) + out)
        wt = w[(slice(None), slice(None)) + tap].reshape(g, kg, cg)
        term = torch.einsum("ngc...,gkc->ngk...", xs, wt)
        y = term if y is None else y + term
    return y.reshape((n, prob.k) + out)


def self_check(device):
    """The three ops timed here in float64 on small problems, both layouts:
    B and W (convolution_backward) against autograd of the forward op and
    against autograd of reference_conv, F against reference_conv; and the
    line parser on short and long flags. Returns the number of failures."""
    failures = 0
    cases = [
        "conv -n 2 -c 4 -H 7 -W 6 -k 6 -y 3 -x 2 -p 1 -q 0 -u 2 -v 1 "
        "-l 1 -j 2 -g 2 -F 0",
        "conv -n 3 -c 4 -H 5 -W 5 -k 4 -y 3 -x 3 -p 1 -q 1 -g 4",
        "conv -n 2 -c 5 -H 6 -W 7 -k 3 -y 1 -x 1 -u 2 -v 2",
        "conv -_ 3 -n 1 -c 3 -! 4 -H 5 -W 5 -k 2 -@ 2 -y 3 -x 3 -$ 0 -p 1 "
        "-q 1 -# 1 -u 2 -v 1 -^ 1 -l 1 -j 1",
    ]
    gen = torch.Generator().manual_seed(1234)

    def compare(label, got, ref):
        scale = ref.abs().max().item() or 1.0
        same_shape = tuple(got.shape) == tuple(ref.shape)
        err = (got - ref).abs().max().item() / scale if same_shape \
            else float("inf")
        ok = err <= 1e-10
        print("%s %s  max rel diff %.2e" % ("ok  " if ok else "FAIL", label,
                                            err))
        return 0 if ok else 1

    for text in cases:
        prob, _ = parse_line(text)
        for layout in LAYOUTS:
            shapes = (prob.x_shape(), prob.w_shape(), prob.y_shape())
            x, w, gy = [torch.randn(s, generator=gen, dtype=torch.float64)
                        .to(device) for s in shapes]
            x, w, gy = in_layout((x, w, gy), prob.dims, layout)
            label = "%-40s %s" % (prob.short(), layout)
            # Autograd of the forward op.
            xa = x.detach().clone().requires_grad_(True)
            wa = w.detach().clone().requires_grad_(True)
            ya = direction_op("F", prob, xa, wa, None)()
            auto_dx, auto_dw = torch.autograd.grad(ya, (xa, wa), gy)
            # Autograd of the tap-sum reference.
            xr = x.detach().clone().requires_grad_(True)
            wr = w.detach().clone().requires_grad_(True)
            yr = reference_conv(xr, wr, prob)
            ref_dx, ref_dw = torch.autograd.grad(yr, (xr, wr), gy)
            got_y = direction_op("F", prob, x, w, None)()
            got_dx = direction_op("B", prob, x, w, gy)()[0]
            got_dw = direction_op("W", prob, x, w, gy)()[1]
            failures += compare(label + " F vs reference", got_y, yr)
            failures += compare(label + " B vs autograd ", got_dx, auto_dx)
            failures += compare(label + " B vs reference", got_dx, ref_dx)
            failures += compare(label + " W vs autograd ", got_dw, auto_dw)
            failures += compare(label + " W vs reference", got_dw, ref_dw)
    parser_cases = [
        ("./bin/MIOpenDriver convbfp16 --batchsize 8 --spatial_dim 2 "
         "--in_channels 16 --in_h 9 --in_w 10 --in_d 1 --out_channels 32 "
         "--fil_h 3 --fil_w 3 --fil_d 1 --pad_h 1 --pad_w 1 --pad_d 0 "
         "--conv_stride_h 2 --conv_stride_w 2 --conv_stride_d 0 "
         "--dilation_h 1 --dilation_w 1 --dilation_d 1 --group_count 16 "
         "--mode conv --in_layout NHWC --forw 6",
         (Problem(2, 8, 16, 32, (9, 10), (3, 3), (1, 1), (2, 2), (1, 1), 16,
                  "bf16"), ["B", "W"])),
        ("convfp16 -n 4 -c 8 -H 5 -W 5 -k 8 -y 1 -x 1 -F 1",
         (Problem(2, 4, 8, 8, (5, 5), (1, 1), (0, 0), (1, 1), (1, 1), 1,
                  "fp16"), ["F"])),
    ]
    for text, expected in parser_cases:
        got = parse_line(text)
        ok = got[0] == expected[0] and got[1] == expected[1]
        print("%s parse %s -> %s %s" % ("ok  " if ok else "FAIL",
                                         text.split()[-1], got[0].short(),
                                         "".join(got[1])))
        failures += 0 if ok else 1
    for bad in ("conv --mode trans -n 1", "conv -n 1 -c 3 -k 2 -H 2 -W 2 "
                "-y 3 -x 3", "conv -n 1 --bogus 2", "conv -n"):
        try:
            parse_line(bad)
            print("FAIL parse accepted %r" % bad)
            failures += 1
        except LineError as e:
            print("ok   parse rejects %r: %s" % (bad, e))
    return failures


# ---------------------------------------------------------------------------


def build_parser():
    ap = argparse.ArgumentParser(
        description="Time MIOpenDriver convolution layers through PyTorch's "
        "cuDNN path (benchmark mode, TF32 off). Each (layer, direction, "
        "layout) times only its convolution op: conv2d/conv3d for F, "
        "aten.convolution_backward with output_mask [1,0,0] for B and "
        "[0,1,0] for W. Prints Markdown; --json writes the results for "
        "compare_peers.py.",
        epilog="Duplicate (problem, direction) pairs of a file are timed "
        "once, at their first line. The first call of each layer is cuDNN's "
        "find under benchmark mode; its wall time is the first-call column.")
    ap.add_argument("files", metavar="FILE", nargs="*",
                    help="MIOpenDriver problem list(s)")
    ap.add_argument("--layout", choices=["NCHW", "NHWC", "both"],
                    default="both",
                    help="tensor memory format; NHWC is channels_last "
                    "(channels_last_3d for 3-D) for input, weight and "
                    "gradient (default: both)")
    ap.add_argument("--repeats", type=int, default=10, metavar="N",
                    help="timed calls per layer; the median is reported "
                    "(default: 10)")
    ap.add_argument("--warmup", type=int, default=3, metavar="N",
                    help="untimed calls after the first call (default: 3)")
    ap.add_argument("--max-layers", type=int, default=None, metavar="N",
                    help="time at most the first N (problem, direction) "
                    "pairs of each file")
    ap.add_argument("--max-seconds", type=float, default=None, metavar="S",
                    help="start no new layer after S seconds of wall time")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="default: cuda (cpu is for checking the script)")
    ap.add_argument("--type", choices=sorted(TYPES), default=None,
                    help="data type for every line instead of the line's own")
    ap.add_argument("--no-benchmark", action="store_true",
                    help="cudnn.benchmark = False: time the algorithm "
                    "cuDNN's heuristic picks, as a job without benchmark "
                    "mode gets it (the first call is then no find)")
    ap.add_argument("--json", metavar="PATH", default=None,
                    help="write the results as a JSON list")
    ap.add_argument("--seed", type=int, default=0,
                    help="random seed of the input tensors (default: 0)")
    ap.add_argument("--self-check", action="store_true",
                    help="check the B and W ops against autograd in float64 "
                    "on small problems (and the line parser), then exit; "
                    "nonzero on a mismatch")
    return ap


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("error: CUDA is not available to this torch %s (use "
                 "--device cpu to check the script)" % torch.__version__)
    device = torch.device(args.device)
    settings = apply_settings(benchmark=not args.no_benchmark)
    if args.self_check:
        failures = self_check(device)
        print("self-check: %d failure(s)" % failures)
        return 1 if failures else 0
    if not args.files:
        build_parser().error("no FILE given")
    if args.repeats < 1 or args.warmup < 0:
        build_parser().error("--repeats must be >= 1 and --warmup >= 0")
    torch.manual_seed(args.seed)
    layouts = list(LAYOUTS) if args.layout == "both" else [args.layout]

    work = []  # (file, line_no, line, problem, direction)
    for path in args.files:
        for line_no, line, prob, d in read_layers(path, args.type,
                                                  args.max_layers):
            work.append((path, line_no, line, prob, d))
    total = len(work) * len(layouts)
    cudnn_v = cudnn_version(device)
    timer = Timer(device)
    results = []
    note = ""
    started = time.perf_counter()
    done = 0
    for path, line_no, line, prob, direction in work:
        if args.max_seconds is not None and \
                time.perf_counter() - started > args.max_seconds:
            note = ("Stopped by --max-seconds %g: %d of %d layers not started."
                    % (args.max_seconds, total - done, total))
            warn(note)
            break
        dtype = TYPES[prob.type]
        base = {
            "list": os.path.basename(path), "line_no": line_no, "line": line,
            "direction": direction, "type": prob.type, "layout": None,
            "group": prob.group_kind(), "n": prob.n, "c": prob.c,
            "k": prob.k, "groups": prob.groups, "in": list(prob.in_),
            "filter": list(prob.fil), "torch_ms": None,
            "first_call_ms": None, "torch_version": torch.__version__,
            "cudnn_version": cudnn_v,
        }
        tensors, make_error = None, None
        try:
            tensors = make_tensors(direction, prob, dtype, device)
        except Exception as e:  # recorded per layer
            make_error = "making tensors: " + short_error(e)
            release_memory(device, force=True)
        for layout in layouts:
            done += 1
            r = dict(base, layout=layout)
            if make_error:
                r["error"] = make_error
            else:
                try:
                    x, w, gy = in_layout(tensors, prob.dims, layout)
                    op = direction_op(direction, prob, x, w, gy)
                    r["torch_ms"], r["first_call_ms"] = time_op(
                        op, timer, args.warmup, args.repeats)
                except Exception as e:  # recorded per layer
                    r["error"] = short_error(e)
                    release_memory(device, force=True)
                finally:
                    op = x = w = gy = None
            if "error" in r:
                status = "warning: failed, " + r["error"]
            else:
                status = "%.4f ms (first call %.1f ms)" % (
                    r["torch_ms"], r["first_call_ms"])
            sys.stderr.write("[%d/%d] %s:%d %s %s %s %s: %s\n" % (
                done, total, r["list"], line_no, direction, prob.type, layout,
                prob.short(), status))
            sys.stderr.flush()
            r["_short"] = prob.short()
            results.append(r)
        tensors = None
        release_memory(device)

    header = [
        "torch %s, cuDNN %s, device %s; %s." % (
            torch.__version__, cudnn_v if cudnn_v is not None else "-",
            device_name(device), settings),
        "Median of %d single calls (%s) after the first call and %d "
        "warm-up calls; first call = wall time of the first call, cuDNN's "
        "find." % (args.repeats, "CUDA events" if device.type == "cuda"
                   else "perf_counter", args.warmup),
    ]
    print_report(results, header, note)
    if args.json:
        rows = [{k: v for k, v in r.items() if not k.startswith("_")}
                for r in results]
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
            fh.write("\n")
        sys.stderr.write("wrote %d results to %s\n" % (len(rows), args.json))
    return 0


if __name__ == "__main__":
    sys.exit(main())
