"""convtune from Python: ask the node's convtuned for tuned convolutions, and
run them on torch tensors (convtune.torch, convtune.nn).

    import convtune
    r = convtune.find("conv -n 32 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1 -F 1")
    print(r.results[0].solver_name, r.results[0].time_ms)
"""

from __future__ import annotations

try:
    from convtune.client import (Client, ConvtuneError, FindResult,
                                 PerfResult, Solution, Solutions, Status,
                                 default_client, default_socket)
except ImportError as _missing:  # no grpcio: convtune.torch still works
    _why = str(_missing)

    def default_client():
        raise ImportError(f"convtune's gRPC client needs grpcio and protobuf: {_why}")
from convtune._problem import Problem, from_driver_line, from_tensors, from_torch

__version__ = "@CONVTUNE_VERSION@"


def problem(**kwargs) -> Problem:
    """A Problem from keyword arguments (see Problem)."""
    return Problem(**kwargs)


def find(problem, **kwargs) -> FindResult:
    return default_client().find(problem, **kwargs)


def solutions(problem, **kwargs) -> Solutions:
    return default_client().solutions(problem, **kwargs)


def immediate(problem, **kwargs) -> Solution:
    return default_client().immediate(problem, **kwargs)


def workspace_size(problem, solution_id=None) -> int:
    return default_client().workspace_size(problem, solution_id)


def compile(problem, solution_id: int) -> int:
    return default_client().compile(problem, solution_id)


def status() -> Status:
    return default_client().status()
