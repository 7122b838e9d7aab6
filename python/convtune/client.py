"""A gRPC client of convtuned over its Unix socket, with a per-process cache of
answers: one RPC per new problem, then none."""

import dataclasses
import os
import threading
from typing import Dict, List, Optional, Tuple, Union

import grpc

from convtune._problem import Problem, from_driver_line
from convtune.v1 import service_pb2 as spb
from convtune.v1 import service_pb2_grpc as sgrpc

FIND_MODES = {"default": 0, "normal": 1, "fast": 2, "hybrid": 3,
              "dynamic_hybrid": 5, "trust_verify": 6, "trust_verify_full": 7}
_PROVENANCE = {0: "unspecified", 1: "measured", 2: "learned", 3: "estimated"}


class ConvtuneError(RuntimeError):
    """A failed call: `code` is the grpc.StatusCode, `details` the daemon's
    message (which names the bad field)."""

    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details


@dataclasses.dataclass(frozen=True)
class PerfResult:
    solver_id: int
    solver_name: str
    algorithm: str
    time_ms: float
    workspace_bytes: int
    library: str


@dataclasses.dataclass(frozen=True)
class FindResult:
    results: Tuple[PerfResult, ...]  # fastest first
    from_db: bool
    source: str  # "db", "system", "tuned", "fallback"
    device_key: str
    problem_key: str
    not_stored: str  # why a tuned answer was not stored; "" when it was


@dataclasses.dataclass(frozen=True)
class Solution:
    solution_id: int
    solver_name: str
    algorithm: int
    time_ms: float
    workspace_bytes: int
    measured: bool
    provenance: str  # measured, learned or estimated
    confidence: float


@dataclasses.dataclass(frozen=True)
class Solutions:
    solutions: Tuple[Solution, ...]  # best first
    source: str
    device_key: str
    problem_key: str
    tuning_queued: bool


@dataclasses.dataclass(frozen=True)
class Status:
    version: str
    device_key: str
    tenant: str
    role: str
    counters: Dict[str, int]
    db_writable: bool


def default_socket() -> str:
    """$CONVTUNE_SOCKET, else $XDG_RUNTIME_DIR/convtune/convtuned.sock, else
    /tmp/convtune-$UID/convtuned.sock: the C API's rule."""
    env = os.environ.get("CONVTUNE_SOCKET")
    if env:
        return env
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return os.path.join(runtime, "convtune", "convtuned.sock")
    return f"/tmp/convtune-{os.getuid()}/convtuned.sock"


def _target(address: str) -> str:
    if address.startswith("unix:") or (":" in address and not address.startswith("/")):
        return address
    return "unix:" + address


ProblemLike = Union[Problem, str]


def _problem(p: ProblemLike, direction: Optional[str] = None) -> Problem:
    if isinstance(p, str):
        problems = from_driver_line(p)
        if direction is not None:
            problems = [q for q in problems if q.direction == direction] or [
                problems[0].with_direction(direction)]
        if len(problems) != 1:
            raise ValueError("the line names several directions: pass -F 1, 2 or 4")
        return problems[0]
    return p if direction is None else p.with_direction(direction)


class Client:
    """One channel to convtuned. Thread-safe. Answers of find, solutions and
    workspace_size are cached per problem for the process's life (`cache`
    False: always ask)."""

    def __init__(self, address: Optional[str] = None, timeout_s: float = 600,
                 cache: bool = True):
        self.address = address or default_socket()
        self.timeout_s = timeout_s
        # A local daemon that restarts is back within a second: reconnect
        # soon, not after gRPC's growing default backoff.
        self._channel = grpc.insecure_channel(
            _target(self.address),
            options=[("grpc.initial_reconnect_backoff_ms", 100),
                     ("grpc.min_reconnect_backoff_ms", 100),
                     ("grpc.max_reconnect_backoff_ms", 1000)])
        self._stub = sgrpc.ConvTuneStub(self._channel)
        self._cache_on = cache
        self._cache: Dict[tuple, object] = {}
        self._lock = threading.Lock()
        self.rpcs = 0  # RPCs made, for callers that check the cache works

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method, request, timeout_s):
        with self._lock:
            self.rpcs += 1
        try:
            return method(request, timeout=timeout_s or self.timeout_s)
        except grpc.RpcError as e:
            raise ConvtuneError(e.code(), e.details() or "") from None

    def _cached(self, key, fetch):
        if self._cache_on:
            with self._lock:
                if key in self._cache:
                    return self._cache[key]
        value = fetch()
        if self._cache_on:
            with self._lock:
                self._cache[key] = value
        return value

    def find(self, problem: ProblemLike, mode: str = "default",
             workspace_limit: Optional[int] = None,
             timeout_s: Optional[float] = None) -> FindResult:
        """Times the applicable solvers (or answers from the FindDb, as the
        mode says): results fastest first."""
        p = _problem(problem)
        if mode not in FIND_MODES:
            raise ValueError(f"mode: expected one of {', '.join(FIND_MODES)}, got {mode[:40]!r}")

        def fetch():
            req = spb.FindRequest(problem=p.to_proto(), mode=FIND_MODES[mode])
            if workspace_limit is not None:
                req.workspace_limit = workspace_limit
            r = self._call(self._stub.Find, req, timeout_s)
            return FindResult(
                results=tuple(PerfResult(x.solver_id, x.solver_name, x.algorithm,
                                         x.time_ms, x.workspace_bytes, x.library)
                              for x in r.results),
                from_db=r.from_db, source=r.source, device_key=r.device_key,
                problem_key=r.problem_key, not_stored=r.not_stored)

        key = ("find", p.key(), mode, workspace_limit)
        answer = self._cached(key, fetch)
        # An estimate (FAST's fallback) is asked again: a find may follow.
        if self._cache_on and answer.source == "fallback":
            with self._lock:
                self._cache.pop(key, None)
        return answer

    def solutions(self, problem: ProblemLike, max_count: int = 8,
                  workspace_limit: Optional[int] = None,
                  background_tune: Optional[bool] = None,
                  timeout_s: Optional[float] = None) -> Solutions:
        """Immediate mode: solutions best first, never timed now. A miss may
        queue a background find (the daemon's default, or as asked)."""
        p = _problem(problem)

        def fetch():
            req = spb.GetSolutionsRequest(problem=p.to_proto(), max_count=max_count)
            if workspace_limit is not None:
                req.workspace_limit = workspace_limit
            if background_tune is not None:
                req.background_tune = background_tune
            r = self._call(self._stub.GetSolutions, req, timeout_s)
            return Solutions(
                solutions=tuple(Solution(s.solution_id, s.solver_name, s.algorithm,
                                         s.time_ms, s.workspace_bytes, s.measured,
                                         _PROVENANCE.get(s.provenance, "unspecified"),
                                         s.confidence)
                                for s in r.solutions),
                source=r.source, device_key=r.device_key,
                problem_key=r.problem_key, tuning_queued=r.tuning_queued)

        # A measured answer is final; an estimate is asked again next time,
        # so that a background find's result is picked up.
        key = ("solutions", p.key(), max_count, workspace_limit)
        answer = self._cached(key, fetch)
        if self._cache_on and (not answer.solutions or
                               not answer.solutions[0].measured):
            with self._lock:
                self._cache.pop(key, None)
        return answer

    def immediate(self, problem: ProblemLike, **kwargs) -> Solution:
        """The best immediate-mode solution."""
        answer = self.solutions(problem, max_count=1, **kwargs)
        if not answer.solutions:
            raise ConvtuneError(grpc.StatusCode.NOT_FOUND,
                                f"no solution for {answer.problem_key}")
        return answer.solutions[0]

    def workspace_size(self, problem: ProblemLike,
                       solution_id: Optional[int] = None) -> int:
        """The workspace of one solution, or the largest of any applicable
        solver."""
        p = _problem(problem)

        def fetch():
            if solution_id is None:
                r = self._call(self._stub.GetWorkspaceSize,
                               spb.WorkspaceSizeRequest(problem=p.to_proto()), None)
            else:
                r = self._call(self._stub.GetSolutionWorkspaceSize,
                               spb.SolutionRequest(problem=p.to_proto(),
                                                   solution_id=solution_id), None)
            return r.workspace_bytes

        return self._cached(("ws", p.key(), solution_id), fetch)

    def compile(self, problem: ProblemLike, solution_id: int) -> int:
        """Compiles the solution's kernels on the daemon; the compiler runs it
        made (0 when all were cached)."""
        p = _problem(problem)
        r = self._call(self._stub.CompileSolution,
                       spb.SolutionRequest(problem=p.to_proto(),
                                           solution_id=solution_id), None)
        return r.compiled

    def status(self) -> Status:
        r = self._call(self._stub.GetStatus, spb.GetStatusRequest(), 10)
        return Status(version=r.version, device_key=r.device_key,
                      tenant=r.tenant, role=r.role, counters=dict(r.counters),
                      db_writable=r.db_writable)


_default: Optional[Client] = None
_default_lock = threading.Lock()


def default_client() -> Client:
    """The process's client of the default socket."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Client()
        return _default
