"""Convolution problems: from keyword arguments, MIOpenDriver lines, or a torch
conv module and its input. Validation is the daemon's: it names the bad field."""

import dataclasses
import shlex
from typing import List, Optional, Sequence, Tuple

DIRECTIONS = ("F", "B", "W")
TYPES = ("fp32", "fp16", "bf16")
LAYOUTS = ("NCHW", "NHWC")


@dataclasses.dataclass(frozen=True)
class Problem:
    """One convolution. Sizes are logical (N, C, (D,) H, W) whatever the
    layout; `filter` is the spatial filter size; `direction` is F (forward),
    B (backward data) or W (backward weights)."""

    n: int
    c: int
    k: int
    in_size: Tuple[int, ...]  # (H, W) or (D, H, W)
    filter: Tuple[int, ...]
    pad: Tuple[int, ...] = ()
    stride: Tuple[int, ...] = ()
    dilation: Tuple[int, ...] = ()
    groups: int = 1
    layout: str = "NCHW"
    dtype: str = "fp32"
    direction: str = "F"

    def __post_init__(self):
        dims = len(self.in_size)
        for name, default in (("filter", None), ("pad", 0), ("stride", 1),
                              ("dilation", 1)):
            value = getattr(self, name)
            if isinstance(value, int):  # one size for every spatial axis
                object.__setattr__(self, name, (value,) * dims)
            elif not value and default is not None:
                object.__setattr__(self, name, (default,) * dims)
        for name in ("in_size", "filter", "pad", "stride", "dilation"):
            value = tuple(int(v) for v in getattr(self, name))
            object.__setattr__(self, name, value)
            if len(value) != dims:
                raise ValueError(
                    f"{name}: expected {dims} values (as in_size), got {len(value)}")
        if dims not in (2, 3):
            raise ValueError(f"in_size: expected 2 or 3 spatial sizes, got {dims}")
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout: expected NCHW or NHWC, got {self.layout[:40]!r}")
        if self.dtype not in TYPES:
            raise ValueError(f"dtype: expected fp32, fp16 or bf16, got {self.dtype[:40]!r}")
        if self.direction not in DIRECTIONS:
            raise ValueError(f"direction: expected F, B or W, got {self.direction[:40]!r}")

    @property
    def spatial_dims(self) -> int:
        return len(self.in_size)

    def out_size(self) -> Tuple[int, ...]:
        return tuple(
            (i + 2 * p - d * (f - 1) - 1) // s + 1
            for i, f, p, s, d in zip(self.in_size, self.filter, self.pad,
                                     self.stride, self.dilation))

    def with_direction(self, direction: str) -> "Problem":
        return dataclasses.replace(self, direction=direction)

    def key(self) -> tuple:
        return dataclasses.astuple(self)

    def to_proto(self):
        from convtune.v1 import problem_pb2 as pb
        return pb.ConvProblem(
            spatial_dims=self.spatial_dims, n=self.n, c=self.c, k=self.k,
            in_size=self.in_size, filter_size=self.filter, pad=self.pad,
            stride=self.stride, dilation=self.dilation, groups=self.groups,
            layout=pb.Layout.Value(self.layout),
            data_type=pb.DataType.Value(self.dtype.upper()),
            direction={"F": pb.FORWARD, "B": pb.BACKWARD_DATA,
                       "W": pb.BACKWARD_WEIGHTS}[self.direction])


# MIOpenDriver's flags: long name -> (field, axis); short forms below.
_LONG = {
    "batchsize": ("n", None), "in_channels": ("c", None),
    "out_channels": ("k", None), "group_count": ("groups", None),
    "spatial_dim": ("spatial_dim", None), "forw": ("forw", None),
    "mode": ("mode", None), "in_layout": ("layout", None),
    "out_layout": ("layout", None), "fil_layout": ("layout", None),
}
for _axis, _d in enumerate("dhw"):
    _LONG.update({f"in_{_d}": ("in", _axis), f"fil_{_d}": ("fil", _axis),
                  f"pad_{_d}": ("pad", _axis),
                  f"conv_stride_{_d}": ("stride", _axis),
                  f"dilation_{_d}": ("dilation", _axis)})
_IGNORED = {"pad_mode", "trans_output_pad_d", "trans_output_pad_h",
            "trans_output_pad_w", "time", "verify", "iter", "search",
            "printconv", "pad_val", "bias", "wall", "solution", "in_data",
            "weights", "dout_data", "in_bias", "dump_output",
            "gpubuffer_check", "tensor_vect", "vector_length",
            "dilation_d_check"}
_SHORT = {
    "n": "batchsize", "c": "in_channels", "k": "out_channels", "H": "in_h",
    "W": "in_w", "!": "in_d", "y": "fil_h", "x": "fil_w", "@": "fil_d",
    "p": "pad_h", "q": "pad_w", "$": "pad_d", "u": "conv_stride_h",
    "v": "conv_stride_w", "#": "conv_stride_d", "l": "dilation_h",
    "j": "dilation_w", "^": "dilation_d", "g": "group_count",
    "_": "spatial_dim", "F": "forw", "m": "mode", "I": "in_layout",
    "O": "out_layout", "f": "fil_layout", "z": "pad_mode", "t": "time",
    "V": "verify", "i": "iter", "s": "search", "P": "printconv",
    "r": "pad_val", "b": "bias", "w": "wall", "S": "solution",
    "d": "in_data", "e": "weights", "D": "dout_data", "a": "in_bias",
    "o": "dump_output", "C": "gpubuffer_check", "Z": "tensor_vect",
    "L": "vector_length", "Y": "pad_d",
}
_COMMANDS = {"conv": "fp32", "convfp16": "fp16", "convbfp16": "bf16"}


def from_driver_line(line: str) -> List[Problem]:
    """The problems of one MIOpenDriver line, one per direction that -F
    selects (0: all three). ValueError naming the flag otherwise."""
    args = shlex.split(line)
    if args and args[0].endswith("MIOpenDriver"):
        args = args[1:]
    if not args or args[0] not in _COMMANDS:
        got = args[0][:40] if args else "nothing"
        raise ValueError(f"command: expected conv, convfp16 or convbfp16, got {got!r}")
    dtype = _COMMANDS[args[0]]
    # MIOpenDriver's defaults for what a line leaves out, as the daemon's
    # parser has them.
    v = {"n": 1, "c": 1, "k": 1, "groups": 1, "spatial_dim": 2, "forw": 0,
         "layout": "NCHW", "in": [1, 1, 1], "fil": [1, 1, 1], "pad": [0, 0, 0],
         "stride": [1, 1, 1], "dilation": [1, 1, 1]}
    i = 1
    while i < len(args):
        arg = args[i]
        value = None
        if arg.startswith("--"):
            name, eq, rest = arg[2:].partition("=")
            if eq:
                value = rest
        elif len(arg) == 2 and arg[0] == "-" and arg[1] in _SHORT:
            name = _SHORT[arg[1]]
        else:
            raise ValueError(f"{arg[:40]}: unknown flag")
        if name not in _LONG and name not in _IGNORED:
            raise ValueError(f"{arg[:40]}: unknown flag")
        if value is None:
            if i + 1 >= len(args):
                raise ValueError(f"{arg[:40]}: missing value")
            i += 1
            value = args[i]
        i += 1
        if name in _IGNORED:
            continue
        field, axis = _LONG[name]
        if field == "mode":
            if value != "conv":
                raise ValueError(f"{arg}: mode {value[:40]!r} is not supported (only conv)")
            continue
        if field == "layout":
            if value not in ("NCHW", "NCDHW", "NHWC", "NDHWC"):
                raise ValueError(f"{arg}: unknown layout {value[:40]!r}")
            v["layout"] = "NCHW" if value in ("NCHW", "NCDHW") else "NHWC"
            continue
        try:
            number = int(value)
        except ValueError:
            raise ValueError(f"{arg}: {value[:40]!r} is not an integer") from None
        if axis is None:
            v[field] = number
        else:
            v[field][axis] = number
    if v["spatial_dim"] not in (2, 3):
        raise ValueError(f"--spatial_dim: must be 2 or 3, got {v['spatial_dim']}")
    if not 0 <= v["forw"] <= 7:
        raise ValueError(f"-F: must be 0 to 7, got {v['forw']}")
    first = 3 - v["spatial_dim"]
    spatial = {k: tuple(v[k][first:]) for k in ("in", "fil", "pad", "stride", "dilation")}
    out = []
    for bit, direction in enumerate(DIRECTIONS):
        if v["forw"] and not v["forw"] & (1 << bit):
            continue
        out.append(Problem(n=v["n"], c=v["c"], k=v["k"], in_size=spatial["in"],
                           filter=spatial["fil"], pad=spatial["pad"],
                           stride=spatial["stride"], dilation=spatial["dilation"],
                           groups=v["groups"], layout=v["layout"], dtype=dtype,
                           direction=direction))
    return out


def _pair(value, dims: int) -> Tuple[int, ...]:
    if isinstance(value, int):
        return (value,) * dims
    return tuple(int(x) for x in value)


_TORCH_TYPES = {"torch.float32": "fp32", "torch.float16": "fp16",
                "torch.bfloat16": "bf16"}


def from_torch(module, x, direction: str = "F") -> Problem:
    """The problem of torch conv `module` (Conv2d / Conv3d, zero padding) on
    input `x`. NHWC when x is channels_last (or channels_last_3d)."""
    return from_tensors(x, module.weight, module.stride, module.padding,
                        module.dilation, module.groups, direction)


def from_tensors(x, weight, stride=1, padding=0, dilation=1, groups=1,
                 direction: str = "F", layout: Optional[str] = None) -> Problem:
    """The problem of conv(x, weight) with those arguments, as torch's
    functional convolution takes them (padding as numbers). `layout` None:
    NHWC when x is channels_last and not also contiguous."""
    import torch
    dims = x.dim() - 2
    if dims not in (2, 3):
        raise ValueError(f"x: expected a 4-D or 5-D tensor, got {x.dim()}-D")
    if isinstance(padding, str):
        raise ValueError(f"padding: give numbers, got {padding[:40]!r}")
    fmt = torch.channels_last if dims == 2 else torch.channels_last_3d
    if layout is None:
        nhwc = x.is_contiguous(memory_format=fmt) and not x.is_contiguous()
        layout = "NHWC" if nhwc else "NCHW"
    dtype = _TORCH_TYPES.get(str(x.dtype))
    if dtype is None:
        raise ValueError(f"x: dtype {x.dtype} is not float32, float16 or bfloat16")
    return Problem(n=x.shape[0], c=x.shape[1], k=weight.shape[0],
                   in_size=tuple(x.shape[2:]), filter=tuple(weight.shape[2:]),
                   pad=_pair(padding, dims), stride=_pair(stride, dims),
                   dilation=_pair(dilation, dims), groups=int(groups),
                   layout=layout, dtype=dtype,
                   direction=direction)
