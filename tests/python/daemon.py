"""A real convtuned for the Python tests: a child process on a temporary
socket and database, stopped with SIGTERM."""

import os
import shutil
import signal
import subprocess
import tempfile
import time

from convtune import _capi


class Daemon:
    def __init__(self, *extra_args, db_dir=None, backend="cpu"):
        self.backend = backend
        self.dir = tempfile.mkdtemp(prefix="convtune-py-")
        self.socket = os.path.join(self.dir, "d.sock")
        self.db = db_dir or os.path.join(self.dir, "db")
        self.extra = list(extra_args)
        self.proc = None

    def start(self):
        binary = os.environ["CONVTUNED"]
        self.log = open(os.path.join(self.dir, "log"), "ab")
        self.proc = subprocess.Popen(
            [binary, "--socket", self.socket, "--db", self.db, "--backend",
             self.backend, "--log-rpcs", "off"] + self.extra,
            stdout=self.log, stderr=self.log)
        # Serving once it answers through the C API (no gRPC of Python's).
        deadline = time.monotonic() + 60
        while True:
            try:
                self.device_key = _capi.CApi(self.socket).device_key()
                break
            except _capi.CApiError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("convtuned did not start:\n" + self.read_log())
                time.sleep(0.05)
        return self

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=20)
        self.proc = None
        if getattr(self, "log", None) is not None:
            self.log.close()
            self.log = None

    def pause(self, timeout=5.0):
        """SIGSTOP, then waits until every thread has stopped: kill()
        returns before threads running on other cores do."""
        self.proc.send_signal(signal.SIGSTOP)
        task = "/proc/%d/task" % self.proc.pid
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = []
            for tid in os.listdir(task):
                try:
                    with open(os.path.join(task, tid, "stat")) as f:
                        states.append(f.read().rsplit(")", 1)[1].split()[0])
                except (OSError, IndexError):
                    pass
            if states and all(s in ("T", "t") for s in states):
                return
            time.sleep(0.001)
        raise RuntimeError("convtuned did not stop within %.1f s" % timeout)

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)

    def read_log(self):
        with open(os.path.join(self.dir, "log"), errors="replace") as f:
            return f.read()

    def remove(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
